"""The recipe schema (`hfpipe.core.recipe.schema`): valid draft-07 by `jsonschema`'s meta-schema check, its defaults
whole values of their own fields, and `fastjsonschema`'s refusals said as one line naming the field, the value
and what the schema accepts there. What the validator itself accepts is the library's (fastjsonschema is a
maintained draft-07 implementation); these cases pin the project's use of it."""

from __future__ import annotations

import copy
from typing import Any

import jsonschema
import pytest

from hfpipe.core.recipe.recipes import available_recipes, load_recipe
from hfpipe.core.recipe.schema import RECIPE_SCHEMA, RecipeError, validate

RECIPES = [load_recipe(name) for name in available_recipes()]
TINY_QA = load_recipe("tiny-qa")


def test_the_schema_is_valid_draft_07() -> None:
    assert RECIPE_SCHEMA["$schema"] == "http://json-schema.org/draft-07/schema#"
    jsonschema.Draft7Validator.check_schema(RECIPE_SCHEMA)  # raises SchemaError naming the keyword


def _subschemas(schema: dict[str, Any], path: str = "recipe") -> list[tuple[str, dict[str, Any]]]:
    found = [(path, schema)]
    for key, sub in schema.get("properties", {}).items():
        found += _subschemas(sub, f"{path}.{key}")
    if isinstance(schema.get("items"), dict):
        found += _subschemas(schema["items"], f"{path}[]")
    return found


def test_every_default_is_a_whole_value_of_its_field() -> None:
    """A default is filled as written (not descended into), so an object's default holds the defaults of its
    own fields, and each default is valid for its field."""
    with_defaults = [(p, s) for p, s in _subschemas(RECIPE_SCHEMA) if "default" in s]
    assert len(with_defaults) > 20
    for path, sub in with_defaults:
        jsonschema.Draft7Validator(sub).validate(sub["default"])
        if isinstance(sub["default"], dict):
            inner = {k for k, s in sub.get("properties", {}).items() if "default" in s}
            assert inner <= set(sub["default"]), path


@pytest.mark.parametrize("recipe", RECIPES, ids=[r["name"] for r in RECIPES])
def test_shipped_recipes_are_valid(recipe: dict[str, Any]) -> None:
    assert jsonschema.Draft7Validator(RECIPE_SCHEMA).is_valid(recipe)
    validate(recipe)


def test_defaults_are_filled_and_the_input_is_left_alone() -> None:
    given = copy.deepcopy(TINY_QA)
    checked = validate(given)
    assert given == TINY_QA
    assert "spot" not in given["training"]
    assert checked["training"]["spot"] == {"enabled": False, "max_wait_seconds": None}
    assert checked["training"]["volume_size_gb"] == 30
    assert checked["serving"]["keep_endpoint"] is False
    assert checked["deploy"] is True
    # A filled default is a fresh value, not one shared between recipes.
    checked["training"]["channels"]["x"] = "y"
    assert validate(TINY_QA)["training"]["channels"] == TINY_QA["training"].get("channels", {})


def _with(path: str, value: Any) -> dict[str, Any]:
    doc = copy.deepcopy(TINY_QA)
    *parents, last = path.split(".")
    node = doc
    for part in parents:
        node = node.setdefault(part, {})
    if value is _DELETE:
        del node[last]
    else:
        node[last] = value
    return doc


class _Delete:
    """The value of a case that deletes its field (named in the test's id, the same in every process)."""

    def __repr__(self) -> str:
        return "<deleted>"


_DELETE = _Delete()

CASES = [
    (
        "training.instance_type",
        "gpu",
        r"recipe.training.instance_type: 'gpu' does not match ^ml\.[a-z0-9]+\.[a-z0-9]+$",
    ),
    # $ is the end of the value (fastjsonschema matches with \Z), as SageMaker matches whole values.
    ("name", "tiny-qa\n", "recipe.name: 'tiny-qa\\n' does not match ^[a-z0-9]([a-z0-9-]{0,38}[a-z0-9])?$"),
    ("training.instance_count", 0, "recipe.training.instance_count: 0 is below the minimum 1"),
    ("serving.instance_count", 17, "recipe.serving.instance_count: 17 is above the maximum 16"),
    ("training.expected_hours", 0, "recipe.training.expected_hours: 0 must be greater than 0"),
    ("deploy", "yes", "recipe.deploy: 'yes' is not of type boolean"),
    # JSON has no booleans among its numbers.
    ("training.instance_count", True, "recipe.training.instance_count: True is not of type integer"),
    ("training.expected_hours", "2", "recipe.training.expected_hours: '2' is not of type number or null"),
    ("training.entry_point", _DELETE, "recipe.training.entry_point: required field is missing"),
    (
        "serving.server.dtype",
        "int4",
        "recipe.serving.server.dtype: 'int4' is not one of ['bfloat16', 'float16', 'float32']",
    ),
    (
        "training.spot",
        {"enabled": True, "max_wait": 60},
        "recipe.training.spot: unknown field(s) ['max_wait']; accepted: ['enabled', 'max_wait_seconds']",
    ),
    (
        "training.metric_definitions",
        [{"Name": "loss"}],
        "recipe.training.metric_definitions[0].Regex: required field is missing",
    ),
]


@pytest.mark.parametrize(("path", "value", "message"), CASES, ids=[f"{c[0]}={c[1]!r}" for c in CASES])
def test_a_refusal_is_one_line_naming_the_field_the_value_and_what_is_accepted(
    path: str, value: Any, message: str
) -> None:
    with pytest.raises(RecipeError) as caught:
        validate(_with(path, value))
    assert str(caught.value) == message


def test_an_unknown_task_names_the_task_kinds() -> None:
    with pytest.raises(
        RecipeError, match=r"^recipe\.task: 'translation' is not one of \[.*'question-answering'"
    ):
        validate(_with("task", "translation"))


def test_not_an_object() -> None:
    with pytest.raises(RecipeError, match=r"^recipe: expected a JSON object, got list$"):
        validate([])
