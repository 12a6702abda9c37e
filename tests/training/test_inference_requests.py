"""Every recipe's smoke-test request is one its model's inference handler accepts.

The handler is the one the recipe's task kind names (hfpipe/kinds/tasks.py), which its entry point installs as
`code/inference.py`; `parse_request` is the handlers' pure request parsing (no model, no torch), so a recipe
whose sample the endpoint would reject fails here instead of in the pipeline's SmokeTest state.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from hfpipe import kinds
from hfpipe.core.recipe.recipes import available_recipes, load_recipe, resolve_recipe

TRAINING_CODE = Path(__file__).resolve().parents[2] / "training_code"


def handler_of(task: str) -> ModuleType:
    """The inference handler module of a task kind, loaded from training_code/."""
    name = kinds.task_kind(task).handler
    spec = importlib.util.spec_from_file_location(f"handler_{name}", TRAINING_CODE / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def handler(name: str) -> ModuleType:
    return handler_of(
        {"qa": "question-answering", "cls": "text-classification", "clm": "summarization"}[name]
    )


@pytest.mark.parametrize("recipe_name", available_recipes())
def test_the_recipes_sample_request_is_accepted_by_its_handler(recipe_name: str) -> None:
    """...by the request check of the recipe's serving kind: the task's handler, or for the vllm kind the
    kind's own request contract (hfpipe/kinds/openai_contract.py)."""
    recipe = resolve_recipe(load_recipe(recipe_name))
    sample = recipe["serving"]["sample_request"]
    assert sample is not None, f"{recipe_name}: no serving.sample_request"
    contract = kinds.serving_kind_of(recipe).request_contract
    if contract is not None:
        assert contract(sample, None), f"{recipe_name}: {sample!r} checked to nothing"
        return
    checker = kinds.serving_kind_of(recipe).request_checker(kinds.task_kind(recipe["task"]).handler)
    spec = importlib.util.spec_from_file_location(f"checker_{checker}", TRAINING_CODE / f"{checker}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    parsed = module.parse_request(sample)
    assert parsed[0], f"{recipe_name}: {sample!r} parsed to nothing"


def test_handlers_per_task() -> None:
    assert handler("qa").__file__.endswith("inference_qa.py")
    assert handler("cls").__file__.endswith("inference_classification.py")
    assert handler("clm").__file__.endswith("inference_clm.py")


QA_ITEM = {"question": "Who?", "context": "Amanda baked cookies."}


@pytest.mark.parametrize(
    ("request_", "items", "batch"),
    [
        (QA_ITEM, [QA_ITEM], False),
        ({"inputs": QA_ITEM}, [QA_ITEM], False),
        ([QA_ITEM, QA_ITEM], [QA_ITEM, QA_ITEM], True),
        ({"inputs": [QA_ITEM]}, [QA_ITEM], True),
        ({"inputs": QA_ITEM, "parameters": {"top_k": 2}}, [{**QA_ITEM, "top_k": 2}], False),
        ({**QA_ITEM, "top_k": 3}, [{**QA_ITEM, "top_k": 3}], False),
    ],
)
def test_qa_request_shapes(request_: Any, items: list[dict[str, Any]], batch: bool) -> None:
    assert handler("qa").parse_request(request_) == (items, batch)


@pytest.mark.parametrize(
    ("request_", "message"),
    [
        ({"inputs": {"question": "Who?"}}, "request field 'context' must be a non-empty string; got None"),
        ({"question": "", "context": "x"}, "request field 'question' must be a non-empty string; got ''"),
        ({"inputs": "Who?"}, "each request item must be an object with 'question' and 'context'; got str"),
        (
            {"inputs": QA_ITEM, "parameters": {"temperature": 1}},
            "request parameters ['temperature'] are not supported; accepted: ['top_k',",
        ),
    ],
)
def test_qa_bad_requests_name_the_field(request_: Any, message: str) -> None:
    with pytest.raises(ValueError) as err:
        handler("qa").parse_request(request_)
    assert str(err.value).startswith(message)


PAIR = {"premise": "A man plays.", "hypothesis": "Someone plays."}


@pytest.mark.parametrize(
    ("request_", "pairs", "batch"),
    [
        (PAIR, [("A man plays.", "Someone plays.")], False),
        ({"inputs": PAIR}, [("A man plays.", "Someone plays.")], False),
        ({"text": "a", "text_pair": "b"}, [("a", "b")], False),
        ({"inputs": {"text": "a", "text_pair": "b"}}, [("a", "b")], False),
        ({"text": "good"}, [("good", None)], False),
        ({"inputs": "good"}, [("good", None)], False),
        ({"inputs": ["good", {"text": "bad"}]}, [("good", None), ("bad", None)], True),
        ([PAIR, {"inputs": PAIR}], [("A man plays.", "Someone plays.")] * 2, True),
    ],
)
def test_classification_request_shapes(request_: Any, pairs: list[Any], batch: bool) -> None:
    assert handler("cls").parse_request(request_) == (pairs, batch)


@pytest.mark.parametrize(
    ("request_", "message"),
    [
        ({"inputs": {"premise": "x"}}, "request field 'hypothesis' must be a non-empty string; got None"),
        ({"inputs": {"text": ""}}, "request field 'text' must be a non-empty string; got ''"),
        ({"inputs": [{"text": "a"}, PAIR]}, "a batch must be all pairs or all single texts"),
        ({"inputs": 3}, "each request item must be an object; got int"),
    ],
)
def test_classification_bad_requests_name_the_field(request_: Any, message: str) -> None:
    with pytest.raises(ValueError) as err:
        handler("cls").parse_request(request_)
    assert str(err.value) == message


def test_clm_request_shapes() -> None:
    clm = handler("clm")
    prompt, kwargs = clm.parse_request({"inputs": "Summarize:", "parameters": {"max_new_tokens": 5}})
    assert prompt == "Summarize:" and kwargs["max_new_tokens"] == 5
    assert clm.parse_request({"dialogue": "A: hi", "parameters": {}})[0] == {"dialogue": "A: hi"}
    assert clm.parse_request({"inputs": {"dialogue": "A: hi"}})[0] == {"dialogue": "A: hi"}
    with pytest.raises(ValueError, match=r"request field \"inputs\" needs \"dialogue\"; got keys \['text'\]"):
        clm.parse_request({"inputs": {"text": "A: hi"}})
