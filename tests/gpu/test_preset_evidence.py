"""The figures a preset's provenance and ``verified`` quote from Khattak & Mikaitis' real-GPU
rows (tests/data/km) are what the committed rows give: the dots each preset reproduces, and
how many rows the rival architecture's preset misses."""

import re

import numpy as np
import pytest

from gpu.peers import conformance
from mxsim import presets, units, vectors

DATA = conformance.DATA

# preset -> the sets whose dots its ``verified`` counts (L40S's files are Ada's bytes: not
# counted twice)
COUNTED = {
    "volta-mma-f16": ["V100_fp16_fp32", "V100_fp16_fp16"],
    "ampere-mma-f16": ["A100_fp16_fp32", "A100_fp16_fp16", "A2_fp16_fp32", "A2_fp16_fp16"],
    "ampere-mma-bf16": ["A100_bf16_fp32", "A2_bf16_fp32"],
    "ampere-mma-tf32": ["A100_tf32_fp32", "A2_tf32_fp32"],
    "ada-mma-f16": ["Ada_fp16_fp32", "Ada_fp16_fp16"],
    "ada-mma-bf16": ["Ada_bf16_fp32"],
    "ada-mma-tf32": ["Ada_tf32_fp32"],
    "ada-mma-f8": ["Ada_e4m3_fp32", "Ada_e4m3_fp16", "Ada_e5m2_fp32", "Ada_e5m2_fp16"],
    "hopper-mma-f16": ["H100_fp16_fp32", "H100_fp16_fp16", "H200_fp16_fp32", "H200_fp16_fp16"],
    "hopper-mma-bf16": ["H100_bf16_fp32", "H200_bf16_fp32"],
    "hopper-mma-tf32": ["H100_tf32_fp32", "H200_tf32_fp32"],
    "blackwell-mma-f16": ["B200_fp16_fp32", "B200_fp16_fp16"],
    "blackwell-mma-bf16": ["B200_bf16_fp32"],
    "blackwell-mma-tf32": ["B200_tf32_fp32"],
}

# (preset, rival preset, sets, the rival's misses quoted in the provenance)
RIVALS = [
    ("volta-mma-f16", "turing-mma-f16", ["V100_fp16_fp32"], [1200]),
    ("ampere-mma-f16", "hopper-mma-f16", ["A100_fp16_fp32", "A2_fp16_fp32"], [766, 815]),
    ("ampere-mma-bf16", "hopper-mma-bf16", ["A100_bf16_fp32", "A2_bf16_fp32"], [426, 400]),
    ("ampere-mma-tf32", "hopper-mma-tf32", ["A100_tf32_fp32", "A2_tf32_fp32"], [465, 487]),
    ("ada-mma-f16", "hopper-mma-f16", ["Ada_fp16_fp32"], [828]),
    ("ada-mma-bf16", "hopper-mma-bf16", ["Ada_bf16_fp32"], [415]),
    ("ada-mma-tf32", "hopper-mma-tf32", ["Ada_tf32_fp32"], [467]),
    ("hopper-mma-f16", "ampere-mma-f16", ["H100_fp16_fp32", "H200_fp16_fp32"], [1757, 1755]),
    ("hopper-mma-bf16", "ampere-mma-bf16", ["H100_bf16_fp32", "H200_bf16_fp32"], [1080, 1091]),
    ("hopper-mma-tf32", "ampere-mma-tf32", ["H100_tf32_fp32", "H200_tf32_fp32"], [498, 483]),
    ("blackwell-mma-f16", "ampere-mma-f16", ["B200_fp16_fp32"], [1812]),
    ("blackwell-mma-bf16", "ampere-mma-bf16", ["B200_bf16_fp32"], [1073]),
    ("blackwell-mma-tf32", "ampere-mma-tf32", ["B200_tf32_fp32"], [481]),
]


def _misses(preset: str, stem: str) -> int:
    vs = vectors.load(DATA / f"{stem}.npz")
    return int(np.count_nonzero(units.get(preset).compute(vs) != vs.d))


@pytest.mark.parametrize("preset", sorted(COUNTED))
def test_verified_counts_every_dot_it_reproduces(preset):
    stems = COUNTED[preset]
    for stem in stems:
        gpu, fmt, out = stem.split("_")
        assert conformance.PRESET[(gpu, fmt, out)] == preset
        assert _misses(preset, stem) == 0
    dots = sum(vectors.load(DATA / f"{s}.npz").num_dots for s in stems)
    text = presets.get(preset).verified
    assert re.search(rf"\b{dots:,} dots\b", text), (dots, text)


@pytest.mark.parametrize("preset,rival,stems,quoted", RIVALS)
def test_the_rival_misses_quoted_in_the_provenance(preset, rival, stems, quoted):
    provenance = presets.get(preset).provenance
    assert [_misses(rival, s) for s in stems] == quoted
    for n in quoted:
        assert f"{n:,}" in provenance, (n, provenance)
