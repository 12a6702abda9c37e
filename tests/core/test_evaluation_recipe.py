"""recipe.evaluation (hfpipe.core.recipe.schema: its field and check_evaluation) and the evaluation job's
arguments built from a recipe (hfpipe.core.recipe.evaluation.container_arguments)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from hfpipe.core.recipe.evaluation import DOCUMENT_SCHEMA, container_arguments
from hfpipe.core.recipe.recipes import load_recipe, resolve_recipe
from hfpipe.core.recipe.schema import RecipeError


def _with(name: str, evaluation: Any) -> dict[str, Any]:
    recipe = copy.deepcopy(load_recipe(name))
    recipe["evaluation"] = evaluation
    return recipe


def test_the_field_s_defaults_are_filled() -> None:
    checked = resolve_recipe(_with("tiny-mnli", {"data": "validation_mismatched", "metric": "macro_f1"}))
    assert checked["evaluation"] == {
        "data": "validation_mismatched",
        "metric": "macro_f1",
        "margin": 0.0,
        "confidence": 0.95,
        "resamples": 1000,
        "max_examples": None,
    }
    assert resolve_recipe(_with("tiny-qa", None))["evaluation"] is None  # not evaluated


@pytest.mark.parametrize(
    ("name", "evaluation", "said"),
    [
        (
            "tiny-qa",
            {"data": "training", "metric": "f1"},
            "recipe.evaluation.data: 'training' is not held-out data (the training data or the model); "
            "accepted: ['validation']",
        ),
        (
            "tiny-qa",
            {"data": "model", "metric": "f1"},
            "recipe.evaluation.data: 'model' is not held-out data",
        ),
        (
            "tiny-qa",
            {"data": "test", "metric": "f1"},
            "recipe.evaluation.data: 'test' is not a channel of the recipe; accepted: ['validation']",
        ),
        (
            "tiny-qa",
            {"data": "validation", "metric": "accuracy"},
            "recipe.evaluation.metric: 'accuracy' is not scored for task 'question-answering'; accepted: "
            "['exact_match', 'f1']",
        ),
        (
            "tiny-lora",
            {"data": "validation", "metric": "f1"},
            "recipe.evaluation.metric: 'f1' is not scored for task 'summarization'; accepted: ['rouge1', "
            "'rouge2', 'rougeL', 'rougeLsum', 'perplexity']",
        ),
        ("bert-large-squad-ddp", {"data": "train", "metric": "f1"}, "recipe.evaluation.data: 'train' is not"),
        (
            "tiny-qa",
            {"data": "validation", "metric": "f1", "confidence": 0.3},
            "recipe.evaluation.confidence: 0.3 is below the minimum 0.5",
        ),
        (
            "tiny-qa",
            {"data": "validation", "metric": "f1", "resamples": 20000},
            "recipe.evaluation.resamples: 20000 is above the maximum 10000",
        ),
        (
            "tiny-qa",
            {"data": "validation", "metric": "f1", "margin": -1},
            "recipe.evaluation.margin: -1 is below the minimum 0",
        ),
        ("tiny-qa", {"data": "validation"}, "recipe.evaluation.metric: required field is missing"),
        (  # newcomer finding 2: a verdict from a handful of examples (docs/evaluation.md: at least 11)
            "tiny-mnli",
            {"data": "validation", "metric": "accuracy", "max_examples": 2},
            "recipe.evaluation.max_examples: 2 is below the minimum 11",
        ),
        *(
            (
                "bert-large-squad-ddp",
                {"data": split, "metric": "f1"},
                f"recipe.evaluation.data: {split!r} is not a held-out split of the Hub data set 'rajpurkar/squad' nor a "
                "channel of the recipe; accepted: a split of ['validation', 'validation_matched', "
                "'validation_mismatched', 'test']",
            )
            for split in ("nonexistent", "unsupervised", "Train")
        ),
    ],
)
def test_a_refusal_names_the_field_and_what_is_accepted(name: str, evaluation: Any, said: str) -> None:
    with pytest.raises(RecipeError) as refused:
        resolve_recipe(_with(name, evaluation))
    assert str(refused.value).startswith(said), str(refused.value)


@pytest.mark.parametrize(
    "test",
    ["fixtures/tiny-mnli/train/", "fixtures/tiny-mnli/train", "fixtures/tiny-mnli/train/part/", "fixtures/"],
)
def test_a_held_out_channel_at_the_training_data_s_path_is_refused(test: str) -> None:
    """Newcomer finding 7: `--set training.channels.test=<the training channel's path> --set
    evaluation.data=test` was accepted; docs/evaluation.md: 'never the training data'."""
    recipe = _with("tiny-mnli", {"data": "test", "metric": "accuracy"})
    recipe["training"]["channels"]["test"] = test
    with pytest.raises(RecipeError, match=r"^recipe.evaluation.data: channel 'test' \("):
        resolve_recipe(recipe)
    recipe["training"]["channels"]["test"] = "fixtures/tiny-mnli/train-held-out/"  # a sibling is held out
    assert resolve_recipe(recipe)["evaluation"]["data"] == "test"


def test_a_hub_recipe_is_evaluated_on_a_split_of_its_data_set() -> None:
    recipe = resolve_recipe(load_recipe("roberta-large-mnli-mp"))
    assert recipe["evaluation"]["data"] == "validation_matched"
    args = container_arguments(recipe, champion=True)
    assert args[:11] == [
        "--task", "text-classification", "--metric", "accuracy", "--margin", "0.0",
        "--confidence", "0.95", "--resamples", "1000", "--champion",
    ]  # fmt: skip
    assert args[args.index("--dataset-name") :][:6] == [
        "--dataset-name", "nyu-mll/glue", "--split", "validation_matched", "--dataset-config", "mnli",
    ]  # fmt: skip
    assert args[args.index("--max-seq-length") + 1] == "128"


def test_a_channel_recipe_names_its_channel_and_what_predicting_needs() -> None:
    args = container_arguments(resolve_recipe(load_recipe("tiny-qa")), champion=False)
    assert "--champion" not in args and "--dataset-name" not in args
    assert args[args.index("--channel") :] == [
        "--channel", "validation", "--max-seq-length", "64", "--doc-stride", "32",
    ]  # fmt: skip
    with pytest.raises(RecipeError, match=r"^recipe.evaluation: recipe 'x' has none"):
        container_arguments({"name": "x", "evaluation": None}, champion=False)


def test_the_document_schema_is_valid_draft_07() -> None:
    import jsonschema

    jsonschema.Draft7Validator.check_schema(DOCUMENT_SCHEMA)


def _plan(recipe: dict[str, Any]) -> Any:
    from plan_config import dev_config

    from hfpipe.core.run.plan import build_plan
    from hfpipe.local.engine.quotas import QuotaTable, default_quotas

    return build_plan(
        {"recipe": recipe}, "plan-1", dev_config(), QuotaTable(default_quotas()).client("eu-west-1")
    )


@pytest.mark.parametrize(
    ("training", "test"),
    [
        (
            None,
            "s3://{bucket}/fixtures/tiny-mnli/train/",
        ),  # the URI the relative training channel resolves to
        (None, "s3://{bucket}/fixtures/tiny-mnli/train/part"),  # inside it
        (None, "s3://{bucket}/fixtures"),  # holding it
        ("s3://{bucket}/fixtures/tiny-mnli/train/", "fixtures/tiny-mnli/train/"),  # the other way round
    ],
)
def test_a_held_out_channel_resolving_to_the_training_data_is_refused_by_the_plan(
    training: str | None, test: str
) -> None:
    """Newcomer finding 1 (h-nc-eval2): `training.channels.test` set to the S3 URI the relative `training`
    channel resolves to was accepted, and the evaluation job read the training data. The Plan (so the Lambda,
    the dry run and local mode, which all build it) compares the channels as resolved."""
    from plan_config import dev_config

    bucket = dev_config().data_bucket
    recipe = _with("tiny-mnli", {"data": "test", "metric": "accuracy"})
    if training is not None:
        recipe["training"]["channels"]["training"] = training.format(bucket=bucket)
    recipe["training"]["channels"]["test"] = test.format(bucket=bucket)
    with pytest.raises(RecipeError, match=r"^recipe.evaluation.data: channel 'test' \(.*, that is s3://"):
        _plan(recipe)
    recipe["training"]["channels"]["test"] = f"s3://{bucket}/fixtures/tiny-mnli/train-held-out/"  # a sibling
    inputs = _plan(recipe).evaluation.request["ProcessingInputs"]
    assert [i["S3Input"]["S3Uri"] for i in inputs if i["InputName"] == "data"] == [
        f"s3://{bucket}/fixtures/tiny-mnli/train-held-out/"
    ]
