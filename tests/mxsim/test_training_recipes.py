"""Training recipes (mxsim.quantize.training): each GEMM's operands quantised along that GEMM's
own K as the recipe says, bit-exact with torchao where it has the recipe, the switches, the
random Hadamard transform in its fixed FP32 order, and bad names refused in one line."""

from __future__ import annotations

import numpy as np
import pytest

from mxsim import formats
from mxsim.quantize import from_mx, to_mx, to_nvfp4
from mxsim.quantize import training as tr
from mxsim.quantize.rules import QuantizeError


def _x(shape, seed=0, scale=1.0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def test_every_recipe_names_its_operands_unit_and_sources():
    for name, r in tr.TRAINING_RECIPES.items():
        assert r.name == name and r.sources and r.unit
        for g in tr.GEMMS:
            a, b = r.gemm(g)
            assert a.rht == b.rht, (name, g)          # a transform on both or on neither
    nv = tr.training_recipe("nvfp4")
    assert nv.fprop[1].two_d and nv.dgrad[1].two_d          # one W for fprop and dgrad
    assert nv.dgrad[0].sr and nv.wgrad[0].sr and not nv.fprop[0].sr
    assert nv.wgrad[0].rht and not nv.fprop[0].rht and nv.bf16_layers == ("lm_head",)
    assert tr.training_recipe("mxfp8").fprop[0].scale_rule == "rceil"
    assert tr.training_recipe("mxfp8-floor").wgrad[1].scale_rule == "floor"
    assert tr.training_recipe("fp8-delayed").dgrad[0].format == "e5m2"


@pytest.mark.parametrize("switch,attr", [("disable_rht", "rht"),
                                         ("disable_stochastic_rounding", "sr"),
                                         ("disable_2d_quantization", "two_d")])
def test_a_switch_turns_off_its_technique_alone(switch, attr):
    full = tr.training_recipe("nvfp4")
    off = tr.training_recipe(f"nvfp4/{switch}")
    assert off.name == f"nvfp4/{switch}" and off.disabled == (switch,)
    for g in tr.GEMMS:
        for o_full, o_off in zip(full.gemm(g), off.gemm(g), strict=True):
            assert not getattr(o_off, attr)
            others = {k: v for k, v in vars(o_full).items() if k != attr}
            assert others == {k: v for k, v in vars(o_off).items() if k != attr}
    both = tr.training_recipe("mxfp4/disable_rht+disable_stochastic_rounding")
    assert both.name == "mxfp4/disable_rht+disable_stochastic_rounding"
    assert not any(o.sr or o.rht for g in tr.GEMMS for o in both.gemm(g))


@pytest.mark.parametrize("name,message", [
    ("nvfp5", "Training recipe must be one of bf16, fp8-delayed"),
    ("mxfp8/disable_rht", "Recipe mxfp8 has no switch 'disable_rht' (switches: none)"),
    ("nvfp4/disable_everything", "Recipe nvfp4 has no switch 'disable_everything'"),
    (3, "A training recipe is a name such as 'mxfp8', not 3"),
])
def test_bad_recipe_names_are_refused_in_one_line(name, message):
    with pytest.raises(QuantizeError) as info:
        tr.training_recipe(name)
    assert str(info.value).startswith(message) and "\n" not in str(info.value)
    assert isinstance(info.value, ValueError)


def test_operands_are_quantised_along_their_own_gemms_k():
    """wgrad's B is x (T, I) quantised along the tokens: the same codes as quantising x^T
    along its last axis; dgrad's B is W (O, I) along O."""
    x = _x((64, 96), 1)
    op = tr.training_recipe("mxfp8").wgrad[1]
    q = tr.quantise(x, op, "b")
    s, e = to_mx(np.ascontiguousarray(x.T), "e4m3", 32, "rceil")
    assert np.array_equal(q.codes, e.T) and np.array_equal(q.scale, s.T)
    assert q.scale.shape == (2, 96) and q.scale_format == "e8m0"


def test_mxfp8_rceil_operands_equal_torchaos():
    pytest.importorskip("torchao")
    import torch
    from torchao.prototype.mx_formats.config import ScaleCalculationMode
    from torchao.prototype.mx_formats.mx_tensor import to_mx as ao_to_mx
    x = _x((64, 128), 2, 30.0)
    for role, t in (("a", x), ("b", np.ascontiguousarray(x.T))):
        q = tr.quantise(t, tr.training_recipe("mxfp8").fprop[0 if role == "a" else 1], role)
        along_last = x                                   # both hold x's rows along K
        s, d = ao_to_mx(torch.from_numpy(along_last), torch.float8_e4m3fn, 32,
                        ScaleCalculationMode.RCEIL)
        codes = q.codes if role == "a" else q.codes.T
        scale = q.scale if role == "a" else q.scale.T
        assert np.array_equal(codes, d.view(torch.uint8).numpy())
        assert np.array_equal(scale, s.view(torch.uint8).numpy())


def test_nvfp4_activation_operands_equal_torchaos_two_level_quantisation():
    pytest.importorskip("torchao")
    import torch
    from torchao.prototype.mx_formats.kernels import unpack_uint4
    from torchao.prototype.mx_formats.nvfp4_tensor import (
        nvfp4_quantize,
        per_tensor_amax_to_scale,
    )
    x = _x((32, 128), 3, 4.0)
    q = tr.quantise(x, tr.training_recipe("nvfp4").fprop[0], "a")
    pts = per_tensor_amax_to_scale(torch.tensor(np.abs(x).max()))
    s, d = nvfp4_quantize(torch.from_numpy(x), 16, pts)
    assert q.tensor_scale == np.float32(pts.item())
    assert np.array_equal(q.scale, s.view(torch.uint8).numpy().reshape(q.scale.shape))
    assert np.array_equal(q.codes, unpack_uint4(d).numpy().reshape(x.shape))


def test_two_d_weights_give_fprop_and_dgrad_the_same_w():
    """The 16 x 16 tiles: W^T quantised along I (fprop's B) and W along O (dgrad's B) are
    the same codes, so forward and backward see one weight."""
    w = _x((64, 96), 4)
    op = tr.training_recipe("nvfp4").fprop[1]
    fprop = tr.quantise(np.ascontiguousarray(w.T), op, "b")
    dgrad = tr.quantise(w, op, "b")
    assert np.array_equal(fprop.codes.T, dgrad.codes)
    v_f = tr.dequantise(fprop, "b").T
    v_d = tr.dequantise(dgrad, "b")
    assert np.array_equal(v_f, v_d)
    one_d = tr.quantise(w, tr.training_recipe("nvfp4/disable_2d_quantization").fprop[1], "b")
    assert not np.array_equal(one_d.codes, tr.quantise(
        np.ascontiguousarray(w.T), tr.training_recipe("nvfp4/disable_2d_quantization").fprop[1],
        "b").codes.T)


def test_stochastic_rounding_takes_its_bits_from_the_generator_in_c_order():
    g = _x((32, 64), 5)
    op = tr.training_recipe("nvfp4").dgrad[0]
    q = tr.quantise(g, op, "a", rng=np.random.default_rng(9))
    bits = np.random.default_rng(9).integers(0, 1 << tr.SR_BITS, size=g.shape, dtype=np.uint64)
    s, e, p = to_nvfp4(g, rounding="stochastic", random_bits=bits, sr_bits=tr.SR_BITS)
    assert np.array_equal(q.codes, e) and np.array_equal(q.scale, s)
    with pytest.raises(ValueError, match="rounds stochastically: pass rng"):
        tr.quantise(g, op, "a")


def _rht_loop(x, signs):
    """The transform written out: butterflies on each row of 16, in FP32, one at a time."""
    out = np.empty_like(x)
    for r in range(x.shape[0]):
        v = [np.float32(x[r, i] * signs[i]) for i in range(16)]
        h = 1
        while h < 16:
            for i in range(0, 16, 2 * h):
                for j in range(i, i + h):
                    v[j], v[j + h] = np.float32(v[j] + v[j + h]), np.float32(v[j] - v[j + h])
            h *= 2
        out[r] = np.array(v, np.float32) * np.float32(0.25)
    return out


def test_rht_is_the_fixed_order_butterfly_and_keeps_wgrads_product():
    rng = np.random.default_rng(6)
    signs = tr.rht_signs(rng)
    assert set(np.unique(signs)) <= {-1.0, 1.0} and signs.dtype == np.float32
    x = _x((8, 32), 7, 1e3)
    got = tr.rht(x, signs, -1)
    want = np.concatenate([_rht_loop(x[:, :16], signs), _rht_loop(x[:, 16:], signs)], axis=1)
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))
    # On small integers nothing rounds: the transform is H S / 4, and the product of two
    # transformed operands along their K is the product of the originals.
    h = np.array([[(-1) ** bin(i & j).count("1") for j in range(16)] for i in range(16)])
    a = rng.integers(-8, 8, (5, 32)).astype(np.float32)
    b = rng.integers(-8, 8, (32, 3)).astype(np.float32)
    ta, tb = tr.rht(a, signs, -1), tr.rht(b, signs, -2)
    m = (h * signs).T / 4.0                 # row v -> v S H / 4 (H symmetric)
    assert np.array_equal(ta[:, :16], (a[:, :16].astype(np.float64) @ m).astype(np.float32))
    assert np.array_equal(ta.astype(np.float64) @ tb.astype(np.float64),
                          a.astype(np.float64) @ b.astype(np.float64))
    with pytest.raises(QuantizeError, match="blocks of 16: axis -1 has length 24"):
        tr.rht(np.zeros((2, 24), np.float32), signs, -1)


def test_fp8_delayed_scaling_uses_earlier_amaxes_and_counts_saturation():
    op = tr.training_recipe("fp8-delayed").fprop[0]
    history: list = []
    small, big = _x((16, 32), 8), _x((16, 32), 8) * 4
    first = tr.OperandStats()
    q0 = tr.quantise(small, op, "a", amax_history=history, stats=first)
    assert history == [float(np.abs(small).max())] and first.saturated == 0
    second = tr.OperandStats()
    q1 = tr.quantise(big, op, "a", amax_history=history, stats=second)
    assert q1.scale == q0.scale                     # the scale of the step before
    fmax = formats.get("e4m3").max
    assert second.saturated == int((np.abs(big) > fmax * float(q0.scale)).sum()) > 0
    assert second.elements == big.size


def test_mx_floor_saturation_count_is_the_clamped_elements():
    x = _x((16, 64), 10, 50.0)
    op = tr.training_recipe("mxfp8-floor").fprop[0]
    stats = tr.OperandStats()
    q = tr.quantise(x, op, "a", stats=stats)
    values = from_mx(q.scale, q.codes, "e4m3", 32)
    fmax = formats.get("e4m3").max
    clamped = (np.abs(values) == fmax * np.repeat(
        formats.get("e8m0").decode(q.scale), 32, axis=-1)) & (np.abs(x) > np.abs(values))
    assert stats.saturated == int(clamped.sum()) > 0
    rceil = tr.OperandStats()
    tr.quantise(x, tr.training_recipe("mxfp8").fprop[0], "a", stats=rceil)
    assert rceil.saturated == 0                     # the round-up rule never clamps


def test_a_given_amax_is_checked():
    from mxsim.quantize.fp8 import to_fp8_amax
    for bad, kw in ((-1.0, {}), (float("inf"), {}), (1.0, {"axis": -1})):
        with pytest.raises(QuantizeError, match="amax must be a finite non-negative number"):
            to_fp8_amax(np.ones((2, 4), np.float32), amax=bad, **kw)
