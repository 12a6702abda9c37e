"""Print what each training script here accepts, as JSON: the field names of the dataclasses its parser reads
(`ARGUMENT_TYPES`: its own and transformers' TrainingArguments), under this environment's transformers, each
with the type its HfArgumentParser converts the command-line value with (the parser's own action, read from
the parser built here; no script runs):

    {"type": "int" | "float" | "bool" | "str"}           int(), float(), transformers' string_to_bool, str
    {"type": "choice", "choices": [...]}                 a Literal, an Enum or metadata choices
    {"type": "other", "python": NAME}                    a converter the command does not check (a dict, ...)

with "nargs": "+" added for a list field (each word converted so).

    python training_code/arguments_manifest.py > hfpipe/kinds/arguments.json

The command (`hfpipe`) reads that file to refuse a misspelled hyperparameter before anything is created;
tests/kinds/test_arguments.py fails when it is stale. Imports nothing of hfpipe (this folder ships alone).
"""

from __future__ import annotations

import argparse
import dataclasses
import enum
import importlib.util
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _spec(action: argparse.Action) -> dict[str, object]:
    """How the parser converts one argument's value (see the module docstring)."""
    from transformers.hf_argparser import string_to_bool

    converter = action.type
    spec: dict[str, object]
    if action.choices is not None:
        spec = {"type": "choice", "choices": [str(getattr(c, "value", c)) for c in action.choices]}
    elif isinstance(converter, type) and issubclass(converter, enum.Enum):
        spec = {"type": "choice", "choices": [str(member.value) for member in converter]}
    elif converter is string_to_bool:
        spec = {"type": "bool"}
    elif converter in (int, float, str):
        spec = {"type": converter.__name__}  # type: ignore[union-attr]
    else:
        spec = {"type": "other", "python": getattr(converter, "__name__", repr(converter))}
    if action.nargs == "+":
        spec["nargs"] = "+"
    return spec


def arguments(types: tuple[type, ...]) -> dict[str, dict[str, object]]:
    """{argument name: its conversion} for the parser of these dataclasses."""
    from transformers import HfArgumentParser

    parser = HfArgumentParser(types)
    names = {f.name for t in types for f in dataclasses.fields(t) if f.init}
    # A boolean field that defaults to True has a second action, --no_NAME (store_false): the field's own
    # action is the one spelled --NAME.
    return {
        a.dest: _spec(a) for a in parser._actions if a.dest in names and f"--{a.dest}" in a.option_strings
    }


def manifest() -> dict[str, object]:
    """{"transformers": version, "entry_points": {script: {argument name: its conversion}}} for every
    run_*.py here, and "trainer_arguments": {class name: {argument name: its conversion}} for transformers'
    TrainingArguments and Seq2SeqTrainingArguments."""
    import transformers

    if str(HERE) not in sys.path:
        sys.path.insert(0, str(HERE))
    scripts: dict[str, dict[str, dict[str, object]]] = {}
    for path in sorted(HERE.glob("run_*.py")):
        spec = importlib.util.spec_from_file_location(f"_manifest_{path.stem}", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
        spec.loader.exec_module(module)
        types = getattr(module, "ARGUMENT_TYPES", None)
        if types is None:
            raise SystemExit(f"{path.name}: no ARGUMENT_TYPES (the dataclasses its parser reads)")
        scripts[path.name] = arguments(tuple(types))
    from transformers import Seq2SeqTrainingArguments, TrainingArguments

    # What a recipe's own script's HfArgumentParser accepts when it takes transformers' classes as they are
    # (hfpipe/kinds/script_parser.py reads the script; these are the fields the classes add).
    trainers = {t.__name__: arguments((t,)) for t in (TrainingArguments, Seq2SeqTrainingArguments)}
    return {"transformers": transformers.__version__, "entry_points": scripts, "trainer_arguments": trainers}


if __name__ == "__main__":
    sys.stdout.write(json.dumps(manifest(), indent=1, sort_keys=True) + "\n")
