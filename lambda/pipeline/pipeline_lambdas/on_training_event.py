"""OnTrainingEvent: complete the Launch task waiting on a training job when SageMaker says it has ended.

An EventBridge rule sends this environment's "SageMaker Training Job State Change" events here
(https://docs.aws.amazon.com/sagemaker/latest/dg/automating-sagemaker-with-eventbridge.html; the
event's ``detail`` is the job's description). For Completed, Failed and Stopped the waiting task is
completed (training_task.complete: success with the job's description, or failure named after the
status). SageMaker "may send multiple events ... for each state change" (same page), so a task that is
no longer waiting is not an error. The token is kept by Launch in the artifacts bucket
(training_task.token_key); no object there means no waiting task, but an object that cannot be read (S3
refusing it, or content that is not Launch's) is an error (TaskTokenUnreadable), so the invocation is
retried and then alarms rather than leaving the run to wait silently.

Only what SageMaker sent about this environment's jobs is acted on: source ``aws.sagemaker``, detail-type
"SageMaker Training Job State Change", and a job name starting ``<env>-`` (environment names have no
dash, hfpipe.core.names.ENV_NAME, so no other environment's name shares the prefix); the rule matches
the same, and this check holds for anything else that may invoke the function. Anything else is
ignored with a log line. The task is completed from DescribeTrainingJob's answer only: an event that
says final while Describe still answers InProgress (eventual consistency) leaves the task and its token
waiting for the next event or Launch's hourly re-check.
"""

from __future__ import annotations

import json
import os
from typing import Any

from hfpipe.core.throttling import error_code
from pipeline_lambdas import aws
from pipeline_lambdas.training_task import FINAL_STATUSES, complete, token_key

LOG = aws.logger(__name__)


SOURCE = "aws.sagemaker"
DETAIL_TYPE = "SageMaker Training Job State Change"


def _foreign(event: Any, env: str) -> str | None:
    """Why ``event`` is not a training-job state change of this environment's jobs; None when it is."""
    if not isinstance(event, dict):
        return "not an event"
    if (other := aws.not_sent_by(event, SOURCE, DETAIL_TYPE)) is not None:
        return other
    detail = event.get("detail")
    name = detail.get("TrainingJobName") if isinstance(detail, dict) else None
    if not isinstance(name, str) or not name.startswith(f"{env}-"):
        return f"training job {name!r} is not one of environment {env!r} ({env}-*)"
    return None


class TaskTokenUnreadable(Exception):
    """The job's task-token object is there but is not what Launch writes; a waiting task may be stuck."""


def _stored(s3: Any, bucket: str, name: str) -> dict[str, Any] | None:
    """What Launch kept for the job's waiting task (token, execution name); None when nothing waits (no
    object: NoSuchKey). Any other failed read, or an object that is not Launch's, raises: the event is
    retried and, failing, alarms (the function's failed-events queue)."""
    try:
        body = s3.get_object(Bucket=bucket, Key=token_key(name))["Body"].read()
    except Exception as err:
        if error_code(err) in ("NoSuchKey", "404"):
            return None
        raise
    try:
        stored = json.loads(body)
    except ValueError:
        stored = None
    if not isinstance(stored, dict) or not isinstance(stored.get("task_token"), str):
        # Not what Launch writes: a task may be waiting that nothing here can answer. Raised, not passed
        # for "no waiting task": the asynchronous invocation is retried, then goes to the failed-events
        # queue, whose alarm says so, rather than the run waiting silently for Launch's hourly re-check.
        raise TaskTokenUnreadable(
            f"s3://{bucket}/{token_key(name)}: not the object Launch writes (a JSON object with a string "
            "task_token); the waiting task cannot be answered until Launch's re-check stores a new one"
        )
    return stored


def on_event(
    event: dict[str, Any], sagemaker: Any, s3: Any, sfn: Any, bucket: str, env: str
) -> dict[str, Any]:
    """Handle one state-change event; events for jobs with no waiting task (or not final) are ignored,
    and so is anything that is not SageMaker's event about one of ``env``'s jobs."""
    foreign = _foreign(event, env)
    if foreign is not None:
        aws.log_json(LOG, "event ignored", reason=foreign)
        return {"training_job_name": None, "status": None, "completed": False, "reason": foreign}
    detail = event["detail"]
    name, status = detail.get("TrainingJobName"), detail.get("TrainingJobStatus")
    if status not in FINAL_STATUSES or not name:
        return {"training_job_name": name, "status": status, "completed": False, "reason": "not final"}
    stored = _stored(s3, bucket, name)
    if stored is None:
        return {"training_job_name": name, "status": status, "completed": False, "reason": "no waiting task"}
    aws.bind(event, stored.get("execution_name", ""))
    job = sagemaker.describe_training_job(TrainingJobName=name)
    if job["TrainingJobStatus"] not in FINAL_STATUSES:
        # Eventual consistency: the event is ahead of Describe. Keep the token; the next event or the
        # re-check completes the task (training_task.complete would refuse it too).
        aws.log_json(
            LOG,
            "event says final, job does not yet",
            event_status=status,
            job_status=job["TrainingJobStatus"],
        )
        return {
            "training_job_name": name,
            "status": job["TrainingJobStatus"],
            "completed": False,
            "reason": "job not final yet",
        }
    done = complete(sfn, stored["task_token"], job)
    if not done:
        # The token read was no longer waiting: a re-check (Launch run again after the task's timeout) may
        # have stored its new attempt's token since. Answer that one rather than leave it for an hour.
        newer = _stored(s3, bucket, name)
        if newer is not None and newer.get("task_token") != stored["task_token"]:
            done = complete(sfn, newer["task_token"], job)
    s3.delete_object(Bucket=bucket, Key=token_key(name))
    return {"training_job_name": name, "status": job["TrainingJobStatus"], "completed": done}


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Event: an EventBridge "SageMaker Training Job State Change" event."""
    aws.bind(event, "")
    result = on_event(
        event,
        aws.client("sagemaker"),
        aws.client("s3"),
        aws.client("stepfunctions"),
        os.environ["ARTIFACTS_BUCKET"],
        os.environ["HFPIPE_ENV"],
    )
    aws.log_json(LOG, "training job event", **result)
    return result
