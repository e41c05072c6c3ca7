"""explore sweeps the array: [array] keys, array keys in [grid] and [[point]], the tile order
in the accuracy spec, throughput from the array's closed form; old sweep files stay valid."""

import pytest

from mxsim import explore
from mxsim.array import analytic

BASE = """\
[unit]
preset = "blackwell-mxf8f6f4"
lanes = 8

[[workload]]
name = "w"
shape = [256, 512, 256]
sample = [4, 4]
"""


def _load(tmp_path, text):
    path = tmp_path / "s.toml"
    path.write_text(text)
    return explore.load(path)


def test_array_keys_in_grid_and_points_build_each_designs_array(tmp_path):
    sw = _load(tmp_path, BASE + """
[grid]
rows = [4, 8]
dataflow = ["os", "ws"]

[array]
cols = 8
interleave = 2
accumulators = "tmem"
tmem_ports = 8
a_bandwidth = 64
""")
    assert [(d.array.rows, d.array.dataflow.value) for d in sw.designs] == [
        (4, "os"), (4, "ws"), (8, "os"), (8, "ws")]
    for d in sw.designs:
        arr = d.array
        assert arr.unit is d.unit_spec and arr.microarch is d.microarch
        assert (arr.cols, arr.interleave, arr.a_buffer.bandwidth, arr.b_buffer.bandwidth) == (
            8, 2, 64, 256)
        assert arr.accumulators.kind.value == "tmem" and arr.accumulators.write_ports == 8
        # ws with tmem adds K-tiles of rows instructions in FP32: the engine's promotion
        if arr.dataflow.value == "ws":
            assert (d.spec.promote_every, d.spec.promote_rounding.value) == (arr.rows, "rne")
            assert d.unit_spec.promote_every is None
        else:
            assert d.spec is d.unit_spec and d.spec.promote_every is None
        tp = explore.throughput(d, sw.workloads[0])
        est = analytic.estimate(arr, 256, 512, 256)
        assert (tp["cycles"], tp["rows"], tp["dataflow"]) == (est.cycles, arr.rows,
                                                             arr.dataflow.value)


def test_an_old_sweep_file_is_still_valid(tmp_path):
    sw = _load(tmp_path, BASE + "\n[array]\nrows = 4\ncols = 4\nbandwidth = 64\n")
    arr = sw.designs[0].array
    assert (arr.rows, arr.cols, arr.dataflow.value, arr.a_buffer.bandwidth) == (4, 4, "os", 64)
    assert (sw.rows, sw.cols, sw.bandwidth) == (4, 4, 64.0)


@pytest.mark.parametrize("extra,line,msg", [
    ('[array]\ndataflow = "diagonal"\n', 11, "dataflow must be one of os, ws, is"),
    ('[array]\naccumulators = "sram"\n', 11, "accumulators must be one of registers, tmem"),
    ('[array]\nrows = 4\ninterleave = 0\n', 12, "interleave must be at least 1"),
    ('[array]\nbandwidth = 12.5\n', 11, "bandwidth must be a whole number"),
    ('[grid]\ncols = [4, 0]\n', 11, "cols must be at least 1"),
    ('[[point]]\ndataflow = "ws"\naccumulators = "tmem"\npromote_every = 2\n', 13,
     "point.promote_every: a ws array with tmem accumulators adds every K-tile"),
])
def test_bad_array_values_name_their_line(tmp_path, extra, line, msg):
    with pytest.raises(explore.SweepError) as e:
        _load(tmp_path, BASE + "\n" + extra)
    text = str(e.value)
    assert f"s.toml:{line}: " in text and msg in text and "\n" not in text, text


def test_the_docs_array_example_is_its_committed_results(tmp_path, monkeypatch):
    """docs/explore.md's example (d) is rendered from docs/explore/array/results.json; a
    changed figure is caught."""
    import sys
    from pathlib import Path
    root = Path(__file__).resolve().parents[3]
    sys.path.insert(0, str(root / "benchmarks"))
    try:
        import explore_array_figures as figs
    finally:
        sys.path.remove(str(root / "benchmarks"))
    assert figs.main(["--check"]) == 0
    assert (root / "docs" / "explore" / "array" / "array.png").stat().st_size > 10_000
    doc = tmp_path / "explore.md"
    doc.write_text(figs.DOC.read_text().replace("| e4m3 | os (any shape) | ",
                                                "| e4m3 | os (any shape) | 1", 1))
    monkeypatch.setattr(figs, "DOC", doc)
    assert figs.main(["--check"]) == 1


@pytest.mark.parametrize("fmt,rows,cols", [("e4m3", 8, 8), ("e2m1", 16, 32)])
def test_the_examples_stationary_arrays_are_timed_exactly_on_a_cut_gemm(fmt, rows, cols):
    """docs/explore.md (d) times its ws/is arrays by the closed form, exact there: on the
    example's own arrays, with the GEMM cut to 512 streamed rows, two outer tiles and two
    K-tiles, it equals the cycle model in cycles, stalls and traffic."""
    from pathlib import Path

    from mxsim.array import cycle
    sw = explore.load(Path(__file__).resolve().parents[3] / "docs" / "sweeps" / "array.toml")
    d = next(d for d in sw.designs if d.array.dataflow.value == "ws" and d.spec.a_format == fmt
             and (d.array.rows, d.array.cols) == (rows, cols))
    m, n, k = 512, 2 * cols, 2 * rows * 32
    est, run = analytic.estimate(d.array, m, n, k), cycle.simulate(d.array, m, n, k)
    assert est.exact and (est.cycles, est.stalls, est.traffic) == (run.cycles, run.stalls,
                                                                   run.traffic)
    assert analytic.estimate(d.array, 4096, 14336, 4096).exact
