"""``mxsim export-c``: a unit's arithmetic as a C99 library and a SystemVerilog DPI package.

- :mod:`.c`: the spec as C data and its typed API (``PREFIX.h``, ``PREFIX.c``);
- :mod:`.sv`: the DPI-C glue (``PREFIX_dpi.c``) and package (``PREFIX_pkg.sv``);
- ``core/``: ``mxsim_dot.h``/``mxsim_dot.c``, the C engine every exported unit shares;
- :mod:`.build`: compile an export strictly and run it through ctypes;
- :mod:`.check`: hold a compiled export equal to the engines.

:func:`export` writes all six files of one spec into a folder.
"""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path

from ..errors import MxsimError
from ..spec import UnitSpec
from .c import check_exportable, default_prefix, provenance_comment, unit_files
from .sv import dpi_files

__all__ = ["default_prefix", "unit_files", "check_exportable", "export", "files_of",
           "CORE_FILES"]

#: The shared C engine, copied beside every export.
CORE_FILES = ("mxsim_dot.h", "mxsim_dot.c")


def files_of(spec: UnitSpec, prefix: str | None = None, *, source: str,
             k_exact: int | None = None) -> dict[str, str]:
    """Every file of the export of ``spec``: name -> text (nothing written). ``k_exact``: the
    instruction K the API gives the exact unit (default: 32, or its block if larger)."""
    prefix = prefix or default_prefix(spec)
    check_exportable(spec, prefix)
    if k_exact is None:
        k_exact = max(32, spec.block or 1)
    if spec.exact and (k_exact < 1 or (spec.block and k_exact % spec.block)):
        raise MxsimError(f"--k {k_exact}: the exact unit's instruction K must be a positive "
                         f"multiple of its block ({spec.block})")
    core = resources.files(__package__) / "core"
    out = {name: (core / name).read_text() for name in CORE_FILES}
    out.update(unit_files(spec, prefix, source=source, k_exact=k_exact))
    out.update(dpi_files(spec, prefix, provenance_comment(spec, source), k_exact))
    return out


def export(spec: UnitSpec, folder: str | os.PathLike, prefix: str | None = None, *,
           source: str, k_exact: int | None = None) -> list[Path]:
    """Write the export of ``spec`` into ``folder`` (created if need be); the paths written.

    Every file is made before any is written, and each is written whole (a temporary name,
    then renamed), so a refused spec or a full disk leaves no half-written export."""
    texts = files_of(spec, prefix, source=source, k_exact=k_exact)
    out = Path(folder)
    try:
        out.mkdir(parents=True, exist_ok=True)
        temps = []
        for name, text in texts.items():
            tmp = out / f".{name}.tmp"
            tmp.write_text(text)
            temps.append((tmp, out / name))
        for tmp, final in temps:
            os.replace(tmp, final)
    except OSError as exc:
        for name in texts:
            try:
                (out / f".{name}.tmp").unlink(missing_ok=True)
            except OSError:
                pass
        raise MxsimError(f"{folder}: cannot write the export ({exc.strerror or exc})") from None
    return [out / name for name in texts]
