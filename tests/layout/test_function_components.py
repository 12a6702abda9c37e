"""One component per pipeline function: ``stacks/functions/<name>.py`` builds (and grants) the function whose
code is ``lambda/pipeline/pipeline_lambdas/<name>.py``, and says so; the composition holds no grants."""

from __future__ import annotations

import ast
import importlib
import inspect

from test_layers import ROOT

FUNCTIONS = ROOT / "stacks" / "functions"
RUNTIME = ROOT / "lambda" / "pipeline" / "pipeline_lambdas"
# Shared by the components, not one of them (each named like the runtime module whose grants it holds).
SHARED = {"__init__", "common", "training_task"}
# Calls that grant or acknowledge: only components (and common.py's helpers for them) make them.
GRANTING = {
    "allow",
    "add_to_policy",
    "add_to_principal_policy",
    "add_to_principal",
    "acknowledge",
    "grant_write",
}


def _handler_modules() -> set[str]:
    """The runtime modules that are a function's code: they define ``handler``."""
    return {
        path.stem
        for path in RUNTIME.glob("*.py")
        if any(
            isinstance(node, ast.FunctionDef) and node.name == "handler"
            for node in ast.parse(path.read_text()).body
        )
    }


def _components() -> dict[str, type]:
    """Module name -> the component class it defines (the one with a RUNTIME_MODULE)."""
    found = {}
    for path in sorted(FUNCTIONS.glob("*.py")):
        if path.stem in SHARED:
            continue
        module = importlib.import_module(f"stacks.functions.{path.stem}")
        classes = [
            c for _, c in inspect.getmembers(module, inspect.isclass) if c.__module__ == module.__name__
        ]
        assert [hasattr(c, "RUNTIME_MODULE") for c in classes] == [True], path
        found[path.stem] = classes[0]
    return found


def test_each_handler_has_its_component_named_like_it() -> None:
    components = _components()
    assert set(components) == _handler_modules()
    for name, component in components.items():
        assert name == component.RUNTIME_MODULE
        assert component.__name__ == "".join(p.capitalize() for p in name.split("_")) + "Function"


def test_every_module_names_its_runtime_file() -> None:
    for path in FUNCTIONS.glob("*.py"):
        if path.stem in ("__init__", "common"):
            continue
        docstring = ast.get_docstring(ast.parse(path.read_text())) or ""
        runtime = f"lambda/pipeline/pipeline_lambdas/{path.stem}.py"
        assert (ROOT / runtime).is_file() and runtime in docstring, path.name


def test_the_composition_handlers_are_the_components() -> None:
    from stacks.constructs.adapter_state_machine import AdapterStateMachine
    from stacks.constructs.pipeline_lambdas import PipelineLambdas
    from stacks.constructs.promotion import Promotion
    from stacks.functions.reaper import ReaperFunction

    # The pipeline's functions, the Promote function of an environment that promotes from another, and the
    # adapter function of one that declares a shared base, and every environment's reaper.
    assert {name: f"pipeline_lambdas.{name}.handler" for name in _handler_modules()} == {
        **PipelineLambdas.HANDLERS,
        **Promotion.HANDLERS,
        **AdapterStateMachine.HANDLERS,
        **ReaperFunction.HANDLERS,
    }


def _granting_calls(path) -> list[str]:
    return [
        f"{path.name}:{node.lineno} {node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id}"
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Call)
        and (getattr(node.func, "attr", None) in GRANTING or getattr(node.func, "id", None) in GRANTING)
    ]


def test_only_components_grant() -> None:
    """The composition and the stack's wiring grant the functions nothing (the stack's own grants are for
    the execution role and the sourcedir, which no component owns)."""
    assert _granting_calls(ROOT / "stacks" / "constructs" / "pipeline_lambdas.py") == []
    assert _granting_calls(ROOT / "stacks" / "constructs" / "pipeline_events.py") == []
    # The check sees grants where they are.
    assert {call.split()[-1] for call in _granting_calls(FUNCTIONS / "deploy_prepare.py")} == {
        "allow",
        "acknowledge",
    }
