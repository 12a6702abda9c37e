"""A recipe's values checked against what will read them, before anything is created: the project's training
scripts' parsers (every hyperparameter one of their arguments, its value one they convert; hfpipe/kinds/arguments.py)
and SageMaker's instance type enums (botocore's service model, as hfpipe/core/api_shapes.json carries it).

Run by `hfpipe.core.recipe.recipes.resolve_recipe` after the schema and `hfpipe.core.validate`, so the command,
local mode and the Plan Lambda refuse the same values with the same one line. Stdlib only.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any

from hfpipe.core import api_shapes
from hfpipe.core.recipe.typed import Recipe
from hfpipe.core.validate import RecipeError
from hfpipe.kinds import arguments, script_parser


def check(recipe: Recipe) -> None:
    """Every rule of this module on a schema-checked recipe."""
    t, s = recipe["training"], recipe["serving"]
    instance_type(
        t["instance_type"], "recipe.training.instance_type", "TrainingInstanceType", "CreateTrainingJob"
    )
    if recipe["deploy"]:
        instance_type(
            s["instance_type"],
            "recipe.serving.instance_type",
            "ProductionVariantInstanceType",
            "CreateEndpointConfig",
        )
    if t.get("source") is None:  # a team's own script: its parser is not known here (said in the plan notes)
        script_arguments(t["entry_point"], t["hyperparameters"], "recipe.training.hyperparameters")


def script_arguments(entry_point: str, hp: Mapping[str, Any], field: str) -> None:
    """Every hyperparameter is an argument the project's script accepts, with a value its parser converts
    (hfpipe/kinds/arguments.json, made from the scripts' own parsers); a recipe's own entry point is not
    checked (nothing here knows it)."""
    for name, close in arguments.unknown(entry_point, list(hp)):
        hint = f"did you mean {' or '.join(close)}? " if close else ""
        raise RecipeError(
            f"{field}.{name}: not an argument of {entry_point}; {hint}accepted: the arguments of its parser "
            f"(`python training_code/{entry_point} --help`; listed in hfpipe/kinds/arguments.json)"
        )
    for name, value, expected in arguments.mistyped(entry_point, hp):
        raise RecipeError(
            f"{field}.{name}: {value!r} is not accepted by {entry_point}'s parser; accepted: {expected}"
        )


def own_script_arguments(
    entry_point: str, text: str, hp: Mapping[str, Any], field: str, notes: list[str] | None = None
) -> str | None:
    """A recipe's own script's hyperparameters checked against its parser as read from `text` without running
    it (hfpipe/kinds/script_parser.py), as the training toolkit calls the script (sagemaker_training's
    mapping.to_cmd_args: `--name value`, a one-letter name as `-k value`): a name it does not take, a value it
    would refuse or an argument it requires and is not given is a RecipeError; what it would misread
    (`type=bool`) is added to `notes`; the reason when its parser cannot be read that way, or which given
    names it could not see where it is only partly readable (None: all checked)."""
    parser = script_parser.read(text)
    if parser.reason is not None:
        return parser.reason
    short = {n: v for n, v in hp.items() if len(n) == 1}
    given = {_option(n, parser): v for n, v in hp.items() if len(n) != 1}
    unseen = _unknown(entry_point, parser, given, short, field)
    for specs, values in ((parser.specs, given), (parser.short, short)):
        for name, value, expected in arguments.mistyped_in(specs, values):
            raise RecipeError(
                f"{field}.{name}: {value!r} is not accepted by {entry_point}'s parser; accepted: {expected}"
            )
    missing = sorted(
        n for n in parser.required if n.lstrip("-") not in (short if n.startswith("-") else given)
    )
    if missing and parser.partial is None:
        raise RecipeError(
            f"{field}: {entry_point}'s parser requires {', '.join(missing)} (required=True, or a dataclass "
            "field without a default), which the recipe does not give; accepted: hyperparameters that give "
            f"{'it' if len(missing) == 1 else 'them'} (the training toolkit passes only the hyperparameters)"
        )
    for name in sorted(set(given) | set(short)):
        if name in parser.bool_typed and notes is not None:
            notes.append(
                f"{field}.{name}: {entry_point} reads it with type=bool, which takes every non-empty word as "
                f"True ({arguments.command_line_word(hp.get(name, given.get(name)))!r} included); pass a value "
                "only when you mean True, or change the script to parse the word"
            )
    if unseen:
        return f"{parser.partial}; {', '.join(unseen)} could not be checked (the others were)"
    return None


def _unknown(
    entry_point: str,
    parser: script_parser.Parser,
    given: Mapping[str, Any],
    short: Mapping[str, Any],
    field: str,
) -> list[str]:
    """The given names the parser does not declare: refused when the file shows its whole parser, returned
    (not refused) when it takes more arguments than the file shows (`parser.partial`)."""
    unknown = arguments.unknown_in(parser.specs, list(given))
    one_letter = [n for n in short if n not in parser.short]
    if parser.partial is not None:
        return sorted([n for n, _ in unknown] + one_letter)
    for name in one_letter:
        has_long = "; it takes --" + name + ", which the toolkit never passes" if name in parser.specs else ""
        raise RecipeError(
            f"{field}.{name}: the training toolkit passes a one-letter hyperparameter as -{name} (not --{name}), "
            f"and {entry_point}'s parser takes no -{name}{has_long}; accepted: its one-letter options "
            f"{sorted('-' + k for k in parser.short)} or a longer name"
        )
    for name, close in unknown:
        some = close + [n for n in sorted(parser.specs) if n not in close][: max(0, 5 - len(close))]
        hint = f"did you mean {' or '.join(close)}? " if close else ""
        raise RecipeError(
            f"{field}.{name}: not an argument of {entry_point} (the recipe's own source, its parser read "
            f"without running it); {hint}accepted: {_its_arguments(some, len(parser.specs))}"
        )
    return []


def _its_arguments(some: list[str], count: int) -> str:
    """The parser's arguments as an error names them: how many, and a few of them."""
    if count == 0:
        return "none (its parser takes no arguments)"
    if count == 1:
        return f"its one argument, {some[0]}"
    return f"its {count} arguments, e.g. {', '.join(some)}"


def _option(name: str, parser: script_parser.Parser) -> str:
    """The argument `--name` reaches: itself, else (argparse's allow_abbrev) the one option it is a unique
    prefix of."""
    if name in parser.specs or not parser.abbrev:
        return name
    longer = [n for n in parser.specs if n.startswith(name)]
    return longer[0] if len(longer) == 1 else name


def instance_type(value: str, field: str, shape: str, operation: str) -> None:
    """An instance type SageMaker's `operation` takes (the enum `shape`), with the close ones when it is not:
    a typo fails here, not at the quota look-up, which knows no quota for a type that does not exist."""
    accepted = api_shapes.enum(shape)
    if value in accepted:
        return
    close = difflib.get_close_matches(value, accepted, n=3)
    raise RecipeError(
        f"{field}: {value!r} is not an instance type {operation} takes; "
        + (f"did you mean {' or '.join(close)}? " if close else "")
        + f"accepted: one of the {len(accepted)} values of SageMaker's {shape} (botocore's service model)"
    )
