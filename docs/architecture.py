"""Draw the floors of docs/architecture.md from the code's own imports.

``python docs/architecture.py`` rewrites the block between the picture markers of
docs/architecture.md; with ``--check`` it leaves the page alone and exits 1, in one line, when
the page is stale. Either way it exits 1, one line a problem, where the picture would show a
lie: an import up a floor that no contract allows, a room with no docstring line, a room on no
floor.

A *room* is a package (a folder with ``__init__.py``) of ``[tool.importlinter] root_packages``,
at any depth, with the loose modules directly in it. A module that a layers contract names as a
floor member is a room of its own, and so is every loose module of a contract's container
(``mxsim.microarch.cycle``), which the contract must name. The *floors* are those of the layers
contracts
of pyproject.toml, top first; a contract with ``containers = ["mxsim"]`` puts its floors right
below the floor that holds ``mxsim``. A room stands on the floor of the longest member name that
is it or holds it (``mxsim.engine.fast`` on ``mxsim.engine``'s floor). Its imports are every
``import`` of its modules, absolute or relative, anywhere in the code (inside functions too),
each named by the room of the module it imports (``from p import n``: the module ``p.n`` where
there is one, else ``p``, as import-linter reads it).

Standard library only: the source is read with :mod:`ast`, never imported.
"""

import argparse
import ast
import re
import sys
import textwrap
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGE = Path("docs") / "architecture.md"
BEGIN = "<!-- picture: python docs/architecture.py -->"
END = "<!-- picture: end -->"
WIDTH = 100
NO_DOC = "(no docstring)"
NO_FLOOR = "(on no floor of the layers contracts)"
RERUN = "rerun python docs/architecture.py"


@dataclass(frozen=True)
class Import:
    """Where a room first imports another; ``allowed``: up a floor, and the contracts allow it."""

    module: str
    line: int
    allowed: bool


@dataclass
class Room:
    """A package and its loose modules, or a loose module that stands on a floor of its own."""

    name: str
    job: str = NO_DOC
    modules: list[str] = field(default_factory=list)
    imports: dict[str, Import] = field(default_factory=dict)

    def add(self, other: str, found: Import) -> None:
        """Note an import of room ``other``; one the contracts do not allow outranks one they do."""
        if other != self.name and (other not in self.imports
                                   or self.imports[other].allowed and not found.allowed):
            self.imports[other] = found


@dataclass
class Plan:
    """The rooms, the floors (each a label and its rooms, top first), each room's floor (its
    number from the top; rooms on no floor share the number below the last)."""

    rooms: dict[str, Room]
    floors: list[tuple[str, list[str]]]
    floor_of: dict[str, int]
    unplaced: list[str]


def _modules(root: Path, packages: list[str]) -> dict[str, Path]:
    """Every module of the packages, dotted name -> file; only folders with __init__.py."""
    found: dict[str, Path] = {}
    todo = [(root / p, p) for p in packages if (root / p / "__init__.py").is_file()]
    while todo:
        folder, name = todo.pop()
        found[name] = folder / "__init__.py"
        for path in folder.iterdir():
            if path.suffix == ".py" and path.stem != "__init__" and path.stem.isidentifier():
                found[f"{name}.{path.stem}"] = path
            elif (path / "__init__.py").is_file() and path.name.isidentifier():
                todo.append((path, f"{name}.{path.name}"))
    return found


def _members(layer: str) -> list[str]:
    """The member names of one layer: ``a | b`` and ``a : b``; ``(a)`` marks an optional one."""
    return [m.strip(" ()") for m in re.split(r"[|:]", layer) if m.strip(" ()")]


def _layers(config: dict) -> list[dict]:
    contracts = config.get("tool", {}).get("importlinter", {}).get("contracts", [])
    return [c for c in contracts if c.get("type") == "layers"]


def _floors(config: dict) -> list[tuple[str, list[str]]]:
    """(label, full member names) of every floor of the layers contracts, top first."""
    floors: list[tuple[str, list[str]]] = []
    for c in (c for c in _layers(config) if not c.get("containers")):
        floors += [(layer.strip(), _members(layer)) for layer in c["layers"]]
    for c in (c for c in _layers(config) if c.get("containers")):
        for container in c["containers"]:
            below = [(f"{container}: {layer.strip()}",
                      [f"{container}.{m}" for m in _members(layer)]) for layer in c["layers"]]
            at = next((i + 1 for i, (_, names) in enumerate(floors) if container in names),
                      len(floors))
            floors[at:at] = below
    return floors


def _pattern(name: str) -> str:
    """import-linter's module wildcards as a regex: ``*`` one name, ``**`` one or more."""
    parts = [{"*": r"[^.]+", "**": r"[^.]+(?:\.[^.]+)*"}.get(p, re.escape(p))
             for p in name.strip().split(".")]
    return r"\.".join(parts)


def _ignored(config: dict) -> re.Pattern:
    """The ``ignore_imports`` of the layers contracts, as one regex of "importer imported"."""
    pairs = [line.split("->") for c in _layers(config) for line in c.get("ignore_imports", [])]
    alternatives = [f"{_pattern(a)} {_pattern(b)}" for a, b in pairs] or ["(?!)"]
    return re.compile("|".join(f"(?:{x})" for x in alternatives))


def _room_of(module: str, modules: dict[str, Path], members: set[str],
             containers: set[str]) -> str:
    """The room a module belongs to: its package's, unless it stands on a floor of its own (a
    floor member, or a loose module of a contract's container, which the contract must name)."""
    parent = module.rpartition(".")[0]
    if module in members or parent in containers or modules[module].name == "__init__.py":
        return module
    return parent


def _known(name: str, modules: dict[str, Path]) -> str | None:
    """The longest prefix of a dotted name that is one of our modules, or None."""
    parts = name.split(".")
    for n in range(len(parts), 0, -1):
        if ".".join(parts[:n]) in modules:
            return ".".join(parts[:n])
    return None


def _imported(module: str, tree: ast.AST, modules: dict[str, Path]):
    """(module of ours, line) of every import in the tree, functions and branches included."""
    package = module if modules[module].name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([base] if base else []))
            # `from p import n` imports the module p.n where there is one, else p itself.
            names = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base
                     for a in node.names]
        else:
            continue
        for name in names:
            if (target := _known(name, modules)) is not None:
                yield target, node.lineno


def _job(tree: ast.Module) -> str:
    """The first line of a docstring, without the reST markup a plain text block does not need."""
    doc = ast.get_docstring(tree)
    if not doc or not doc.strip():
        return NO_DOC
    first, *rest = doc.strip().split("\n\n")[0].splitlines()
    # The first line should be a sentence (STYLE.md); where it is not, say that it goes on.
    line = first.strip() + (" ..." if rest and not first.rstrip().endswith(".") else "")
    line = re.sub(r":[\w:]+:`~?([^`]*)`", r"\1", line)
    return line.replace("``", "")


def build(root: Path = ROOT) -> Plan:
    """Read the tree at ``root``: its rooms, their jobs and imports, and the floors."""
    config = tomllib.loads((root / "pyproject.toml").read_text())
    packages = config.get("tool", {}).get("importlinter", {}).get("root_packages", [])
    floors, ignored = _floors(config), _ignored(config)
    members = {name for _, names in floors for name in names}
    containers = {x for c in _layers(config) for x in c.get("containers", [])}
    modules = _modules(root, packages)
    rooms: dict[str, Room] = {}
    for module in sorted(modules):
        name = _room_of(module, modules, members, containers)
        rooms.setdefault(name, Room(name)).modules.append(module)
    for module, path in sorted(modules.items()):
        tree = ast.parse(path.read_text(), filename=str(path))
        room = rooms[_room_of(module, modules, members, containers)]
        if module == room.name:
            room.job = _job(tree)
        for target, line in _imported(module, tree, modules):
            other = _room_of(target, modules, members, containers)
            # A contract does not place its container itself: importing the package one is
            # inside of (`from .. import __version__`) is up no floor of it.
            allowed = (ignored.fullmatch(f"{module} {target}") is not None
                       or other in containers and room.name.startswith(other + "."))
            room.add(other, Import(module, line, allowed))
    return _place(rooms, floors, containers)


def _place(rooms: dict[str, Room], floors: list[tuple[str, list[str]]],
           containers: set[str]) -> Plan:
    """Each room on the floor of the longest member name that is it or holds it; a room inside
    a container that its contract does not name stands on no floor."""
    floor_of: dict[str, int] = {}
    for name in rooms:
        best, member = len(floors), ""
        for i, (_, members) in enumerate(floors):
            for m in members:
                if (name == m or name.startswith(m + ".")) and len(m) > len(member):
                    best, member = i, m
        floor_of[name] = len(floors) if member in containers and member != name else best
    order = {m: k for _, members in floors for k, m in enumerate(members)}

    def key(name: str) -> tuple:
        members = floors[floor_of[name]][1] if floor_of[name] < len(floors) else []
        top = next((m for m in members if name == m or name.startswith(m + ".")), name)
        return order.get(top, len(order)), name

    placed = [(label, sorted((r for r in rooms if floor_of[r] == i), key=key))
              for i, (label, _) in enumerate(floors + [(NO_FLOOR, [])])]
    return Plan(rooms, [(label, names) for label, names in placed if names], floor_of,
                placed[-1][1])


LEGEND = ("Floors top to bottom (the layers contracts of pyproject.toml); a room imports only "
          "rooms on its floor or below. A room is a package with its loose modules, or a module "
          "on a floor of its own: its name -> the rooms it imports, top floor first; below, the "
          "first line of its docstring.")
MARKS = {"^": "^ marks an import up a floor that the contracts allow (an ignore_imports, or the "
              "package a contract's floors are inside of).",
         "!": "! marks an import up a floor that no contract allows (--check fails)."}


def _mark(plan: Plan, name: str, other: str) -> str:
    """"^" or "!" for an import up a floor (allowed by the contracts, or not), else ""."""
    if name in plan.unplaced or plan.floor_of[other] >= plan.floor_of[name]:
        return ""
    return "^" if plan.rooms[name].imports[other].allowed else "!"


def _imports(plan: Plan, name: str) -> str:
    """The rooms a room imports, top floor first, by root package: ``hdl mxsim.{spec errors}``."""
    groups: dict[str, list[str]] = {}
    for other in sorted(plan.rooms[name].imports, key=lambda r: (plan.floor_of[r], r)):
        groups.setdefault(other.partition(".")[0], []).append(other)
    words = []
    for root, names in groups.items():
        inside = [n for n in names if n != root]
        words += [_mark(plan, name, n) + n for n in names if n == root or len(inside) == 1]
        if len(inside) > 1:
            short = (_mark(plan, name, n) + n.removeprefix(root + ".") for n in inside)
            words.append(f"{root}.{{{' '.join(short)}}}")
    return " ".join(words)


def render(plan: Plan) -> str:
    """The picture: a line per floor, then per room its name and imports, and its job."""
    body: list[str] = []
    for label, names in plan.floors:
        body += ["", f"== {label} ".ljust(WIDTH, "=")]
        for name in names:
            room = plan.rooms[name]
            imports = _imports(plan, name)
            head = f"{name} -> {imports}" if imports else name
            body += textwrap.wrap(head, WIDTH, subsequent_indent=" " * (len(name) + 4),
                                  break_on_hyphens=False, break_long_words=False)
            body += textwrap.wrap(room.job, WIDTH, initial_indent="    ",
                                  subsequent_indent="    ")
    used = {m for n, r in plan.rooms.items() for o in r.imports if (m := _mark(plan, n, o))}
    legend = textwrap.wrap(" ".join([LEGEND] + [MARKS[m] for m in MARKS if m in used]), WIDTH)
    return "\n".join(legend + body) + "\n"


def problems(plan: Plan) -> list[str]:
    """One line for each thing the picture would get wrong: up a floor, no job, no floor."""
    found = []
    for name, room in sorted(plan.rooms.items()):
        if room.job == NO_DOC:
            found.append(f"{name} has no docstring line: give it a one-line docstring")
        if name in plan.unplaced:
            found.append(f"{name} stands on no floor: name it in a layers contract of "
                         "pyproject.toml")
            continue
        for other, where in sorted(room.imports.items()):
            if _mark(plan, name, other) == "!":
                found.append(f"{name} imports {other}, a floor up ({where.module}, line "
                             f"{where.line})")
    return found


def page(text: str, picture: str) -> str:
    """The page with the block between the markers replaced by the picture, fenced."""
    start, end = text.find(BEGIN), text.find(END)
    if start < 0 or end < start:
        raise SystemExit(f"{PAGE}: the markers {BEGIN} and {END} are missing")
    return f"{text[:start]}{BEGIN}\n```\n{picture}```\n{text[end:]}"


def main(argv: list[str] | None = None, root: Path = ROOT) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="exit 1 if the page is stale, leaving it alone")
    args = parser.parse_args(argv)
    plan = build(root)
    text = (root / PAGE).read_text()
    new = page(text, render(plan))
    status = 0
    if args.check and new != text:
        print(f"{PAGE} is stale: {RERUN}", file=sys.stderr)
        status = 1
    elif new != text:
        (root / PAGE).write_text(new)
    for line in problems(plan):
        print(f"docs/architecture.py: {line}", file=sys.stderr)
        status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
