"""The architecture of docs/architecture.md, checked: sizes, private names, floors.

`make test` also runs `lint-imports` (the import-linter contracts in pyproject.toml: the floors
of DESIGN.md, no import cycles) and `ruff check` (complexity and statement counts); these tests
check what neither tool does.
"""

import ast
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("mxsim", "hdl", "testbenches", "gpu")
MAX_FUNCTION_LINES = 80
MAX_MODULE_LINES = 600

#: The named exceptions to the size limits (at most three), each justified in
#: docs/architecture.md: "path" for a module, "path::function" for a function.
EXCEPTIONS: dict[str, str] = {
    "mxsim/engine/_kernels.py::_step_loop": "the fast engine's compiled inner loop (numba)",
}


def _sources() -> list[Path]:
    return sorted(p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py"))


def _rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def _functions(tree: ast.AST, outer: tuple[str, ...] = ()):
    """(function node, names of the functions it is nested in, itself included)."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            yield node, outer + (node.name,)
            yield from _functions(node, outer + (node.name,))
        else:
            yield from _functions(node, outer)


def test_at_most_three_named_exceptions_and_each_still_needed():
    assert len(EXCEPTIONS) <= 3
    doc = (ROOT / "docs" / "architecture.md").read_text()
    for where in EXCEPTIONS:
        path, _, func = where.partition("::")
        assert f"`{where}`" in doc, f"{where} is not justified in docs/architecture.md"
        tree = ast.parse((ROOT / path).read_text())
        if func:
            sizes = [f.end_lineno - f.lineno + 1 for f, _ in _functions(tree) if f.name == func]
            assert sizes and max(sizes) > MAX_FUNCTION_LINES, f"{where} no longer needs it"


def test_no_function_over_80_lines():
    long = []
    for path in _sources():
        for f, chain in _functions(ast.parse(path.read_text())):
            lines = f.end_lineno - f.lineno + 1
            excepted = any(f"{_rel(path)}::{name}" in EXCEPTIONS for name in chain)
            if lines > MAX_FUNCTION_LINES and not excepted:
                long.append(f"{_rel(path)}::{'.'.join(chain)}: {lines} lines")
    assert long == []


def test_no_module_over_600_lines():
    long = [f"{_rel(p)}: {n} lines" for p in _sources()
            if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES
            and _rel(p) not in EXCEPTIONS]
    assert long == []


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _resolve(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".")
    base = base if is_package else base[:-1]
    base = base[:len(base) - node.level + 1]
    return ".".join(base + ([node.module] if node.module else []))


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def test_no_private_names_imported_across_modules():
    """`from x import _y` and `x._y` reach into another module's private names; a name
    another module needs is public. (Private *modules* are checked by lint-imports.)"""
    ours = {_module_name(p) for p in _sources()}
    found = []
    for path in _sources():
        me, is_pkg = _module_name(path), path.name == "__init__.py"
        tree = ast.parse(path.read_text())
        modules = {}                                   # local name -> one of our modules
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                source = _resolve(me, is_pkg, node)
                for alias in node.names:
                    full = f"{source}.{alias.name}"
                    if full in ours:
                        modules[alias.asname or alias.name] = full
                    elif source in ours and _private(alias.name) and source != me:
                        found.append(f"{_rel(path)}:{node.lineno} from {source} import "
                                     f"{alias.name}")
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name in ours and alias.asname:
                        modules[alias.asname] = alias.name
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and _private(node.attr)
                    and isinstance(node.value, ast.Name) and node.value.id in modules
                    and f"{modules[node.value.id]}.{node.attr}" not in ours):
                found.append(f"{_rel(path)}:{node.lineno} {node.value.id}.{node.attr}")
    assert found == []


def _contracts() -> list[dict]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return config["tool"]["importlinter"]["contracts"]


def test_every_mxsim_module_stands_on_a_floor():
    """import-linter checks the layers it is given; this checks that none is left out."""
    floors = next(c for c in _contracts() if c.get("containers") == ["mxsim"])
    named = {tail.strip(" ()") for layer in floors["layers"]
             for tail in layer.replace("|", ":").split(":")}
    top = {p.stem if p.suffix else p.name for p in (ROOT / "mxsim").iterdir()
           if (p.suffix == ".py" and p.stem != "__init__") or (p / "__init__.py").exists()}
    assert sorted(top - named) == []
    assert sorted(named - top) == []


def test_the_contracts_say_what_design_md_says():
    by_type = {}
    for c in _contracts():
        by_type.setdefault(c["type"], []).append(c)
    packages = [c for c in by_type["layers"] if "containers" not in c]
    assert [c["layers"] for c in packages] == [["testbenches | gpu", "hdl", "mxsim"]]
    assert by_type["independence"][0]["modules"] == ["mxsim.engine.reference",
                                                     "mxsim.engine.fast"]
    assert by_type["acyclic_siblings"][0]["ancestors"] == list(PACKAGES)
    core = next(c for c in by_type["forbidden"] if c["source_modules"] == ["mxsim"])
    assert {"amaranth", "cocotb", "hdl", "testbenches", "gpu"} <= set(core["forbidden_modules"])
