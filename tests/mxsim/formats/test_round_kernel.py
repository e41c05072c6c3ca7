"""The compiled twin of formats.round_to (mxsim/formats/_round_kernel.py) equals the numpy path.

test_formats.py also runs every format test through both paths; this adds random
significands of every width, far-out exponents and sticky bits under every mode and policy.
"""

import numpy as np
import pytest

from mxsim import formats

NAMES = formats.names()


@pytest.mark.parametrize("name", NAMES + ["e8m13"])
def test_round_kernel_equals_numpy_path(name: str) -> None:
    """Random significands of every width (0..64 bits), exponents far outside every format,
    sticky bits, every mode and overflow policy: the two paths give the same codes."""
    pytest.importorskip("numba")
    fmt = formats.get(name)
    rng = np.random.default_rng([len(name), sum(map(ord, name))])
    n = 20000
    width = rng.integers(0, 65, n)
    sig = (rng.integers(0, 2 ** 63, n, dtype=np.uint64) << np.uint64(1)) | np.uint64(1)
    sig = np.where(width == 0, 0, sig >> (64 - np.maximum(width, 1)).astype(np.uint64))
    sign = rng.integers(0, 2, n).astype(np.uint8) if fmt.signed else np.zeros(n, np.uint8)
    lsb = rng.integers(-400, 300, n)
    sticky = rng.random(n) < 0.3
    rbits = rng.integers(0, 2 ** 12, n, dtype=np.uint64)
    policies = [formats.Overflow.SATURATE]
    if fmt.has_inf or fmt.has_nan:
        policies += [formats.Overflow.IEEE, formats.Overflow.INF]
    for mode in formats.Rounding:
        for overflow in policies:
            args = (fmt, sign, lsb, sig, sticky, mode, overflow)
            compiled = formats.round_to(*args, random_bits=rbits, sr_bits=12, kernel=True)
            plain = formats.round_to(*args, random_bits=rbits, sr_bits=12, kernel=False)
            np.testing.assert_array_equal(compiled, plain, err_msg=f"{name} {mode} {overflow}")
