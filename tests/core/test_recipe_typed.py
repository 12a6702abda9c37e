"""The typed recipe (hfpipe/core/recipe/typed.py) against the one contract, RECIPE_SCHEMA: every object of the
schema has its TypedDict with exactly its properties, a field the schema requires or fills (a default) is a
required key and the others are not, and each field's type is the schema's."""

# No `from __future__ import annotations`: a local TypedDict below must have its NotRequired read (Python 3.11).
import types
import typing
from typing import Any, get_args, get_origin, get_type_hints, is_typeddict

import pytest

from hfpipe.core.recipe import typed
from hfpipe.core.recipe.recipes import available_recipes, resolve_recipe
from hfpipe.core.recipe.schema import RECIPE_SCHEMA

_SCALARS = {"string": str, "integer": int, "number": float, "boolean": bool, "null": type(None)}


def _types(schema: dict[str, Any]) -> set[str]:
    given = schema.get("type")
    return set(given if isinstance(given, list) else [given])


def _members(hint: Any) -> list[Any]:
    """The members of a union (``X | None``), or the hint alone."""
    if get_origin(hint) in (typing.Union, types.UnionType):
        return list(get_args(hint))
    return [hint]


def _walk(schema: dict[str, Any], hint: Any, path: str) -> list[str]:
    """What differs between the schema at ``path`` and the type ``hint``, as lines naming the field."""
    wanted, members = _types(schema), _members(hint)
    problems: list[str] = []
    for name in sorted(wanted):
        if name in _SCALARS and _SCALARS[name] not in members:
            problems.append(f"{path}: schema type {name!r}, typed {hint!r}")
    objects = [m for m in members if is_typeddict(m) or get_origin(m) is dict]
    lists = [m for m in members if get_origin(m) is list]
    if ("object" in wanted) != bool(objects) or ("array" in wanted) != bool(lists):
        problems.append(f"{path}: schema type {sorted(wanted)}, typed {hint!r}")
    if len(members) != len(wanted):
        problems.append(f"{path}: schema type {sorted(wanted)}, typed {hint!r} (other members)")
    if "properties" in schema:
        if not objects or not is_typeddict(objects[0]):
            return [*problems, f"{path}: an object with properties, typed {hint!r} (not a TypedDict)"]
        problems += _walk_object(schema, objects[0], path)
    elif objects and is_typeddict(objects[0]):
        problems.append(f"{path}: an object without properties, typed {objects[0].__name__} (a TypedDict)")
    if isinstance(schema.get("items"), dict) and lists:
        problems += _walk(schema["items"], get_args(lists[0])[0], f"{path}[]")
    return problems


def _walk_object(schema: dict[str, Any], kind: Any, path: str) -> list[str]:
    properties, required = schema["properties"], set(schema.get("required", []))
    filled = {name for name, sub in properties.items() if "default" in sub}
    hints = get_type_hints(kind)
    problems = [
        f"{path}.{n}: in the schema, not in {kind.__name__}" for n in sorted(set(properties) - set(hints))
    ]
    problems += [
        f"{path}.{n}: in {kind.__name__}, not in the schema" for n in sorted(set(hints) - set(properties))
    ]
    for name in sorted(set(properties) & set(hints)):
        always = name in required or name in filled
        if always != (name in kind.__required_keys__):
            problems.append(
                f"{path}.{name}: always present after validation is {always}, typed the other way"
            )
        problems += _walk(properties[name], hints[name], f"{path}.{name}")
    return problems


def test_each_schema_object_is_its_typeddict() -> None:
    assert _walk(RECIPE_SCHEMA, typed.Recipe, "recipe") == []


def test_the_walk_finds_a_missing_an_extra_a_required_and_a_wrong_type() -> None:
    """The check itself: a TypedDict unlike its schema object is named, field by field."""

    class Spot(typing.TypedDict):
        enabled: str  # the schema: boolean
        max_wait_seconds: typing.NotRequired[int | None]  # the schema fills it: always present
        extra: int  # not in the schema

    schema = {
        "type": "object",
        "properties": {
            "enabled": {"type": "boolean"},
            "max_wait_seconds": {"type": ["integer", "null"], "default": None},
            "gone": {"type": "string"},
        },
    }
    assert _walk(schema, Spot, "recipe.training.spot") == [
        "recipe.training.spot.gone: in the schema, not in Spot",
        "recipe.training.spot.extra: in Spot, not in the schema",
        "recipe.training.spot.enabled: always present after validation is False, typed the other way",
        "recipe.training.spot.enabled: schema type 'boolean', typed <class 'str'>",
        "recipe.training.spot.max_wait_seconds: always present after validation is True, typed the other way",
    ]


def _unlike(value: Any, hint: Any, path: str) -> list[str]:
    """Where ``value`` is not of the type ``hint`` (TypedDicts: their keys, required and known; scalars,
    lists and dicts: their type), as lines naming the field."""
    for member in _members(hint):
        if is_typeddict(member) and isinstance(value, dict):
            hints = get_type_hints(member)
            problems = [f"{path}.{k}: missing" for k in sorted(member.__required_keys__ - set(value))]
            problems += [
                f"{path}.{k}: not a field of {member.__name__}" for k in sorted(set(value) - set(hints))
            ]
            for key in sorted(set(value) & set(hints)):
                problems += _unlike(value[key], hints[key], f"{path}.{key}")
            return problems
        if is_typeddict(member):
            continue
        origin = get_origin(member) or member
        if origin is Any or (isinstance(value, origin) and not (origin is int and isinstance(value, bool))):
            if origin is list:
                return [
                    p
                    for i, item in enumerate(value)
                    for p in _unlike(item, get_args(member)[0], f"{path}[{i}]")
                ]
            if origin is dict:
                return [p for k, v in value.items() for p in _unlike(v, get_args(member)[1], f"{path}.{k}")]
            return []
        if origin is float and isinstance(value, int) and not isinstance(value, bool):
            return []  # a JSON number written whole
    return [f"{path}: {value!r} is not {hint!r}"]


@pytest.mark.parametrize("name", available_recipes())
def test_a_resolved_recipe_is_of_its_type(name: str) -> None:
    """What resolve_recipe returns is a typed.Recipe all the way down: every required key there (the defaults
    filled), no key its TypedDict lacks, every value of its field's type."""
    assert _unlike(resolve_recipe(recipe_name=name), typed.Recipe, "recipe") == []


def test_the_value_check_names_what_differs() -> None:
    """The check itself: a missing required key, an unknown one and a value of another type are named."""
    recipe: Any = resolve_recipe(recipe_name="tiny-qa")
    del recipe["training"]["spot"]["enabled"]
    recipe["serving"]["extra"] = 1
    recipe["training"]["instance_count"] = "2"
    assert _unlike(recipe, typed.Recipe, "recipe") == [
        "recipe.serving.extra: not a field of Serving",
        "recipe.training.instance_count: '2' is not <class 'int'>",
        "recipe.training.spot.enabled: missing",
    ]
