"""OnTrainingEvent: complete the Launch task waiting on a training job when SageMaker says it has ended.

An EventBridge rule sends this environment's "SageMaker Training Job State Change" events here
(https://docs.aws.amazon.com/sagemaker/latest/dg/automating-sagemaker-with-eventbridge.html; the
event's ``detail`` is the job's description). For Completed, Failed and Stopped the waiting task is
completed (training_task.complete: success with the job's description, or failure named after the
status). SageMaker "may send multiple events ... for each state change" (same page), so a task that is
no longer waiting is not an error. The token is kept by Launch in the artifacts bucket
(training_task.token_key).
"""

from __future__ import annotations

import json
import os
from typing import Any

from pipeline_lambdas import aws
from pipeline_lambdas.training_task import FINAL_STATUSES, complete, token_key

LOG = aws.logger(__name__)


def _code(err: Exception) -> str:
    return str(getattr(err, "response", {}).get("Error", {}).get("Code", ""))


def on_event(event: dict[str, Any], sagemaker: Any, s3: Any, sfn: Any, bucket: str) -> dict[str, Any]:
    """Handle one state-change event; events for jobs with no waiting task (or not final) are ignored."""
    detail = event.get("detail") or {}
    name, status = detail.get("TrainingJobName"), detail.get("TrainingJobStatus")
    if status not in FINAL_STATUSES or not name:
        return {"training_job_name": name, "status": status, "completed": False, "reason": "not final"}
    try:
        stored = json.loads(s3.get_object(Bucket=bucket, Key=token_key(name))["Body"].read())
    except Exception as err:
        if _code(err) in ("NoSuchKey", "404"):
            return {
                "training_job_name": name,
                "status": status,
                "completed": False,
                "reason": "no waiting task",
            }
        raise
    aws.bind(event, stored.get("execution_name", ""))
    job = sagemaker.describe_training_job(TrainingJobName=name)
    done = complete(sfn, stored["task_token"], job)
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
    )
    aws.log_json(LOG, "training job event", **result)
    return result
