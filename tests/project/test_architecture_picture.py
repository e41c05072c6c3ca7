"""The floors of docs/architecture.md, drawn by docs/architecture.py from the code's imports."""

import importlib.util
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _load():
    """docs/architecture.py as a module (docs/ is a folder of pages, not a package)."""
    spec = importlib.util.spec_from_file_location("architecture_picture",
                                                  ROOT / "docs" / "architecture.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


picture = _load()


def test_architecture_picture_is_the_committed_page():
    text = (ROOT / "docs" / "architecture.md").read_text()
    assert picture.page(text, picture.render(picture.build(ROOT))) == text, \
        "docs/architecture.md is stale: rerun python docs/architecture.py"


def test_architecture_picture_no_import_goes_up_a_floor():
    found = [p for p in picture.problems(picture.build(ROOT)) if "no docstring" not in p]
    assert found == []


def _tree(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(textwrap.dedent(text))


PYPROJECT = """\
    [tool.importlinter]
    root_packages = ["app", "core"]

    [[tool.importlinter.contracts]]
    name = "packages"
    type = "layers"
    layers = ["app", "core"]
    ignore_imports = ["core.low -> app.*"]

    [[tool.importlinter.contracts]]
    name = "core's floors"
    type = "layers"
    containers = ["core"]
    layers = ["high", "low : (base)"]
"""

FAKE = {
    "pyproject.toml": PYPROJECT,
    "docs/architecture.md": "# A\n\n<!-- picture: python docs/architecture.py -->\nold\n"
                            "<!-- picture: end -->\n\nThe floors, described.\n",
    "app/__init__.py": '"""The application: ``core`` behind a door."""\n',
    # A loose module is a member of its package's room.
    "app/door.py": '"""Door."""\nimport core.high\n',
    "app/inner/__init__.py": '"""Inner rooms.\n\nMore words."""\nfrom .. import door\n',
    # A nested package, a relative import two levels up, an import inside a function.
    "app/inner/deep/__init__.py": '"""Deepest room."""\n',
    "app/inner/deep/leaf.py": """\
        def f():
            from ...inner import helper
            from core import base, not_a_module
            return helper, base, not_a_module
        """,
    "app/inner/helper.py": "",
    "app/notes/readme.py": "import core.low\n",         # no __init__.py: not a package
    "core/__init__.py": '"""The core: each loose module on a floor."""\n',
    "core/high.py": '"""High floor."""\nfrom . import low\nfrom .base import x\n',
    "core/low.py": '"""Low floor, a first line\nthat goes on."""\nimport app.door\n',
    "core/base.py": "",                                     # no docstring
    "core/stray.py": '"""On no floor of the contract."""\n',
}


def test_architecture_picture_rooms_of_a_fake_tree(tmp_path):
    _tree(tmp_path, FAKE)
    plan = picture.build(tmp_path)
    rooms = {name: sorted(room.imports) for name, room in plan.rooms.items()}
    assert rooms == {
        "app": ["core.high"],
        "app.inner": ["app"],                       # `from .. import door`: app.door, in app
        "app.inner.deep": ["app.inner", "core", "core.base"],
        "core": [],
        "core.high": ["core.base", "core.low"],     # `from .base import x`: core.base
        "core.low": ["app"],
        "core.base": [],
        "core.stray": [],
    }
    assert plan.rooms["app"].modules == ["app", "app.door"]
    assert [(label, names) for label, names in plan.floors] == [
        ("app", ["app", "app.inner", "app.inner.deep"]),
        ("core", ["core"]),
        ("core: high", ["core.high"]),
        ("core: low : (base)", ["core.low", "core.base"]),
        ("(on no floor of the layers contracts)", ["core.stray"]),
    ]
    assert plan.rooms["app"].job == "The application: core behind a door."
    assert plan.rooms["app.inner"].job == "Inner rooms."
    assert plan.rooms["core.low"].job == "Low floor, a first line ..."
    # core.low -> app goes up a floor, and the contract's ignore_imports allows it.
    assert picture.problems(plan) == [
        "core.base has no docstring line: give it a one-line docstring",
        "core.stray stands on no floor: name it in a layers contract of pyproject.toml",
    ]


def test_architecture_picture_check_and_rewrite(tmp_path, capsys):
    _tree(tmp_path, {k: v for k, v in FAKE.items() if k not in ("core/base.py", "core/stray.py")}
          | {"core/base.py": '"""Base."""\nimport core\n'})
    assert picture.main(["--check"], root=tmp_path) == 1
    assert capsys.readouterr().err == (
        "docs/architecture.md is stale: rerun python docs/architecture.py\n")
    assert picture.main([], root=tmp_path) == 0
    assert picture.main(["--check"], root=tmp_path) == 0
    text = (tmp_path / "docs" / "architecture.md").read_text()
    assert text.endswith("<!-- picture: end -->\n\nThe floors, described.\n")
    block = text.split("```\n")[1]
    assert "core.low -> ^app\n    Low floor, a first line ...\n" in block
    assert "core.base -> ^core\n    Base.\n" in block
    assert max(len(line) for line in block.splitlines()) <= 100
    # An import up a floor that no contract allows is a problem, marked in the picture.
    (tmp_path / "core" / "high.py").write_text('"""High floor."""\nfrom app import inner\n')
    assert picture.main([], root=tmp_path) == 1
    assert capsys.readouterr().err == ("docs/architecture.py: core.high imports app.inner, a "
                                       "floor up (core.high, line 2)\n")
    assert "core.high -> !app.inner\n" in (tmp_path / "docs" / "architecture.md").read_text()
