"""Teardown: delete the endpoint, endpoint config and model an execution created; nothing else.

The Cleanup function's work, reached on both of its paths: a state machine task (cleanup.py) and an
abnormal end of an execution (execution_end.py). Both import this module, neither imports the other
(tests/layout/test_import_cycles.py).

Which resources may go is `hfpipe.core.cleanup`'s rule (shared with `hfpipe stop` and `hfpipe cleanup`):
the plan's names, tagged by hfpipe for this environment and this execution. S3 objects (artifacts,
checkpoints, data) are never touched. A training job still running after a failure is stopped (it is not
deleted: its record and artifacts stay).
"""

from __future__ import annotations

from typing import Any

from hfpipe.core import cleanup as rule
from pipeline_lambdas import aws

LOG = aws.logger(__name__)


def cleanup(sagemaker: Any, plan: dict[str, Any]) -> dict[str, Any]:
    """Delete what this execution created; return what was deleted and what was left (and why)."""
    deleted: list[str] = []
    skipped: list[str] = []
    endpoint_deleted = False
    for kind, name, deletable in rule.planned_resources(sagemaker, plan):
        label = f"{kind.plan_key.removesuffix('_name')} {name}"
        if not deletable:
            skipped.append(f"{label}: not tagged with this environment and execution")
            continue
        rule.delete(sagemaker, kind, name)
        deleted.append(label)
        endpoint_deleted = endpoint_deleted or kind.name == "endpoint"
    stopped = False
    try:
        job = sagemaker.describe_training_job(TrainingJobName=plan["training_job_name"])
        # The abnormal-end rule gets here with names derived from the execution name alone: a job of that
        # name is stopped only when its tags name this environment and execution (the same rule as the
        # endpoint, config and model above, and as `hfpipe stop`).
        if job.get("TrainingJobStatus") != "InProgress":
            pass
        elif not rule.may_delete(
            rule.tags_of(sagemaker, job["TrainingJobArn"]), plan["env"], plan["execution_name"]
        ):
            skipped.append(
                f"training job {plan['training_job_name']}: not tagged with this environment and execution"
            )
        else:
            sagemaker.stop_training_job(TrainingJobName=plan["training_job_name"])
            stopped = True
    except Exception as err:  # a job that never started or cannot be stopped must not block clean-up
        aws.log_json(LOG, "training job not stopped", error=str(err))
    return {
        "deleted": deleted,
        "skipped": skipped,
        "training_job_stopped": stopped,
        "endpoint_deleted": endpoint_deleted,
    }
