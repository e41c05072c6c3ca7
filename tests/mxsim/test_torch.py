"""mxsim.torch: the functions, the recipes, emulate() and scaled_mm against real H200 outputs.

Bits are compared, never floats: results are viewed as int32/int16 and held equal to a float64
reference rounded once, to api-level ``mxsim.matmul``/``mxsim.gemm`` runs on the same codes,
and to the committed H200 outputs of ``torch._scaled_mm`` (tests/data/h200).
"""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import mxsim  # noqa: E402
import mxsim.torch as mt  # noqa: E402
from mxsim import formats  # noqa: E402
from mxsim.errors import MxsimError  # noqa: E402
from mxsim.quantize.fp8 import to_fp8_amax, to_fp8_blocks  # noqa: E402
from mxsim.quantize.recipes import recipe  # noqa: E402
from mxsim.torch.tensors import bf16_rne  # noqa: E402

DATA = Path(__file__).parents[1] / "data" / "h200"
SEED = 20261202
FP8 = {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2}


def _u32(t):
    assert t.dtype == torch.float32
    return t.contiguous().view(torch.int32).numpy().view(np.uint32)


def _u16(t):
    assert t.dtype in (torch.bfloat16, torch.float16)
    return t.contiguous().view(torch.int16).numpy().view(np.uint16)


def _grid(rng, shape, adversarial=False):
    """bf16 values k * 2**-6 (|k| <= 255): products and sums of K <= 512 are exact in
    float64, so float64 sums rounded once to FP32 are the exact unit's results."""
    k = rng.integers(-255, 256, size=shape)
    if adversarial:                     # ties, cancellation, runs of one value, zeros
        k[..., ::7] = 255
        k[..., 1::7] = -255
        k[..., 2::5] = 0
    return torch.from_numpy((k * 2.0 ** -6).astype(np.float32))


def test_import_mxsim_does_not_import_torch():
    code = "import sys, mxsim, mxsim.torch; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=Path(__file__).parents[2])
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize("adversarial", [False, True], ids=["random", "adversarial"])
def test_torch_matmul_exact_none_is_the_float64_sum_rounded_once(adversarial):
    rng = np.random.default_rng(SEED)
    x, w = _grid(rng, (6, 512), adversarial), _grid(rng, (512, 5), adversarial)
    ref = (x.double() @ w.double()).float()             # exact in float64, then one rounding
    got = mt.matmul(x, w)                                # float32 in, float32 out
    np.testing.assert_array_equal(_u32(got), _u32(ref))
    assert (_u32(ref) & 0xFFFF).any()                    # rounding happened: not all bf16
    xb, wb = x.bfloat16(), w.bfloat16()
    got16 = mt.matmul(xb, wb)
    assert got16.dtype == torch.bfloat16
    np.testing.assert_array_equal(_u16(got16), _u16(ref.bfloat16()))


def test_torch_matmul_batched_and_vector_shapes_follow_torch():
    rng = np.random.default_rng(SEED + 1)
    x, w = _grid(rng, (2, 3, 64)), _grid(rng, (64, 4))
    wb = _grid(rng, (2, 64, 4))
    for a, b in ((x, w), (x, wb), (x[0, 0], w), (x, w[:, 0]), (x[0, 0], w[:, 0])):
        got, ref = mt.matmul(a, b), (a.double() @ b.double()).float()
        assert got.shape == ref.shape
        np.testing.assert_array_equal(_u32(got), _u32(ref))
    per_entry = np.stack([_u32(mt.matmul(x[i], wb[i], recipe="mxfp8",
                                         unit="blackwell-mxf8f6f4")) for i in range(2)])
    np.testing.assert_array_equal(_u32(mt.matmul(x, wb, recipe="mxfp8",
                                                 unit="blackwell-mxf8f6f4")), per_entry)


def _xw(seed, m=8, k=256, n=128):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((m, k)).astype(np.float32) * np.float32(3.0)
    w = rng.standard_normal((k, n)).astype(np.float32) * np.float32(0.05)
    return torch.from_numpy(x), torch.from_numpy(w)


@pytest.mark.parametrize("name,unit,rule", [
    ("mxfp8", "blackwell-mxf8f6f4", "floor"), ("mxfp8", "exact", "rceil"),
    ("mxfp8-e5m2", "blackwell-mxf8f6f4", "floor"), ("mxfp6-e2m3", "blackwell-mxf8f6f4", "even"),
    ("mxfp6-e3m2", "ocp-fp32", "floor"), ("mxfp4", "blackwell-mxf4", "ceil")])
def test_torch_mx_recipes_equal_api_gemm(name, unit, rule):
    x, w = _xw(SEED + 2)
    fmt = recipe(name).elements
    want = mxsim.gemm(x.numpy(), w.numpy(), unit=unit, recipe="mx", x_format=fmt, w_format=fmt,
                      scale_rule=rule)
    got = mt.matmul(x, w, unit=unit, recipe=name, scale_rule=rule)
    np.testing.assert_array_equal(_u32(got), want.view(np.uint32))


@pytest.mark.parametrize("unit", ["blackwell-mxf4nvf4", "exact"])
def test_torch_nvfp4_is_two_level_with_alpha(unit):
    x, w = _xw(SEED + 3)
    sa, a, ta = mxsim.quantize.to_nvfp4(x.numpy(), axis=-1)
    sb, b, tb = mxsim.quantize.to_nvfp4(w.numpy(), axis=0)
    alpha = np.float32(ta) * np.float32(tb)
    if unit == "exact":                         # the exact unit: one rounding of alpha * A·B
        want = mxsim.matmul(a, b, unit=unit, a_format="e2m1", a_scale=sa, b_scale=sb,
                            scale_format="ue4m3", tensor_scale=alpha)
    else:                                       # cuBLASLt's alpha: fl32(alpha * D) + 0
        d = mxsim.matmul(a, b, unit=unit, a_format="e2m1", a_scale=sa, b_scale=sb,
                         scale_format="ue4m3").view(np.float32)
        want = (alpha * d + np.float32(0)).view(np.uint32)
    np.testing.assert_array_equal(_u32(mt.matmul(x, w, unit=unit, recipe="nvfp4")), want)


def test_fp8_amax_recipe_is_torchaos_cast():
    """fp8-tensor and fp8-row codes and factors are torchao 0.18's Float8 casts, bit for bit."""
    futils = pytest.importorskip("torchao.float8.float8_utils")
    x, _ = _xw(SEED + 4, m=16, k=512)
    x[3, 7] = 1e-30                                       # tiny, and a row of zeros
    x[5] = 0
    for axis, pow2 in ((None, False), (-1, True), (-1, False)):
        amax = x.abs().amax() if axis is None else x.abs().amax(dim=axis, keepdim=True)
        scale = futils.amax_to_scale(amax, torch.float8_e4m3fn, pow2)
        ref = futils.to_fp8_saturated(x.float() * scale, torch.float8_e4m3fn)
        codes, factor = to_fp8_amax(x.numpy(), "e4m3", axis=axis, pow2=pow2)
        np.testing.assert_array_equal(codes, ref.view(torch.uint8).numpy())
        np.testing.assert_array_equal(factor.view(np.uint32),
                                      scale.reciprocal().numpy().view(np.uint32))


def test_fp8_fast_encoder_equals_exact_encoder():
    rng = np.random.default_rng(SEED + 5)
    x = (rng.standard_normal((256, 512)) * np.exp2(rng.integers(-30, 30, (256, 1)))).astype(
        np.float32)
    x[0, :8] = [448.0, -448.0, 464.0, 2.0 ** -9, 2.0 ** -10, 3 * 2.0 ** -11, 0.0, -0.0]
    for fmt in ("e4m3", "e5m2"):
        for axis in (None, -1, -2):
            fast, exact = (to_fp8_amax(x, fmt, axis=axis, fast=f) for f in (True, False))
            np.testing.assert_array_equal(fast[0], exact[0])
        for tile in ((1, 128), (128, 128)):
            fast, exact = (to_fp8_blocks(x, fmt, tile=tile, fast=f) for f in (True, False))
            np.testing.assert_array_equal(fast[0], exact[0])


def test_bf16_output_rounding_fast_equals_exact():
    rng = np.random.default_rng(SEED + 6)
    bits = rng.integers(0, 2 ** 32, 200_000, dtype=np.uint64).astype(np.uint32)
    edges = np.array([0x7F7FFFFF, 0x7F7F8000, 0x7F7F7FFF, 0x00008000, 0x00018000, 0x3F808000,
                      0x3F818000, 0x7F800000, 0xFF800000, 0x80000000, 0, 0x807FFFFF,
                      0x7FC00001, 0xFFC12345], np.uint32)
    bits = np.concatenate([bits, edges])
    quiet = ~(((bits & 0x7FFFFFFF) > 0x7F800000) & ((bits & 0x00400000) == 0))   # no sNaN
    exact = bf16_rne(bits[quiet], exact=True)
    np.testing.assert_array_equal(bf16_rne(bits[quiet], kernel=False), exact)
    np.testing.assert_array_equal(bf16_rne(bits[quiet], kernel=True), exact)
    # Every NaN (signalling ones included): the compiled formula's codes are numpy's.
    nans = np.concatenate([bits, rng.integers(0x7F800001, 0x80000000, 4096, dtype=np.uint64)
                           .astype(np.uint32) | np.uint32(0x80000000) * rng.integers(
                               0, 2, 4096, dtype=np.uint32)])
    np.testing.assert_array_equal(bf16_rne(nans, kernel=True), bf16_rne(nans, kernel=False))
    assert bf16_rne(bits[:64].reshape(8, 8)[:, :3], kernel=True).shape == (8, 3)


@pytest.mark.parametrize("name,unit", [
    ("fp8-tensor", "exact"), ("fp8-tensor", "hopper-cublas-rowwise"), ("fp8-row", "exact"),
    ("fp8-row", "hopper-cublas-rowwise"), ("fp8-block", "exact"),
    ("fp8-block", "hopper-cublas-blockwise")])
def test_torch_fp8_recipes_equal_api_matmul_on_the_same_codes(name, unit):
    x, w = _xw(SEED + 7)
    qa, qb = recipe(name).quantise(x.numpy(), "a"), recipe(name).quantise(w.numpy(), "b")
    want = mxsim.matmul(qa.codes, qb.codes, unit=unit, a_scale=qa.scale, b_scale=qb.scale,
                        scale_format="fp32", block=qa.block)
    np.testing.assert_array_equal(_u32(mt.matmul(x, w, unit=unit, recipe=name)), want)


@pytest.mark.parametrize("name", ["fp8-tensor", "fp8-row"])
def test_torch_fp8_on_fast_accum_is_the_chain_then_the_epilogue(name):
    """hopper-cublas-fast takes no scales: its D, then cuBLASLt's epilogue in FP32."""
    x, w = _xw(SEED + 8)
    qa, qb = recipe(name).quantise(x.numpy(), "a"), recipe(name).quantise(w.numpy(), "b")
    d = mxsim.matmul(qa.codes, qb.codes, unit="hopper-cublas-fast").view(np.float32)
    if name == "fp8-tensor":
        want = (qa.scale * qb.scale) * d + np.float32(0)
    else:
        want = (d * qb.scale) * qa.scale
    got = mt.matmul(x, w, unit="hopper-cublas-fast", recipe=name)
    np.testing.assert_array_equal(_u32(got), want.view(np.uint32))


def test_torch_linear_and_addmm_add_the_bias_in_fp32_then_round():
    x, w = _xw(SEED + 9, m=4, k=128, n=32)
    bias = torch.from_numpy(np.random.default_rng(1).standard_normal(32).astype(np.float32))
    xb, wb, bb = x.bfloat16(), w.T.contiguous().bfloat16(), bias.bfloat16()
    d = _u32(mt.matmul(xb.float(), wb.T.float())).view(np.float32)
    want = bf16_rne((d + bb.float().numpy()).view(np.uint32))
    np.testing.assert_array_equal(_u16(mt.linear(xb, wb, bb)), want)
    np.testing.assert_array_equal(_u16(mt.functions.addmm(bb, xb, wb.T)), want)


def _model_ops(x, w, lin, a8, b8, one):
    return [lin(x), x @ w, torch.matmul(x, w), torch.mm(x, w), x.mm(w),
            torch.bmm(x[None], w[None])[0], torch.addmm(lin.bias, x, w), x.matmul(w),
            torch._scaled_mm(a8, b8, one, one, out_dtype=torch.bfloat16)]


def test_emulate_routes_every_op_and_gives_the_functions_bits():
    torch.manual_seed(0)
    x, w = torch.randn(16, 64).bfloat16(), torch.randn(64, 32).bfloat16()
    lin = torch.nn.Linear(64, 32).bfloat16()
    a8 = torch.randn(16, 64).to(torch.float8_e4m3fn)
    b8 = torch.randn(32, 64).to(torch.float8_e4m3fn).t()
    one = torch.ones((), dtype=torch.float32)
    with torch.no_grad(), mt.emulate(unit="hopper-cublas", recipe="fp8-row") as mode:
        got = _model_ops(x, w, lin, a8, b8, one)
    assert dict(mode.calls) == {"linear": 1, "matmul": 3, "mm": 2, "bmm": 1, "addmm": 1,
                                "_scaled_mm": 1}
    kw = dict(unit="hopper-cublas", recipe="fp8-row")
    with torch.no_grad():
        mm = mt.matmul(x, w, **kw)
        want = [mt.linear(x, lin.weight, lin.bias, **kw)] + [mm] * 5 + [
            mt.functions.addmm(lin.bias, x, w, **kw), mm,
            mt.scaled_mm(a8, b8, one, one, out_dtype=torch.bfloat16)]
    for g, v in zip(got, want, strict=True):
        np.testing.assert_array_equal(_u16(g), _u16(v))
    with torch.no_grad():                                  # outside the mode: torch again
        assert torch.equal(lin(x), torch.nn.functional.linear(x, lin.weight, lin.bias))
    ints = torch.arange(6).reshape(2, 3)
    with mt.emulate() as mode:                             # integer products are not routed
        assert torch.equal(ints @ ints.T, torch.tensor([[5, 14], [14, 50]]))
    assert not mode.calls


def _scaled_args(vs):
    a = torch.from_numpy(np.ascontiguousarray(vs.a.reshape(vs.m, vs.k))).view(FP8[vs.a_format])
    b = torch.from_numpy(np.ascontiguousarray(vs.b.reshape(vs.k, vs.n).T)).view(
        FP8[vs.b_format]).t()
    if vs.scale_format is None:
        sa = sb = np.float32(1.0)
    else:
        sa, sb = vs.a_scale, vs.b_scale
        if np.ndim(sa) == 3:
            sa, sb = sa[0], sb[0]
    return a, b, torch.from_numpy(np.array(sa, np.float32)), torch.from_numpy(
        np.array(sb, np.float32))


def test_scaled_mm_equals_the_h200_on_every_committed_scaled_mm_sample():
    """h200_paths (fast accumulation on and off, per-tensor, row-wise, block-wise), the
    unscaled fast/no-fast samples, and 16 rows of each held-out FP32-scaled set:
    torch._scaled_mm's real outputs, FP32, reproduced by mxsim.torch.scaled_mm."""
    from gpu.runs import records
    from gpu.runs.sets import load_bundle
    sets = [vs for k, vs in load_bundle(DATA / "h200_paths.npz").items()
            if k.startswith("cublas")]
    for name in ("h200_cublas_fast", "h200_cublas_noacc"):
        sets += list(load_bundle(DATA / f"{name}.npz").values())
    run = {r.name: r for r in records.runs()}["2026-12-01/heldout"]
    for key, vs in load_bundle(DATA / "2026-12-01" / "heldout" / "heldout.npz").items():
        if run.sets[int(key)]["path"] == "cublas" and vs.scale_format == "fp32":
            part = vs.subset(slice(0, 16))                     # 16 rows of each: the cost
            sets.append(part.replace(extra={**vs.extra, "use_fast_accum": False}))
    seen = set()
    for vs in sets:
        fast = bool(vs.extra["use_fast_accum"])
        got = mt.scaled_mm(*_scaled_args(vs), out_dtype=torch.float32, use_fast_accum=fast)
        np.testing.assert_array_equal(_u32(got), vs.d.reshape(vs.m, vs.n))
        seen.add((fast, "none" if vs.scale_format is None else "tensor"
                  if np.ndim(vs.a_scale) == 0 else "block" if vs.block else "row"))
    assert seen == {(True, "none"), (False, "none"), (True, "tensor"), (False, "tensor"),
                    (True, "row"), (False, "row"), (False, "block")}


def test_scaled_mm_bf16_output_and_bias_equal_the_h200():
    """The bias run (no fast accumulation, per-tensor and row-wise, K = 256): FP32, bf16 and
    bf16 with a bf16 bias, on the first 32 rows of each set."""
    arr = np.load(DATA / "2026-12-01" / "bias-bf16" / "bias.npz")
    meta = json.loads((DATA / "2026-12-01" / "bias-bf16" / "bias.json").read_text())
    rows = slice(0, 32)
    for row in meta["rows"]:
        k = row["key"]
        a = torch.from_numpy(arr[f"{k}/a"][rows].copy()).view(torch.float8_e4m3fn)
        b = torch.from_numpy(arr[f"{k}/b"].T.copy()).view(torch.float8_e4m3fn).t()
        sa = np.asarray(arr[f"{k}/a_scale"], np.float32)
        sa = torch.from_numpy(sa[rows].copy() if sa.ndim else sa.copy())
        sb = torch.from_numpy(np.asarray(arr[f"{k}/b_scale"], np.float32).copy())
        bias = torch.from_numpy(arr[f"{k}/bias"].view(np.int16)).view(torch.bfloat16)
        f32 = mt.scaled_mm(a, b, sa, sb, out_dtype=torch.float32)
        np.testing.assert_array_equal(_u32(f32), arr[f"{k}/d_plain_fp32"][rows])
        bf = mt.scaled_mm(a, b, sa, sb, out_dtype=torch.bfloat16)
        np.testing.assert_array_equal(_u16(bf), arr[f"{k}/d_plain_bf16"][rows])
        bb = mt.scaled_mm(a, b, sa, sb, bias=bias, out_dtype=torch.bfloat16)
        np.testing.assert_array_equal(_u16(bb), arr[f"{k}/d_bias_bf16_bf16"][rows])


def test_scaled_mm_picks_the_unit_from_scales_and_fast_accum():
    from mxsim.torch.scaled import granularity, scaled_unit
    assert granularity((), (1,), 8, 16, 256) == "tensor"
    assert granularity((8, 1), (1, 16), 8, 16, 256) == "row"
    assert granularity((8, 4), (4, 1), 8, 128, 512) == "block"
    assert scaled_unit("tensor", True) == "hopper-cublas-fast"
    assert scaled_unit("row", False) == "hopper-cublas-rowwise"
    assert scaled_unit("block", False) == "hopper-cublas-blockwise"


def _bad_cases():
    x, w = torch.ones(4, 64), torch.ones(64, 8)
    a8 = torch.ones(16, 512).to(torch.float8_e4m3fn)
    b8 = torch.ones(128, 512).to(torch.float8_e4m3fn).t()
    one = torch.ones((), dtype=torch.float32)
    sa, sb = torch.ones(16, 4), torch.ones(4, 1)
    nan = x.clone()
    nan[0, 0] = float("nan")
    return [
        (lambda: mt.matmul(x, w, unit="no-such-unit"), "no-such-unit"),
        (lambda: mt.matmul(x, w, recipe="fp9"), r"^Recipe must be one of none, mxfp8"),
        (lambda: mt.matmul(x, torch.ones(63, 8)), r"do not chain \(K 64 against 63\)"),
        (lambda: mt.matmul(nan, w, recipe="fp8-tensor"), "needs finite inputs"),
        (lambda: mt.matmul(x.int(), w), "must be float32, bfloat16, float16 or float64"),
        (lambda: mt.matmul(x, w, recipe="fp8-row", scale_rule="floor"), "takes no option"),
        (lambda: mt.matmul(x, w, unit="hopper-cublas", recipe="mxfp8"), "hopper-cublas"),
        (lambda: mt.matmul(x.requires_grad_(), w), "^mxsim.torch is forward only"),
        (lambda: mt.matmul(torch.ones(4, 128), torch.ones(128, 128), unit="hopper-cublas-fast",
                           recipe="fp8-block"),
         "cannot apply block-wise FP32 scales"),
        (lambda: mt.scaled_mm(a8, b8, sa, sb, out_dtype=torch.bfloat16, use_fast_accum=True),
         "refuses fast accumulation with block-wise scales"),
        (lambda: mt.scaled_mm(a8, b8, one, one), "^out_dtype must be"),
        (lambda: mt.scaled_mm(a8, b8, one, one, bias=torch.ones(128).bfloat16(),
                              out_dtype=torch.float32), "Bias is not supported"),
        (lambda: mt.scaled_mm(a8, b8, torch.ones(3), one, out_dtype=torch.float32),
         "neither per-tensor"),
        (lambda: mt.scaled_mm(x, b8, one, one, out_dtype=torch.float32),
         "^a must be torch.float8_e4m3fn"),
        (lambda: mt.emulate(unit="nope"), "nope"),
    ]


@pytest.mark.parametrize("case", range(15))
def test_torch_bad_input_is_one_line_mxsim_error(case):
    fn, match = _bad_cases()[case]
    with pytest.raises(MxsimError, match=match) as info:
        fn()
    assert "\n" not in str(info.value)


def test_recipes_table_names_every_recipe():
    assert list(mt.RECIPES) == ["none", "mxfp8", "mxfp8-e5m2", "mxfp6-e2m3", "mxfp6-e3m2",
                                "mxfp4", "nvfp4", "fp8-tensor", "fp8-row", "fp8-block"]
    doc = (Path(__file__).parents[2] / "docs" / "torch.md").read_text()
    for name, r in mt.RECIPES.items():
        assert f"`{name}`" in doc, name
        assert r.summary


def test_none_recipe_casts_to_the_units_operand_format():
    x = torch.zeros(1, 32)
    x[0, :2] = torch.tensor([1.0 + 2.0 ** -9, 500.0])          # rounds in bf16; > e4m3 max
    w = torch.ones(32, 1)
    assert mt.matmul(x, w).item() == 1.0 + 500.0                 # exact: bf16 operands
    assert mt.matmul(x, w, unit="hopper-cublas-fast").item() == 1.0 + 448.0   # e4m3, saturated
    f16 = mt.matmul(x.half(), w.half(), unit="exact")            # fp16 operands: 1 + 2**-9 kept
    assert f16.dtype == torch.float16
    assert _u16(f16)[0, 0] == formats.get("fp16").encode(np.float64(501.001953125), "rne")
