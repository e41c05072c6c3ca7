"""Every verb's ``--help``: it prints (a tuple metavar once made ``mxsim array --help`` a
traceback), and it reads as recorded in ``tests/data/cli_help.txt``, so a restructuring that
changes what a user sees shows up as a diff. Rewrite the record after a deliberate change:
``python tests/mxsim/test_cli_help.py``."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import pytest

from mxsim.cli import build_parser, main

RECORD = Path(__file__).parents[1] / "data" / "cli_help.txt"


def _verbs(p: argparse.ArgumentParser, path: tuple[str, ...] = ("mxsim",)):
    yield path, p
    for action in p._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _verbs(sub, path + (name,))


def helps() -> str:
    """The help of mxsim and of every verb and action, at 100 columns."""
    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "100"
    try:
        return "".join(f"==== {' '.join(path)}\n{p.format_help()}\n"
                       for path, p in _verbs(build_parser()))
    finally:
        if old is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = old


VERBS = [path[1:] for path, _ in _verbs(build_parser())]


@pytest.mark.parametrize("verb", VERBS, ids=lambda v: " ".join(v) or "mxsim")
def test_every_verb_help_prints(verb, capsys):
    assert main([*verb, "--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: mxsim")


def test_the_help_reads_as_recorded():
    assert helps() == RECORD.read_text(), \
        "the CLI's help changed: if deliberately, rewrite it: python tests/mxsim/test_cli_help.py"


if __name__ == "__main__":
    RECORD.write_text(helps())
    print(f"wrote {RECORD} ({len(VERBS)} verbs)", file=sys.stderr)
