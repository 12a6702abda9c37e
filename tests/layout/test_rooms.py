"""hfpipe/core's rooms are the ones docs/layers.md names ("Rooms"): every room its table names exists and holds
modules, every module of hfpipe/core sits in a room the table names, each row cites exactly its room's modules,
a room's __init__.py is a docstring only (one import path per module), and the base imports no room.

The checks take the repository's root as an argument, so each is shown failing on a copy of hfpipe/core with
one thing changed (a module in a room the table does not name, a room emptied, a room named that is not there).
"""

from __future__ import annotations

import ast
import re
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CORE = Path("hfpipe", "core")
HEADER = "| room | what it holds |"
ROOM_CELL = re.compile(r"^`(hfpipe/core/(?:\w+/)*)`$")
CITED_MODULE = re.compile(r"`(\w+)\.py`")


def documented_rooms(text: str) -> dict[str, str]:
    """Room folder (`hfpipe/core/run/`) -> what its row says it holds, from the table under HEADER."""
    lines = text[text.index(HEADER) :].splitlines()[2:]
    rooms = {}
    for line in lines:
        if not line.startswith("|"):
            break
        room, holds = (cell.strip() for cell in line.strip().strip("|").split(" | ", 1))
        match = ROOM_CELL.match(room)
        assert match, f"docs/layers.md: a room's cell is a folder of hfpipe/core in backticks, not {room!r}"
        rooms[match[1]] = holds
    return rooms


def rooms_on_disk(root: Path) -> dict[str, set[str]]:
    """Room folder -> the modules in it (without .py): the base and every folder of hfpipe/core with Python."""
    rooms: dict[str, set[str]] = {}
    for path in sorted((root / CORE).rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        modules = rooms.setdefault(f"{path.parent.relative_to(root).as_posix()}/", set())
        if path.name != "__init__.py":
            modules.add(path.stem)
    return rooms


def room_problems(text: str, root: Path) -> list[str]:
    named, disk = documented_rooms(text), rooms_on_disk(root)
    problems = []
    for room, holds in named.items():
        if not (root / room).is_dir():
            problems.append(f"docs/layers.md names the room {room}, which does not exist")
            continue
        if not disk.get(room):
            problems.append(f"{room} holds no module")
        cited = set(CITED_MODULE.findall(holds))
        if cited != disk.get(room, set()):
            extra, missing = sorted(cited - disk.get(room, set())), sorted(disk.get(room, set()) - cited)
            problems.append(
                f"docs/layers.md's row of {room} cites {extra} not in it and leaves out {missing}"
            )
    for room, modules in disk.items():
        if room not in named:
            problems.append(
                f"{room} ({', '.join(sorted(modules)) or 'no module'}) is a room docs/layers.md does not name"
            )
    return problems


def _room_inits(root: Path) -> list[Path]:
    return [root / room / "__init__.py" for room in rooms_on_disk(root) if room != f"{CORE.as_posix()}/"]


def init_problems(root: Path) -> list[str]:
    """A room's __init__.py that is more than a docstring of 1 to 3 lines."""
    problems = []
    for init in _room_inits(root):
        if not init.is_file():
            problems.append(f"{init.relative_to(root)} is missing: a room is a package")
            continue
        body = ast.parse(init.read_text()).body
        docstring = ast.get_docstring(ast.Module(body=body[:1], type_ignores=[])) if body else None
        if len(body) != 1 or docstring is None or not 1 <= len(docstring.splitlines()) <= 3:
            problems.append(f"{init.relative_to(root)}: a docstring of 1 to 3 lines and nothing else")
    return problems


def _type_checking_only(tree: ast.AST) -> set[int]:
    """Ids of the nodes under `if TYPE_CHECKING:` (imports for annotations only)."""
    inside = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and ast.unparse(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING"):
            inside |= {id(child) for stmt in node.body for child in ast.walk(stmt)}
    return inside


def base_import_problems(root: Path) -> list[str]:
    """Imports of a room by a base module (a module at hfpipe/core's top level), anywhere in it but
    `if TYPE_CHECKING:`."""
    rooms = {room.removeprefix(f"{CORE.as_posix()}/").strip("/") for room in rooms_on_disk(root)} - {""}
    problems = []
    for path in sorted((root / CORE).glob("*.py")):
        tree = ast.parse(path.read_text())
        skip = _type_checking_only(tree)
        for node in ast.walk(tree):
            if id(node) in skip:
                continue
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module == "hfpipe.core":
                modules = [f"hfpipe.core.{alias.name}" for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                modules = [node.module or ""]
            else:
                continue
            problems += [
                f"{path.relative_to(root)}:{node.lineno} imports {module}"
                for module in modules
                if module.startswith("hfpipe.core.") and module.split(".")[2] in rooms
            ]
    return problems


def test_the_rooms_are_the_ones_docs_layers_names() -> None:
    text = (ROOT / "docs" / "layers.md").read_text()
    assert len(documented_rooms(text)) > 3  # the table was read
    assert room_problems(text, ROOT) == []


def test_a_room_is_a_docstring_only() -> None:
    assert len(_room_inits(ROOT)) > 3
    assert init_problems(ROOT) == []


def test_the_base_imports_no_room() -> None:
    assert base_import_problems(ROOT) == []


def test_every_room_shapes_the_local_template_cache() -> None:
    """Local mode's cached templates are keyed by the code that shapes them, every room's modules included."""
    from hfpipe.local.stacks import _template_inputs

    on_disk = {p for p in (ROOT / CORE).rglob("*.py") if "__pycache__" not in p.parts}
    assert len(on_disk) > 40 and on_disk <= set(_template_inputs(ROOT))


@pytest.fixture
def core_copy(tmp_path: Path) -> Path:
    """A copy of hfpipe/core (its Python files) under tmp_path, as the root of a repository."""
    shutil.copytree(ROOT / CORE, tmp_path / CORE, ignore=shutil.ignore_patterns("__pycache__", "*.json"))
    return tmp_path


def test_the_checks_fail_on_a_changed_copy(core_copy: Path) -> None:
    text = (ROOT / "docs" / "layers.md").read_text()
    core = core_copy / CORE
    assert room_problems(text, core_copy) == [] and init_problems(core_copy) == []
    assert base_import_problems(core_copy) == []

    (core / "stray").mkdir()
    (core / "stray" / "__init__.py").write_text('"""A room nobody named."""\n')
    (core / "stray" / "extra.py").write_text("")
    (core / "run" / "extra.py").write_text("")
    assert room_problems(text, core_copy) == [
        "docs/layers.md's row of hfpipe/core/run/ cites [] not in it and leaves out ['extra']",
        "hfpipe/core/stray/ (extra) is a room docs/layers.md does not name",
    ]

    for module in (core / "adapters").glob("*.py"):
        if module.name != "__init__.py":
            module.unlink()
    with_gone = text.replace(HEADER + "\n|---|---|\n", HEADER + "\n|---|---|\n| `hfpipe/core/gone/` | x |\n")
    assert "docs/layers.md names the room hfpipe/core/gone/, which does not exist" in room_problems(
        with_gone, core_copy
    )
    assert "hfpipe/core/adapters/ holds no module" in room_problems(text, core_copy)


def test_the_room_and_base_checks_fail_on_a_changed_copy(core_copy: Path) -> None:
    core = core_copy / CORE
    (core / "run" / "__init__.py").write_text('"""Runs."""\n\nfrom hfpipe.core.run import plan\n')
    (core / "uses_a_room.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "from hfpipe.core import names\n"
        "if TYPE_CHECKING:\n    from hfpipe.core.run.plan_model import Plan\n"
        "def f():\n    from hfpipe.core.run import plan\n    import hfpipe.core.deploy.fleets\n"
    )
    assert init_problems(core_copy) == [
        "hfpipe/core/run/__init__.py: a docstring of 1 to 3 lines and nothing else"
    ]
    assert base_import_problems(core_copy) == [
        "hfpipe/core/uses_a_room.py:6 imports hfpipe.core.run",
        "hfpipe/core/uses_a_room.py:7 imports hfpipe.core.deploy.fleets",
    ]
