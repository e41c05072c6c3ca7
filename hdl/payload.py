"""Input beats of a vector set, packed bit for bit as ``block_layout(spec)`` lays them out.

The one packer every simulator front end uses (the cocotb testbench, the bulk C++ harness and
Amaranth's simulator): field offsets and widths are read from the ``data.StructLayout``, never
restated, so a change to the layout changes every packed payload with it. Packing is numpy over
all beats at once (bulk runs pack millions), one pass per field element.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import numpy.typing as npt
from amaranth import Shape
from amaranth.lib import data

from mxsim.spec import UnitSpec
from mxsim.vectors import VectorSet

from .stages import n_scales
from .unit import block_layout

__all__ = ["beat_fields", "pack", "payload_words", "payload_ints"]

WORD = 32                        #: bits per word of a packed payload (Verilator's, the harness's)


def beat_fields(spec: UnitSpec, vs: VectorSet) -> dict[str, npt.NDArray]:
    """The value of every ``block_layout(spec)`` field of every beat of ``vs``.

    Beats are in the order of :func:`mxsim.microarch.cycle.beats_of` (batch, row, column, then the
    dot product's ``K / k`` blocks). ``a`` and ``b`` are ``(beats, k)`` codes; ``a_scale`` and
    ``b_scale`` (scaled specs; ``(beats, k / block)`` when a beat holds several scale blocks),
    ``c`` (FP32 bits, 0 without C), ``first`` and ``last`` are
    ``(beats,)``.
    """
    k, nblk = spec.k, vs.k // spec.k
    nb = int(np.prod(vs.batch_shape, dtype=np.int64))
    m, n = vs.m, vs.n
    shape = (nb, m, n, nblk)

    def beats(x: npt.NDArray, trailing: tuple[int, ...] = ()) -> npt.NDArray:
        return np.broadcast_to(x, shape + trailing).reshape((-1,) + trailing)

    c = vs.c.reshape(nb, m, n) if vs.c is not None else np.zeros((nb, m, n), np.uint32)
    blk = np.arange(nblk)
    fields = {"a": beats(vs.a.reshape(nb, m, 1, nblk, k), (k,)),
              "b": beats(vs.b.reshape(nb, 1, nblk, k, n).transpose(0, 1, 4, 2, 3), (k,))}
    ns = n_scales(spec)
    if ns == 1:
        fields["a_scale"] = beats(vs.a_scale.reshape(nb, m, 1, nblk))
        fields["b_scale"] = beats(vs.b_scale.reshape(nb, 1, nblk, n).transpose(0, 1, 3, 2))
    elif ns > 1:                      # k / block scale codes per operand per beat
        fields["a_scale"] = beats(vs.a_scale.reshape(nb, m, 1, nblk, ns), (ns,))
        fields["b_scale"] = beats(vs.b_scale.reshape(nb, 1, nblk, ns, n)
                                  .transpose(0, 1, 4, 2, 3), (ns,))
    fields.update(c=beats(c[..., None]), first=beats(blk == 0), last=beats(blk == nblk - 1))
    return fields


def pack(layout: data.StructLayout, fields: Mapping[str, npt.NDArray]) -> npt.NDArray[np.uint32]:
    """Every beat's payload as ``(beats, words)`` 32-bit words, least significant first.

    ``fields`` holds one array per field of ``layout``, beats first; an ``ArrayLayout`` field
    has one more axis, its elements. Values must fit their fields (codes of a validated
    vector set do). Bits above ``layout.size`` in the last word are 0.

    Raises
    ------
    ValueError
        If ``fields`` names other fields than ``layout`` has.
    TypeError
        If a field is not an unsigned shape or an array of them.
    """
    if set(fields) != {name for name, _ in layout}:
        raise ValueError(f"Fields must be those of the layout ({', '.join(n for n, _ in layout)}), "
                         f"not {', '.join(fields)}")
    beats = len(next(iter(fields.values()))) if fields else 0
    words = np.zeros((beats, (layout.size + WORD - 1) // WORD), np.uint32)
    for name, field in layout:
        values = np.asarray(fields[name])
        if isinstance(field.shape, data.ArrayLayout):
            width = _width(field.shape.elem_shape, name)
            for j in range(field.shape.length):
                _put(words, values[:, j], field.offset + j * width, width)
        else:
            _put(words, values, field.offset, _width(field.shape, name))
    return words


def _width(shape, name: str) -> int:
    if isinstance(shape, data.Layout):
        raise TypeError(f"Field {name!r} must be an unsigned shape or an array of them, "
                        f"not {shape!r}")
    width = Shape.cast(shape).width
    if width > WORD:
        raise TypeError(f"Field {name!r} must be at most {WORD} bits wide, not {width}")
    return width


def _put(words: npt.NDArray[np.uint32], values: npt.NDArray, offset: int, width: int) -> None:
    """OR ``values`` into bits ``offset .. offset + width - 1`` (at most two words: width is at
    most one word)."""
    w, shift = divmod(offset, WORD)
    v = values.astype(np.uint64) << np.uint64(shift)
    words[:, w] |= (v & np.uint64(0xFFFFFFFF)).astype(np.uint32)
    if shift + width > WORD:
        words[:, w + 1] |= (v >> np.uint64(WORD)).astype(np.uint32)


def payload_words(spec: UnitSpec, vs: VectorSet) -> npt.NDArray[np.uint32]:
    """Every beat's ``i.payload`` of the unit of ``spec`` as 32-bit words, least significant
    first, in the order of :func:`mxsim.microarch.cycle.beats_of`."""
    return pack(block_layout(spec), beat_fields(spec, vs))


def payload_ints(words: npt.NDArray[np.uint32]) -> list[int]:
    """Each row of ``words`` (as :func:`pack` gives them) as one integer."""
    raw = np.ascontiguousarray(words, "<u4")
    return [int.from_bytes(row.tobytes(), "little") for row in raw]
