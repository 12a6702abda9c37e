"""Recipes for the command: loading with `--set` overrides, listing, showing, the execution input.

The schema, loading, overrides and the plan rules live in `hfpipe.core` (shared with the Plan Lambda),
so the command validates exactly what the pipeline will; this module only adapts them to the command.
"""

from __future__ import annotations

import argparse
import difflib
import json
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Group, RenderableType
from rich.syntax import Syntax
from rich.table import Table

from hfpipe.cli import terminal
from hfpipe.cli.aws import HfpipeError, UsageError
from hfpipe.cli.parser import Subparsers, listing_command
from hfpipe.core import cost, json_text
from hfpipe.core.recipe import recipes as core_recipes
from hfpipe.core.recipe.schema import RECIPE_SCHEMA, RecipeError
from hfpipe.core.recipe.typed import Recipe
from hfpipe.core.run import plan as core_plan


@dataclass(frozen=True)
class Loaded:
    """A recipe as read (sent to the pipeline), its overrides, and what `hfpipe.core.run.plan.accept` made of the
    execution input they form (`resolved`: the recipe with its defaults)."""

    ref: str
    raw: dict[str, Any]
    overrides: dict[str, Any]
    accepted: core_plan.Accepted
    keep_endpoint: bool = False

    @property
    def name(self) -> str:
        return str(self.resolved["name"])

    @property
    def resolved(self) -> Recipe:
        return self.accepted.recipe


def parse_sets(sets: list[str]) -> dict[str, Any]:
    """`--set a.b=value` strings -> {dotted key: value}; a value is JSON when it parses as JSON."""
    overrides: dict[str, Any] = {}
    for text in sets:
        try:
            key, value = core_recipes.parse_override(text)
        except RecipeError as err:
            if "dotted.key=value" not in str(err):  # a well-formed --set whose key or value is refused
                raise HfpipeError(f"--set {text!r} is invalid: {err}") from None
            raise UsageError(
                f"--set {text!r} is not KEY=VALUE: use a dotted recipe field, e.g. "
                "--set training.hyperparameters.max_steps=10 (the value is read as JSON when it is JSON)"
            ) from None
        overrides[key] = value
    return overrides


def _read(ref: str) -> dict[str, Any]:
    if Path(ref).suffix:
        from hfpipe.cli.paths import check_length

        check_length(ref, "recipe file")
        if Path(ref).is_dir():
            raise HfpipeError(f"recipe file {ref!r} is a folder; accepted: a recipe's .json file")
        if not Path(ref).is_file():
            raise HfpipeError(f"recipe file {ref!r} not found")
    elif ref not in core_recipes.available_recipes():
        known = core_recipes.available_recipes()
        close = difflib.get_close_matches(ref, known, n=1)
        raise HfpipeError(
            f"unknown recipe {ref!r}: "
            + (f"did you mean {close[0]}? " if close else "")
            + f"known recipes are {', '.join(known)}; or pass the path of a .json file"
        )
    try:
        return core_recipes.load_recipe(ref)
    except RecipeError as err:
        raise HfpipeError(str(err)) from None


def load(ref: str, sets: list[str], *, keep_endpoint: bool = False) -> Loaded:
    """A recipe by name or path with `--set` overrides, through the Plan's one entry into the recipe rules
    (`hfpipe.core.run.plan.accept`), as the execution input `start` sends; the environment's rules come later."""
    overrides = parse_sets(sets)
    raw = _read(ref)
    try:
        accepted = core_plan.accept(_input(raw, overrides, keep_endpoint))
    except RecipeError as err:
        with_sets = " with the --set overrides" if overrides else ""
        raise HfpipeError(f"recipe {ref!r}{with_sets} is invalid: {err}") from None
    return Loaded(ref, raw, overrides, accepted, keep_endpoint)


def _input(raw: dict[str, Any], overrides: dict[str, Any], keep_endpoint: bool) -> dict[str, Any]:
    execution: dict[str, Any] = {"recipe": raw}
    if overrides:
        execution["overrides"] = overrides
    if keep_endpoint:
        execution["keep_endpoint"] = True
    return execution


def execution_input(loaded: Loaded) -> dict[str, Any]:
    """The state machine input: the recipe as read plus the overrides (and `keep_endpoint`, the input's own
    field, which Plan turns into serving.keep_endpoint): what `load` accepted, and the Plan accepts again."""
    return _input(loaded.raw, loaded.overrides, loaded.keep_endpoint)


def _cost(recipe: Recipe) -> str:
    usd, hours = cost.expected_training_cost(recipe["training"])
    return "-" if usd is None else f"{usd:.2f} USD ({hours:g} h)"


def recipes_table() -> Table:
    """The bundled recipes: task, training and serving instances, spot, estimated training cost."""
    table = Table(title="recipes", title_justify="left")
    for column in ("name", "task", "training", "serving", "est. training cost"):
        table.add_column(column)
    for name in core_recipes.available_recipes():
        try:
            recipe = core_recipes.resolve_recipe(recipe_name=name)
        except RecipeError as err:
            table.add_row(name, f"[red]invalid: {err}[/red]", "", "", "")
            continue
        t, s = recipe["training"], recipe["serving"]
        spot = " spot" if t["spot"]["enabled"] else ""
        serving = f"{s['instance_count']} x {s['instance_type']}" if recipe["deploy"] else "(no endpoint)"
        table.add_row(
            name,
            recipe["task"],
            f"{t['instance_count']} x {t['instance_type']}{spot}",
            serving,
            _cost(recipe),
        )
    return table


def recipes_summary() -> list[dict[str, Any]]:
    """The bundled recipes as data (what `recipes_table` shows): for `hfpipe recipes --json`."""
    out: list[dict[str, Any]] = []
    for name in core_recipes.available_recipes():
        try:
            recipe = core_recipes.resolve_recipe(recipe_name=name)
        except RecipeError as err:
            out.append({"name": name, "error": str(err)})
            continue
        t, s = recipe["training"], recipe["serving"]
        estimate, hours = cost.expected_training_cost(t)
        out.append(
            {
                "name": name,
                "task": recipe["task"],
                "training": {
                    "instance_type": t["instance_type"],
                    "instance_count": t["instance_count"],
                    "spot": t["spot"]["enabled"],
                },
                "serving": {"instance_type": s["instance_type"], "instance_count": s["instance_count"]}
                if recipe["deploy"]
                else None,
                "estimated_cost_usd": estimate,
                "expected_hours": hours,
            }
        )
    return out


def _fields(schema: dict[str, Any], prefix: str = "") -> list[tuple[str, dict[str, Any]]]:
    """(dotted path, schema) of every documented field, depth first."""
    out: list[tuple[str, dict[str, Any]]] = []
    for key, sub in schema.get("properties", {}).items():
        path = f"{prefix}{key}"
        out.append((path, sub))
        if "properties" in sub and sub.get("type") in ("object", ["object", "null"]):
            out.extend(_fields(sub, path + "."))
    return out


def _lookup(recipe: Mapping[str, Any], path: str) -> Any:
    node: Any = recipe
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def show(loaded: Loaded) -> RenderableType:
    """The resolved recipe as JSON, then every documented field with this recipe's value."""
    recipe = loaded.resolved
    text = json.dumps(recipe, indent=2)
    table = Table(title="fields", title_justify="left")
    table.add_column("field", no_wrap=True)
    table.add_column("value")
    table.add_column("description")
    for path, sub in _fields(RECIPE_SCHEMA):
        value = _lookup(recipe, path)
        if isinstance(value, dict) and "properties" in sub:
            shown = ""  # its fields follow on their own rows
        else:
            shown = json.dumps(value)
            shown = shown if len(shown) <= 60 else shown[:57] + "..."
        table.add_row(path, shown, sub.get("description", ""))
    return Group(
        f"recipe {recipe['name']}"
        + (f" ({loaded.ref})" if loaded.ref != recipe["name"] else "")
        + (
            f" with {', '.join(f'{k}={json.dumps(v)}' for k, v in loaded.overrides.items())}"
            if loaded.overrides
            else ""
        ),
        Syntax(text, "json", theme="ansi_dark", background_color="default"),
        table,
    )


# --- hfpipe recipes [list | show NAME] -------------------------------------------------------------------


def add_to(sub: Subparsers) -> None:
    """`hfpipe recipes` and its actions: arguments and help."""
    actions, listed = listing_command(
        sub,
        "recipes",
        "list the recipes, or show one resolved",
        "the recipes with task, instances and estimated cost",
    )
    listed.add_argument("--json", action="store_true", help="print the list as JSON")
    listed.set_defaults(func=cmd_list, command_parser=listed)
    show_ = actions.add_parser(
        "show", help="one recipe (NAME or a path), resolved with its defaults, and every documented field"
    )
    show_.add_argument("name", metavar="NAME", help="recipe name or path")
    show_.add_argument(
        "--set",
        dest="sets",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override one recipe field before showing it (repeatable)",
    )
    show_.add_argument("--json", action="store_true", help="print the resolved recipe as JSON only")
    show_.set_defaults(func=cmd_show, command_parser=show_)


def cmd_list(args: argparse.Namespace) -> int:
    """The recipes with task, instances and estimated cost."""
    if args.json:
        sys.stdout.write(json_text.dumps(recipes_summary(), indent=2) + "\n")
    else:
        terminal.console().print(recipes_table())
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    """One recipe resolved, with its documented fields."""
    loaded = load(args.name, args.sets)
    if args.json:
        # Only the document, so `hfpipe recipes show NAME --json | jq .training` works.
        sys.stdout.write(json_text.dumps(loaded.resolved, indent=2) + "\n")
    else:
        terminal.console().print(show(loaded))
    return 0
