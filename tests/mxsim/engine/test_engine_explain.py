"""mxsim explain: the reference engine's recorded intermediates agree with its results and with
each other (re-derived here from the nodes alone), and diagnose names the computation that
reproduces a result the model does not give."""

from fractions import Fraction

import numpy as np
import pytest

from mxsim import formats, units, vectors
from mxsim.engine import fast, reference
from mxsim.engine.explain import diagnose, explain
from mxsim.engine.reference import trace
from mxsim.formats import Rounding
from mxsim.spec import Align, CMode, Reduce, UnitSpec, ZeroSign


def _q(text: str) -> Fraction | None:
    """An exact value as the trace writes it (None: NaN or Inf)."""
    if text in ("nan", "+inf", "-inf"):
        return None
    if text == "-0":
        return Fraction(0)
    if "/" in text:
        return Fraction(text)
    sig, _, e = text.partition("*2^")
    return Fraction(int(sig)) * Fraction(2) ** int(e or 0)


def _set(a_format="e4m3", k=64, family="normal", seed=1, **kw):
    return vectors.generate(family, a_format=a_format, m=2, n=3, k=k, seed=seed, **kw)


SPECS = {
    "chain-rz": UnitSpec(a_format="e4m3", b_format="e4m3", scale_format="e8m0", block=32,
                         k=32, frac_bits=13, align=Align.RZ, acc_format="fp32"),
    "chain-jam-steps": UnitSpec(a_format="e4m3", b_format="e4m3", scale_format="e8m0",
                                block=32, k=32, schedule=(tuple(range(16)),
                                                          tuple(range(16, 32))),
                                frac_bits=4, align=Align.RZ_JAM, acc_format="fp32",
                                acc_rounding=Rounding.RNE),
    "chain-rne-exact-terms": UnitSpec(a_format="e4m3", b_format="e4m3", k=16, frac_bits=None,
                                      acc_format="fp32", acc_rounding=Rounding.RD),
    "tree": UnitSpec(a_format="e4m3", b_format="e4m3", scale_format="e8m0", block=32, k=32,
                     group=4, reduce=Reduce.TREE, frac_bits=None, acc_format="fp32",
                     c_mode=CMode.AFTER, tree_formats=("bf16", "e8m10", "fp32"),
                     acc_rounding=Rounding.RNE),
    "c-after-promote": UnitSpec(a_format="e4m3", b_format="e4m3", k=16, frac_bits=8,
                                c_mode=CMode.AFTER, promote_every=2, acc_format="fp32",
                                zero_sign=ZeroSign.IEEE),
    "group": UnitSpec(a_format="e4m3", b_format="e4m3", scale_format="e8m0", block=32, k=32,
                      group=8, frac_bits=10, acc_format="fp32"),
    "zero-sign-c": UnitSpec(a_format="e4m3", b_format="e4m3", k=16, frac_bits=None,
                            acc_format="fp32", zero_sign=ZeroSign.C),
    "scale-sum-bits": UnitSpec(a_format="e4m3", b_format="e4m3", scale_format="e8m0", block=32,
                               k=32, frac_bits=13, acc_format="fp32", scale_sum_bits=8),
}


def _vs_for(spec: UnitSpec, family="normal", seed=1) -> vectors.VectorSet:
    k = 2 * spec.k * (spec.promote_every or 1)
    return _set(spec.a_format, k=k, family=family, seed=seed,
                **({"scale_format": spec.scale_format, "block": spec.block}
                   if spec.scale_format else {}))


@pytest.mark.parametrize("name", sorted(SPECS))
@pytest.mark.parametrize("family", ["normal", "cancellation", "specials"])
def test_explain_result_is_the_engines(name, family):
    """The result node is the reference's code and the fast engine's; recording changes
    nothing; every dot has its nodes."""
    spec = SPECS[name]
    vs = _vs_for(spec, family)
    plain = reference.dot(spec, vs).reshape(-1)
    np.testing.assert_array_equal(fast.dot(spec, vs).reshape(-1), plain)
    with trace.recording() as rec:
        recorded = reference.dot(spec, vs).reshape(-1)
    np.testing.assert_array_equal(recorded, plain)
    assert sorted(rec.dots) == list(range(vs.num_dots))
    for dot in range(vs.num_dots):
        ex = explain(spec, vs, dot)
        assert ex.code == int(plain[dot])
        last = ex.nodes[-1]
        assert (last.op, last.name, int(last.info["code"], 16)) == ("result", "d", ex.code)
        assert len({n.name for n in ex.nodes}) == len(ex.nodes)


def _by_name(ex):
    return {n.name: n for n in ex.nodes}


@pytest.mark.parametrize("name", ["chain-rz", "chain-jam-steps", "scale-sum-bits", "group"])
def test_explain_alignment_rederived(name):
    """Each aligned term plus what it lost is the term; the kept values (and the accumulator)
    sum to the step's exact sum; the step's value is that sum rounded as the node says."""
    spec = SPECS[name]
    vs = _vs_for(spec, "normal", seed=7)
    checked = 0
    for dot in range(vs.num_dots):
        ex = explain(spec, vs, dot)
        nodes = _by_name(ex)
        for step in (n for n in ex.nodes if n.op == "step"):
            aligned = [nodes[f"{step.name.rsplit('.', 1)[0]}.aligned.{i.rsplit('.', 1)[-1]}"]
                       for i in step.inputs]
            for a in aligned:
                term = _q(nodes[a.inputs[0]].value)
                assert _q(a.value) + _q(a.info["lost"]) == term
                assert _q(a.info["lsb"]) == Fraction(2) ** (a.info["window_top"]
                                                            - spec.frac_bits)
            assert sum(_q(a.value) for a in aligned) == _q(step.info["exact"])
            fmt = formats.get(step.info["format"])
            want = fmt.encode(np.array([float(_q(step.info["exact"]))]),
                              step.info["rounding"], saturate=False)[0]
            got = fmt.encode(np.array([float(_q(step.value))]), "rne", saturate=False)[0]
            assert want == got
            checked += 1
    assert checked >= vs.num_dots * 2


def test_explain_tree_nodes_rederived():
    """A tree of t group terms has t - 1 nodes, level by level, each the sum of its two
    inputs rounded to its level's format."""
    spec = SPECS["tree"]
    vs = _vs_for(spec, "normal", seed=3)
    ex = explain(spec, vs, 4)
    tree = [n for n in ex.nodes if n.op == "tree"]
    assert len(tree) == 2 * (spec.k // spec.group - 1)      # two instructions
    nodes = _by_name(ex)
    for n in tree:
        total = sum(_q(nodes[i].value) if i in nodes else Fraction(0) for i in n.inputs)
        fmt = formats.get(n.info["format"])
        want = fmt.encode(np.array([float(total)]), "rne", saturate=False)[0]
        assert fmt.encode(np.array([float(_q(n.value))]), "rne", saturate=False)[0] == want
    level_formats = {n.name.split(".")[1]: n.info["format"] for n in tree}
    assert level_formats == {"L1": "bf16", "L2": "e8m10", "L3": "fp32"}


def test_explain_products_hold_codes_and_scales():
    spec = SPECS["chain-rz"]
    vs = _vs_for(spec)
    ex = explain(spec, vs, 5)
    nodes = _by_name(ex)
    i, j = np.unravel_index(5, vs.out_shape)
    fa = formats.get("e4m3")
    for kk in range(vs.k):
        p = nodes[f"i{kk // 32}.s0.p{kk}"]
        assert int(p.info["a"], 16) == int(vs.a[i, kk])
        assert int(p.info["b"], 16) == int(vs.b[kk, j])
        scale = nodes[f"i{kk // 32}.s0.scale{kk // 32}"]
        value = Fraction(float(fa.decode(vs.a[i, kk]))) * Fraction(float(fa.decode(
            vs.b[kk, j]))) * _q(scale.value)
        assert _q(p.value) == value
    assert int(nodes["c"].info["code"], 16) == int(vs.c[i, j])


def test_explain_exact_unit():
    vs = _set(k=32, scale_format="e8m0", block=32)
    spec = units.get("exact").spec_for(vs)
    ex = explain(spec, vs, 2)
    assert ex.nodes[-1].op == "result"
    assert sum(1 for n in ex.nodes if n.op == "product") == 32
    assert ex.code == int(reference.dot(spec, vs).reshape(-1)[2])


def test_explain_rejects_a_dot_outside_the_set():
    spec = SPECS["chain-rz"]
    with pytest.raises(ValueError, match="has 6 dot products"):
        explain(spec, _vs_for(spec), 6)


def _observed(spec, vs, dot, **change):
    one = vs.take_dots([dot])
    return int(reference.dot(spec, one.replace(**change) if change else one).reshape(-1)[0])


def test_diagnose_names_a_dropped_block_and_product():
    spec = SPECS["chain-rz"]
    vs = _vs_for(spec, seed=11)
    one = vs.take_dots([3])
    a = one.a.copy()
    a[..., 32:64] = 0
    got = _observed(spec, one, 0, a=a)
    assert any(h.changes == {"drop_block": 1} for h in diagnose(spec, one, 0, got))
    a = one.a.copy()
    a[..., 17] = 0
    got = _observed(spec, one, 0, a=a)
    found = diagnose(spec, one, 0, got)
    assert any(h.changes == {"drop_product": 17} for h in found), found


def test_diagnose_names_c_and_a_rounding():
    spec = SPECS["chain-rz"].replace(acc_format="e8m10")       # sums that round
    vs = _vs_for(spec, seed=5)
    for dot in range(vs.num_dots):
        one = vs.take_dots([dot])
        got = _observed(spec, one, 0, c=np.zeros_like(one.c))
        if got != _observed(spec, one, 0):
            assert any(h.what.startswith("the sum without C") for h in
                       diagnose(spec, one, 0, got))
        other = spec.replace(acc_rounding=Rounding.RU)
        got = int(reference.dot(other, one).reshape(-1)[0])
        if got != _observed(spec, one, 0):
            assert any(h.changes == {"acc_rounding": "ru"} for h in diagnose(spec, one, 0, got))
            return
    pytest.fail("no dot where RU and RZ differ")


def test_diagnose_finds_nothing_for_a_far_result():
    spec = SPECS["chain-rz"]
    vs = _vs_for(spec)
    ex = explain(spec, vs, 0, observed=0x3F800001)
    assert ex.consistent == ()
    assert "consistent with none" in ex.format()
    same = explain(spec, vs, 0, observed=ex.code)
    assert "equal to the model's" in same.format()


def test_diagnose_names_a_block_scale_one_binade_off():
    spec = SPECS["chain-rz"]
    one = _vs_for(spec, seed=13).take_dots([2])
    a_scale = one.a_scale.copy()
    a_scale[..., 1] -= 1
    got = _observed(spec, one, 0, a_scale=a_scale)
    found = diagnose(spec, one, 0, got)
    assert {"block_scale": 1, "exponent": -1} in [h.changes for h in found], found


def test_diagnose_names_one_tree_node_rounded_otherwise():
    """A result whose one tree node rounds RZ (computed by the reference engine told to) is
    named as exactly that node, where no spec-wide change explains it."""
    spec = SPECS["tree"]
    vs = _vs_for(spec, "normal", seed=21)
    named = 0
    for dot in range(vs.num_dots):
        one = vs.take_dots([dot])
        with trace.recording({"i1.L1.n2": {"rounding": "rz"}}):
            got = int(reference.dot(spec, one).reshape(-1)[0])
        if got == _observed(spec, one, 0):
            continue
        found = diagnose(spec, one, 0, got)
        assert found, dot
        if all(h.kind == "node" for h in found):
            assert {"node": "i1.L1.n2", "rounding": "rz"} in [h.changes for h in found]
            named += 1
    assert named >= 1


@pytest.mark.parametrize("name, kw", [
    ("hopper-cublas-rowwise", dict(scale_granularity="row", k=256, m=2, n=2)),
    ("hopper-cublas-blockwise", dict(scale_granularity="block", k=256, m=1, n=128)),
])
def test_explain_fp32_scale_epilogues(name, kw):
    """Units whose FP32 scales an epilogue applies: the last node is D, the engines' code;
    a block-wise set (whose dots cannot be taken one by one) keeps each K block's nodes."""
    vs = vectors.generate("normal", a_format="e4m3", scale_format="fp32", with_c=False,
                          seed=2, **kw)
    spec = units.get(name).spec_for(vs)
    ex = explain(spec, vs, 1)
    assert ex.code == int(fast.dot(spec, vs).reshape(-1)[1])
    assert int(ex.nodes[-1].info["code"], 16) == ex.code
    names = {n.name for n in ex.nodes}
    if name.endswith("blockwise"):
        assert {"k0.d", "k128.d", "fma0", "fma1", "d"} <= names


def test_diagnose_names_a_tree_node_one_ulp_off():
    spec = SPECS["tree"]
    vs = _vs_for(spec, "normal", seed=22)
    for dot in range(vs.num_dots):
        one = vs.take_dots([dot])
        with trace.recording({"i0.L2.n0": {"ulp": -1}}):
            got = int(reference.dot(spec, one).reshape(-1)[0])
        if got != _observed(spec, one, 0):
            found = diagnose(spec, one, 0, got)
            assert {"node": "i0.L2.n0", "ulp": -1} in [h.changes for h in found], found
            return
    pytest.fail("no dot where the node's last place shows")


def test_explain_scale_node_is_the_scale_the_unit_uses():
    """With scale_sum_bits the scale node holds 2 to the sum as the field holds it (wrapped),
    the raw sum beside it; the products are scaled by that."""
    spec = SPECS["scale-sum-bits"].replace(scale_sum_bits=4)
    vs = _vs_for(spec, "scale-extremes", seed=3)
    wrapped = 0
    for dot in range(vs.num_dots):
        for n in explain(spec, vs, dot).nodes:
            if n.op != "scale":
                continue
            held, raw = n.info["held"], n.info["exponent_sum"]
            assert -8 <= held <= 7 and (raw - held) % 16 == 0
            assert _q(n.value) == Fraction(2) ** held
            wrapped += held != raw
    assert wrapped, "no block's exponent sum left 4 bits"


def test_nudge_steps_one_unit_in_the_last_place():
    from mxsim.engine.reference import _nudge
    from mxsim.engine.reference.values import Val as _Val

    fmt = formats.get("e8m11")
    one = _Val("num", Fraction(1))
    assert _nudge(one, fmt, 1).q == 1 + Fraction(1, 2 ** 11)
    assert _nudge(one, fmt, -1).q == 1 - Fraction(1, 2 ** 12)     # the binade below 1
    neg = _Val("num", Fraction(-3), True)
    assert _nudge(neg, fmt, -1).q == -3 + Fraction(2, 2 ** 11)
