"""Loading recipes and applying dotted ``key=value`` overrides (``training.hyperparameters.max_steps=100``)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import hfpipe
from hfpipe.core import json_text
from hfpipe.core import validate as rules
from hfpipe.core.recipe import acceptance
from hfpipe.core.recipe.schema import RECIPE_SCHEMA, RecipeError, check_evaluation, validate
from hfpipe.core.recipe.typed import Recipe
from hfpipe.kinds import serving_kind

#: recipes/ at the repository root; in the Lambda bundle and in the wheel it sits inside the hfpipe package.
_PACKAGE = Path(hfpipe.__file__).resolve().parent
_CANDIDATE_DIRS = (_PACKAGE.parent / "recipes", _PACKAGE / "recipes")


def recipes_dir() -> Path:
    """The directory holding the bundled recipe files."""
    for d in _CANDIDATE_DIRS:
        if d.is_dir():
            return d
    raise RecipeError(f"recipes directory not found; looked in {[str(d) for d in _CANDIDATE_DIRS]}")


def available_recipes() -> list[str]:
    """Names of the recipes shipped with hfpipe."""
    return sorted(p.stem for p in recipes_dir().glob("*.json") if p.stem != "schema")


def load_recipe(name_or_path: str) -> dict[str, Any]:
    """Read a recipe by name (from recipes/) or by file path; not yet validated."""
    path = Path(name_or_path)
    if not path.suffix:
        path = recipes_dir() / f"{name_or_path}.json"
        if not path.is_file():
            raise RecipeError(f"recipe: {name_or_path!r} is not a known recipe; known: {available_recipes()}")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise RecipeError(
            f"recipe: {str(path)!r} is not UTF-8 text (byte {err.start}); accepted: a JSON file saved as UTF-8"
        ) from None
    except OSError as err:
        raise RecipeError(f"recipe: cannot read {str(path)!r}: {err.strerror or err}") from None
    data = json_text.loads(text, f"recipe {str(path)!r}")
    if not isinstance(data, dict):
        raise RecipeError(f"recipe: {str(path)!r} must hold a JSON object")
    return data


def parse_override(text: str) -> tuple[str, Any]:
    """Split ``a.b.c=value``; the value is parsed as JSON when it is JSON (numbers, booleans, null,
    lists, objects), otherwise kept as a string."""
    if not isinstance(text, str):
        raise RecipeError(f"override: {text!r} is not accepted; accepted: a 'dotted.key=value' string")
    key, sep, raw = text.partition("=")
    if not sep or not key.strip():
        raise RecipeError(f"override: {text!r} is not of the form dotted.key=value")
    rules.override_key(key.strip(), f"override {text!r}")
    try:
        value = json.loads(raw, parse_constant=json_text.refuse_constant)
    except json.JSONDecodeError:
        value = raw
    except RecursionError:
        raise RecipeError(
            f"override {key.strip()}: nested deeper than can be read; accepted: JSON nested at most "
            f"{json_text.MAX_NESTING} levels"
        ) from None
    except ValueError:
        raise RecipeError(
            f"override {key.strip()}: {raw.strip()!r} is not accepted; accepted: a finite JSON number "
            '(JSON has no NaN or Infinity), or a quoted string such as ""NaN""'
        ) from None
    json_text.check_nesting(value, f"override {key.strip()}")
    return key.strip(), value


def apply_overrides(raw: dict[str, Any], overrides: dict[str, Any] | list[str] | None) -> dict[str, Any]:
    """Return a copy of ``raw`` (a recipe not yet validated) with each dotted key set; ``overrides`` is a
    mapping or a list of ``key=value`` strings. Intermediate objects are created; a non-object on the way is
    an error."""
    out = copy.deepcopy(raw)
    if not overrides:
        return out
    items = [parse_override(o) for o in overrides] if isinstance(overrides, list) else list(overrides.items())
    for key, value in items:
        parts = rules.override_key(key, f"override {key!r}")
        rules.check_finite(value, f"override {key}")
        node: Any = out
        for i, part in enumerate(parts[:-1]):
            nxt = node.get(part)
            if nxt is None:
                nxt = node[part] = {}
            if not isinstance(nxt, dict):
                where = ".".join(parts[: i + 1])
                raise RecipeError(f"override {key}: {where} is {nxt!r}, not an object")
            node = nxt
        node[parts[-1]] = value
    return out


def whole_integers(value: Any, schema: dict[str, Any], path: str) -> None:
    """RecipeError for a float where the schema says integer and not number: JSON Schema (and so the schema
    check, as ``jsonschema``) counts 1.0 an integer, but the SageMaker fields these become (InstanceCount,
    VolumeSizeInGB, ...) take none (botocore validates an int), so a recipe says 1."""
    types = schema.get("type")
    types = types if isinstance(types, list) else [types]
    if isinstance(value, float) and "integer" in types and "number" not in types:
        raise RecipeError(
            f"{path}: {value!r} is not accepted; accepted: a whole number written without a decimal point "
            f"({int(value) if value.is_integer() else round(value)}): SageMaker types this field as an integer"
        )
    if isinstance(value, dict):
        for key, sub in (schema.get("properties") or {}).items():
            if key in value:
                whole_integers(value[key], sub, f"{path}.{key}")
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(value):
            whole_integers(item, schema["items"], f"{path}[{i}]")


def resolve_recipe(
    raw: dict[str, Any] | None = None,
    recipe_name: str | None = None,
    overrides: dict[str, Any] | list[str] | None = None,
) -> Recipe:
    """Recipe object as written (``raw``, not yet validated) or bundled name, plus overrides, validated with
    defaults filled: the typed recipe (hfpipe/core/recipe/typed.py)."""
    if raw is None:
        if not recipe_name:
            raise RecipeError("input: give either 'recipe' (an object) or 'recipe_name' (a bundled recipe)")
        raw = load_recipe(recipe_name)
    if not isinstance(raw, dict):
        raise RecipeError(f"recipe: {raw!r} is not accepted; accepted: a JSON object")
    # Walked, copied and validated by recursive code: a value nested thousands deep is refused first.
    json_text.check_nesting(raw, "recipe")
    if isinstance(overrides, dict):
        for key, value in overrides.items():
            json_text.check_nesting(value, f"override {key}")
    # The JSON Schema (what `jsonschema` would accept too), then what a schema cannot say (hfpipe.core.validate).
    merged = apply_overrides(raw, overrides)
    rules.check_finite(merged, "recipe")
    whole_integers(merged, RECIPE_SCHEMA, "recipe")
    checked = validate(merged)
    rules.recipe(checked)
    check_evaluation(checked)  # after the channels' rules: its data names one of them
    acceptance.check(checked)  # what the training script's parser and SageMaker's enums accept
    # The serving kind's model environment is a default under the recipe's own (hfpipe/kinds/serving.py).
    serving = checked["serving"]
    serving["environment"] = {**serving_kind(serving["kind"]).environment, **serving["environment"]}
    return checked
