"""A recipe's own script's parser, read from its text without running it, checks the recipe's hyperparameters;
a parser that cannot be read so is said to be not checked, with the reason."""

from __future__ import annotations

import re

import pytest
from notebooks import SQUAD_HYPERPARAMETERS

from hfpipe.core.recipe.acceptance import own_script_arguments
from hfpipe.core.validate import RecipeError
from hfpipe.kinds import script_parser

FIELD = "recipe.training.hyperparameters"

ARGPARSE = """
import argparse
parser = argparse.ArgumentParser()
parser.add_argument("--epochs", "-e", type=int, default=1)
parser.add_argument("--learning-rate", type=float)
parser.add_argument("--optimizer", choices=["adam", "sgd"])
parser.add_argument("--fp16", action="store_true")
parser.add_argument("--model_name_or_path")
args = parser.parse_args()
"""

HF = """
from dataclasses import dataclass, field
from typing import Literal, Optional
from transformers import HfArgumentParser, TrainingArguments

@dataclass
class ModelArguments:
    model_name_or_path: str = field(metadata={"help": "a hub id"})
    cache_dir: Optional[str] = None
    internal: int = field(default=0, init=False)

@dataclass
class DataTrainingArguments:
    dataset_name: str | None = None
    max_seq_length: int = 384
    doc_stride: "int" = 128
    padding: Literal["max_length", "longest"] = "max_length"
    pad_to_max_length: bool = True

def main():
    parser = HfArgumentParser((ModelArguments, DataTrainingArguments, TrainingArguments))
    model_args, data_args, training_args = parser.parse_args_into_dataclasses()
"""


def check(text: str, **hp: object) -> str | None:
    return own_script_arguments("train.py", text, hp, FIELD)


def test_argparse_arguments_are_read_with_their_types() -> None:
    parser = script_parser.read(ARGPARSE)
    assert parser.reason is None
    assert parser.specs == {
        "epochs": {"type": "int"},
        "learning-rate": {"type": "float"},
        "optimizer": {"type": "choice", "choices": ["adam", "sgd"]},
        "fp16": {"type": "flag"},
        "model_name_or_path": {"type": "str"},
    }
    assert check(ARGPARSE, epochs=2, optimizer="sgd", model_name_or_path="bert") is None
    assert check(ARGPARSE, epo=2) is None  # argparse's allow_abbrev: a unique prefix is the option


@pytest.mark.parametrize(
    ("hp", "message"),
    [
        (
            {"epoch_count": 2},
            r"epoch_count: not an argument of train\.py .* accepted: its 5 arguments, e\.g\. ",
        ),
        ({"learning_rate": 0.1}, r"learning_rate: .*did you mean learning-rate\?"),
        ({"epochs": "two"}, r"epochs: 'two' is not accepted by train\.py's parser; accepted: int"),
        ({"optimizer": "adamw"}, r"optimizer: 'adamw' .* accepted: one of adam, sgd; did you mean adam\?"),
        ({"fp16": True}, r"fp16: True .* accepted: nothing: it is a flag without a value"),
    ],
)
def test_argparse_refuses_a_name_or_value_in_one_line(hp: dict[str, object], message: str) -> None:
    with pytest.raises(RecipeError, match=rf"^{FIELD}\.{message}") as err:
        check(ARGPARSE, **hp)
    assert "\n" not in str(err.value)


def test_hf_argument_parser_reads_the_scripts_dataclasses_and_transformers_training_arguments() -> None:
    parser = script_parser.read(HF)
    assert parser.reason is None
    assert parser.specs["max_seq_length"] == {"type": "int"} and parser.specs["doc_stride"] == {"type": "int"}
    assert parser.specs["cache_dir"] == {"type": "str"} and parser.specs["dataset_name"] == {"type": "str"}
    assert parser.specs["padding"] == {"type": "choice", "choices": ["max_length", "longest"]}
    assert parser.specs["pad_to_max_length"] == {"type": "bool"}
    assert "internal" not in parser.specs  # init=False: not an argument
    assert {"learning_rate", "num_train_epochs", "fp16", "output_dir"} <= set(parser.specs)
    # The notebook's settings (every key the test wrote here before), with a learning rate as well.
    original = {**SQUAD_HYPERPARAMETERS, "learning_rate": 3e-5}
    assert check(HF, **original) is None
    with pytest.raises(RecipeError, match=rf"^{FIELD}\.max_seq_lenght: .*did you mean max_seq_length"):
        check(HF, max_seq_lenght=384)
    with pytest.raises(RecipeError, match=rf"^{FIELD}\.do_train: 'maybe' .* accepted: bool"):
        check(HF, do_train="maybe")


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        (ARGPARSE.replace("parse_args()", "parse_known_args()"), "parse_known_args"),
        ("import sys\nprint(sys.argv)\n", "no argparse.ArgumentParser or HfArgumentParser"),
        (ARGPARSE.replace('"--epochs", "-e"', "*names"), r"\*args or \*\*kwargs"),
        (ARGPARSE.replace("type=int, default=1", "**options"), r"\*args or \*\*kwargs"),
        (ARGPARSE.replace('"--epochs"', 'f"--{name}"'), "computed"),
        (
            HF.replace("TrainingArguments))", "TrainingArguments, OtherArguments))"),
            "OtherArguments, which is",
        ),
        (
            HF.replace(
                "parse_args_into_dataclasses()", "parse_args_into_dataclasses(return_remaining_strings=True)"
            ),
            "return_remaining_strings",
        ),
        ("def broken(:\n", "not valid Python"),
    ],
)
def test_a_parser_that_cannot_be_read_statically_is_not_checked_with_the_reason(
    text: str, reason: str
) -> None:
    assert script_parser.read(text).reason is not None
    said = check(text, anything_at_all=1)
    assert said is not None
    assert re.search(reason, said), said


# --- as the training toolkit calls the script ----------------------------------------------------------------

ONE_LETTER = """
import argparse
parser = argparse.ArgumentParser()
parser.add_argument("-k", type=int, default=5)
parser.add_argument("--j", type=int, default=1)
args = parser.parse_args()
"""


def test_a_one_letter_hyperparameter_is_checked_as_the_toolkit_passes_it() -> None:
    """sagemaker_training's mapping.to_cmd_args passes a one-letter name as `-k`, a longer one as `--name`."""
    from sagemaker_training import mapping

    assert mapping.to_cmd_args({"k": 3, "j": 1, "lr": 2}) == ["-j", "1", "-k", "3", "--lr", "2"]
    assert script_parser.read(ONE_LETTER).short == {"k": {"type": "int"}}
    assert check(ONE_LETTER, k=3) is None
    with pytest.raises(
        RecipeError, match=rf"^{FIELD}\.k: 'x' is not accepted by train\.py's parser; accepted: int"
    ):
        check(ONE_LETTER, k="x")
    with pytest.raises(
        RecipeError,
        match=rf"^{FIELD}\.j: the training toolkit passes a one-letter hyperparameter as -j \(not --j\), and "
        r"train\.py's parser takes no -j; it takes --j, which the toolkit never passes; accepted: its one-letter "
        r"options \['-k'\] or a longer name$",
    ):
        check(ONE_LETTER, j=2)


def test_type_bool_is_warned_and_a_missing_required_argument_is_caught() -> None:
    text = ARGPARSE.replace(
        'parser.add_argument("--model_name_or_path")',
        'parser.add_argument("--model_name_or_path", required=True)',
    ).replace(
        'parser.add_argument("--fp16", action="store_true")', 'parser.add_argument("--shuffle", type=bool)'
    )
    assert script_parser.read(text).required == {"model_name_or_path"}
    with pytest.raises(
        RecipeError,
        match=rf"^{FIELD}: train\.py's parser requires model_name_or_path \(required=True, or a dataclass field "
        r"without a default\), which the recipe does not give; accepted: hyperparameters that give it",
    ):
        check(text, epochs=1)
    notes: list[str] = []
    assert (
        own_script_arguments("train.py", text, {"model_name_or_path": "m", "shuffle": False}, FIELD, notes)
        is None
    )
    assert notes == [
        f"{FIELD}.shuffle: train.py reads it with type=bool, which takes every non-empty word as True ('False' "
        "included); pass a value only when you mean True, or change the script to parse the word"
    ]
    # HfArgumentParser: a field without a default is required (model_name_or_path in HF's ModelArguments).
    with pytest.raises(RecipeError, match=rf"^{FIELD}: train\.py's parser requires model_name_or_path"):
        check(HF, dataset_name="squad")


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        (
            ARGPARSE.replace(
                "argparse.ArgumentParser()", "argparse.ArgumentParser(parents=[common.parser()])"
            ),
            r"its parser also takes the arguments of its parents=\[\.\.\.\]",
        ),
        (
            ARGPARSE.replace(
                "args = parser.parse_args()", "add_model_args(parser)\nargs = parser.parse_args()"
            ),
            r"its parser is given to add_model_args\(\) \(line \d+\), which is not defined in the script",
        ),
    ],
    ids=["parents", "helper"],
)
def test_a_partly_readable_parser_checks_what_it_sees_and_names_what_it_cannot(
    text: str, reason: str
) -> None:
    said = check(text, epochs=2, lora_rank=8)
    assert said is not None and re.search(
        rf"{reason}.*; lora_rank could not be checked \(the others were\)$", said
    )
    assert check(text, epochs=2) is None
    with pytest.raises(RecipeError, match=rf"^{FIELD}\.epochs: 'two'"):
        check(text, epochs="two", lora_rank=8)
