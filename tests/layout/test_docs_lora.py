"""docs/lora.md shows the LoRA recipe's hyperparameters as the recipe has them, no more and no less."""

from __future__ import annotations

import json
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def documented_hyperparameters(text: str) -> dict:
    block = text.split("Recipe `hyperparameters` (`recipes/bloomz-7b1-lora-samsum.json`", 1)[1]
    match = re.search(r"```json\n(.*?)```", block, flags=re.S)
    assert match, "docs/lora.md has no JSON block after the recipe's hyperparameters heading"
    return json.loads(match.group(1))


def test_the_documented_hyperparameters_are_the_recipes() -> None:
    recipe = json.loads((REPO / "recipes" / "bloomz-7b1-lora-samsum.json").read_text())
    documented = documented_hyperparameters((REPO / "docs" / "lora.md").read_text())
    assert documented == recipe["training"]["hyperparameters"]


def test_a_setting_the_recipe_lacks_is_caught() -> None:
    text = (REPO / "docs" / "lora.md").read_text().replace('"do_train": true', '"optim": "adafactor"')
    recipe = json.loads((REPO / "recipes" / "bloomz-7b1-lora-samsum.json").read_text())
    assert documented_hyperparameters(text) != recipe["training"]["hyperparameters"]
