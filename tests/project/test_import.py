"""``mxsim vectors import``: K&M model_validation folders into mxsim.vectors/1 sets, exactly,
and every malformed input refused in one line that names the file and line, with nothing
written."""

import hashlib
import shutil
from pathlib import Path

import numpy as np
import pytest
from cli_helpers import one_line, run

from mxsim import formats, vectors
from mxsim.errors import VectorFileError
from mxsim.vectors import importers

BAD = Path(__file__).resolve().parents[1] / "data" / "bad_import"
GOOD = BAD / "good" / "B200" / "E4M3"


def _words(path: Path, binary: bool = False) -> np.ndarray:
    lines = path.read_text().split() if not binary else path.read_text().splitlines()
    return np.array([int(x, 2 if binary else 16) for x in lines], dtype=np.uint32)


# -- malformed inputs: one line FILE:LINE, exit 2, nothing written ------------------------------

CASES = [
    ("short_line", [], "a_B200_E4M3.txt:2: 31 values where the lines above have 32"),
    ("bad_hex", [], "b_B200_E4M3.txt:3: value 5 ('zz700000') is not 8 hex digits"),
    ("k_mismatch", [], "b_B200_E4M3.txt:1: 16 values, but a_B200_E4M3.txt has 32 per line"),
    ("rows_mismatch", [], "c_B200_fp32.txt:2: the file has 2 lines but a_B200_E4M3.txt has 3"),
    ("d_nonbinary", [], "d_B200_fp32.txt:2: character '2' is not a binary digit"),
    ("d_short", [], "d_B200_fp32.txt:3: 31 binary digits, not 32"),
    ("missing_file", [], "c_B200_fp32.txt: no such file"),
    ("not_ascii", [], "a_B200_E4M3.txt:3: byte 0xe9 is not ASCII text"),
    ("d16_not_fp16", ["--d-format", "fp16"], "d_B200_fp16.txt:2: 0x3f800001 is not an FP16 "
                                             "value"),
    ("too_long", [], "a_B200_E4M3.txt:1: 40 values per line, more than the instruction's K "
                     "(32)"),
    ("empty_file", [], "d_B200_fp32.txt:1: the file is empty"),
    ("blank_line", [], "c_B200_fp32.txt:2: 0 binary digits, not 32"),
]


@pytest.mark.parametrize(("case", "extra", "text"), CASES, ids=[c[0] for c in CASES])
def test_import_bad_file_one_line_nothing_written(case, extra, text, tmp_path, capsys):
    folder = next((BAD / case / "B200").iterdir())
    out = tmp_path / "out.npz"
    rc, _, err = run(capsys, "vectors", "import", "--layout", "km", folder, *extra, "-o", out)
    assert rc == 2
    one_line(err, text)
    assert "; " in err, err                                      # and what to do
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(("argv", "text"), [
    (["--layout", "mmasim", GOOD], "invalid choice: 'mmasim'"),
    ([BAD / "bad_folder" / "B200" / "E3M4"], "the folder name 'E3M4' is not a K&M format"),
    ([BAD / "no_such_folder"], "no_such_folder: no such folder"),
    ([BAD / "good" / "B200" / "E4M3", "--d-format", "bf16"], "invalid choice: 'bf16'"),
])
def test_import_bad_arguments(argv, text, tmp_path, capsys):
    out = tmp_path / "out.npz"
    rc, _, err = run(capsys, "vectors", "import", *argv, "-o", out)
    assert rc == 2
    one_line(err, text, prefix="mxsim")
    assert not out.exists()


def test_import_missing_d_names_the_other_output(tmp_path, capsys):
    folder = tmp_path / "B200" / "E4M3"
    shutil.copytree(GOOD, folder)
    (folder / "d_B200_fp16.txt").unlink()
    rc, _, err = run(capsys, "vectors", "import", folder, "--d-format", "fp16", "-o",
                     tmp_path / "o.npz")
    assert rc == 2
    one_line(err, "d_B200_fp16.txt: no such file (the folder holds no fp16 results, only "
                  "d_B200_fp32.txt); pass --d-format fp32")


def test_unknown_layout_in_the_library():
    with pytest.raises(VectorFileError, match="layout must be one of km, not 'mmasim'"):
        importers.read("mmasim", GOOD)


# -- what a good folder becomes -------------------------------------------------------------------

def test_import_km_fp32_exact(tmp_path, capsys):
    out = tmp_path / "b200.npz"
    rc, stdout, _ = run(capsys, "vectors", "import", "--layout", "km", GOOD, "--commit",
                        "b12b5a700957655375a1b0c1d0c26e76065da015", "-o", out)
    assert rc == 0 and "3 dot products of K=32" in stdout
    vs = vectors.load(out)
    a_words, b_words = _words(GOOD / "a_B200_E4M3.txt"), _words(GOOD / "b_B200_E4M3.txt")
    e4m3 = formats.get("e4m3")
    # Codes decode to the file's values (the data holds E4M3 values already: exact).
    assert np.array_equal(e4m3.decode(vs.a.reshape(-1)), a_words.view(np.float32))
    assert np.array_equal(e4m3.decode(vs.b.reshape(-1)), b_words.view(np.float32))
    assert vs.a.shape == (3, 1, 32) and vs.b.shape == (3, 32, 1)
    assert np.array_equal(vs.c.reshape(-1), _words(GOOD / "c_B200_fp32.txt", True))
    assert np.array_equal(vs.d.reshape(-1), _words(GOOD / "d_B200_fp32.txt", True))
    meta = vs.meta
    assert meta["gpu"] == "B200" and meta["rows"] == 3 and meta["converted_inexact"] == 0
    assert meta["padded_from"] == meta["padded_to"] == 32
    assert meta["producer"] == "K&M MATLAB-tensor-core model_validation, B200"
    src = meta["source"]
    assert src["commit"] == "b12b5a700957655375a1b0c1d0c26e76065da015"
    assert src["files"]["B200/E4M3/a_B200_E4M3.txt"] == hashlib.sha256(
        (GOOD / "a_B200_E4M3.txt").read_bytes()).hexdigest()


def test_import_km_fp16_output_converts_c_rne(tmp_path):
    vs = importers.read_km(GOOD, d_format="fp16")
    c_words = _words(GOOD / "c_B200_fp32.txt", True)
    fp16 = formats.get("fp16")
    assert vs.c.dtype == np.uint16 and vs.d.dtype == np.uint16
    assert np.array_equal(vs.c.reshape(-1), fp16.encode(c_words.view(np.float32), "rne",
                                                         saturate=False))
    d_words = _words(GOOD / "d_B200_fp16.txt", True)
    assert np.array_equal(fp16.decode(vs.d.reshape(-1)), d_words.view(np.float32))


def test_import_km_h200_fp8_fp32_takes_c_zero(tmp_path):
    """Validate_TC_models.m checks the H100/H200 FP8 FP32-output rows with C = 0 (wgmma)."""
    folder = tmp_path / "H200" / "E4M3"
    folder.mkdir(parents=True)
    for p in GOOD.iterdir():
        shutil.copy(p, folder / p.name.replace("B200", "H200"))
    vs = importers.read_km(folder)
    assert not vs.c.any() and "C = +0" in vs.meta["notes"][0]
    assert vs.meta["instruction"].startswith("wgmma")
    fp16 = importers.read_km(folder, d_format="fp16")     # the mma.sync FP16 program keeps C
    assert fp16.c.any() and fp16.meta["notes"] == []


def test_import_gpu_name_override():
    assert importers.read_km(GOOD, gpu="B200-SXM").meta["gpu"] == "B200-SXM"


# -- element conversion, as the CUDA programs convert -------------------------------------------

def _f32(*values) -> np.ndarray:
    return np.array(values, dtype=np.float32).view(np.uint32)


def test_convert_fp8_rne_satfinite():
    # 480 and Inf saturate to 448 (__NV_SATFINITE); 1.0625 is a tie between 1 and 1.125: even.
    codes, inexact = importers.convert_elements(_f32(480.0, np.inf, 1.0625, 1.0, -0.0), "e4m3")
    assert [int(c) for c in codes] == [0x7E, 0x7E, 0x38, 0x38, 0x80]
    assert inexact == 3
    codes, inexact = importers.convert_elements(_f32(1e6, 1.125), "e5m2")
    assert [int(c) for c in codes] == [0x7B, 0x3C] and inexact == 2      # max 57344; tie: even


def test_convert_fp16_bf16_rne_overflow_to_inf():
    codes, inexact = importers.convert_elements(_f32(65520.0, 1.0 + 2.0 ** -11, 1.0), "fp16")
    assert [int(c) for c in codes] == [0x7C00, 0x3C00, 0x3C00] and inexact == 2
    codes, inexact = importers.convert_elements(_f32(1.0 + 2.0 ** -8 * 3, 3.4e38), "bf16")
    assert [int(c) for c in codes] == [0x3F82, 0x7F80] and inexact == 2


def test_convert_tf32_truncates_to_19_bits():
    words = np.array([0x3F800000, 0x3F801FFF, 0xBF802000], dtype=np.uint32)
    codes, inexact = importers.convert_elements(words, "tf32")
    assert [int(c) for c in codes] == [0x3F800000 >> 13, 0x3F800000 >> 13, 0xBF802000 >> 13]
    assert inexact == 1


def _folder(tmp_path: Path, fmt: str, a: list[str], b: list[str]) -> Path:
    """A K&M folder X100/<fmt> of the rows given (hex words), with C = 1 and D = 2."""
    folder = tmp_path / "X100" / fmt
    folder.mkdir(parents=True)
    (folder / f"a_X100_{fmt}.txt").write_text("".join(x + " \n" for x in a))
    (folder / f"b_X100_{fmt}.txt").write_text("".join(x + " \n" for x in b))
    one, two = (f"{int(np.float32(v).view(np.uint32)):032b}\n" * len(a) for v in (1.0, 2.0))
    (folder / "c_X100_fp32.txt").write_text(one)
    (folder / "d_X100_fp32.txt").write_text(two)
    return folder


@pytest.mark.parametrize(("fmt", "k", "dtype"), [("fp16", 16, np.uint16), ("bf16", 16, np.uint16),
                                                  ("tf32", 8, np.uint32)])
def test_import_km_16bit_pads_to_the_instruction_k(fmt, k, dtype, tmp_path):
    # 1 + 2^-23 is not an FP16, BF16 or TF32 value: RNE (FP16, BF16) and truncation (TF32)
    # make it 1, and the import counts it.
    folder = _folder(tmp_path, fmt, ["3f800000 3f800001 40000000 bf800000"] * 2,
                     ["3f800000 3f800000 3f800000 3f800000"] * 2)
    vs = importers.read_km(folder)
    assert vs.a.shape == (2, 1, k) and vs.b.shape == (2, k, 1) and vs.a.dtype == dtype
    assert vs.meta["padded_from"] == 4 and vs.meta["padded_to"] == k
    assert vs.meta["converted_inexact"] == 2
    f = formats.get(fmt)
    assert list(f.decode(vs.a[0, 0])) == [1.0, 1.0, 2.0, -1.0] + [0.0] * (k - 4)
    assert not vs.b[:, 4:].any()                       # +0 codes
    assert "CUDA sources were not beside the data" in vs.meta["instruction"]
