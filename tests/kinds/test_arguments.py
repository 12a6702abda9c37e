"""The manifest of the training scripts' arguments is what their parsers accept today, and a misspelled
hyperparameter is refused before anything is created."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hfpipe.core.recipe.recipes import available_recipes, resolve_recipe
from hfpipe.core.recipe.schema import RecipeError
from hfpipe.kinds import arguments

ROOT = Path(__file__).resolve().parents[2]


def test_the_manifest_is_not_stale() -> None:
    """Regenerate with `python training_code/arguments_manifest.py > hfpipe/kinds/arguments.json` when a
    script's arguments change."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "arguments_manifest", ROOT / "training_code" / "arguments_manifest.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert json.loads(arguments.MANIFEST.read_text()) == module.manifest()


def test_every_recipe_passes_and_every_script_is_listed() -> None:
    for name in available_recipes():
        recipe = resolve_recipe(recipe_name=name)
        assert arguments.accepted(recipe["training"]["entry_point"]) is not None, name


@pytest.mark.parametrize(
    ("typo", "meant"),
    [("epochs", "num_train_epochs"), ("learning_rte", "learning_rate"), ("per_device_batch_size", None)],
)
def test_a_misspelled_hyperparameter_is_refused_naming_what_was_meant(typo: str, meant: str | None) -> None:
    with pytest.raises(RecipeError) as err:
        resolve_recipe(recipe_name="tiny-lora", overrides={f"training.hyperparameters.{typo}": 1})
    message = str(err.value)
    assert message.startswith(f"recipe.training.hyperparameters.{typo}: not an argument of run_clm.py")
    if meant:
        assert f"did you mean {meant}" in message


def test_a_recipes_own_entry_point_is_not_checked() -> None:
    assert arguments.accepted("my_own_train.py") is None
    assert arguments.unknown("my_own_train.py", ["anything"]) == []


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        (
            "learning_rate=abc",
            "learning_rate: 'abc' is not accepted by run_clm.py's parser; accepted: float (a number, e.g. 2e-05)",
        ),
        ("max_steps=2.5", "max_steps: 2.5 is not accepted by run_clm.py's parser; accepted: int"),
        ("max_steps=true", "max_steps: True is not accepted by run_clm.py's parser; accepted: int"),
        (
            "bf16=maybe",
            "bf16: 'maybe' is not accepted by run_clm.py's parser; accepted: bool (true or false)",
        ),
        (
            "save_strategy=step",
            "save_strategy: 'step' is not accepted by run_clm.py's parser; accepted: one of no, steps, epoch, "
            "best; did you mean steps?",
        ),
    ],
)
def test_a_value_the_scripts_parser_would_refuse_is_refused_naming_the_type(
    setting: str, message: str
) -> None:
    with pytest.raises(RecipeError) as err:
        resolve_recipe(recipe_name="tiny-lora", overrides=[f"training.hyperparameters.{setting}"])
    assert str(err.value).startswith(f"recipe.training.hyperparameters.{message}")


@pytest.mark.parametrize("setting", ["learning_rate=3e-4", "learning_rate=1", 'max_steps="8"', "bf16=false"])
def test_a_value_the_parser_converts_is_accepted(setting: str) -> None:
    resolve_recipe(recipe_name="tiny-lora", overrides=[f"training.hyperparameters.{setting}"])


#: Values as a recipe holds them (JSON), each becoming one command-line word.
VALUES = [
    8,
    2.5,
    2e-05,
    -1,
    True,
    False,
    "abc",
    "8",
    "2.5",
    "yes",
    "N",
    "steps",
    "epoch",
    "best",
    "no",
    "",
    {"a": 1},
]


def test_the_manifest_converts_every_value_as_the_scripts_parsers_do() -> None:
    """Ground truth: the word the training toolkit passes for each value (its own to_cmd_args), given to the
    action of each script's real HfArgumentParser, converted and checked against its choices by argparse."""
    import argparse
    import importlib.util
    import sys

    from sagemaker_training.mapping import to_cmd_args
    from transformers import HfArgumentParser

    for value in VALUES:
        assert arguments.command_line_word(value) == to_cmd_args({"x": value})[1], value
    sys.path.insert(0, str(ROOT / "training_code"))
    try:
        for path in sorted((ROOT / "training_code").glob("run_*.py")):
            spec = importlib.util.spec_from_file_location(f"_types_{path.stem}", path)
            assert spec is not None and spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            sys.modules[spec.name] = module
            spec.loader.exec_module(module)
            parser = HfArgumentParser(module.ARGUMENT_TYPES)
            actions = {a.dest: a for a in parser._actions if f"--{a.dest}" in a.option_strings}
            for name, field_spec in arguments._manifest()[path.name].items():
                if field_spec["type"] == "other":
                    continue
                for value in VALUES:
                    word = arguments.command_line_word(value)
                    try:
                        parser._check_value(actions[name], parser._get_value(actions[name], word))
                        converts = True
                    except argparse.ArgumentError:
                        converts = False
                    refused = bool(arguments.mistyped(path.name, {name: value}))
                    assert refused is not converts, (path.name, name, value)
    finally:
        sys.path.remove(str(ROOT / "training_code"))
