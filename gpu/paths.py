"""Every GPU path by name: the one registry of :class:`gpu.runner.Runner` objects.

``mxsim gpu info`` lists them in this order; ``mxsim gpu run --path NAME``, the collector and
the validation runs look them up with :func:`get`. Importing this module imports no GPU
library: each runner imports torch, cupy or triton when it runs.
"""

from __future__ import annotations

from mxsim.errors import UnitError
from mxsim.vectors import VectorSet

from .blackwell import RUNNER_KINDS, MmaSyncBlockScaled, ScaledMmMx, Tcgen05BlockScaled
from .hopper.cublas import Cublas16, ScaledMm, Wgmma
from .hopper.mma_sync import FLOAT_FORMATS, MmaSync, MmaSyncFloat
from .hopper.triton_dot import TritonDot, TritonDot16, TritonDotScaled
from .runner import Runner

__all__ = ["Runner", "PATHS", "get", "for_set"]

#: Every path, Hopper's first, then Blackwell's (which need sm_100a/sm_120a to run).
PATHS: dict[str, Runner] = {r.name: r for r in (
    MmaSync(), Wgmma(), ScaledMm(fast_accum=True), ScaledMm(fast_accum=False), TritonDot(),
    TritonDotScaled(), *(MmaSyncFloat(f) for f in FLOAT_FORMATS),
    *(TritonDot16(f) for f in FLOAT_FORMATS), *(Cublas16(f) for f in FLOAT_FORMATS),
    *(MmaSyncBlockScaled(k) for k in RUNNER_KINDS),
    *(Tcgen05BlockScaled(k) for k in RUNNER_KINDS), ScaledMmMx())}


def get(name: str) -> Runner:
    """The path called ``name``; a one-line UnitError naming the choices if there is none."""
    try:
        return PATHS[name]
    except KeyError:
        raise UnitError(f"Unknown GPU path {name!r}; choose one of {', '.join(PATHS)} (see "
                        f"`mxsim gpu info`)") from None


def for_set(vs: VectorSet, name: str | None = None) -> Runner:
    """The path ``name``, or the one the set names (a Blackwell probe set's ``gpu_path``); a
    one-line UnitError when there is neither, or when they differ."""
    named = vs.extra.get("gpu_path")
    if name is None and named is None:
        raise UnitError("Choose a GPU path with --path (see `mxsim gpu info`); this set names "
                        "none")
    if name is not None and named is not None and name != named:
        raise UnitError(f"This set was built for GPU path {named} ({vs.extra.get('ptx', '')}), "
                        f"not {name}; leave --path out")
    return get(name or named)
