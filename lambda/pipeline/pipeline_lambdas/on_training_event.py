"""OnTrainingEvent: complete the Launch task waiting on a training job when SageMaker says it has ended.

An EventBridge rule sends this environment's "SageMaker Training Job State Change" events here
(https://docs.aws.amazon.com/sagemaker/latest/dg/automating-sagemaker-with-eventbridge.html; the
event's ``detail`` is the job's description). For Completed, Failed and Stopped the waiting task gets:

- Completed: ``SendTaskSuccess`` with the job's description (what ``$.training`` holds afterwards);
- Failed / Stopped: ``SendTaskFailure`` with error ``TrainingJobFailed`` / ``TrainingJobStopped`` and
  the job's ``FailureReason`` as the cause.

SageMaker "may send multiple events ... for each state change" (same page), and Launch completes the
task itself for an adopted job that had already ended, so a second completion is expected: Step
Functions answers it with TaskTimedOut or InvalidToken
(https://docs.aws.amazon.com/step-functions/latest/apireference/API_SendTaskSuccess.html), which is
not an error here. The token is kept by Launch in the artifacts bucket (launch.token_key).
"""

from __future__ import annotations

import json
import os
from typing import Any

from pipeline_lambdas import aws

LOG = aws.logger(__name__)

FINAL_STATUSES = ("Completed", "Failed", "Stopped")
#: SendTaskSuccess/SendTaskFailure answers meaning the task is no longer waiting (already completed,
#: timed out, or its execution ended).
GONE = ("TaskTimedOut", "InvalidToken", "TaskDoesNotExist")
#: The part of DescribeTrainingJob the pipeline reads (Gate, Report, watch); keeps the task output far
#: below Step Functions' 256 KiB payload limit.
DESCRIPTION_FIELDS = (
    "TrainingJobName",
    "TrainingJobArn",
    "TrainingJobStatus",
    "SecondaryStatus",
    "FailureReason",
    "ModelArtifacts",
    "FinalMetricDataList",
    "TrainingTimeInSeconds",
    "BillableTimeInSeconds",
    "TrainingStartTime",
    "TrainingEndTime",
    "CreationTime",
    "EnableManagedSpotTraining",
    "ResourceConfig",
    "StoppingCondition",
    "CheckpointConfig",
)
CAUSE_LIMIT = 32_768  # SendTaskFailure's cause: at most 32,768 characters


def _code(err: Exception) -> str:
    return str(getattr(err, "response", {}).get("Error", {}).get("Code", ""))


def description(job: dict[str, Any]) -> dict[str, Any]:
    """The fields of a DescribeTrainingJob response the pipeline uses, JSON-ready."""
    return json.loads(json.dumps({k: job[k] for k in DESCRIPTION_FIELDS if k in job}, default=str))


def complete(sfn: Any, task_token: str, job: dict[str, Any]) -> bool:
    """Complete the waiting task from the job's final state; False when the task is no longer waiting."""
    status = job["TrainingJobStatus"]
    try:
        if status == "Completed":
            sfn.send_task_success(taskToken=task_token, output=json.dumps(description(job)))
        else:
            reason = job.get("FailureReason") or "no FailureReason given"
            sfn.send_task_failure(
                taskToken=task_token,
                error=f"TrainingJob{status}",
                cause=f"training job {job['TrainingJobName']} {status}: {reason}"[:CAUSE_LIMIT],
            )
    except Exception as err:
        if _code(err) in GONE:
            aws.log_json(LOG, "task already completed", code=_code(err))
            return False
        raise
    return True


def on_event(event: dict[str, Any], sagemaker: Any, s3: Any, sfn: Any, bucket: str) -> dict[str, Any]:
    """Handle one state-change event; events for jobs with no waiting task (or not final) are ignored."""
    from pipeline_lambdas.launch import token_key

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
