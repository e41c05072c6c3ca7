"""Every ``mxsim`` command in README.md's shell blocks runs as written.

The commands run in order, through a ``mxsim`` on PATH, in a temporary folder holding a copy
of the repository files they read (``examples/``, ``docs/sweeps/``), so that what one writes
the next can read. The few that need a GPU or minutes are run reduced, and each reduction is
listed in :data:`REDUCED` with the reason; a README command that is neither run nor listed
fails the test, and so does a listed command that is no longer in the README.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from gpu.cli import cmd_gpu_run
from hdl.cli import cmd_rtl_observe, rtl_unit
from mxsim import cli, spec, units, vectors
from mxsim.cli.common import map_formats
from testbenches.cli import cmd_verify, foreign_map

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"

#: Check the command line only: parse it and resolve what it names, without running it.
PARSE = "parse"

#: README command -> what the test runs instead (PARSE, or a reduced command), and why.
REDUCED = {
    # Generic synthesis of all 32 lanes takes ~4 min on 2 cores; 1 lane takes seconds.
    "mxsim rtl --unit blackwell-mxf8f6f4 --stats":
        "mxsim rtl --unit blackwell-mxf8f6f4 --stats --lanes 1",
    # Verilator builds the unit first (~2 min each); tests/testbenches/test_verify.py builds and
    # runs it.
    "mxsim verify --unit hopper-wgmma --a-format e5m2 --vectors 100000": PARSE,
    "mxsim verify --bulk --vectors 1000000": PARSE,
    # Your own RTL: tests/testbenches/foreign/test_foreign_cli.py runs both on example 1 (a
    # Verilator build each).
    "mxsim verify --rtl examples/rtl/mxfp8_coproc/mxfp8_coproc.toml --unit "
    "examples/rtl/mxfp8_coproc/mxfp8_coproc_spec.toml --bulk": PARSE,
    "mxsim fit --rtl examples/rtl/mxfp8_coproc/mxfp8_coproc.toml -o coproc.toml": PARSE,
    # Reads the probes fit --rtl wrote (parsed only, above); tests/testbenches/foreign/
    # test_observe.py runs it on example 5.
    "mxsim rtl observe examples/rtl/mxfp8_coproc/mxfp8_coproc.toml mxsim-fit/probes.npz -o "
    "coproc_out.npz --bulk": PARSE,
    # ~8 min of syntheses and accuracy runs; --check reads and checks every point.
    "mxsim explore docs/sweeps/alignment.toml -o results/alignment":
        "mxsim explore docs/sweeps/alignment.toml -o results/alignment --check",
    # Needs an NVIDIA Hopper GPU (the README says so).
    "mxsim gpu run --path mma-sync probe.npz -o gpu.npz": PARSE,
}

#: Commands that take the RTL extra's tools (Verilator, Yosys): the rtl-marked test runs them.
RTL_VERBS = ("rtl", "verify")

#: Repository folders the commands read, copied into the temporary folder.
INPUTS = ("examples", "docs/sweeps", "tests/data/h200_library_gemms")


def readme_commands() -> list[str]:
    """The ``mxsim`` command lines of README.md's ``sh`` blocks, comments stripped."""
    out = []
    for block in re.findall(r"```sh\n(.*?)```", README.read_text(), re.S):
        for line in block.splitlines():
            line = re.sub(r"\s+#.*$", "", line.strip())
            if line.startswith("mxsim "):
                out.append(line)
    return out


def _verb(command: str) -> str:
    return shlex.split(command)[1]


def _workdir(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    for rel in INPUTS:
        shutil.copytree(ROOT / rel, tmp_path / rel)
    bindir = tmp_path / ".bin"
    bindir.mkdir()
    shim = bindir / "mxsim"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m mxsim "$@"\n')
    shim.chmod(0o755)
    env = dict(os.environ, PATH=f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}",
               PYTHONPATH=str(ROOT), MXSIM_PROGRESS="0")
    return tmp_path, env


def _parse_only(command: str, cwd: Path) -> None:
    """The command line parses, and the unit, formats, micro-architecture, GPU path and input
    files it names exist: everything but the run."""
    argv = shlex.split(command)[1:]
    args = cli.build_parser().parse_args(argv)
    if args.func is cmd_rtl_observe:                         # a port map: checked, not run
        foreign_map(str(cwd / args.map), cwd / "ports")
    elif getattr(args, "rtl", None) is not None:            # a port map: checked, not run
        pm = foreign_map(str(cwd / args.rtl), cwd / "ports")
        a, b = map_formats(pm, args.a_format, args.b_format)
        if args.func is cmd_verify:
            pm.check_spec(units.get(str(cwd / args.unit)).spec_for_formats(a, b))
    elif args.func is cmd_verify:
        rtl_unit(args)
    elif args.func is cmd_gpu_run:
        from gpu.paths import get as get_path
        get_path(args.path)
        vectors.load(cwd / args.input)
    else:
        raise AssertionError(f"no parse-only check for {command!r}")


def _run(commands: list[str], tmp_path: Path) -> None:
    cwd, env = _workdir(tmp_path)
    for command in commands:
        todo = REDUCED.get(command, command)
        if todo == PARSE:
            _parse_only(command, cwd)
            continue
        p = subprocess.run(["bash", "-c", todo], cwd=cwd, env=env, capture_output=True,
                           text=True, timeout=600)
        assert "Traceback" not in p.stderr, (todo, p.stderr)
        # compare reports mismatches with exit 1 (the README's pairs differ on purpose).
        ok = (0, 1) if _verb(todo) == "compare" else (0,)
        assert p.returncode in ok, (todo, p.returncode, p.stderr[-2000:])


def test_readme_lists_only_commands_it_has():
    commands = readme_commands()
    assert len(commands) >= 15
    assert sorted(set(REDUCED) - set(commands)) == []


def test_readme_names_only_shipped_files():
    """Every repository path a README command reads is committed (examples/, docs/,
    tests/data/)."""
    for command in readme_commands():
        for word in shlex.split(command):
            if word.startswith(("examples/", "docs/", "tests/data/")) and "results" not in word:
                assert (ROOT / word).is_file(), (command, word)


def test_readme_commands_run(tmp_path):
    _run([c for c in readme_commands() if _verb(c) not in RTL_VERBS], tmp_path)
    # What the commands wrote holds what they said they would.
    out = vectors.load(tmp_path / "out.npz")
    mine = vectors.load(tmp_path / "mine.npz")
    assert out.inputs_equal(mine) and out.d is not None and mine.d is not None
    assert mine.extra["unit"] == "my-unit"
    fitted = spec.load(tmp_path / "fitted.toml")
    assert fitted.k == 32
    # `units --spec` wrote the preset's spec, loadable as a unit.
    mine_unit = units.get(str(tmp_path / "my_unit.toml"))
    assert mine_unit.spec_for_formats() == units.get("blackwell-mxf8f6f4").spec_for_formats("e4m3")


@pytest.mark.rtl
def test_readme_rtl_commands_run(tmp_path):
    _run([c for c in readme_commands() if _verb(c) in RTL_VERBS], tmp_path)
    assert (tmp_path / "mx_dot.v").read_text().startswith("// mx_dot: mxsim DotProductUnit")


def test_examples_are_what_make_examples_writes():
    p = subprocess.run([sys.executable, "examples/make_examples.py", "--check"], cwd=ROOT,
                       capture_output=True, text=True,
                       env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert p.returncode == 0, p.stderr


def test_example_h200_outputs_are_of_the_default_probe_suite():
    """`mxsim fit probe.npz examples/h200_mma_sync.npz` needs the same inputs as `mxsim
    probe -o probe.npz` writes."""
    from mxsim.probe import probe_suite
    gpu = vectors.load(ROOT / "examples" / "h200_mma_sync.npz")
    assert gpu.inputs_equal(probe_suite("fp8", k=32, seed=0))
    assert gpu.extra["path"] == "mma-sync" and gpu.extra["device"]["gpu"] == "NVIDIA H200"
    assert gpu.d is not None and np.asarray(gpu.d).size == 28672
