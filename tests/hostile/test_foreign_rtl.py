"""The hostile corpus for third-party RTL (issue 31, "found on a third-party MX unit through
``verify --rtl``", and D-FIT-FAMILIES): fitting a design whose NaN code is its own, the counts a
report prints, inputs a port map does not drive, ``--replay --waves``, and observed sets with
free-form ``families`` provenance.

Three Verilator builds serve every row, each made once in the module's shared folder (linked
into each row's folder as ``d``, so the rows' ``--out d/...`` all reach it): the bulk harness of
``mx_dot_nan`` (tests/data/foreign: mxsim's generated k = 8 unit behind a hand-written wrapper
whose NaN code and enable are inputs, so the maps' ``[tie]`` choose the NaN code without a
rebuild), and the bulk harness and cocotb testbench (with waveforms) of the fixtures top of
tests/data/rtl.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from corpus import ROOT, Case, check, params

from mxsim import spec as specs
from mxsim import units, vectors

pytestmark = pytest.mark.rtl
pytest.importorskip("cocotb")
pytest.importorskip("amaranth")

from testbenches.sim.backend import HANDSHAKE_LIMIT, VALUE_LIMIT  # noqa: E402

DATA = ROOT / "tests" / "data" / "foreign"
RTL = ROOT / "tests" / "data" / "rtl"
COPROC = ROOT / "examples" / "rtl" / "mxfp8_coproc"
BLOCK_DOT = ROOT / "examples" / "rtl" / "block_dot"
#: The map of mx_dot_nan (NaN code 0x7FC00000, enable held high), its sources in ``d/``.
NAN_MAP = (DATA / "mx_dot_nan.toml").read_text().replace(
    'sources = ["mx_dot.v", "mx_dot_nan.sv"]', 'sources = ["d/mx_dot.v", "d/mx_dot_nan.sv"]')


@pytest.fixture(scope="module")
def shared(tmp_path_factory, quick_cxx) -> Path:
    """The folder every row links as ``d``: mx_dot_nan.sv and the mx_dot.v it wraps,
    generated for k8_spec.toml, and the builds the rows make there (at -O0)."""
    from hdl import verilog
    from mxsim.microarch import MicroArch

    d = tmp_path_factory.mktemp("foreign-shared")
    shutil.copy(DATA / "mx_dot_nan.sv", d)
    text = verilog.generate(specs.load(DATA / "k8_spec.toml"), MicroArch(lanes=8, stages=1))
    (d / "mx_dot.v").write_text(text)
    return d


@pytest.fixture
def folder(tmp_path, shared) -> Path:
    (tmp_path / "d").symlink_to(shared)
    return tmp_path


# ---- setups and checks -------------------------------------------------------------------

def _nan_map(*edits: tuple[str, str], name: str = "m.toml") -> Callable[[Path], None]:
    """Write mx_dot_nan's map with ``edits`` (each made once) as ``name``."""
    def setup(t: Path) -> None:
        text = NAN_MAP
        for old, new in edits:
            assert text.count(old) == 1, old
            text = text.replace(old, new)
        (t / name).write_text(text)
    return setup


def _example_map(src: Path, *edits: tuple[str, str]) -> Callable[[Path], None]:
    """Write the example map ``src`` with ``edits`` as ``m.toml``, its sources absolute."""
    def setup(t: Path) -> None:
        text = src.read_text()
        for old, new in edits:
            assert text.count(old) == 1, old
            text = text.replace(old, new)
        text = re.sub(r'sources = \["([^"]+)"\]', lambda m: f'sources = ["{src.parent / m[1]}"]',
                      text)
        (t / "m.toml").write_text(text)
    return setup


def _fitted(code: int) -> Callable[[Path, object], None]:
    """fit --rtl found the design's NaN code: the spec written, and the observed outputs
    saved with that code on every NaN."""
    def after(t: Path, p) -> None:
        got = specs.load(t / "fitted.toml")
        assert got.nan_code == code and got.specials.value == "ieee", p.stdout
        observed = vectors.load(t / "d" / "out" / "observed.npz")
        d = observed.d.reshape(-1)
        nan = (d & 0x7F800000) == 0x7F800000
        nan &= (d & 0x007FFFFF) != 0
        assert nan.any() and set(np.unique(d[nan]).tolist()) == {code}
    return after


def _spec(name: str, frac_bits: str) -> Callable[[Path], None]:
    """An int8 x int8, k = 4 spec without scales, as ``name`` (the vr1 fixture sums exactly:
    ``frac_bits = 2`` misses most of its results)."""
    def setup(t: Path) -> None:
        (t / name).write_text(f'name = "{Path(name).stem}"\na_format = "int8"\n'
                              f'b_format = "int8"\nk = 4\nfrac_bits = {frac_bits}\n'
                              f'acc_format = "fp32"\nacc_rounding = "rne"\nd_format = "fp32"\n')
    return setup


TRUNC = _spec("trunc2.toml", "2")
EXACT = _spec("exact4.toml", '"none"')


def _both(*steps: Callable) -> Callable:
    """Each of ``steps`` (setups or checks) in turn."""
    def both(*args) -> None:
        for step in steps:
            step(*args)
    return both


def _replay_set(m: int, n: int) -> Callable[[Path], None]:
    """An int8, k = 4 set of m x n dot products for vr1, as ``in.npz``."""
    def setup(t: Path) -> None:
        vectors.save(vectors.generate("uniform", a_format="int8", b_format="int8", m=m, n=n,
                                      k=4, with_c=False, seed=1), t / "in.npz")
    return setup


def _late_vr1(t: Path) -> None:
    """vr1's map declaring latency 2 (the fixture's is 1): every result is early."""
    text = (RTL / "vr1.toml").read_text().replace("latency = 1", "latency = 2")
    (t / "late.toml").write_text(re.sub(r'"(\w+\.v)"', lambda m: f'"{RTL / m[1]}"', text))


_LINE = re.compile(r"^  mismatches  (\d+) value, (\d+) cycle .*; the JSON report lists (\d+) of "
                   r"the (\d+)\)$", re.M)


def _counts(kind: str, least: int, out: str = "fx",
            design: str = "vr1") -> Callable[[Path, object], None]:
    """The text report's counts are those of the JSON report verify wrote in ``d/out``, the
    true ones (more than the list holds: ``least``), and the text says how many it lists."""
    def after(t: Path, p) -> None:
        found = _LINE.search(p.stdout)
        assert found, p.stdout
        value, cyc, listed, total = (int(x) for x in found.groups())
        report, = (t / "d" / out).glob(f"report-{design}-*.json")
        rep = json.loads(report.read_text())
        assert (rep["value_mismatches"], rep["cycle_mismatches"]) == (value, cyc)
        assert value + cyc == total and listed == sum(
            "unlisted" not in m for m in rep["mismatches"])
        assert total == sum(m.get("unlisted", 1) for m in rep["mismatches"])
        assert (value if kind == "value" else cyc) > least
    return after


def _json_counts(t: Path, p) -> None:
    rep = json.loads(p.stdout)
    assert rep["value_mismatches"] == sum(m.get("unlisted", 1) for m in rep["mismatches"]
                                          if m["kind"] == "value") > VALUE_LIMIT
    # each chunk lists VALUE_LIMIT and closes its list with one entry for the rest of it
    closing = rep["mismatches"][VALUE_LIMIT]
    assert closing["chunk"] == 0 and closing["note"].endswith(
        f"more, not listed ({VALUE_LIMIT + closing['unlisted']} in all)")


def _waveform(t: Path, p) -> None:
    """The report names the waveform the cocotb run wrote, and it is there."""
    found = re.search(r"^  waveform    (\S+)$", p.stdout, re.M)
    assert found, p.stdout
    assert found[1].endswith((".vcd", ".fst")) and Path(found[1]).stat().st_size > 0


def _observed(families) -> Callable[[Path], None]:
    """An observed set (2 batch entries of 1 x 2 dots through hopper-wgmma, 3 outputs off by
    one bit, so the fit summarises misses) whose ``families`` provenance is ``families``."""
    def setup(t: Path) -> None:
        vs = vectors.generate_suite(["normal", "llm"], count=1, m=1, n=2, k=32, seed=0)
        vs = units.get("hopper-wgmma").run(vs)
        d = vs.d.copy()
        d.reshape(-1)[:3] ^= 1
        vectors.save(vs.replace(d=d, extra={**vs.extra, "families": families}), t / "obs.npz")
    return setup


def _families(first: str, third: str) -> Callable[[Path, object], None]:
    """The misses name a family only where the provenance does: dots (0,0,0) and (1,0,0)."""
    def after(t: Path, p) -> None:
        for idx, family in (("(0, 0, 0)", first), ("(1, 0, 0)", third)):
            assert f"  dot {idx}{f' [{family}]' if family else ''}: observed" in p.stdout, \
                p.stdout
    return after


# ---- the rows ----------------------------------------------------------------------------

FIT = ["fit", "--rtl", "{t}/m.toml", "-o", "{t}/fitted.toml", "--out", "{t}/d/out"]
VERIFY = ["verify", "--rtl", "{t}/m.toml", "--unit", str(DATA / "k8_spec.toml"), "--bulk",
          "--out", "{t}/d/out"]
VR1 = ["verify", "--rtl", str(RTL / "vr1.toml"), "--unit", "{t}/trunc2.toml"]
WHERE = "{t}/m.toml:2: mx_dot_nan has "
ENABLE = WHERE + ("input 'enable' that the map does not drive; map it, or hold it at a "
                  "constant under [tie] (e.g. enable = VALUE)")
NO_ENABLE = ("enable = 1\n", "")
NAN_CODE = "nan_code = 0x7FC00000"
NO_NAN_CODE = (NAN_CODE + "\n", "")
BUILD = 600.0                     # a row that may make one of the module's builds

CASES = [
    # fit --rtl of a design whose NaN is not 0x7FFFFFFF (StopIteration in miss_summaries, and
    # the design's outputs lost): the NaN code is fitted, the outputs saved first.
    Case("fit-rtl-nan/7fc00000", FIT, 0, "nan_code      = 0x7fc00000", setup=_nan_map(),
         after=_fitted(0x7FC00000), timeout=BUILD),
    Case("fit-rtl-nan/ffffffff", FIT, 0, "nan_code      = 0xffffffff",
         setup=_nan_map((NAN_CODE, "nan_code = 0xFFFFFFFF")), after=_fitted(0xFFFFFFFF),
         timeout=BUILD),
    # An input the map does not drive (left undriven, cocotb and bulk differed): refused, the
    # same for the bulk harness, cocotb and fit --rtl.
    Case("unmapped-input/clock-enable", VERIFY, 2, ENABLE, setup=_nan_map(NO_ENABLE),
         outputs=["d/out/report*"]),
    Case("unmapped-input/clock-enable-cocotb", [a for a in VERIFY if a != "--bulk"], 2, ENABLE,
         setup=_nan_map(NO_ENABLE)),
    Case("unmapped-input/clock-enable-fit", FIT, 2, ENABLE, setup=_nan_map(NO_ENABLE),
         outputs=["fitted.toml"]),
    Case("unmapped-input/data", VERIFY, 2, WHERE + "input 'nan_code' that the map does not "
         "drive; map it", setup=_nan_map(NO_NAN_CODE)),
    Case("unmapped-input/control", VERIFY, 2, WHERE + "input 'o__ready' that the map does not "
         "drive", setup=_nan_map(('out_ready = "o__ready"\n', ""))),
    Case("unmapped-input/two", VERIFY, 2, WHERE + "inputs 'enable', 'nan_code' that the map "
         "does not drive; map each, or hold them at a constant under [tie] (e.g. enable = "
         "VALUE)", setup=_nan_map(NO_ENABLE, NO_NAN_CODE)),
    Case("unmapped-input/example-out-ready", ["verify", "--rtl", "{t}/m.toml", "--unit",
                                              str(COPROC / "mxfp8_coproc_spec.toml"), "--bulk"],
         2, "{t}/m.toml:4: mxfp8_coproc has input 'out_ready' that the map does not drive",
         setup=_example_map(COPROC / "mxfp8_coproc.toml", ('out_ready = "out_ready"\n', ""))),
    Case("unmapped-input/example-format-port", ["verify", "--rtl", "{t}/m.toml", "--unit",
                                                str(BLOCK_DOT / "block_dot_spec_e4m3.toml")],
         2, "{t}/m.toml:5: block_dot has input 'fmt' that the map does not drive",
         setup=_example_map(BLOCK_DOT / "block_dot.toml",
                            ('[format]\nby = "port"\nname = "fmt"\nvalues = { int8 = 0, e4m3 = '
                             '1 }\n', ""), ("\nk = 128\n", '\nk = 128\na_format = "e4m3"\n'
                                                            'b_format = "e4m3"\n'))),
    Case("unmapped-input/tie-too-wide", VERIFY, 2, "{t}/m.toml:52: tie.enable: port 'enable' has "
         "1 bit; the map needs at least 2; fix the port or tie a value that fits",
         setup=_nan_map(("enable = 1", "enable = 2"))),
    Case("unmapped-input/tie-code-too-wide", VERIFY, 2, "{t}/m.toml:53: tie.nan_code: port "
         "'nan_code' has 32 bits; the map needs at least 33",
         setup=_nan_map((NAN_CODE, "nan_code = 0x17FC00000"))),
    Case("unmapped-input/tie-typo", VERIFY, 2, "{t}/m.toml:53: tie.enabel: port 'enabel' is not "
         "a port of mx_dot_nan; its ports: clk, rst, enable, nan_code",
         setup=_nan_map(("enable = 1\n", "enable = 1\nenabel = 1\n"))),
    Case("unmapped-input/tie-read-port", VERIFY, 2, "{t}/m.toml:53: port 'o__valid' is read and "
         "driven (tie.o__valid and handshake.out_valid)",
         setup=_nan_map(("enable = 1\n", "enable = 1\no__valid = 1\n"))),
    # Every count the report prints is the true count (it printed the capped list's length).
    Case("counts/value", [*VR1, "--bulk", "--vectors", "500", "--out", "{t}/d/fx"], 1,
         "result      FAIL", setup=TRUNC, after=_counts("value", VALUE_LIMIT), timeout=BUILD),
    Case("counts/json", [*VR1, "--bulk", "--vectors", "500", "--out", "{t}/d/fx", "--json"], 1,
         setup=TRUNC, after=_json_counts, timeout=BUILD),
    Case("counts/cycle", ["verify", "--rtl", "{t}/late.toml", "--unit", "{t}/exact4.toml",
                          "--bulk", "--vectors", "500", "--out", "{t}/d/fx"], 1,
         "result      FAIL", setup=_both(EXACT, _late_vr1),
         after=_counts("cycle", HANDSHAKE_LIMIT, design="late"), timeout=BUILD),
    # --replay --waves through cocotb names the waveform it wrote (it said "none"); its
    # counts are the true ones too.
    Case("replay-waves/cocotb", [*VR1, "--replay", "{t}/in.npz", "--waves", "--out",
                                 "{t}/d/fw"], 1, "result      FAIL",
         setup=_both(TRUNC, _replay_set(8, 8)),
         after=_both(_waveform, _counts("value", VALUE_LIMIT, "fw")), timeout=BUILD),
    Case("replay-waves/bulk", [*VR1, "--bulk", "--replay", "{t}/in.npz", "--out", "{t}/d/fx"],
         1, "waveform    none (this backend writes none; the replay line reruns the set "
            "through cocotb with --waves)", setup=_both(TRUNC, _replay_set(3, 3)),
         timeout=BUILD),
    # D-FIT-FAMILIES: exit 1 with the fit report, a family shown only where one is named.
    Case("D-FIT-FAMILIES/int", ["fit", "{t}/obs.npz", "-o", "{t}/fit.toml"], 1, "first misses:",
         setup=_observed(5), outputs=["fit.toml"], after=_families("", "")),
    Case("D-FIT-FAMILIES/dict", ["fit", "{t}/obs.npz", "-o", "{t}/fit.toml"], 1,
         "first misses:", setup=_observed({"normal": [0], "llm": [1]}), outputs=["fit.toml"],
         after=_families("", "")),
    Case("D-FIT-FAMILIES/nested", ["fit", "{t}/obs.npz", "-o", "{t}/fit.toml"], 1,
         "first misses:", setup=_observed([["normal"], ["llm"]]), outputs=["fit.toml"],
         after=_families("", "")),
    Case("D-FIT-FAMILIES/mixed", ["fit", "{t}/obs.npz", "-o", "{t}/fit.toml"], 1,
         "first misses:", setup=_observed(["normal", 1]), outputs=["fit.toml"],
         after=_families("normal", "")),
]


@pytest.mark.parametrize("case", params(CASES))
def test_foreign(case: Case, folder: Path) -> None:
    check(case, folder)


def test_characterise_saves_the_designs_outputs_before_the_fit(tmp_path, monkeypatch):
    """The observed outputs are the costly part (a simulation of the design): characterise
    saves them where fit --rtl asks (``keep``, the CLI's ``--out``/observed.npz, which the
    fit-rtl-nan rows read) before the fit starts, so they outlast whatever the fit does."""
    import mxsim.probe.fit
    from testbenches.foreign import characterise

    observed = units.get("hopper-wgmma").run(vectors.generate("normal", k=32, seed=0))

    def broken(*args, **kwargs):
        assert vectors.load(tmp_path / "observed.npz").inputs_equal(observed)
        probes = vectors.load(tmp_path / "probes.npz")      # the inputs alone, for fit IN OUT
        assert probes.inputs_equal(observed) and probes.d is None
        raise RuntimeError("a bug in the fit")

    monkeypatch.setattr(characterise, "probe_design", lambda *args, **kwargs: observed)
    monkeypatch.setattr(mxsim.probe.fit, "fit", broken)
    with pytest.raises(RuntimeError, match="a bug in the fit"):
        characterise.characterise(SimpleNamespace(k=32), "e4m3", "e4m3", tmp_path,
                                  keep=tmp_path / "observed.npz",
                                  keep_inputs=tmp_path / "probes.npz")
    assert np.array_equal(vectors.load(tmp_path / "observed.npz").d, observed.d)
