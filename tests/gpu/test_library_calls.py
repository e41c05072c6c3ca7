"""The library calls of gpu/hopper/library.py, run through torch's CPU kernels (device "cpu"):
operand conversion, transposes, output dtypes, bias, batches and one-line refusals, on
small-integer inputs whose every sum is exact. The GPU run itself (kernels, heuristic) is
gpu/runs/h200_library.sh's."""

import numpy as np
import pytest

from mxsim import formats, vectors
from mxsim.errors import UnitError

torch = pytest.importorskip("torch")
from gpu.hopper.library import Call, numeric_switches, run_call  # noqa: E402


def _ints(fmt, shape, rng):
    return formats.get(fmt).encode(rng.integers(-3, 4, size=shape).astype(np.float64))


def _set(fmt, m, n, k, *, batch=(), bias=False, seed=0):
    rng = np.random.default_rng(seed)
    a = _ints(fmt, batch + (m, k), rng)
    b = _ints(fmt, batch + (k, n), rng)
    c = None
    if bias:
        row = _ints(fmt, (n,), rng)
        c = np.broadcast_to(row, batch + (m, n)).copy()
    return vectors.VectorSet(a=a, b=b, a_format=fmt, b_format=fmt, c=c,
                             c_format=fmt if bias else "fp32")


def _exact(vs, bias=False):
    fa = formats.get(vs.a_format)
    x = fa.decode(vs.a) @ fa.decode(vs.b)
    if bias:
        x = x + formats.get(vs.c_format).decode(vs.c)
    return x


@pytest.mark.parametrize("fmt", ["bf16", "fp16", "tf32"])
@pytest.mark.parametrize("fn, out", [("mm", "fp32"), ("mm", "own"), ("matmul", "own"),
                                     ("linear", "own")])
def test_calls_on_cpu_give_the_exact_products(fmt, fn, out):
    if fmt == "tf32" and out == "fp32" and fn == "mm":
        out = "own"
    vs = _set(fmt, 3, 5, 16, seed=1)
    if fn == "mm" and out == "fp32":                   # out_dtype: CUDA only, torch says so
        with pytest.raises(UnitError, match="refused this set: Could not run 'aten::mm.dtype'"
                           ) as exc:
            run_call(vs, f"cublas-{fmt}", Call(fn, out=out), device="cpu")
        assert "\n" not in str(exc.value) and len(str(exc.value)) < 300
        return
    res = run_call(vs, f"cublas-{fmt}", Call(fn, out=out), device="cpu")
    want_fmt = "fp32" if out == "fp32" or fmt == "tf32" else fmt
    assert res.d_format == want_fmt and res.d.shape == (3, 5)
    assert np.array_equal(formats.get(want_fmt).decode(res.d), _exact(vs))
    assert res.extra["record"]["call"] == Call(fn, out=out).text(fmt)
    assert "allow_tf32" in res.extra["record"]["switches"]


def test_linear_with_bias_and_bmm():
    vs = _set("bf16", 4, 6, 32, bias=True, seed=2)
    res = run_call(vs, "cublas-bf16", Call("linear", out="own", bias=True), device="cpu")
    assert np.array_equal(formats.get("bf16").decode(res.d), _exact(vs, bias=True))
    bs = _set("fp16", 2, 3, 16, batch=(3,), seed=3)
    res = run_call(bs, "cublas-fp16", Call("bmm", out="own"), device="cpu")
    assert res.d.shape == (3, 2, 3) and res.d_format == "fp16"
    assert np.array_equal(formats.get("fp16").decode(res.d), _exact(bs))


def test_refusals_are_one_line():
    vs = _set("bf16", 2, 2, 16)
    cases = [
        (lambda: Call("gemv"), "call must be one of"),
        (lambda: Call("mm", bias=True), "a bias goes with the linear call"),
        (lambda: run_call(vs, "cublas-bf16", Call("bmm"), device="cpu"), "one batch axis"),
        (lambda: run_call(vs, "cublas-bf16", Call("scaled_mm"), device="cpu"),
         "does not take bf16"),
        (lambda: run_call(vs, "cublas-bf16", Call("linear", bias=True), device="cpu"),
         "generate the set with C"),
        (lambda: run_call(_set("bf16", 2, 2, 16, bias=True), "cublas-bf16", Call("mm"),
                          device="cpu"), "takes no C"),
        (lambda: run_call(vs, "cublas-bf16", Call("matmul", out="fp32"), device="cpu"),
         "no out_dtype"),
    ]
    for make, words in cases:
        with pytest.raises(UnitError, match=words) as exc:
            make()
        assert "\n" not in str(exc.value)


def test_switches_name_every_numerics_flag():
    s = numeric_switches(torch)
    for key in ("allow_tf32", "allow_bf16_reduced_precision_reduction",
                "allow_fp16_reduced_precision_reduction", "deterministic_algorithms",
                "CUBLAS_WORKSPACE_CONFIG", "float32_matmul_precision"):
        assert key in s


def test_heuristic_query_records_rather_than_raises():
    from gpu.hopper.heuristic import query
    vs = _set("bf16", 2, 2, 16)
    got = query(torch, vs, Call("mm", out="fp32"))
    assert isinstance(got, dict)
    assert "error" in got or {"splitk_num", "reduction_scheme", "tile_id"} <= set(got)


def test_gpu_run_library_options_are_for_library_paths(tmp_path):
    import subprocess
    import sys
    from pathlib import Path
    root = Path(__file__).resolve().parents[2]
    f = tmp_path / "in.npz"
    vectors.save(_set("bf16", 2, 2, 16), f)
    for argv, words in ((["--path", "mma-sync", "--call", "mm"], "are for the library paths"),
                        (["--path", "cublas-bf16", "--call", "gemv"], "invalid choice")):
        p = subprocess.run([sys.executable, "-m", "mxsim", "gpu", "run", str(f), *argv, "-o",
                            str(tmp_path / "o.npz")], capture_output=True, text=True, cwd=root)
        assert p.returncode == 2 and words in p.stderr, p.stderr
        assert p.stderr.count("\n") == 1 or "usage:" in p.stderr
    assert not (tmp_path / "o.npz").exists()


def test_tf32_off_is_an_fp32_gemm_and_says_so():
    vs = _set("tf32", 2, 3, 16, seed=4)
    before = torch.backends.cuda.matmul.allow_tf32
    res = run_call(vs, "cublas-tf32", Call("mm", out="own", tf32=False), device="cpu")
    assert res.extra["path"] == "cublas-fp32" and "TF32 off" in res.extra["call"]
    assert res.extra["record"]["switches"]["allow_tf32"] is False
    on = run_call(vs, "cublas-tf32", Call("mm", out="own"), device="cpu")
    assert on.extra["record"]["switches"]["allow_tf32"] is True
    assert torch.backends.cuda.matmul.allow_tf32 == before          # restored
