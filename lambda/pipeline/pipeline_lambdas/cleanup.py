"""Cleanup: delete the endpoint, endpoint config and model this execution created; nothing else.

A resource is deleted only when its name is the plan's and its hfpipe:execution tag is this
execution's name; S3 objects (artifacts, checkpoints, data) are never touched. A training job still
running after a failure is stopped (it is not deleted: its record and artifacts stay).
"""

from __future__ import annotations

import os
from typing import Any

from hfpipe import contract
from pipeline_lambdas import aws

LOG = aws.logger(__name__)

_KINDS = (
    ("endpoint", "describe_endpoint", "EndpointName", "EndpointArn", "delete_endpoint"),
    (
        "endpoint_config",
        "describe_endpoint_config",
        "EndpointConfigName",
        "EndpointConfigArn",
        "delete_endpoint_config",
    ),
    ("model", "describe_model", "ModelName", "ModelArn", "delete_model"),
)


def _owned(sagemaker: Any, arn: str, execution_name: str) -> bool:
    tags = {t["Key"]: t["Value"] for t in sagemaker.list_tags(ResourceArn=arn).get("Tags", [])}
    return (
        tags.get(contract.TAG_EXECUTION) == execution_name
        and tags.get(contract.TAG_MANAGED_BY) == contract.PROJECT
    )


def cleanup(sagemaker: Any, plan: dict[str, Any]) -> dict[str, Any]:
    """Delete what this execution created; return what was deleted and what was left (and why)."""
    deleted: list[str] = []
    skipped: list[str] = []
    for kind, describe, key, arn_key, delete in _KINDS:
        name = plan[f"{kind}_name"]
        try:
            found = getattr(sagemaker, describe)(**{key: name})
        except Exception as err:
            if "Could not find" in str(err) or "ValidationException" in str(err):
                continue
            raise
        if not _owned(sagemaker, found[arn_key], plan["execution_name"]):
            skipped.append(f"{kind} {name}: not tagged with this execution")
            continue
        getattr(sagemaker, delete)(**{key: name})
        deleted.append(f"{kind} {name}")
    stopped = False
    try:
        job = sagemaker.describe_training_job(TrainingJobName=plan["training_job_name"])
        if job.get("TrainingJobStatus") == "InProgress":
            sagemaker.stop_training_job(TrainingJobName=plan["training_job_name"])
            stopped = True
    except Exception as err:  # a job that never started or cannot be stopped must not block clean-up
        aws.log_json(LOG, "training job not stopped", error=str(err))
    return {
        "deleted": deleted,
        "skipped": skipped,
        "training_job_stopped": stopped,
        "endpoint_deleted": any(d.startswith("endpoint ") for d in deleted),
    }


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Event: {"plan": <plan>} from the state machine, or an EventBridge execution status change."""
    from pipeline_lambdas import execution_end

    aws.bind(event)
    if execution_end.is_execution_status_change(event):
        return execution_end.on_execution_end(
            event,
            aws.client("sagemaker"),
            aws.client("sns"),
            os.environ.get("TOPIC_ARN"),
            os.environ["HFPIPE_ENV"],
        )
    result = cleanup(aws.client("sagemaker"), event["plan"])
    aws.log_json(LOG, "cleanup", **result)
    return result
