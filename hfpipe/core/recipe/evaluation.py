"""A recipe's evaluation job, as the pipeline and the gate see it (docs/evaluation.md): the processing job's
paths and the entry point's arguments built from the recipe, and evaluation.json's schema, the one document
training_code/evaluate.py writes and the gate reads.

The scores themselves are computed in the container (training_code/eval_scores.py); nothing here recomputes
them. The task kinds' metrics are `hfpipe.kinds` TaskKind.metrics (recipe.evaluation.metric is checked
against them by hfpipe.core.recipe.schema.check_evaluation).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import fastjsonschema

from hfpipe.core.recipe.typed import Recipe
from hfpipe.core.validate import RecipeError
from hfpipe.kinds import TASK_KINDS

SCHEMA = "hfpipe.evaluation/1"
ENTRY_POINT = "evaluate.py"
#: The processing job's paths (CreateProcessingJob's ProcessingInputs[].S3Input.LocalPath and
#: ProcessingOutputConfig.Outputs[].S3Output.LocalPath; botocore's sagemaker model: ProcessingLocalPath).
PROCESSING_INPUT = "/opt/ml/processing/input"
INPUT_PATHS = {
    "data": f"{PROCESSING_INPUT}/data",
    "challenger": f"{PROCESSING_INPUT}/challenger",
    "champion": f"{PROCESSING_INPUT}/champion",
    "base": f"{PROCESSING_INPUT}/base",
    "code": f"{PROCESSING_INPUT}/code",
}
OUTPUT_PATH = "/opt/ml/processing/output"
DOCUMENT_NAME = "evaluation.json"
VERDICTS = ("better", "worse", "not_worse", "no_champion")


def container_arguments(recipe: Recipe, *, champion: bool) -> list[str]:
    """evaluate.py's arguments for a validated recipe with an `evaluation` field (AppSpecification's
    ContainerArguments after ContainerEntrypoint ["python3", "/opt/ml/processing/input/code/evaluate.py"]).

    A channel's data comes as the input `data`; a Hub split is read by the job itself (--dataset-name,
    --split), with no data input.
    """
    evaluation = recipe.get("evaluation")
    if evaluation is None:
        raise RecipeError(f"recipe.evaluation: recipe {recipe.get('name')!r} has none; nothing to evaluate")
    args = [
        *("--task", recipe["task"], "--metric", evaluation["metric"]),
        *(
            "--margin",
            repr(float(evaluation["margin"])),
            "--confidence",
            repr(float(evaluation["confidence"])),
        ),
        *("--resamples", str(evaluation["resamples"])),
    ]
    if evaluation.get("max_examples") is not None:
        args += ["--max-examples", str(evaluation["max_examples"])]
    if champion:
        args.append("--champion")
    hps = recipe["training"].get("hyperparameters") or {}
    if evaluation["data"] in (recipe["training"].get("channels") or {}):
        args += ["--channel", evaluation["data"]]
    else:
        args += ["--dataset-name", str(hps["dataset_name"]), "--split", evaluation["data"]]
        if hps.get("dataset_config_name"):
            args += ["--dataset-config", str(hps["dataset_config_name"])]
    for name, flag in TASK_KINDS[recipe["task"]].evaluation_arguments.items():
        if hps.get(name) is not None:
            args += [flag, str(hps[name])]
    return args


_SCORE = {
    "type": "object",
    "additionalProperties": False,
    "required": ["value", "n", "low", "high"],
    "properties": {
        "value": {"type": ["number", "null"]},
        "n": {"type": "integer", "minimum": 1},
        "low": {"type": ["number", "null"]},
        "high": {"type": ["number", "null"]},
    },
}
_SCORES = {
    "type": "object",
    "additionalProperties": False,
    "required": ["scores"],
    "properties": {"scores": {"type": "object", "minProperties": 1, "additionalProperties": _SCORE}},
}

#: evaluation.json (draft-07).
DOCUMENT_SCHEMA: dict[str, Any] = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "title": "hfpipe evaluation document",
    "type": "object",
    "additionalProperties": False,
    "required": [
        "schema",
        "task",
        "data",
        "rule",
        "challenger",
        "champion",
        "difference",
        "verdict",
        "reason",
        "seconds",
    ],
    "properties": {
        "schema": {"const": SCHEMA},
        "task": {"enum": list(TASK_KINDS)},
        "data": {
            "type": "object",
            "additionalProperties": False,
            "required": ["channel", "examples"],
            "properties": {"channel": {"type": "string"}, "examples": {"type": "integer", "minimum": 1}},
        },
        "rule": {
            "type": "object",
            "additionalProperties": False,
            "required": ["metric", "margin", "confidence", "resamples", "higher_is_better"],
            "properties": {
                "metric": {"type": "string"},
                "margin": {"type": "number", "minimum": 0},
                "confidence": {"type": "number", "minimum": 0.5, "maximum": 0.999},
                "resamples": {"type": "integer", "minimum": 100, "maximum": 10000},
                "higher_is_better": {"type": "boolean"},
            },
        },
        "challenger": _SCORES,
        "champion": {"anyOf": [{"type": "null"}, _SCORES]},
        "difference": {
            "anyOf": [
                {"type": "null"},
                {
                    "type": "object",
                    "additionalProperties": False,
                    "required": ["metric", "value", "low", "high"],
                    "properties": {
                        "metric": {"type": "string"},
                        "value": {"type": ["number", "null"]},
                        "low": {"type": ["number", "null"]},
                        "high": {"type": ["number", "null"]},
                    },
                },
            ]
        },
        "verdict": {"enum": list(VERDICTS)},
        "reason": {"type": "string"},
        "seconds": {"type": "number", "minimum": 0},
    },
}


@functools.cache
def _validator() -> Callable[[Any], Any]:
    return fastjsonschema.compile(DOCUMENT_SCHEMA)


def check_document(document: Any) -> dict[str, Any]:
    """evaluation.json checked against DOCUMENT_SCHEMA and against itself (the rule's metric scored, the
    verdict no_champion exactly when there is no champion); RecipeError naming the field otherwise."""
    try:
        checked: dict[str, Any] = _validator()(document)
    except fastjsonschema.JsonSchemaValueException as err:
        field = "evaluation" + str(err.name or "data").removeprefix("data")
        raise RecipeError(f"{field}: {err.message.removeprefix(str(err.name or '') + ' ')}") from None
    metric = checked["rule"]["metric"]
    if metric not in TASK_KINDS[checked["task"]].metrics or metric not in checked["challenger"]["scores"]:
        raise RecipeError(f"evaluation.rule.metric: {metric!r} is not among the challenger's scores")
    if (checked["champion"] is None) != (checked["verdict"] == "no_champion"):
        raise RecipeError(
            f"evaluation.verdict: {checked['verdict']!r} with champion {'absent' if checked['champion'] is None else 'present'}; "
            "accepted: no_champion exactly when there is no champion"
        )
    if checked["champion"] is not None and (checked["difference"] or {}).get("metric") != metric:
        raise RecipeError(
            f"evaluation.difference.metric: the difference must be on the rule's metric {metric!r}"
        )
    _check_verdict(checked)
    return checked


def verdict_of(difference: dict[str, Any] | None, margin: float) -> str:
    """The verdict the figures give (docs/evaluation.md, "The bootstrap and the verdict"; the container's
    twin is training_code/eval_scores.py verdict, which writes it)."""
    if difference is None:
        return "no_champion"
    low, high = difference["low"], difference["high"]
    if low is not None and low > 0:
        return "better"
    if high is not None and high < -margin:
        return "worse"
    return "not_worse"


def _check_verdict(document: dict[str, Any]) -> None:
    """The verdict is the one its own difference and margin give; a document that says otherwise is not read
    (the gate never recomputes a verdict, nor passes one its figures contradict). A champion with no
    difference is refused before (evaluation.difference.metric)."""
    difference, margin = document["difference"], float(document["rule"]["margin"])
    given = verdict_of(difference, margin)
    if document["verdict"] != given:
        figures = f"difference low {difference['low']}, high {difference['high']}, margin {margin:g}"
        raise RecipeError(
            f"evaluation.verdict: {document['verdict']!r} contradicts its own figures ({figures}); accepted: "
            f"{given!r} (better: low > 0; worse: high < -margin; otherwise not_worse)"
        )
