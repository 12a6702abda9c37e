"""Recipes for the command: loading with `--set` overrides, listing, showing, the execution input.

The schema, loading and overrides live in `hfpipe.core` (shared with the Plan Lambda, so the command
validates exactly what the pipeline will); this module only adapts them to the command's output.
"""

from __future__ import annotations

from typing import Any

from hfpipe.aws import HfpipeError


def _core() -> Any:
    try:
        from hfpipe.core import recipe as core_recipe  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        raise HfpipeError(
            "recipe support is not installed (hfpipe.core.recipe missing); reinstall hfpipe"
        ) from None
    return core_recipe


def load(ref: str, sets: list[str]) -> dict[str, Any]:
    """A recipe by name or path with `--set key=value` overrides applied, validated."""
    raise NotImplementedError


def recipe_name(recipe: dict[str, Any]) -> str:
    return str(recipe["name"])


def execution_input(recipe: dict[str, Any], env: str) -> dict[str, Any]:
    raise NotImplementedError


def recipes_table() -> Any:
    raise NotImplementedError


def show(recipe: dict[str, Any]) -> Any:
    raise NotImplementedError
