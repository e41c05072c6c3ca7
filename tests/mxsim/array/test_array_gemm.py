"""mxsim.array.gemm and numerics: D's bits per the dataflow's accumulation order, beside timing.

The fast path (the engine per K-tile and its exact-sum adder) is held equal to the exact
reference (the reference engine per K-tile and rational adds) on random and adversarial
operands; a hand-built case shows the K-tile order giving other bits than the chain when the
unit's accumulator truncates, and cases where the orders must agree do.
"""

import numpy as np
import pytest

from mxsim import formats
from mxsim.array import ArrayError, ArraySpec, gemm, numerics
from mxsim.design import resolve_design
from mxsim.engine import fast
from mxsim.engine.reference import matmul_exact
from mxsim.errors import MxsimError
from mxsim.vectors import VectorSet, generators

SPEC, UA = resolve_design("blackwell-mxf8f6f4", "e4m3", "e4m3", lanes=8)   # RZ, F = 25
E4M3, E8M0 = formats.get("e4m3"), formats.get("e8m0")


def _code(fmt, value: float) -> int:
    return int(fmt.encode(np.array([value]))[0])


def _sets(k=128, m=3, n=2):
    fams = ["normal", "llm", "cancellation", "one-large", "c-dominant", "specials",
            "scale-extremes", "max"]
    return [(f, generators.generate(f, a_format="e4m3", m=m, n=n, k=k, scale_format="e8m0",
                                    block=32, seed=i)) for i, f in enumerate(fams)]


@pytest.mark.parametrize("order,k_tile", [("chain", None), ("tiles", 64), ("tiles", 96)])
def test_fast_path_equals_the_exact_reference(order, k_tile):
    for fam, vs in _sets():
        got = numerics.accumulate(SPEC, vs, order, k_tile)
        ref = numerics.accumulate_reference(SPEC, vs, order, k_tile)
        assert np.array_equal(got, ref), fam


def test_tiles_are_the_engines_promotion_every_k_tile():
    """A third route: K-tiles of R instructions added in FP32 RNE is the engine's promotion
    (promote_every = R, promote_rounding = rne)."""
    promoted = SPEC.replace(promote_every=2, promote_rounding="rne")
    for fam, vs in _sets(k=256, m=4, n=4):
        assert np.array_equal(numerics.accumulate(SPEC, vs, "tiles", 2 * SPEC.k),
                              fast.dot(promoted, vs)), fam


def _one_plus_three_quarter_ulp() -> VectorSet:
    """K = 64, two K-blocks: block 0 sums to 1.0, block 1 to 1.5 x 2^-24 (= 0.75 ulp of 1)."""
    a = np.zeros((1, 64), np.uint8)
    b = np.zeros((64, 1), np.uint8)
    a[0, 0], b[0, 0] = _code(E4M3, 1.0), _code(E4M3, 1.0)
    a[0, 32], b[32, 0] = _code(E4M3, 1.5), _code(E4M3, 1.0)
    sa = np.array([[_code(E8M0, 1.0), _code(E8M0, 2.0 ** -24)]], np.uint8)
    sb = np.full((2, 1), _code(E8M0, 1.0), np.uint8)
    return VectorSet(a=a, b=b, a_format="e4m3", b_format="e4m3", a_scale=sa, b_scale=sb,
                     scale_format="e8m0", block=32)


def test_the_tile_order_changes_d_when_the_accumulator_truncates():
    """OS (the chain) truncates 1 + 0.75 ulp to 1.0 in the unit's RZ step; WS with a tensor
    memory adds the K-tiles in FP32 RNE and gets 1 + 1 ulp, the exactly rounded value."""
    vs = _one_plus_three_quarter_ulp()
    os_ = ArraySpec(unit=SPEC, microarch=UA, rows=1, cols=1, dataflow="os")
    ws = os_.replace(dataflow="ws", accumulators={"kind": "tmem"})
    ws_reg = os_.replace(dataflow="ws")
    d_os = gemm.gemm(os_, 1, 1, 64, vs=vs, view="analytic").d
    d_ws = gemm.gemm(ws, 1, 1, 64, vs=vs, view="analytic").d
    d_reg = gemm.gemm(ws_reg, 1, 1, 64, vs=vs, view="analytic").d
    exact = matmul_exact(vs)
    assert int(d_os[0, 0]) == 0x3F800000                    # 1.0: truncated in the chain
    assert int(d_ws[0, 0]) == 0x3F800001 == int(exact[0, 0])  # 1 + ulp: rounded once
    assert int(d_reg[0, 0]) == 0x3F800000                   # registers keep the chain
    assert np.array_equal(d_ws, numerics.accumulate_reference(SPEC, vs, "tiles", 32))


def test_orders_agree_where_they_must():
    """(1) One K-tile and no C: adding it to +0 is exact (with C it is not: C joins the
    chain in one order and is added in FP32 in the other). (2) Small integers: every partial sum is
    exact, so every order gives the exact result. (3) Registers: WS is the chain of OS."""
    rng = np.random.default_rng(3)
    for fam, vs in _sets(k=64):
        vs = vs.replace(c=None)
        assert np.array_equal(numerics.accumulate(SPEC, vs, "tiles", 64),
                              numerics.accumulate(SPEC, vs, "chain")), fam
    small = [_code(E4M3, v) for v in (-2.0, -1.0, 0.0, 1.0, 2.0)]
    a = rng.choice(small, (5, 512)).astype(np.uint8)
    b = rng.choice(small, (512, 4)).astype(np.uint8)
    one = _code(E8M0, 1.0)
    vs = VectorSet(a=a, b=b, a_scale=np.full((5, 16), one, np.uint8),
                   b_scale=np.full((16, 4), one, np.uint8), scale_format="e8m0", block=32)
    exact = matmul_exact(vs)
    for k_tile in (32, 64, 160):
        assert np.array_equal(numerics.accumulate(SPEC, vs, "tiles", k_tile), exact)
    assert np.array_equal(numerics.accumulate(SPEC, vs, "chain"), exact)
    for df in ("os", "ws", "is"):
        arr = ArraySpec(unit=SPEC, microarch=UA, rows=2, cols=2, dataflow=df)
        assert np.array_equal(gemm.gemm(arr, 5, 4, 512, vs=vs, view="analytic").d,
                              numerics.accumulate(SPEC, vs, "chain"))


def test_bad_orders_and_shapes_are_one_line_errors():
    vs = _one_plus_three_quarter_ulp()
    for args, msg in [(("sideways", None), "accumulation order must be one of"),
                      (("tiles", 48), r"multiple of the unit's k \(32\), not 48"),
                      (("tiles", None), "multiple of the unit's k")]:
        with pytest.raises(MxsimError, match=msg) as e:
            numerics.accumulate(SPEC, vs, *args)
        assert "\n" not in str(e.value)
    arr = ArraySpec(unit=SPEC, microarch=UA, rows=2, cols=2)
    with pytest.raises(ArrayError, match="operands are 1 x 1 x 64"):
        gemm.gemm(arr, 2, 1, 64, vs=vs)
    with pytest.raises(ArrayError, match="multiple of"):
        gemm.gemm(arr, 2, 1, 48)
    with pytest.raises(ArrayError, match="view must be one of"):
        gemm.gemm(arr, 2, 1, 64, view="fast")


@pytest.mark.parametrize("dataflow,acc", [("os", "registers"), ("os", "tmem")])
def test_one_run_gives_bits_and_the_cycle_models_timing(dataflow, acc):
    """A GEMM small enough to step: D from the engine in the dataflow's order, equal to the
    cycle model's own D (by the engine's promotion route), and the cycle model's timing,
    equal to the closed form's."""
    arr = ArraySpec(unit=SPEC, microarch=UA, rows=2, cols=3, dataflow=dataflow,
                    interleave=2, accumulators={"kind": acc, "read_ports": 8, "write_ports": 8})
    vs = gemm.operands(arr, 5, 7, 128, family="llm", seed=4)
    run = gemm.gemm(arr, 5, 7, 128, vs=vs)
    assert run.view == "cycle" and run.extra["cycle_model_d_equal"]
    assert np.array_equal(run.d, numerics.accumulate_reference(SPEC, vs, run.order,
                                                               run.k_tile))
    est = gemm.gemm(arr, 5, 7, 128, view="analytic")
    assert est.exact and (est.cycles, est.stalls, est.traffic) == (run.cycles, run.stalls,
                                                                   run.traffic)
    assert est.d is None and 0 < run.utilisation <= 1 and run.macs_per_cycle > 0


def test_cli_array_prints_timing_and_bits(capsys, tmp_path):
    import json

    from mxsim import cli
    assert cli.main(["array", "6", "5", "64", "--rows", "2", "--cols", "2", "--lanes", "8",
                     "--operands", "normal", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["view"] == "cycle" and data["cycle_model_d_equal"] and len(data["d"]) == 6
    path = tmp_path / "a.toml"
    path.write_text(ArraySpec(unit=SPEC, microarch=UA, rows=2, cols=2, dataflow="ws",
                              accumulators={"kind": "tmem"}).dumps())
    assert cli.main(["array", "6", "5", "64", "--array", str(path), "--view", "analytic"]) == 0
    assert "K-tiles of 64" in capsys.readouterr().out
    for bad in (["array", "4", "4", "48"], ["array", "4", "4", "64", "--array", "/no.toml"]):
        assert cli.main(bad) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("mxsim: error:") and "\n" not in err
