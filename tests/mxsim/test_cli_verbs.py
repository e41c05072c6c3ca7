"""The verbs' registry (``mxsim.cli.verbs``): every verb in the help's order, the packages'
verbs read from the entry points or, where mxsim is not installed from this checkout, from
pyproject.toml; a verb whose extra is missing says so in one line; ``fit --rtl``'s hooks."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from cli_helpers import run

import testbenches.cli
import testbenches.foreign.characterise
from mxsim.cli import build_parser, verbs
from mxsim.cli.parser import CORE_VERBS
from mxsim.errors import MxsimError

ROOT = Path(__file__).resolve().parents[2]

#: ``mxsim --help``'s order of the verbs (tests/data/cli_help.txt).
HELP_ORDER = ["formats", "units", "rtl", "export-c", "verify", "prove", "explore", "vectors", "run",
              "compare", "explain", "invariance", "quantize", "torch-eval", "train-eval", "array",
              "probe", "fit", "gpu", "demo"]

RTL_HINT = "pip install -e '.[rtl]', or run `make demo`"
FORMAL_LINE = "prove needs the rtl,formal extra: pip install -e '.[rtl,formal]'"


@pytest.fixture(autouse=True)
def _read_again():
    """Each test reads the entry points as its sys.path and patches leave them."""
    verbs.entry_points.cache_clear()
    yield
    verbs.entry_points.cache_clear()


def _verb_names(parser: argparse.ArgumentParser) -> list[str]:
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return list(sub.choices)


def _values(table) -> dict[str, str]:
    return {name: ep.value for name, ep in table.items()}


def test_registry_lists_every_verb_in_help_order():
    registered = sorted([*CORE_VERBS, *verbs.plugin_verbs()], key=lambda v: v.rank)
    assert [v.name for v in registered] == HELP_ORDER
    assert _verb_names(build_parser()) == HELP_ORDER


def test_registry_each_plugin_verb_is_its_owners():
    owners = {v.name: v.add.__module__ for v in verbs.plugin_verbs()}
    assert owners == {"rtl": "hdl.cli", "explore": "hdl.cli", "verify": "testbenches.cli",
                      "demo": "testbenches.cli", "gpu": "gpu.cli",
                      "prove": "testbenches.formal.cli"}


def test_registry_refuses_a_name_twice():
    sub = argparse.ArgumentParser().add_subparsers()
    with pytest.raises(ValueError, match=r"^Verb names must be unique, not \['formats'\] twice$"):
        verbs.add_verbs(sub, [CORE_VERBS[0], CORE_VERBS[0]])


# -- where the table comes from -----------------------------------------------------------------

def _pyproject_group(group: str) -> dict[str, str]:
    with (ROOT / "pyproject.toml").open("rb") as fh:
        return tomllib.load(fh)["project"]["entry-points"][group]


@pytest.fixture(scope="module")
def built_metadata(tmp_path_factory) -> Path:
    """This checkout's metadata as setuptools writes it for an install (the dist-info)."""
    out = tmp_path_factory.mktemp("metadata")
    subprocess.run([sys.executable, "-c", "import sys; from setuptools import build_meta; "
                    "build_meta.prepare_metadata_for_build_wheel(sys.argv[1])", str(out)],
                   cwd=ROOT, check=True, capture_output=True)
    (dist_info,) = out.glob("mxsim-*.dist-info")
    return dist_info


def _installed(tmp_path: Path, dist_info: Path, checkout: Path, monkeypatch) -> None:
    """An editable install of ``checkout`` (its metadata first on sys.path)."""
    site = tmp_path / "site"
    target = site / dist_info.name
    target.mkdir(parents=True)
    for f in dist_info.iterdir():
        (target / f.name).write_bytes(f.read_bytes())
    (target / "direct_url.json").write_text(json.dumps(
        {"url": checkout.as_uri(), "dir_info": {"editable": True}}))
    monkeypatch.syspath_prepend(str(site))


@pytest.mark.parametrize("group", [verbs.VERBS_GROUP, verbs.HOOKS_GROUP])
def test_entry_points_of_this_checkout_installed_equal_the_pyproject(
        group, built_metadata, tmp_path, monkeypatch):
    monkeypatch.setattr(verbs, "_this_distribution", lambda: None)
    from_pyproject = verbs.entry_points(group)
    assert _values(from_pyproject) == _pyproject_group(group)
    monkeypatch.undo()
    verbs.entry_points.cache_clear()
    _installed(tmp_path, built_metadata, ROOT, monkeypatch)
    assert verbs._this_distribution() is not None
    from_metadata = verbs.entry_points(group)
    assert all(ep.dist is not None for ep in from_metadata.values())      # read from it
    assert _values(from_metadata) == _values(from_pyproject)
    assert {n: ep.load() for n, ep in from_metadata.items()} == \
        {n: ep.load() for n, ep in from_pyproject.items()}


def test_entry_points_of_another_checkout_are_not_read(built_metadata, tmp_path, monkeypatch):
    other = tmp_path / "other-checkout"
    other.mkdir()
    _installed(tmp_path, built_metadata, other, monkeypatch)
    assert metadata.distribution("mxsim").read_text("direct_url.json").find(
        other.as_uri()) >= 0
    assert verbs._this_distribution() is None
    table = verbs.entry_points(verbs.VERBS_GROUP)
    assert all(ep.dist is None for ep in table.values())                  # the pyproject's
    assert _values(table) == _pyproject_group(verbs.VERBS_GROUP)


def test_entry_points_without_any_install(monkeypatch):
    def absent(name):
        raise metadata.PackageNotFoundError(name)
    monkeypatch.setattr(verbs.metadata, "distribution", absent)
    assert verbs._this_distribution() is None
    assert _values(verbs.entry_points(verbs.VERBS_GROUP)) == \
        _pyproject_group(verbs.VERBS_GROUP)
    assert _verb_names(build_parser()) == HELP_ORDER


def test_entry_points_the_real_install_if_it_is_this_checkout():
    """After ``pip install -e .`` here, the installed metadata is what the loader reads."""
    if verbs._this_distribution() is None:
        pytest.skip("the installed mxsim is not this checkout")
    for group in (verbs.VERBS_GROUP, verbs.HOOKS_GROUP):
        assert _values(verbs.entry_points(group)) == _pyproject_group(group)


# -- a verb whose extra is missing --------------------------------------------------------------

def _without(monkeypatch, *modules: str) -> None:
    real = verbs.find_spec
    monkeypatch.setattr(verbs, "find_spec", lambda m: None if m in modules else real(m))


def _help(capsys, *argv: str) -> str:
    rc, out, err = run(capsys, *argv, "--help")
    assert rc == 0 and err == ""
    return out


HELPS = [(), ("rtl",), ("verify",), ("explore",), ("demo",), ("gpu",), ("gpu", "info"),
         ("formats",), ("fit",)]


def test_missing_extra_one_line_in_help(monkeypatch, capsys):
    monkeypatch.setenv("COLUMNS", "100")
    before = {argv: _help(capsys, *argv) for argv in HELPS}
    _without(monkeypatch, "amaranth")
    after = {argv: _help(capsys, *argv) for argv in HELPS}
    assert after[()] == before[()] + \
        f"rtl, verify and explore need the rtl extra: {RTL_HINT}; {FORMAL_LINE}\n"
    for verb in ("rtl", "verify", "explore"):
        assert after[(verb,)] == before[(verb,)] + \
            f"mxsim {verb} needs the rtl extra: {RTL_HINT}\n"
    for argv in HELPS[4:]:
        assert after[argv] == before[argv], argv


def test_missing_extra_refused_in_one_line(monkeypatch, capsys, tmp_path):
    _without(monkeypatch, "cocotb", "cocotb_tools")
    rc, out, err = run(capsys, "verify", "--out", tmp_path / "v", "--vectors", "10")
    assert (rc, out) == (2, "")
    assert err == ("mxsim: error: verify needs the rtl extra (cocotb and cocotb_tools are not "
                   f"installed): {RTL_HINT}\n")
    assert list(tmp_path.iterdir()) == []
    assert _help(capsys).endswith(f"verify needs the rtl extra: {RTL_HINT}\n")
    _without(monkeypatch, "amaranth")
    rc, out, err = run(capsys, "rtl", "-o", tmp_path / "unit.v")
    assert (rc, out) == (2, "")
    assert err == f"mxsim: error: rtl needs the rtl extra (amaranth is not installed): " \
                  f"{RTL_HINT}\n"
    assert list(tmp_path.iterdir()) == []


def test_plugins_import_without_amaranth_cocotb_torch(tmp_path):
    """A machine without the rtl extra or torch, and with no mxsim installed (the GPU
    machine's plain checkout): every help builds, gpu info runs, rtl is refused in one line."""
    code = (
        "import sys\n"
        "for m in ('amaranth', 'cocotb', 'cocotb_tools', 'torch'):\n"
        "    sys.modules[m] = None\n"
        "from importlib import metadata\n"
        "def absent(name):\n"
        "    raise metadata.PackageNotFoundError(name)\n"
        "metadata.distribution = absent\n"
        "metadata.entry_points = lambda **kw: ()\n"
        "import gpu.cli, hdl.cli, testbenches.cli\n"
        "from mxsim.cli import main\n"
        "print('rc', main(sys.argv[1:]), flush=True)\n")
    env = dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS="100")
    for argv in (["--help"], ["gpu", "info"], ["rtl", "--stats"]):
        proc = subprocess.run([sys.executable, "-c", code, *argv], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=120)
        out, err = proc.stdout, proc.stderr
        if argv == ["--help"]:
            assert out.endswith(f"rtl, verify and explore need the rtl extra: {RTL_HINT}; "
                                f"{FORMAL_LINE}\nrc 0\n"), out
            assert err == ""
        elif argv[0] == "gpu":
            assert out.startswith("device: none") and out.endswith("rc 0\n"), out + err
        else:
            assert out == "rc 2\n"
            assert err == f"mxsim: error: rtl needs the rtl extra (amaranth is not installed): " \
                          f"{RTL_HINT}\n"


# -- fit --rtl's hooks --------------------------------------------------------------------------

def test_fit_rtl_hooks_load():
    assert verbs.hook("characterise") is testbenches.foreign.characterise.characterise
    assert verbs.hook("foreign_map") is testbenches.cli.foreign_map


def test_hook_not_registered_one_line():
    with pytest.raises(MxsimError, match=r"^no 'nothing' in the mxsim.hooks entry "):
        verbs.hook("nothing")


def test_fit_rtl_without_the_testbenches_dependencies(monkeypatch, capsys, tmp_path):
    def hook(name):
        raise ModuleNotFoundError("No module named 'cocotb'", name="cocotb")
    monkeypatch.setattr(verbs, "hook", hook)       # what rtl_hooks calls
    rc, out, err = run(capsys, "fit", "--rtl", tmp_path / "map.toml", "--out", tmp_path / "w",
                       "-o", tmp_path / "fitted.toml")
    assert (rc, out) == (2, "")
    assert err == f"mxsim: error: fit --rtl needs the rtl extra (cocotb is not installed): " \
                  f"{RTL_HINT}\n"
