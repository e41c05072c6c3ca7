"""Hostile files and options (issue 31, the inputs part): vector sets, quantize and gen options,
unit specs, sweeps and ``-o``.

The corpus rows (:mod:`hostile.corpus`) run each case as a user would, on files made once for
the module; the unit tests after them hold the mechanisms the rows rest on. Rows that run as
another user (``user=NOBODY``) need root, which the suite has where it runs.
"""

from __future__ import annotations

import io
import json
import math
import os
import shutil
import stat
import tempfile
import warnings
import zipfile
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from hostile.corpus import Case, check, params

from mxsim import spec as spec_mod
from mxsim import vectors
from mxsim.cli import main
from mxsim.errors import VectorFileError, printable
from mxsim.output import OutputError, open_output

NOBODY = 65534
AS_ROOT = pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"),
                             reason="runs a command as another user: needs root and setpriv")

# -- the files, made once for the module -------------------------------------------------------

_FILES: dict[str, Path] = {}
_DIR: list[Path] = []


def _npy(a: np.ndarray) -> bytes:
    b = io.BytesIO()
    np.lib.format.write_array(b, np.asarray(a))
    return b.getvalue()


def _zip(path: Path, members: list[tuple[str, bytes]]) -> None:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z, warnings.catch_warnings():
        warnings.simplefilter("ignore")          # "Duplicate name": what these files are for
        for name, data in members:
            z.writestr(name, data)


def _base() -> vectors.VectorSet:
    return vectors.generate("normal", k=32, seed=0)


def _members(vs: vectors.VectorSet | None = None) -> list[tuple[str, bytes]]:
    return [(f"{k}.npy", _npy(v)) for k, v in vectors.to_arrays(vs or _base()).items()]


def _header_shape(data: bytes, shape: str) -> bytes:
    """An .npy member whose header declares ``shape`` (the data stays as it was)."""
    head_len = 10 + int.from_bytes(data[8:10], "little")
    head = data[10:head_len].decode("latin1")
    head = head[:head.index("'shape': ")] + f"'shape': {shape}, }}"
    head = head.ljust(head_len - 11) + "\n"
    return data[:8] + len(head).to_bytes(2, "little") + head.encode("latin1") + data[head_len:]


def _big(path: Path) -> None:
    """One member 'a' just over the 256 MiB limit (zeros, 1 MB compressed), before b and meta."""
    shape = (16384, 16385)
    meta = json.dumps({"schema": vectors.SCHEMA, "a_format": "e4m3", "b_format": "e4m3",
                       "scale_format": None, "block": None, "producer": "test_inputs"})
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as z:
        with z.open("a", "w", force_zip64=True) as f:
            np.lib.format.write_array_header_1_0(
                f, {"descr": "|u1", "fortran_order": False, "shape": shape})
            zeros, left = bytes(1 << 24), math.prod(shape)
            while left > 0:
                f.write(zeros[:min(left, len(zeros))])
                left -= len(zeros)
        z.writestr("b.npy", _npy(np.zeros((16385, 8), np.uint8)))
        z.writestr("meta.npy", _npy(np.array(meta)))


def _bypass(path: Path) -> None:
    """The DEFECTS reproduction: the big member 'a', then a harmless 16 x 32 'a.npy'."""
    shutil.copy(_file("big.npz"), path)
    with zipfile.ZipFile(path, "a") as z:
        z.writestr("a.npy", _npy(np.zeros((16, 16385), np.uint8)))


def _with_extra(**extra):
    return lambda path: vectors.save(_base().replace(extra=extra), path)


def _spec_text(**fields: str) -> str:
    text = spec_mod.UnitSpec(name="blackwell", k=32).dumps()
    for key, value in fields.items():
        text = "\n".join(line for line in text.splitlines() if not line.startswith(f"{key} ="))
        text += f"\n{key} = {value}\n"
    return text


def _slow_spec(path: Path) -> None:
    """k = 65,536 in as many serial steps (about 600 kB of TOML): a linear check is instant."""
    steps = ", ".join(f"[{i}]" for i in range(1 << 16))
    path.write_text(_spec_text(k="65536", frac_bits="13") + f"schedule = [{steps}]\n")


SWEEP = """\
[sweep]
name = "s"
title = "t"

[unit]
preset = "blackwell-mxf8f6f4"
lanes = 4

[grid]
frac_bits = [6, 25]

[[point]]
label = "wgmma"
preset = "hopper-wgmma"

[[workload]]
name = "w1"
shape = [64, 64, 64]
sample = [4, 4]

[[workload]]
name = "w2"
shape = [64, 64, 64]
sample = [4, 4]

[array]
rows = 4
cols = 4
bandwidth = 64
"""


def _sweep(old: str, new: str):
    assert old in SWEEP
    return lambda path: path.write_text(SWEEP.replace(old, new, 1))


_MAKERS = {
    "in.npz": lambda p: vectors.save(_base(), p),
    "x.npy": lambda p: np.save(p, np.random.default_rng(7).standard_normal((4, 64), np.float32)),
    "big.npz": _big,
    "bypass.npz": _bypass,
    "b-twice.npz": lambda p: _zip(p, _members() + [("b.npy", _npy(_base().b))]),
    "b-and-b.npy.npz": lambda p: _zip(p, _members() + [("b", _npy(_base().b))]),
    "meta-twice.npz": lambda p: _zip(p, _members() + [("meta.npy", _npy(vectors.to_arrays(
        _base())["meta"]))]),
    "overflow.npz": lambda p: _zip(p, [(n, _header_shape(d, str((1 << 62, 1 << 62))) if n ==
                                        "a.npy" else d) for n, d in _members()]),
    "negative.npz": lambda p: _zip(p, [(n, _header_shape(d, "(-16, 32)") if n == "a.npy"
                                        else d) for n, d in _members()]),
    "fam-int.npz": _with_extra(families=5),
    "fam-null.npz": _with_extra(families=None),
    "fam-nested.npz": _with_extra(families=[[1]]),
    "fam-mixed.npz": _with_extra(families=["a", 1]),
    "fam-object.npz": _with_extra(families={"x": 1}),
    "fam-string.npz": _with_extra(families="normal"),
    "fam-bool.npz": _with_extra(families=True),
    "surrogate.npz": lambda p: vectors.save(_base().replace(producer="mx\ud800sim"), p),
    "control.npz": lambda p: vectors.save(_base().replace(producer="mx\x1b[2Jsim\nfake: 1"), p),
    "bidi-key.npz": _with_extra(**{"n\u202eote": "x\u2066y"}),
    "nan.npz": _with_extra(note=float("nan")),
    "inf.npz": _with_extra(note=[float("inf"), {"y": -float("inf")}]),
    "bf16.npy": lambda p: np.save(p, np.random.default_rng(8).standard_normal(
        (4, 64), np.float32).astype(ml_dtypes.bfloat16)),
    "void3.npy": lambda p: np.save(p, np.zeros((4, 64), "V3")),
    "esc.toml": lambda p: p.write_text(_spec_text(name='"a\\u001b[2Jb"')),
    "newline.toml": lambda p: p.write_text(_spec_text(name='"a\\nfake line"')),
    "del.toml": lambda p: p.write_text(_spec_text(name='"a\\u007f"')),
    "bidi.toml": lambda p: p.write_text(_spec_text(name='"a\\u202eb"')),
    "instruction.toml": lambda p: p.write_text(_spec_text(instruction='"mma\\u001b]0;x\\u0007"')),
    "key.toml": lambda p: p.write_text(_spec_text() + '"k\\u001b[2J" = 1\n'),
    "slow.toml": _slow_spec,
    "slow.json": lambda p: p.write_text(json.dumps({
        **spec_mod.UnitSpec(name="slow", k=1 << 16, frac_bits=13).to_dict(),
        "schedule": [[i] for i in range(1 << 16)]})),
    "repeated.json": lambda p: p.write_text(json.dumps({
        **spec_mod.UnitSpec(name="slow", k=1 << 16, frac_bits=13).to_dict(),
        "schedule": [[0]] * (1 << 16)})),
    "sw.toml": lambda p: p.write_text(SWEEP),
    "sw-preset.toml": _sweep('preset = "blackwell-mxf8f6f4"', 'preset = "nope"'),
    "sw-point-preset.toml": _sweep('preset = "hopper-wgmma"', 'preset = "nope"'),
    "sw-bw-nan.toml": _sweep("bandwidth = 64", "bandwidth = nan"),
    "sw-bw-inf.toml": _sweep("bandwidth = 64", "bandwidth = inf"),
    "sw-bw-half.toml": _sweep("bandwidth = 64", "bandwidth = 2.5"),
    "sw-spec.toml": _sweep('preset = "blackwell-mxf8f6f4"', 'spec = "nope.toml"'),
    "sw-twice.toml": _sweep('name = "w2"', 'name = "w1"'),
    "sw-label.toml": _sweep('label = "wgmma"', 'label = "w\\u001b[2J"'),
    "sw-workload.toml": _sweep('name = "w2"', 'name = "w\\u202e2"'),
    "sw-title.toml": _sweep('title = "t"', 'title = "t\\nfake line"'),
}


def _file(name: str) -> Path:
    """The module's copy of hostile file ``name``, made on first use."""
    if name not in _FILES:
        if not _DIR:
            _DIR.append(Path(tempfile.mkdtemp(prefix="mxsim-test-inputs-")))
        path = _DIR[0] / name
        _MAKERS[name](path)
        _FILES[name] = path
    return _FILES[name]


@pytest.fixture(scope="module", autouse=True)
def _files():
    yield
    for d in _DIR:
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def t():
    """The case's folder: one that every user may enter (pytest's tmp_path is root's alone)."""
    d = Path(tempfile.mkdtemp(prefix="mxsim-case-"))
    d.chmod(0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def put(*names: str, mode: int | None = None, owner: int | None = None):
    """A setup that copies the module's files ``names`` into the case's folder."""
    def setup(t: Path) -> None:
        for name in names:
            shutil.copy(_file(name), t / name)
            if owner is not None:
                os.chown(t / name, owner, -1)
            if mode is not None:
                os.chmod(t / name, mode)
    return setup


def both(*setups):
    def setup(t: Path) -> None:
        for s in setups:
            s(t)
    return setup


# -- D-OUT-READONLY: the files a row writes over ----------------------------------------------

PRECIOUS = b"precious\n"


def _readonly(owner: int, folder_owner: int = NOBODY):
    """in.npz and x.npy, and a 0444 ``ro.npz`` of ``owner`` in a folder of ``folder_owner``."""
    def setup(t: Path) -> None:
        put("in.npz", "x.npy")(t)
        (t / "ro.npz").write_bytes(PRECIOUS)
        os.chown(t / "ro.npz", owner, owner)
        os.chmod(t / "ro.npz", 0o444)
        os.chown(t, folder_owner, -1)
    return setup


def _kept(name: str = "ro.npz", owner: int | None = None):
    def after(t: Path, p) -> None:
        assert (t / name).read_bytes() == PRECIOUS
        st = os.stat(t / name)
        assert stat.S_IMODE(st.st_mode) == 0o444
        if owner is not None:
            assert st.st_uid == owner
    return after


def _replaced_keeping_owner(t: Path, p) -> None:
    st = os.stat(t / "ro.npz")
    assert (stat.S_IMODE(st.st_mode), st.st_uid) == (0o444, NOBODY)
    assert vectors.load(t / "ro.npz").d is not None


def _link(t: Path) -> None:
    (t / "link.npz").symlink_to("ro.npz")


def _owned(owner: int):
    """A setup that gives the case's folder to ``owner`` (who may then write outputs there)."""
    return lambda t: os.chown(t, owner, -1)


def _private_folder(t: Path) -> None:
    (t / "sub").mkdir(mode=0o700)
    shutil.copy(_file("in.npz"), t / "sub" / "in.npz")


def _strict_json(says: dict | None = None):
    """stdout is strict JSON (no NaN or Infinity), holding ``says``."""
    def after(t: Path, p) -> None:
        def refuse(word):
            raise AssertionError(f"not strict JSON: {word}")
        data = json.loads(p.stdout, parse_constant=refuse)
        for key, value in (says or {}).items():
            assert data[key] == value, (key, data[key])
    return after


def _no_escape_codes(t: Path, p) -> None:
    text = p.stdout + p.stderr
    assert not any(ch in text for ch in "\x1b\x07\x7f\u202e\u2066"), text


def _forged_nothing(t: Path, p) -> None:
    _no_escape_codes(t, p)
    assert not any(line.startswith("fake") for line in p.stdout.splitlines()), p.stdout


def _quantised_as_float32(t: Path, p) -> None:
    """bf16.npy quantises exactly as the same values in float32 do."""
    from mxsim import quantize as q
    x = np.load(_file("bf16.npy")).view(ml_dtypes.bfloat16).astype(np.float32)
    scales, codes = q.to_mx(x, "e4m3", 32, "floor", "rne")
    vs = vectors.load(t / "q.npz")
    np.testing.assert_array_equal(vs.a, codes)
    np.testing.assert_array_equal(vs.a_scale, scales)


# -- the rows ---------------------------------------------------------------------------------

INFO = ("vectors", "info")
Q = ("quantize", "x.npy")
GEN = ("vectors", "gen", "-o", "g.npz")
NVFP4_GEN = ("vectors", "gen", "--a-format", "e2m1", "--scale-format", "ue4m3", "-o", "g.npz")
NVFP4_Q = ("--nvfp4", "-o", "q.npz")
SPEC_RUN = ("run", "in.npz", "-o", "o.npz", "--unit")

CASES = [
    # D-VEC-LIMIT-BYPASS: every member is its own array, and the size counted is the loaded one
    Case("D-VEC-LIMIT-BYPASS", [*INFO, "bypass.npz"], 2,
         "bypass.npz: members 'a' and 'a.npy' both hold array 'a'; each array must be stored "
         "once", put("bypass.npz")),
    Case("D-VEC-LIMIT-BYPASS/run", ["run", "bypass.npz", "-o", "o.npz"], 2,
         "bypass.npz: members 'a' and 'a.npy' both hold array 'a'", put("bypass.npz"),
         outputs=["o.npz"]),
    Case("D-VEC-LIMIT-BYPASS/one-member", [*INFO, "big.npz"], 2,
         "big.npz: the set holds 268,", put("big.npz")),
    Case("D-VEC-LIMIT-BYPASS/b-twice", [*INFO, "b-twice.npz"], 2,
         "b-twice.npz: member 'b.npy' is stored twice", put("b-twice.npz")),
    Case("D-VEC-LIMIT-BYPASS/b-and-b.npy", ["compare", "b-and-b.npy.npz", "--unit", "exact"], 2,
         "b-and-b.npy.npz: members 'b.npy' and 'b' both hold array 'b'",
         put("b-and-b.npy.npz")),
    Case("D-VEC-LIMIT-BYPASS/meta-twice", [*INFO, "meta-twice.npz"], 2,
         "meta-twice.npz: member 'meta.npy' is stored twice", put("meta-twice.npz")),
    Case("D-VEC-LIMIT-BYPASS/shape-overflows", [*INFO, "overflow.npz"], 2,
         "overflow.npz: the set holds 21,267,647,932,558,653,966,460,912,964,485,5",
         put("overflow.npz")),

    # D-OUT-READONLY: -o refuses a file the user may not write, as cp and > do
    Case("D-OUT-READONLY", ["run", "in.npz", "-o", "ro.npz"], 2,
         "ro.npz: cannot write (Permission denied)", _readonly(owner=0), user=NOBODY,
         after=_kept(owner=0), marks=[AS_ROOT]),
    Case("D-OUT-READONLY/owner", ["run", "in.npz", "-o", "ro.npz"], 2,
         "ro.npz: cannot write (Permission denied)", _readonly(owner=NOBODY), user=NOBODY,
         after=_kept(owner=NOBODY), marks=[AS_ROOT]),
    Case("D-OUT-READONLY/gen", ["vectors", "gen", "-o", "ro.npz"], 2,
         "ro.npz: cannot write (Permission denied)", _readonly(owner=NOBODY), user=NOBODY,
         after=_kept(), marks=[AS_ROOT]),
    Case("D-OUT-READONLY/symlink", ["quantize", "x.npy", "-o", "link.npz"], 2,
         "link.npz: cannot write (Permission denied)", both(_readonly(owner=NOBODY), _link),
         user=NOBODY, after=_kept(), marks=[AS_ROOT]),
    Case("D-OUT-READONLY/folder", ["run", "in.npz", "-o", "new.npz"], 2,
         "new.npz: cannot write (Permission denied)", _readonly(owner=NOBODY, folder_owner=0),
         user=NOBODY, outputs=["new.npz"], marks=[AS_ROOT]),
    Case("D-OUT-READONLY/root", ["run", "in.npz", "-o", "ro.npz"], 0, "wrote ro.npz",
         _readonly(owner=NOBODY), after=_replaced_keeping_owner, marks=[AS_ROOT]),

    # D-VEC-MSG-PERM: an input the user may not read says so
    Case("D-VEC-MSG-PERM", [*INFO, "in.npz"], 2, "in.npz: cannot read (Permission denied)",
         put("in.npz", mode=0), user=NOBODY, marks=[AS_ROOT]),
    Case("D-VEC-MSG-PERM/quantize", [*Q, "-o", "q.npz"], 2,
         "x.npy: cannot read (Permission denied)", both(put("x.npy", mode=0), _owned(NOBODY)),
         user=NOBODY, outputs=["q.npz"], marks=[AS_ROOT]),
    Case("D-VEC-MSG-PERM/folder", ["run", "sub/in.npz", "-o", "o.npz"], 2,
         "sub/in.npz: cannot read (Permission denied)", both(_private_folder, _owned(NOBODY)),
         user=NOBODY, outputs=["o.npz"], marks=[AS_ROOT]),

    # D-VEC-FAMILIES: provenance is data, of any JSON type (the others: unit tests below)
    Case("D-VEC-FAMILIES", [*INFO, "fam-int.npz"], 0, "families      5", put("fam-int.npz")),
    Case("D-VEC-FAMILIES/null", [*INFO, "fam-null.npz", "--json"], 0, "",
         put("fam-null.npz"), after=_strict_json({"families": None})),
    Case("D-VEC-FAMILIES/nested", [*INFO, "fam-nested.npz"], 0, "families      [[1]]",
         put("fam-nested.npz")),
    Case("D-VEC-FAMILIES/mixed", [*INFO, "fam-mixed.npz", "--json"], 0, "",
         put("fam-mixed.npz"), after=_strict_json({"families": ["a", 1]})),

    # D-VEC-SURROGATE: provenance text is shown escaped, whatever it holds
    Case("D-VEC-SURROGATE", [*INFO, "surrogate.npz"], 0, "producer      mx\\ud800sim",
         put("surrogate.npz")),
    Case("D-VEC-SURROGATE/json", [*INFO, "surrogate.npz", "--json"], 0, "",
         put("surrogate.npz"), after=_strict_json({"producer": "mx\ud800sim"})),
    Case("D-VEC-SURROGATE/control", [*INFO, "control.npz"], 0,
         "producer      mx\\x1b[2Jsim\\nfake: 1", put("control.npz"), after=_forged_nothing),

    # D-VEC-JSON-NAN: --json is strict JSON
    Case("D-VEC-JSON-NAN", [*INFO, "nan.npz", "--json"], 0, "", put("nan.npz"),
         after=_strict_json({"note": None})),
    Case("D-VEC-JSON-NAN/infinity-nested", [*INFO, "inf.npz", "--json"], 0, "", put("inf.npz"),
         after=_strict_json({"note": [None, {"y": None}]})),

    # D-Q-BF16: bfloat16 as numpy.save writes it (<V2) is read as bfloat16
    Case("D-Q-BF16", ["quantize", "bf16.npy", "-o", "q.npz"], 0, "quantised to e4m3",
         put("bf16.npy"), after=_quantised_as_float32),
    Case("D-Q-BF16/void3", ["quantize", "void3.npy", "-o", "q.npz"], 2,
         "Input must be a float array (float32, bfloat16, float16 or float64), not |V3",
         put("void3.npy"), outputs=["q.npz"]),

    # D-Q-IGNORED-OPT: an option the mode does not read is refused (every one: unit tests)
    Case("D-Q-IGNORED-OPT", [*Q, "--scale-rule", "rceil", "--nvfp4", "-o", "q.npz"], 2,
         "--scale-rule does not apply with --nvfp4", put("x.npy"), outputs=["q.npz"]),
    Case("D-Q-IGNORED-OPT/axis", [*Q, "--axis", "0", "-o", "q.npz"], 2,
         "--axis does not apply without --compare", put("x.npy"), outputs=["q.npz"]),
    Case("D-Q-IGNORED-OPT/compare-rule", [*Q, "--compare", "--scale-rule", "ceil"], 2,
         "--scale-rule does not apply with --compare", put("x.npy")),
    Case("D-Q-IGNORED-OPT/compare-as", [*Q, "--compare", "--as", "b"], 2,
         "--as does not apply with --compare", put("x.npy")),
    Case("D-Q-IGNORED-OPT/seed", [*Q, "--seed", "3", "-o", "q.npz"], 2,
         "--seed does not apply without --rounding stochastic", put("x.npy"),
         outputs=["q.npz"]),

    # D-GEN-TSCALE: the tensor scale is finite in FP32
    Case("D-GEN-TSCALE", [*NVFP4_GEN, "--tensor-scale", "1e40"], 2,
         "Tensor scale must be finite in FP32 (at most 3.4028235e+38 in magnitude), not 1e+40",
         outputs=["g.npz"]),
    Case("D-GEN-TSCALE/nan", [*NVFP4_GEN, "--tensor-scale", "nan"], 2,
         "Tensor scale must be finite in FP32", outputs=["g.npz"]),

    # D-GEN-IGNORED-OPT
    Case("D-GEN-IGNORED-OPT", [*GEN, "--scale-granularity", "row"], 2,
         "--scale-granularity does not apply without --scale-format fp32", outputs=["g.npz"]),
    Case("D-GEN-IGNORED-OPT/no-c", [*GEN, "--no-c", "--c-format", "fp16"], 2,
         "--c-format does not apply with --no-c", outputs=["g.npz"]),
    Case("D-GEN-IGNORED-OPT/compare-engine", ["compare", "in.npz", "in.npz", "--engine",
                                              "reference"], 2,
         "--engine does not apply with OTHER.npz", put("in.npz")),
    Case("D-GEN-IGNORED-OPT/fp32-row", [*GEN, "--scale-format", "fp32", "--scale-granularity",
                                        "row", "-k", "128"], 0, "fp32 scales"),

    # D-SWEEP-BLAME: the key and line an error is about
    Case("D-SWEEP-BLAME", ["explore", "sw-preset.toml", "--check"], 2,
         "sw-preset.toml:6: unit.preset: Unknown unit 'nope'", put("sw-preset.toml")),
    Case("D-SWEEP-BLAME/point", ["explore", "sw-point-preset.toml", "--check"], 2,
         "sw-point-preset.toml:14: point 'wgmma': point.preset: Unknown unit 'nope'",
         put("sw-point-preset.toml")),
    Case("D-SWEEP-BLAME/bandwidth-nan", ["explore", "sw-bw-nan.toml", "--check"], 2,
         "sw-bw-nan.toml:29: array.bandwidth must be a positive number", put("sw-bw-nan.toml")),
    Case("D-SWEEP-BLAME/bandwidth-fraction", ["explore", "sw-bw-half.toml", "--check"], 2,
         "sw-bw-half.toml:29: grid point 'frac_bits=6': array.bandwidth: bandwidth must be a "
         "whole number", put("sw-bw-half.toml")),
    Case("D-SWEEP-BLAME/workload-twice", ["explore", "sw-twice.toml", "--check"], 2,
         "sw-twice.toml:22: two workloads are named 'w1'", put("sw-twice.toml")),

    # D-SPEC-ESC: spec and sweep names are printable, and anything echoed is escaped
    Case("D-SPEC-ESC", [*SPEC_RUN, "esc.toml"], 2,
         "esc.toml: Unit spec: name must be printable text on one line, without control or "
         "format characters, not 'a\\x1b[2Jb' (which holds '\\x1b')",
         put("in.npz", "esc.toml"), outputs=["o.npz"], after=_no_escape_codes),
    Case("D-SPEC-ESC/newline", [*SPEC_RUN, "newline.toml"], 2,
         "newline.toml: Unit spec: name must be printable", put("in.npz", "newline.toml"),
         outputs=["o.npz"]),
    Case("D-SPEC-ESC/bidi", [*SPEC_RUN, "bidi.toml"], 2, "bidi.toml: Unit spec: name must be",
         put("in.npz", "bidi.toml"), outputs=["o.npz"], after=_no_escape_codes),
    Case("D-SPEC-ESC/unknown-key", [*SPEC_RUN, "key.toml"], 2,
         "key.toml: unknown key(s) k\\x1b[2J", put("in.npz", "key.toml"), outputs=["o.npz"],
         after=_no_escape_codes),
    Case("D-SPEC-ESC/sweep-label", ["explore", "sw-label.toml", "--check"], 2,
         "sw-label.toml:13: point.label must be printable text on one line",
         put("sw-label.toml"), after=_no_escape_codes),
    Case("D-SPEC-ESC/sweep-workload", ["explore", "sw-workload.toml", "--check"], 2,
         "sw-workload.toml:22: workload.name must be printable", put("sw-workload.toml"),
         after=_no_escape_codes),

    # D-SPEC-SLOW: a 65,536-step schedule loads in linear time (the timeout catches a
    # quadratic check, which took 42 s and more)
    Case("D-SPEC-SLOW", [*SPEC_RUN, "slow.toml"], 2,
         "K (32) must be a multiple of unit blackwell's instruction k (65536)",
         put("in.npz", "slow.toml"), outputs=["o.npz"], timeout=20),
    Case("D-SPEC-SLOW/repeated", [*SPEC_RUN, "repeated.json"], 2,
         "repeated.json: Unit spec 'slow': schedule must cover k indices 0..65535 exactly once "
         "(missing [1, 2, 3, 4, 5, 6, 7, 8, ... (65535 in all)]; repeated [0])",
         put("in.npz", "repeated.json"), outputs=["o.npz"], timeout=20),
]


@pytest.mark.parametrize("case", params(CASES))
def test_inputs_corpus(case, t):
    check(case, t)


# -- the mechanisms, in process ----------------------------------------------------------------

@pytest.mark.parametrize("text, shown", [
    ("plain ü ≠ text", "plain ü ≠ text"),
    ("a\x1b[2Jb\nc\td\x7f", "a\\x1b[2Jb\\nc\\td\\x7f"),
    ("r\u202eevil\u2066", "r\\u202eevil\\u2066"),
    ("mx\ud800sim", "mx\\ud800sim"),
    ("nb\u00a0sp\u2028", "nb\\xa0sp\\u2028"),
])
def test_printable_escapes_what_a_terminal_would_act_on(text, shown):
    assert printable(text) == shown
    assert printable(shown) == shown                   # escaping twice changes nothing


def test_printable_keeps_the_layout_it_is_told_to():
    assert printable("a\tb\nc\x1b", keep="\t\n") == "a\tb\nc\\x1b"


def _info(capsys, path: Path, *flags: str):
    assert main(["vectors", "info", str(path), *flags]) == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("name, families, text", [
    ("fam-object.npz", {"x": 1}, "{'x': 1}"),
    ("fam-string.npz", "normal", "normal"),
    ("fam-bool.npz", True, "True"),
    ("fam-int.npz", 5, "5"),
])
def test_info_shows_families_of_any_json_type(capsys, name, families, text):
    out = _info(capsys, _file(name))
    assert f"\nfamilies      {text}\n" in out
    assert json.loads(_info(capsys, _file(name), "--json"))["families"] == families


def test_info_sorts_a_list_of_family_names_and_keeps_the_shape_its_own(tmp_path, capsys):
    path = tmp_path / "s.npz"
    vectors.save(_base().replace(extra={"families": ["b", "a", "b"], "m": 99, "dots": "all"}),
                 path)
    info = json.loads(_info(capsys, path, "--json"))
    assert info["families"] == ["a", "b"]
    assert (info["m"], info["dots"], info["meta.m"], info["meta.dots"]) == (16, 128, 99, "all")


def test_info_escapes_names_and_values(capsys):
    out = _info(capsys, _file("bidi-key.npz"))
    assert "\nn\\u202eote    x\\u2066y\n" in out
    out = _info(capsys, _file("nan.npz"))
    assert "\nnote          nan\n" in out


def test_json_output_is_strict(capsys):
    from mxsim.cli.common import emit

    class Args:
        json = True

    emit(Args(), "", {"a": [1.5, float("nan")], "b": {"c": float("-inf")}, "d": (float("inf"),),
                      "e": np.float64("nan"), "f": "x\ud800"})
    out = capsys.readouterr().out
    assert json.loads(out, parse_constant=lambda c: pytest.fail(c)) == {
        "a": [1.5, None], "b": {"c": None}, "d": [None], "e": None, "f": "x\ud800"}
    assert out.isascii()


def _npz_with_a(tmp_path: Path, shape: str) -> Path:
    path = tmp_path / "x.npz"
    _zip(path, [(n, _header_shape(d, shape) if n == "a.npy" else d) for n, d in _members()])
    return path


def test_load_refuses_a_header_its_data_cannot_fill_even_when_large_is_allowed(tmp_path):
    path = _npz_with_a(tmp_path, "(1000000, 1000)")
    with pytest.raises(VectorFileError, match=r"array 'a' declares shape \(1000000, 1000\) "
                                              r"of uint8 \(1,000,000,000 bytes\), but its "
                                              r"member holds 512 bytes of data; "):
        vectors.load(path, allow_large=True)
    with pytest.raises(ValueError, match=r"the set holds 1,000,\d{3},\d{3} bytes of arrays"):
        vectors.load(path)


def test_load_refuses_a_negative_dimension(tmp_path):
    with pytest.raises(ValueError, match=r"array 'a' declares shape \(-16, 32\), with a "
                                         r"negative dimension"):
        vectors.load(_file("negative.npz"), allow_large=True)


def test_load_reads_the_members_it_checked():
    # Every array of a set written by mxsim comes back bit for bit, read member by member.
    vs = vectors.generate_suite(["normal", "specials"], count=2, scale_format="e8m0")
    buf = tempfile.NamedTemporaryFile(suffix=".npz", delete=False)
    buf.close()
    try:
        vectors.save(vs, buf.name)
        back = vectors.load(buf.name)
    finally:
        os.unlink(buf.name)
    assert back.inputs_equal(vs) and back.extra == vs.extra


QUANTIZE_UNREAD = [
    (["--nvfp4", "--scale-rule", "floor", "-o", "q.npz"], "--scale-rule does not apply with "
     "--nvfp4: it picks the E8M0 scale rule of -o's MX quantisation (--compare reports every "
     "rule); leave it out"),
    (["--compare", "--scale-rule", "rceil"], "--scale-rule does not apply with --compare"),
    (["--compare", "--rounding", "rne"], "--rounding does not apply with --compare: it picks "
     "how -o rounds the elements (--compare rounds to nearest even); leave it out"),
    (["--compare", "--as", "a"], "--as does not apply with --compare"),
    (["--compare", "--allow-nan-blocks"], "--allow-nan-blocks does not apply with --compare"),
    (["--compare", "--per-tensor-scale", "2"], "--per-tensor-scale does not apply without "
     "--nvfp4: it is the NVFP4 per-tensor scale; leave it out"),
    (["--compare", "--two-d"], "--two-d does not apply without --nvfp4"),
    (["--compare", "--seed", "1"], "--seed does not apply without --rounding stochastic"),
    (["--axis", "-1", "-o", "q.npz"], "--axis does not apply without --compare: it picks the "
     "axis of --compare's blocks (-o takes the blocks of the operand --as names); leave it out"),
    (["--axis", "0", "--nvfp4", "-o", "q.npz"], "--axis does not apply without --compare"),
    (["--per-tensor-scale", "2", "-o", "q.npz"], "--per-tensor-scale does not apply without "
     "--nvfp4"),
    (["--seed", "0", "--rounding", "rz", "--nvfp4", "-o", "q.npz"], "--seed does not apply "
     "without --rounding stochastic: it seeds stochastic rounding's random bits; leave it out"),
    (["--compare", "--nvfp4", "--two-d"], "--compare compares the E8M0 scale rules; leave out "
     "--nvfp4"),
]


@pytest.mark.parametrize("argv, message", QUANTIZE_UNREAD, ids=[" ".join(a) for a, _ in
                                                                QUANTIZE_UNREAD])
def test_quantize_refuses_every_option_its_mode_does_not_read(tmp_path, capsys, argv, message):
    argv = [str(tmp_path / a) if a == "q.npz" else a for a in argv]
    assert main(["quantize", str(_file("x.npy")), *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"mxsim: error: {message}") and err.count("\n") == 1, err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("argv", [
    ["--nvfp4", "--two-d", "--per-tensor-scale", "0.5", "--rounding", "rz"],
    ["--scale-rule", "rceil", "--rounding", "stochastic", "--seed", "4", "--as", "b",
     "--allow-nan-blocks"],
], ids=["nvfp4", "mx"])
def test_quantize_takes_every_option_its_mode_reads(tmp_path, capsys, argv):
    np.save(tmp_path / "x.npy", np.random.default_rng(9).standard_normal((32, 64), np.float32))
    assert main(["quantize", str(tmp_path / "x.npy"), *argv, "-o",
                 str(tmp_path / "q.npz")]) == 0, capsys.readouterr().err
    meta = vectors.load(tmp_path / "q.npz").extra["quantize"]
    assert meta["rounding"] == argv[argv.index("--rounding") + 1]


def test_quantize_reads_bfloat16_as_numpy_saves_it(tmp_path, capsys):
    x = np.load(_file("bf16.npy"))
    assert x.dtype == np.dtype("V2")                   # what numpy.save made of bfloat16
    assert main(["quantize", str(_file("bf16.npy")), "--nvfp4", "-o",
                 str(tmp_path / "q.npz")]) == 0
    from mxsim import quantize as q
    scales, codes, pts = q.to_nvfp4(x.view(ml_dtypes.bfloat16).astype(np.float32))
    vs = vectors.load(tmp_path / "q.npz")
    np.testing.assert_array_equal(vs.a, codes)
    np.testing.assert_array_equal(vs.a_scale, scales)
    assert vs.tensor_scale == np.float32(pts)


@pytest.mark.parametrize("value", [1e39, -1e39, float("inf"), float("-inf"), float("nan")])
def test_generate_refuses_a_tensor_scale_beyond_fp32(value):
    with pytest.raises(ValueError, match=r"^Tensor scale must be finite in FP32 \(at most "
                                         r"3\.4028235e\+38 in magnitude\), not "):
        vectors.generate("normal", a_format="e2m1", scale_format="ue4m3", tensor_scale=value)


@pytest.mark.parametrize("value", [3.4028235e38, -2.0, 0.0, 1e-50])
def test_generate_takes_a_tensor_scale_fp32_holds(value):
    vs = vectors.generate("normal", a_format="e2m1", scale_format="ue4m3", tensor_scale=value)
    assert vs.tensor_scale == np.float32(value)


def test_gen_refuses_a_granularity_block_scales_do_not_read(tmp_path, capsys):
    out = tmp_path / "g.npz"
    assert main(["vectors", "gen", "--scale-format", "e8m0", "--scale-granularity", "block",
                 "-o", str(out)]) == 2
    assert "--scale-granularity does not apply" in capsys.readouterr().err
    assert not out.exists()


@pytest.mark.parametrize("name, value", [
    ("name", "a\x7f"), ("name", "a\u202eb"), ("name", "tab\there"), ("name", "nb\u00a0sp"),
    ("instruction", "mma\x1b]0;x\x07"), ("provenance", "line\nline"),
])
def test_spec_text_is_printable(name, value):
    whose = "" if name == "name" else " 'x'"
    with pytest.raises(spec_mod.SpecError, match=rf"^Unit spec{whose}: {name} must be printable "
                                                 rf"text on one line, without control or "
                                                 rf"format characters, not "):
        spec_mod.UnitSpec(**{"name": "x", name: value})


def test_spec_text_is_checked_after_the_values_it_quotes():
    # A sweep's design name quotes its values: a bad value is named by its own rule.
    with pytest.raises(spec_mod.SpecError, match=r"acc_rounding must be one of"):
        spec_mod.UnitSpec(name="x[acc_rounding=rz\x1b]", acc_rounding="rz\x1b")


def test_spec_schedule_loads_and_words_its_error_in_linear_time():
    spec = spec_mod.load(_file("slow.json"))
    assert len(spec.steps()) == 1 << 16
    steps = [[i] for i in range(1 << 16)]
    steps[5], steps[70000 % (1 << 16)] = [4], [1 << 17]
    with pytest.raises(spec_mod.SpecError, match=r"\(missing \[5, 4464\]; repeated \[4\]; "
                                                 r"outside 0\.\.65535: \[131072\]\)$"):
        spec_mod.UnitSpec(k=1 << 16, schedule=steps)


def test_spec_file_the_user_may_not_read(tmp_path, monkeypatch):
    path = tmp_path / "s.toml"
    path.write_text(_spec_text())

    def refuse(self):
        raise PermissionError(13, "Permission denied")
    monkeypatch.setattr(Path, "read_bytes", refuse)
    with pytest.raises(spec_mod.SpecError, match=r"s\.toml: cannot read the spec file "
                                                 r"\(Permission denied\)$"):
        spec_mod.load(path)


@pytest.mark.parametrize("name, line, message", [
    ("sw-bw-inf.toml", 29, "array.bandwidth must be a positive number (bytes per cycle), not "
                           "inf"),
    ("sw-spec.toml", 6, "unit.spec: nope.toml: no such spec file"),
    ("sw-title.toml", 3, "sweep.title must be printable text on one line"),
])
def test_sweep_names_the_key_and_line(name, line, message):
    from mxsim import explore
    path = _file(name)
    with pytest.raises(explore.SweepError) as e:
        explore.load(path)
    assert str(e.value).startswith(f"{path}:{line}: {message}"), str(e.value)


def test_sweep_description_may_break_lines_but_not_hold_escapes(tmp_path):
    from mxsim import explore
    path = tmp_path / "s.toml"
    path.write_text(SWEEP.replace('title = "t"', 'title = "t"\ndescription = """\nline\n\tline"""'))
    assert explore.load(path).description == "line\n\tline"
    path.write_text(SWEEP.replace('title = "t"', 'title = "t"\ndescription = "a\\u001b[2J"'))
    with pytest.raises(explore.SweepError, match=r":4: sweep\.description must be printable "
                                                 r"text, without control"):
        explore.load(path)


def test_output_replacing_keeps_mode_owner_and_group(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("gives a file to another user: needs root")
    path = tmp_path / "ro.npz"
    path.write_bytes(PRECIOUS)
    os.chown(path, NOBODY, NOBODY)
    path.chmod(0o440)
    with open_output(path) as fh:                      # root may write it, as cp would
        fh.write(b"new")
    st = path.stat()
    assert (path.read_bytes(), stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid) == (
        b"new", 0o440, NOBODY, NOBODY)


def test_output_refuses_what_open_would_refuse(tmp_path, monkeypatch):
    path = tmp_path / "ro.npz"
    path.write_bytes(PRECIOUS)
    # As a user without the right to write it (os.access answers for the kernel).
    monkeypatch.setattr(os, "access", lambda p, mode, **kw: Path(p) != path)
    with pytest.raises(OutputError, match=rf"^{path}: cannot write \(Permission denied\)$"):
        with open_output(path) as fh:
            fh.write(b"new")
    assert path.read_bytes() == PRECIOUS and list(tmp_path.iterdir()) == [path]
