# amaranth: UnusedElaboratable=no
"""``TreeDot`` (:mod:`hdl.formal.tree`), a reduction-tree spec's arithmetic drawn as a plain
circuit for proofs of users' RTL, against the reference engine bit for bit in Amaranth's
simulator.

Each spec gets random dots of every generator family (C included), an adversarial set (groups
that cancel, maxima, ones and halves at E8M0 scales from 0x00 to 0xFF, Inf/NaN C) and, for the
example's E4M3 arithmetic, a directed table: a tie at E8M14 that the tree rounds and an exact
sum would not, saturation at a node, a subnormal tie, cancellation to zero, NaN codes and
scales. Seeds are fixed; a mismatch names the spec, the dot and its operand codes.
"""

import os
import re

import numpy as np
import pytest

from mxsim import formats, vectors
from mxsim.engine import reference
from mxsim.spec import UnitSpec
from mxsim.vectors import VectorSet

pytestmark = pytest.mark.rtl
pytest.importorskip("amaranth")

from amaranth.hdl import Fragment  # noqa: E402
from amaranth.sim import Simulator  # noqa: E402

from hdl.formal.reference import ReferenceDot  # noqa: E402
from hdl.formal.tree import TreeDot, dot_problem, dot_reference, tree_problem  # noqa: E402
from hdl.payload import payload_ints, payload_words  # noqa: E402

SEED = 7
SHOW = 5
ONE, MINUS_ONE, ONE_HALF = 0x38, 0xB8, 0x3C           # e4m3 1.0, -1.0, 1.5
E8M14_MAX = 0x7F7FFE00                                # as FP32 bits

#: Example 2's arithmetic (examples/rtl/block_dot) at k = 8: four E8M0 blocks of 2.
EXAMPLE = UnitSpec(name="block-dot-k8", a_format="e4m3", b_format="e4m3", scale_format="e8m0",
                   block=2, k=8, group=2, reduce="tree", frac_bits=None, acc_format="e8m14",
                   acc_rounding="rne", overflow="saturate", c_mode="after")

#: id -> spec; k = 8 keeps each elaboration for the simulator to a few seconds.
SPECS = {
    "block-dot-k8": EXAMPLE,
    "e5m2xe2m1-ue4m3-levels-ru-ieee": EXAMPLE.replace(
        name="levels", a_format="e5m2", b_format="e2m1", scale_format="ue4m3", block=8,
        tree_formats=("e10m11", "fp16"), acc_rounding="ru", c_rounding="rd", overflow="ieee",
        zero_sign="ieee"),
    "e2m3xe3m2-lone-term-rna": EXAMPLE.replace(
        name="lone", a_format="e2m3", b_format="e3m2", block=8, group=8, acc_format="e8m10",
        acc_rounding="rna", zero_sign="ieee"),
}
#: With ``MXSIM_FORMAL_LEVEL=1``: more roundings and formats.
FULL_SPECS = {
    "int8-rz-inf": EXAMPLE.replace(name="int8", a_format="int8", b_format="int8", block=4,
                                   acc_rounding="rz", c_rounding="rz", overflow="inf"),
    "e4m3-rd-bf16": EXAMPLE.replace(name="rd", acc_format="bf16", acc_rounding="rd",
                                    overflow="ieee"),
    "e2m1-ue4m3-fp32": EXAMPLE.replace(name="fp32", a_format="e2m1", b_format="e2m1",
                                       scale_format="ue4m3", block=4, group=1,
                                       acc_format="fp32", acc_rounding="rz"),
}
#: The specs also run without C (``c_zero``); with ``MXSIM_FORMAL_LEVEL=1``, one more.
WITHOUT_C = ["block-dot-k8"]
if int(os.environ.get("MXSIM_FORMAL_LEVEL", "0")) >= 1:
    SPECS.update(FULL_SPECS)
    WITHOUT_C.append("e5m2xe2m1-ue4m3-levels-ru-ieee")


def tree_codes(spec: UnitSpec, words: list[int], c_zero: bool = False) -> np.ndarray:
    """``TreeDot(spec, c_zero=c_zero)``'s D for each input beat ``words`` (``i`` as one
    integer), as FP32 codes."""
    dut = TreeDot(spec, c_zero=c_zero)
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
    return np.ascontiguousarray(reference.dot(spec, vs)).reshape(-1).view(np.uint32)


def _describe(vs: VectorSet, dot: int) -> str:
    f = vs.flat()
    t, i, j = dot // (vs.m * vs.n), dot // vs.n % vs.m, dot % vs.n
    hexes = lambda x: " ".join(f"{int(v):02x}" for v in x)  # noqa: E731
    c = int(f.c[t, i, j]) if f.c is not None else 0
    return (f"a=[{hexes(f.a[t, i])}] b=[{hexes(f.b[t, :, j])}] a_scale=[{hexes(f.a_scale[t, i])}]"
            f" b_scale=[{hexes(f.b_scale[t, :, j])}] c={c:#010x}")


def random_set(spec: UnitSpec) -> VectorSet:
    """Two batch entries of every generator family, C included."""
    return vectors.generate_suite(vectors.FAMILIES, count=2, seed=SEED, a_format=spec.a_format,
                                  b_format=spec.b_format, m=2, n=2, k=spec.k,
                                  scale_format=spec.scale_format, block=spec.block)


def adversarial_set(spec: UnitSpec, rng: np.random.Generator) -> VectorSet:
    """Rows that cancel (row 1 is -row 0 at the same scales), maxima, ones and halves, scales
    from the bottom (subnormal sums) to the top (saturation) and NaN, special C."""
    m, n, k = 6, 4, spec.k
    fa, fb = formats.get(spec.a_format), formats.get(spec.b_format)

    def codes(f: formats.Format, shape) -> np.ndarray:
        pool = np.concatenate([np.zeros(4, np.uint8), np.full(4, f.code_of_max, np.uint8),
                               f.encode(np.array([1.0, -1.0, 0.5, -0.5])).astype(np.uint8),
                               np.arange(1 << f.bits, dtype=np.uint8)])
        return rng.choice(pool, size=shape)

    a, b = codes(fa, (m, k)), codes(fb, (k, n))
    a[1] = np.where(np.isnan(fa.decode(a[0])), a[0],
                    fa.encode(-fa.decode(a[0]), saturate=True).astype(np.uint8))
    pool = (np.array([0x00, 0x01, 0x10, 0x7F, 0x70, 0x8F, 0xF0, 0xFE, 0xFF], np.uint8)
            if spec.scale_format == "e8m0" else
            np.array([0x00, 0x01, 0x08, 0x38, 0x7E, 0x7F, 0xB8], np.uint8))
    sa = rng.choice(pool, size=(m, k // spec.block))
    sa[1] = sa[0]
    c = rng.choice(np.array([0, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0x7F7FFFFF,
                             0x00000001, 0x80800000, 0x3F800000], np.uint32), size=(m, n))
    return VectorSet(a=a, b=b, a_format=spec.a_format, b_format=spec.b_format, c=c,
                     a_scale=sa, b_scale=rng.choice(pool, size=(k // spec.block, n)),
                     scale_format=spec.scale_format, block=spec.block)


#: (label, the four block terms, each (e4m3 code, A's scale code[, B's, default 127]), C)
DIRECTED = [
    # 1 + 2**-15 is a tie at E8M14 (to 1), -1 + 2**-15 exact: the tree gives 2**-15.
    ("tie rounded at a node", ((ONE, 127), (ONE, 112), (MINUS_ONE, 127), (ONE, 112)), 0),
    ("saturation at a node", ((ONE_HALF, 254), (ONE_HALF, 254), (0, 127), (0, 127)), 0),
    ("saturation, then -max", ((ONE_HALF, 254), (ONE_HALF, 254), (0xFE, 254), (0, 127)), 0),
    ("subnormal tie", ((0x08, 3), (0x08, 0, 119), (0x08, 0, 119), (0, 127)), 0),
    ("below the least subnormal", ((0x01, 0, 0), (0x01, 0, 0), (0x01, 0, 0), (0, 127)), 0),
    ("cancellation to zero", ((ONE, 200), (MINUS_ONE, 200), (ONE, 3), (MINUS_ONE, 3)), 0),
    ("cancellation across nodes", ((ONE, 200), (ONE, 60), (MINUS_ONE, 200), (0, 127)), 0),
    ("NaN code", ((0x7F, 127), (ONE, 127), (ONE, 127), (ONE, 127)), 0),
    ("NaN scale", ((ONE, 127), (ONE, 0xFF), (ONE, 127), (ONE, 127)), 0),
    ("C = -1 cancels", ((ONE, 127), (0, 127), (0, 127), (0, 127)), 0xBF800000),
    ("C = +Inf", ((ONE, 127), (0, 127), (0, 127), (0, 127)), 0x7F800000),
    ("C = FP32 max over e8m14 max", ((ONE_HALF, 254), (ONE_HALF, 254), (0, 127), (0, 127)),
     0x7F7FFFFF),
    ("C tiny, sum tie", ((ONE, 127), (ONE, 112), (0, 127), (0, 127)), 0x00000001),
]


def directed_set(spec: UnitSpec) -> VectorSet:
    """:data:`DIRECTED` for four blocks of ``spec.block`` E4M3 elements: block g holds one
    product, its term's code times 1.0 (the rest zeros), at its scales."""
    n, k, block = len(DIRECTED), spec.k, spec.block
    a = np.zeros((n, k), np.uint8)
    a_scale, b_scale = np.zeros((n, k // block), np.uint8), np.zeros((n, k // block), np.uint8)
    for row, (_, terms, _) in enumerate(DIRECTED):
        for g, (code, sa, *sb) in enumerate(terms):
            a[row, block * g] = code
            a_scale[row, g], b_scale[row, g] = sa, (sb or [127])[0]
    # One dot per row: B's column j is 1.0 at every index, scales of row j (a diagonal).
    vs = VectorSet(a=a, b=np.full((k, n), ONE, np.uint8), a_format="e4m3", b_format="e4m3",
                   a_scale=a_scale, b_scale=b_scale.T.copy(), scale_format="e8m0", block=block,
                   c=np.tile(np.array([c for *_, c in DIRECTED], np.uint32), (n, 1)))
    return vs.take_dots([r * n + r for r in range(n)])


def check(spec: UnitSpec, sets: list[tuple[str, VectorSet]], c_zero: bool = False) -> int:
    """Every dot of every set through ``TreeDot(spec, c_zero=c_zero)`` and the engine; the
    dots checked."""
    words = [w for _, vs in sets for w in payload_ints(payload_words(spec, vs))]
    where = [(name, vs, n) for name, vs in sets for n in range(vs.num_dots)]
    want = np.concatenate([engine_codes(spec, vs) for _, vs in sets])
    got = tree_codes(spec, words, c_zero)
    bad = np.nonzero(got != want)[0]
    if bad.size:
        lines = [f"spec {spec.name!r}: {bad.size} of {want.size} dots differ; first "
                 f"{min(SHOW, bad.size)}:"]
        lines += [f"  {where[x][0]} dot {where[x][2]}: want {int(want[x]):#010x} got "
                  f"{int(got[x]):#010x}; {_describe(where[x][1], where[x][2])}"
                  for x in bad[:SHOW]]
        pytest.fail("\n".join(lines), pytrace=False)
    return int(want.size)


@pytest.mark.parametrize("case", list(SPECS), ids=list(SPECS))
def test_formal_tree_equals_the_engine(case):
    """Random, adversarial (and, for E4M3 at four blocks, directed) dots: TreeDot's D is the
    reference engine's, code for code."""
    spec = SPECS[case]
    rng = np.random.default_rng(SEED)
    sets = [("random", random_set(spec)), ("adversarial", adversarial_set(spec, rng)),
            ("adversarial 2", adversarial_set(spec, rng))]
    if spec.a_format == "e4m3" and spec.k // spec.block == 4:
        sets.append(("directed", directed_set(spec)))
    assert check(spec, sets) >= 100


@pytest.mark.parametrize("case", WITHOUT_C)
def test_formal_tree_without_c_equals_the_engine(case):
    """``c_zero`` (a design without a C input): TreeDot's D, the tree's result without the C
    adder, is the engine's for C = +0 (the FP16 last level's subnormals normalised into
    FP32, a -0 tree result made +0)."""
    spec = SPECS[case]
    rng = np.random.default_rng(SEED + 1)
    sets = [(name, vs.replace(c=None)) for name, vs in
            [("random", random_set(spec)), ("adversarial", adversarial_set(spec, rng))]]
    if spec.a_format == "e4m3":
        sets.append(("directed", directed_set(spec).replace(c=None)))
    assert check(spec, sets, c_zero=True) >= 100


def test_formal_tree_directed_table_reaches_its_corners():
    """The directed table's dots give what their labels promise under the engine."""
    d = dict(zip((label for label, *_ in DIRECTED),
                 (int(x) for x in engine_codes(EXAMPLE, directed_set(EXAMPLE))), strict=True))
    assert d["tie rounded at a node"] == np.float32(2.0 ** -15).view(np.uint32)
    assert d["saturation at a node"] == E8M14_MAX
    assert d["subnormal tie"] == np.float32(2.0 ** -130).view(np.uint32)
    assert d["cancellation to zero"] == 0
    assert d["NaN code"] == d["NaN scale"] == 0x7FFFFFFF
    assert d["C = +Inf"] == 0x7F800000
    assert d["C = FP32 max over e8m14 max"] == 0x7F7FFFFF      # saturates here too


def test_formal_tree_refuses_what_it_does_not_render():
    """One line naming the unit and the keys, for specs outside the tree circuit; chains go
    to ReferenceDot, which refuses trees."""
    for change, words in [(dict(specials="none"), "specials none"),
                          (dict(zero_sign="c"), "zero_sign c"),
                          (dict(d_format="fp16", acc_format="fp16", e_zero=-21),
                           "d_format fp16"),
                          (dict(tree_formats=("e10m11", "e10m11", )), "a last tree level in "
                           "e10m11 (FP32 must hold it exactly)")]:
        spec = EXAMPLE.replace(**change)
        assert tree_problem(spec) == f"the tree reference circuit does not render {words}"
        assert dot_problem(spec) == tree_problem(spec)
        with pytest.raises(ValueError, match=re.escape(f"Unit '{spec.name}': {tree_problem(spec)}")
                           + "$"):
            TreeDot(spec)
    assert tree_problem(EXAMPLE) is None and dot_problem(EXAMPLE) is None
    ref = dot_reference(EXAMPLE, c_zero=True)
    assert isinstance(ref, TreeDot)
    Fragment.get(ref, None)                     # elaborated: used
    chain = EXAMPLE.replace(reduce="chain", group=None, frac_bits=25, c_mode="step")
    assert tree_problem(chain) == "reduce chain (the tree reference renders reduce tree)"
    assert "c_mode" not in (dot_problem(chain) or "")
    with pytest.raises(ValueError, match="reduce tree"):
        ReferenceDot(EXAMPLE)
