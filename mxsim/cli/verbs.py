"""The verbs of ``mxsim``: what registers one, and where the registrations are read from.

A verb is a :class:`Verb`. The core's verbs are listed in :mod:`mxsim.cli.parser`; a package
that owns work the core must not import (``hdl``'s RTL, ``testbenches``' simulations, ``gpu``'s
runners) defines its verbs in its own ``cli`` module and names them in the ``mxsim.verbs``
entry-point group of ``pyproject.toml``. A function the core calls by name without importing
its owner (``fit --rtl``'s ``characterise``) is an entry point of the ``mxsim.hooks`` group.

The groups are read once a process, from the installed metadata (``importlib.metadata``) when
the installed ``mxsim`` distribution is this very code (an installed copy, or an editable
install of this checkout) and has the group, and otherwise from the ``pyproject.toml`` beside
the package: a plain checkout run with ``PYTHONPATH=.`` (the GPU machine) has no metadata, an
editable install of *another* checkout must not lend this one its verbs, and an editable install
made before a group existed has none of it until it is made again. Entry points of other
distributions in these groups are read in both cases; a name mxsim already has stays mxsim's.

Each plugin module imports argparse and the core only, so every verb's help builds on any
machine. A verb whose extra is not installed (its modules found by
:func:`importlib.util.find_spec`, without importing them) keeps its help, which ends with one
line saying what to install (as does ``mxsim --help``), and running it is refused in one line.
"""

from __future__ import annotations

import argparse
import functools
import json
import tomllib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from importlib import metadata
from importlib.util import find_spec
from pathlib import Path
from types import MappingProxyType
from typing import Any
from urllib.parse import unquote, urlparse

from ..errors import MxsimError, Parser

__all__ = ["Verb", "VerbParser", "VERBS_GROUP", "HOOKS_GROUP", "install_hint", "entry_points",
           "plugin_verbs", "hook", "rtl_hooks", "add_verbs"]

VERBS_GROUP = "mxsim.verbs"
HOOKS_GROUP = "mxsim.hooks"

#: The checkout this module belongs to (where its pyproject.toml is, when it is a checkout).
_ROOT = Path(__file__).resolve().parents[2]

#: The extras that ``make demo`` installs (Makefile's .stamp-demo).
_MAKE_DEMO_EXTRAS = ("rtl", "fast")


def install_hint(extra: str) -> str:
    """How to install ``extra`` from a checkout, in a few words."""
    hint = f"pip install -e '.[{extra}]'"
    return hint + (", or run `make demo`" if extra in _MAKE_DEMO_EXTRAS else "")


@dataclass(frozen=True, kw_only=True)
class Verb:
    """One verb of ``mxsim``: its name, its place in ``mxsim --help`` and how to add it.

    Parameters
    ----------
    name : str
        The verb, as typed after ``mxsim``; the entry point that registers it has this name.
    rank : int
        Its place in ``mxsim --help``: verbs are added in increasing rank.
    add : callable
        ``add(subparsers) -> ArgumentParser``: adds the verb's sub-parser (with its ``func``
        default) to the verbs' sub-parsers and returns it. It imports nothing heavy.
    extra : str or None
        The optional dependency set (``pyproject.toml``'s ``optional-dependencies``) the verb
        needs, or None.
    modules : tuple of str
        The top-level modules of that extra the verb imports; the verb is refused, in one line,
        when one of them cannot be found.
    """

    name: str
    rank: int
    add: Callable[[Any], argparse.ArgumentParser]
    extra: str | None = None
    modules: tuple[str, ...] = ()

    def __post_init__(self):
        if self.modules and self.extra is None:
            raise ValueError(f"Verb {self.name!r} must name the extra of its modules, not None")

    def missing(self) -> tuple[str, ...]:
        """The modules of :attr:`modules` that are not installed here."""
        return tuple(m for m in self.modules if find_spec(m) is None)

    def refusal(self, missing: Iterable[str]) -> str:
        """The one line that refuses to run the verb without ``missing``."""
        gone = list(missing)
        return (f"{self.name} needs the {self.extra} extra ({_listed(gone)} "
                f"{'is' if len(gone) == 1 else 'are'} not installed): "
                f"{install_hint(self.extra or '')}")


class VerbParser(Parser):
    """A :class:`~mxsim.errors.Parser` whose help may end with one more line, :attr:`note`:
    what a verb (or, for ``mxsim``, the verbs) cannot run without here."""

    note: str | None = None

    def format_help(self) -> str:
        text = super().format_help()
        return text if self.note is None else f"{text}{self.note}\n"


# -- where the registrations are read from ------------------------------------------------------

def _this_distribution() -> metadata.Distribution | None:
    """The installed ``mxsim`` distribution if it is this code (an installed copy, or an
    editable install of this checkout), else None."""
    try:
        dist = metadata.distribution("mxsim")
    except metadata.PackageNotFoundError:
        return None
    here = Path(__file__).resolve()
    if Path(str(dist.locate_file("mxsim/cli/verbs.py"))).resolve() == here:
        return dist
    try:
        url = json.loads(dist.read_text("direct_url.json") or "{}")
    except ValueError:
        return None
    parsed = urlparse(url.get("url", ""))
    if not url.get("dir_info", {}).get("editable") or parsed.scheme != "file":
        return None
    # urllib.request brings http.client: imported only where a URL is to be read.
    from urllib.request import url2pathname
    checkout = Path(url2pathname(unquote(parsed.path)))
    return dist if (checkout / "mxsim" / "cli" / "verbs.py").resolve() == here else None


def _pyproject_table(group: str) -> dict[str, str]:
    """``[project.entry-points."<group>"]`` of the pyproject.toml beside the package (empty
    when there is none: an installed copy of another distribution's files)."""
    path = _ROOT / "pyproject.toml"
    if not path.is_file():
        return {}
    with path.open("rb") as fh:
        project = tomllib.load(fh).get("project", {})
    return dict(project.get("entry-points", {}).get(group, {}))


@functools.cache
def entry_points(group: str) -> Mapping[str, metadata.EntryPoint]:
    """The entry points of ``group`` by name: mxsim's own from the installed metadata when it
    is this code's and has the group, else from the pyproject.toml beside the package; then
    those of other distributions, under names mxsim does not use. Read once a process
    (``entry_points.cache_clear()`` reads again)."""
    dist = _this_distribution()
    # An install older than the group (an editable one made before it existed) has none:
    # the pyproject.toml beside the package, when there is one, is then the newer word.
    table = {ep.name: ep for ep in dist.entry_points.select(group=group)} if dist else {}
    if not table:
        table = {name: metadata.EntryPoint(name=name, value=value, group=group)
                 for name, value in _pyproject_table(group).items()}
    for ep in metadata.entry_points(group=group):
        if ep.dist is None or ep.dist.name != "mxsim":
            table.setdefault(ep.name, ep)
    return MappingProxyType(table)


def plugin_verbs() -> list[Verb]:
    """Every verb registered in the ``mxsim.verbs`` group, loaded (argparse only)."""
    found = []
    for name, ep in entry_points(VERBS_GROUP).items():
        verb = ep.load()
        if not isinstance(verb, Verb) or verb.name != name:
            raise TypeError(f"Entry point {name} = {ep.value!r} of {VERBS_GROUP} must name a "
                            f"Verb called {name!r}, not {verb!r}")
        found.append(verb)
    return found


def hook(name: str) -> Any:
    """The object the ``mxsim.hooks`` entry point ``name`` names, imported now (an ImportError
    when its module's dependencies are missing)."""
    ep = entry_points(HOOKS_GROUP).get(name)
    if ep is None:
        raise MxsimError(f"no {name!r} in the {HOOKS_GROUP} entry points of this mxsim; "
                         f"reinstall it from a complete checkout")
    return ep.load()


def rtl_hooks(what: str, *names: str) -> tuple[Any, ...]:
    """The ``mxsim.hooks`` entry points ``names`` that ``what`` (``"fit --rtl"``) needs from the
    testbenches, or one line saying the rtl extra (and which of its modules) is missing."""
    try:
        return tuple(hook(name) for name in names)
    except ImportError as exc:
        gone = f" ({exc.name} is not installed)" if exc.name else ""
        raise MxsimError(f"{what} needs the rtl extra{gone}: {install_hint('rtl')}") from None


# -- the parser ---------------------------------------------------------------------------------

def _refuse(parser: argparse.ArgumentParser, line: str) -> None:
    """Make ``parser`` (and any action parser under it) refuse to run, with ``line``."""
    def refuse(args: argparse.Namespace) -> int:
        raise MxsimError(line)

    parser.set_defaults(func=refuse)
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                _refuse(sub, line)


def add_verbs(sub: Any, verbs: Iterable[Verb]) -> str | None:
    """Add ``verbs`` to the sub-parsers ``sub`` in rank order; return the one line that
    ``mxsim --help`` ends with when some cannot run here (else None)."""
    verbs = sorted(verbs, key=lambda v: v.rank)
    names = [v.name for v in verbs]
    if len(set(names)) != len(names):
        twice = sorted({n for n in names if names.count(n) > 1})
        raise ValueError(f"Verb names must be unique, not {twice!r} twice")
    refused: dict[str, list[str]] = {}
    for verb in verbs:
        sp = verb.add(sub)
        missing = verb.missing()
        if missing:
            sp.note = f"mxsim {verb.name} needs the {verb.extra} extra: " \
                      f"{install_hint(verb.extra or '')}"
            _refuse(sp, verb.refusal(missing))
            refused.setdefault(verb.extra or "", []).append(verb.name)
    return "; ".join(f"{_listed(vs)} {'need' if len(vs) > 1 else 'needs'} the {extra} extra: "
                     f"{install_hint(extra)}" for extra, vs in refused.items()) or None


def _listed(names: list[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"
