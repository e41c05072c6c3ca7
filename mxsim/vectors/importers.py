"""Importers of published dot-product data into ``mxsim.vectors/1`` sets.

One layout today, ``km``: the ``model_validation`` folders of Khattak & Mikaitis'
MATLAB-tensor-core repository (north-numerical-computing/MATLAB-tensor-core, BSD-2), the real
GPU outputs their models were validated against. A folder ``model_validation/<GPU>/<fmt>``
holds, one dot product per line:

- ``a_<GPU>_<fmt>.txt`` and ``b_<GPU>_<fmt>.txt``: the K element values of A's row and B's
  column, as FP32 words in hex (``3f700000``), space-separated;
- ``c_<GPU>_fp32.txt``: C as a 32-character binary FP32 pattern;
- ``d_<GPU>_fp32.txt`` / ``d_<GPU>_fp16.txt``: the GPU's D, a binary FP32 pattern (an FP16
  result is stored as the FP32 pattern of its value).

The import is exact: each element becomes the code the producing CUDA program
(``model_validation/CUDA/*.cu``) handed the tensor core, converted as it converts
(``__nv_cvt_float_to_fp8(.., __NV_SATFINITE, ..)``: RNE, overflow to the largest finite value;
``__float2half`` / ``__float2bfloat16``: RNE, overflow to Inf; TF32: the hardware reads the top
19 bits of the FP32 word), and words the conversion changed are counted in ``meta`` as
``converted_inexact``. Rows shorter than the instruction's K are padded with +0 codes, which
is what the CUDA program left in the rest of the fragment (``padded_from``/``padded_to``).
C is converted as the program converts it (FP16 output: ``__float2half``, RNE), except for
the H100/H200 FP8 FP32-output rows, which Validate_TC_models.m checks with C = 0 ("D = AB + D
where D is zero for fp8 with WGMMA"): they are imported with C = +0.

MMA-Sim (microsoft/MMA-Sim) publishes no test-vector files (its vectors are drawn in code),
so it has no layout here.

A bad file raises :class:`~mxsim.errors.VectorFileError` in one line, ``FILE:LINE: what is
wrong; what to do``.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from .. import formats
from ..errors import VectorFileError
from .schema import VectorSet

__all__ = ["LAYOUTS", "KM_REPOSITORY", "KM_FORMATS", "C_ZERO_GPUS", "read", "read_km",
           "km_rows", "convert_elements"]

#: Layouts :func:`read` takes (``mxsim vectors import --layout``).
LAYOUTS = ("km",)
KM_REPOSITORY = "https://github.com/north-numerical-computing/MATLAB-tensor-core"
#: K&M folder names (lower case) and the operand format each holds.
KM_FORMATS = {"fp16": "fp16", "bf16": "bf16", "tf32": "tf32", "e4m3": "e4m3", "e5m2": "e5m2"}
_FP8 = ("e4m3", "e5m2")
#: The instruction's K where the CUDA sources are not beside the data (wmma m16n16k16 for
#: fp16/bf16, m16n16k8 for tf32; mma.sync m16n8k32 for FP8).
_INSTRUCTION_K = {"fp16": 16, "bf16": 16, "tf32": 8, "e4m3": 32, "e5m2": 32}
#: GPUs whose FP8 FP32-output rows Validate_TC_models.m checks with C = 0 (wgmma).
C_ZERO_GPUS = ("H100", "H200")
_C_ZERO_NOTE = ("C = +0: Validate_TC_models.m validates the H100/H200 FP8 FP32-output rows "
                "with C = 0 ('D = AB + D where D is zero for fp8 with WGMMA'), so these rows "
                "came from wgmma with a zero accumulator, not from the mma.sync program with "
                "the c file's C")
_HEX = re.compile(r"[0-9A-Fa-f]{8}")
_BIN = re.compile(r"[01]{32}")
_WHAT_TO_DO = "fix the line or re-export the folder (one dot per line in every file)"


def _lines(path: Path) -> list[str]:
    """The lines of a text file (trailing blank lines dropped), or a one-line error."""
    if not path.is_file():
        raise VectorFileError(f"{path}: no such file; a K&M folder (model_validation/<GPU>/"
                              f"<fmt>) holds a_, b_, c_ and d_ files named after the GPU and "
                              f"format")
    raw = path.read_bytes()
    try:
        text = raw.decode("ascii")
    except UnicodeDecodeError as exc:
        line = raw[:exc.start].count(b"\n") + 1
        raise VectorFileError(f"{path}:{line}: byte 0x{raw[exc.start]:02x} is not ASCII text; "
                              f"{_WHAT_TO_DO}") from None
    lines = text.splitlines()
    while lines and not lines[-1].strip():
        lines.pop()
    if not lines:
        raise VectorFileError(f"{path}:1: the file is empty; {_WHAT_TO_DO}")
    return lines


def _hex_words(path: Path, k: int | None = None, k_from: str | None = None
               ) -> npt.NDArray[np.uint32]:
    """``(rows, K)`` FP32 words from a file of hex fields; K from the first line unless
    given (``k_from`` names the file it came from, for the message)."""
    lines = _lines(path)
    for i, line in enumerate(lines, 1):
        fields = line.split()
        if k is None:
            k = len(fields)
        if len(fields) != k:
            why = (f"{len(fields)} values, but {k_from} has {k} per line; a and b hold the K "
                   f"elements of the same dot on each line" if k_from and i == 1 else
                   f"{len(fields)} values where the lines above have {k}")
            raise VectorFileError(f"{path}:{i}: {why}; {_WHAT_TO_DO}")
        for j, f in enumerate(fields, 1):
            if not _HEX.fullmatch(f):
                raise VectorFileError(f"{path}:{i}: value {j} ({f[:20]!r}) is not 8 hex digits "
                                      f"(an FP32 word); {_WHAT_TO_DO}")
    words = [int(f, 16) for line in lines for f in line.split()]
    return np.array(words, dtype=np.uint32).reshape(len(lines), k)


def _bin_words(path: Path) -> npt.NDArray[np.uint32]:
    """FP32 words from a file of 32-character binary patterns, one a line."""
    lines = _lines(path)
    for i, line in enumerate(lines, 1):
        if not _BIN.fullmatch(line.strip()):
            bad = next((ch for ch in line.strip() if ch not in "01"), None)
            why = (f"character {bad!r} is not a binary digit" if bad is not None else
                   f"{len(line.strip())} binary digits, not 32")
            raise VectorFileError(f"{path}:{i}: {why} (a line holds one FP32 pattern as 32 "
                                  f"binary digits); {_WHAT_TO_DO}")
    return np.array([int(line.strip(), 2) for line in lines], dtype=np.uint32)


def _check_rows(named: Sequence[tuple[Path, int]]) -> int:
    """The common row count of the files, or a one-line error naming the odd one out."""
    first, rows = named[0]
    for path, n in named[1:]:
        if n != rows:
            where = f"{path}:{n}" if n < rows else f"{path}:{rows + 1}"
            raise VectorFileError(f"{where}: the file has {n} lines but {first.name} has "
                                  f"{rows}; a, b, c and d hold one dot per line, so they must "
                                  f"have as many lines")
    return rows


def convert_elements(words: npt.NDArray[np.uint32], fmt: str
                     ) -> tuple[npt.NDArray, int]:
    """Codes of ``fmt`` for FP32 words, converted as K&M's CUDA programs convert them, and
    how many words the conversion changed.

    FP8: RNE with overflow (and Inf) to the largest finite value (``__NV_SATFINITE``); FP16
    and BF16: RNE, overflow to Inf (``__float2half``, ``__float2bfloat16``); TF32: the top
    19 bits (the tensor core ignores the low 13 of the FP32 word it loads).
    """
    if fmt == "tf32":
        return (words >> np.uint32(13)).astype(np.uint32), int(np.count_nonzero(
            words & np.uint32(0x1FFF)))
    f = formats.get(fmt)
    values = words.view(np.float32).astype(np.float64)
    codes = f.encode(values, "rne", saturate=fmt in _FP8)
    back = f.decode(codes)
    changed = ~((back == values) | (np.isnan(back) & np.isnan(values)))
    return codes, int(np.count_nonzero(changed))


def _fp16_results(path: Path, words: npt.NDArray[np.uint32]) -> npt.NDArray[np.uint16]:
    """FP16 codes of results stored as FP32 patterns of FP16 values; a word that is not one
    is an error naming its line."""
    f = formats.get("fp16")
    values = words.view(np.float32).astype(np.float64)
    codes = f.encode(values, "rne", saturate=False)
    nan = np.isnan(values)
    # __half2float keeps a NaN's payload in the top 10 mantissa bits: keep it back.
    codes[nan] = (((words[nan] >> 16) & 0x8000) | 0x7C00 | ((words[nan] >> 13) & 0x3FF)
                  ).astype(np.uint16)
    bad = np.flatnonzero(~((f.decode(codes) == values) | nan))
    if bad.size:
        i = int(bad[0])
        raise VectorFileError(f"{path}:{i + 1}: 0x{int(words[i]):08x} is not an FP16 value "
                              f"(an FP16 result is stored as the FP32 pattern of its value); "
                              f"pass --d-format fp32 if the file holds FP32 results")
    return codes.astype(np.uint16)


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _instruction(cuda: Path, fmt: str, d_format: str) -> tuple[str | None, int | None, Path]:
    """The instruction a K&M CUDA program issues for ``fmt`` and its K, read from the source
    (None, None when the source is not there or does not say)."""
    if fmt in _FP8:
        src = cuda / f"mma_fp8_output_{d_format}.cu"
        if not src.is_file():
            return None, None, src
        m = re.search(r'"(mma\.sync\.aligned\.m\d+n\d+k(\d+)\.[a-z.0-9]*?)"\s*STR\(FMT\)\s*'
                      r'"\."\s*STR\(FMT\)\s*"(\.[a-z0-9]+)\s*"',
                      src.read_text(errors="replace"))
        if m is None:
            return None, None, src
        return f"{m.group(1)}{fmt}.{fmt}{m.group(3)}", int(m.group(2)), src
    src = cuda / "wmma_fp16_bf16_tf32_input.cu"
    if not src.is_file():
        return None, None, src
    text = src.read_text(errors="replace")
    block = re.search(rf"#(?:ifdef |elif defined\()IN_FORMAT_{fmt.upper()}\b\)?(.*?)"
                      rf"#(?:elif|else|endif)", text, re.S)
    shape = [re.search(rf"#define {x} (\d+)", text) for x in ("M", "N")]
    if block is None or None in shape:
        return None, None, src
    k = re.search(r"#define K (\d+)", block.group(1))
    typ = re.search(r"#define WMMA_IN_FORMAT (\S+)", block.group(1))
    if k is None or typ is None:
        return None, None, src
    acc = "half" if d_format == "fp16" else "float"
    m_, n_ = (int(s.group(1)) for s in shape)
    return (f"wmma::mma_sync m{m_}n{n_}k{k.group(1)} ({typ.group(1)} A row_major x B "
            f"col_major, {acc} accumulator)", int(k.group(1)), src)


def _folder_parts(folder: Path) -> tuple[str, str, str]:
    """(format folder name, operand format, the GPU tag in the file names) of a K&M folder."""
    if not folder.is_dir():
        raise VectorFileError(f"{folder}: no such folder; give a model_validation/<GPU>/<fmt> "
                              f"folder of the K&M data")
    fmt = KM_FORMATS.get(folder.name.lower())
    if fmt is None:
        raise VectorFileError(f"{folder}: the folder name {folder.name!r} is not a K&M format "
                              f"({', '.join(KM_FORMATS)}); give a model_validation/<GPU>/<fmt> "
                              f"folder")
    tag = folder.parent.name
    if not (folder / f"a_{tag}_{folder.name}.txt").is_file():
        found = sorted(folder.glob(f"a_*_{folder.name}.txt"))
        if len(found) == 1:
            tag = found[0].name[2:-len(f"_{folder.name}.txt")]
    return folder.name, fmt, tag


def km_rows(folder: str | Path, d_format: str = "fp32") -> dict[str, Any]:
    """The raw words of a K&M folder: ``a``/``b`` ``(rows, K)``, ``c``/``d`` ``(rows,)``
    uint32 FP32 words, and the paths read; every file checked line by line."""
    folder = Path(folder)
    fmt_dir, fmt, tag = _folder_parts(folder)
    if d_format not in ("fp32", "fp16"):
        raise VectorFileError(f"The K&M d format must be fp32 or fp16, not {d_format!r}")
    paths = {x: folder / f"{x}_{tag}_{fmt_dir}.txt" for x in ("a", "b")}
    paths["c"] = folder / f"c_{tag}_fp32.txt"
    paths["d"] = folder / f"d_{tag}_{d_format}.txt"
    other = folder / f"d_{tag}_{'fp16' if d_format == 'fp32' else 'fp32'}.txt"
    if not paths["d"].is_file() and other.is_file():
        raise VectorFileError(f"{paths['d']}: no such file (the folder holds no {d_format} "
                              f"results, only {other.name}); pass --d-format "
                              f"{'fp16' if d_format == 'fp32' else 'fp32'}")
    for p in paths.values():       # every file present before any is parsed
        if not p.is_file():
            _lines(p)
    a = _hex_words(paths["a"])
    b = _hex_words(paths["b"], a.shape[1], paths["a"].name)
    c, d = _bin_words(paths["c"]), _bin_words(paths["d"])
    _check_rows([(paths["a"], len(a)), (paths["b"], len(b)), (paths["c"], len(c)),
                 (paths["d"], len(d))])
    return {"a": a, "b": b, "c": c, "d": d, "paths": paths, "format": fmt, "tag": tag}


def read_km(folder: str | Path, *, d_format: str = "fp32", gpu: str | None = None,
            repository: str | None = KM_REPOSITORY, commit: str | None = None) -> VectorSet:
    """Import one K&M ``model_validation/<GPU>/<fmt>`` folder as a vector set.

    Parameters
    ----------
    folder
        The folder of one GPU and operand format.
    d_format
        Which results to take: ``fp32`` (``d_<GPU>_fp32.txt``) or ``fp16``.
    gpu
        The GPU's name in ``meta`` (default: the name in the files').
    repository, commit
        Where the data came from, recorded in ``meta.source``.

    Returns
    -------
    A set of ``rows`` 1 x 1 dot products: ``a`` ``(rows, 1, K)``, ``b`` ``(rows, K, 1)``,
    ``c``/``d`` ``(rows, 1, 1)``, K the instruction's (rows padded with +0 codes).

    Raises
    ------
    VectorFileError
        A missing or malformed file, in one line ``FILE:LINE: what; what to do``.
    """
    raw = km_rows(folder, d_format)
    fmt, paths, tag = raw["format"], raw["paths"], raw["tag"]
    gpu = gpu or tag
    folder = Path(folder)
    cuda = folder.parent.parent / "CUDA"
    instruction, k_instr, src = _instruction(cuda, fmt, d_format)
    k_instr = k_instr or _INSTRUCTION_K[fmt]
    rows, k = raw["a"].shape
    if k > k_instr:
        raise VectorFileError(f"{paths['a']}:1: {k} values per line, more than the "
                              f"instruction's K ({k_instr}); check the folder's format")
    a, inexact_a = convert_elements(raw["a"], fmt)
    b, inexact_b = convert_elements(raw["b"], fmt)
    pad = ((0, 0), (0, k_instr - k))
    a, b = np.pad(a, pad), np.pad(b, pad)          # +0 is code 0 in every operand format
    notes = []
    c_zero = fmt in _FP8 and d_format == "fp32" and tag in C_ZERO_GPUS
    if c_zero:
        c, notes = np.zeros(rows, dtype=np.uint32), [_C_ZERO_NOTE]
        instruction = (f"wgmma.mma_async.sync.aligned.m64nNk32.f32.{fmt}.{fmt} with a zero "
                       f"accumulator (Validate_TC_models.m; the published mma_fp8_output_fp32.cu "
                       f"holds {instruction})")
    elif d_format == "fp16":
        c, _ = convert_elements(raw["c"], "fp16")
    else:
        c = raw["c"]
    d = raw["d"] if d_format == "fp32" else _fp16_results(paths["d"], raw["d"])
    root = folder.parent.parent
    root = root.parent if root.name == "model_validation" else root
    files = {p: _sha256(p) for p in [*paths.values(), src,
                                     folder.parent.parent / "Validate_TC_models.m"]
             if p.is_file()}
    return VectorSet(
        a=a.reshape(rows, 1, k_instr), b=b.reshape(rows, k_instr, 1), a_format=fmt,
        b_format=fmt, c=c.reshape(rows, 1, 1), d=d.reshape(rows, 1, 1), c_format=d_format,
        d_format=d_format, producer=f"K&M MATLAB-tensor-core model_validation, {gpu}",
        extra={"layout": "km", "gpu": gpu, "instruction": instruction or "unknown (the CUDA "
               "sources were not beside the data)", "rows": rows, "padded_from": k,
               "padded_to": k_instr, "converted_inexact": inexact_a + inexact_b,
               "source": {"repository": repository, "commit": commit,
                          "files": {_relative(p, root): h for p, h in files.items()}},
               "notes": notes})


def read(layout: str, folder: str | Path, **kwargs: Any) -> VectorSet:
    """Import ``folder`` in ``layout`` (one of :data:`LAYOUTS`); ``kwargs`` go to the
    layout's reader (:func:`read_km`)."""
    if layout not in LAYOUTS:
        raise VectorFileError(f"The layout must be one of {', '.join(LAYOUTS)}, not {layout!r} "
                              f"(MMA-Sim publishes no test-vector files to import)")
    return read_km(folder, **kwargs)


def _relative(path: Path, root: Path) -> str:
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return path.name
