"""hfpipe/core's, hfpipe/cli's and hfpipe/local's rooms are the ones docs/layers.md names ("Rooms"): every room
its tables name exists and holds modules, every module of those packages sits in a room the tables name, each row
cites exactly its room's modules, a room's __init__.py is a docstring only (one import path per module), and the
base imports no room: in hfpipe/core none of it; in hfpipe/cli and hfpipe/local, whose top level also holds the
package's entries (which import rooms), the base the rooms stand on.

The checks take the repository's root as an argument, so each is shown failing on a copy of the three packages
with one thing changed (a module in a room the table does not name, a room emptied, a room named that is not
there, a room's __init__.py that imports, a base module that imports a room).
"""

from __future__ import annotations

import ast
import re
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CORE = Path("hfpipe", "core")
PACKAGES = (CORE, Path("hfpipe", "cli"), Path("hfpipe", "local"))
#: Packages whose whole top level is the base under the rooms. In the others the top level also holds the
#: package's entries (the command's parser and `hfpipe local`'s commands; local mode's run, world and stacks),
#: which import rooms; there only the base the rooms stand on must import none.
WHOLE_BASE_UNDER_ROOMS = {CORE}
HEADER = "| room | what it holds |"
ROOM_CELL = re.compile(r"^`(hfpipe/(?:core|cli|local)/(?:\w+/)*)`$")
CITED_MODULE = re.compile(r"`(\w+)\.py`")


def documented_rooms(text: str) -> dict[str, str]:
    """Room folder (`hfpipe/core/run/`) -> what its row says it holds, from every table under HEADER."""
    rooms = {}
    for start in (m.start() for m in re.finditer(re.escape(HEADER), text)):
        for line in text[start:].splitlines()[2:]:
            if not line.startswith("|"):
                break
            room, holds = (cell.strip() for cell in line.strip().strip("|").split(" | ", 1))
            match = ROOM_CELL.match(room)
            assert match, (
                f"docs/layers.md: a room's cell is a folder of {PACKAGES} in backticks, not {room!r}"
            )
            rooms[match[1]] = holds
    return rooms


def rooms_on_disk(root: Path, packages: tuple[Path, ...] = PACKAGES) -> dict[str, set[str]]:
    """Room folder -> the modules in it (without .py): each package's base and every folder of it with Python."""
    rooms: dict[str, set[str]] = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
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
    bases = {f"{package.as_posix()}/" for package in PACKAGES}
    return [root / room / "__init__.py" for room in rooms_on_disk(root) if room not in bases]


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


def _imports(path: Path, package: str) -> list[tuple[int, str]]:
    """(line, module) of every import of the file but those under `if TYPE_CHECKING:`; `from hfpipe.cli import
    aws` names hfpipe.cli.aws."""
    tree = ast.parse(path.read_text())
    skip = _type_checking_only(tree)
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module == package:
            found += [(node.lineno, f"{package}.{alias.name}") for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            found.append((node.lineno, node.module or ""))
    return found


def _package_problems(root: Path, package: Path) -> list[str]:
    dotted = ".".join(package.parts)
    rooms = {
        room.removeprefix(f"{package.as_posix()}/").strip("/") for room in rooms_on_disk(root, (package,))
    }
    rooms.discard("")
    base = {path.stem: path for path in sorted((root / package).glob("*.py"))}

    def parts(module: str) -> tuple[str, str] | None:
        """("room", name) or ("base", name) for a module of the package (its __init__'s names: its __init__)."""
        if module != dotted and not module.startswith(f"{dotted}."):
            return None
        head = module.split(".")[len(package.parts)] if module != dotted else "__init__"
        return ("room", head) if head in rooms else ("base", head if head in base else "__init__")

    imports = {name: _imports(path, dotted) for name, path in base.items()}
    if package in WHOLE_BASE_UNDER_ROOMS:
        under = set(base)
    else:  # what a room imports at the top level, and what that imports there
        under = set()
        for room in rooms:
            for path in (root / package / room).glob("*.py"):
                under |= {p[1] for _, m in _imports(path, dotted) if (p := parts(m)) and p[0] == "base"}
        todo = list(under)
        while todo:
            for _, module in imports.get(todo.pop(), []):
                p = parts(module)
                if p and p[0] == "base" and p[1] not in under:
                    under.add(p[1])
                    todo.append(p[1])
    return [
        f"{base[name].relative_to(root)}:{line} imports {module}"
        for name in sorted(under & set(base))
        for line, module in imports[name]
        if (p := parts(module)) and p[0] == "room"
    ]


def base_import_problems(root: Path) -> list[str]:
    """Imports of a room by a base module (anywhere in it but `if TYPE_CHECKING:`): any module at hfpipe/core's
    top level; at hfpipe/cli's and hfpipe/local's, one that a room imports, or that such a module imports."""
    return [problem for package in PACKAGES for problem in _package_problems(root, package)]


def test_the_rooms_are_the_ones_docs_layers_names() -> None:
    text = (ROOT / "docs" / "layers.md").read_text()
    named = documented_rooms(text)
    assert {room.split("/")[1] for room in named} == {"core", "cli", "local"}  # the three tables were read
    assert len(named) > 12
    assert room_problems(text, ROOT) == []


def test_a_room_is_a_docstring_only() -> None:
    assert len(_room_inits(ROOT)) > 10
    assert init_problems(ROOT) == []


def test_the_base_imports_no_room() -> None:
    assert base_import_problems(ROOT) == []


def test_every_room_shapes_the_local_template_cache() -> None:
    """Local mode's cached templates are keyed by the code that shapes them, every room's modules included."""
    from hfpipe.local.stacks import _template_inputs

    on_disk = {p for p in (ROOT / CORE).rglob("*.py") if "__pycache__" not in p.parts}
    assert len(on_disk) > 40 and on_disk <= set(_template_inputs(ROOT))


@pytest.fixture
def packages_copy(tmp_path: Path) -> Path:
    """A copy of hfpipe/core, hfpipe/cli and hfpipe/local (their Python files) under tmp_path, as the root of a
    repository."""
    for package in PACKAGES:
        shutil.copytree(
            ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__", "*.json")
        )
    return tmp_path


def test_the_checks_fail_on_a_changed_copy(packages_copy: Path) -> None:
    text = (ROOT / "docs" / "layers.md").read_text()
    core = packages_copy / CORE
    assert room_problems(text, packages_copy) == [] and init_problems(packages_copy) == []
    assert base_import_problems(packages_copy) == []

    (core / "stray").mkdir()
    (core / "stray" / "__init__.py").write_text('"""A room nobody named."""\n')
    (core / "stray" / "extra.py").write_text("")
    (core / "run" / "extra.py").write_text("")
    (packages_copy / "hfpipe" / "local" / "serving" / "extra.py").write_text("")
    assert room_problems(text, packages_copy) == [
        "docs/layers.md's row of hfpipe/core/run/ cites [] not in it and leaves out ['extra']",
        "docs/layers.md's row of hfpipe/local/serving/ cites [] not in it and leaves out ['extra']",
        "hfpipe/core/stray/ (extra) is a room docs/layers.md does not name",
    ]

    for module in (core / "adapters").glob("*.py"):
        if module.name != "__init__.py":
            module.unlink()
    with_gone = text.replace(
        HEADER + "\n|---|---|\n", HEADER + "\n|---|---|\n| `hfpipe/cli/gone/` | x |\n", 1
    )
    assert "docs/layers.md names the room hfpipe/cli/gone/, which does not exist" in room_problems(
        with_gone, packages_copy
    )
    assert "hfpipe/core/adapters/ holds no module" in room_problems(text, packages_copy)


def test_the_room_and_base_checks_fail_on_a_changed_copy(packages_copy: Path) -> None:
    core = packages_copy / CORE
    (core / "run" / "__init__.py").write_text('"""Runs."""\n\nfrom hfpipe.core.run import plan\n')
    (core / "uses_a_room.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "from hfpipe.core import names\n"
        "if TYPE_CHECKING:\n    from hfpipe.core.run.plan_model import Plan\n"
        "def f():\n    from hfpipe.core.run import plan\n    import hfpipe.core.deploy.fleets\n"
    )
    assert init_problems(packages_copy) == [
        "hfpipe/core/run/__init__.py: a docstring of 1 to 3 lines and nothing else"
    ]
    assert base_import_problems(packages_copy) == [
        "hfpipe/core/uses_a_room.py:6 imports hfpipe.core.run",
        "hfpipe/core/uses_a_room.py:7 imports hfpipe.core.deploy.fleets",
    ]


def test_the_base_under_the_rooms_is_the_one_checked(packages_copy: Path) -> None:
    """In hfpipe/cli an entry (no room imports it) may import a room; a base module that a room imports may not,
    nor one that such a module imports."""
    cli = packages_copy / "hfpipe" / "cli"
    (cli / "entry.py").write_text("from hfpipe.cli.run import watch\n")
    assert base_import_problems(packages_copy) == []

    (cli / "terminal.py").write_text(
        (cli / "terminal.py").read_text() + "\n\ndef f():\n    from hfpipe.cli.run import watch\n"
    )
    (cli / "helper.py").write_text("import hfpipe.cli.deploy.invoke\n")
    (cli / "paths.py").write_text(
        (cli / "paths.py").read_text() + "\n\ndef g():\n    from hfpipe.cli import helper\n"
    )
    lines = len((cli / "terminal.py").read_text().splitlines())
    assert base_import_problems(packages_copy) == [
        "hfpipe/cli/helper.py:1 imports hfpipe.cli.deploy.invoke",
        f"hfpipe/cli/terminal.py:{lines} imports hfpipe.cli.run",
    ]
