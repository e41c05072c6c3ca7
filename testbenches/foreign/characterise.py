"""Characterise a design behind a port map: its outputs on a probe suite, and the unit spec
that explains them (``mxsim fit --rtl``).

:func:`observe` runs a vector set through the design, as the GPU runners run one through a
tensor core, and returns it with the design's results as ``d``: nothing is checked against a
model, because the model is what is being looked for. :func:`probe_design` does that on the
probe suite of the design's own terms (:func:`mxsim.probe.design.design_suite`: its element
formats, scale block, C in its format, the zero-sign and NaN-producing dots), in one *mode*:
the unit-spec fields that ``--set`` gives, which drive the map's ``[control]`` inputs (a
rounding-mode port, an accumulator-format port). :func:`characterise` then fits a spec
(:func:`mxsim.probe.fit.fit`) that runs the design in that same mode: the fields the map's
controls follow are pinned, and every candidate must be one the map accepts (its flags
modelled where it reads ``[status]``). The answer is either the simplest spec that reproduces
every output, or "cannot be explained" with the closest spec, the outputs it misses and their
ulps. The observed set is the costly part (a simulation of the design) and stands on its own,
so ``characterise`` saves it before the fit starts.

Results are fitted in the design's own encoding: FP32, BF16 or FP16 codes bit for bit; a
fixed-point result (mantissa and exponent) as the FP32 value it equals, compared as values
(``meta['compare'] = "value"``: +0 equals -0, a NaN flag equals any NaN), so the zero sign and
NaN code, which such a result does not carry, are not searched.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from mxsim.errors import MxsimError
from mxsim.microarch import MicroArch
from mxsim.spec import SpecError, UnitSpec, from_dict
from mxsim.vectors import VectorSet

from ..sim.backend import Backend, Run, Stimulus

__all__ = ["carrier_spec", "checked_spec", "observe", "observe_run", "fp32_results", "probe_design",
           "characterise", "inputs_of", "DEFAULT_NAN"]

#: Fields a mode cannot set: the formats come from --a-format/--b-format, k and the block from
#: the map.
_SHAPE = ("a_format", "b_format", "scale_format", "block", "k")


def _d_format(pm, fields: Mapping[str, Any]) -> str:
    """The result format of a mode: ``--set d_format``, else the first FP format the map's
    result (and C) may have, else FP32 (a fixed-point result)."""
    if "d_format" in fields:
        return str(fields["d_format"])
    res = pm.result.encodings or (pm.result.encoding,)
    acc = pm.accumulator.format.split("|") if pm.accumulator.format else None
    usable = [e for e in res if e != "fixed" and (acc is None or e in acc)]
    return usable[0] if usable else (acc[0] if acc else "fp32")


def carrier_spec(pm, a_format: str, b_format: str, fields: Mapping[str, Any] | None = None
                 ) -> UnitSpec:
    """The spec that carries one mode's instructions to the design: the formats, the map's k
    and block for them, the ``fields`` of ``--set`` (which drive the map's ``[control]``
    inputs), one exact rounding otherwise (the accumulator format is the result's unless
    set). The backends pack inputs by it; its numerics are never compared. MxsimError (one
    line) where the fields break a spec rule or the map cannot run the mode."""
    fields = dict(fields or {})
    for name in fields:
        if name in _SHAPE:
            raise MxsimError(f"--set {name}: fit --rtl takes the element formats from "
                             f"--a-format/--b-format and k and the block from the port map; "
                             f"set numerics and modes only (acc_rounding=rd, d_format=bf16)")
    k = pm.k_by_format.get(a_format, pm.k) if pm.k_by_format else pm.k
    sc = pm.scales
    scale_format = None if sc.format == "none" else sc.format
    block = None if scale_format is None else (k if sc.per == "instruction" else sc.block)
    d_format = _d_format(pm, fields)
    data = {"name": f"{pm.design.top} (inputs only)", "a_format": a_format,
            "b_format": b_format, "scale_format": scale_format, "block": block, "k": k,
            "frac_bits": None, "acc_format": d_format, "acc_rounding": "rne",
            "d_format": d_format, **fields}
    return checked_spec(pm, data)


def checked_spec(pm, data: Mapping[str, Any]) -> UnitSpec:
    """The spec ``data`` spells (fields from ``--set``: a bad one is one line), checked
    against the port map ``pm``."""
    try:
        spec = from_dict(dict(data), source="--set")
    except SpecError as exc:
        raise MxsimError(f"--set: {exc}") from None
    pm.check_spec(spec)
    return spec


def observe(pm, vs: VectorSet, out_dir: str | Path, *, bulk: bool = True,
            backend: Backend | None = None, spec: UnitSpec | None = None,
            seed: int = 0) -> VectorSet:
    """``vs`` with the design's result of every dot product as ``d`` (:func:`observe_run`,
    whose run is dropped)."""
    return observe_run(pm, vs, out_dir, bulk=bulk, backend=backend, spec=spec, seed=seed)[0]


def observe_run(pm, vs: VectorSet, out_dir: str | Path, *, bulk: bool = True,
                backend: Backend | None = None, spec: UnitSpec | None = None, seed: int = 0,
                why: str = "fit --rtl fits fixed-point results that FP32 holds exactly",
                ) -> tuple[VectorSet, Run]:
    """``(observed, run)``: ``vs`` with the design's result of every dot product as ``d``,
    run at full rate (no gaps, no back-pressure; ``seed`` seeds the registers' random initial
    values) in the mode of ``spec`` (default: :func:`carrier_spec` of the set's formats), and
    the simulator run (its cycles, seconds and timing mismatches; its value mismatches are
    against the carrier spec, meaningless). ``d`` is in the result's encoding: FP32/FP16/BF16
    codes as the design gave them, or a fixed-point result as the FP32 code of its value
    (:func:`fp32_results`, whose error ends with ``why``; ``meta['compare'] = "value"``). The
    bulk C++ harness runs it unless ``bulk=False`` (the cocotb testbench) or ``backend`` is
    given."""
    from mxsim import formats

    from .backend import ForeignBackend
    from .bulk import ForeignBulkBackend

    spec = spec or carrier_spec(pm, vs.a_format, vs.b_format)
    if not backend:
        # the carrier spec is not the design's structure: [probes] would not apply
        backend = ForeignBulkBackend(pm, probes=False) if bulk else ForeignBackend(
            pm, probes=False)
    backend.build(spec, MicroArch(lanes=spec.k, stages=1), Path(out_dir))
    run = backend.run(vs, Stimulus.random(seed), name="observe")
    results = getattr(run, "results", None)
    fixed = results is not None and results.encoding == "fixed"
    d_format = "fp32"
    if results is None:
        got = run.outputs
    elif fixed:
        got = fp32_results(pm, results, why=why)
    else:
        d_format = results.encoding
        got = np.asarray(results.codes).astype(formats.get(d_format).code_dtype)
    if len(got) != vs.num_dots:
        raise MxsimError(f"{pm.path}: the design gave {len(got)} of {vs.num_dots} results "
                         f"(check the map's handshake and latency with mxsim verify --rtl)")
    shape = (*vs.batch_shape, vs.m, vs.n)
    out = vs.with_result(np.asarray(got).reshape(shape), d_format=d_format,
                         producer=f"{pm.design.top} (RTL, {backend.mode})",
                         rtl_map=str(pm.path))
    # A set observed before (a fixed-point design's) may say its results compare as values.
    extra = {k: v for k, v in out.extra.items() if k != "compare"}
    return out.replace(extra={**extra, "compare": "value"} if fixed else extra), run


#: The NaN a fixed-point result's NaN flag reads as (its value is compared, not its code).
DEFAULT_NAN = 0x7FFFFFFF


def fp32_results(pm, results, *,
                 why: str = "fit --rtl fits fixed-point results that FP32 holds exactly",
                 ) -> np.ndarray:
    """The FP32 code of every decoded result, exactly: FP32/FP16/BF16 results as FP32 codes;
    fixed-point results (whose NaN flag reads as :data:`DEFAULT_NAN`) only when FP32 holds
    each value exactly, else a one-line MxsimError ending with ``why`` (a fit compares FP32
    values)."""
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
                         f"(first: {int(mant[i])}*2^{int(results.exp[i])}); {why}")
    codes[nan] = DEFAULT_NAN
    return codes


def _inside(pm, vs: VectorSet, seed: int) -> tuple[VectorSet, int]:
    """``vs`` with every dot product inside the map's ``[domain]``, and how many were outside.
    Scale exponents are clipped into a box of A and B ranges whose every pair is inside
    (:func:`_scale_box`) and a C the domain leaves out is redrawn in place, which keeps the
    suite's rows and columns (its engine runs stay fast); what is still outside (operand
    classes the domain leaves out) is redrawn inside
    (:meth:`~testbenches.foreign.portmap.Domain.constrain`), each dot then its own 1 x 1
    entry with its family named per dot."""
    dom = pm.domain
    if dom is None:
        return vs, 0
    bad, _ = dom.violations(vs)
    if not bad.any():
        return vs, 0
    box = _scale_box(dom) if dom.scaled and vs.scale_format == "e8m0" else None
    if box is not None:
        (la, ha), (lb, hb) = box
        vs = vs.replace(a_scale=_clip_exps(vs.a_scale, la, ha),
                        b_scale=_clip_exps(vs.b_scale, lb, hb))
    still, _ = dom.violations(vs)
    if still.any() and vs.c is not None:
        # C is one code per dot: a C class or binade the domain leaves out is redrawn in place
        c = dom.constrain(vs.take_dots(slice(None)), seed).c.reshape(vs.c.shape)
        vs = vs.replace(c=np.where(still.reshape(vs.c.shape), c, vs.c))
        still, _ = dom.violations(vs)
    if still.any():
        flat = vs.take_dots(slice(None))
        fixed = dom.constrain(flat, seed)
        pick = still.reshape(-1, 1, 1)
        changes = {name: np.where(pick, getattr(fixed, name), getattr(flat, name))
                   for name in ("a", "b", "c", "a_scale", "b_scale")
                   if getattr(flat, name) is not None}
        per = vs.m * vs.n
        families = vs.extra.get("families") or []
        extra = {**{k: v for k, v in vs.extra.items() if k != "families"},
                 "families": [families[d // per] for d in range(vs.num_dots)]}
        vs = flat.replace(**changes, extra=extra)
    assert not dom.violations(vs)[0].any()
    return vs, int(bad.sum())


def _scale_box(dom) -> tuple[tuple[int, int], tuple[int, int]] | None:
    """Ranges of A's and B's scale exponents every pair of which the domain admits: A's is
    half the sum's range (within A's own), B's what that leaves (within B's own); None when
    that leaves B nothing."""
    (la, ha), (lb, hb) = dom.exponent_ranges()
    ls, hs = dom.scale_sum or (la + lb, ha + hb)
    lo_a, hi_a = max(la, -(-ls // 2)), min(ha, hs // 2)
    if lo_a > hi_a:
        lo_a, hi_a = la, ha
    lo_b, hi_b = max(lb, ls - lo_a), min(hb, hs - hi_a)
    return None if lo_a > hi_a or lo_b > hi_b else ((lo_a, hi_a), (lo_b, hi_b))


def _clip_exps(codes: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """E8M0 scale codes with their exponents clipped to ``lo .. hi`` (the NaN code 0xFF to
    ``hi``)."""
    return (np.clip(codes.astype(np.int64) - 127, lo, hi) + 127).astype(codes.dtype)


def probe_design(pm, a_format: str, b_format: str, out_dir: str | Path, *, seed: int = 0,
                 bulk: bool = True, fields: Mapping[str, Any] | None = None) -> VectorSet:
    """The probe suite of the design's formats, in the mode ``fields`` set, run through it
    (:func:`observe`): the observed set a fit explains. A design that takes no C gets
    C = +0; dot products outside the map's ``[domain]`` are redrawn inside it. ``meta``
    records the instruction k, the mode (every field a ``[control]`` input follows, and the
    ``--set`` fields) and how many probes the domain moved."""
    from mxsim.probe.design import design_suite

    from .backend import ForeignBackend
    from .bulk import ForeignBulkBackend

    fields = dict(fields or {})
    spec = carrier_spec(pm, a_format, b_format, fields)
    backend = ForeignBulkBackend(pm, probes=False) if bulk else ForeignBackend(pm,
                                                                                probes=False)
    c_format = spec.d_format if backend.takes_c else "fp32"
    vs = design_suite(a_format, b_format, k=spec.k, block=spec.block,
                      scale_format=spec.scale_format, c_format=c_format, seed=seed)
    if not backend.takes_c:
        vs = vs.replace(c=np.zeros_like(vs.c))
    total = vs.num_dots
    vs, moved = _inside(pm.resolve(spec), vs, seed)
    data = spec.to_dict()
    mode = {name: data[name] for name in
            dict.fromkeys([*(c.source for c in pm.controls), *fields, "d_format"])}
    observed = observe(pm, vs, out_dir, backend=backend, spec=spec)
    return observed.replace(extra={**observed.extra, "instruction_k": spec.k, "mode": mode,
                                   "domain_redrawn": [moved, total]})


def _start(observed: VectorSet, k: int, mode: dict[str, Any], admissible) -> UnitSpec:
    """The fit's first start: :func:`mxsim.probe.fit.default_start` in ``mode``, with exact
    terms and the result's accumulator where the map needs them (a design with ``[status]``
    rounds once)."""
    from mxsim.probe.fit import default_start

    base = default_start(observed, k)
    tries = [mode, {**mode, "frac_bits": None},
             {**mode, "frac_bits": None, "acc_format": observed.d_format}]
    first = None
    for changes in tries:
        try:
            spec = replace(base, **changes)
        except (SpecError, ValueError):
            continue
        first = first or spec
        if admissible is None or admissible(spec):
            return spec
    if first is None:
        raise MxsimError(f"--set: the mode {mode} is not a unit spec the fit can start from")
    return first


def inputs_of(observed: VectorSet) -> VectorSet:
    """The inputs of an observed set alone (no ``d``, no producer's entries): the vectors to
    run again, through ``mxsim rtl observe`` or beside the outputs in ``mxsim fit IN OUT``."""
    extra = {k: v for k, v in observed.extra.items() if k not in ("rtl_map", "compare")}
    return observed.replace(d=None, d_format="fp32", producer="mxsim.probe.design",
                            extra=extra)


def characterise(pm, a_format: str, b_format: str, out_dir: str | Path, *, seed: int = 0,
                 bulk: bool = True, keep: str | Path | None = None, progress=None,
                 fields: Mapping[str, Any] | None = None, other_modes: bool = True,
                 keep_inputs: str | Path | None = None):
    """``(observed, fit)``: the observed set of :func:`probe_design` in the mode ``fields``
    (``--set``'s unit-spec fields, {field: value}) and the fit of its outputs, which starts
    from the mode, keeps the fields the map's ``[control]`` inputs follow (pinned) and only
    proposes specs the map accepts; with ``other_modes``, an exact fit is then held to the
    design's other ``[control]`` modes too (:func:`_other_modes`). ``keep``: where to save the
    observed set, and ``keep_inputs`` its inputs alone (:func:`inputs_of`), both written before
    the fit starts, so the design's outputs outlast whatever the fit does and ``mxsim fit
    INPUTS OBSERVED`` fits them again."""
    from mxsim import vectors
    from mxsim.probe.fit import fit

    observed = probe_design(pm, a_format, b_format, out_dir, seed=seed, bulk=bulk,
                            fields=dict(fields or {}))
    if keep is not None:
        vectors.save(observed, keep)
    if keep_inputs is not None:
        vectors.save(inputs_of(observed), keep_inputs)
    k = observed.extra.get("instruction_k", pm.k)
    mode = {n: v for n, v in dict(observed.extra.get("mode") or {}).items() if n != "d_format"}
    # The fields the map's controls follow ran the design: the fitted spec keeps them, so that
    # it drives the design in this mode again. The other --set fields are where it starts.
    pins = [c.source for c in getattr(pm, "controls", ()) if c.source in mode]
    admissible = _accepts(pm) if hasattr(pm, "check_spec") else None
    start = _start(observed, k, mode, admissible)
    result = fit(observed, k=k, start=start, pinned=pins, admissible=admissible,
                 progress=progress)
    if other_modes and result.exact and getattr(pm, "controls", ()):
        _other_modes(pm, result, a_format, b_format, dict(fields or {}), out_dir, seed=seed,
                     bulk=bulk)
    return observed, result


def _other_modes(pm, result, a_format: str, b_format: str, fields: dict[str, Any],
                 out_dir: str | Path, *, seed: int, bulk: bool) -> None:
    """Hold ``result`` (an exact fit in the mode ``fields``) to the design's other modes: each
    other value of each ``[control]`` input, one at a time, probed as the fitted mode was. The
    fitted spec in that mode (the control's field changed; with ``d_format``, the accumulator
    that followed it and the NaN code as that format spells it) must reproduce them too. Where
    it does not, the first value the fitted mode's outputs do not separate
    (:meth:`~mxsim.probe.fit.Fit.alternatives`) that reproduces every mode is adopted; what
    stays unexplained is noted, to be fitted in its own mode."""
    from mxsim.engine import fast
    from mxsim.probe.fit import canonical

    runs = []
    for ctl in pm.controls:
        here = fields.get(ctl.source, _spelt(getattr(result.spec, ctl.source)))
        for value in ctl.values:
            if value == str(here).lower():
                continue
            try:
                obs = probe_design(pm, a_format, b_format, out_dir, seed=seed, bulk=bulk,
                                   fields={**fields, ctl.source: value})
            except MxsimError:
                continue                    # a mode this map cannot run with these fields
            runs.append(({ctl.source: value}, obs))
    if not runs:
        return

    def missed(spec: UnitSpec, *, first: bool = False) -> list[tuple[str, int, int]]:
        """The modes ``spec`` misses outputs of: (mode, equal, total); only the first one
        with ``first``."""
        out = []
        for change, obs in runs:
            name = ", ".join(f"{n} = {v}" for n, v in change.items())
            moved = _in_mode(spec, change)
            try:
                got = fast.dot(moved, obs).reshape(-1) if moved is not None else None
            except (MxsimError, ValueError):
                got = None
            want = obs.d.reshape(-1)
            if got is not None and obs.extra.get("compare") == "value":
                got, want = canonical(got, obs.d_format), canonical(want, obs.d_format)
            equal = 0 if got is None else int((got == want).sum())
            if equal < want.size:
                out.append((name, equal, int(want.size)))
                if first:
                    break
        return out

    names = "; ".join(", ".join(f"{n} = {v}" for n, v in c.items()) for c, _ in runs)
    misses = missed(result.spec)
    if not misses:
        result.notes.append(f"other modes: the fitted spec reproduces every output of {names} "
                            f"too ({len(runs)} more probe runs)")
        return
    # the modes the fitted spec misses first: an alternative that misses one of them is out
    failing = {name for name, _, _ in misses}
    runs.sort(key=lambda run: ", ".join(f"{n} = {v}" for n, v in run[0].items()) not in failing)
    for param, alt in result.alternatives():
        if not missed(alt, first=True):
            result.adopt(param, alt, f"other modes decide {param} = "
                                     f"{_spelt(getattr(alt, param))}: with it the fitted spec "
                                     f"reproduces every output of {names} too")
            return
    result.notes += [f"other modes: {name} reproduced {equal} of {total} by the fitted spec "
                     f"(and by no value these outputs leave open); fit that mode with --set"
                     for name, equal, total in misses]


def _spelt(value: Any) -> Any:
    """A field's value as a spec file spells it."""
    return getattr(value, "value", value)


def _in_mode(spec: UnitSpec, change: dict[str, Any]) -> UnitSpec | None:
    """``spec`` in another mode: ``change``'s fields, and with a new ``d_format`` the
    accumulator that followed the old one and the NaN code with its sign, quiet bit and top
    payload bits; None where that is no unit spec."""
    from mxsim import formats

    changes = dict(change)
    d = changes.get("d_format")
    if d is not None and d != spec.d_format:
        if spec.acc_format == spec.d_format:
            changes["acc_format"] = d
        if spec.nan_code is not None:
            src, dst = formats.get(spec.d_format), formats.get(d)
            frac = spec.nan_code & ((1 << src.man_bits) - 1)
            shift = src.man_bits - dst.man_bits
            frac = frac >> shift if shift >= 0 else frac << -shift
            sign = spec.nan_code >> src.sign_shift
            changes["nan_code"] = sign << dst.sign_shift | dst.code_of_inf | (frac or 1)
    try:
        return replace(spec, **changes)
    except (SpecError, ValueError):
        return None


def _accepts(pm):
    """Whether the map runs a spec (``PortMap.check_spec``: formats, k, controls, flags)."""
    def accepts(spec: UnitSpec) -> bool:
        try:
            pm.check_spec(spec)
        except MxsimError:
            return False
        return True
    return accepts
