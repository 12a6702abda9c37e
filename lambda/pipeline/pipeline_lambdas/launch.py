"""Launch: CreateTrainingJob from the plan, idempotently, as a ``.waitForTaskToken`` task.

The state machine passes the task token; Launch keeps it in the artifacts bucket under
``task-tokens/<job name>`` (training_task.token_key; a token is up to 2,048 characters, a SageMaker tag
value at most 256, so it cannot ride on the job) and returns. The task then waits: OnTrainingEvent completes it when SageMaker
reports the job Completed, Failed or Stopped. The event may be lost, so the task times out every
``limits.TRAINING_RECHECK_SECONDS`` and the state machine runs Launch again (Retry on States.Timeout): a
re-check. Launch then adopts its job, stores the new attempt's token, and completes the task itself when
DescribeTrainingJob says the job ended; a job still running after the plan's ``training_wait_seconds``
(its own MaxRuntime/MaxWait plus a margin, from its CreationTime) is given up (TrainingWaitExceeded, which
the state machine catches: clean-up stops the job).

The job name is derived from the environment and the execution name, so a retried Lambda or a repeated
launch finds the job it created and never creates a second one. An existing job with that name is
adopted only when its tags say this environment and this execution; anything else is refused.
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from typing import Any

from hfpipe import contract
from hfpipe.core.run.plan_model import Plan
from hfpipe.core.throttling import error_code
from pipeline_lambdas import aws
from pipeline_lambdas.training_task import FINAL_STATUSES, complete, token_key

LOG = aws.logger(__name__)


class ThrottlingException(Exception):
    """SageMaker throttled CreateTrainingJob; the state machine retries it with backoff."""


class CapacityError(Exception):
    """SageMaker had no capacity (ResourceLimitExceeded / CapacityError); retried with backoff."""


class TrainingWaitExceeded(Exception):
    """The job has run past the plan's training wait without ending; the state machine cleans up."""


class TrainingJobNameTaken(Exception):
    """A job with the planned name exists but was not created by this environment and execution."""


_RETRYABLE = {
    "ThrottlingException": ThrottlingException,
    "Throttling": ThrottlingException,
    "ResourceLimitExceeded": CapacityError,
    "CapacityError": CapacityError,
    "InsufficientCapacityError": CapacityError,
}


def _adoptable(sagemaker: Any, job: dict[str, Any], plan: Plan) -> None:
    tags = {
        t["Key"]: t["Value"] for t in sagemaker.list_tags(ResourceArn=job["TrainingJobArn"]).get("Tags", [])
    }
    expected = {contract.TAG_ENV: plan.env, contract.TAG_EXECUTION: plan.execution_name}
    if (
        any(tags.get(k) != v for k, v in expected.items())
        or tags.get(contract.TAG_MANAGED_BY) != contract.PROJECT
    ):
        raise TrainingJobNameTaken(
            f"training job {job['TrainingJobName']} exists with tags "
            f"{ {k: tags.get(k) for k in (*expected, contract.TAG_MANAGED_BY)} }; it is adopted only when "
            f"tagged {contract.TAG_MANAGED_BY}={contract.PROJECT}, {contract.TAG_ENV}={plan.env}, "
            f"{contract.TAG_EXECUTION}={plan.execution_name}"
        )


def _existing(sagemaker: Any, name: str) -> dict[str, Any] | None:
    try:
        return dict(sagemaker.describe_training_job(TrainingJobName=name))
    except Exception as err:
        if error_code(err) not in ("ValidationException", "ResourceNotFound"):
            raise
        return None


def launch(
    sagemaker: Any,
    s3: Any,
    sfn: Any,
    bucket: str,
    plan: Plan,
    task_token: str,
    now: datetime | None = None,
) -> dict[str, Any]:
    """Keep the token, create the plan's training job unless this execution already has it.

    An adopted job that has already ended gets no new state-change event (or its event was lost), so
    Launch completes the task itself (the event handler's rule, training_task.complete); one still
    running past the plan's training wait raises TrainingWaitExceeded.
    """
    name = plan.training_job_name
    found = _existing(sagemaker, name)
    if found is not None:
        _adoptable(sagemaker, found, plan)
    # The token goes first: an event for the job can only come after the job exists.
    s3.put_object(
        Bucket=bucket,
        Key=token_key(name),
        Body=json.dumps({"task_token": task_token, "execution_name": plan.execution_name}).encode(),
        ContentType="application/json",
    )
    created = False
    if found is None:
        try:
            sagemaker.create_training_job(**plan.training_job_request)
            created = True
        except Exception as err:
            code = error_code(err)
            if code == "ResourceInUse":
                _adoptable(sagemaker, sagemaker.describe_training_job(TrainingJobName=name), plan)
            elif code in _RETRYABLE:
                raise _RETRYABLE[code](f"CreateTrainingJob {name}: {err}") from err
            else:
                raise
    if not created:
        job = sagemaker.describe_training_job(TrainingJobName=name)
        if job["TrainingJobStatus"] in FINAL_STATUSES:
            complete(sfn, task_token, job)
        else:
            _check_wait(job, plan, now)
    return {"training_job_name": name, "created": created}


def _check_wait(job: dict[str, Any], plan: Plan, now: datetime | None) -> None:
    """Refuse to wait on past the plan's training wait, counted from the job's CreationTime."""
    started = job.get("CreationTime")
    if not isinstance(started, datetime):
        return
    if started.tzinfo is None:  # boto3 gives aware datetimes; a naive one is UTC
        started = started.replace(tzinfo=UTC)
    now = now or datetime.now(UTC)
    waited = (now - started).total_seconds()
    if waited > plan.training_wait_seconds:
        raise TrainingWaitExceeded(
            f"training job {job['TrainingJobName']} is {job['TrainingJobStatus']} after {int(waited)} s, "
            f"past the plan's training wait of {plan.training_wait_seconds} s (its own limit plus a margin)"
        )


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Event: {"plan": <plan>, "task_token": <$$.Task.Token>}."""
    plan = Plan.from_json(event["plan"])
    aws.bind(event, plan.execution_name)
    result = launch(
        aws.client("sagemaker"),
        aws.client("s3"),
        aws.client("stepfunctions"),
        os.environ["ARTIFACTS_BUCKET"],
        plan,
        event["task_token"],
    )
    aws.log_json(LOG, "launched", **result)
    return result
