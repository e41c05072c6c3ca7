"""The GPU engine's block-wise FP32 scales (mxsim/engine/gpu/fma.cu), built for the host with
g++: its FP32 multiply and FMA equal ``fast.scales.mul_fp32`` and ``fma_fp32`` on every kind of
bit pattern (zeros of both signs, subnormals, near-overflow, Inf, NaN, ties), and the block
pass driven by ``kernels.block_fma`` through the engine gives the CPU engine's D, bit for bit.
"""

import ctypes

import numpy as np
import pytest
from test_engine import CONFIGS, _fp32_edges
from test_gpu_chain import chain_library
from test_gpu_kernel import cupy_on_host, host  # noqa: F401 (fixtures)

from mxsim import formats, presets, vectors
from mxsim.engine import fast
from mxsim.engine.fast.scales import fma_fp32, mul_fp32
from mxsim.formats.rounding import rounding_params

_P = ctypes.c_void_p


def _host_fp32(x, y, z):
    pf = rounding_params(formats.get("fp32"), "rne", "ieee")
    mul, fma = np.empty_like(x), np.empty_like(x)
    chain_library().mxsim_fp32_host(*(a.ctypes.data_as(_P) for a in (x, y, z, pf)),
                                    ctypes.c_longlong(x.size),
                                    *(a.ctypes.data_as(_P) for a in (mul, fma)))
    return mul, fma


@pytest.mark.parametrize("seed", range(4))
def test_host_fp32_multiply_and_fma_equal_the_engines(seed):
    rng = np.random.default_rng(seed)
    x, y, z = (_fp32_edges(rng, 20000) for _ in range(3))
    # products that cancel z exactly, and z that cancels to -0 and +0
    z[:500] = mul_fp32(x[:500], y[:500]) ^ np.uint32(0x80000000)
    x[500:600], y[500:600], z[500:600] = 0x80000000, 0x3F800000, 0x80000000
    mul, fma = _host_fp32(x, y, z)
    np.testing.assert_array_equal(mul, mul_fp32(x, y))
    np.testing.assert_array_equal(fma, fma_fp32(x, y, z))


def test_host_block_pass_matches_the_cpu_engine(cupy_on_host):  # noqa: F811
    """hopper-cublas-blockwise through fast.dot on device arrays (the fake CuPy): the
    dispatcher hands the block-wise scales to kernels.block_fma, whose passes run fma.cu's host
    build, and D equals the CPU engine's (which uses scales.block_fma)."""
    cupy, fake_device = cupy_on_host
    from mxsim.engine.gpu import kernels
    preset, opts = next((p, o) for p, o in CONFIGS if p == "hopper-cublas-blockwise")
    for family, seed, m, n, with_c in (("normal", 1, 3, 256, False),
                                       ("specials", 2, 2, 128, True),
                                       ("cancellation", 3, 4, 128, False)):
        gen = {**opts, "m": m, "n": n, "k": 384}
        # The preset takes no C (torch passes none); its spec does: C is the FMA's start.
        spec = presets.get(preset).spec_for(vectors.generate(family, **gen, seed=seed))
        vs = vectors.generate(family, **{**gen, "with_c": with_c}, seed=seed)
        cupy.launches.clear()
        got = fast.dot(spec, fake_device.to_fake(vs), kernel=kernels)
        np.testing.assert_array_equal(fake_device.fake.asnumpy(got), fast.dot(spec, vs))
        assert cupy.launches.count("mxsim_block_fma") == 3
