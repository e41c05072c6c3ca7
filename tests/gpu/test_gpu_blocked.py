"""cuBLAS's 128x4 blocked scale layout (gpu/blackwell/blocked.py): its bit order, its inverse, and
torchao's ``to_blocked``/``from_blocked`` bit for bit where torchao is installed."""

import numpy as np
import pytest

from gpu.blackwell.blocked import from_blocked, to_blocked
from mxsim.quantize import QuantizeError


def assert_codes_equal(got: np.ndarray, want: np.ndarray, what: str = "codes") -> None:
    assert got.shape == want.shape, (what, got.shape, want.shape)
    bad = np.argwhere(got != want)
    assert bad.size == 0, (f"{what}: {len(bad)} mismatches, first at {tuple(bad[0])}: "
                           f"got {got[tuple(bad[0])]:#x}, want {want[tuple(bad[0])]:#x}")


@pytest.mark.parametrize("shape", [(1, 1), (128, 4), (129, 5), (300, 17), (256, 8), (5, 130)])
def test_gpu_blocked_layout(shape):
    s = np.random.default_rng(141).integers(0, 256, shape).astype(np.uint8)
    b = to_blocked(s)
    assert b.shape == (512 * -(-shape[0] // 128) * -(-shape[1] // 4),)
    assert_codes_equal(from_blocked(b, *shape), s, "round trip")
    torch = pytest.importorskip("torch")
    pytest.importorskip("torchao")
    from torchao.prototype.mx_formats import utils
    assert_codes_equal(b, utils.to_blocked(torch.from_numpy(s)).numpy(), "torchao to_blocked")
    assert_codes_equal(from_blocked(b, *shape),
                       utils.from_blocked(torch.from_numpy(b), *shape).numpy(),
                       "torchao from_blocked")
    r, c = 37 % shape[0], 3 % shape[1]
    assert b[(r // 128) * 512 * -(-shape[1] // 4) + (c // 4) * 512
             + (r % 128 % 32) * 16 + (r % 128 // 32) * 4 + c % 4] == s[r, c]


@pytest.mark.parametrize("call,message", [
    (lambda: to_blocked(np.zeros(4, np.uint8)),
     r"Scales must be a 2-d \(rows, cols\) array, not shape \(4,\); fold batch dimensions "
     r"into the rows first"),
    (lambda: from_blocked(np.zeros(100, np.uint8), 128, 4),
     r"Blocked scales of a 128x4 matrix must be 512 uint8 values in one dimension, not uint8 "
     r"of shape \(100,\)"),
], ids=["to-blocked-1d", "from-blocked-size"])
def test_gpu_blocked_errors(call, message):
    with pytest.raises(QuantizeError, match=f"^{message}$"):
        call()
