"""Launch: CreateTrainingJob from the plan, idempotently.

The job name is derived from the execution name, so a retried Lambda or a repeated launch finds the
job it created (DescribeTrainingJob first; ResourceInUse on a race) and never creates a second one.
"""

from __future__ import annotations

from typing import Any

from pipeline_lambdas import aws

LOG = aws.logger(__name__)


class ThrottlingException(Exception):
    """SageMaker throttled CreateTrainingJob; the state machine retries it with backoff."""


class CapacityError(Exception):
    """SageMaker had no capacity (ResourceLimitExceeded / CapacityError); retried with backoff."""


_RETRYABLE = {
    "ThrottlingException": ThrottlingException,
    "Throttling": ThrottlingException,
    "ResourceLimitExceeded": CapacityError,
    "CapacityError": CapacityError,
    "InsufficientCapacityError": CapacityError,
}


def _code(err: Exception) -> str:
    return str(getattr(err, "response", {}).get("Error", {}).get("Code", ""))


def launch(sagemaker: Any, plan: dict[str, Any]) -> dict[str, Any]:
    """Create the plan's training job unless it exists; return its name, ARN and whether it was created."""
    name = plan["training_job_name"]
    try:
        found = sagemaker.describe_training_job(TrainingJobName=name)
        return {"training_job_name": name, "training_job_arn": found["TrainingJobArn"], "created": False}
    except Exception as err:
        if _code(err) not in ("ValidationException", "ResourceNotFound"):
            raise
    try:
        created = sagemaker.create_training_job(**plan["training_job_request"])
    except Exception as err:
        code = _code(err)
        if code == "ResourceInUse":
            found = sagemaker.describe_training_job(TrainingJobName=name)
            return {"training_job_name": name, "training_job_arn": found["TrainingJobArn"], "created": False}
        if code in _RETRYABLE:
            raise _RETRYABLE[code](f"CreateTrainingJob {name}: {err}") from err
        raise
    return {"training_job_name": name, "training_job_arn": created["TrainingJobArn"], "created": True}


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Event: {"plan": <plan>}."""
    result = launch(aws.client("sagemaker"), event["plan"])
    aws.log_json(LOG, "launched", **result)
    return result
