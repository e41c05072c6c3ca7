"""mxsim.torch.quantise (the operands quantised where the tensor lives) equals the host path,
mxsim.quantize.training.quantise, bit for bit: MX floor and rceil, NVFP4 1-D and 2-D, both
roles, on random tensors over many binades and on adversarial blocks; and the random Hadamard
transform gives the host's bits."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from mxsim import formats  # noqa: E402
from mxsim.quantize import training as tr  # noqa: E402
from mxsim.torch import quantise as tq  # noqa: E402

OPS = {
    "mxfp8": tr.training_recipe("mxfp8").fprop[0],
    "mxfp8-floor": tr.training_recipe("mxfp8-floor").fprop[0],
    "mxfp4": tr.training_recipe("mxfp4").fprop[0],
    "nvfp4": tr.training_recipe("nvfp4").fprop[0],
    "nvfp4-2d": tr.training_recipe("nvfp4").fprop[1],
}


def _random(seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((64, 128)) * np.exp2(rng.integers(-40, 40, (64, 1)))
    return x.astype(np.float32)


def _adversarial() -> np.ndarray:
    """Rows of blocks whose amax sits on the rules' edges: powers of two, the formats' largest
    times a power of two and its neighbours, FP32 subnormals, zeros, rounding ties."""
    rows = []
    for fmax in (448.0, 6.0):
        for k in (-150, -140, -127, -126, -20, 0, 1, 20, 100, 118):
            base = np.float32(fmax * 2.0 ** k)
            for nudge in (-1, 0, 1):
                if base == 0 or not np.isfinite(base):
                    continue
                bits = np.array([base], np.float32).view(np.uint32).astype(np.int64) + nudge
                amax = bits.astype(np.uint32).view(np.float32)[0]
                r = np.linspace(-1, 1, 128, dtype=np.float32) * amax
                r[7] = amax
                rows.append(r)
    rows.append(np.zeros(128, np.float32))
    rows.append(np.arange(128, dtype=np.uint32).astype(np.uint32).view(np.float32))   # subnormals
    ties = np.float32(1.0) + np.arange(128, dtype=np.float32) * np.float32(2.0 ** -4)
    rows.append(ties)
    out = np.stack(rows).astype(np.float32)
    return out[: (len(out) // 16) * 16]


def _same(q_host, q_dev, what: str) -> None:
    assert q_dev is not None, what
    assert q_dev.format == q_host.format and q_dev.scale_format == q_host.scale_format, what
    assert np.array_equal(q_dev.codes, q_host.codes), f"{what}: codes"
    assert np.array_equal(q_dev.scale, q_host.scale), f"{what}: scales"
    assert q_dev.codes.shape == q_host.codes.shape and q_dev.scale.shape == q_host.scale.shape
    assert (q_dev.tensor_scale is None) == (q_host.tensor_scale is None), what
    if q_host.tensor_scale is not None:
        assert np.float32(q_dev.tensor_scale).view(np.uint32) == \
            np.float32(q_host.tensor_scale).view(np.uint32), what


@pytest.mark.parametrize("name", list(OPS))
@pytest.mark.parametrize("role", ["a", "b"])
def test_device_quantisation_equals_the_host_path(name, role):
    op = OPS[name]
    for seed, x in [(s, _random(s)) for s in range(4)] + [("adversarial", _adversarial())]:
        x = x if role == "a" else np.ascontiguousarray(x.T)
        host = tr.quantise(x, op, role)
        dev = tq.quantise(torch.from_numpy(x), op, role)
        _same(host, dev, f"{name} {role} {seed}")


def test_where_it_does_not_apply_it_says_so():
    x = torch.from_numpy(_random(5))
    assert tq.quantise(x, tr.training_recipe("nvfp4").dgrad[0], "a") is None      # SR
    assert tq.quantise(x, tr.training_recipe("fp8-current").fprop[0], "a") is None
    bad = x.clone()
    bad[3, 5] = float("inf")
    assert tq.quantise(bad, OPS["mxfp8"], "a") is None
    assert tq.quantise(bad, OPS["nvfp4"], "a") is None


def test_the_transform_gives_the_hosts_bits():
    signs = tr.rht_signs(np.random.default_rng(1))
    x = _random(6)
    for axis in (-1, 0):
        want = tr.rht(x, signs, axis)
        got = tq.rht(torch.from_numpy(x), signs, axis).numpy()
        assert np.array_equal(got.view(np.uint32), want.view(np.uint32))
    with pytest.raises(ValueError, match="blocks of 16"):
        tq.rht(torch.zeros(3, 24), signs, -1)


def test_the_tables_are_the_hosts():
    e4m3 = formats.get("e4m3")
    v = np.float32([2.0 ** -6, 1.0625, 448.0, 3.0])
    assert np.array_equal(tq._e4m3_rne(torch.from_numpy(v)).numpy(),
                          e4m3.encode(v.astype(np.float64), "rne", True).astype(np.uint8))
