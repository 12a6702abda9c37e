"""The arguments each of the project's training scripts accepts, so a misspelled hyperparameter fails before
anything is created (Plan, `hfpipe start`, `hfpipe recipes show`, local mode), not inside a billed job.

`arguments.json` beside this module is generated from the scripts' own parsers (the field names of the
dataclasses each script hands to HfArgumentParser: its own and transformers' TrainingArguments, under the
training container's transformers version, each with the type the parser converts its value with) by

    python training_code/arguments_manifest.py > hfpipe/kinds/arguments.json

and `tests/kinds/test_arguments.py` fails when the file is stale. Reading it is stdlib only (the Plan Lambda
carries it); generating it imports the training scripts, so that lives with them.
A recipe's own script (training.source) is not in the manifest: hfpipe/kinds/script_parser.py reads its parser
from its text, with the manifest's "trainer_arguments" for the transformers classes it takes.

A value is checked as the script will read it: the training toolkit passes each hyperparameter on the command
line as `str(value)` of its JSON value (an object as `k=v,k2=v2`; sagemaker_training.mapping.to_cmd_args),
and the parser converts that word with the field's type (`int`, `float`, transformers' `string_to_bool`, a
choice); a converter the manifest marks "other" (a dict, accelerate's ParallelismConfig) is not checked.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

MANIFEST = Path(__file__).with_name("arguments.json")


#: string_to_bool's words (transformers.hf_argparser), compared lower-cased.
_TRUE, _FALSE = ("yes", "true", "t", "y", "1"), ("no", "false", "f", "n", "0")


@cache
def _data() -> dict[str, Any]:
    return dict(json.loads(MANIFEST.read_text()))


def _manifest() -> dict[str, dict[str, dict[str, Any]]]:
    return {str(k): dict(v) for k, v in _data()["entry_points"].items()}


def trainer_arguments(class_name: str) -> dict[str, dict[str, Any]] | None:
    """The arguments transformers' TrainingArguments or Seq2SeqTrainingArguments give a parser (None for
    another name), under the training container's transformers (the manifest's "transformers")."""
    found = _data()["trainer_arguments"].get(class_name)
    return dict(found) if found is not None else None


def accepted(entry_point: str) -> frozenset[str] | None:
    """The argument names `entry_point` accepts, or None for a script that is not the project's."""
    names = _manifest().get(entry_point)
    return frozenset(names) if names is not None else None


def unknown(entry_point: str, names: list[str]) -> list[tuple[str, list[str]]]:
    """(name, close matches) for each name the script does not accept; [] for a script not the project's."""
    specs = _manifest().get(entry_point)
    return [] if specs is None else unknown_in(specs, names)


def unknown_in(specs: Mapping[str, Any], names: list[str]) -> list[tuple[str, list[str]]]:
    """(name, close matches) for each name not among `specs`' arguments."""
    return [(n, _close(n, sorted(specs))) for n in names if n not in specs]


def command_line_word(value: Any) -> str:
    """The word the script's parser gets for a hyperparameter's JSON value (the toolkit's to_cmd_args)."""
    if isinstance(value, Mapping):
        return ",".join(f"{k}={v}" for k, v in sorted(value.items()))
    return str(value)


def _converts(spec: Mapping[str, Any], word: str) -> bool:
    kind = spec["type"]
    try:
        if kind == "int":
            int(word)
        elif kind == "float":
            float(word)
    except ValueError:
        return False
    if kind == "bool":
        return word.lower() in _TRUE + _FALSE
    if kind == "choice":
        return word in spec["choices"]
    # argparse's store_true & co: `--name value` leaves the value unrecognized; str and other converters
    # are not checked here.
    return kind != "flag"


def expected(spec: Mapping[str, Any]) -> str:
    """What a value of this argument may be, in words."""
    described = {
        "int": "int (a whole number, e.g. 8)",
        "float": "float (a number, e.g. 2e-05)",
        "bool": "bool (true or false)",
        "str": "str",
        "flag": "nothing: it is a flag without a value (argparse's store_true and the like), and the training "
        "toolkit passes every hyperparameter as `--name value`; give it a type (e.g. a bool converter)",
    }.get(spec["type"])
    if described is None:
        described = f"one of {', '.join(spec.get('choices') or [])}"
    return described + (" (or several, space-separated)" if spec.get("nargs") == "+" else "")


def mistyped(entry_point: str, hp: Mapping[str, Any]) -> list[tuple[str, Any, str]]:
    """(name, value, the type expected) for each hyperparameter the script's parser would refuse as typed;
    [] for a script not the project's (names it does not know are `unknown`'s)."""
    return mistyped_in(_manifest().get(entry_point) or {}, hp)


def mistyped_in(specs: Mapping[str, Any], hp: Mapping[str, Any]) -> list[tuple[str, Any, str]]:
    """(name, value, the type expected) for each hyperparameter whose word `specs`' parser would refuse."""
    found = []
    for name, value in hp.items():
        spec, word = specs.get(name), command_line_word(value)
        if spec is None or _converts(spec, word):
            continue
        close = difflib.get_close_matches(word, spec.get("choices") or [], n=1)
        found.append((name, value, expected(spec) + (f"; did you mean {close[0]}?" if close else "")))
    return found


def _close(name: str, known: list[str]) -> list[str]:
    """Up to three likely meant names: spelled alike, else containing what was typed (epochs ->
    num_train_epochs)."""
    return difflib.get_close_matches(name, known, n=3) or [k for k in known if name in k][:3]
