"""Every GPU path by name: what it runs, whether it can run here, and how.

``mxsim gpu info`` lists them; ``mxsim gpu run --path NAME`` and the collector use them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from mxsim.errors import UnitError
from mxsim.vectors import VectorSet

__all__ = ["Path", "PATHS", "get"]


@dataclass(frozen=True)
class Path:
    """A GPU path: its name, what it runs, and two callables."""
    name: str
    summary: str
    unavailable: Callable[[], str | None]
    runner: Callable[[VectorSet], VectorSet]
    preset: str | None = None        #: the preset expected to reproduce it, where one does

    def unavailable_reason(self) -> str | None:
        return self.unavailable()

    def run(self, vs: VectorSet) -> VectorSet:
        reason = self.unavailable()
        if reason is not None:
            raise UnitError(f"GPU path {self.name} is unavailable here: {reason}")
        return self.runner(vs)


def _cublas():
    from . import cublas
    return cublas


def _mma():
    from . import mma_sync
    return mma_sync


def _triton():
    from . import triton_runner
    return triton_runner


def _wgmma(vs: VectorSet) -> VectorSet:
    if vs.k != 32:
        raise UnitError(f"The wgmma path runs K = 32 sets only (one wgmma k-step per output "
                        f"through cuBLASLt), not K = {vs.k}")
    res = _cublas().scaled_mm(vs, fast_accum=True)
    return res.with_result(res.d, producer=res.producer, path="wgmma")


def _paths() -> list[Path]:
    paths = [
        Path("mma-sync", "PTX mma.sync.aligned.m16n8k32 FP8 (f32/f16 accumulate), chained "
                         "over K; emulated by the compiler on sm_90",
             lambda: _mma().unavailable_reason(), lambda vs: _mma().run(vs)),
        Path("wgmma", "cuBLASLt FP8 via torch._scaled_mm with K = 32: one wgmma k32 step per "
                      "output", lambda: _cublas().unavailable_reason(), _wgmma, "hopper-wgmma"),
        Path("cublas-fast", "torch._scaled_mm FP8, use_fast_accum=True, per-tensor/row-wise/"
                            "block-wise FP32 scales",
             lambda: _cublas().unavailable_reason(),
             lambda vs: _cublas().scaled_mm(vs, fast_accum=True), "hopper-cublas-fast"),
        Path("cublas", "torch._scaled_mm FP8, use_fast_accum=False (promoted accumulation)",
             lambda: _cublas().unavailable_reason(),
             lambda vs: _cublas().scaled_mm(vs, fast_accum=False)),
        Path("triton-dot", "Triton tl.dot on FP8, 64x64x32 tiles, accumulator chained over K",
             lambda: _triton().unavailable_reason(), lambda vs: _triton().run_dot(vs)),
        Path("triton-dot-scaled", "Triton tl.dot_scaled on MX operands (E8M0, blocks of 32); "
                                  "emulated on Hopper, native on Blackwell",
             lambda: _triton().unavailable_reason(), lambda vs: _triton().run_dot_scaled(vs)),
    ]
    try:
        from . import blackwell
    except ImportError:        # pragma: no cover - the module is part of the package
        return paths
    return paths + list(getattr(blackwell, "PATHS", []))


PATHS: dict[str, Path] = {p.name: p for p in _paths()}


def get(name: str) -> Path:
    try:
        return PATHS[name]
    except KeyError:
        raise UnitError(f"Unknown GPU path {name!r}; choose one of {', '.join(PATHS)} (see "
                        f"`mxsim gpu info`)") from None
