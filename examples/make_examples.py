"""Write the example files the README's commands name (run from the repository root).

    python examples/make_examples.py [--check]

* ``x.npy``: a 16 x 256 float32 activation-like array (normal, with a few outliers 30x the
  rest, seed 0) for ``mxsim quantize``.
* ``my_unit.toml``: ``mxsim units --spec blackwell-mxf8f6f4`` with 16 fraction bits in the
  aligner instead of 25 (``frac_bits = 16``), renamed ``my-unit``: a unit spec of your own.
* ``h200_mma_sync.npz`` is not made here: it is what an H200 returned for
  ``mxsim gpu run --path mma-sync`` on ``mxsim probe``'s default suite (a copy of
  ``tests/data/h200/probe_fp8_mma-sync.npz``), for ``mxsim fit`` on a machine without a GPU.

``--check`` writes nothing and exits 1 when a committed file differs from what this script
makes (tests/project/test_readme.py runs the same comparison).
"""

from __future__ import annotations

import argparse
import io
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent


def x_npy() -> bytes:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((16, 256)).astype(np.float32)
    x[rng.integers(0, 16, 8), rng.integers(0, 256, 8)] *= 30      # outliers, as in LLM layers
    buf = io.BytesIO()
    np.save(buf, x)
    return buf.getvalue()


def my_unit_toml() -> bytes:
    from mxsim import presets

    spec = presets.get("blackwell-mxf8f6f4").spec("e4m3", "e4m3", scale_format="e8m0",
                                                  block=32)
    mine = spec.replace(name="my-unit", frac_bits=16,
                        provenance="example: blackwell-mxf8f6f4 with F = 16 instead of 25")
    head = ("# A unit spec of your own: `mxsim units --spec blackwell-mxf8f6f4` with 16 fraction\n"
            "# bits in the aligner instead of 25. Run it: mxsim run --unit examples/my_unit.toml "
            "IN.npz -o OUT.npz\n")
    return (head + mine.dumps("toml")).encode()


FILES = {"x.npy": x_npy, "my_unit.toml": my_unit_toml}


def same(path: Path, data: bytes) -> bool:
    """Whether ``path`` holds ``data`` (for .npy: the same array, header aside)."""
    if not path.is_file():
        return False
    if path.suffix == ".npy":
        a, b = np.load(path), np.load(io.BytesIO(data))
        return a.dtype == b.dtype and np.array_equal(a, b)
    return path.read_bytes() == data


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--check", action="store_true", help="compare, write nothing")
    args = p.parse_args()
    stale = []
    for name, make in FILES.items():
        data, path = make(), HERE / name
        if args.check:
            if not same(path, data):
                stale.append(name)
        else:
            path.write_bytes(data)
            print(f"wrote {path}")
    if stale:
        print(f"out of date: {', '.join(stale)}; run python examples/make_examples.py",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
