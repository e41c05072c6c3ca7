"""Regenerate ``tests/data/km/``: every GPU x format x output of Khattak & Mikaitis' real-GPU
data, imported with ``mxsim vectors import --layout km``.

    python -m gpu.peers.km_import --source
    /work/.mirror/north-numerical-computing+MATLAB-tensor-core/repo

``--source`` is a git repository of north-numerical-computing/MATLAB-tensor-core (a bare
mirror will do): its ``model_validation`` folder at ``--rev`` (default HEAD) is extracted
with ``git archive`` into a temporary folder and each ``model_validation/<GPU>/<fmt>`` folder
is imported once per result file (``d_<GPU>_fp32.txt``, ``d_<GPU>_fp16.txt``) into
``<GPU>_<fmt>_<out>.npz``; the C words of the sets imported with C = +0 go to
``evidence/fp8_fp32_c_files.npz``. Every set is kept whole (``--sample N`` keeps the first N
rows of the FP16/BF16/TF32 sets, with ``rows`` the rows kept and ``rows_in_source`` the
file's); the sha256 of every source file in ``meta`` pins what was imported. The data is
BSD-2-Clause, (c) Khattak & Mikaitis; mxsim commits it, imported, with this provenance.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tarfile
import tempfile
from io import BytesIO
from pathlib import Path

import numpy as np

from mxsim import vectors
from mxsim.errors import MxsimError
from mxsim.vectors import importers

__all__ = ["DATA", "EVIDENCE", "import_all", "SAMPLED"]

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "km"
#: The C words of the FP8 sets imported with C = +0 (H100/H200 FP32 output), kept as the
#: evidence that the rows were not computed with them (``<GPU>_<fmt>`` -> uint32 FP32 words).
EVIDENCE = DATA / "evidence" / "fp8_fp32_c_files.npz"
#: Operand formats whose sets are committed as a sample of their first rows.
SAMPLED = ("fp16", "bf16", "tf32")


def _extract(source: Path, rev: str, into: Path) -> str:
    """Extract ``model_validation`` of ``source`` at ``rev`` into ``into``; the commit hash."""
    git = ["git", f"--git-dir={source}"] if not (source / ".git").exists() else \
          ["git", "-C", str(source)]
    commit = subprocess.run([*git, "rev-parse", f"{rev}^{{commit}}"], check=True,
                            capture_output=True, text=True).stdout.strip()
    tar = subprocess.run([*git, "archive", "--format=tar", commit, "model_validation"],
                         check=True, capture_output=True).stdout
    with tarfile.open(fileobj=BytesIO(tar)) as tf:
        tf.extractall(into, filter="data")
    return commit


def _sample(vs: vectors.VectorSet, rows: int) -> vectors.VectorSet:
    """The first ``rows`` dots of an imported set, ``meta`` saying so."""
    extra = dict(vs.extra, rows=rows, rows_in_source=vs.extra["rows"],
                 notes=[*vs.extra["notes"], f"sample: the first {rows} of the "
                        f"{vs.extra['rows']} rows (re-derive the rest from the source files)"])
    return vs.replace(a=vs.a[:rows], b=vs.b[:rows], c=vs.c[:rows], d=vs.d[:rows], extra=extra)


def import_all(source: Path, out: Path, rev: str = "HEAD", sample: int = 0,
               only: tuple[str, ...] | None = None) -> list[Path]:
    """Import every GPU x format x output of the K&M data at ``source`` into ``out``; the
    files written. ``only`` keeps the operand formats named (all by default)."""
    written, c_files = [], {}
    with tempfile.TemporaryDirectory() as tmp:
        commit = _extract(source, rev, Path(tmp))
        mv = Path(tmp) / "model_validation"
        for folder in sorted(p for p in mv.glob("*/*") if p.is_dir()):
            fmt = importers.KM_FORMATS.get(folder.name.lower())
            if fmt is None or (only and fmt not in only):
                continue
            for d_format in ("fp32", "fp16"):
                if not list(folder.glob(f"d_*_{d_format}.txt")):
                    continue
                vs = importers.read_km(folder, d_format=d_format, commit=commit)
                if sample and fmt in SAMPLED and vs.extra["rows"] > sample:
                    vs = _sample(vs, sample)
                path = out / f"{vs.extra['gpu']}_{fmt}_{d_format}.npz"
                vectors.save(vs, path)
                written.append(path)
                if d_format == "fp32" and not vs.c.any():
                    c_files[f"{vs.extra['gpu']}_{fmt}"] = importers.km_rows(folder)["c"]
    if c_files:
        evidence = out / EVIDENCE.relative_to(DATA)
        evidence.parent.mkdir(exist_ok=True)
        np.savez_compressed(evidence, **c_files)
        written.append(evidence)
    return written


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m gpu.peers.km_import", description=__doc__.split(
        "\n\n")[0])
    ap.add_argument("--source", required=True, type=Path,
                    help="a git repository (or bare mirror) of MATLAB-tensor-core")
    ap.add_argument("--rev", default="HEAD", help="the revision to import (default: HEAD)")
    ap.add_argument("--out", type=Path, default=DATA, help="the folder to write")
    ap.add_argument("--sample", type=int, default=0,
                    help="rows kept of the FP16/BF16/TF32 sets (default: 0, all)")
    ap.add_argument("--only", default=None, help="comma list of operand formats to import")
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    try:
        written = import_all(args.source, args.out, args.rev, args.sample,
                             tuple(args.only.split(",")) if args.only else None)
    except (MxsimError, subprocess.CalledProcessError) as exc:
        print(f"km_import: error: {exc}", file=sys.stderr)
        return 2
    total = sum(p.stat().st_size for p in written)
    print(f"wrote {len(written)} sets to {args.out} ({total / 1e6:.2f} MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
