"""The ``mxsim`` command line: one sub-command per verb, each a thin call into the library.

Exit codes: 0 success or agreement, 1 mismatches found, 2 bad input (one line, no traceback),
3 internal error (a bug in mxsim: one line, the traceback only under ``--debug``), 130
interrupted (Ctrl-C); SIGTERM and SIGHUP are handled as Ctrl-C is and exit 143 and 129
(:func:`mxsim.errors.run_command`).

The core's verbs, one module a group (``listing``, ``running``, ``quantizing``, ``fitting``,
``torch_eval``, ``array``); the parser in ``parser``; what every verb shares in ``common``;
the registry in ``verbs``. The verbs that need RTL or a GPU are defined by the packages that
own that work (``hdl.cli``: rtl, explore; ``testbenches.cli``: verify, demo; ``gpu.cli``: gpu)
and registered through the ``mxsim.verbs`` entry points; ``fit --rtl`` reaches the testbenches
through ``mxsim.hooks``. This package never imports ``hdl``, ``testbenches`` or ``gpu``.
"""

from __future__ import annotations

import sys

from ..errors import run_parsed
from .parser import build_parser

__all__ = ["main", "build_parser"]


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # --debug anywhere on the line: "rerun with --debug" should work however it is added.
    debug = "--debug" in argv
    argv = [a for a in argv if a != "--debug"]
    verb = next((a for a in argv if not a.startswith("-")), None)
    return run_parsed(build_parser(verb), argv, lambda args: args.func(args), debug=debug)
