"""One folder per Lambda function: ``functions/<name>/construct.py`` builds (and grants) the function whose code
is ``handler.py`` beside it; the Handler comes from the folder, not from a name written twice. Each bundle
carries the runtime side alone, and the composition holds no grants."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from test_layers import ROOT

FUNCTIONS = ROOT / "functions"
# Folders that hold what several functions share, not a function.
SHARED = {"shared", "training_task"}
# Calls that grant or acknowledge: only constructs (and shared/construct.py's helpers for them) make them.
GRANTING = {"add_to_policy", "add_to_principal_policy", "add_to_principal", "acknowledge", "grant_write"}


def _defines_handler(path: Path) -> bool:
    return any(
        isinstance(node, ast.FunctionDef) and node.name == "handler"
        for node in ast.parse(path.read_text()).body
    )


def _folders() -> list[Path]:
    return sorted(p for p in FUNCTIONS.iterdir() if p.is_dir() and p.name != "__pycache__")


def test_each_function_is_a_folder_with_its_construct_beside_its_handler() -> None:
    folders = _folders()
    assert {f.name for f in folders} >= SHARED | {"plan", "launch", "quota_request"}
    for folder in folders:
        assert (folder / "__init__.py").is_file(), folder
        assert (folder / "construct.py").is_file(), folder
        assert ((folder / "handler.py").is_file() and _defines_handler(folder / "handler.py")) == (
            folder.name not in SHARED
        ), folder
    # A function's code is its folder's handler.py: no other module defines a handler.
    others = [p for p in FUNCTIONS.rglob("*.py") if p.name != "handler.py" and _defines_handler(p)]
    assert others == []


def test_the_handlers_come_from_the_folders() -> None:
    from functions.quota_request.construct import QuotaRequestProvider
    from functions.shared.construct import handler_of
    from stacks.constructs.adapter_state_machine import AdapterStateMachine
    from stacks.constructs.pipeline_lambdas import PipelineLambdas
    from stacks.constructs.promotion import Promotion

    # The pipeline's functions, the Promote function of an environment that promotes from another, and the
    # adapter function of one that declares a shared base: every folder but the quota custom resource's.
    expected = {
        f.name: f"functions.{f.name}.handler.handler"
        for f in _folders()
        if f.name not in SHARED | {"quota_request"}
    }
    assert expected == {**PipelineLambdas.HANDLERS, **Promotion.HANDLERS, **AdapterStateMachine.HANDLERS}
    assert handler_of(QuotaRequestProvider) == "functions.quota_request.handler.handler"


def test_a_construct_without_a_handler_beside_it_has_no_handler() -> None:
    from functions.shared.construct import handler_of

    class Stray:  # defined here, in tests/layout/: no handler.py beside it
        pass

    with pytest.raises(RuntimeError, match=r"handler.py: no handler\(event, context\) beside Stray"):
        handler_of(Stray)


def test_the_bundles_carry_the_runtime_alone(tmp_path: Path) -> None:
    from functions.quota_request.construct import bundle_into as quota_bundle
    from functions.shared.construct import bundle_into

    def modules(root: Path) -> set[str]:
        return {str(p.relative_to(root)) for p in (root / "functions").rglob("*.py")}

    runtime = {
        str(p.relative_to(ROOT))
        for p in FUNCTIONS.rglob("*.py")
        if p.name != "construct.py" and "__pycache__" not in p.parts
    }
    bundle_into(tmp_path / "pipeline")
    quota_bundle(tmp_path / "quota")
    quota = {p for p in runtime if p.startswith("functions/quota_request/")}
    assert modules(tmp_path / "pipeline") == runtime - quota
    assert modules(tmp_path / "quota") == quota | {"functions/__init__.py"}


def _granting_calls(path: Path) -> list[str]:
    return [
        f"{path.name}:{node.lineno} {node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id}"
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Call)
        and (getattr(node.func, "attr", None) in GRANTING or getattr(node.func, "id", None) in GRANTING)
    ]


def test_only_constructs_grant() -> None:
    """The composition and the stack's wiring grant the functions nothing (the stack's own grants are for
    the execution role and the sourcedir, which no construct owns)."""
    assert _granting_calls(ROOT / "stacks" / "constructs" / "pipeline_lambdas.py") == []
    assert _granting_calls(ROOT / "stacks" / "constructs" / "pipeline_events.py") == []
    # The check sees grants where they are.
    assert {call.split()[-1] for call in _granting_calls(FUNCTIONS / "deploy_prepare" / "construct.py")} == {
        "add_to_policy",
        "acknowledge",
    }
