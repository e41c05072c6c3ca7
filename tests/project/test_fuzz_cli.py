"""Fuzz the command line (issue 14, "Must show"): malformed vector files, spec files, sweep
files and ``.npy`` inputs, and every verb's options drawn from pools of bad values.

For every case: no traceback, exit status 0, 1, 2 or 130 only (3, the internal-error status,
never), one line on stderr for exit 2, no file written on error, no temporary file left, no
FIFO or device touched; all of it under an address-space limit (``ulimit -v``), so input that
asks for unbounded memory fails the case.

Cost: the cases run in one Python process (``tests/fuzz_driver.py``, which calls
``mxsim.cli.main`` per case under ``RLIMIT_AS`` = 4 GiB), since a process per case would cost
a second each; a smaller set runs as real ``python -m mxsim`` processes, where a traceback
would reach the terminal. The cases are drawn from a fixed seed, so a failure reruns as is:
its id names the verb, and the test prints the command line.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import os
import random
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mxsim import presets, units, vectors
from mxsim.errors import MxsimError
from mxsim.spec import UnitSpec

ROOT = Path(__file__).resolve().parents[2]
LIMIT = 4 << 30
# Amaranth runs Yosys compiled to WebAssembly, whose runtime reserves about 5 GiB of address
# space up front (not memory it uses): the cases that elaborate RTL run under 8 GiB.
RTL_LIMIT = 8 << 30
SEED = 20261201
DEVICES = ("/dev/null", "/dev/full")

# -- the corpus of malformed files ------------------------------------------------------------


def _npy(arr: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, arr, allow_pickle=True)
    return buf.getvalue()


def _header(shape, descr="|u1", version=(1, 0)) -> bytes:
    buf = io.BytesIO()
    d = {"descr": descr, "fortran_order": False, "shape": tuple(shape)}
    (np.lib.format.write_array_header_1_0 if version == (1, 0)
     else np.lib.format.write_array_header_2_0)(buf, d)
    return buf.getvalue()


def _zip(members: dict[str, bytes], method: int = zipfile.ZIP_STORED) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", method) as z:
        for name, data in members.items():
            z.writestr(name, data)
    return buf.getvalue()


def _patch_zip(data: bytes, what: str) -> bytes:
    """A zip whose members claim an unknown compression method, or encryption."""
    b = bytearray(data)
    for sig, method_at, flag_at in ((b"PK\x03\x04", 8, 6), (b"PK\x01\x02", 10, 8)):
        i = b.find(sig)
        while i >= 0:
            if what == "method":
                b[i + method_at:i + method_at + 2] = (99).to_bytes(2, "little")
            else:
                b[i + flag_at] |= 1
            i = b.find(sig, i + 4)
    return bytes(b)


def _duplicate(base: dict) -> bytes:
    """A zip holding member 'a.npy' twice (zipfile warns, and writes it)."""
    import warnings
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with zipfile.ZipFile(buf, "w") as z:
            for name in ("a.npy", "b.npy", "meta.npy", "a.npy"):
                z.writestr(name, _npy(base[name[:-4]]))
    return buf.getvalue()


def _members(vs: vectors.VectorSet) -> dict[str, np.ndarray]:
    return vectors.to_arrays(vs)


def _npz_bytes(arrays: dict[str, object]) -> bytes:
    return _zip({f"{k}.npy": (v if isinstance(v, bytes) else _npy(np.asarray(v)))
                 for k, v in arrays.items()})


def _with_meta(base: dict, **changes) -> dict:
    meta = json.loads(str(base["meta"]))
    meta.update(changes)
    return {**base, "meta": np.array(json.dumps(meta))}


def _vector_corpus(fx: Path) -> dict[str, bytes]:
    base = _members(vectors.load(fx / "in.npz"))
    mx = _members(vectors.load(fx / "mx.npz"))
    good = (fx / "in.npz").read_bytes()
    plain = _npz_bytes(base)                        # stored, so flips hit headers and data
    rng = random.Random(SEED)
    out = {
        "empty": b"", "text": b"hello, not a zip\n",
        "noise": bytes(rng.randrange(256) for _ in range(4096)),
        "truncated": good[:len(good) // 2],
        "bare-npy": _npy(base["a"]),
        "raw-member": _zip({"a": b"raw", "b.npy": _npy(base["b"]), "meta.npy": _npy(base["meta"])}),
        "unknown-member": _npz_bytes({**base, "x": np.zeros(3)}),
        "member-path": _zip({"../a.npy": _npy(base["a"]), "b.npy": _npy(base["b"]),
                             "meta.npy": _npy(base["meta"])}),
        "pickle": _npz_bytes({**base, "a": np.array([{"x": 1}], dtype=object)}),
        "no-meta": _npz_bytes({k: v for k, v in base.items() if k != "meta"}),
        "meta-int": _npz_bytes({**base, "meta": np.array(5)}),
        "meta-not-json": _npz_bytes({**base, "meta": np.array("{nope")}),
        "meta-list": _npz_bytes({**base, "meta": np.array("[1, 2]")}),
        "meta-deep": _npz_bytes({**base, "meta": np.array("[" * 50_000 + "]" * 50_000)}),
        "meta-bytes": _npz_bytes({**base, "meta": np.array(b"{}")}),
        "schema": _npz_bytes(_with_meta(base, schema="mxsim.vectors/2")),
        "a-format-int": _npz_bytes(_with_meta(base, a_format=4)),
        "a-format-fp32": _npz_bytes(_with_meta(base, a_format="fp32")),
        "block-str": _npz_bytes(_with_meta(base, block="32")),
        "block-huge": _npz_bytes(_with_meta(base, block=2 ** 70)),
        "block-bool": _npz_bytes(_with_meta(base, block=True)),
        "scale-format-x": _npz_bytes(_with_meta(mx, scale_format="e9m0")),
        "c-format-x": _npz_bytes(_with_meta(base, c_format="fp64")),
        "a-int16": _npz_bytes({**base, "a": base["a"].astype(np.int16)}),
        "a-float": _npz_bytes({**base, "a": base["a"].astype(np.float32)}),
        "a-1d": _npz_bytes({**base, "a": base["a"].ravel()}),
        "a-0d": _npz_bytes({**base, "a": np.uint8(3)}),
        "k-mismatch": _npz_bytes({**base, "a": base["a"][..., :16]}),
        "batch-mismatch": _npz_bytes({**base, "a": base["a"][None]}),
        "zero-batch": _npz_bytes({**base, "a": base["a"][None][:0], "b": base["b"][None][:0],
                                  "c": base["c"][None][:0]}),
        "zero-m": _npz_bytes({**base, "a": base["a"][:0], "c": base["c"][:0]}),
        "codes-out-of-range": _npz_bytes(_with_meta({**base, "a": base["a"] | 0x10},
                                                    a_format="e2m1")),
        "c-float": _npz_bytes({**base, "c": base["c"].view(np.float32)}),
        "c-shape": _npz_bytes({**base, "c": base["c"].T.copy()}),
        "d-dtype": _npz_bytes({**base, "d": base["c"].astype(np.uint16)}),
        "scale-shape": _npz_bytes({**mx, "a_scale": mx["a_scale"][..., :1]}),
        "scale-dtype": _npz_bytes({**mx, "a_scale": mx["a_scale"].astype(np.float32)}),
        "scales-no-format": _npz_bytes({**base, "a_scale": np.zeros((16, 1), np.uint8),
                                        "b_scale": np.zeros((1, 8), np.uint8)}),
        "tensor-scale-e8m0": _npz_bytes({**mx, "tensor_scale": np.float32(2)}),
        "tensor-scale-shape": _npz_bytes({**mx, "tensor_scale": np.ones(2, np.float32)}),
        "huge-header": _zip({"a.npy": _header((50_000, 65_536)) + b"\0" * 64,
                             "b.npy": _npy(base["b"]), "meta.npy": _npy(base["meta"])}),
        "huge-b-header": _zip({"a.npy": _npy(base["a"]),
                               "b.npy": _header((32, 1 << 40)) + b"\0" * 64,
                               "meta.npy": _npy(base["meta"])}),
        "huge-meta-header": _zip({"a.npy": _npy(base["a"]), "b.npy": _npy(base["b"]),
                                  "meta.npy": _header((), descr="<U999999999")}),
        "huge-products": _zip({"a.npy": _header((4096, 4096)) + b"\0" * 64,
                               "b.npy": _header((4096, 8192)) + b"\0" * 64,
                               "meta.npy": _npy(base["meta"])}),
        "short-data": _zip({"a.npy": _header((16, 32)) + b"\0" * 10, "b.npy": _npy(base["b"]),
                            "meta.npy": _npy(base["meta"])}),
        "npy-v2": _zip({"a.npy": _header((16, 32), version=(2, 0)) + bytes(512),
                        "b.npy": _npy(base["b"]), "meta.npy": _npy(base["meta"])}),
        "npy-v3": _zip({"a.npy": b"\x93NUMPY\x03\x00" + _header((16, 32))[8:] + bytes(512),
                        "b.npy": _npy(base["b"]), "meta.npy": _npy(base["meta"])}),
        "bad-header-dict": _zip({"a.npy": b"\x93NUMPY\x01\x00\x10\x00{'descr': 5}    \n",
                                 "b.npy": _npy(base["b"]), "meta.npy": _npy(base["meta"])}),
        "method-99": _patch_zip(plain, "method"),
        "encrypted": _patch_zip(plain, "encrypt"),
        "duplicate-member": _duplicate(base),
        "fortran-a": _npz_bytes({**base, "a": np.asfortranarray(base["a"])}),     # valid
    }
    # Flipped bytes anywhere in a stored and in a deflated set: headers, data, directory.
    for name, data in (("flip-stored", plain), ("flip-deflated", good)):
        for i in range(10):
            b = bytearray(data)
            for _ in range(1 + i % 3):
                pos = rng.randrange(len(b))
                b[pos] ^= 1 << rng.randrange(8)
            out[f"{name}-{i}"] = bytes(b)
    return out


def _npy_corpus(fx: Path) -> dict[str, bytes]:
    x = np.linspace(-3, 3, 128, dtype=np.float32).reshape(2, 64)
    return {
        "empty": b"", "text": b"not numpy\n", "npz": (fx / "in.npz").read_bytes(),
        "int32": _npy(x.astype(np.int32)), "object": _npy(np.array([1.0, None], dtype=object)),
        "scalar": _npy(np.float32(1.5)), "vector": _npy(x[0]), "complex": _npy(x.astype(complex)),
        "all-nan": _npy(np.full((2, 64), np.nan, np.float32)),
        "inf": _npy(np.where(x > 2, np.inf, x).astype(np.float32)),
        "float64-not-fp32": _npy(x.astype(np.float64) + 1e-12),
        "block-does-not-divide": _npy(np.ones((2, 63), np.float32)),
        "three-d": _npy(np.ones((2, 2, 64), np.float32)),
        "huge-k": _npy(np.ones((1, 16384), np.float32)),
        "huge-header": _header((1 << 20, 1 << 12), descr="<f4") + bytes(64),
        "short-data": _header((2, 64), descr="<f4") + bytes(16),
        "v3-header": b"\x93NUMPY\x03\x00" + _header((2, 64), descr="<f4")[8:] + bytes(512),
        "bool": _npy(x > 0), "uint8": _npy(x.astype(np.uint8)),
        "fortran": _npy(np.asfortranarray(x)),
    }


SPEC_BAD_VALUES = {"neg": "-1", "huge": str(2 ** 63), "str": '"x"', "float": "1.5",
                   "bool": "true", "list": "[1, 2]", "table": "{ a = 1 }", "none": '"none"'}


def _spec_corpus() -> dict[str, bytes]:
    good = presets.get("hopper-wgmma").spec("e4m3", "e4m3").dumps("toml")
    out = {
        "binary.toml": b"\xff\xfe\x00\x01",
        "latin1.toml": good.replace("hopper", "h\xe9").encode("latin-1"),
        "empty.toml": b"", "syntax.toml": b"k = = 3\n",
        "unknown.toml": (good + "frob = 1\n").encode(),
        "deep.json": ("[" * 50_000 + "]" * 50_000).encode(),
        "deep.toml": ("k = " + "[" * 50_000 + "]" * 50_000 + "\n").encode(),
        "list.json": b"[1, 2]", "null.json": b"null", "huge.toml": b"# " + b"x" * (2 << 20),
        "good.toml": good.encode(),
    }
    skip = {"name", "instruction", "provenance"}
    for f in dataclasses.fields(UnitSpec):
        if f.name in skip:
            continue
        for tag, value in SPEC_BAD_VALUES.items():
            out[f"{f.name}-{tag}.toml"] = (good.replace(f"\n{f.name} = ", f"\n# {f.name} = ")
                                           + f"{f.name} = {value}\n").encode()
    return out


SWEEP_BAD_VALUES = ("-1", "0", str(10 ** 12), '"x"', "1.5", "true", "[]", "{ a = 1 }",
                    '"../../x"')


def _sweep_corpus() -> dict[str, bytes]:
    from test_explore import TINY
    out = {"binary.toml": b"\x00\xff", "latin1.toml": TINY.replace("tiny", "t\xefny").encode(
        "latin-1"), "empty.toml": b"", "deep.toml": ("a = " + "[" * 50_000 + "]" * 50_000
                                                      ).encode(),
        "huge.toml": b"#" * (2 << 20), "tiny.toml": TINY.encode(),
        "name-abs.toml": TINY.replace('name = "tiny"', 'name = "/tmp/mxsim-fuzz-abs"').encode(),
        "name-up.toml": TINY.replace('name = "tiny"', 'name = "../../x"').encode(),
        "table-x.toml": (TINY + "\n[frob]\na = 1\n").encode(),
        "sample-huge.toml": TINY.replace("shape = [512, 512, 128]\nsample = [6, 5]",
                                         "shape = [10000000, 10000000, 128]\n"
                                         "sample = [10000000, 10000000]").encode(),
        "shape-huge.toml": TINY.replace("shape = [512, 512, 128]",
                                        f"shape = [{10**12}, {10**12}, {2**40}]").encode()}
    lines = TINY.splitlines()
    for i, line in enumerate(lines):
        if " = " not in line:
            continue
        key = line.split(" = ")[0]
        for j, value in enumerate(SWEEP_BAD_VALUES):
            text = "\n".join(lines[:i] + [f"{key} = {value}"] + lines[i + 1:]) + "\n"
            out[f"line{i:02d}-{key}-{j}.toml"] = text.encode()
    return out


# -- the cases ------------------------------------------------------------------------------

INTS = ["-1", "0", "1", "2", "4", "16", "32", "33", "48", "64", "4096", "100000",
        "1000000000000", "x", "", "1.5", "0x20", "-0", "1e3"]
FLOATS = ["0", "-1", "0.5", "1e-45", "1e39", "nan", "inf", "-inf", "x", "", "3"]
FORMATS = ["e4m3", "e5m2", "e3m2", "e2m3", "e2m1", "int8", "e8m0", "ue4m3", "fp32", "fp16", "",
           "E4M3", "e9m9"]
GOOD_SETS = ["in.npz", "mx.npz", "nv.npz", "fp32blk.npz", "res.npz", "res_wgmma.npz"]
OUTS = ["o.npz", "o.npz", "o.npz", "sub/o.npz", ".", "fifo.npz", "/dev/null", "/dev/full", "",
        "o/", "{fx}"]


def _pick(rng: random.Random, pool):
    return rng.choice(pool)


def _inputs(rng, corpus_names: list[str]) -> str:
    return _pick(rng, [*(f"{{fx}}/{n}" for n in GOOD_SETS * 3),
                       *(f"{{fx}}/bad/{n}.npz" for n in corpus_names),
                       "{fx}/missing.npz", "{fx}", "/dev/null", "/dev/zero", "fifo.npz"])


def _options(rng, spec: list[tuple[str, list[str] | None]], p: float = 0.3) -> list[str]:
    argv = []
    for flag, pool in spec:
        if rng.random() < p:
            argv += [flag] if pool is None else [flag, _pick(rng, pool)]
    return argv


def _cases() -> list[dict]:
    """Every case as {id, argv, fifos, rtl}; argv holds "{fx}" for the fixtures folder."""
    rng = random.Random(SEED)
    vec_names = sorted(_VECTOR_NAMES)
    npy_names = sorted(_NPY_NAMES)
    spec_names = sorted(_SPEC_NAMES)
    sweep_names = sorted(_SWEEP_NAMES)
    unit_pool = [*presets.names(), "nope", "", "{fx}/spec/good.toml", "{fx}/missing.toml",
                 "/dev/null", "fifo.npz", *(f"{{fx}}/spec/{n}" for n in spec_names[:12])]
    cases: list[dict] = []

    def add(kind: str, argv: list[str], rtl: bool = False) -> None:
        cases.append({"id": f"{len(cases):03d}-{kind}", "argv": argv, "fifos": ["fifo.npz"],
                      "rtl": rtl})

    # Directed: every malformed file through the verbs that read it.
    for n in vec_names:
        add(f"info-{n}", ["vectors", "info", f"{{fx}}/bad/{n}.npz"])
        add(f"run-{n}", ["run", f"{{fx}}/bad/{n}.npz", "-o", "o.npz"])
    for n in vec_names[::4]:
        add(f"compare-{n}", ["compare", "{fx}/res.npz", f"{{fx}}/bad/{n}.npz"])
        add(f"fit-{n}", ["fit", f"{{fx}}/bad/{n}.npz", "{fx}/obs.npz", "-o", "f.toml"])
        add(f"replay-{n}", ["verify", "--replay", f"{{fx}}/bad/{n}.npz", "--out", "v"])
    for n in npy_names:
        add(f"quantize-{n}", ["quantize", f"{{fx}}/npy/{n}.npy", "-o", "o.npz"])
        add(f"quantize-compare-{n}", ["quantize", f"{{fx}}/npy/{n}.npy", "--compare"])
    for n in spec_names:
        add(f"spec-{n}", ["run", "{fx}/in.npz", "--unit", f"{{fx}}/spec/{n}", "-o", "o.npz"])
    for n in spec_names[::5]:
        add(f"rtl-spec-{n}", ["rtl", "--unit", f"{{fx}}/spec/{n}", "-o", "u.v"], rtl=True)
    for n in sweep_names:
        add(f"sweep-{n}", ["explore", f"{{fx}}/sweep/{n}", "--check"])
    # Without --check only where loading fails: a sweep that loads runs Yosys for minutes.
    for n in ("binary.toml", "latin1.toml", "empty.toml", "deep.toml", "huge.toml",
              "name-abs.toml", "name-up.toml", "table-x.toml"):
        add(f"sweep-run-{n}", ["explore", f"{{fx}}/sweep/{n}", "-j", "1", "--no-progress",
                               "--fpga", "none"])
    add("sweep-fifo", ["explore", "fifo.npz", "--check"])
    add("sweep-zero", ["explore", "/dev/zero", "--check"])

    # Drawn: every verb's options from pools of bad (and good) values.
    gen = [("--family", ["all", "normal", "uniform", "specials", "nan-scale", "cancellation",
                         "normal,zeros", "nope", "", ","]),
           ("--a-format", FORMATS), ("--b-format", FORMATS), ("-m", INTS), ("-n", INTS),
           ("-k", INTS), ("--count", INTS), ("--scale-format", ["e8m0", "ue4m3", "fp32", "x"]),
           ("--block", INTS), ("--scale-granularity", ["tensor", "row", "block", "x"]),
           ("--tensor-scale", FLOATS), ("--no-c", None), ("--c-format", ["fp32", "fp16", "bf16",
                                                                          "x"]),
           ("--seed", INTS), ("--json", None)]
    for _ in range(45):
        add("gen", ["vectors", "gen", *_options(rng, gen), "-o", _pick(rng, OUTS)])
    for _ in range(12):
        add("info", ["vectors", "info", _inputs(rng, vec_names),
                     *_options(rng, [("--json", None), ("--allow-large", None)])])
    run = [("--unit", unit_pool), ("--engine", ["fast", "reference", "x"]), ("--json", None)]
    for _ in range(40):
        out = ["-o", _pick(rng, OUTS)] if rng.random() < 0.9 else []
        add("run", ["run", _inputs(rng, vec_names), *_options(rng, run, 0.5), *out])
    cmp_ = [("--unit", unit_pool), ("--engine", ["fast", "reference", "x"]), ("--show", INTS),
            ("--plot", ["p.png", "p.pdf", "p.svg", "p.xyz", "p.pgf", "p", "fifo.npz",
                        "/dev/null", "sub/p.png", "", "."]), ("--json", None)]
    for _ in range(30):
        other = [_inputs(rng, vec_names)] if rng.random() < 0.5 else []
        add("compare", ["compare", _inputs(rng, vec_names), *other, *_options(rng, cmp_)])
    quant = [("--elem", FORMATS), ("--block", INTS),
             ("--scale-rule", ["floor", "ceil", "even", "rceil", "ocp", "rceil-sat", "x"]),
             ("--rounding", ["rne", "rz", "stochastic", "x"]), ("--seed", INTS),
             ("--as", ["a", "b", "c"]), ("--nvfp4", None), ("--per-tensor-scale", FLOATS),
             ("--two-d", None), ("--allow-nan-blocks", None), ("--compare", None),
             ("--axis", INTS), ("--json", None)]
    npy_pool = ["{fx}/x.npy"] * 6 + ["{fx}/x16.npy", "{fx}/x3d.npy", "/dev/zero", "fifo.npz",
                                     *(f"{{fx}}/npy/{n}.npy" for n in npy_names)]
    for _ in range(45):
        out = ["-o", _pick(rng, OUTS)] if rng.random() < 0.7 else []
        add("quantize", ["quantize", _pick(rng, npy_pool), *_options(rng, quant), *out])
    for _ in range(12):
        add("probe", ["probe", *_options(rng, [("--kind", ["fp8", "fp4", ""]), ("-k", INTS),
                                               ("--seed", INTS)], 0.5),
                      "-o", _pick(rng, OUTS)])
    for _ in range(10):
        add("fit", ["fit", _pick(rng, ["{fx}/probe.npz", *(f"{{fx}}/{n}" for n in GOOD_SETS)]),
                    _pick(rng, ["{fx}/obs.npz", "{fx}/res.npz", "{fx}/probe.npz"]),
                    *_options(rng, [("-k", INTS)], 0.7), "-o",
                    _pick(rng, ["f.toml", "fifo.npz", "/dev/null", ".", "sub/f.toml"])])
    rtl = [("--unit", unit_pool), ("--a-format", FORMATS), ("--b-format", FORMATS),
           ("--lanes", INTS), ("--stages", INTS), ("--json", None)]
    for _ in range(10):
        add("rtl", ["rtl", *_options(rng, rtl), *(["-o", _pick(rng, ["u.v", *OUTS])]
                                                  if rng.random() < 0.8 else [])], rtl=True)
    # verify: each case carries one bad ingredient, so that none runs a simulator for minutes.
    bad_verify = [["--vectors", "0"], ["--chunk", "-1"], ["--unit", "nope"], ["--lanes", "3"],
                  ["--stages", "9"], ["--out", "fifo.npz"], ["--out", "/dev/null"],
                  ["--replay", "{fx}/bad/truncated.npz"], ["--a-format", "fp32"],
                  ["--sim", "x"], ["--seed", "-2"]]
    ver = [("--unit", unit_pool), ("--a-format", FORMATS), ("--lanes", INTS),
           ("--stages", INTS), ("--vectors", INTS), ("--chunk", INTS), ("--seed", INTS)]
    for i in range(15):
        bad = bad_verify[i % len(bad_verify)]
        out = ["--out", "v"] if "--out" not in bad else []
        add("verify", ["verify", *_options(rng, ver), *bad, *out])
    exp = [("-o", ["r", "fifo.npz", "/dev/null", "{fx}/in.npz"]), ("-j", INTS),
           ("--fpga", ["ice40", "lut4", "none", "x"]), ("--fresh", None), ("--json", None)]
    for _ in range(12):
        add("explore", ["explore", _pick(rng, [f"{{fx}}/sweep/{n}" for n in sweep_names]),
                        *_options(rng, exp), "--check"])
    for argv in (["gpu", "info"], ["gpu", "run", "{fx}/in.npz", "--path", "mma-sync", "-o",
                                   "o.npz"],
                 ["gpu", "run", "{fx}/bad/truncated.npz", "--path", "wgmma", "-o", "o.npz"],
                 ["gpu", "run", "{fx}/in.npz", "--path", "nope", "-o", "/dev/null"],
                 ["demo", "--out", "d", "-k", "64"], ["demo", "--out", "fifo.npz"],
                 ["demo", "--out", "/dev/null"], ["demo", "--out", "{fx}/in.npz"],
                 ["demo", "-k", "48"], ["formats", "--json"], ["units"], ["units", "--frob"],
                 ["formats", "x"], [], ["--version"], ["run", "--help"],
                 # and the good paths, which must write their files and nothing else
                 ["compare", "{fx}/res.npz", "--unit", "exact"],
                 ["compare", "{fx}/res.npz", "{fx}/res_wgmma.npz", "--show", "0", "--json"],
                 ["compare", "{fx}/res_wgmma.npz", "--unit", "exact", "--plot", "p.svg"],
                 ["fit", "{fx}/probe.npz", "{fx}/obs.npz", "-o", "f.toml"],
                 ["fit", "{fx}/in.npz", "{fx}/res.npz", "-k", "16", "-o", "f.toml"],
                 ["quantize", "{fx}/x.npy", "--nvfp4", "-o", "o.npz"],
                 ["quantize", "{fx}/x.npy", "--as", "b", "--elem", "e2m1", "-o", "o.npz"],
                 ["run", "{fx}/mx.npz", "--unit", "blackwell-mxf8f6f4", "-o", "o.npz"],
                 ["run", "{fx}/nv.npz", "--unit", "{fx}/spec/good.toml", "-o", "o.npz"]):
        add("misc", argv)
    for argv in (["rtl", "--lanes", "4", "-o", "u.v"],
                 ["rtl", "--unit", "blackwell-mxf8f6f4", "--a-format", "e2m1", "--lanes", "8",
                  "--stages", "2", "-o", "u.v", "--json"],
                 ["rtl", "--unit", "{fx}/spec/good.toml", "--lanes", "16", "-o", "fifo.npz"]):
        add("rtl-good", argv, rtl=True)
    return cases


# Corpus names are fixed at collection time (the files are written by the fixture).
_VECTOR_NAMES: list[str] = []
_NPY_NAMES: list[str] = []
_SPEC_NAMES: list[str] = []
_SWEEP_NAMES: list[str] = []


def _corpus_names() -> None:
    """Names of the corpus files, without building them (their content needs fixtures)."""
    _VECTOR_NAMES[:] = [
        "empty", "text", "noise", "truncated", "bare-npy", "raw-member", "unknown-member",
        "member-path", "pickle", "no-meta", "meta-int", "meta-not-json", "meta-list",
        "meta-deep", "meta-bytes", "schema", "a-format-int", "a-format-fp32", "block-str",
        "block-huge", "block-bool", "scale-format-x", "c-format-x", "a-int16", "a-float",
        "a-1d", "a-0d", "k-mismatch", "batch-mismatch", "zero-batch", "zero-m",
        "codes-out-of-range", "c-float", "c-shape", "d-dtype", "scale-shape", "scale-dtype",
        "scales-no-format", "tensor-scale-e8m0", "tensor-scale-shape", "huge-header",
        "huge-b-header", "huge-meta-header", "huge-products", "short-data", "npy-v2", "npy-v3",
        "bad-header-dict", "method-99", "encrypted", "duplicate-member", "fortran-a",
        *(f"flip-{kind}-{i}" for kind in ("stored", "deflated") for i in range(10))]
    _NPY_NAMES[:] = ["empty", "text", "npz", "int32", "object", "scalar", "vector", "complex",
                     "all-nan", "inf", "float64-not-fp32", "block-does-not-divide", "three-d",
                     "huge-k", "huge-header", "short-data", "v3-header", "bool", "uint8",
                     "fortran"]
    _SPEC_NAMES[:] = sorted(_spec_corpus())
    _SWEEP_NAMES[:] = sorted(_sweep_corpus())


_corpus_names()
CASES = _cases()
CASE_IDS = [c["id"] for c in CASES]


# -- running them ---------------------------------------------------------------------------

def _ulimit(nbytes: int, argv: list[str]) -> list[str]:
    """``argv`` run by a shell under ``ulimit -v`` (address space, in KiB)."""
    return ["bash", "-c", f'ulimit -v {nbytes >> 10} && exec "$@"', "ulimit", *argv]


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tests")]),
            "MPLBACKEND": "Agg"}


def _tree_digest(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def fx(tmp_path_factory) -> Path:
    """Valid sets, results and arrays, and the corpus of malformed files."""
    d = tmp_path_factory.mktemp("fx")
    gen = vectors.generate
    vectors.save(gen("normal", m=16, n=8, k=32, seed=1), d / "in.npz")
    vectors.save(vectors.generate_suite(count=1, m=4, n=4, k=64, scale_format="e8m0", seed=2),
                 d / "mx.npz")
    vectors.save(gen("normal", a_format="e2m1", m=4, n=4, k=64, scale_format="ue4m3",
                     tensor_scale=0.5, seed=3), d / "nv.npz")
    vectors.save(gen("normal", m=2, n=128, k=128, scale_format="fp32", seed=4),
                 d / "fp32blk.npz")
    vs = vectors.load(d / "in.npz")
    vectors.save(units.get("exact").run(vs), d / "res.npz")
    vectors.save(units.get("hopper-wgmma").run(vs), d / "res_wgmma.npz")
    from mxsim.probe import probe_suite
    probe = probe_suite(k=32)
    vectors.save(probe, d / "probe.npz")
    vectors.save(units.get("hopper-wgmma").run(probe), d / "obs.npz")
    x = np.linspace(-3, 3, 128, dtype=np.float32).reshape(2, 64)
    np.save(d / "x.npy", x)
    np.save(d / "x16.npy", x.astype(np.float16))
    np.save(d / "x3d.npy", np.stack([x, -x]))
    for sub, corpus, suffix in (("bad", _vector_corpus(d), ".npz"), ("npy", _npy_corpus(d), ".npy"),
                                ("spec", _spec_corpus(), ""), ("sweep", _sweep_corpus(), "")):
        (d / sub).mkdir()
        for name, data in corpus.items():
            (d / sub / f"{name}{suffix}").write_bytes(data)
    assert sorted(p.stem for p in (d / "bad").iterdir()) == sorted(_VECTOR_NAMES)
    assert sorted(p.stem for p in (d / "npy").iterdir()) == sorted(_NPY_NAMES)
    return d


def _drive(fx: Path, work: Path, cases: list[dict], limit: int, timeout: int) -> dict:
    """Run ``cases`` in one driver process under ``limit`` bytes of address space."""
    work.mkdir()
    todo = [{"id": c["id"], "fifos": c["fifos"], "cwd": str(work / c["id"]),
             "argv": [a.replace("{fx}", str(fx)) for a in c["argv"]]} for c in cases]
    (work / "cases.json").write_text(json.dumps(todo))
    p = subprocess.run(_ulimit(limit, [sys.executable, str(ROOT / "tests" / "fuzz_driver.py"),
                                       str(work / "cases.json"), str(work / "results.jsonl")]),
                       capture_output=True, text=True, check=False, timeout=timeout, env=_env(),
                       cwd=work)
    lines = (work / "results.jsonl").read_text().splitlines() \
        if (work / "results.jsonl").exists() else []
    results = {r["id"]: r for r in map(json.loads, lines)}
    return {"returncode": p.returncode, "stderr": p.stderr, "results": results}


@pytest.fixture(scope="module")
def fuzzed(fx, tmp_path_factory) -> dict:
    """Run every case; check the fixtures, /dev/null and /dev/full afterwards."""
    devices = {dev: os.stat(dev).st_rdev for dev in DEVICES}
    before = _tree_digest(fx)
    work = tmp_path_factory.mktemp("fuzz")
    plain = _drive(fx, work / "plain", [c for c in CASES if not c["rtl"]], LIMIT, 600)
    rtl = _drive(fx, work / "rtl", [c for c in CASES if c["rtl"]], RTL_LIMIT, 600)
    return {"plain": plain, "rtl": rtl, "results": {**plain["results"], **rtl["results"]},
            "fixtures_unchanged": _tree_digest(fx) == before,
            "devices": {dev: (stat.S_ISCHR(os.stat(dev).st_mode), os.stat(dev).st_rdev == rdev)
                        for dev, rdev in devices.items()}}


def test_fuzz_driver_ran_every_case(fuzzed):
    for group in ("plain", "rtl"):
        run = fuzzed[group]
        assert run["returncode"] == 0, run["stderr"][-3000:]
        assert "Traceback" not in run["stderr"], run["stderr"][-3000:]
    assert sorted(fuzzed["results"]) == sorted(CASE_IDS)


def test_fuzz_left_inputs_and_devices_alone(fuzzed):
    assert fuzzed["fixtures_unchanged"]
    assert fuzzed["devices"] == {dev: (True, True) for dev in DEVICES}
    assert not Path("/tmp/mxsim-fuzz-abs").exists()


@pytest.mark.parametrize("case_id", CASE_IDS)
def test_fuzz_case(fuzzed, case_id):
    r = fuzzed["results"].get(case_id)
    assert r is not None, "the driver died before this case (see test_fuzz_driver_ran_every_case)"
    where = f"mxsim {' '.join(r['argv'])}\n{r['stderr']}"
    assert r["escaped"] is None, f"{where}\n{r['escaped']}"
    assert r["rc"] in (0, 1, 2, 130), where
    assert "Traceback" not in r["stderr"], where
    assert "out of memory" not in r["stderr"], where
    if r["rc"] == 2:
        assert r["stderr"].count("\n") == 1 and r["stderr"].startswith("mxsim"), where
        assert " error: " in r["stderr"], where
        assert r["new_files"] == [], where
    assert r["tmp_files"] == [], where
    assert r["changed"] == [], where                  # the FIFO in the folder is still one


# -- real processes: what reaches the terminal ----------------------------------------------

SHELL_CASES = [
    ["vectors", "info", "{fx}/bad/huge-header.npz"],
    ["vectors", "info", "{fx}/bad/meta-deep.npz"],
    ["vectors", "gen", "-m", "100000", "-n", "100000", "-o", "o.npz"],
    ["vectors", "gen", "--count", "-1", "-o", "o.npz"],
    ["run", "{fx}/bad/flip-deflated-3.npz", "-o", "o.npz"],
    ["run", "{fx}/in.npz", "--unit", "{fx}/spec/binary.toml", "-o", "o.npz"],
    ["run", "{fx}/in.npz", "-o", "/dev/full"],
    ["compare", "{fx}/res.npz", "{fx}/res_wgmma.npz"],
    ["quantize", "{fx}/npy/huge-header.npy", "-o", "o.npz"],
    ["quantize", "{fx}/x.npy", "--seed", "-1", "--rounding", "stochastic", "-o", "o.npz"],
    ["probe", "-k", "1000000000", "-o", "o.npz"],
    ["fit", "{fx}/probe.npz", "{fx}/obs.npz", "-k", "0", "-o", "f.toml"],
    ["rtl", "-o", "."],
    ["verify", "--chunk", "0"],
    ["explore", "{fx}/sweep/latin1.toml", "--check"],
    ["explore", "{fx}/sweep/name-up.toml"],
    ["demo", "--out", "/dev/null"],
]


@pytest.mark.parametrize("argv", SHELL_CASES, ids=[" ".join(a[:2]) for a in SHELL_CASES])
def test_fuzz_shell(fx, tmp_path, argv):
    argv = [a.replace("{fx}", str(fx)) for a in argv]
    p = subprocess.run(_ulimit(LIMIT, [sys.executable, "-m", "mxsim", *argv]),
                       capture_output=True, text=True, check=False, timeout=120, env=_env(),
                       cwd=tmp_path)
    where = f"mxsim {' '.join(argv)}\n{p.stderr}"
    assert p.returncode in (0, 1, 2, 130), where
    assert "Traceback" not in p.stderr, where
    if p.returncode == 2:
        assert p.stderr.count("\n") == 1 and " error: " in p.stderr, where
        assert sorted(os.listdir(tmp_path)) == [], where


def test_fuzz_ctrl_c_leaves_nothing(fx, tmp_path, monkeypatch, capsys):
    """Ctrl-C while a result is computed: exit 130, no output, no temporary file."""
    from mxsim import cli

    def interrupted(self, vs, engine="fast", **kwargs):
        raise KeyboardInterrupt
    monkeypatch.setattr(units.Unit, "run", interrupted)
    assert cli.main(["run", str(fx / "in.npz"), "-o", str(tmp_path / "o.npz")]) == 130
    assert capsys.readouterr().err == "mxsim: interrupted\n"
    assert list(tmp_path.iterdir()) == []


# -- hypothesis: the loaders on drawn input -------------------------------------------------

def _json_values():
    leaves = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8)
    return st.recursive(leaves,
                        lambda inner: st.lists(inner, max_size=3)
                        | st.dictionaries(st.text(max_size=6), inner, max_size=3),
                        max_leaves=12)


_SETTINGS = settings(max_examples=150, deadline=None, derandomize=True, database=None,
                     suppress_health_check=[HealthCheck.too_slow,
                                            HealthCheck.function_scoped_fixture])


@_SETTINGS
@given(flips=st.lists(st.tuples(st.integers(0, 1 << 20), st.integers(0, 255)), min_size=1,
                      max_size=6), cut=st.none() | st.integers(0, 1 << 20))
def test_fuzz_load_mutated_bytes(fx, tmp_path_factory, flips, cut):
    data = bytearray((fx / "mx.npz").read_bytes())
    for pos, byte in flips:
        data[pos % len(data)] = byte
    if cut is not None:
        data = data[:cut % len(data)]
    path = tmp_path_factory.getbasetemp() / "mutated.npz"
    path.write_bytes(bytes(data))
    try:
        vs = vectors.load(path)
    except MxsimError as exc:
        assert "\n" not in str(exc)
    else:
        vs.replace()            # what loads passes the checks when built again


@_SETTINGS
@given(meta=st.dictionaries(st.sampled_from(["schema", "a_format", "b_format", "scale_format",
                                              "block", "producer", "c_format", "d_format",
                                              "families", "seed", "x"]),
                            _json_values(), max_size=9),
       shapes=st.lists(st.integers(0, 5), min_size=0, max_size=4),
       dtype=st.sampled_from(["u1", "i2", "f4", "u4", "U3"]))
def test_fuzz_from_arrays_drawn_meta_and_arrays(meta, shapes, dtype):
    base = {"schema": vectors.SCHEMA, "a_format": "e4m3", "b_format": "e4m3",
            "scale_format": None, "block": None, "producer": "fuzz"}
    arrays = {"meta": np.array(json.dumps({**base, **meta})),
              "a": np.zeros(shapes, dtype), "b": np.zeros(shapes[::-1], dtype)}
    try:
        vectors.from_arrays(arrays, "drawn")
    except MxsimError as exc:
        assert "\n" not in str(exc)
