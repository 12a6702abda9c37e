"""Kinds carry their behaviour (docs/extending.md): nothing outside hfpipe/kinds compares a value with a
task or serving kind's name. Code that needs to know what a kind does asks the kind (a field, or a key the
owning layer's one table dispatches on, such as hfpipe/core/recipe/serving_fit.py's FIT_RULES), so a new kind is
a registry entry, not an edit of every `if kind == ...`.

Read from the source (AST): a comparison (`==`, `!=`, `in`, `not in`, `is`) one of whose sides is a kind's
name as a string literal, a tuple/list/set holding one, or a constant of hfpipe.kinds whose value is one
(`kinds.VLLM`, `DEFAULT_SERVING_KIND`).
"""

from __future__ import annotations

import ast
from pathlib import Path

from hfpipe import kinds
from hfpipe.kinds import serving, tasks

ROOT = Path(__file__).resolve().parents[2]
#: The code outside the registries: every layer but hfpipe/kinds, and what ships to the containers.
SCANNED = ("hfpipe/**/*.py", "stacks/**/*.py", "lambda/**/*.py", "app.py", "training_code/**/*.py")
KIND_NAMES = frozenset(kinds.SERVING_KINDS) | frozenset(kinds.TASK_KINDS)
#: hfpipe.kinds' module constants that hold a kind's name (VLLM, DEFAULT_SERVING_KIND, ...).
KIND_CONSTANTS = frozenset(
    name
    for module in (kinds, serving, tasks)
    for name, value in vars(module).items()
    if name.isupper() and isinstance(value, str) and value in KIND_NAMES
)


def _names_a_kind(node: ast.expr) -> bool:
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str) and node.value in KIND_NAMES
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return any(_names_a_kind(element) for element in node.elts)
    if isinstance(node, ast.Attribute):
        return node.attr in KIND_CONSTANTS
    return isinstance(node, ast.Name) and node.id in KIND_CONSTANTS


def kind_name_comparisons(source: str) -> list[int]:
    """The line of every comparison against a kind's name in `source`."""
    return [
        node.lineno
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Compare) and any(map(_names_a_kind, [node.left, *node.comparators]))
    ]


def _scanned_files() -> list[Path]:
    files = {path for pattern in SCANNED for path in ROOT.glob(pattern)}
    return sorted(p for p in files if not p.is_relative_to(ROOT / "hfpipe" / "kinds"))


def test_the_detector_sees_each_form() -> None:
    vllm, task = sorted(kinds.SERVING_KINDS)[-1], sorted(kinds.TASK_KINDS)[0]
    flagged = f"""
a = s["kind"] == {vllm!r}
b = {task!r} != recipe["task"]
c = kind in ("x", {vllm!r})
d = s.get("kind") == kinds.VLLM
e = kind is DEFAULT_SERVING_KIND
"""
    assert kind_name_comparisons(flagged) == [2, 3, 4, 5, 6]
    allowed = """
a = kinds.serving_kind(s["kind"]).server_settings
b = s["kind"] == "vllm-kv-cache" or name in ("x", "y")
c = kinds.serving_kind(kinds.DEFAULT_SERVING_KIND)
"""
    assert kind_name_comparisons(allowed) == []


def test_nothing_outside_the_registries_compares_kind_names() -> None:
    assert {"VLLM", "DEFAULT_SERVING_KIND"} <= KIND_CONSTANTS
    files = _scanned_files()
    assert ROOT / "hfpipe" / "core" / "run" / "plan.py" in files and len(files) > 100
    found = [
        f"{path.relative_to(ROOT)}:{line}"
        for path in files
        for line in kind_name_comparisons(path.read_text(encoding="utf-8"))
    ]
    assert found == [], (
        "ask the kind (a field, or a key of the owning layer's one table) instead: " + ", ".join(found)
    )
