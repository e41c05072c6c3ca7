"""hdl.payload: the one packer of input beats, held to block_layout's bit order.

The reference here packs each beat with Python integers, field by field, in the order the RTL's
port has always had (from the LSB: a[0..k-1], b[0..k-1], a_scale, b_scale, c, first, last), so
a change of the layout or of the packer that moves a bit fails here.
"""

import itertools

import numpy as np
import pytest

from mxsim import formats, presets, vectors
from mxsim.microarch import RTL_FORMATS
from mxsim.vectors import VectorSet

pytest.importorskip("amaranth")

from hdl.payload import pack, payload_ints, payload_words  # noqa: E402
from hdl.unit import block_layout  # noqa: E402

SCALED = presets.get("blackwell-mxf8f6f4").spec("e4m3", scale_format="e8m0", block=32)
PAIRS = list(itertools.product(RTL_FORMATS, repeat=2))


def _spec(a: str, b: str, scaled: bool):
    base = SCALED if scaled else SCALED.replace(scale_format=None, block=None)
    return base.replace(a_format=a, b_format=b)


def _reference(spec, vs: VectorSet) -> list[int]:
    """Each beat as one integer, one field after another from the LSB, with Python ints."""
    fa, fb = formats.get(spec.a_format), formats.get(spec.b_format)
    k, nblk = spec.k, vs.k // spec.k
    a, b = vs.a.reshape(-1, vs.m, vs.k), vs.b.reshape(-1, vs.k, vs.n)
    c = vs.c.reshape(-1, vs.m, vs.n) if vs.c is not None else np.zeros(a.shape[:2] + (vs.n,))
    out = []
    for t, i, j, blk in itertools.product(range(a.shape[0]), range(vs.m), range(vs.n),
                                          range(nblk)):
        fields = [(int(x), fa.bits) for x in a[t, i, blk * k:(blk + 1) * k]]
        fields += [(int(x), fb.bits) for x in b[t, blk * k:(blk + 1) * k, j]]
        if spec.scale_format is not None:
            fields += [(int(vs.a_scale.reshape(-1, vs.m, nblk)[t, i, blk]), 8),
                       (int(vs.b_scale.reshape(-1, nblk, vs.n)[t, blk, j]), 8)]
        fields += [(int(c[t, i, j]), 32), (int(blk == 0), 1), (int(blk == nblk - 1), 1)]
        word, pos = 0, 0
        for value, width in fields:
            assert 0 <= value < 1 << width
            word |= value << pos
            pos += width
        out.append(word)
    return out


def _adversarial(spec, seed: int) -> VectorSet:
    """Batch entries of extremes: every field all ones; every field 0 but one element all
    ones (each element in turn, so a bit that lands in a neighbour is seen); random codes of
    the full width, with C and the scales all ones."""
    fa, fb = formats.get(spec.a_format), formats.get(spec.b_format)
    k2 = 2 * spec.k
    rng = np.random.default_rng(seed)
    a_hot = np.zeros((k2, 1, k2), np.uint8)
    a_hot[np.arange(k2), 0, np.arange(k2)] = (1 << fa.bits) - 1
    b_hot = np.zeros((k2, k2, 1), np.uint8)
    b_hot[np.arange(k2), np.arange(k2), 0] = (1 << fb.bits) - 1
    n = 2 * k2 + 2
    a = np.concatenate([np.full((1, 1, k2), (1 << fa.bits) - 1, np.uint8), a_hot,
                        np.zeros((k2, 1, k2), np.uint8),
                        rng.integers(0, 1 << fa.bits, (1, 1, k2), dtype=np.uint8)])
    b = np.concatenate([np.full((1, k2, 1), (1 << fb.bits) - 1, np.uint8),
                        np.zeros((k2, k2, 1), np.uint8), b_hot,
                        rng.integers(0, 1 << fb.bits, (1, k2, 1), dtype=np.uint8)])
    c = np.zeros((n, 1, 1), np.uint32)
    c[[0, -1]] = 0xFFFFFFFF
    scales = {}
    if spec.scale_format is not None:
        sa, sb = np.zeros((n, 1, 2), np.uint8), np.zeros((n, 2, 1), np.uint8)
        sa[[0, -1]], sb[[0, -1]] = 0xFF, 0xFF
        scales = dict(a_scale=sa, b_scale=sb, scale_format=spec.scale_format, block=spec.block)
    return VectorSet(a=a, b=b, c=c, a_format=spec.a_format, b_format=spec.b_format,
                     **scales)


@pytest.mark.parametrize("scaled", [True, False], ids=["e8m0", "unscaled"])
@pytest.mark.parametrize("a, b", PAIRS, ids=[f"{a}x{b}" for a, b in PAIRS])
def test_payload_words_are_block_layouts_bit_order(a, b, scaled):
    spec = _spec(a, b, scaled)
    kw = dict(a_format=a, b_format=b, scale_format=spec.scale_format, block=spec.block)
    random = vectors.generate_suite(["normal", "specials", "uniform"], m=2, n=3, k=96, seed=7,
                                    **kw)
    for vs in (random, _adversarial(spec, seed=len(a) * 7 + len(b))):
        words = payload_words(spec, vs)
        want = _reference(spec, vs)
        assert words.dtype == np.uint32 and words.shape == (len(want),
                                                            -(-block_layout(spec).size // 32))
        assert payload_ints(words) == want


def test_payload_every_bit_of_the_layout_is_reachable_and_nothing_above():
    """All-ones fields set exactly the layout's bits, none above (the first block of a chain
    of two: ``last``, the top bit, is 0)."""
    spec = _spec("e3m2", "e2m3", True)
    size = block_layout(spec).size
    first = payload_ints(payload_words(spec, _adversarial(spec, seed=1)))[0]
    assert first == (1 << (size - 1)) - 1


def test_payload_pack_refuses_fields_the_layout_lacks():
    layout = block_layout(SCALED)
    fields = {name: np.zeros(1, np.uint8) for name, _ in layout}
    with pytest.raises(ValueError, match=r"^Fields must be those of the layout \(a, b, "
                                         r"a_scale, b_scale, c, first, last\), not a, b, "
                                         r"a_scale, b_scale, c, first$"):
        pack(layout, {k: v for k, v in fields.items() if k != "last"})
