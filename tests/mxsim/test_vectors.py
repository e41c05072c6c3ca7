"""Tests of ``mxsim.vectors``: the ``mxsim.vectors/1`` file schema, its validation, atomic
file I/O, subsets, scale expansion and the seeded generator families.

Seeds are fixed (``SEED``, and the ``seed`` arguments below) and appear in the test ids.
"""

import dataclasses
import io
import json
import os
import pickle
import re
import zipfile
from pathlib import Path

import numpy as np
import pytest

from mxsim import formats, vectors
from mxsim.cli import main
from mxsim.engine import fast
from mxsim.errors import VectorFileError
from mxsim.vectors import VectorSet

SEED = 20240607
HINT = "vector sets are written by `mxsim vectors gen` or `mxsim run`"
ALLOWED = "a, b, c, d, a_scale, b_scale, tensor_scale, meta"
ELEMENTS = "e4m3, e5m2, e3m2, e2m3, e2m1, int8"
OPERANDS = "e4m3, e5m2, e3m2, e2m3, e2m1, int8, fp16, bf16, tf32"


def _bits(x: np.ndarray) -> np.ndarray:
    """Same-width unsigned view: compares bits (NaN payloads, -0), not values."""
    return np.asarray(x).view(np.dtype(f"u{x.dtype.itemsize}"))


def _assert_same_arrays(x: VectorSet, y: VectorSet) -> None:
    for name in ("a", "b", "c", "d", "a_scale", "b_scale", "tensor_scale"):
        u, v = getattr(x, name), getattr(y, name)
        assert (u is None) == (v is None), name
        if u is not None:
            assert (u.dtype, u.shape) == (v.dtype, v.shape), name
            np.testing.assert_array_equal(_bits(u), _bits(v), err_msg=name)


def _full(path: Path, body: str) -> str:
    """Whole-message pattern for an error about ``path``."""
    return "^" + re.escape(f"{path}: {body}") + "$"


# -- hand-built sets ------------------------------------------------------------------------

def _hand_set(*, batch=(), m=4, n=8, k=64, a_format="e4m3", b_format="e4m3", scales=None,
              c_format="fp32", d_format=None, tensor_scale=None, seed=SEED) -> VectorSet:
    """A valid set built without the generators, with awkward bit patterns where they fit.

    ``scales`` is None, ``"e8m0"`` (block 32), ``"ue4m3"`` (block 16), ``"fp32-tensor"``,
    ``"fp32-row"`` or ``"fp32-block"`` (128).
    """
    rng = np.random.default_rng(seed)
    fa, fb = formats.get(a_format), formats.get(b_format)
    a = rng.integers(0, 1 << fa.bits, size=batch + (m, k), dtype=np.uint8)
    b = rng.integers(0, 1 << fb.bits, size=batch + (k, n), dtype=np.uint8)
    cf = formats.get(c_format)
    c = rng.integers(0, 1 << cf.bits, size=batch + (m, n), dtype=np.uint64).astype(cf.code_dtype)
    c.reshape(-1)[:2] = [cf.code_of_nan | 1, 1 << (cf.bits - 1)]   # NaN with payload, -0
    kw = {}
    if scales == "e8m0":
        kw = dict(scale_format="e8m0", block=32,
                  a_scale=rng.integers(0, 256, batch + (m, k // 32), dtype=np.uint8),
                  b_scale=rng.integers(0, 256, batch + (k // 32, n), dtype=np.uint8))
    elif scales == "ue4m3":
        kw = dict(scale_format="ue4m3", block=16,
                  a_scale=rng.integers(0, 128, batch + (m, k // 16), dtype=np.uint8),
                  b_scale=rng.integers(0, 128, batch + (k // 16, n), dtype=np.uint8))
    elif scales is not None:
        gran = scales.removeprefix("fp32-")
        sa, sb = {"tensor": ((), ()), "row": (batch + (m, 1), batch + (1, n)),
                  "block": (batch + (m, k // 128), batch + (k // 128, n // 128))}[gran]
        a_s = rng.standard_normal(sa).astype(np.float32)
        b_s = rng.standard_normal(sb).astype(np.float32)
        if a_s.ndim:
            a_s.reshape(-1)[0] = np.uint32(0x7FC00123).view(np.float32)   # NaN with payload
        kw = dict(scale_format="fp32", block=128 if gran == "block" else None,
                  a_scale=a_s, b_scale=b_s)
    ts = None if tensor_scale is None else np.array(tensor_scale, np.float32)
    vs = VectorSet(a=a, b=b, a_format=a_format, b_format=b_format, c=c, c_format=c_format,
                   tensor_scale=ts, producer="tests/mxsim/test_vectors.py", **kw)
    if d_format is not None:
        df = formats.get(d_format)
        d = rng.integers(0, 1 << df.bits, size=batch + (m, n), dtype=np.uint64)
        vs = vs.with_result(d.astype(df.code_dtype), d_format=d_format, producer="hand",
                            unit="exact", engine="reference", gpu={"name": "none", "sm": 0},
                            families=["uniform", "zeros"], seed=7)
    return vs


ROUND_TRIPS = {
    "unscaled":           dict(),
    "unscaled-int8-e2m1": dict(a_format="int8", b_format="e2m1", batch=(2,)),
    "e8m0-block32":       dict(scales="e8m0", batch=(3,)),
    "ue4m3-block16-ts":   dict(scales="ue4m3", a_format="e2m1", b_format="e2m1",
                               tensor_scale=0.0078125, batch=(2, 2)),
    "fp32-tensor":        dict(scales="fp32-tensor", batch=(2,)),
    "fp32-row":           dict(scales="fp32-row", batch=(2, 3)),
    "fp32-block128":      dict(scales="fp32-block", m=3, n=256, k=256),
    "c-fp16-d-bf16":      dict(c_format="fp16", d_format="bf16", batch=(1,)),
    "c-bf16-d-fp16":      dict(c_format="bf16", d_format="fp16", scales="e8m0"),
    "d-fp32-provenance":  dict(d_format="fp32", a_format="e5m2", b_format="e3m2", batch=(2, 1)),
}


@pytest.mark.parametrize("case", ROUND_TRIPS.values(), ids=ROUND_TRIPS.keys())
def test_vectors_round_trip(tmp_path, case):
    vs = _hand_set(**case)
    path = tmp_path / "set.npz"
    vectors.save(vs, path)
    back = vectors.load(path)
    _assert_same_arrays(vs, back)
    assert back.meta == vs.meta
    assert back.extra == vs.extra
    assert (back.a_format, back.b_format, back.scale_format, back.block, back.c_format,
            back.d_format, back.producer) == (vs.a_format, vs.b_format, vs.scale_format,
                                              vs.block, vs.c_format, vs.d_format, vs.producer)
    assert back.batch_shape == vs.batch_shape == case.get("batch", ())
    # Saving what was loaded gives the same arrays and meta again.
    vectors.save(back, tmp_path / "again.npz")
    again = vectors.load(tmp_path / "again.npz")
    _assert_same_arrays(vs, again)
    assert again.meta == vs.meta


def test_vectors_round_trip_provenance_keys(tmp_path):
    vs = _hand_set(d_format="fp32")
    vectors.save(vs, tmp_path / "r.npz")
    meta = vectors.load(tmp_path / "r.npz").meta
    assert meta == {"schema": "mxsim.vectors/1", "a_format": "e4m3", "b_format": "e4m3",
                    "scale_format": None, "block": None, "producer": "hand",
                    "c_format": "fp32", "d_format": "fp32", "unit": "exact",
                    "engine": "reference", "gpu": {"name": "none", "sm": 0},
                    "families": ["uniform", "zeros"], "seed": 7}


def test_vectors_round_trip_generated(tmp_path):
    vs = vectors.generate_suite(count=2, scale_format="e8m0", m=4, n=4, k=64, seed=SEED)
    vectors.save(vs, tmp_path / "s.npz")
    back = vectors.load(tmp_path / "s.npz")
    _assert_same_arrays(vs, back)
    assert back.meta == vs.meta
    assert back.inputs_equal(vs)


# -- atomic save ----------------------------------------------------------------------------

def test_vectors_save_missing_directory(tmp_path):
    path = tmp_path / "missing" / "set.npz"
    with pytest.raises(VectorFileError, match=_full(path, "directory does not exist")):
        vectors.save(_hand_set(), path)
    assert list(tmp_path.iterdir()) == []


def test_vectors_set_is_checked_when_built_and_frozen():
    vs = _hand_set()
    with pytest.raises(VectorFileError, match="^array 'a' must be uint8 codes, not int16$"):
        vs.replace(a=vs.a.astype(np.int16))
    with pytest.raises(VectorFileError, match=r"^K of a \(64\) and b \(63\) differ"):
        vs.replace(b=vs.b[:-1])
    with pytest.raises(dataclasses.FrozenInstanceError):
        vs.a = vs.a.astype(np.int16)
    with pytest.raises(TypeError):
        vs.extra["note"] = "changed in place"


def test_vectors_extra_is_a_copy():
    extra = {"note": "mine"}
    vs = _hand_set().replace(extra=extra)
    extra["note"] = "changed"
    assert vs.extra == {"note": "mine"} and vs.meta["note"] == "mine"


def test_vectors_pickles_with_its_extra():
    vs = _hand_set(d_format="fp32")
    back = pickle.loads(pickle.dumps(vs))
    _assert_same_arrays(vs, back)
    assert back.meta == vs.meta
    with pytest.raises(TypeError):
        back.extra["unit"] = "other"


def test_vectors_save_failure_keeps_old_file(tmp_path, monkeypatch):
    path = tmp_path / "set.npz"
    vectors.save(_hand_set(), path)
    before = path.read_bytes()

    def disk_full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(np, "savez_compressed", disk_full)
    with pytest.raises(VectorFileError, match=_full(path, "cannot write (No space left on "
                                                          "device)")):
        vectors.save(_hand_set(seed=2), path)
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["set.npz"]


def test_vectors_save_replaces(tmp_path):
    path = tmp_path / "set.npz"
    vectors.save(_hand_set(seed=1), path)
    vectors.save(_hand_set(seed=2), path)
    _assert_same_arrays(vectors.load(path), _hand_set(seed=2))
    assert [p.name for p in tmp_path.iterdir()] == ["set.npz"]


def test_vectors_save_onto_directory(tmp_path):
    (tmp_path / "d.npz").mkdir()
    with pytest.raises(VectorFileError, match=_full(tmp_path / "d.npz",
                                                    "cannot write (Is a directory)")):
        vectors.save(_hand_set(), tmp_path / "d.npz")
    assert [p.name for p in tmp_path.iterdir()] == ["d.npz"]
    assert list((tmp_path / "d.npz").iterdir()) == []


def test_vectors_save_mode_follows_umask(tmp_path):
    old = os.umask(0o027)
    try:
        vectors.save(_hand_set(), tmp_path / "set.npz")
    finally:
        os.umask(old)
    assert (tmp_path / "set.npz").stat().st_mode & 0o777 == 0o640


# -- bad input ------------------------------------------------------------------------------

def _valid_parts(scales=None):
    """Arrays (without meta) and the meta dict of a valid unscaled or scaled set."""
    vs = _hand_set(scales=scales, m=4, n=8, k=64)
    arrays = {name: getattr(vs, name) for name in ("a", "b", "c", "a_scale", "b_scale")
              if getattr(vs, name) is not None}
    return arrays, vs.meta


def _write(path: Path, arrays: dict, meta) -> Path:
    """Write an npz as-is (no validation); a dict meta is JSON-encoded."""
    out = dict(arrays)
    if meta is not None:
        out["meta"] = np.array(json.dumps(meta) if isinstance(meta, dict) else meta)
    np.savez(path, **out)
    return path


def _drop(name):
    return lambda arrays, meta: arrays.pop(name)


def _set_array(name, fn):
    def edit(arrays, meta):
        arrays[name] = fn(arrays)
    return edit


def _set_meta(**kw):
    return lambda arrays, meta: meta.update(kw)


def _meta_del(key):
    return lambda arrays, meta: meta.pop(key)


def _both(*edits):
    def edit(arrays, meta):
        for e in edits:
            e(arrays, meta)
    return edit


BAD = {
    # id: (scales of the valid start, edit, message)
    "missing-a": (None, _drop("a"), "array 'a' is missing"),
    "missing-b": (None, _drop("b"), "array 'b' is missing"),
    "unknown-array": (None, _set_array("e", lambda a: a["c"]),
                      f"unknown array(s) 'e'; mxsim.vectors/1 allows {ALLOWED}"),
    "unknown-arrays": (None, _both(_set_array("x", lambda a: a["c"]),
                                   _set_array("D", lambda a: a["c"])),
                       f"unknown array(s) 'D', 'x'; mxsim.vectors/1 allows {ALLOWED}"),
    "a-int16": (None, _set_array("a", lambda a: a["a"].astype(np.int16)),
                "array 'a' must be uint8 codes, not int16"),
    "b-float32": (None, _set_array("b", lambda a: a["b"].astype(np.float32)),
                  "array 'b' must be uint8 codes, not float32"),
    "a-1d": (None, _set_array("a", lambda a: a["a"][0]),
             "array 'a' must have at least 2 dimensions, not shape (64,)"),
    "c-float32": (None, _set_array("c", lambda a: a["c"].view(np.float32)),
                  "array 'c' must be uint32 bit patterns of fp32, not float32"),
    "c-fp16-uint32": (None, _set_meta(c_format="fp16"),
                      "array 'c' must be uint16 bit patterns of fp16, not uint32"),
    "d-bf16-int32": (None, _both(_set_meta(d_format="bf16"),
                                 _set_array("d", lambda a: a["c"].view(np.int32))),
                     "array 'd' must be uint16 bit patterns of bf16, not int32"),
    "e8m0-scale-float32": ("e8m0", _set_array("a_scale",
                                              lambda a: a["a_scale"].astype(np.float32)),
                           "array 'a_scale' must be uint8 e8m0 codes, not float32"),
    "fp32-scale-uint32": ("fp32-row", _set_array("b_scale",
                                                 lambda a: a["b_scale"].view(np.uint32)),
                          "array 'b_scale' must be float32 for fp32 scales, not uint32"),
    "k-mismatch": (None, _set_array("b", lambda a: a["b"][:32]),
                   "K of a (64) and b (32) differ: a is (..., M, K) and b is (..., K, N)"),
    "k-zero": (None, _both(_set_array("a", lambda a: a["a"][:, :0]),
                           _set_array("b", lambda a: a["b"][:0])),
               "M, N and K must be at least 1, not 4, 8, 0"),
    "m-zero": (None, _both(_set_array("a", lambda a: a["a"][:0]),
                           _set_array("c", lambda a: a["c"][:0])),
               "M, N and K must be at least 1, not 0, 8, 64"),
    "batch-mismatch": (None, _both(_set_array("a", lambda a: np.stack([a["a"]] * 2)),
                                   _set_array("b", lambda a: np.stack([a["b"]] * 3))),
                       "batch dimensions of a (2,) and b (3,) differ"),
    "c-shape": (None, _set_array("c", lambda a: a["c"].T.copy()),
                "array 'c' must have shape (4, 8), not (8, 4)"),
    "d-shape": (None, _set_array("d", lambda a: a["c"][:2]),
                "array 'd' must have shape (4, 8), not (2, 8)"),
    "c-batch-shape": (None, _set_array("c", lambda a: a["c"][None]),
                      "array 'c' must have shape (4, 8), not (1, 4, 8)"),
    "a-scale-shape-block32": ("e8m0", _set_array("a_scale", lambda a: a["a_scale"][:, :1]),
                              "array 'a_scale' must have shape (4, 2) for block 32, not (4, 1)"),
    "b-scale-shape-block32": ("e8m0", _set_array("b_scale", lambda a: a["b_scale"].T.copy()),
                              "array 'b_scale' must have shape (2, 8) for block 32, not (8, 2)"),
    "a-scale-as-block16": ("e8m0", _set_meta(block=16),
                           "array 'a_scale' must have shape (4, 4) for block 16, not (4, 2)"),
    "block-24": ("e8m0", _set_meta(block=24),
                 "block must be a power of two from 1 to 65536 for e8m0 scales, not 24"),
    "block-64": ("e8m0", _set_meta(block=64),
                 "array 'a_scale' must have shape (4, 1) for block 64, not (4, 2)"),
    "block-null-ue4m3": ("ue4m3", _set_meta(block=None),
                         "block must be a power of two from 1 to 65536 for ue4m3 scales, not "
                         "None"),
    "k-not-multiple": ("e8m0", _both(_set_array("a", lambda a: a["a"][:, :48]),
                                     _set_array("b", lambda a: a["b"][:48])),
                       "K (48) must be a multiple of the block (32)"),
    "fp32-row-shape": ("fp32-row", _set_array("a_scale", lambda a: a["a_scale"].T.copy()),
                       "array 'a_scale' must have shape () or (4, 1) for fp32 scales with "
                       "block None, not (1, 4)"),
    "fp32-block-shapes": ("fp32-row", _set_meta(block=128),
                          "block-wise fp32 scales need K and N multiples of 128, not K=64, N=8"),
    "fp32-block-32": ("fp32-row", _set_meta(block=32),
                      "block must be null or 128 for fp32 scales, not 32"),
    "a-format-unknown": (None, _set_meta(a_format="e9m9"),
                         f"a_format must be one of {OPERANDS}, not 'e9m9'"),
    "a-format-fp32": (None, _set_meta(a_format="fp32"),
                      f"a_format must be one of {OPERANDS}, not 'fp32'"),
    "b-format-e8m0": (None, _set_meta(b_format="e8m0"),
                      f"b_format must be one of {OPERANDS}, not 'e8m0'"),
    "a-format-not-string": (None, _set_meta(a_format=4),
                            "meta.a_format must be a string, not 4"),
    "c-format-unknown": (None, _set_meta(c_format="fp64"),
                         "c_format must be one of fp32, fp16, bf16, not 'fp64'"),
    "d-format-null": (None, _set_meta(d_format=None),
                      "d_format must be one of fp32, fp16, bf16, not None"),
    "scale-format-unknown": ("e8m0", _set_meta(scale_format="e9m0"),
                             "scale_format must be null or one of e8m0, ue4m3, fp32, "
                             "not 'e9m0'"),
    "code-out-of-range": (None, _both(_set_meta(a_format="e2m1"),
                                      _set_array("a", lambda a: np.full((4, 64), 0x10,
                                                                        np.uint8))),
                          "array 'a' holds code 0x10, outside e2m1 (4 bits)"),
    "code-out-of-range-fp6": (None, _both(_set_meta(b_format="e3m2"),
                                          _set_array("b", lambda a: a["b"] | 0x40)),
                              None),   # message depends on the largest code; checked below
    "scales-without-format": ("e8m0", _set_meta(scale_format=None, block=None),
                              "scales or block given but scale_format is null"),
    "block-without-format": (None, _set_meta(block=32),
                             "scales or block given but scale_format is null"),
    "missing-b-scale": ("e8m0", _drop("b_scale"),
                        "scale_format is e8m0 but array 'b_scale' is missing"),
    "tensor-scale-e8m0": ("e8m0", _set_array("tensor_scale",
                                             lambda a: np.array(2.0, np.float32)),
                          "tensor_scale is the NVFP4 per-tensor scale and needs scale_format "
                          "ue4m3"),
    "tensor-scale-unscaled": (None, _set_array("tensor_scale",
                                               lambda a: np.array(2.0, np.float32)),
                              "tensor_scale is the NVFP4 per-tensor scale and needs "
                              "scale_format ue4m3"),
    "tensor-scale-shape": ("ue4m3", _set_array("tensor_scale",
                                               lambda a: np.ones(1, np.float32)),
                           "array 'tensor_scale' must be a float32 scalar"),
    "tensor-scale-float64": ("ue4m3", _set_array("tensor_scale", lambda a: np.array(2.0)),
                             "array 'tensor_scale' must be a float32 scalar"),
    "meta-wrong-schema": (None, _set_meta(schema="mxsim.vectors/2"),
                          "meta.schema must be 'mxsim.vectors/1', not 'mxsim.vectors/2'"),
    "meta-no-schema": (None, _meta_del("schema"),
                       "meta.schema must be 'mxsim.vectors/1', not None"),
    "meta-no-producer": (None, _meta_del("producer"), "meta lacks producer"),
    "meta-no-block-format": (None, _both(_meta_del("block"), _meta_del("a_format")),
                             "meta lacks a_format, block"),
    "meta-block-string": ("e8m0", _set_meta(block="32"),
                          "meta.block must be null or an integer, not '32'"),
    "meta-block-bool": ("e8m0", _set_meta(block=True),
                        "meta.block must be null or an integer, not True"),
}


@pytest.mark.parametrize("scales, edit, message", BAD.values(), ids=BAD.keys())
def test_vectors_bad_input(tmp_path, scales, edit, message):
    arrays, meta = _valid_parts(scales)
    edit(arrays, meta)
    path = _write(tmp_path / "bad.npz", arrays, meta)
    if message is None:
        message = (f"array 'b' holds code {int(arrays['b'].max()):#x}, outside e3m2 (6 bits)")
    with pytest.raises(VectorFileError, match=_full(path, message)):
        vectors.load(path)


def test_vectors_bad_input_built_without_path():
    with pytest.raises(VectorFileError, match=f"^a_format must be one of {OPERANDS}, "
                                              f"not 'fp32'$"):
        _hand_set().replace(a_format="fp32")


META_BAD = {
    "missing": (None, "array 'meta' is missing"),
    "not-json": ("{schema: 1}",
                 "meta is not valid JSON (Expecting property name enclosed in double quotes "
                 "at char 1)"),
    "empty-string": ("", "meta is not valid JSON (Expecting value at char 0)"),
    "list": ('["mxsim.vectors/1"]', "meta must be a JSON object"),
    "number": ("1", "meta must be a JSON object"),
    "not-a-string": (np.arange(3), "array 'meta' must be a JSON string"),
    "bytes": (np.bytes_(b'{"schema": "mxsim.vectors/1"}'), "array 'meta' must be a JSON string"),
}


@pytest.mark.parametrize("meta, message", META_BAD.values(), ids=META_BAD.keys())
def test_vectors_bad_meta(tmp_path, meta, message):
    arrays, _ = _valid_parts()
    path = _write(tmp_path / "bad.npz", arrays, meta)
    with pytest.raises(VectorFileError, match=_full(path, message)):
        vectors.load(path)


# Unpickling an object built by this class would call _record; a loader that unpickles fails.
UNPICKLED: list[str] = []


def _record(tag: str) -> str:
    UNPICKLED.append(tag)
    return tag


class _Trap:
    def __reduce__(self):
        return _record, ("unpickled",)


def _pickled_npz(path: Path) -> Path:
    arrays, meta = _valid_parts()
    arrays["c"] = np.array([_Trap()], dtype=object)
    np.savez(path, meta=np.array(json.dumps(meta)), **arrays)
    return path


def _corrupt_npz(path: Path) -> Path:
    """A valid compressed npz whose first member's deflate stream is overwritten."""
    vectors.save(_hand_set(), path)
    raw = bytearray(path.read_bytes())
    with zipfile.ZipFile(path) as z:
        info = z.infolist()[0]
    start = info.header_offset + 30 + len(info.filename.encode()) + 20   # inside the data
    raw[start:start + 64] = b"\xff" * 64
    path.write_bytes(bytes(raw))
    return path


def _npy_as_npz(path: Path) -> Path:
    with open(path, "wb") as fh:
        np.save(fh, np.zeros((4, 4), np.uint8))
    return path


def _raw_member_npz(path: Path) -> Path:
    arrays, _ = _valid_parts()
    with zipfile.ZipFile(path, "w") as z:
        for name, arr in arrays.items():
            buf = io.BytesIO()
            np.save(buf, arr)
            z.writestr(f"{name}.npy", buf.getvalue())
        z.writestr("meta.npy", b'{"schema": "mxsim.vectors/1"}')
    return path


def test_vectors_bad_file_pickle_trap_works(tmp_path):
    # The trap is live: a loader that allowed pickles would run _record.
    with np.load(_pickled_npz(tmp_path / "p.npz"), allow_pickle=True) as z:
        z["c"]
    assert UNPICKLED == ["unpickled"]
    UNPICKLED.clear()


def _truncated_npz(path: Path) -> Path:
    vectors.save(_hand_set(), path)
    raw = path.read_bytes()
    path.write_bytes(raw[:len(raw) // 2])
    return path


NOT_NPZ = f"not an .npz file; {HINT}"
FILE_BAD = {
    "text": (lambda p: p.write_text("a,b,c\n1,2,3\n"), NOT_NPZ),
    "empty": (lambda p: p.write_bytes(b""), NOT_NPZ),
    "truncated": (_truncated_npz, NOT_NPZ),
    "npy": (_npy_as_npz, NOT_NPZ),
    "pickled": (_pickled_npz, "unreadable npz (Object arrays cannot be loaded when "
                              f"allow_pickle=False); {HINT}"),
    "raw-member": (_raw_member_npz, f"member(s) 'meta' are not .npy arrays; {HINT}"),
    "no-such-file": (lambda p: None, "no such file"),
    "directory": (lambda p: p.mkdir(), "no such file"),
}


@pytest.mark.parametrize("make, message", FILE_BAD.values(), ids=FILE_BAD.keys())
def test_vectors_bad_file(tmp_path, make, message):
    path = tmp_path / "bad.npz"
    make(path)
    with pytest.raises(VectorFileError, match=_full(path, message)):
        vectors.load(path)
    assert UNPICKLED == []


def test_vectors_bad_file_corrupt_member(tmp_path):
    path = _corrupt_npz(tmp_path / "bad.npz")
    pattern = ("^" + re.escape(f"{path}: unreadable npz (")
               + r"Error -3 while decompressing data: [^\n]+" + re.escape(f"); {HINT}") + "$")
    with pytest.raises(VectorFileError, match=pattern):
        vectors.load(path)


CLI_BAD = {
    "text": lambda p: p.write_text("hello\n"),
    "pickled": _pickled_npz,
    "corrupt": _corrupt_npz,
    "npy": _npy_as_npz,
    "missing": lambda p: None,
    "unknown-array": lambda p: _write(p, {**_valid_parts()[0], "x": np.zeros(1)},
                                      _valid_parts()[1]),
    "code-range": lambda p: _write(p, {**_valid_parts()[0],
                                       "a": np.full((4, 64), 0x10, np.uint8)},
                                   {**_valid_parts()[1], "a_format": "e2m1"}),
}


@pytest.mark.parametrize("verb", ["info", "run", "compare"])
@pytest.mark.parametrize("make", CLI_BAD.values(), ids=CLI_BAD.keys())
def test_vectors_cli_bad_file(tmp_path, capsys, make, verb):
    path = tmp_path / "bad.npz"
    make(path)
    out = tmp_path / "out.npz"
    argv = {"info": ["vectors", "info", str(path)],
            "run": ["run", str(path), "-o", str(out)],
            "compare": ["compare", str(path), "--unit", "exact"]}[verb]
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith(f"mxsim: error: {path}: ")
    assert captured.err.count("\n") == 1 and captured.err.endswith("\n")
    assert "Traceback" not in captured.err
    assert not out.exists()
    assert UNPICKLED == []


@pytest.mark.parametrize("args, message", [
    (["--family", "bogus"], "Family must be one of "),
    (["--family", "nan-scale"], "Family 'nan-scale' needs block scales; pass a scale format"),
    (["--scale-format", "e8m0", "--block", "0"],
     "Block must be a power of two from 1 to 65536 for e8m0 scales, not 0"),
    (["--scale-format", "e8m0", "-k", "48"], "K (48) must be a multiple of the block (32)"),
    (["--seed", "-1"], "Seed must be a non-negative integer, not -1"),
    (["--a-format", "fp32"], f"a_format must be one of {OPERANDS}, not 'fp32'"),
    (["--a-format", "e12m9"], "Unknown format 'e12m9'; choose one of "),
], ids=["family", "nan-scale", "block-0", "k-48", "seed", "fp32", "e12m9"])
def test_vectors_cli_gen_bad(tmp_path, capsys, args, message):
    out = tmp_path / "g.npz"
    assert main(["vectors", "gen", "-o", str(out), *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("mxsim: error: " + message)
    assert err.count("\n") == 1 and "Traceback" not in err
    assert list(tmp_path.iterdir()) == []


def test_vectors_cli_gen_info(tmp_path, capsys):
    out = tmp_path / "g.npz"
    assert main(["vectors", "gen", "--family", "normal,zeros", "--count", "2", "-m", "4",
                 "-n", "4", "-k", "64", "--scale-format", "ue4m3", "--seed", "3",
                 "-o", str(out), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["dots"] == 4 * 4 * 4 and info["block"] == 16 and info["seed"] == 3
    assert info["families"] == ["normal", "zeros"]
    vs = vectors.load(out)
    assert vs.extra["families"] == ["normal", "normal", "zeros", "zeros"]
    assert main(["vectors", "info", str(out), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == info


# -- generators -----------------------------------------------------------------------------

PAIRS = [("e4m3", "e4m3"), ("e5m2", "e4m3"), ("e2m1", "e2m1"), ("int8", "int8"),
         ("e3m2", "e2m3")]
SCALINGS = {  # id: (scale_format, scale_granularity, m, n, k)
    "unscaled": (None, "block", 4, 8, 64),
    "e8m0": ("e8m0", "block", 4, 8, 64),
    "ue4m3": ("ue4m3", "block", 4, 8, 64),
    "fp32-tensor": ("fp32", "tensor", 4, 8, 64),
    "fp32-row": ("fp32", "row", 4, 8, 64),
    "fp32-block": ("fp32", "block", 2, 128, 128),
}
FINITE_FAMILIES = [f for f in vectors.FAMILIES if f != "specials"]


def _gen(family, pair, scaling, seed=SEED, **kw):
    sf, gran, m, n, k = SCALINGS[scaling]
    return vectors.generate(family, a_format=pair[0], b_format=pair[1], m=m, n=n, k=k,
                            scale_format=sf, scale_granularity=gran, seed=seed, **kw)


def _same(x: VectorSet, y: VectorSet) -> bool:
    try:
        _assert_same_arrays(x, y)
    except AssertionError:
        return False
    return x.meta == y.meta


@pytest.mark.parametrize("scaling", SCALINGS, ids=SCALINGS.keys())
@pytest.mark.parametrize("pair", PAIRS, ids=["x".join(p) for p in PAIRS])
@pytest.mark.parametrize("family", vectors.FAMILIES)
def test_vectors_generate(family, pair, scaling):
    sf, gran, m, n, k = SCALINGS[scaling]
    if family == "nan-scale" and sf is None:
        with pytest.raises(VectorFileError, match=r"^Family 'nan-scale' needs block scales; "
                                                  r"pass a scale format$"):
            _gen(family, pair, scaling)
        return
    vs = _gen(family, pair, scaling)
    assert vs.replace().inputs_equal(vs)       # building it again passes the checks
    assert (vs.a_format, vs.b_format, vs.scale_format) == (pair[0], pair[1], sf)
    assert vs.block == {"e8m0": 32, "ue4m3": 16, None: None}.get(
        sf, 128 if gran == "block" else None)
    assert (vs.a.shape, vs.b.shape, vs.c.shape) == ((m, k), (k, n), (m, n))
    assert (vs.a.dtype, vs.b.dtype, vs.c.dtype) == (np.uint8, np.uint8, np.uint32)
    assert vs.d is None and vs.tensor_scale is None
    assert vs.extra == {"family": family, "seed": SEED}
    assert vs.producer == "mxsim"
    if family in FINITE_FAMILIES:
        for name, fmt in (("a", pair[0]), ("b", pair[1])):
            cls = formats.get(fmt).classify(getattr(vs, name))
            assert not np.isin(cls, [formats.Class.NAN, formats.Class.INF]).any(), name
    if family != "nan-scale" and sf is not None:
        sa, sb = vs.scale_values()
        assert not np.isnan(sa).any() and not np.isnan(sb).any()
    # Same seed, same bytes; another seed, another set.
    assert _same(vs, _gen(family, pair, scaling))
    assert not _same(vs, _gen(family, pair, scaling, seed=SEED + 1))


def test_vectors_generate_batch_and_no_c():
    vs = vectors.generate("normal", batch=(2, 3), m=4, n=8, k=64, scale_format="e8m0",
                          with_c=False, seed=SEED)
    assert vs.a.shape == (2, 3, 4, 64) and vs.b.shape == (2, 3, 64, 8)
    assert vs.a_scale.shape == (2, 3, 4, 2) and vs.b_scale.shape == (2, 3, 2, 8)
    assert vs.c is None


SPECIAL_CODES = {"e4m3": {0x7F, 0xFF}, "e5m2": {0x7E, 0xFE, 0x7C, 0xFC}}


@pytest.mark.parametrize("fmt", ["e4m3", "e5m2", "e3m2", "e2m3", "e2m1", "int8"])
def test_vectors_generate_specials(fmt):
    vs = vectors.generate("specials", a_format=fmt, m=32, n=32, k=64, seed=SEED)
    codes = set(np.unique(np.concatenate([vs.a.ravel(), vs.b.ravel()])).tolist())
    f = formats.get(fmt)
    special = codes & {c for c in range(1 << f.bits)
                       if f.classify(np.array([c], np.uint8))[0] >= formats.Class.INF}
    assert special == SPECIAL_CODES.get(fmt, set())
    c = vs.c.view(np.float32)
    assert np.isnan(c).any() and (c == np.inf).any() and (c == -np.inf).any()
    assert np.isfinite(c).mean() > 0.8


NAN_SCALE = {"e8m0": 0xFF, "ue4m3": 0x7F}


@pytest.mark.parametrize("scaling", ["e8m0", "ue4m3", "fp32-row", "fp32-block"])
def test_vectors_generate_nan_scale(scaling):
    sf, gran, m, n, k = SCALINGS[scaling]
    size = 1024 if gran == "block" and sf == "fp32" else 64    # 64 (8 x 8) B block scales
    vs = vectors.generate("nan-scale", m=64, n=size, k=size, scale_format=sf,
                          scale_granularity=gran, seed=SEED)
    for s in (vs.a_scale, vs.b_scale):
        if sf == "fp32":
            nan = np.isnan(s)
        else:
            nan = s == NAN_SCALE[sf]
            assert np.isnan(formats.get(sf).decode(s[nan])).all()
        assert 0 < nan.mean() < 0.3
    sa, sb = vs.scale_values()
    assert np.isnan(sa).any() and np.isnan(sb).any()


def test_vectors_generate_nan_scale_per_tensor():
    vs = vectors.generate("nan-scale", scale_format="fp32", scale_granularity="tensor",
                          seed=SEED)
    assert vs.a_scale.shape == () and vs.b_scale.shape == ()


@pytest.mark.parametrize("fmt", ["e4m3", "e5m2", "e3m2", "e2m3", "e2m1", "int8"])
def test_vectors_generate_zeros_max_subnormal(fmt):
    f = formats.get(fmt)
    zeros = vectors.generate("zeros", a_format=fmt, m=16, k=64, seed=SEED)
    for x in (zeros.a, zeros.b):
        np.testing.assert_array_equal(f.decode(x), 0.0)
    if fmt != "int8":   # MXINT8 has one zero
        assert set(np.unique(zeros.a).tolist()) == {0, 1 << f.sign_shift}
    np.testing.assert_array_equal(np.isin(zeros.c.view(np.float32), [0.0, 1.0, -1.0]), True)
    mx = vectors.generate("max", a_format=fmt, m=16, k=64, seed=SEED)
    for x in (mx.a, mx.b):
        np.testing.assert_array_equal(np.abs(f.decode(x)), f.max)
    assert set(np.sign(f.decode(mx.a)).ravel().tolist()) == {-1.0, 1.0}
    sub = vectors.generate("subnormal", a_format=fmt, m=16, k=64, seed=SEED)
    c = sub.c.view(np.float32)
    assert (np.abs(c) < np.float32(2.0 ** -126)).all()
    for x in (sub.a, sub.b):
        if fmt == "int8":   # no subnormals: the four smallest steps stand in
            v = np.abs(f.decode(x))
            assert ((v > 0) & (v <= 4 / 64)).all()
        else:
            np.testing.assert_array_equal(f.classify(x), formats.Class.SUBNORMAL)


@pytest.mark.parametrize("pair", PAIRS, ids=["x".join(p) for p in PAIRS])
def test_vectors_generate_cancellation(pair):
    vs = vectors.generate("cancellation", a_format=pair[0], b_format=pair[1], batch=(2,),
                          m=8, n=16, k=64, seed=SEED)
    h = vs.k // 2
    np.testing.assert_array_equal(vs.a[..., h:], vs.a[..., :h])
    fb = formats.get(pair[1])
    first, second = fb.decode(vs.b[..., :h, :]), fb.decode(vs.b[..., h:, :])
    negated = second == -first
    # 5% of B is redrawn so that some terms survive; every other pair cancels exactly.
    assert 0.8 < negated.mean() < 1.0


@pytest.mark.parametrize("scaling", ["e8m0", "ue4m3", "fp32-row", "fp32-block"])
def test_vectors_generate_scale_extremes(scaling):
    sf, gran, m, n, k = SCALINGS[scaling]
    vs = vectors.generate("scale-extremes", m=32, n=n * 4 if n < 128 else 256, k=k * 4,
                          scale_format=sf, scale_granularity=gran, seed=SEED)
    got = set(np.unique(np.concatenate([vs.a_scale.ravel(), vs.b_scale.ravel()])).tolist())
    want = {"e8m0": {0x00, 0x01, 0x7F, 0xFD, 0xFE}, "ue4m3": {0x00, 0x01, 0x08, 0x7E},
            "fp32": {2.0 ** e for e in (-126, -60, 0, 60, 126)}}[sf]
    assert got == want


@pytest.mark.parametrize("scaling", ["unscaled", "e8m0", "ue4m3", "fp32-row"])
@pytest.mark.parametrize("pair", [("e4m3", "e4m3"), ("e2m1", "e2m1"), ("int8", "int8")],
                         ids=["e4m3", "e2m1", "int8"])
def test_vectors_generate_c_magnitude(pair, scaling):
    sf, gran, m, n, k = SCALINGS[scaling]
    kw = dict(a_format=pair[0], m=16, n=16, k=64, scale_format=sf, scale_granularity=gran,
              seed=SEED)
    ratios = {}
    for family in ("c-dominant", "c-negligible"):
        vs = vectors.generate(family, **kw)
        a = formats.get(pair[0]).decode(vs.a)
        b = formats.get(pair[1]).decode(vs.b)
        if sf is not None:
            sa, sb = vs.scale_values()
            a, b = a * sa, b * sb
        dot = np.abs(a @ b)
        c = np.abs(vs.c.view(np.float32).astype(np.float64))
        ratios[family] = np.median(c) / np.median(dot[dot > 0])
    assert ratios["c-dominant"] >= 2.0 ** 20
    assert ratios["c-negligible"] <= 2.0 ** -30


@pytest.mark.parametrize("fmt", ["e4m3", "e5m2", "e3m2", "e2m3", "e2m1", "int8"])
def test_vectors_generate_one_large(fmt):
    vs = vectors.generate("one-large", a_format=fmt, batch=(2,), m=8, n=8, k=64, seed=SEED)
    f = formats.get(fmt)
    big = f.decode(f.encode(0.75 * f.max))
    a, b = f.decode(vs.a), f.decode(vs.b)
    np.testing.assert_array_equal((a == big).sum(axis=-1), 1)     # one per row of A
    np.testing.assert_array_equal((b == -big).sum(axis=-2), 1)    # one per column of B
    assert np.abs(np.where(a == big, 0, a)).max() <= big / 4
    assert np.abs(np.where(b == -big, 0, b)).max() <= big / 4


GEN_BAD = {
    "family": (dict(family="bogus"),
               f"Family must be one of {', '.join(vectors.FAMILIES + vectors.EXTRA_FAMILIES)}, "
               f"not 'bogus'"),
    "nan-scale": (dict(family="nan-scale"),
                  "Family 'nan-scale' needs block scales; pass a scale format"),
    "cancellation-odd-k": (dict(family="cancellation", k=33),
                           "Family 'cancellation' needs an even K"),
    "k-not-multiple": (dict(scale_format="e8m0", k=48),
                       "K (48) must be a multiple of the block (32)"),
    "k-not-multiple-16": (dict(scale_format="ue4m3", k=40),
                          "K (40) must be a multiple of the block (16)"),
    "block-0": (dict(scale_format="e8m0", block=0),
                "Block must be a power of two from 1 to 65536 for e8m0 scales, not 0"),
    "block-24": (dict(scale_format="ue4m3", block=24),
                 "Block must be a power of two from 1 to 65536 for ue4m3 scales, not 24"),
    "block-64": (dict(scale_format="ue4m3", block=64),
                 "K (32) must be a multiple of the block (64)"),
    "fp32-block-wise-shape": (dict(scale_format="fp32"),
                              "Block-wise fp32 scales need K and N multiples of 128, "
                              "not K=32, N=8"),
    "fp32-block-32": (dict(scale_format="fp32", block=32),
                      "Block must be 128 for block-wise fp32 scales, not 32"),
    "fp32-row-block": (dict(scale_format="fp32", scale_granularity="row", block=128),
                       "Block must be None for row-wise fp32 scales, not 128"),
    "granularity": (dict(scale_format="fp32", scale_granularity="col"),
                    "Scale granularity must be tensor, row or block, not 'col'"),
    "scale-format": (dict(scale_format="e9m0"),
                     "Scale format must be one of e8m0, ue4m3, fp32, not 'e9m0'"),
    "a-format": (dict(a_format="fp32"), f"a_format must be one of {OPERANDS}, not 'fp32'"),
    "b-format": (dict(b_format="ue4m3"), f"b_format must be one of {OPERANDS}, not 'ue4m3'"),
    "size": (dict(m=0), "M, N and K must be at least 1, not 0, 8, 32"),
    "seed": (dict(seed=-1), "Seed must be a non-negative integer, not -1"),
    "block-unscaled": (dict(block=32), "scales or block given but scale_format is null"),
}


@pytest.mark.parametrize("kwargs, message", GEN_BAD.values(), ids=GEN_BAD.keys())
def test_vectors_generate_bad(kwargs, message):
    kwargs = dict(kwargs)
    family = kwargs.pop("family", "uniform")
    with pytest.raises(VectorFileError, match="^" + re.escape(message) + "$"):
        vectors.generate(family, **kwargs)


def test_vectors_generate_suite():
    fams = ["uniform", "zeros", "cancellation", "nan-scale"]
    kw = dict(m=4, n=8, k=64, seed=SEED)
    vs = vectors.generate_suite(fams, count=3, scale_format="e8m0", **kw)
    assert vs.extra == {"families": [f for f in fams for _ in range(3)], "seed": SEED}
    assert vs.batch_shape == (12,)
    for i, family in enumerate(fams):
        part = vectors.generate(family, batch=(3,), scale_format="e8m0", **kw)
        for name in ("a", "b", "c", "a_scale", "b_scale"):
            np.testing.assert_array_equal(getattr(vs, name)[3 * i:3 * i + 3],
                                          getattr(part, name), err_msg=f"{family} {name}")
    unscaled = vectors.generate_suite(fams, count=2, **kw)
    assert unscaled.extra["families"] == ["uniform"] * 2 + ["zeros"] * 2 + ["cancellation"] * 2
    odd = vectors.generate_suite(fams, m=4, n=8, k=33, seed=SEED)
    assert odd.extra["families"] == ["uniform", "zeros"]


def test_vectors_generate_suite_all_families():
    vs = vectors.generate_suite(m=2, n=2, k=32, scale_format="ue4m3", seed=SEED)
    assert vs.extra["families"] == list(vectors.FAMILIES)
    assert vectors.generate_suite(m=2, n=2, k=32, seed=SEED).extra["families"] == [
        f for f in vectors.FAMILIES if f != "nan-scale"]


def test_vectors_generate_suite_bad():
    with pytest.raises(VectorFileError, match=r"^No generator family applies to these "
                                              r"options$"):
        vectors.generate_suite(["nan-scale"])
    with pytest.raises(VectorFileError, match=r"^Per-tensor fp32 scales cannot be mixed across "
                                              r"families; generate one family at a time$"):
        vectors.generate_suite(["uniform", "normal"], scale_format="fp32",
                               scale_granularity="tensor")


# -- subset ---------------------------------------------------------------------------------

SUBSETS = {  # id: (_hand_set kwargs, rows, cols, b_scale cut)
    "unscaled": (dict(batch=(2,), d_format="fp32"), slice(1, 3), slice(2, 7), None),
    "e8m0": (dict(scales="e8m0", batch=(2,), d_format="fp32"), slice(1, 3), slice(2, 7),
             "cols"),
    "ue4m3-ts": (dict(scales="ue4m3", tensor_scale=0.5, batch=(2, 2)), slice(0, 4, 2),
                 slice(5, None), "cols"),
    "fp32-tensor": (dict(scales="fp32-tensor", batch=(2,)), slice(3, 4), slice(0, 1), "same"),
    "fp32-row": (dict(scales="fp32-row", batch=(2,)), slice(1, 3), slice(2, 7), "cols"),
    "fp32-block": (dict(scales="fp32-block", m=4, n=384, k=256, batch=(2,)), slice(1, 3),
                   slice(128, 384), slice(1, 3)),
    "fp32-block-all": (dict(scales="fp32-block", m=4, n=256, k=128), slice(2, None),
                       slice(None), slice(None)),
}


@pytest.mark.parametrize("case, rows, cols, b_cut", SUBSETS.values(), ids=SUBSETS.keys())
def test_vectors_subset(case, rows, cols, b_cut):
    vs = _hand_set(**case)
    sub = vs.subset(rows, cols)
    np.testing.assert_array_equal(sub.a, vs.a[..., rows, :])
    np.testing.assert_array_equal(sub.b, vs.b[..., cols])
    np.testing.assert_array_equal(_bits(sub.c), _bits(vs.c[..., rows, cols]))
    if vs.d is not None:
        np.testing.assert_array_equal(sub.d, vs.d[..., rows, cols])
    if vs.tensor_scale is not None:
        np.testing.assert_array_equal(_bits(sub.tensor_scale), _bits(vs.tensor_scale))
    if b_cut is None:
        assert sub.a_scale is None and sub.b_scale is None
    else:
        if vs.a_scale.ndim:
            np.testing.assert_array_equal(_bits(sub.a_scale), _bits(vs.a_scale[..., rows, :]))
        else:
            np.testing.assert_array_equal(_bits(sub.a_scale), _bits(vs.a_scale))
        if b_cut == "cols":
            want_b = vs.b_scale[..., cols]
        elif b_cut == "same":
            want_b = vs.b_scale
        else:   # block-wise: a scale covers 128 columns
            want_b = vs.b_scale[..., b_cut]
        np.testing.assert_array_equal(_bits(sub.b_scale), _bits(want_b))
        # The expanded scales of the subset are the subset of the expanded scales.
        (sa, sb), (full_a, full_b) = sub.scale_values(), vs.scale_values()
        np.testing.assert_array_equal(_bits(sa), _bits(full_a[..., rows, :]))
        np.testing.assert_array_equal(_bits(sb), _bits(full_b[..., cols]))
    assert sub.meta == vs.meta
    assert sub.replace().inputs_equal(sub)


@pytest.mark.parametrize("cols", [slice(0, 100), slice(64, 192), slice(0, 256, 2),
                                  slice(1, None)], ids=["stop", "start", "step", "offset"])
def test_vectors_subset_block_wise_fp32_bad(cols):
    vs = _hand_set(scales="fp32-block", m=2, n=256, k=128)
    with pytest.raises(VectorFileError, match=r"^Columns of a set with block-wise fp32 scales "
                                              r"must be cut on multiples of 128$"):
        vs.subset(slice(None), cols)


# -- inputs_equal ---------------------------------------------------------------------------

def _flip(name, index=0):
    def edit(vs):
        arr = getattr(vs, name).copy()
        flat = _bits(arr).reshape(-1)
        flat[index] ^= 1
        return vs.replace(**{name: arr})
    return edit


INPUT_CHANGES = {
    "a": _flip("a"),
    "b-last": _flip("b", -1),
    "c": _flip("c", 5),
    "c-nan-payload": _flip("c", 0),
    "c-sign-of-zero": lambda vs: vs.replace(c=np.where(vs.c == 0x80000000, np.uint32(0), vs.c)),
    "c-missing": lambda vs: vs.replace(c=None),
    "a-scale": _flip("a_scale", 3),
    "b-scale": _flip("b_scale", -1),
    "tensor-scale": _flip("tensor_scale"),
    "tensor-scale-missing": lambda vs: vs.replace(tensor_scale=None),
    "a-format": lambda vs: vs.replace(a_format="e2m3"),
    "b-format": lambda vs: vs.replace(b_format="e3m2"),
    "block": lambda vs: vs.replace(block=32, a_scale=vs.a_scale[..., ::2],
                                   b_scale=vs.b_scale[..., ::2, :]),
    "c-format": lambda vs: vs.replace(c_format="fp16", c=vs.c.astype(np.uint16)),
}


def _nvfp4_set():
    return _hand_set(scales="ue4m3", a_format="e2m1", b_format="e2m1", tensor_scale=0.25,
                     batch=(2,))


def test_vectors_inputs_equal_with_result(tmp_path):
    vs = _nvfp4_set()
    res = vs.with_result(np.zeros(vs.c.shape, np.uint16), d_format="bf16", producer="gpu",
                         gpu="H200")
    assert vs.inputs_equal(res) and res.inputs_equal(vs)
    vectors.save(res, tmp_path / "r.npz")
    assert vectors.load(tmp_path / "r.npz").inputs_equal(vs)
    # Strided and 0-d arrays compare by bits too.
    cut = vs.subset(slice(0, 4, 2), slice(1, None, 3))
    assert cut.inputs_equal(vs.subset(slice(0, 4, 2), slice(1, None, 3)))
    per_tensor = _hand_set(scales="fp32-tensor")
    assert per_tensor.inputs_equal(_hand_set(scales="fp32-tensor"))


@pytest.mark.parametrize("change", INPUT_CHANGES.values(), ids=INPUT_CHANGES.keys())
def test_vectors_inputs_equal_differs(change):
    vs = _nvfp4_set()
    other = change(_nvfp4_set())
    assert not vs.inputs_equal(other)
    assert not other.inputs_equal(vs)


def test_vectors_inputs_equal_scale_format():
    a = _hand_set(scales="fp32-row")
    b = _hand_set(scales="fp32-row")
    b = b.replace(scale_format="e8m0", block=32, a_scale=np.ones((4, 2), np.uint8),
                  b_scale=np.ones((2, 8), np.uint8))
    assert not a.inputs_equal(b)
    assert not _hand_set().inputs_equal(_hand_set(scales="e8m0"))


# -- scale_values ---------------------------------------------------------------------------

def test_vectors_scale_values_unscaled():
    assert _hand_set().scale_values() is None


def test_vectors_scale_values_e8m0():
    vs = _hand_set(scales="e8m0", m=3, n=5, k=96, batch=(2,))
    vs.a_scale[1, 2] = [0x7F, 0x80, 0xFF]         # batch 1, row 2: 1, 2, NaN
    vs.b_scale[0, :, 4] = [0x00, 0xFE, 0x7E]      # batch 0, column 4: 2^-127, 2^127, 0.5
    sa, sb = vs.scale_values()
    assert sa.shape == (2, 3, 96) and sb.shape == (2, 96, 5)
    assert sa.dtype == sb.dtype == np.float64
    assert (sa[1, 2, 0], sa[1, 2, 31], sa[1, 2, 32], sa[1, 2, 63]) == (1.0, 1.0, 2.0, 2.0)
    assert np.isnan(sa[1, 2, 64]) and np.isnan(sa[1, 2, 95])
    assert (sb[0, 0, 4], sb[0, 31, 4], sb[0, 32, 4], sb[0, 64, 4], sb[0, 95, 4]) == (
        2.0 ** -127, 2.0 ** -127, 2.0 ** 127, 0.5, 0.5)
    # Everywhere: element (i, k) has scale code [i, k // 32]; (k, j) has [k // 32, j].
    np.testing.assert_array_equal(
        sa, formats.get("e8m0").decode(vs.a_scale)[..., np.arange(96) // 32])
    np.testing.assert_array_equal(
        sb, formats.get("e8m0").decode(vs.b_scale)[..., np.arange(96) // 32, :])


def test_vectors_scale_values_ue4m3():
    vs = _hand_set(scales="ue4m3", a_format="e2m1", b_format="e2m1", m=2, n=3, k=48,
                   tensor_scale=4.0)
    vs.a_scale[0] = [0x38, 0x3C, 0x7F]       # 1.0, 1.5, NaN
    vs.a_scale[1] = [0x01, 0x7E, 0xB8]       # 2^-9, 448, 1.0 (top bit ignored)
    vs.b_scale[:, 2] = [0x08, 0x00, 0x30]    # 2^-6, 0, 0.5
    sa, sb = vs.scale_values()
    assert (sa[0, 0], sa[0, 15], sa[0, 16], sa[0, 31]) == (1.0, 1.0, 1.5, 1.5)
    assert np.isnan(sa[0, 32]) and np.isnan(sa[0, 47])
    assert (sa[1, 0], sa[1, 16], sa[1, 47]) == (2.0 ** -9, 448.0, 1.0)
    assert (sb[0, 2], sb[15, 2], sb[16, 2], sb[47, 2]) == (2.0 ** -6, 2.0 ** -6, 0.0, 0.5)
    np.testing.assert_array_equal(
        sb, formats.get("ue4m3").decode(vs.b_scale)[np.arange(48) // 16])


def test_vectors_scale_values_fp32_tensor():
    vs = _hand_set(scales="fp32-tensor", m=3, n=5, k=64, batch=(2,))
    vs = vs.replace(a_scale=np.array(0.375, np.float32), b_scale=np.array(-3.0, np.float32))
    sa, sb = vs.scale_values()
    assert sa.shape == (2, 3, 64) and sb.shape == (2, 64, 5)
    np.testing.assert_array_equal(sa, 0.375)
    np.testing.assert_array_equal(sb, -3.0)


def test_vectors_scale_values_fp32_row():
    vs = _hand_set(scales="fp32-row", m=3, n=5, k=64)
    vs = vs.replace(a_scale=np.array([[0.5], [2.0], [np.float32(1e-3)]], np.float32),
                    b_scale=np.array([[1.0, 3.0, 5.0, 7.0, 2.0 ** -100]], np.float32))
    sa, sb = vs.scale_values()
    assert (sa[0, 0], sa[0, 63], sa[1, 17], sa[2, 5]) == (0.5, 0.5, 2.0,
                                                           float(np.float32(1e-3)))
    assert (sb[0, 0], sb[63, 1], sb[10, 3], sb[40, 4]) == (1.0, 3.0, 7.0, 2.0 ** -100)


def test_vectors_scale_values_fp32_block():
    vs = _hand_set(scales="fp32-block", m=2, n=256, k=384)
    vs = vs.replace(a_scale=np.array([[1.0, 2.0, 4.0], [8.0, 16.0, 32.0]], np.float32),
                    b_scale=np.array([[0.5, 0.25], [3.0, 5.0], [7.0, 9.0]], np.float32))
    sa, sb = vs.scale_values()
    assert sa.shape == (2, 384) and sb.shape == (384, 256)
    assert (sa[0, 0], sa[0, 127], sa[0, 128], sa[0, 383], sa[1, 200], sa[1, 256]) == (
        1.0, 1.0, 2.0, 4.0, 16.0, 32.0)
    assert (sb[0, 0], sb[127, 127], sb[127, 128], sb[128, 0], sb[300, 255], sb[256, 129]) == (
        0.5, 0.5, 0.25, 3.0, 9.0, 9.0)


def test_vectors_large_sets_are_written_uncompressed(tmp_path, monkeypatch):
    """Above the size limit the zip members are stored, not deflated; both read the same."""
    import zipfile

    from mxsim.vectors import io as vectors_io

    monkeypatch.setattr(vectors_io, "_COMPRESS_LIMIT", 1000)
    vs = vectors.generate("normal", m=32, n=32, k=64, seed=3)
    vectors.save(vs, tmp_path / "big.npz")
    with zipfile.ZipFile(tmp_path / "big.npz") as z:
        assert {i.compress_type for i in z.infolist()} == {zipfile.ZIP_STORED}
    assert vectors.load(tmp_path / "big.npz").inputs_equal(vs)
    monkeypatch.setattr(vectors_io, "_COMPRESS_LIMIT", 1 << 30)
    vectors.save(vs, tmp_path / "small.npz")
    with zipfile.ZipFile(tmp_path / "small.npz") as z:
        assert {i.compress_type for i in z.infolist()} == {zipfile.ZIP_DEFLATED}


# -- flat, take_dots and with_result ------------------------------------------------------------

FLAT_CASES = {
    "e8m0-batch2x3": dict(scales="e8m0", batch=(2, 3), m=3, n=5, k=64),
    "ue4m3-ts-no-batch": dict(scales="ue4m3", a_format="e2m1", b_format="e2m1",
                              tensor_scale=0.25, m=3, n=5, k=64),
    "fp32-row": dict(scales="fp32-row", batch=(2,), m=3, n=5, k=64),
    "fp32-tensor": dict(scales="fp32-tensor", batch=(2, 1), m=3, n=5, k=64),
    "unscaled-d": dict(batch=(3,), m=3, n=5, k=64, d_format="bf16", c_format="bf16"),
}


@pytest.mark.parametrize("case", FLAT_CASES.values(), ids=FLAT_CASES.keys())
def test_vectors_flat_folds_the_batch(case):
    vs = _hand_set(**case)
    f = vs.flat()
    nb = int(np.prod(vs.batch_shape, dtype=np.int64))
    assert f.batch_shape == (nb,) and (f.m, f.n, f.k) == (vs.m, vs.n, vs.k)
    assert f.num_dots == vs.num_dots and f.meta == vs.meta
    for name in ("a", "b", "c", "d", "a_scale", "b_scale", "tensor_scale"):
        x, y = getattr(vs, name), getattr(f, name)
        if x is None:
            assert y is None
        else:
            assert y.ndim == (0 if x.ndim == 0 else 3)
            np.testing.assert_array_equal(_bits(y).reshape(-1), _bits(x).reshape(-1))
    assert f.replace().inputs_equal(f)         # the folded set passes the checks
    np.testing.assert_array_equal(fast.matmul_exact(f).reshape(-1),
                                  fast.matmul_exact(vs).reshape(-1))


@pytest.mark.parametrize("case", FLAT_CASES.values(), ids=FLAT_CASES.keys())
def test_vectors_take_dots_are_those_dots(case):
    vs = _hand_set(**case)
    rng = np.random.default_rng(SEED)
    idx = rng.integers(0, vs.num_dots, 7)
    one = vs.take_dots(idx)
    assert (one.batch_shape, one.m, one.n, one.k) == ((7,), 1, 1, vs.k)
    assert one.extra == {"dots": [int(i) for i in idx]}
    assert (one.a_format, one.scale_format, one.block, one.producer) == (
        vs.a_format, vs.scale_format, vs.block, vs.producer)
    # Each taken dot computes what it computes in the whole set.
    np.testing.assert_array_equal(fast.matmul_exact(one).reshape(-1),
                                  fast.matmul_exact(vs).reshape(-1)[idx])
    if vs.d is not None:
        np.testing.assert_array_equal(one.d.reshape(-1), vs.d.reshape(-1)[idx])
    first = vs.take_dots(slice(0, 4))
    assert first.extra == {"dots": [0, 1, 2, 3]}
    np.testing.assert_array_equal(fast.matmul_exact(first).reshape(-1),
                                  fast.matmul_exact(vs).reshape(-1)[:4])


def test_vectors_take_dots_bad():
    vs = _hand_set(batch=(2,), m=3, n=5)
    with pytest.raises(VectorFileError, match=r"^Dot indices must be from 0 to 29, not 30$"):
        vs.take_dots([0, 30])
    with pytest.raises(VectorFileError, match=r"^Dot indices must be from 0 to 29, not -1$"):
        vs.take_dots([-1])
    with pytest.raises(VectorFileError, match=r"^take_dots needs at least one dot index$"):
        vs.take_dots([])
    block_wise = _hand_set(scales="fp32-block", m=2, n=256, k=128)
    with pytest.raises(VectorFileError, match=r"^Dots of a set with block-wise fp32 scales "
                                              r"cannot be taken one by one"):
        block_wise.take_dots([0])


def test_vectors_with_result_checks_d():
    vs = _hand_set(batch=(2,))
    with pytest.raises(VectorFileError, match=r"^array 'd' must have shape \(2, 4, 8\), not "
                                              r"\(4, 8\)$"):
        vs.with_result(np.zeros((4, 8), np.uint32), producer="x")
    with pytest.raises(VectorFileError, match=r"^array 'd' must be uint16 bit patterns of "
                                              r"bf16, not uint32$"):
        vs.with_result(np.zeros((2, 4, 8), np.uint32), d_format="bf16", producer="x")
    with pytest.raises(VectorFileError, match=r"^d_format must be one of fp32, fp16, bf16, "
                                              r"not 'fp8'$"):
        vs.with_result(np.zeros((2, 4, 8), np.uint32), d_format="fp8", producer="x")
    res = vs.with_result(np.zeros((2, 4, 8), np.uint32), producer="x", unit="u")
    assert res.extra == {"unit": "u"} and vs.extra == {} and vs.d is None
    assert res.replace().inputs_equal(res)
