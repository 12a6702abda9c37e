"""The stdlib recipe validator (`hfpipe.core.schema.validate`, used inside the Lambdas, which ship no
third-party packages) accepts exactly what the `jsonschema` library accepts for `RECIPE_SCHEMA`.

Cases are the shipped recipes with one to three generated mutations each: a field (present or not)
set to a value drawn from its own schema's edges (enum members, bounds and their neighbours, strings for
and against its pattern, nulls) or to any JSON value, a field removed, or an unknown field added.
Each kind of slip in the validator (a bound off by one, a missed enum, pattern, required field, unknown
field, or integer rule) makes this test fail.
"""

from __future__ import annotations

import copy
import re
from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hfpipe.core.recipes import available_recipes, load_recipe
from hfpipe.core.schema import RECIPE_SCHEMA, RecipeError, validate


def _whole_value_pattern(validator: Any, pattern: str, instance: Any, schema: dict[str, Any]) -> Any:
    """JSON Schema's `pattern` with ECMA-262's `$` (end of the value): Python's `$` also matches before a
    final newline, so the library's re.search would accept "tiny-qa\n" where SageMaker and the schema's
    own dialect refuse it. The project's validator matches the whole value; so does this reference."""
    if validator.is_type(instance, "string") and not re.fullmatch(pattern, instance):
        yield jsonschema.ValidationError(f"{instance!r} does not match {pattern!r}")


VALIDATOR = jsonschema.validators.extend(jsonschema.Draft202012Validator, {"pattern": _whole_value_pattern})(
    RECIPE_SCHEMA
)
RECIPES = [load_recipe(name) for name in available_recipes()]

JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(10**6), 10**6)
    | st.floats(allow_nan=False, allow_infinity=False, width=32)
    | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=6,
)

# A value of each JSON Schema type (integral floats included: JSON Schema counts 1.0 as an integer).
BY_TYPE: dict[str, st.SearchStrategy[Any]] = {
    "string": st.text(max_size=12),
    "integer": st.integers(-5, 10**5) | st.integers(-5, 100).map(float),
    "number": st.integers(-5, 10**5) | st.floats(-5, 10**5, allow_nan=False),
    "boolean": st.booleans(),
    "null": st.none(),
    "object": st.dictionaries(st.text(max_size=8), JSON, max_size=2),
    "array": st.lists(JSON, max_size=2),
}


def _paths(
    doc: Any, schema: dict[str, Any], prefix: tuple[Any, ...] = ()
) -> list[tuple[tuple[Any, ...], dict]]:
    """Every (path, subschema) inside ``doc`` that the schema describes."""
    found: list[tuple[tuple[Any, ...], dict]] = []
    if isinstance(doc, dict):
        for key, value in doc.items():
            sub = schema.get("properties", {}).get(key)
            if sub is not None:
                found.append(((*prefix, key), sub))
                found.extend(_paths(value, sub, (*prefix, key)))
    elif isinstance(doc, list) and "items" in schema:
        for i, value in enumerate(doc):
            found.append(((*prefix, i), schema["items"]))
            found.extend(_paths(value, schema["items"], (*prefix, i)))
    return found


def _edges(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Half the time a value at the edge of one subschema (enum members, each bound and its neighbours,
    strings for and against its pattern): what a hand-written validator most easily gets wrong; else any
    value of its types, or any JSON value."""
    edges: list[Any] = list(schema.get("enum", []))
    for key in ("minimum", "maximum", "exclusiveMinimum"):
        if key in schema:
            bound = schema[key]
            edges += [bound - 1, bound, bound + 1, bound - 0.5, bound + 0.5]
    if "default" in schema:
        edges.append(copy.deepcopy(schema["default"]))
    anything: list[st.SearchStrategy[Any]] = [st.none(), JSON]
    types = schema.get("type") or []
    anything += [BY_TYPE[t] for t in ([types] if isinstance(types, str) else types)]
    if "enum" in schema:
        anything.append(st.text(max_size=12).filter(lambda t: t not in schema["enum"]))
    if "pattern" in schema:
        pattern = schema["pattern"]
        anything.append(st.from_regex(pattern, fullmatch=True))
        anything.append(st.text(max_size=12).filter(lambda t: re.search(pattern, t) is None))
        # A valid value with a trailing newline: Python's `$` would let it through.
        anything.append(st.from_regex(pattern, fullmatch=True).map(lambda t: t + "\n"))
    if not edges:
        return st.one_of(anything)
    return st.booleans().flatmap(lambda edge: st.sampled_from(edges) if edge else st.one_of(anything))


CONSTRAINTS = {
    "enum",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "pattern",
    "minItems",
    "additionalProperties",
}


@st.composite
def mutated_recipes(draw: st.DrawFn) -> dict[str, Any]:
    doc = copy.deepcopy(draw(st.sampled_from(RECIPES)))
    for _ in range(draw(st.sampled_from([1, 1, 1, 2, 3]))):
        paths = _paths(doc, RECIPE_SCHEMA)
        action = draw(st.sampled_from(["replace", "replace", "set", "delete", "add"]))
        if action == "set":  # any field of an object the schema describes, present or not
            objects = [((), RECIPE_SCHEMA)] + [
                (p, s) for p, s in paths if "properties" in s and isinstance(_at(doc, p), dict)
            ]
            path, sub = draw(st.sampled_from(objects))
            key = draw(st.sampled_from(sorted(sub["properties"])))
            _at(doc, path)[key] = draw(_edges(sub["properties"][key]))
            continue
        # Half the time a field with a constraint beyond its type, where a validator most often slips.
        constrained = [(p, s) for p, s in paths if CONSTRAINTS & set(s)]
        path, sub = draw(st.sampled_from(constrained if constrained and draw(st.booleans()) else paths))
        parent = _at(doc, path[:-1])
        if action == "replace":
            parent[path[-1]] = draw(_edges(sub))
        elif action == "delete" and isinstance(parent, dict):
            del parent[path[-1]]
        elif action == "add" and isinstance(parent[path[-1]], dict):
            parent[path[-1]][draw(st.sampled_from(["extra", "unknown_field", "name"]))] = draw(JSON)
    return doc


def _at(doc: Any, path: tuple[Any, ...]) -> Any:
    for key in path:
        doc = doc[key]
    return doc


def _agree(doc: Any) -> None:
    errors = [e.message for e in VALIDATOR.iter_errors(doc)]
    try:
        validate(doc)
    except RecipeError as err:
        assert errors, f"stdlib rejects what jsonschema accepts: {err}"
    else:
        assert not errors, f"stdlib accepts what jsonschema rejects: {errors}"


# Fixed values every field gets in the sweep below, besides its own edges.
SWEEP_VALUES: list[Any] = [None, True, 0, 1.0, 1.5, -1, "", "x", "UPPER CASE", "a/b.py", [], {}]


def _sweep_edges(schema: dict[str, Any]) -> list[Any]:
    edges: list[Any] = list(schema.get("enum", []))
    for key in ("minimum", "maximum", "exclusiveMinimum"):
        if key in schema:
            bound = schema[key]
            edges += [bound - 1, bound, bound + 1, bound - 0.5, bound + 0.5, float(bound)]
    return edges + SWEEP_VALUES


@pytest.mark.parametrize("recipe", RECIPES, ids=[r["name"] for r in RECIPES])
def test_every_field_at_its_edges(recipe: dict[str, Any]) -> None:
    """Systematic: each field of the schema (present in the recipe or not), one at a time, set to each
    of its edge values and to values of every other type; each present field removed; an unknown field
    added to each object."""
    objects = [((), RECIPE_SCHEMA)] + [
        (p, s)
        for p, s in _paths(recipe, RECIPE_SCHEMA)
        if "properties" in s and isinstance(_at(recipe, p), dict)
    ]
    cases = 0
    for path, sub in objects:
        doc = copy.deepcopy(recipe)
        _at(doc, path)["unknown_field"] = 1
        _agree(doc)
        for key, field in sub["properties"].items():
            for value in _sweep_edges(field):
                doc = copy.deepcopy(recipe)
                _at(doc, path)[key] = value
                _agree(doc)
                cases += 1
            if key in _at(recipe, path):
                doc = copy.deepcopy(recipe)
                del _at(doc, path)[key]
                _agree(doc)
                cases += 1
    assert cases > 100


@pytest.mark.parametrize("recipe", RECIPES, ids=[r["name"] for r in RECIPES])
def test_shipped_recipes_are_valid_for_both(recipe: dict[str, Any]) -> None:
    assert VALIDATOR.is_valid(recipe)
    validate(recipe)


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated_recipes())
def test_stdlib_validator_agrees_with_jsonschema(doc: dict[str, Any]) -> None:
    """Random: one to three mutations at once, anywhere in the recipe."""
    _agree(doc)
