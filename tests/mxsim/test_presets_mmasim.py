"""Presets against MMA-Sim (PyPI ``mmasim``), the published model, bit for bit.

``make test`` installs mmasim, so these run in CI; without it they skip.
"""

import numpy as np
import pytest

from mxsim import formats, presets, vectors
from mxsim.engine import fast
from mxsim.vectors import VectorSet

pytest.importorskip("mmasim")
import mmasim_adapter  # noqa: E402

F8F6F4 = ("e4m3", "e5m2", "e3m2", "e2m3", "e2m1")


def _check(preset: str, vs: VectorSet) -> int:
    ours = fast.dot(presets.get(preset).spec_for(vs), vs)
    theirs = mmasim_adapter.run(preset, vs)
    np.testing.assert_array_equal(ours, theirs)
    return ours.size


def _fp16(vs: VectorSet) -> VectorSet:
    c = formats.get("fp16").encode(vs.c.view(np.float32), saturate=False)
    return vs.replace(c=c, c_format="fp16")


@pytest.mark.parametrize("c_format", ["fp32", "fp16"])
@pytest.mark.parametrize("a,b", [(a, b) for a in ("e4m3", "e5m2") for b in ("e4m3", "e5m2")])
def test_mmasim_hopper_wgmma(a, b, c_format):
    for family in vectors.FAMILIES:
        if family == "nan-scale":
            continue
        vs = vectors.generate(family, a_format=a, b_format=b, m=8, n=8, k=64, seed=21)
        _check("hopper-wgmma", _fp16(vs) if c_format == "fp16" else vs)


@pytest.mark.parametrize("a", F8F6F4)
@pytest.mark.parametrize("b", F8F6F4)
def test_mmasim_blackwell_f8f6f4(a, b):
    for family in ("uniform", "normal", "specials", "subnormal", "max", "one-large"):
        vs = vectors.generate(family, a_format=a, b_format=b, m=4, n=8, k=64, seed=22)
        _check("blackwell-f8f6f4", vs)
    _check("blackwell-f8f6f4", _fp16(vectors.generate("normal", a_format=a, b_format=b, m=4,
                                                      n=8, k=32, seed=23)))


@pytest.mark.parametrize("a", F8F6F4)
@pytest.mark.parametrize("b", F8F6F4)
def test_mmasim_blackwell_mxf8f6f4(a, b):
    for family in ("uniform", "normal", "specials", "nan-scale", "scale-extremes",
                   "cancellation", "c-negligible"):
        vs = vectors.generate(family, a_format=a, b_format=b, m=4, n=8, k=64,
                              scale_format="e8m0", seed=24)
        _check("blackwell-mxf8f6f4", vs)


@pytest.mark.parametrize("preset,scale_format,block", [
    ("blackwell-mxf4", "e8m0", 32), ("blackwell-mxf4nvf4", "e8m0", 32),
    ("blackwell-mxf4nvf4", "e8m0", 16), ("blackwell-mxf4nvf4", "ue4m3", 16)])
def test_mmasim_blackwell_fp4_grouped(preset, scale_format, block):
    for family in vectors.FAMILIES:
        vs = vectors.generate(family, a_format="e2m1", m=8, n=8, k=128,
                              scale_format=scale_format, block=block, seed=25)
        _check(preset, vs)


def test_mmasim_random_volume():
    """A larger random run per preset: tens of thousands of dots, zero mismatches."""
    total = 0
    for preset, kw in [("hopper-wgmma", dict(a_format="e4m3")),
                       ("blackwell-mxf8f6f4", dict(a_format="e4m3", scale_format="e8m0")),
                       ("blackwell-mxf4nvf4", dict(a_format="e2m1", scale_format="ue4m3"))]:
        k = 64 if preset.endswith("nvf4") else 32
        vs = vectors.generate("uniform", m=128, n=64, k=k, seed=26, **kw)
        total += _check(preset, vs)
    assert total == 3 * 128 * 64
