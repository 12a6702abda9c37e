"""The manifest of the training scripts' arguments is what their parsers accept today, and a misspelled
hyperparameter is refused before anything is created."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hfpipe.core.recipes import available_recipes, resolve_recipe
from hfpipe.core.schema import RecipeError
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
