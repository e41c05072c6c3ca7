"""The GPU twin of formats.round_to (mxsim/formats/_round_kernel.cu), built for the host with g++,
equals the numpy path (and so the numba twin) bit for bit: random significands of every
width, far-out exponents, sticky bits, ties and near-overflow values, every format, mode and
overflow policy, and broadcast (stride-0) inputs. The GPU itself runs the same source in
benchmarks/gpu_engine_probe.py."""

import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import pytest

from mxsim import formats
from mxsim.formats import _round_kernel

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed")

_MODES = ("rne", "rna", "rz", "ru", "rd")


@pytest.fixture(scope="module")
def host() -> ctypes.CDLL:
    """_round_kernel.cu as a host library (-DMXSIM_HOST), cached by the source's hash."""
    text = _round_kernel.GPU_SOURCE.read_bytes()
    folder = Path(tempfile.gettempdir()) / "mxsim-gpu-round"
    folder.mkdir(exist_ok=True)
    lib = folder / f"round-{hashlib.sha256(text).hexdigest()[:16]}.so"
    if not lib.exists():
        tmp = folder / f"{lib.stem}.{os.getpid()}.so"
        subprocess.run(["g++", "-O2", "-std=c++17", "-Wall", "-Werror", "-shared", "-fPIC",
                        "-x", "c++", "-DMXSIM_HOST", str(_round_kernel.GPU_SOURCE), "-o",
                        str(tmp)], check=True, capture_output=True)
        os.replace(tmp, lib)
    dll = ctypes.CDLL(str(lib))
    dll.mxsim_round_host.restype = ctypes.c_int
    return dll


def _host_round(dll, fmt, sign, lsb, sig, sticky, mode, overflow) -> np.ndarray:
    """round_to by the host build; a size-1 input is passed with stride 0, as on the GPU."""
    n = max(x.size for x in (sign, lsb, sig, sticky))
    args = []
    for x, dtype in ((sign, np.uint8), (lsb, np.int64), (sig, np.uint64), (sticky, np.uint8)):
        x = np.ascontiguousarray(x, dtype).reshape(-1)
        args += [x.ctypes.data_as(ctypes.c_void_p), ctypes.c_longlong(0 if x.size == 1 else 1)]
        _host_round.keep.append(x)
    p = _round_kernel.gpu_params(fmt, mode, overflow)
    out = np.full(n, 0xDEAD, np.uint64)
    assert dll.mxsim_round_host(*args, p.ctypes.data_as(ctypes.c_void_p),
                                out.ctypes.data_as(ctypes.c_void_p), ctypes.c_longlong(n)) == 0
    _host_round.keep.clear()
    return out.astype(fmt.code_dtype)


_host_round.keep = []


def _inputs(fmt, rng, n=12000):
    """Random significands of every width and exponents far outside the format, plus ties
    (a one followed by zeros below the cut), values at and past the largest finite one, and
    bare sticky bits."""
    width = rng.integers(0, 65, n)
    sig = (rng.integers(0, 2 ** 63, n, dtype=np.uint64) << np.uint64(1)) | np.uint64(1)
    sig = np.where(width == 0, 0, sig >> (64 - np.maximum(width, 1)).astype(np.uint64))
    lsb = rng.integers(-400, 300, n)
    # Ties and their neighbours at the format's LSB for values near 1, max and min.
    m = fmt.man_bits
    t = n // 4
    extra = rng.integers(1, 12, t).astype(np.uint64)
    base = (rng.integers(1 << m, 1 << (m + 1), t).astype(np.uint64) << extra) | (
        np.uint64(1) << (extra - np.uint64(1)))
    base = (base.astype(np.int64) + rng.integers(-1, 2, t)).astype(np.uint64)
    top = fmt.emax if fmt.kind == "float" else 0
    lo = fmt.emin if fmt.kind == "float" else -m
    at = rng.choice([0, top - m, lo - m, lo - m - 3], t)
    sig[:t] = base
    lsb[:t] = at - extra.astype(np.int64)
    sign = rng.integers(0, 2, n).astype(np.uint8) if fmt.signed else np.zeros(n, np.uint8)
    sticky = rng.random(n) < 0.3
    return sign, lsb, sig, sticky


@pytest.mark.parametrize("name", formats.names() + ["e8m13"])
def test_gpu_round_equals_numpy_path(host, name):
    fmt = formats.get(name)
    rng = np.random.default_rng([7, sum(map(ord, name))])
    sign, lsb, sig, sticky = _inputs(fmt, rng)
    policies = ["saturate"] + (["ieee", "inf"] if fmt.has_inf or fmt.has_nan else [])
    for mode in _MODES:
        for overflow in policies:
            want = formats.round_to(fmt, sign, lsb, sig, sticky, mode, overflow, kernel=False)
            got = _host_round(host, fmt, sign, lsb, sig, sticky, mode, overflow)
            np.testing.assert_array_equal(got, want, err_msg=f"{name} {mode} {overflow}")
    # Broadcast inputs: one sticky bit and one sign for every element (stride 0).
    for st in (False, True):
        want = formats.round_to(fmt, 0, lsb, sig, st, "rne", "saturate", kernel=False)
        got = _host_round(host, fmt, np.zeros(1), lsb, sig, np.array([st]), "rne", "saturate")
        np.testing.assert_array_equal(got, want)


def test_gpu_round_params_follow_the_format():
    """The parameter block names the format's constants in the kernel's order."""
    p = _round_kernel.gpu_params(formats.get("fp32"), "rd", "ieee")
    assert p.tolist() == [0, 23, -126, 127, (1 << 24) - 1, 127, 8, 1, 1, 31, 0x7F7FFFFF, 1,
                          0x7F800000, 1, 0x7FC00000, 4, 1]
