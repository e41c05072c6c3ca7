"""The GPU engine's whole-dot kernel (mxsim/engine/gpu/chain.cu), built for the host with g++,
equals the numba whole-dot kernel (and so the numpy path) bit for bit; nvcc accepts it.

The host build runs the kernel's block code (a CUDA block's threads become loops between the
barriers), so tiles, step ranges longer than a tile, bounds and the chain's state are covered
here; the device itself is checked by gpu/engine/check.py.
"""

import ctypes
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_fused import _PRESET_SPECS, _fp16_c, drawn_set
from test_fused import _specs as _fused_specs

from mxsim import formats, vectors
from mxsim.engine import _kernels, fast
from mxsim.engine.fast import fused
from mxsim.engine.fast.operands import Operands
from mxsim.engine.gpu import kernels

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed")

_P = ctypes.c_void_p


def chain_library() -> ctypes.CDLL:
    """chain.cu (with the rounding kernel and step.cu) built for the host, cached by hash."""
    text = kernels.chain_source().encode()
    folder = Path(tempfile.gettempdir()) / "mxsim-gpu-kernel"
    folder.mkdir(exist_ok=True)
    lib = folder / f"chain-{hashlib.sha256(text).hexdigest()[:16]}.so"
    if not lib.exists():
        src = folder / f"{lib.stem}.{os.getpid()}.cu"
        src.write_bytes(text)
        tmp = folder / f"{lib.stem}.{os.getpid()}.so"
        subprocess.run(["g++", "-O2", "-std=c++17", "-Wall", "-Wextra", "-Werror", "-shared",
                        "-fPIC", "-x", "c++", "-DMXSIM_HOST", str(src), "-o", str(tmp)],
                       check=True, capture_output=True)
        os.replace(tmp, lib)
    dll = ctypes.CDLL(str(lib))
    dll.mxsim_chain_host.restype = ctypes.c_int
    return dll


@pytest.fixture(scope="module")
def host() -> ctypes.CDLL:
    return chain_library()


def call_host(dll, args: list, mode: int, normalized: int) -> None:
    """mxsim_chain_host with a GPU launch's arguments (numpy arrays and scalars, in the
    kernel's order: A's five fields, B's five, c, bounds, pa, pc, pp, r, n, ints, d_nan,
    col_tiles, out)."""
    arrays, (r, n, ints, d_nan, _, out) = args[:15], args[15:]
    rc = dll.mxsim_chain_host(*(_ptr(x) for x in arrays), ctypes.c_longlong(int(r)),
                              ctypes.c_longlong(int(n)), _ptr(ints), ctypes.c_uint(int(d_nan)),
                              ctypes.c_int(mode), ctypes.c_int(normalized), _ptr(out))
    assert rc == 0


def _ptr(x: np.ndarray):
    return x.ctypes.data_as(_P)


def _host_dot(dll, spec, vs, plain: bool = False) -> np.ndarray:
    """chain.cu on the host over ``vs``, as kernels.chain_dot drives it on the GPU; ``plain``:
    the plain path wherever kernels.plain_path allows it (else the general path)."""
    ops = Operands.of(spec, vs)
    plan = fused.plan(spec, vs.k)
    nb = int(np.prod(vs.batch_shape, dtype=np.int64))
    out = np.empty((nb, vs.m, vs.n), np.uint32)
    for bi in range(nb):
        a, b = fused.sides(ops, bi)
        ints = np.array([vs.k, vs.c is not None, plan["k_inst"], plan["n_inst"],
                         len(plan["bounds"]) - 1, plan["promote"], *plan["cfg"][[0, 3]],
                         plan["move"], plain and kernels.plain_path(spec, a, b)], np.int32)
        c = np.zeros(1, np.int64) if vs.c is None else np.ascontiguousarray(
            vs.c.reshape(nb, vs.m, vs.n)[bi], np.int64)
        fields = [np.ascontiguousarray(x) for x in (*a, *b)]
        call_host(dll, [*fields, c, plan["bounds"], plan["pa"], plan["pc"], plan["pp"], vs.m,
                        vs.n, ints, plan["d_nan"], 0, out[bi]], int(plan["cfg"][1]),
                  int(plan["cfg"][2]))
    return out.astype(formats.get(spec.d_format).code_dtype).reshape(vs.out_shape)


def _equal(dll, spec, vs) -> None:
    want = fast.dot(spec, vs)
    np.testing.assert_array_equal(_host_dot(dll, spec, vs), want)
    np.testing.assert_array_equal(_host_dot(dll, spec, vs, plain=True), want)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=_fused_specs(), family=st.sampled_from(vectors.FAMILIES),
       seed=st.integers(0, 2 ** 16), n_inst=st.integers(1, 3), with_c=st.booleans(),
       shape=st.sampled_from([(1, 1), (9, 33), (3, 70)]))
def test_gpu_chain_drawn_specs_equal_numba(host, spec, family, seed, n_inst, with_c, shape):
    _equal(host, spec, drawn_set(spec, family, seed, n_inst, with_c, shape))


@pytest.mark.parametrize("name,spec", _PRESET_SPECS[::3],
                         ids=[f"{n}-{s.a_format}-{s.scale_format}-{s.d_format}"
                              for n, s in _PRESET_SPECS[::3]])
def test_gpu_chain_preset_specs_equal_numba(host, name, spec):
    vs = vectors.generate("specials" if spec.scale_format is None else "nan-scale",
                          a_format=spec.a_format, b_format=spec.b_format, m=9, n=40,
                          k=spec.k * 5, scale_format=spec.scale_format, block=spec.block,
                          with_c=True, seed=4)
    if spec.d_format == "fp16":
        vs = _fp16_c(vs)
    _equal(host, spec, vs)


def test_gpu_chain_steps_longer_than_a_tile(host):
    """A 64-term step spans two shared-memory tiles: both passes reload them."""
    from mxsim import presets
    vs = vectors.generate("llm", a_format="e4m3", m=10, n=35, k=256, seed=3, with_c=True)
    spec = presets.get("hopper-cublas").spec_for(vs).replace(schedule=[list(range(64))], k=64)
    assert fused.applies(spec) and _kernels.available()
    _equal(host, spec, vs)


def _nvcc() -> str | None:
    found = shutil.which("nvcc")
    for cand in (found, "/usr/local/cuda/bin/nvcc"):
        if cand and Path(cand).exists():
            return cand
    return None


def test_nvcc_compiles_every_chain_kernel_for_sm90(tmp_path):
    nvcc = _nvcc()
    if nvcc is None:
        pytest.skip("nvcc is not installed (the host build above still runs)")
    src = tmp_path / "chain.cu"
    src.write_text(kernels.chain_source())
    run = subprocess.run([nvcc, "-std=c++17", "-arch=sm_90", "--cubin", "-Xptxas", "-v", "-x",
                          "cu", str(src), "-o", str(tmp_path / "chain.cubin")], check=True,
                         capture_output=True, text=True)
    assert "warning" not in run.stderr
    data = (tmp_path / "chain.cubin").read_bytes()
    for align in ("rz", "rd", "rne", "rz-jam"):
        for normalized in (False, True):
            assert kernels.chain_name(align, normalized).encode() + b"\0" in data
    assert b"mxsim_pack_side\0" in data and b"mxsim_chain_plain\0" in data
    assert b"mxsim_block_fma\0" in data
    assert re.findall(r"(\d+) bytes spill stores", run.stdout + run.stderr)


def test_plain_path_is_taken_where_it_may_and_only_there(host):
    """The plain path's conditions (raw RZ units without NaN/Inf codes whose products and
    aligned terms stay within 31 bits), and its bits on the sets it takes."""
    from mxsim import presets
    ok = vectors.generate("normal", a_format="e4m3", m=9, n=40, k=64, seed=1)
    spec = presets.get("hopper-wgmma").spec_for(ok)
    a, b = fused.sides(Operands.of(spec, ok), 0)
    assert kernels.plain_path(spec, a, b)
    _equal(host, spec, ok)
    bad = vectors.generate("specials", a_format="e4m3", m=4, n=4, k=64, seed=1)
    a2, b2 = fused.sides(Operands.of(spec, bad), 0)
    assert not kernels.plain_path(spec, a2, b2)                      # NaN / Inf codes
    assert not kernels.plain_path(spec.replace(frac_bits=30), a, b)  # 1 + 1 + 30 > 31
    assert not kernels.plain_path(spec.replace(align="rne"), a, b)
    mx = vectors.generate("max", a_format="e4m3", m=9, n=40, k=64, seed=2, with_c=True)
    for frac_bits in (27, 28, 29):              # at the 31-bit limit (e4m3 reaches 1 bit)
        s = spec.replace(frac_bits=frac_bits)
        _equal(host, s, mx)
    zeros = vectors.generate("zeros", a_format="e4m3", m=9, n=40, k=64, seed=1)
    _equal(host, spec, zeros)
    # A side whose every code is NaN or Inf has no non-zero significand: still not plain.
    nan_a = ok.replace(a=np.full_like(ok.a, 0x7F))                  # e4m3 NaN
    mixed = vectors.generate("normal", a_format="e4m3", b_format="e5m2", m=9, n=40, k=64,
                             seed=3)
    inf_b = mixed.replace(b=np.full_like(mixed.b, 0x7C))             # e5m2 +Inf
    for vs in (nan_a, inf_b):
        s = presets.get("hopper-wgmma").spec_for(vs)
        sa, sb = fused.sides(Operands.of(s, vs), 0)
        assert not kernels.plain_path(s, sa, sb)
        _equal(host, s, vs)
