# amaranth: UnusedElaboratable=no
"""``ReferenceDot`` (:mod:`hdl.formal.reference`), the spec's arithmetic drawn a second, plain
way for proofs, against the reference engine bit for bit in Amaranth's simulator.

Each spec gets the constrained-random stimulus ``mxsim verify`` drives
(:func:`testbenches.unit.stimulus.stimulus`: every generator family and the block-level
constructions), the ``e-zero`` ladders, and a directed table of its own (every special C,
E8M0 0x00/0xFE/0xFF and UE4M3 0x00/0x7E/0x7F scales under 1 x 1 and max x max products, sums
that round into the next binade and to FP32 overflow, exact cancellation, NaN and Inf
elements, subnormal elements). One beat is one instruction (``vs.k == spec.k``); the FP32 codes
are compared, never floats. Seeds are fixed; a mismatch names the spec, the dot's origin and
every operand code, so the case reruns alone.
"""

import os
import re
from pathlib import Path

import numpy as np
import pytest

from mxsim import formats, presets, units, vectors
from mxsim.design import resolve_design
from mxsim.engine import reference
from mxsim.spec import UnitSpec
from mxsim.vectors import VectorSet

pytestmark = pytest.mark.rtl
pytest.importorskip("amaranth")

from amaranth.sim import Simulator  # noqa: E402

from hdl.formal.reference import ReferenceDot  # noqa: E402
from hdl.payload import payload_ints, payload_words  # noqa: E402
from hdl.stages import block_layout  # noqa: E402
from testbenches.unit.stimulus import stimulus  # noqa: E402

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "rtl" / "block_dot"
SEEDS = (11,)            #: stimulus seeds per spec (each gives 52 or 60 dots)
SHOW = 5                 #: mismatching dots printed

#: Eight products per instruction (E8M0 blocks of 8) where the preset's own k is not kept:
#: elaborating and compiling ``ReferenceDot`` for Amaranth's simulator, not the dots, is what
#: a spec costs here, about linear in k (5 s at k = 8, 15 s for GST-FDPA at k = 16), and the
#: default level must stay near a minute.
K8 = dict(k=8, block=8)

#: id -> (unit, A, B, overrides, scale configuration). The default level, about a
#: minute: every format pair family, both roundings, every overflow policy, E8M0, UE4M3, no
#: scales, FP32 and E8Mn accumulators, ST- and GST-FDPA.
CASES: dict[str, tuple] = {
    "mxf8f6f4-e4m3xe4m3-k8": ("blackwell-mxf8f6f4", "e4m3", "e4m3", K8, None),
    "mxf8f6f4-e5m2xe2m1-k8-rne": ("blackwell-mxf8f6f4", "e5m2", "e2m1",
                                  dict(K8, acc_rounding="rne"), None),
    "mxf8f6f4-e3m2xe2m3-k8-e8m10-rne-saturate": ("blackwell-mxf8f6f4", "e3m2", "e2m3",
                                                 dict(K8, acc_format="e8m10", acc_rounding="rne",
                                                      overflow="saturate"), None),
    # MXINT8: the preset's arithmetic with INT8 operands, as the pairs campaign builds it.
    "mxint8-f25-k8-ieee": ("blackwell-mxf8f6f4", "e4m3", "e4m3",
                           dict(K8, name="mxint8-f25", a_format="int8", b_format="int8",
                                overflow="ieee"), None),
    "hopper-wgmma-e8m13-k8": ("hopper-wgmma", "e4m3", "e5m2", dict(k=8), None),
    # GST-FDPA with UE4M3 scales (NVFP4): one group of 16 per instruction.
    "mxf4nvf4-gst-ue4m3x16-k16": ("blackwell-mxf4nvf4", "e2m1", "e2m1", dict(k=16),
                                  ("ue4m3", 16)),
}

#: With ``MXSIM_FORMAL_LEVEL=1`` (several minutes more): the presets at their own k (32, and
#: 64 for GST-FDPA) and the remaining pairs and policies.
FULL_CASES: dict[str, tuple] = {
    "mxf8f6f4-e4m3xe4m3": ("blackwell-mxf8f6f4", "e4m3", "e4m3", None, None),
    "mxf8f6f4-e5m2xe2m1-k8": ("blackwell-mxf8f6f4", "e5m2", "e2m1", K8, None),
    "mxf8f6f4-e3m2xe2m3-k8": ("blackwell-mxf8f6f4", "e3m2", "e2m3", K8, None),
    "mxf8f6f4-e2m1xe2m1-k8-e8m10": ("blackwell-mxf8f6f4", "e2m1", "e2m1",
                                    dict(K8, acc_format="e8m10"), None),
    "mxf8f6f4-e4m3xe5m2-k8-rne": ("blackwell-mxf8f6f4", "e4m3", "e5m2",
                                  dict(K8, acc_rounding="rne"), None),
    "mxf8f6f4-e3m2xe3m2-k8-rz-ieee": ("blackwell-mxf8f6f4", "e3m2", "e3m2",
                                      dict(K8, acc_rounding="rz", overflow="ieee"), None),
    # The preset has no UE4M3 configuration: one UE4M3 scale per 16 elements (NVFP4-style
    # ST-FDPA), its other fields kept.
    "mxf8f6f4-ue4m3x16-e2m1xe4m3": ("blackwell-mxf8f6f4", "e2m1", "e4m3",
                                    dict(scale_format="ue4m3", block=16, k=16), None),
    "mxf4-gst": ("blackwell-mxf4", "e2m1", "e2m1", None, None),
    "mxf4nvf4-gst-ue4m3x16": ("blackwell-mxf4nvf4", "e2m1", "e2m1", None, ("ue4m3", 16)),
}
LEVEL = int(os.environ.get("MXSIM_FORMAL_LEVEL", "0"))
if LEVEL >= 1:
    CASES.update(FULL_CASES)

FP32_MAX, FP32_INF, FP32_NAN = 0x7F7FFFFF, 0x7F800000, 0x7FC00000
NEG = 0x80000000
#: C codes every directed table drives: zeros, subnormals, the normal limits, Inf, NaNs, 1.0
C_CODES = (0x00000000, NEG, 0x00000001, NEG | 0x00000001, 0x007FFFFF, 0x00800000, FP32_MAX,
           NEG | FP32_MAX, FP32_INF, NEG | FP32_INF, FP32_NAN, 0x7F800001, 0xFFFFFFFF,
           0x3F800000)


def case_spec(case: str) -> UnitSpec:
    """The spec of ``CASES[case]``, resolved as ``mxsim rtl`` resolves it (checked for the
    RTL generator)."""
    unit, a, b, overrides, scale = CASES[case]
    spec, _ = resolve_design(unit, a, b, overrides, scale=scale)
    return spec


# -- the circuit in the simulator ----------------------------------------------------------

def rtl_reference_dot(spec: UnitSpec, words: list[int]) -> np.ndarray:
    """``ReferenceDot(spec)``'s ``d`` for each input beat ``words`` (``i``'s payload as one
    integer), combinationally: FP32 codes as ``np.uint32``."""
    dut = ReferenceDot(spec)
    assert dut.i.shape() == block_layout(spec), "i must be laid out as block_layout(spec)"
    got: list[int] = []

    async def bench(ctx):
        for word in words:
            ctx.set(dut.i.as_value(), word)
            got.append(ctx.get(dut.d))

    sim = Simulator(dut)
    sim.add_testbench(bench)
    sim.run()
    return np.array(got, np.uint32)


def engine_codes(spec: UnitSpec, vs: VectorSet) -> np.ndarray:
    """The reference engine's D of every dot of ``vs``, as FP32 codes in beat order."""
    d = np.ascontiguousarray(reference.dot(spec, vs))
    assert d.dtype.itemsize == 4, d.dtype
    return d.reshape(-1).view(np.uint32)


def _describe(spec: UnitSpec, vs: VectorSet, dot: int) -> str:
    """Every operand code of dot ``dot`` of ``vs``, in hex."""
    f = vs.flat()
    t, i, j = dot // (vs.m * vs.n), dot // vs.n % vs.m, dot % vs.n
    hexes = lambda x: " ".join(f"{int(v):02x}" for v in x)  # noqa: E731
    parts = [f"a=[{hexes(f.a[t, i])}]", f"b=[{hexes(f.b[t, :, j])}]"]
    if vs.a_scale is not None:
        parts += [f"a_scale=[{hexes(f.a_scale[t, i])}]", f"b_scale=[{hexes(f.b_scale[t, :, j])}]"]
    parts.append(f"c={int(f.c[t, i, j]) if f.c is not None else 0:#010x}")
    return " ".join(parts)


def _summary(spec: UnitSpec) -> str:
    scales = f"{spec.scale_format}/{spec.block}" if spec.scale_format else "no scales"
    group = f", group {spec.group}" if spec.group else ""
    return (f"spec {spec.name!r} ({spec.a_format} x {spec.b_format}, {scales}, k {spec.k}"
            f"{group}, F {spec.frac_bits}, acc {spec.acc_format} {spec.acc_rounding.value}, "
            f"overflow {spec.overflow.value}, e_zero {spec.e_zero})")


def check(spec: UnitSpec, sets: list[tuple[str, VectorSet, list[str]]]) -> int:
    """Run every dot of every set through ``ReferenceDot(spec)`` and the reference engine;
    fail naming the first :data:`SHOW` dots whose codes differ. The number of dots checked."""
    words, want, where = [], [], []
    for name, vs, labels in sets:
        assert vs.k == spec.k and len(labels) == vs.num_dots, (name, vs.k, len(labels))
        words += payload_ints(payload_words(spec, vs))
        want.append(engine_codes(spec, vs))
        where += [(name, vs, n, label) for n, label in enumerate(labels)]
    want = np.concatenate(want)
    got = rtl_reference_dot(spec, words)
    bad = np.nonzero(got != want)[0]
    if bad.size:
        lines = [f"{_summary(spec)}: {bad.size} of {want.size} dots differ; first "
                 f"{min(SHOW, bad.size)}:"]
        for x in bad[:SHOW]:
            name, vs, n, label = where[x]
            lines.append(f"  {name} dot {n} ({label}): want {int(want[x]):#010x} got "
                         f"{int(got[x]):#010x}; {_describe(spec, vs, n)}")
        pytest.fail("\n".join(lines), pytrace=False)
    return int(want.size)


# -- vector sets ---------------------------------------------------------------------------

def stimulus_set(spec: UnitSpec, seed: int) -> tuple[str, VectorSet, list[str]]:
    """The diagonal (4 dots) of every batch entry of ``mxsim verify``'s constrained-random
    stimulus, one instruction per dot."""
    vs = stimulus(spec, 240, blocks=1, seed=seed)
    per = vs.m * vs.n
    dots = [e * per + d * (vs.n + 1) for e in range(vs.batch_shape[0])
            for d in range(min(vs.m, vs.n))]
    fams = vs.extra["families"]
    return (f"stimulus seed {seed}", vs.take_dots(dots),
            [f"family {fams[x // per]}, stimulus dot {x}" for x in dots])


def e_zero_set(spec: UnitSpec, seed: int) -> tuple[str, VectorSet, list[str]]:
    """The ``e-zero`` ladders: outputs that depend on the step's LSB when zero terms lead."""
    vs = vectors.generate_suite(["e-zero"], count=2, seed=seed, a_format=spec.a_format,
                                b_format=spec.b_format, m=2, n=2, k=spec.k,
                                scale_format=spec.scale_format, block=spec.block)
    return f"e-zero seed {seed}", vs, [f"e-zero dot {x}" for x in range(vs.num_dots)]


def _code(fmt: formats.Format, value: float) -> int:
    return int(fmt.encode(np.array([value], np.float64))[0])


def _scale_codes(spec: UnitSpec, e: int) -> tuple[int, int]:
    """A and B scale codes whose product is 2**e (e split between them)."""
    hi, lo = -(-e // 2), e // 2
    if spec.scale_format == "e8m0":
        return 127 + hi, 127 + lo
    assert spec.scale_format == "ue4m3", spec.scale_format
    ue = formats.get("ue4m3")
    return _code(ue, 2.0 ** hi), _code(ue, 2.0 ** lo)


def directed_set(spec: UnitSpec) -> tuple[str, VectorSet, list[str]]:
    """One dot per row of a table of corners (see the module docstring), each dot labelled
    with what it drives."""
    fa, fb = formats.get(spec.a_format), formats.get(spec.b_format)
    k, scaled = spec.k, spec.scale_format is not None
    one = (127, 127) if spec.scale_format == "e8m0" else (0x38, 0x38) if scaled else (0, 0)
    rows: list[tuple[str, dict, dict, tuple[int, int], int]] = []

    def row(label, a=None, b=None, scales=one, c=0):
        rows.append((label, a or {}, b or {}, scales, c))

    def lanes(x, y, n=k):
        return {j: x for j in range(n)}, {j: y for j in range(n)}

    a1, b1, am, bm = _code(fa, 1.0), _code(fb, 1.0), fa.code_of_max, fb.code_of_max
    a_nm = _code(fa, -fa.max)

    # 1. Zero products (+0 elements, -0 where the format has it) under every special C.
    for n, c in enumerate(C_CODES):
        neg_zero = n % 2 and fa.kind == "float"
        a = lanes(1 << fa.sign_shift, 0)[0] if neg_zero else None
        row(f"zero products{' (-0 elements)' if neg_zero else ''}, C={c:#010x}", a=a, c=c)

    # 2. Scale extremes (E8M0 0x00 = 2**-127, 0xFE = 2**127, 0xFF NaN; UE4M3 0x00 zero,
    #    0x01 smallest, 0x7E largest, 0x7F NaN) under 1 x 1 and max x max everywhere.
    pairs = {"e8m0": [(0, 0), (0, 254), (254, 0), (254, 254), (1, 253), (0xFF, 127),
                      (127, 0xFF), (0xFF, 0xFF), (0, 0xFF), (127, 127)],
             "ue4m3": [(0, 0), (0x7E, 0x7E), (0x7F, 0x38), (0x38, 0x7F), (0x01, 0x01),
                       (0x08, 0x7E), (0, 0x7E), (0x38, 0x38)]}.get(spec.scale_format, [one])
    spread = (0, NEG, FP32_MAX, NEG | FP32_MAX, FP32_INF, NEG | FP32_INF, FP32_NAN)
    for n, sc in enumerate(pairs):
        for m, (what, a, b) in enumerate((("1 x 1", {0: a1}, {0: b1}),
                                          ("max x max", *lanes(am, bm)),
                                          ("-max x max", *lanes(a_nm, bm)))):
            for c in dict.fromkeys((0, spread[(3 * n + m) % len(spread)])):
                row(f"scales {sc[0]:#04x}/{sc[1]:#04x}, {what}, C={c:#010x}", a, b, sc, c)

    # 3. FP32 overflow by rounding: C = +-max plus one product at, below or above half its
    #    ulp (2**103), or a whole ulp: RNE rounds to Inf at the tie (max is odd).
    if spec.scale_format == "e8m0":
        for e, x in ((102, 1.0), (103, 1.0), (103, 1.5), (104, 1.0)):
            for s in (1.0, -1.0):
                c = FP32_MAX | (NEG if s < 0 else 0)
                row(f"max {'+-'[s < 0]} {x} * 2**{e}", {0: _code(fa, s * x)}, {0: b1},
                    _scale_codes(spec, e), c)

    # 4. Sums that round into the next binade: C = (2 - 2**-23) * 2**(e + 24) (odd) plus a
    #    product 2**(e - 1) (below the tie), 2**e (the tie) or 1.5 * 2**e (above it).
    for e in {"e8m0": (-100, 0, 60), "ue4m3": (0, 6)}.get(spec.scale_format, (0,)):
        sc = _scale_codes(spec, e) if scaled else one
        for x in (0.5, 1.0, 1.5):
            for s in (1.0, -1.0):
                c = ((127 + e + 24) << 23 | 0x7FFFFF) | (NEG if s < 0 else 0)
                row(f"next binade: C {'+-'[s < 0]}(2 - 2**-23) * 2**{e + 24} + {x} * 2**{e}",
                    {0: _code(fa, s * x)}, {0: b1}, sc, c)

    # 5. Exact cancellation: 1 - 1 + max - max, under +-0, a subnormal and -1.0.
    for c in (0, NEG, 0x00000001, 0xBF800000):
        row(f"cancellation, C={c:#010x}", {0: a1, 1: _code(fa, -1.0), 2: am, 3: a_nm},
            {0: b1, 1: b1, 2: bm, 3: bm}, one, c)

    # 6. NaN and Inf elements (where the formats have them), and the smallest subnormals.
    for f, side in ((fa, "a"), (fb, "b")):
        other = b1 if side == "a" else a1
        put = (lambda x, y: ({0: x}, {0: y})) if side == "a" else (lambda x, y: ({0: y}, {0: x}))
        if f.has_nan:
            row(f"NaN {side}, C=+Inf", *put(f.code_of_nan, other), one, FP32_INF)
        if f.has_inf:
            ninf = f.code_of_inf | 1 << f.sign_shift
            row(f"Inf {side} x 0", *put(f.code_of_inf, 0), one, 0)
            if side == "a":
                row("Inf - Inf a", {0: f.code_of_inf, 1: ninf}, {0: b1, 1: b1}, one, 0)
            else:
                row("Inf - Inf b", {0: a1, 1: a1}, {0: f.code_of_inf, 1: ninf}, one, 0)
            row(f"Inf {side}, C=-Inf", *put(f.code_of_inf, other), one, NEG | FP32_INF)
            row(f"-Inf {side}, C=-max", *put(ninf, other), one, NEG | FP32_MAX)
    for c in (0, 0x00000001):
        row(f"smallest subnormal elements, C={c:#010x}", *lanes(1, 1, 2), one, c)

    n, nblk = len(rows), (k // spec.block if scaled else 0)
    a = np.zeros((n, 1, k), fa.code_dtype)
    b = np.zeros((n, k, 1), fb.code_dtype)
    c = np.zeros((n, 1, 1), np.uint32)
    sa, sb = np.zeros((n, 1, nblk), np.uint8), np.zeros((n, nblk, 1), np.uint8)
    for r, (_, ra, rb, (xa, xb), rc) in enumerate(rows):
        for j, v in ra.items():
            a[r, 0, j] = v
        for j, v in rb.items():
            b[r, j, 0] = v
        sa[r], sb[r], c[r] = xa, xb, rc
    vs = VectorSet(a=a, b=b, a_format=fa.name, b_format=fb.name, c=c,
                   a_scale=sa if scaled else None, b_scale=sb if scaled else None,
                   scale_format=spec.scale_format, block=spec.block if scaled else None)
    return "directed", vs, [label for label, *_ in rows]


# -- tests ---------------------------------------------------------------------------------

@pytest.mark.parametrize("case", list(CASES), ids=list(CASES))
def test_formal_reference_equals_reference_engine(case):
    """Every dot of the directed table, the e-zero ladders and the stimulus: D's code from
    ReferenceDot equals the reference engine's."""
    spec = case_spec(case)
    sets = [directed_set(spec)]
    if "int8" not in (spec.a_format, spec.b_format):      # the ladders need float operands
        sets.append(e_zero_set(spec, 5))
    sets += [stimulus_set(spec, seed) for seed in SEEDS]
    assert check(spec, sets) >= 90


def _changed(**change) -> UnitSpec:
    p = presets.get("blackwell-mxf8f6f4")
    return p.spec("e4m3", "e4m3", scale_format="e8m0", block=32).replace(**change)


#: id -> (spec, the words the refusal must contain)
REFUSED = {
    "upcast": (lambda: _changed(upcast="fp16"), "upcast"),
    "align-rne": (lambda: _changed(align="rne"), "align rne"),
    "schedule-two-steps": (lambda: _changed(schedule=(tuple(range(16)), tuple(range(16, 32)))),
                           "schedule"),
    "d-format-fp16": (lambda: _changed(d_format="fp16", acc_format="fp16", acc_rounding="rne",
                                       e_zero=-21), "d_format fp16"),
    # The block_dot example's specs, loaded as `mxsim verify --unit FILE.toml` loads them:
    # exact group sums (frac_bits none) added in a tree of roundings, C after.
    "block-dot-e4m3": (lambda: units.get(str(EXAMPLES / "block_dot_spec_e4m3.toml"))
                       .spec_for_formats(), "reduce tree"),
    "block-dot-int8": (lambda: units.get(str(EXAMPLES / "block_dot_spec_int8.toml"))
                       .spec_for_formats(), "c_mode after"),
}


@pytest.mark.parametrize("case", list(REFUSED), ids=list(REFUSED))
def test_formal_reference_refuses_specs_it_does_not_render(case):
    """A spec the RTL generator refuses (check_rtl) ReferenceDot refuses too, with a
    ValueError that names the unit and the key."""
    make, key = REFUSED[case]
    spec = make()
    with pytest.raises(ValueError, match=rf"^Unit {re.escape(repr(spec.name))}: .*"
                                         rf"{re.escape(key)}"):
        ReferenceDot(spec)


def test_formal_reference_directed_table_reaches_its_corners():
    """The directed table's dots give what its labels promise under the engine: Inf from the
    overflow tie, 2**128's neighbour from the binade carry, NaN from a NaN scale."""
    spec = case_spec("mxf8f6f4-e4m3xe4m3-k8")
    _, vs, labels = directed_set(spec)
    d = engine_codes(spec, vs)
    got = dict(zip(labels, (int(x) for x in d), strict=True))
    # blackwell-mxf8f6f4 rounds toward zero: the tie keeps max, a whole ulp overflows.
    assert got["max + 1.0 * 2**103"] == FP32_MAX
    assert got["max + 1.0 * 2**104"] == FP32_INF
    assert got["scales 0xff/0x7f, 1 x 1, C=0x00000000"] == 0x7FFFFFFF
    assert got["next binade: C +(2 - 2**-23) * 2**24 + 1.0 * 2**0"] == (151 << 23 | 0x7FFFFF)
    rne = spec.replace(acc_rounding="rne")
    d = dict(zip(labels, (int(x) for x in engine_codes(rne, vs)), strict=True))
    assert d["max + 1.0 * 2**103"] == FP32_INF
    assert d["max + 1.0 * 2**102"] == FP32_MAX
    assert d["next binade: C +(2 - 2**-23) * 2**24 + 1.0 * 2**0"] == 152 << 23
    assert d["next binade: C -(2 - 2**-23) * 2**24 + 0.5 * 2**0"] == NEG | 151 << 23 | 0x7FFFFF
