"""mxsim.torch.training: a Linear's forward, dgrad and wgrad through a unit equal the
engine on the same codes (fast and, on a slice, reference; quantised here, independently, in
the order the layer draws its random bits), the plain emulation is the papers' (dequantise,
multiply in FP32), and convert swaps a model's layers in place, keeping the recipe's BF16
layers."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from mxsim import units  # noqa: E402
from mxsim.errors import UnitError  # noqa: E402
from mxsim.quantize import training as tr  # noqa: E402
from mxsim.torch import fp32  # noqa: E402
from mxsim.torch import training as mt  # noqa: E402
from mxsim.vectors import VectorSet  # noqa: E402


def _bits(t) -> np.ndarray:
    return t.detach().numpy().astype(np.float32).view(np.uint32)


def _engine_gemm(a, b, ops, unit, context):
    """The GEMM as the fast engine computes it from codes quantised here, and its first 4
    rows as the reference engine does (the exact integer model)."""
    if ops[0].rht:
        a, b = tr.rht(a, context.signs, -1), tr.rht(b, context.signs, -2)
    qa = tr.quantise(a, ops[0], "a", rng=context.sr_rng)
    qb = tr.quantise(b, ops[1], "b", rng=context.sr_rng)
    vs = VectorSet(a=qa.codes, b=qb.codes, a_format=qa.format, b_format=qb.format,
                   a_scale=qa.scale, b_scale=qb.scale, scale_format=qa.scale_format,
                   block=qa.block)
    u = units.get(unit)
    fast = np.asarray(u.compute(vs, "fast"), np.uint32)
    top = replace(vs, a=vs.a[:4], a_scale=None if vs.a_scale is None else vs.a_scale[:4])
    assert np.array_equal(np.asarray(u.compute(top, "reference"), np.uint32), fast[:4])
    if qa.tensor_scale is not None:         # NVFP4: fl32(ta * tb) applied after, as cuBLASLt
        alpha = np.float32(np.float32(qa.tensor_scale) * np.float32(qb.tensor_scale))
        fast = fp32.alpha_times(alpha, fast, u.spec_for(vs).d_nan)
    return fast


@pytest.mark.parametrize("recipe", ["mxfp8", "nvfp4", "mxfp4", "mxfp8-floor"])
def test_a_layers_three_gemms_equal_the_engine_on_the_same_codes(recipe):
    torch.manual_seed(1)
    layer = mt.Linear(64, 64, bias=False, recipe=recipe, engine="fast",
                      context=mt.TrainContext(5), name="fc")
    x = torch.randn(64, 64, requires_grad=True)
    y = layer(x)
    dy = torch.randn(64, 64)
    y.backward(dy)
    rec, unit = tr.training_recipe(recipe), layer.unit.name
    ctx = mt.TrainContext(5)
    xn, wn, dyn = (t.detach().numpy().astype(np.float32) for t in (x, layer.weight, dy))
    want_y = _engine_gemm(xn, np.ascontiguousarray(wn.T), rec.fprop, unit, ctx)
    want_dx = _engine_gemm(dyn, wn, rec.dgrad, unit, ctx)
    want_dw = _engine_gemm(np.ascontiguousarray(dyn.T), xn, rec.wgrad, unit, ctx)
    assert np.array_equal(_bits(y), want_y), "fprop"
    assert np.array_equal(_bits(x.grad), want_dx), "dgrad"
    assert np.array_equal(_bits(layer.weight.grad), want_dw), "wgrad"


def test_the_plain_emulation_multiplies_dequantised_operands_in_fp32():
    torch.manual_seed(2)
    layer = mt.Linear(32, 32, recipe="mxfp8", unit=mt.PLAIN, context=mt.TrainContext(0))
    x = torch.randn(32, 32)
    with torch.no_grad():
        y = layer(x)
    op_a, op_b = tr.training_recipe("mxfp8").fprop
    a = tr.dequantise(tr.quantise(x.numpy(), op_a, "a"), "a")
    b = tr.dequantise(tr.quantise(np.ascontiguousarray(layer.weight.detach().numpy().T), op_b,
                                  "b"), "b")
    want = (a @ b).astype(np.float32) + layer.bias.detach().numpy()
    assert np.array_equal(y.numpy(), want)


def test_convert_swaps_linear_layers_in_place_and_keeps_bf16_layers():
    torch.manual_seed(3)
    model = torch.nn.Sequential()
    model.add_module("fc", torch.nn.Linear(64, 64))
    model.add_module("act", torch.nn.GELU())
    model.add_module("lm_head", torch.nn.Linear(64, 64))
    weight = model.fc.weight
    out = mt.convert(model, "nvfp4", seed=4)
    assert out is model and model.fc.weight is weight
    assert isinstance(model.fc, mt.Linear) and isinstance(model.fc, torch.nn.Linear)
    assert model.fc.recipe.name == "nvfp4" and model.fc.unit.name == "blackwell-mxf4nvf4"
    assert model.lm_head.recipe.name == "bf16" and model.lm_head.unit.name == \
        "blackwell-mma-bf16"
    assert mt.context_of(model) is model.fc.context is model.lm_head.context
    x = torch.randn(64, 64)
    loss = model(x).square().mean()
    loss.backward()
    assert model.fc.weight.grad is not None and torch.isfinite(model.fc.weight.grad).all()
    stats = mt.context_of(model).take_stats()
    assert stats["elements"] > 0 and mt.context_of(model).take_stats()["elements"] == 0
    plain = mt.convert(torch.nn.Sequential(torch.nn.Linear(64, 64)), "mxfp8", mt.PLAIN)
    assert plain[0].unit == mt.PLAIN


@pytest.mark.parametrize("call,message", [
    (lambda: mt.convert(torch.nn.Linear(32, 32), "mxfp9"), "Training recipe must be one of"),
    (lambda: mt.convert(torch.nn.Linear(32, 32), "mxfp8", "no-such-unit"),
     "Unknown unit 'no-such-unit'"),
    (lambda: mt.Linear(32, 32, engine="bogus"), "Engine must be one of"),
    (lambda: mt.TrainContext(-1), "seed must be a non-negative integer"),
    (lambda: mt.Linear(64, 64, recipe="mxfp8")(torch.randn(4, 48)),
     "Layer Linear takes 64 input features, not 48"),
    (lambda: mt.Linear(48, 64, recipe="mxfp8")(torch.randn(4, 48)),
     "Block (32) must divide"),
])
def test_bad_arguments_are_refused_in_one_line(call, message):
    with pytest.raises(ValueError) as info:
        call()
    assert message in str(info.value) and "\n" not in str(info.value)


def test_a_layer_on_the_wrong_width_is_a_unit_error():
    with pytest.raises(UnitError):
        mt.Linear(64, 64)(torch.randn(2, 32))


@pytest.mark.parametrize("recipe", ["mxfp8-floor", "nvfp4", "mxfp4", "fp8-delayed"])
def test_a_gpus_tensors_quantised_where_they_are_give_the_hosts_bits(recipe):
    """gemm() on torch tensors (quantised by mxsim.torch.quantise, here on the CPU, as on a
    GPU; stochastic rounding and FP8 fall back to the host) equals gemm() on NumPy arrays:
    the same product bits and the same counts, every GEMM of the recipe."""
    rng = np.random.default_rng(7)
    a = (rng.standard_normal((64, 128)) * 3).astype(np.float32)
    b = (rng.standard_normal((128, 64)) * 3).astype(np.float32)
    rec = tr.training_recipe(recipe)
    unit = units.get(rec.unit)
    for g in tr.GEMMS:
        host, dev = mt.TrainContext(2), mt.TrainContext(2)
        want = mt.gemm(a, b, rec.gemm(g), unit=unit, engine="fast", context=host, key=g)
        got = mt.gemm(torch.from_numpy(a), torch.from_numpy(b), rec.gemm(g), unit=unit,
                      engine="fast", context=dev, key=g)
        assert np.array_equal(got.view(np.uint32), want.view(np.uint32)), g
        assert dev.take_stats() == host.take_stats(), g
