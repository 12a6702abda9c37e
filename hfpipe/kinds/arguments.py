"""The arguments each of the project's training scripts accepts, so a misspelled hyperparameter fails before
anything is created (Plan, `hfpipe start`, `hfpipe recipes show`, local mode), not inside a billed job.

`arguments.json` beside this module is generated from the scripts' own parsers (the field names of the
dataclasses each script hands to HfArgumentParser: its own and transformers' TrainingArguments, under the
training container's transformers version) by

    python training_code/arguments_manifest.py > hfpipe/kinds/arguments.json

and `tests/kinds/test_arguments.py` fails when the file is stale. Reading it is stdlib only (the Plan Lambda
carries it); generating it imports the training scripts, so that lives with them.
An entry point that is not one of the project's scripts (a recipe's own code) is not checked, and the error
of a misspelling elsewhere cannot be caught here: that is stated, not guessed.
"""

from __future__ import annotations

import difflib
import json
from functools import cache
from pathlib import Path

MANIFEST = Path(__file__).with_name("arguments.json")


@cache
def _manifest() -> dict[str, list[str]]:
    data = json.loads(MANIFEST.read_text())
    return {str(k): list(v) for k, v in data["entry_points"].items()}


def accepted(entry_point: str) -> frozenset[str] | None:
    """The argument names `entry_point` accepts, or None for a script that is not the project's."""
    names = _manifest().get(entry_point)
    return frozenset(names) if names is not None else None


def unknown(entry_point: str, names: list[str]) -> list[tuple[str, list[str]]]:
    """(name, close matches) for each name the script does not accept; [] for a script not the project's."""
    known = accepted(entry_point)
    if known is None:
        return []
    return [(n, _close(n, sorted(known))) for n in names if n not in known]


def _close(name: str, known: list[str]) -> list[str]:
    """Up to three likely meant names: spelled alike, else containing what was typed (epochs ->
    num_train_epochs)."""
    return difflib.get_close_matches(name, known, n=3) or [k for k in known if name in k][:3]
