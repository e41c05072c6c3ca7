"""The GPU engine's device-side packing (mxsim/engine/gpu/pack.cu), built for the host with
g++, gives the very fields of the host's ``Operand.of`` + ``_kernels.side``, bit for bit: every
operand format of at most 16 bits, every code, with and without block scales (E8M0, UE4M3,
NaN and zero scales included), A's layout and B's transposed one, specials read or not; and
``kernels.plain_bound`` never lets the plain path take sides that ``plain_path`` refuses.
"""

import ctypes

import numpy as np
import pytest
from test_gpu_chain import chain_library

from mxsim import formats, presets, vectors
from mxsim.engine import _kernels
from mxsim.engine.fast import fused
from mxsim.engine.fast.operands import Operand, Operands
from mxsim.engine.gpu import kernels

_P = ctypes.c_void_p
_FORMATS = [f for f in formats.OPERAND_FORMATS if formats.get(f).bits <= 16]


def host_pack(codes, scales, fmt: str, scale_fmt, block: int, finite: bool, transpose: bool):
    """pack.cu's host build over numpy arrays, with kernels.pack_side's arguments."""
    dll = chain_library()
    rows, k = (codes.shape[1], codes.shape[0]) if transpose else codes.shape
    etab = kernels.code_table(fmt, finite)
    stab = kernels.code_table(scale_fmt or "e8m0", finite, True)
    srs, sts = ((1, rows) if transpose else (k // block, 1)) if scales is not None else (0, 0)
    rs, ts = (1, rows) if transpose else (k, 1)
    dims = np.array([etab.shape[1], rows, k, rs, ts, block, srs, sts], np.int64)
    out = [np.full((rows, k), -99, np.int32) for _ in range(5)]
    special = np.zeros(1, np.int32)
    wide = codes.dtype.itemsize == 2
    codes = np.ascontiguousarray(codes)
    sc = None if scales is None else np.ascontiguousarray(scales, np.uint8)
    ptr = [None if x is None else x.ctypes.data_as(_P) for x in (
        None if wide else codes, codes if wide else None, sc, etab, stab, dims, *out, special)]
    dll.mxsim_pack_host(*ptr)
    return (*out, special)


def _want(codes, scales, fmt, scale_fmt, block, finite, transpose):
    op = Operand.of(formats.get(fmt), codes, finite)
    sop = None
    if scales is not None:
        sop = Operand.of(formats.get(scale_fmt), np.repeat(scales, block, axis=0 if transpose
                                                           else 1), finite)
        sop.sign[...] = 0
    return _kernels.side(op, sop, transpose)


@pytest.mark.parametrize("fmt", _FORMATS)
@pytest.mark.parametrize("scale_fmt,block", [(None, 1), ("e8m0", 32), ("ue4m3", 16)])
@pytest.mark.parametrize("finite", [False, True])
def test_device_packing_equals_host_fields(fmt, scale_fmt, block, finite):
    f = formats.get(fmt)
    rng = np.random.default_rng(len(fmt) * 7 + block)
    every = np.arange(1 << f.bits).astype(f.code_dtype)
    m, k = 7, 64
    codes = rng.choice(every, (m, k))
    codes.ravel()[:min(every.size, m * k)] = every[:m * k]    # every code, where they fit
    for transpose in (False, True):
        c = np.ascontiguousarray(codes.T) if transpose else codes
        scales = None
        if scale_fmt is not None:
            sf = formats.get(scale_fmt)
            shape = (k // block, m) if transpose else (m, k // block)
            scales = rng.integers(0, 1 << sf.bits, shape).astype(np.uint8)
            scales.ravel()[:3] = (0, (1 << sf.bits) - 1, 0x7F & ((1 << sf.bits) - 1))
        got = host_pack(c, scales, fmt, scale_fmt, block, finite, transpose)
        want = _want(c, scales, fmt, scale_fmt, block, finite, transpose)
        for g, w in zip(got[:5], want, strict=True):
            np.testing.assert_array_equal(g, w)
        assert got[5][0] == int(((want[4] & (_kernels.NAN | _kernels.INF)) != 0).any())


def test_device_packing_clears_bits_above_the_format():
    codes = np.array([[0x13, 0xF3, 0x23]], np.uint8)          # e2m1: 4 bits
    got = host_pack(codes, None, "e2m1", None, 1, False, False)
    want = _want(codes & 0xF, None, "e2m1", None, 1, False, False)
    for g, w in zip(got[:5], want, strict=True):
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("name", ["hopper-wgmma", "hopper-cublas", "blackwell-mxf8f6f4",
                                  "ada-mma-f8", "hopper-mma-f16"])
def test_plain_bound_never_admits_what_plain_path_refuses(name):
    """Where the table bound admits the plain path, the data-based check on the very sides
    (drawn to reach the formats' extremes, no NaN or Inf) admits it too."""
    preset = presets.get(name)
    seen = 0
    for fmt in _FORMATS:
        for scale_fmt, block in ((None, None), ("e8m0", 32), ("ue4m3", 16)):
            try:
                vs = vectors.generate("max", a_format=fmt, m=4, n=5, k=64,
                                      scale_format=scale_fmt, block=block, seed=3)
                spec = preset.spec_for(vs)
            except Exception:       # this preset does not take these formats
                continue
            if not fused.applies(spec) or spec.upcast is not None:
                continue
            finite = spec.specials.value == "none"
            if kernels.plain_bound(spec, vs.a_format, vs.b_format, vs.scale_format, finite):
                a, b = fused.sides(Operands.of(spec, vs), 0)
                seen += 1
                assert kernels.plain_path(spec, tuple(a), tuple(b)), (name, fmt, scale_fmt)
    assert seen or name == "hopper-mma-f16"
