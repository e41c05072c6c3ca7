"""Seconds each test file took in a whole-suite run, for the order the suite runs its files in.

    .venv/bin/python -m pytest -n 2 --dist loadfile --durations=0 -q > LOG
    python tests/file_durations.py LOG         # writes tests/file_durations.json

``make test`` hands whole files to its two workers in collection order (``--dist loadfile``);
conftest.py puts the longest files first, so that no long file starts last and runs alone
while the other worker idles. The figures only order the files: a file not listed runs after
the listed ones, a stale figure only costs balance.
"""

from __future__ import annotations

import collections
import json
import re
import sys
from pathlib import Path

OUT = Path(__file__).with_suffix(".json")
_LINE = re.compile(r"\s*([\d.]+)s (?:call|setup|teardown)\s+([^:\s]+)::")


def main(log: str) -> int:
    per_file: collections.Counter[str] = collections.Counter()
    try:
        text = Path(log).read_text()
    except (OSError, UnicodeDecodeError) as exc:
        print(f"error: cannot read {log} ({exc.strerror if isinstance(exc, OSError) else exc}); "
              "give the log of a pytest run with --durations=0", file=sys.stderr)
        return 2
    for line in text.splitlines():
        m = _LINE.match(line)
        if m:
            per_file[m.group(2)] += float(m.group(1))
    if not per_file:
        print(f"error: {log} has no --durations=0 lines; run pytest with --durations=0",
              file=sys.stderr)
        return 2
    OUT.write_text(json.dumps({f: round(s, 1) for f, s in per_file.most_common()}, indent=0)
                   + "\n")
    print(f"wrote {OUT}: {len(per_file)} files, {sum(per_file.values()):.0f} s in all")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print("usage: python tests/file_durations.py LOG", file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1]))
