"""The GPU engine's step kernel (mxsim/engine/gpu/step.cu), built for the host with g++, equals
the numba kernel ``_kernels.step_sums`` and the numpy step path bit for bit; nvcc accepts it.

The host build runs the kernel's very block code (a CUDA block's threads become loops between
the barriers), so tiling, bounds and indexing are covered here; the device itself is checked by
gpu/engine/check.py (summary replayed by tests/gpu/test_gpu_engine.py).
"""

import ctypes
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import types
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_engine import CONFIGS, _adversarial, _fp16_c, _specs
from test_gpu_chain import call_host as call_chain_host
from test_gpu_chain import chain_library

from mxsim import presets, vectors
from mxsim.engine import _kernels, fast
from mxsim.engine.fast import fused
from mxsim.engine.fast import step as fast_step
from mxsim.engine.fast.operands import Operand
from mxsim.engine.fast.paths import kernel_applies
from mxsim.engine.gpu import kernels

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed")

_I32, _I64 = ctypes.POINTER(ctypes.c_int32), ctypes.POINTER(ctypes.c_int64)
_P = ctypes.c_void_p
_MODES = ("rz", "rd", "rne", "rz-jam")


def _library(tag: str, flags: list[str]) -> Path:
    """step.cu built for the host (-DMXSIM_HOST) with ``flags``, cached by the source's hash."""
    text = kernels.source().encode()
    folder = Path(tempfile.gettempdir()) / "mxsim-gpu-kernel"
    folder.mkdir(exist_ok=True)
    lib = folder / f"step-{tag}-{hashlib.sha256(text + str(flags).encode()).hexdigest()[:16]}.so"
    if not lib.exists():
        tmp = folder / f"{lib.stem}.{os.getpid()}.so"
        subprocess.run(["g++", *flags, "-std=c++17", "-Wall", "-Wextra", "-shared", "-fPIC",
                        "-x", "c++", "-DMXSIM_HOST", str(kernels.SOURCE), "-o", str(tmp)],
                       check=True, capture_output=True)
        os.replace(tmp, lib)            # atomic: parallel workers never load a partial file
    return lib


def _build() -> ctypes.CDLL:
    dll = ctypes.CDLL(str(_library("O2", ["-O2"])))
    dll.mxsim_step_host.restype = ctypes.c_int
    return dll


@pytest.fixture(scope="module")
def host():
    return _build()


def _host_step_sums(dll, a, sa, b_side, acc, frac_bits, align, normalized, e_zero,
                    zero_acc=False):
    """``_kernels.step_sums`` computed by the host build of step.cu."""
    a_side = _kernels.side(a, sa, False)
    r, g = a_side[1].shape
    n = b_side[1].shape[0]
    if acc is not None:
        accs = tuple(np.ascontiguousarray(x, np.int64) for x in (
            acc.sign, acc.sig, acc.lsb, acc.e,
            acc.nan * _kernels.NAN | acc.inf * _kernels.INF | acc.zero * _kernels.ZERO))
    else:
        accs = (np.zeros((1, 1), np.int64),) * 5
    out = tuple(np.full((r, n), -7, np.int64) for _ in range(3))
    ptrs = [x.ctypes.data_as(_I32) for x in (*a_side, *b_side[:5])]
    ptrs += [x.ctypes.data_as(_I64) for x in accs]
    rc = dll.mxsim_step_host(
        *ptrs, ctypes.c_int64(r), ctypes.c_int64(n), ctypes.c_int(g),
        ctypes.c_int(acc is not None), ctypes.c_int(bool(zero_acc)), ctypes.c_int(frac_bits),
        ctypes.c_int(_kernels.ALIGN_CODES[align]), ctypes.c_int(bool(normalized)),
        ctypes.c_int(e_zero), *(x.ctypes.data_as(_I64) for x in out))
    assert rc == 0
    return out


def _operand(rng, shape, man, lsb_range, special_rate=0.05, zero_rate=0.2) -> Operand:
    """Random exact fields: sig < 2**(man+1), e = lsb + man (as a decoded code has), flags."""
    sig = rng.integers(0, 1 << (man + 1), shape, dtype=np.int64)
    sig[rng.random(shape) < zero_rate] = 0
    lsb = rng.integers(*lsb_range, shape, dtype=np.int64)
    kind = rng.random(shape)
    nan = kind < special_rate / 2
    inf = (kind >= special_rate / 2) & (kind < special_rate)
    sig[nan | inf] = 0
    sign = rng.integers(0, 2, shape, dtype=np.int64)
    return Operand(sign, sig, lsb, lsb + man, (sig == 0) & ~nan & ~inf, nan, inf)


def _scale(rng, shape, kind: str) -> Operand:
    """Block scales repeated to every element: e8m0 (sig 1) or ue4m3 (sig up to 15)."""
    if kind == "e8m0":
        e = rng.integers(-127, 128, shape, dtype=np.int64)
        sig = np.ones(shape, np.int64)
        lsb = e
    else:
        sig = rng.integers(8, 16, shape, dtype=np.int64)
        e = rng.integers(-9, 9, shape, dtype=np.int64)
        lsb = e - 3
    nan = rng.random(shape) < 0.02
    zero = (rng.random(shape) < 0.05) & ~nan
    sig = np.where(nan | zero, 0, sig)
    return Operand(np.zeros(shape, np.int64), sig, lsb, e, zero, nan, np.zeros(shape, bool))


def _case(seed: int):
    """One random step: shapes around the tiles (8 x 32 dots, 32 terms), all options."""
    rng = np.random.default_rng([seed, 18])
    r, n = int(rng.integers(1, 20)), int(rng.integers(1, 75))
    g = int(rng.choice([1, 3, 16, 31, 32, 33, 64, 100]))
    man = int(rng.choice([1, 3, 10, 23]))           # e2m1 .. fp32 upcast: huge significands
    spread = int(rng.choice([4, 40, 300]))           # 300: shifts far beyond 63
    a = _operand(rng, (r, g), man, (-spread, spread))
    b = _operand(rng, (g, n), man, (-spread, spread))
    sa = sb = None
    scale = rng.choice(["none", "e8m0", "ue4m3"])
    if scale != "none":
        sa, sb = _scale(rng, (r, g), scale), _scale(rng, (g, n), scale)
    acc = None
    zero_acc = bool(rng.random() < 0.3)
    if not zero_acc and rng.random() < 0.6:
        acc = _operand(rng, (r, n), 23, (-spread - 20, spread), special_rate=0.1)
    frac_bits = int(rng.integers(0, 31))
    e_zero = int(rng.choice([-200, -133, 0, 5, spread + 60]))
    return a, sa, b, sb, acc, frac_bits, e_zero, zero_acc


@pytest.mark.parametrize("seed", range(40))
def test_host_kernel_equals_numba_kernel_on_random_steps(host, seed):
    a, sa, b, sb, acc, frac_bits, e_zero, zero_acc = _case(seed)
    b_side = _kernels.prepare_b(b, sb)
    for align in _MODES:
        for normalized in (False, True):
            args = (a, sa, b_side, acc, frac_bits, align, normalized, e_zero, zero_acc)
            want = _kernels.step_sums(*args)
            got = _host_step_sums(host, *args)
            for w, x in zip(want, got, strict=True):
                np.testing.assert_array_equal(x, w, err_msg=f"{align} normalized={normalized}")


def test_host_kernel_negative_zero_and_special_flags(host):
    """Every term -0 gives flag 8 (not with a +0 accumulator); Inf x 0 is NaN; signed Inf."""
    z = np.zeros((1, 4), np.int64)
    one = np.ones((1, 4), np.int64)
    f = np.zeros((1, 4), bool)
    a = Operand(one.copy(), z.copy(), z.copy(), z.copy(), ~f, f.copy(), f.copy())
    b = Operand(z.T.copy(), one.T.copy(), z.T.copy(), z.T.copy(), f.T.copy(), f.T.copy(),
                f.T.copy())
    b_side = _kernels.prepare_b(b, None)
    for zero_acc, flag in ((False, 8), (True, 0)):
        got = _host_step_sums(host, a, None, b_side, None, 13, "rne", False, -133, zero_acc)
        assert (got[0][0, 0], got[2][0, 0]) == (0, flag)
    inf = f.copy()
    inf[0, 1] = True
    a_inf = Operand(one.copy(), z.copy(), z.copy(), z.copy(), ~inf, f.copy(), inf)
    got = _host_step_sums(host, a_inf, None, b_side, None, 13, "rz", False, -133)
    assert got[2][0, 0] & 7 == 4                # -Inf x +1
    assert got[2][0, 0] == _kernels.step_sums(a_inf, None, b_side, None, 13, "rz", False,
                                              -133)[2][0, 0]
    b_zero = Operand(z.T.copy(), z.T.copy(), z.T.copy(), z.T.copy(), ~f.T, f.T.copy(),
                     f.T.copy())
    got = _host_step_sums(host, a_inf, None, _kernels.prepare_b(b_zero, None), None, 13, "rz",
                          False, -133)
    assert got[2][0, 0] & 7 == 1                # Inf x 0


def _dot_through_host(host, monkeypatch, spec, vs):
    """fast.dot with its compiled step replaced by the host build of step.cu."""
    calls = []

    def step_sums(*args, **kw):
        calls.append(1)
        return _host_step_sums(host, *args, **kw)

    with monkeypatch.context() as m:
        m.setattr(fast_step._kernels, "step_sums", step_sums)
        d = fast.dot(spec, vs, whole=False)
    assert bool(calls) == kernel_applies(spec)      # the host build really ran
    return d


def _three_ways(host, monkeypatch, spec, vs):
    via_host = _dot_through_host(host, monkeypatch, spec, vs)
    np.testing.assert_array_equal(via_host, fast.dot(spec, vs))
    np.testing.assert_array_equal(via_host, fast.dot(spec, vs, kernel=False))


@pytest.mark.parametrize("preset,opts", CONFIGS[:13], ids=[p for p, _ in CONFIGS[:13]])
def test_host_kernel_in_the_engine_equals_numba_and_numpy_on_presets(host, monkeypatch, preset,
                                                                     opts):
    rng = np.random.default_rng(7)
    k = opts.get("k", 32) * 2
    block = opts.get("block", 16 if opts.get("scale_format") == "ue4m3" else 32)
    vs = _adversarial(opts["a_format"], opts.get("b_format", opts["a_format"]),
                      opts.get("scale_format"), block, k, rng)
    gen = {key: v for key, v in opts.items() if key != "c_fp16"}
    vs2 = vectors.generate("llm", m=9, n=37, **{"k": 64, **gen}, seed=3)
    if opts.get("c_fp16"):
        vs, vs2 = _fp16_c(vs), _fp16_c(vs2)
    for v in (vs, vs2):
        _three_ways(host, monkeypatch, presets.get(preset).spec_for(v), v)


@settings(max_examples=40, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(spec=_specs(), family=st.sampled_from(vectors.FAMILIES), seed=st.integers(0, 2 ** 16),
       with_c=st.booleans())
def test_host_kernel_in_the_engine_on_drawn_specs(host, monkeypatch, spec, family, seed, with_c):
    if family == "nan-scale" and spec.scale_format is None:
        family = "scale-extremes"
    vs = vectors.generate(family, a_format=spec.a_format, b_format=spec.b_format, m=3, n=5,
                          k=spec.k * 2, scale_format=spec.scale_format, block=spec.block,
                          with_c=with_c, seed=seed)
    if spec.d_format == "fp16" and with_c:
        vs = _fp16_c(vs)
    _three_ways(host, monkeypatch, spec, vs)


_SANITIZED_RUN = """
import ctypes, sys
import test_gpu_kernel as t
from mxsim.engine import _kernels
dll = ctypes.CDLL(sys.argv[1])
dll.mxsim_step_host.restype = ctypes.c_int
for seed in range(12):
    a, sa, b, sb, acc, frac_bits, e_zero, zero_acc = t._case(seed)
    b_side = _kernels.prepare_b(b, sb)
    for align in t._MODES:
        args = (a, sa, b_side, acc, frac_bits, align, seed % 2, e_zero, zero_acc)
        for w, x in zip(_kernels.step_sums(*args), t._host_step_sums(dll, *args)):
            assert (w == x).all()
print("clean")
"""


def test_host_kernel_reads_and_computes_only_in_bounds_under_asan_and_ubsan():
    """AddressSanitizer: no tile load reads past an operand (the partial tiles at the edges of
    rows, columns and terms); UBSan: no undefined shift or overflow."""
    asan = subprocess.run(["g++", "-print-file-name=libasan.so"], capture_output=True,
                          text=True).stdout.strip()
    if not Path(asan).is_absolute():
        pytest.skip("g++ has no AddressSanitizer runtime here")
    lib = _library("asan", ["-O1", "-g", "-fsanitize=address,undefined",
                            "-fno-sanitize-recover=all", "-fno-omit-frame-pointer"])
    env = dict(os.environ, LD_PRELOAD=asan, ASAN_OPTIONS="detect_leaks=0",
               # this folder (the module and test_engine, which it imports) and tests/
               PYTHONPATH=os.pathsep.join([str(Path(__file__).parent),
                                           str(Path(__file__).parents[2]),
                                           os.environ.get("PYTHONPATH", "")]))
    run = subprocess.run([sys.executable, "-c", _SANITIZED_RUN, str(lib)], env=env,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and run.stdout.strip() == "clean", run.stderr[-2000:]


def _nvcc() -> str | None:
    found = shutil.which("nvcc")
    for cand in (found, "/usr/local/cuda/bin/nvcc", *sorted(Path("/usr/local").glob(
            "cuda-*/bin/nvcc"))):
        if cand and Path(cand).exists():
            return str(cand)
    return None


def test_nvcc_compiles_every_kernel_for_sm90(tmp_path):
    nvcc = _nvcc()
    if nvcc is None:
        pytest.skip("nvcc is not installed (the host build above still runs)")
    cubin = tmp_path / "step.cubin"
    run = subprocess.run([nvcc, "-std=c++17", "-arch=sm_90", "--cubin", "-Xptxas", "-v", "-x",
                          "cu", str(kernels.SOURCE), "-o", str(cubin)], check=True,
                         capture_output=True, text=True)
    # Eight kernels, none spilling registers under __launch_bounds__(256, 4).
    spills = re.findall(r"(\d+) bytes spill stores", run.stdout + run.stderr)
    assert spills == ["0"] * 8
    data = cubin.read_bytes()
    for align in _MODES:
        for normalized in (False, True):
            assert kernels.kernel_name(align, normalized).encode() + b"\0" in data


def _kernel_params() -> list[tuple[str, str]]:
    """(C type, name) of the GPU kernels' parameters, read from step.cu."""
    text = kernels.source()
    head = text[text.index("mxsim_step_##MODE##_##NORM("):]
    head = head[head.index("(") + 1:head.index(")")].replace("\\", " ")
    params = [" ".join(p.split()) for p in head.split(",")]
    return [re.match(r"(.*?)\s*\*?\s*(\w+)$", p).groups() for p in params]


class _FakeCupy(types.ModuleType):
    """numpy dressed as CuPy, whose RawModule runs the host build of step.cu: kernels.py's
    plumbing (argument order and types, grid and block) checked against step.cu's kernels."""

    def __init__(self, dll, base=np, unwrap=lambda x: x):
        super().__init__("cupy")
        self.dll, self.launches, self.base, self.unwrap = dll, [], base, unwrap
        self.cuda = types.SimpleNamespace(runtime=types.SimpleNamespace(getDevice=lambda: 0))
        fake = self

        class RawModule:
            def __init__(self, code, options):
                self.chain = code == kernels.chain_source()
                assert (self.chain or code == kernels.source()) and "-std=c++17" in options

            def get_function(self, name):
                launch = fake.launch_chain if self.chain else fake.launch
                if name == "mxsim_pack_side":
                    assert self.chain
                    launch = fake.launch_pack
                if name == "mxsim_block_fma":
                    assert self.chain
                    launch = fake.launch_block_fma
                return lambda grid, block, args: launch(name, grid, block, args)
        self.RawModule = RawModule

    def launch_chain(self, name, grid, block, args):
        """A launch of chain.cu's kernel: types and grid checked, run by its host build."""
        args = [self.unwrap(x) for x in args]
        assert len(args) == 21
        for x, want in zip(args[:15], [np.int32] * 10 + [np.int64] * 5, strict=True):
            assert x.dtype == want and x.flags.c_contiguous
        r, n, ints, d_nan, col_tiles, out = args[15:]
        assert type(r) is np.int64 and type(n) is np.int64 and type(col_tiles) is np.int64
        assert ints.dtype == np.int32 and type(d_nan) is np.uint32
        assert out.dtype == np.uint32 and out.flags.c_contiguous and out.shape == (r, n)
        assert block == (kernels.TILE_COLS, kernels.TILE_ROWS)
        assert col_tiles == -(-n // 32) and grid == (-(-r // 8) * col_tiles,)
        self.launches.append(name)
        plain = name == "mxsim_chain_plain"
        assert int(ints[9]) == plain
        mode, norm = (0, 0) if plain else (int(x) for x in name.split("_")[2:])
        call_chain_host(chain_library(), args, mode, norm)

    def launch_pack(self, name, grid, block, args):
        """A launch of pack.cu's kernel: types checked, run by its host build."""
        args = [self.unwrap(x) for x in args]
        assert len(args) == 12 and block == (256,) and len(grid) == 1
        codes8, codes16, scales = args[:3]
        for x, want in zip(args[3:], [np.int32, np.int32, np.int64] + [np.int32] * 6,
                           strict=True):
            assert x.dtype == want and x.flags.c_contiguous
        wide = type(codes8) is np.uint64
        assert type(codes16 if wide else codes8) is not np.uint64
        assert (codes16 if wide else codes8).dtype == (np.uint16 if wide else np.uint8)
        self.launches.append(name)
        ptr = [None if type(x) is np.uint64 else x.ctypes.data_as(_P) for x in args]
        chain_library().mxsim_pack_host(*ptr)

    def launch_block_fma(self, name, grid, block, args):
        """A launch of fma.cu's kernel: types checked, run by its host build."""
        args = [self.unwrap(x) for x in args]
        assert len(args) == 9 and block == (256,) and len(grid) == 1
        partial, sa, sb, total, pf, m, n, last, d_nan = args
        for x, count in ((partial, m * n), (sa, m), (sb, n), (total, m * n)):
            assert x.dtype == np.uint32 and x.flags.c_contiguous and x.size == count
        assert pf.dtype == np.int64 and type(m) is np.int64 and type(n) is np.int64
        assert type(last) is np.int32 and type(d_nan) is np.uint32
        self.launches.append(name)
        chain_library().mxsim_block_fma_host(
            *(x.ctypes.data_as(_P) for x in (partial, sa, sb, total, pf)), ctypes.c_longlong(m),
            ctypes.c_longlong(n), ctypes.c_int(last), ctypes.c_uint(d_nan))

    def __getattr__(self, name):
        return getattr(self.base, name)

    def launch(self, name, grid, block, args):
        args = [self.unwrap(x) for x in args]
        params = _kernel_params()
        assert len(args) == len(params)
        kw = {}
        for (ctype, pname), value in zip(params, args, strict=True):
            if "*" in ctype or pname.startswith(("a_", "b_", "c_", "out_")):
                want = np.int32 if ctype.endswith("int") else np.int64
                assert value.dtype == want and value.flags.c_contiguous, pname
            else:
                want = np.int64 if "long" in ctype else np.int32
                assert type(value) is want, pname
            kw[pname] = value
        r, n = int(kw["r"]), int(kw["n"])
        assert block == (kernels.TILE_COLS, kernels.TILE_ROWS)
        assert kw["col_tiles"] == -(-n // 32) and grid == (-(-r // 8) * kw["col_tiles"],)
        mode, norm = (int(x) for x in name.split("_")[2:])
        self.launches.append(name)
        ptr = [kw[f"{s}_{f}"].ctypes.data_as(_I32 if s != "c" else _I64)
               for s in "abc" for f in ("sign", "sig", "lsb", "e", "flag")]
        assert self.dll.mxsim_step_host(
            *ptr, ctypes.c_int64(r), ctypes.c_int64(n), ctypes.c_int(kw["g"]),
            ctypes.c_int(kw["has_acc"]), ctypes.c_int(kw["zero_acc"]),
            ctypes.c_int(kw["frac_bits"]), ctypes.c_int(mode), ctypes.c_int(norm),
            ctypes.c_int(kw["e_zero"]),
            *(kw[o].ctypes.data_as(_I64) for o in ("out_sum", "out_lsb", "out_flag"))) == 0


@pytest.mark.parametrize("seed", range(6))
def test_cupy_loader_calls_the_kernels_as_step_cu_declares_them(host, monkeypatch, seed):
    fake = _FakeCupy(host)
    monkeypatch.setitem(sys.modules, "cupy", fake)
    kernels._module.cache_clear()
    kernels._kernel.cache_clear()
    try:
        a, sa, b, sb, acc, frac_bits, e_zero, zero_acc = _case(seed)
        b_side = kernels.prepare_b(b, sb)
        np.testing.assert_array_equal(b_side[5], _kernels.prepare_b(b, sb)[5])
        for align in _MODES:
            for normalized in (False, True):
                args = (frac_bits, align, normalized, e_zero, zero_acc)
                want = _kernels.step_sums(a, sa, _kernels.prepare_b(b, sb), acc, *args)
                got = kernels.step_sums(a, sa, b_side, acc, *args)
                for w, x in zip(want, got, strict=True):
                    assert x.dtype == np.int64
                    np.testing.assert_array_equal(x, w)
        assert len(fake.launches) == 8 and fake.launches[-1] == "mxsim_step_3_1"
    finally:
        kernels._module.cache_clear()
        kernels._kernel.cache_clear()


@pytest.fixture
def cupy_on_host(host, monkeypatch):
    """kernels.py on the strict CuPy stand-in of tests/fake_device.py (the engine's device
    tests), its RawModule running the host build of step.cu."""
    fake_device = pytest.importorskip("fake_device")
    cupy = _FakeCupy(host, fake_device.fake,
                     lambda x: x._a if isinstance(x, fake_device.Dev) else x)
    monkeypatch.setitem(sys.modules, "cupy", cupy)
    caches = (kernels._module, kernels._kernel, kernels._chain_module, kernels._chain_kernel)
    for f in caches:
        f.cache_clear()
    yield cupy, fake_device
    for f in caches:
        f.cache_clear()


@pytest.mark.parametrize("preset,opts", CONFIGS[:13], ids=[p for p, _ in CONFIGS[:13]])
def test_engine_on_device_arrays_through_kernels_py(cupy_on_host, preset, opts):
    """The GPU engine's path (fast engine on device arrays, kernels.py's step) == numba."""
    cupy, fake_device = cupy_on_host
    gen = {key: v for key, v in opts.items() if key != "c_fp16"}
    vs = vectors.generate("specials", m=5, n=37, **{"k": 64, **gen}, seed=4)
    if opts.get("c_fp16"):
        vs = _fp16_c(vs)
    spec = presets.get(preset).spec_for(vs)
    for whole in (True, False):
        cupy.launches.clear()
        got = fast.dot(spec, fake_device.to_fake(vs), kernel=kernels, whole=whole)
        np.testing.assert_array_equal(fake_device.fake.asnumpy(got), fast.dot(spec, vs))
        chain = whole and fused.applies(spec)
        assert bool(cupy.launches) == kernel_applies(spec)
        assert all(x.startswith("mxsim_chain_" if chain else "mxsim_step_")
                   for x in cupy.launches if x != "mxsim_pack_side")
        assert ("mxsim_pack_side" in cupy.launches) == (chain and spec.upcast is None)
