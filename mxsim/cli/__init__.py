"""The ``mxsim`` command line: one sub-command per verb, each a thin call into the library.

Exit codes: 0 success or agreement, 1 mismatches found, 2 bad input (one line, no traceback),
3 internal error (a bug in mxsim: one line, the traceback only under ``--debug``), 130
interrupted.

One module a group of verbs (``listing``, ``running``, ``quantizing``, ``gpus``, ``fitting``,
``rtl``, ``exploring``, ``torch_eval``), the parser in ``parser``, what they share in
``common``. Only these verbs import ``hdl``, ``testbenches`` and ``gpu`` (lazily, inside the verb).
"""

from __future__ import annotations

import os
import sys
import traceback

from ..errors import MxsimError
from .parser import build_parser

__all__ = ["main", "build_parser"]


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # --debug anywhere on the line: "rerun with --debug" should work however it is added.
    debug = "--debug" in argv
    argv = [a for a in argv if a != "--debug"]
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:       # --help, --version, or a usage error (already printed)
        return exc.code if isinstance(exc.code, int) else 2
    try:
        return args.func(args)
    except MxsimError as exc:
        print(f"mxsim: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("mxsim: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader went away (``mxsim ... | head``): nothing more to say, and not an error.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except MemoryError:
        print("mxsim: error: out of memory; use a smaller vector set or run on a machine with "
              "more memory", file=sys.stderr)
        return 2
    except Exception as exc:        # the last resort: a bug in mxsim, and never exit 1
        if debug:
            traceback.print_exc()
        lines = str(exc).strip().splitlines()
        what = lines[0][:200] if lines else ""
        print(f"mxsim: internal error: {type(exc).__name__}{': ' + what if what else ''} "
              f"(please report it; rerun with --debug for the traceback)", file=sys.stderr)
        return 3
