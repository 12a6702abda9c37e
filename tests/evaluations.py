"""Evaluation documents written to the contract by hand (docs/evaluation.md; the schema evaluate.py writes), for
the gate's tests. Test modules import it by name (tests/ is on sys.path through its conftest)."""

from __future__ import annotations

from typing import Any

from accounts import ACCOUNT

CHAMPION_ARN = f"arn:aws:sagemaker:us-east-1:{ACCOUNT}:model-package/hfpipe-dev-tiny-qa/1"


#: Figures that give each verdict (docs/evaluation.md: better low > 0; worse high < -margin), low, high, value.
FIGURES = {"worse": (-5.0, -1.2, -3.1), "better": (0.5, 3.0, 1.0), "not_worse": (-1.0, 2.0, 0.5)}


def document(
    verdict: str = "worse", low: float | None = None, high: float | None = None, value: float | None = None
) -> dict[str, Any]:
    """The contract's document: challenger scored against a champion, the difference challenger minus champion;
    the figures are the verdict's (``FIGURES``) unless given."""
    with_champion = verdict != "no_champion"
    given = FIGURES.get(verdict, FIGURES["worse"])
    low, high, value = (given[i] if v is None else v for i, v in enumerate((low, high, value)))
    return {
        "schema": "hfpipe.evaluation/1",
        "task": "question-answering",
        "data": {"channel": "validation", "examples": 40},
        "rule": {
            "metric": "f1",
            "margin": 0.0,
            "confidence": 0.95,
            "resamples": 1000,
            "higher_is_better": True,
        },
        "challenger": {
            "scores": {
                "f1": {"value": 58.1, "n": 40, "low": 52.0, "high": 64.0},
                "exact_match": {"value": 40.0, "n": 40, "low": 25.0, "high": 55.0},
            }
        },
        "champion": {"scores": {"f1": {"value": 61.2, "n": 40, "low": 55.0, "high": 67.1}}}
        if with_champion
        else None,
        "difference": {"metric": "f1", "value": value, "low": low, "high": high} if with_champion else None,
        "verdict": verdict,
        "reason": "one line a person reads",
        "seconds": 12.3,
    }


def wrapper(
    verdict: str = "worse",
    champion: str | None = CHAMPION_ARN,
    target: dict[str, str] | None = None,
    **figures: float,
) -> dict[str, Any]:
    """What the pipeline's step stores under "evaluation" in the version's statistics document."""
    return {
        "document_uri": "s3://artifacts/evaluations/run-2/evaluation.json",
        "target": {"endpoint": "hfpipe-dev-qa"} if target is None else target,
        "champion": None
        if champion is None
        else {"version_arn": champion, "model_data": None, "source_arn": None},
        "job": {
            "name": "dev-run-2-eval",
            "instance_type": "ml.m5.xlarge",
            "instance_count": 1,
            "seconds": 12.3,
            "usd": 0.0008,
        },
        "document": document(verdict, **figures),
    }


class StandInEvaluation:
    """The engine's ``processing`` plug-in for tests that run the pipeline without evaluate.py (the recipes'
    evaluation job): the job writes a contract document for its task and metric at its output, and ends
    Completed at once. ``verdict``: what it says when a champion is scored (``--champion``); without one,
    no_champion. ``requests``: the CreateProcessingJob requests it ran."""

    def __init__(self, verdict: str = "not_worse") -> None:
        self.verdict = verdict
        self.requests: list[dict[str, Any]] = []

    def check(self, request: dict[str, Any]) -> str | None:
        return None

    def start(self, request: dict[str, Any], job: Any, ended: Any) -> None:
        import json
        from datetime import UTC, datetime

        import boto3

        self.requests.append(request)
        args = request["AppSpecification"]["ContainerArguments"]
        task, metric = args[args.index("--task") + 1], args[args.index("--metric") + 1]
        doc = document(self.verdict if "--champion" in args else "no_champion")
        doc["task"] = task
        doc["rule"] = {**doc["rule"], "metric": metric}
        for side in ("challenger", "champion"):
            if doc[side] is not None:
                doc[side]["scores"] = {metric: doc[side]["scores"]["f1"]}
        if doc["difference"] is not None:
            doc["difference"]["metric"] = metric
        (output,) = request["ProcessingOutputConfig"]["Outputs"]
        bucket, _, prefix = output["S3Output"]["S3Uri"].removeprefix("s3://").partition("/")
        boto3.client("s3").put_object(
            Bucket=bucket, Key=f"{prefix.rstrip('/')}/evaluation.json", Body=json.dumps(doc).encode()
        )
        job.processing_start_time = job.processing_end_time = datetime.now(UTC)
        job.processing_job_status = "Completed"
        ended()
