"""The Blackwell probe suite: one vector set per instruction, built to settle its arithmetic.

mxsim has no Blackwell GPU. Its Blackwell presets are published models (MMA-Sim's), and the one
Blackwell data it has (Khattak & Mikaitis's B200 rows) come from the legacy FP8 ``mma.sync``
(docs/blackwell.md). :func:`blackwell_suites` writes, for each instruction in
:data:`INSTRUCTIONS`, a ``mxsim.vectors/1`` set that whoever has a B200 (sm_100a) or an RTX 50xx
(sm_120a) runs with ``mxsim gpu run`` (the set names its GPU path) and sends back for
``mxsim fit``.

Each set carries its *hypothesis set* (``meta['hypotheses']``: name -> unit spec): the
published model of the instruction and the plausible alternatives to it, one parameter changed
at a time (:func:`hypotheses`): F in {13, 23, 24, 25, 26, 35, exact}, GST group sums of 8, 16
or 32 products against scales folded into each product, the zero-term exponent, RZ against
RNE and RD, alignment rounding, C in the fused step or added after, NaN scales as numbers.
The vectors are built so that every two hypotheses give different outputs on at least one dot
(``tests/mxsim/probe/test_probe_blackwell.py`` checks it with the fast engine), so the returned
outputs pick one of them, or none (then ``mxsim fit`` searches the whole spec space).

Families (``meta['families']``, one batch entry of 64 x 64 dots each): the MX probe families
of :mod:`mxsim.probe` (``pair-cancel``, ``c-gap``, ``tie``, ``one-large``, ``random``,
``overflow``, ``specials``; the FP8 ones for the unscaled kinds) and these:

=============== ==========================================================================
``c-cancel``    F, C's place and the rounding: C = ±2**e cancels a product exactly and the
                other products hold bits 2**(e - d), d from 20 to 44, of either sign
``group-split`` the group size and where the scales apply: one large term sets E, and small
                products whose values lie below 2**(E - F) one by one but not in sums of 8,
                16 or 32, in blocks of their own scales
``tiny``        the zero-term exponent: scales so small that every product lies below
                2**e_zero for each candidate, a positive term and a smaller negative one
                whose bits straddle 2**(e_zero - F)
=============== ==========================================================================
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from .. import formats, presets
from ..errors import VectorFileError
from ..spec import SpecError, UnitSpec
from ..vectors import VectorSet
from . import COLS, ROWS, MxEncoding, mx_suite, probe_suite

__all__ = ["Instruction", "INSTRUCTIONS", "hypotheses", "blackwell_suite", "blackwell_suites",
           "EXTRA_FAMILIES"]

EXTRA_FAMILIES = ("c-cancel", "group-split", "tiny")


@dataclass(frozen=True)
class Instruction:
    """One Blackwell instruction the suite probes, and how its set is run."""
    name: str                   #: the probe's name (``--instruction``) and its file's stem
    ptx: str                    #: the PTX instruction
    arch: str                   #: the architecture that runs it
    gpu_path: str               #: the ``mxsim gpu run --path`` runner
    preset: str                 #: the preset that models it (the first hypothesis)
    a_format: str
    b_format: str
    scale_format: str | None
    block: int | None
    k: int                      #: the instruction's K

    @property
    def scaled(self) -> bool:
        return self.scale_format is not None


def _instructions() -> dict[str, Instruction]:
    out = []
    for unit, arch, prefix in (("tcgen05", "sm_100a", "tcgen05"),
                               ("mma-sync", "sm_120a", "sm120")):
        kind_ptx = ("tcgen05.mma.cta_group::1.kind::{kind}" if unit == "tcgen05" else
                    "mma.sync.aligned.{shape}.row.col.kind::{kind}")
        for kind, suffix, fmt, sf, block in (
                ("f8f6f4", "", ("e5m2", "e4m3"), None, None),
                ("mxf8f6f4", "", ("e4m3", "e4m3"), "e8m0", 32),
                ("mxf4", "", ("e2m1", "e2m1"), "e8m0", 32),
                ("mxf4nvf4", "", ("e2m1", "e2m1"), "ue4m3", 16),
                ("mxf4nvf4", "-ue8m0", ("e2m1", "e2m1"), "e8m0", 32)):
            k = 64 if fmt[0] == "e2m1" else 32
            ptx = kind_ptx.format(kind=kind, shape=f"m16n8k{k}")
            if sf is not None:
                ptx += f".block_scale.scale_vec::{k // block}X ({'ue8m0' if sf == 'e8m0' else sf})"
            out.append(Instruction(f"{prefix}-{kind}{suffix}", ptx, arch, f"{unit}-{kind}",
                                   f"blackwell-{kind}", *fmt, sf, block, k))
    out.append(Instruction("sm100-mma-sync-f8-legacy",
                           "mma.sync.aligned.m16n8k32.row.col.f32.e5m2.e4m3.f32 (no kind::)",
                           "sm_100", "mma-sync", "blackwell-mma-sync-f8-legacy", "e5m2", "e4m3",
                           None, None, 32))
    return {i.name: i for i in out}


#: Every probed instruction by probe name: tcgen05.mma (sm_100a) and mma.sync (sm_120a) of each
#: kind, and the legacy FP8 mma.sync on sm_100 (the B200 rows of Khattak & Mikaitis).
INSTRUCTIONS: dict[str, Instruction] = _instructions()


# -- hypotheses --------------------------------------------------------------------------------

def _model(ins: Instruction) -> UnitSpec:
    """The instruction's published model: its preset (the legacy one, until it exists, as
    sm_90's FP8 mma.sync emulation, which the B200 rows match)."""
    name = ins.preset if ins.preset in presets.PRESETS else "hopper-mma-sync"
    spec = presets.get(name).spec(ins.a_format, ins.b_format, scale_format=ins.scale_format,
                                  block=ins.block)
    return replace(spec, name=ins.preset, provenance=spec.provenance)


def _alternatives(ins: Instruction, base: UnitSpec) -> dict[str, dict]:
    """Field changes of the alternatives to ``base``, by hypothesis name."""
    alt: dict[str, dict] = {}
    for f in (13, 23, 24, 25, 26, 35, None):
        if f != base.frac_bits:
            alt["F=exact" if f is None else f"F={f}"] = {"frac_bits": f}
    alt["RNE"] = {"acc_rounding": "rne"}
    alt["RD"] = {"acc_rounding": "rd"}
    alt["align RNE"] = {"align": "rne"}
    alt["C after"] = {"c_mode": "step"} if base.c_mode.value == "after" else \
        {"c_mode": "after", "c_rounding": "rne"}
    if not ins.scaled:
        alt["normalized products"] = {"product": "normalized"}
        if base.upcast is None:
            alt["sm_90 FP8 emulation"] = _sm90_emulation()
        else:
            alt["no upcast, one step, C in step"] = {"upcast": None, "schedule": None,
                                                    "c_mode": "step"}
        alt["wgmma (F=13, E8M13)"] = {"frac_bits": 13, "acc_format": "e8m13", "upcast": None,
                                      "schedule": None, "c_mode": "step"}
        return alt
    # The zero-term exponent shows only where every product can lie below it: E8M0 scales
    # reach 2**-127; UE4M3 ones stop at 2**-9, so every non-zero FP4 product is above 2**-21.
    for e in (-127, -133, -139, -149) if ins.scale_format == "e8m0" else ():
        if e != base.e_zero:
            alt[f"e_zero={e}"] = {"e_zero": e}
    for g in (None, 8, 16, 32):
        if g != base.group and (g is None or ins.block % g == 0):
            alt["scales folded into products" if g is None else f"groups of {g}"] = \
                {"group": g}
    alt["NaN scales as numbers"] = {"specials": "none"}
    return alt


def _sm90_emulation() -> dict:
    legacy = presets.get("hopper-mma-sync").spec("e5m2", "e4m3")
    return {name: getattr(legacy, name) for name in ("schedule", "frac_bits", "upcast",
                                                     "c_mode", "c_rounding", "acc_format")}


def hypotheses(instruction: str) -> dict[str, UnitSpec]:
    """The hypothesis set of a probed instruction: its published model first, then each
    plausible alternative (one parameter changed; a few joint ones), by name.

    Alternatives the spec space cannot express (a GST group with an operand upcast, say) are
    left out; so is one that computes what another does on every input."""
    ins = _instruction(instruction)
    base = _model(ins)
    out = {f"model ({ins.preset})": base}
    for name, changes in _alternatives(ins, base).items():
        try:
            spec = replace(base, name=name, **changes)
        except (SpecError, ValueError):
            continue
        if spec.group is not None and spec.frac_bits is None and base.group is None:
            continue                     # exact group terms summed exactly: F=exact again
        out[name] = spec
    return out


def _instruction(name: str) -> Instruction:
    if name not in INSTRUCTIONS:
        raise VectorFileError(f"Blackwell instruction must be one of {', '.join(INSTRUCTIONS)}"
                              f", not {name!r}")
    return INSTRUCTIONS[name]


# -- families ----------------------------------------------------------------------------------

def _exact_c(vs: VectorSet, mask: np.ndarray) -> np.ndarray:
    """C = -fl32(A·B) (RNE, the scales applied exactly) where ``mask``, else +0: what is left
    of D is the rounding residual, so every bit a unit loses shows."""
    from ..engine import fast
    exact = presets.get("exact").spec(vs.a_format, vs.b_format, scale_format=vs.scale_format,
                                      block=vs.block)
    d = fast.dot(exact, replace(vs, c=None)) ^ np.uint32(0x80000000)
    return np.where(mask, d, np.uint32(0)).astype(np.uint32)


def _elements(mx: MxEncoding, rng, shape) -> np.ndarray:
    """Random finite non-zero element codes of either sign (a tenth of them +0)."""
    finite = mx.elem.finite_codes()
    codes = rng.choice(finite[mx.elem.decode(finite) != 0], size=shape).astype(np.uint8)
    return np.where(rng.random(shape) < 0.1, np.uint8(0), codes)


def _scales(mx: MxEncoding, rng, exps: np.ndarray) -> np.ndarray:
    """Scale codes for exponents ``exps``; UE4M3 scales get random significands too (they are
    not powers of two), clipped to its finite range."""
    if mx.scale.name == "e8m0":
        return mx.scale_codes(exps)
    codes = mx.scale_codes(exps).astype(np.int64)
    wiggle = np.where(codes >= 8, rng.integers(0, 8, exps.shape), 0)
    return np.minimum(codes + wiggle, 0x7E).astype(np.uint8)


def _family(mx: MxEncoding, rng, sa_exps: np.ndarray, sb_exps: np.ndarray, c_rows: np.ndarray
            ) -> dict[str, np.ndarray]:
    """One batch entry: random elements under the given scale exponents; C = -fl32(A·B) in the
    rows ``c_rows`` marks, +0 elsewhere."""
    vs = VectorSet(a=_elements(mx, rng, (ROWS, mx.k)), b=_elements(mx, rng, (mx.k, COLS)),
                   a_format=mx.elem.name, b_format=mx.elem.name,
                   a_scale=_scales(mx, rng, sa_exps), b_scale=_scales(mx, rng, sb_exps),
                   scale_format=mx.scale.name, block=mx.block)
    c = _exact_c(vs, np.broadcast_to(c_rows[:, None], (ROWS, COLS)))
    return {"a": vs.a, "sa": vs.a_scale, "b": vs.b, "sb": vs.b_scale, "c": c}


def _c_cancel(mx: MxEncoding, rng) -> dict[str, np.ndarray]:
    """Scale exponents spread over 0 to -48 by row (terms that far apart), C cancelling the
    sum in three rows of four."""
    spread = np.arange(ROWS) % 49
    sa = -rng.integers(0, spread[:, None] + 1, (ROWS, mx.nb))
    sb = rng.integers(-3, 4, (mx.nb, COLS))
    return _family(mx, rng, sa, sb, np.arange(ROWS) % 4 != 3)


def _group_split(mx: MxEncoding, rng) -> dict[str, np.ndarray]:
    """Block 0 of each row at scale 2**0 (it sets E); the others 2**-(d) with d from 16 to 47
    by row, so their products sit around 2**(E - F) for every candidate F. UE4M3 spans only
    2**±9 a scale, so there block 0 takes 2**8 on A and B and the others 2**-9: 34 bits."""
    first = np.arange(mx.nb) == 0
    if mx.scale.name == "ue4m3":
        sa = np.broadcast_to(np.where(first, 8, -9)[None, :], (ROWS, mx.nb))
        sb = np.broadcast_to(np.where(first, 8, -9)[:, None], (mx.nb, COLS))
    else:
        d = 16 + np.arange(ROWS) % 32
        sa = np.where(first[None, :], 0, -d[:, None] - rng.integers(0, 3, (ROWS, mx.nb)))
        sb = np.zeros((mx.nb, COLS), np.int64)
    return _family(mx, rng, np.asarray(sa), np.asarray(sb), np.arange(ROWS) % 2 == 0)


def _tiny(mx: MxEncoding, rng) -> dict[str, np.ndarray]:
    """Every product below 2**-120 (E8M0 scales): A's first element the top of its range and
    positive, in block 0; some others the smallest element, negative (in one block of K, or in
    the later blocks, up to 2**-40 further down); B all +1; scale sums from -130 to -177 over
    rows and columns; C +0. Whether the small negative terms survive alignment to
    2**(E - F), E = max(e_zero, the top term), moves D by one ulp. (UE4M3 scales stop at
    2**-9, so every product is above 2**-21: those rows probe the smallest scales.)"""
    top = float(np.exp2(mx.top))
    finite = mx.elem.decode(mx.elem.finite_codes())
    least = float(np.abs(finite[finite != 0]).min())
    values = np.where(rng.random((ROWS, mx.k)) < (np.arange(ROWS) % 4 + 1)[:, None] / 12,
                      -least, 0.0)
    values[:, 0] = top
    a = mx.elem.encode(values, "rne", saturate=True).astype(np.uint8)
    b = np.broadcast_to(mx.elem.encode(np.array(1.0)), (mx.k, COLS)).astype(np.uint8)
    if mx.scale.name == "ue4m3":
        sa, sb = np.full((ROWS, mx.nb), -9), np.full((mx.nb, COLS), -9)
    else:
        later = np.arange(mx.nb) > 0
        sa = (-70 - np.arange(ROWS) % 16)[:, None] - later[None, :] * (np.arange(ROWS)[:, None]
                                                                       // 16 * 7)
        sb = (-60 - np.arange(COLS) % 32)[None, :] - later[:, None] * (np.arange(COLS)[None, :]
                                                                       % 5 * 3)
    return {"a": a, "sa": mx.scale_codes(sa), "b": b, "sb": mx.scale_codes(sb),
            "c": np.zeros((ROWS, COLS), np.uint32)}


_EXTRA = {"c-cancel": _c_cancel, "group-split": _group_split, "tiny": _tiny}


def _scaled_suite(ins: Instruction, seed: int) -> VectorSet:
    base = mx_suite("mxfp8", ins.k, seed, ins.block, ins.scale_format, elem=ins.a_format)
    mx = MxEncoding(ins.a_format, ins.k, ins.block, ins.scale_format)
    rng = np.random.default_rng([seed, 17, ins.k, ins.block])
    parts = {n: [getattr(base, f)] for n, f in (("a", "a"), ("sa", "a_scale"), ("b", "b"),
                                                 ("sb", "b_scale"), ("c", "c"))}
    for family in EXTRA_FAMILIES:
        built = _EXTRA[family](mx, rng)
        for name in parts:
            parts[name].append(built[name][None])
    return VectorSet(a=np.concatenate(parts["a"]), b=np.concatenate(parts["b"]),
                     a_format=ins.a_format, b_format=ins.b_format,
                     a_scale=np.concatenate(parts["sa"]), b_scale=np.concatenate(parts["sb"]),
                     scale_format=ins.scale_format, block=ins.block,
                     c=np.concatenate(parts["c"]),
                     extra={"families": [*base.extra["families"], *EXTRA_FAMILIES]})


def _unscaled_suite(ins: Instruction, seed: int) -> VectorSet:
    base = probe_suite("fp8", k=ins.k, seed=seed)
    rng = np.random.default_rng([seed, 18, ins.k])
    fa, fb = formats.get(ins.a_format), formats.get(ins.b_format)
    a = [base.a]
    b = [base.b]
    c = [base.c]
    for _ in range(2):              # c-cancel: C = -fl32(A·B), A's exponents spread by row
        spread = (np.arange(ROWS) % 32)[:, None]
        mag = np.exp2(-rng.integers(0, spread + 1, (ROWS, ins.k)).astype(float))
        av = fa.encode(mag * rng.choice([-1.0, 1.0, 1.25, -1.75], (ROWS, ins.k)), "rne",
                       saturate=True)
        bv = fb.encode(rng.choice([-1.0, 1.0, 1.125, -1.5, 0.5], (ins.k, COLS)), "rne",
                       saturate=True)
        part = VectorSet(a=av.astype(np.uint8), b=bv.astype(np.uint8), a_format=ins.a_format,
                         b_format=ins.b_format)
        a.append(part.a[None])
        b.append(part.b[None])
        c.append(_exact_c(part, np.broadcast_to((np.arange(ROWS) % 4 != 3)[:, None],
                                                (ROWS, COLS)))[None])
    return VectorSet(a=np.concatenate(a), b=np.concatenate(b), a_format=ins.a_format,
                     b_format=ins.b_format, c=np.concatenate(c),
                     extra={"families": [*base.extra["families"], "c-cancel", "c-cancel"]})


def blackwell_suite(instruction: str, *, seed: int = 0) -> VectorSet:
    """The probe set of one instruction: its families, its hypothesis set and its GPU path in
    ``meta``. The same arguments give the same codes."""
    ins = _instruction(instruction)
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        raise VectorFileError(f"Seed must be a non-negative integer, not {seed!r}")
    vs = _scaled_suite(ins, int(seed)) if ins.scaled else _unscaled_suite(ins, int(seed))
    hyp = {name: spec.to_dict() for name, spec in hypotheses(instruction).items()}
    return replace(vs, extra={**vs.extra, "probe": "blackwell", "instruction": ins.name,
                              "ptx": ins.ptx, "arch": ins.arch, "gpu_path": ins.gpu_path,
                              "instruction_k": ins.k, "seed": int(seed), "hypotheses": hyp})


def blackwell_suites(instructions: list[str] | None = None, *, seed: int = 0
                     ) -> dict[str, VectorSet]:
    """The probe sets of ``instructions`` (default: every one), by instruction name."""
    names = list(INSTRUCTIONS) if not instructions else list(instructions)
    return {name: blackwell_suite(name, seed=seed) for name in names}
