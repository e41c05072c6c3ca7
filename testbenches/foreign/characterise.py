"""Characterise a design behind a port map: its outputs on a probe suite, and the unit spec
that explains them (``mxsim fit --rtl``).

:func:`observe` runs a vector set through the design, as the GPU runners run one through a
tensor core, and returns it with the design's results as ``d``: nothing is checked against a
model, because the model is what is being looked for. :func:`probe_design` does that on the
probe suite of the design's formats (:func:`mxsim.probe.probe_suite`), and
:func:`characterise` then fits a spec (:func:`mxsim.probe.fit.fit`): either the simplest spec that
reproduces every output, or "cannot be explained" with the closest spec, the outputs it misses
and their ulps. The observed set is the costly part (a simulation of the design) and stands
on its own, so ``characterise`` saves it before the fit starts.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from mxsim.errors import MxsimError
from mxsim.microarch import MicroArch
from mxsim.spec import UnitSpec
from mxsim.vectors import VectorSet

from ..sim.backend import Backend, Stimulus

__all__ = ["carrier_spec", "observe", "fp32_results", "probe_design", "characterise",
           "DEFAULT_NAN"]


def carrier_spec(pm, vs: VectorSet) -> UnitSpec:
    """A spec that only carries the shape of ``vs``'s instructions to the design (formats,
    scales, k): the backends pack inputs by it. Its numerics (exact) are never compared."""
    return UnitSpec(name=f"{pm.design.top} (inputs only)", a_format=vs.a_format,
                    b_format=vs.b_format, scale_format=vs.scale_format, block=vs.block,
                    k=pm.k, frac_bits=None, acc_format="fp32", acc_rounding="rne")


def observe(pm, vs: VectorSet, out_dir: str | Path, *, bulk: bool = True,
            backend: Backend | None = None) -> VectorSet:
    """``vs`` with the design's result of every dot product as ``d`` (FP32 codes of the
    decoded results), run at full rate (no gaps, no back-pressure). The bulk C++ harness
    runs it unless ``bulk=False`` (the cocotb testbench) or ``backend`` is given."""
    from .backend import ForeignBackend
    from .bulk import ForeignBulkBackend

    spec = carrier_spec(pm, vs)
    if not backend:
        backend = ForeignBulkBackend(pm) if bulk else ForeignBackend(pm)
    backend.build(spec, MicroArch(lanes=spec.k, stages=1), Path(out_dir))
    run = backend.run(vs, Stimulus.random(0), name="observe")
    got = fp32_results(pm, run.results) if getattr(run, "results", None) is not None \
        else run.outputs
    if len(got) != vs.num_dots:
        raise MxsimError(f"{pm.path}: the design gave {len(got)} of {vs.num_dots} results "
                         f"(check the map's handshake and latency with mxsim verify --rtl)")
    shape = (*vs.batch_shape, vs.m, vs.n)
    return vs.with_result(np.asarray(got, np.uint32).reshape(shape),
                          producer=f"{pm.design.top} (RTL, {backend.mode})",
                          rtl_map=str(pm.path))


#: The NaN a fitted spec gives by default (``nan_code`` null): a design's NaN flag carries no
#: payload, so its NaN results are read as this one.
DEFAULT_NAN = 0x7FFFFFFF


def fp32_results(pm, results) -> np.ndarray:
    """The FP32 code of every decoded result, exactly: FP32/FP16/BF16 results as FP32 codes;
    fixed-point results (whose NaN flag reads as :data:`DEFAULT_NAN`) only when FP32 holds
    each value exactly, else a one-line MxsimError (a fit compares FP32 bits)."""
    codes = np.asarray(results.fp32_codes(), np.uint32).copy()
    if results.encoding != "fixed":
        return codes
    nan = np.asarray(results.nan, bool)
    mant = np.asarray(results.mant, np.int64)
    exp = np.clip(np.asarray(results.exp, np.int64), -2000, 2000)
    back = codes.view(np.float32).astype(np.float64)
    with np.errstate(over="ignore"):
        exact = (np.abs(mant) < 1 << 53) & (back == np.ldexp(mant.astype(np.float64), exp))
    bad = np.nonzero(~exact & ~nan)[0]
    if len(bad):
        i = int(bad[0])
        raise MxsimError(f"{pm.path}: {len(bad)} of the design's results are not FP32 values "
                         f"(first: {int(mant[i])}*2^{int(results.exp[i])}); fit --rtl fits "
                         f"results that FP32 holds exactly")
    codes[nan] = DEFAULT_NAN
    return codes


def probe_design(pm, a_format: str, b_format: str, out_dir: str | Path, *, seed: int = 0,
                 bulk: bool = True) -> VectorSet:
    """The probe suite of the design's formats run through it (:func:`observe`; a design
    that takes no C gets C = +0): the observed set a fit explains."""
    from mxsim.probe import MX_ELEMENTS, probe_suite

    from .backend import ForeignBackend
    from .bulk import ForeignBulkBackend

    backend = ForeignBulkBackend(pm) if bulk else ForeignBackend(pm)
    kinds = {fmt: kind for kind, fmt in MX_ELEMENTS.items()}
    if a_format != b_format or a_format not in kinds or pm.scales.format == "none":
        raise MxsimError(f"{pm.path}: fit --rtl probes MX units ({', '.join(kinds)} x the "
                         f"same, with block scales), not {a_format} x {b_format} with "
                         f"scales {pm.scales.format}")
    block = pm.scales.block if pm.scales.per == "block" else pm.k
    vs = probe_suite(kinds[a_format], k=pm.k, seed=seed, block=block,
                     scale_format=pm.scales.format)
    if not backend.takes_c:
        vs = vs.replace(c=np.zeros_like(vs.c))
    return observe(pm, vs, out_dir, backend=backend)


def characterise(pm, a_format: str, b_format: str, out_dir: str | Path, *, seed: int = 0,
                 bulk: bool = True, keep: str | Path | None = None, progress=None):
    """``(observed, fit)``: the observed set of :func:`probe_design` and the fit of its
    outputs. ``keep``: where to save the observed set, written before the fit starts, so the
    design's outputs outlast whatever the fit does."""
    from mxsim import vectors
    from mxsim.probe.fit import fit

    observed = probe_design(pm, a_format, b_format, out_dir, seed=seed, bulk=bulk)
    if keep is not None:
        vectors.save(observed, keep)
    return observed, fit(observed, k=pm.k, progress=progress)
