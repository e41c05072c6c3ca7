"""What every verb shares: the one-line-error parser, argument types, output."""

from __future__ import annotations

import argparse
import json
import math
import os
from pathlib import Path
from typing import Any

from .. import vectors
from ..errors import MxsimError, Parser, printable

__all__ = ["Parser", "int_range", "add_verb", "add_allow_large", "add_campaign_executor",
           "out_dir", "emit", "engine_path", "refuse_unread", "map_formats", "spec_settings",
           "parse_scale"]


def int_range(lo: int, hi: int | None = None):
    """An argparse type: an integer from ``lo`` (to ``hi``)."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be an integer, not {text!r}") from None
        if value < lo or (hi is not None and value > hi):
            rule = f"at least {lo}" if hi is None else f"from {lo} to {hi}"
            raise argparse.ArgumentTypeError(f"must be {rule}, not {value}")
        return value
    parse.__name__ = "integer"
    return parse


def refuse_unread(*options: tuple[str, Any, bool, str]) -> None:
    """Refuse, in one line, an option that was given where the command would not read it: an
    option silently ignored is a user's mistake left unsaid.

    Each row is ``(flag, value, read, why)``: the option's value (None, or False for a flag,
    when it was not given), whether the command reads it as the other options stand, and why
    it does not (``"does not apply with --compare: it ..."``).
    """
    for flag, value, read, why in options:
        if value is not None and value is not False and not read:
            raise MxsimError(f"{flag} {why}; leave it out")


def add_verb(sub: Any, name: str, func, help: str,
             json_flag: bool = True) -> argparse.ArgumentParser:
    """The sub-parser of a verb whose help line is its description, running ``func``, with
    ``--json`` first unless ``json_flag`` is False."""
    sp = sub.add_parser(name, help=help, description=help)
    sp.set_defaults(func=func)
    if json_flag:
        sp.add_argument("--json", action="store_true", help="print JSON instead of text")
    return sp


def add_allow_large(sp: argparse.ArgumentParser) -> None:
    sp.add_argument("--allow-large", action="store_true",
                    help=f"accept vector sets over {vectors.LARGE_BYTES >> 20} MiB of arrays or "
                         f"2^{vectors.LARGE_PRODUCTS.bit_length() - 1} products (dots x K) "
                         f"(default: refuse them, see docs/vectors.md)")


def add_campaign_executor(sp: argparse.ArgumentParser) -> None:
    """Where a ``--campaign``'s tasks run and are stored: the options of ``verify`` and
    ``fit`` (mxsim.campaign's executors)."""
    sp.add_argument("--workers", type=int_range(1), default=None, metavar="N",
                    help="with --campaign: local workers, on Dask or (without Dask) a process "
                         "pool (default: one per core)")
    sp.add_argument("--scheduler", default=None, metavar="ADDR",
                    help="with --campaign: a running Dask scheduler, tcp://HOST:PORT")
    sp.add_argument("--cluster-spec", default=None, metavar="FILE",
                    help="with --campaign: a dask-jobqueue cluster (docs/campaigns.md)")
    sp.add_argument("--store", default=None, metavar="DIR",
                    help="with --campaign: the result store (default: OUT/store)")


def out_dir(path: str | os.PathLike) -> Path:
    """An output folder, created if need be, or a one-line MxsimError."""
    p = Path(path)
    try:
        p.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise MxsimError(f"{path}: cannot create the output folder ({exc.strerror or exc})") \
            from None
    return p


def emit(args: argparse.Namespace, text: str, data: Any) -> None:
    """Print ``data`` as JSON with ``--json``, else ``text``: every verb's output.

    The JSON is strict (RFC 8259): a NaN or infinite float, which has no JSON spelling, is
    written as ``null`` (as ``jq`` and JavaScript write it), and text is ASCII with ``\\u``
    escapes. In ``text``, whatever is not printable but the line breaks and tabs the verb laid
    out is escaped (see :func:`~mxsim.errors.printable`): values read from files may hold
    anything. A value that may hold a line break is escaped by the verb before it lays out
    ``text``.
    """
    if getattr(args, "json", False):
        print(json.dumps(_strict(data), indent=2, default=str, allow_nan=False))
    else:
        print("\n".join(printable(line, keep="\t") for line in text.split("\n")))


def _strict(data: Any) -> Any:
    """``data`` with every non-finite float (in lists, tuples and dicts) replaced by None."""
    if isinstance(data, float):
        return data if math.isfinite(data) else None
    if isinstance(data, dict):
        return {k: _strict(v) for k, v in data.items()}
    if isinstance(data, list | tuple):
        return [_strict(v) for v in data]
    return data


def engine_path(spec) -> dict:
    """Which of the fast engine's paths computes ``spec`` (what run, verify and explore say)."""
    from ..engine import fast
    return fast.path(spec)


def map_formats(pm, a_format: str | None, b_format: str | None) -> tuple[str, str]:
    """The element formats a run of the design behind the port map ``pm`` uses (``verify
    --rtl``, ``fit --rtl``): the map's fixed ones, or the ones ``--a-format``/``--b-format``
    choose among the values of its format select."""
    a = a_format or pm.a_format
    if a is None:
        raise MxsimError(f"{pm.path}: the design's element format is selected by "
                         f"{pm.format_select.by} {pm.format_select.name!r}; choose one with "
                         f"--a-format ({', '.join(pm.format_select.values)})")
    return a, b_format or (pm.b_format if a_format is None and pm.b_format else a)


def spec_settings(texts: list[str]) -> dict[str, object]:
    """``--set FIELD=VALUE`` arguments as {field: value}, each value as a spec file spells it
    (an integer, hexadecimal too, ``none``, ``true``/``false``, a word), as ``verify --rtl
    --set`` reads them; MxsimError for one that is not FIELD=VALUE or names no field of a unit
    spec."""
    from dataclasses import fields

    from ..spec import UnitSpec
    names = {f.name for f in fields(UnitSpec)} - {"name", "provenance"}
    out: dict[str, object] = {}
    for text in texts:
        name, eq, value = text.partition("=")
        if not eq or not name or not value:
            raise MxsimError(f"--set takes FIELD=VALUE (e.g. acc_rounding=rd), not {text!r}")
        if name not in names:
            raise MxsimError(f"--set: {name!r} is not a field of a unit spec; docs/units.md "
                             f"lists them")
        words = {"none": None, "true": True, "false": False}
        try:
            out[name] = words[value] if value in words else int(value, 0)
        except ValueError:
            out[name] = value
    return out


def parse_scale(text: str | None) -> tuple[str | None, int | None] | None:
    """``--scale``'s ``FMT/BLOCK`` (``none``: no scales) as ``(scale_format, block)``;
    MxsimError (one line) for anything else."""
    if text is None:
        return None
    if text.strip().lower() == "none":
        return (None, None)
    fmt, _, block = text.strip().lower().partition("/")
    if not block.isdigit():
        raise MxsimError(f"--scale must be FMT/BLOCK (e.g. ue4m3/16) or none, not {text!r}")
    return fmt, int(block)
