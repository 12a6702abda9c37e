"""The training task's hand-over, shared by Launch and OnTrainingEvent: where the waiting task's token is
kept, and how a training job's final state completes that task.

Launch (launch.py) keeps the token under ``token_key(<job name>)`` in the artifacts bucket and completes
the task itself for an adopted job that has already ended; OnTrainingEvent (on_training_event.py) reads
the token when SageMaker reports the job's end and completes the task. Both import this module, neither
imports the other (tests/layout/test_import_cycles.py).

For Completed, Failed and Stopped the waiting task gets:

- Completed: ``SendTaskSuccess`` with the job's description (what ``$.training`` holds afterwards);
- Failed / Stopped: ``SendTaskFailure`` with error ``TrainingJobFailed`` / ``TrainingJobStopped`` and
  the job's ``FailureReason`` as the cause.

Only DescribeTrainingJob's answer completes the task, never an event's word alone: SageMaker's reads are
eventually consistent, so an event may say Completed while Describe still answers InProgress. Then the
task is left waiting (``complete`` returns False and logs it); the next event, or Launch's hourly
re-check (the task's timeout and Retry, pipeline_state_machine.py), completes it.

A second completion is expected (SageMaker may send an event twice; Launch completes an adopted job's
task itself): Step Functions answers it with TaskTimedOut or InvalidToken
(https://docs.aws.amazon.com/step-functions/latest/apireference/API_SendTaskSuccess.html), which is
not an error here.
"""

from __future__ import annotations

import json
from typing import Any

from hfpipe import contract
from hfpipe.core.throttling import error_code
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


def token_key(training_job_name: str) -> str:
    """Where the waiting task's token of a job is kept in the artifacts bucket."""
    return f"{contract.ARTIFACTS_TASK_TOKENS_PREFIX}{training_job_name}.json"


def description(job: dict[str, Any]) -> dict[str, Any]:
    """The fields of a DescribeTrainingJob response the pipeline uses, JSON-ready."""
    return json.loads(json.dumps({k: job[k] for k in DESCRIPTION_FIELDS if k in job}, default=str))


def complete(sfn: Any, task_token: str, job: dict[str, Any]) -> bool:
    """Complete the waiting task from the job's final state; False when the task is no longer waiting or
    the description does not say a final status yet (the task is left waiting)."""
    status = job["TrainingJobStatus"]
    if status not in FINAL_STATUSES:
        aws.log_json(
            LOG,
            "job not final yet; task left waiting",
            training_job_name=job.get("TrainingJobName"),
            status=status,
        )
        return False
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
        if error_code(err) in GONE:
            aws.log_json(LOG, "task already completed", code=error_code(err))
            return False
        raise
    return True
