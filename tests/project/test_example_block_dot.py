"""Example 2 (examples/rtl/block_dot): the hand-written combinational MXINT8/MXFP8 block dot,
driven through its port map like any foreign design, against its documented reference specs.

The bulk C++ harness runs a few thousand dots of every generator family per element format and
the cocotb test a few hundred; both must match the spec (group 32, reduce tree, e8m14 RNE
saturating) exactly in value. The INJECT_BUG build (its (t2 + t3) adder truncates) must fail
the same check with value mismatches, and only value mismatches. One Verilator build per
backend and design for the whole module.
"""

from pathlib import Path

import numpy as np
import pytest

from mxsim import spec as spec_mod
from mxsim import vectors
from testbenches.foreign.backend import ForeignBackend
from testbenches.foreign.bulk import ForeignBulkBackend
from testbenches.foreign.portmap import load
from testbenches.sim.backend import MismatchKind, Stimulus
from testbenches.unit.verify import failing_dots, minimal_set

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "rtl" / "block_dot"
SPECS = {f: spec_mod.load(EXAMPLE / f"block_dot_spec_{f}.toml") for f in ("int8", "e4m3")}
#: Every generator family that applies to a design without C.
FAMILIES = [f for f in vectors.FAMILIES if not f.startswith("c-")]
#: (m, n) of a batch entry: 4 x 4 dots of K = 128.
SIDE = 4


def vector_set(fmt: str, count: int, seed: int) -> vectors.VectorSet:
    """``count`` batch entries of every family, 16 dots each, K = 128, no C."""
    s = SPECS[fmt]
    return vectors.generate_suite(FAMILIES, count=count, seed=seed, a_format=fmt, m=SIDE,
                                  n=SIDE, k=s.k, scale_format=s.scale_format, block=s.block,
                                  with_c=False)


@pytest.fixture(scope="module")
def build_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("block_dot")


def built(backend, fmt: str, out: Path):
    """``backend`` built for the spec of ``fmt`` (the design is built once: the format is a
    port, so both specs share the build folder)."""
    backend.build(SPECS[fmt], None, out)
    return backend


@pytest.fixture(scope="module")
def bulk(build_dir):
    return ForeignBulkBackend(load(EXAMPLE / "block_dot.toml"))


@pytest.fixture(scope="module")
def bulk_bug(build_dir):
    return ForeignBulkBackend(load(EXAMPLE / "block_dot_bug.toml"))


@pytest.fixture(scope="module")
def cocotb(build_dir):
    return ForeignBackend(load(EXAMPLE / "block_dot.toml"))


@pytest.mark.parametrize("fmt", ["int8", "e4m3"])
def test_bulk_matches_the_spec(bulk, build_dir, fmt):
    vs = vector_set(fmt, count=16, seed=1)
    run = built(bulk, fmt, build_dir).run(vs, Stimulus.random(1), name=f"bulk-{fmt}")
    assert run.dots == vs.num_dots >= 2500
    assert run.mismatches == []
    res = run.results
    # The stimulus reaches what the tree does: NaN (codes and 0xFF scales), zero, subnormal
    # and saturated results, and normal results with a full 15-bit mantissa.
    assert res.nan.sum() > 0
    assert ((res.mant == 0) & ~res.nan).sum() > 0
    mag = np.abs(res.mant)
    assert ((mag >= 1 << 14) & (mag < 1 << 15)).sum() > vs.num_dots // 4
    normalised = (mag == 0) | (mag >= 1 << 14) | (res.exp == -140)
    assert normalised.all()               # one encoding per value, as the README says


@pytest.mark.parametrize("fmt", ["int8", "e4m3"])
def test_cocotb_matches_the_spec(cocotb, build_dir, fmt):
    vs = vector_set(fmt, count=2, seed=2)
    run = built(cocotb, fmt, build_dir).run(vs, Stimulus.random(2), name=f"cocotb-{fmt}")
    assert run.dots == vs.num_dots >= 300
    assert run.mismatches == []


@pytest.mark.parametrize("fmt", ["int8", "e4m3"])
def test_injected_bug_is_caught(bulk, bulk_bug, build_dir, fmt):
    vs = vector_set(fmt, count=4, seed=3)
    good = built(bulk, fmt, build_dir).run(vs, Stimulus.random(3), name=f"good-{fmt}")
    run = built(bulk_bug, fmt, build_dir).run(vs, Stimulus.random(3), name=f"bug-{fmt}")
    assert good.mismatches == []
    assert run.mismatches
    assert {m.kind for m in run.mismatches} == {MismatchKind.VALUE}
    # The listed dots are where the bug changed the design's output, and nowhere else.
    differ = set(np.nonzero((good.results.mant != run.results.mant)
                            | (good.results.exp != run.results.exp))[0])
    failing = failing_dots(run.mismatches, 1)
    assert failing and set(failing) <= differ
    # The failing dots alone, as verify keeps them (one 1 x 1 dot per batch entry), still fail:
    # every one of them.
    shrunk = minimal_set(vs, failing)
    again = bulk_bug.run(shrunk, Stimulus.random(3), name=f"bug-{fmt}-min")
    assert failing_dots(again.mismatches, 1) == list(range(len(failing)))
    assert again.dots == len(failing)
