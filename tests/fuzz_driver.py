"""Run many ``mxsim`` command lines in one process and record what each did.

Used by ``tests/project/test_fuzz_cli.py``, which starts this script under an address-space limit
(``ulimit -v``) and a timeout: ``python tests/fuzz_driver.py CASES.json RESULTS.json``.

Each case is ``{"id", "argv", "cwd", "fifos"}``: the driver makes the folder ``cwd`` with a
FIFO per name in ``fifos``, runs ``mxsim.cli.main(argv)`` there with stdout and stderr
captured, and records the exit status, stderr, the files that appeared, any temporary file
left, and whether a FIFO stopped being one. Starting one Python per case would cost a second
each; running them here costs milliseconds, so the suite can afford hundreds.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import stat
import sys
import time
import traceback
import warnings

CASE_SECONDS = 60     # one case running longer than this is a failure of its own


class CaseTimeout(BaseException):
    """Raised by the alarm; a BaseException, so mxsim's last-resort handler lets it through."""


def _alarm(signum, frame):
    raise CaseTimeout


def _snapshot(folder: str) -> dict[str, str]:
    """Relative path -> kind ('dir', 'file', 'fifo', 'other') of everything under folder."""
    out = {}
    for root, dirs, files in os.walk(folder):
        for name in dirs + files:
            path = os.path.join(root, name)
            mode = os.lstat(path).st_mode
            kind = ("dir" if stat.S_ISDIR(mode) else "file" if stat.S_ISREG(mode) else
                    "fifo" if stat.S_ISFIFO(mode) else "link" if stat.S_ISLNK(mode) else
                    "other")
            out[os.path.relpath(path, folder)] = kind
    return out


def run_case(case: dict) -> dict:
    from mxsim.cli import main

    cwd = case["cwd"]
    os.makedirs(cwd, exist_ok=True)
    for name in case.get("fifos", []):
        os.mkfifo(os.path.join(cwd, name))
    before = _snapshot(cwd)
    home = os.getcwd()
    out, err = io.StringIO(), io.StringIO()
    rc, escaped = None, None
    t0 = time.perf_counter()
    os.chdir(cwd)
    signal.alarm(CASE_SECONDS)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), \
                warnings.catch_warnings():
            warnings.simplefilter("default")            # a warning is printed, not raised
            rc = main(list(case["argv"]))
    except CaseTimeout:
        escaped = f"did not finish in {CASE_SECONDS} s"
    except BaseException:                              # noqa: BLE001 - recorded, then judged
        escaped = traceback.format_exc()
    finally:
        signal.alarm(0)
        os.chdir(home)
    after = _snapshot(cwd)
    return {
        "id": case["id"], "argv": case["argv"], "rc": rc, "escaped": escaped,
        "stdout": out.getvalue()[-2000:], "stderr": err.getvalue()[-4000:],
        "seconds": round(time.perf_counter() - t0, 3),
        "new_files": sorted(p for p, k in after.items() if p not in before and k != "dir"),
        "tmp_files": sorted(p for p in after if p.endswith(".tmp")),
        "changed": sorted(p for p, k in before.items() if after.get(p) != k),
    }


def main(cases_path: str, results_path: str) -> int:
    signal.signal(signal.SIGALRM, _alarm)
    with open(cases_path) as fh:
        cases = json.load(fh)
    # One JSON line per case, written as it ends: a crash of the whole driver (the memory
    # limit, the timeout) still leaves what it did, and the case it died in is the next one.
    with open(results_path, "w") as fh:
        for case in cases:
            fh.write(json.dumps(run_case(case)) + "\n")
            fh.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
