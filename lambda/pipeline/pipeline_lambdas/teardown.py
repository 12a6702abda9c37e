"""Teardown: delete the endpoint, endpoint config and model an execution created, and stop its training job;
nothing else (S3 objects are never touched). The Cleanup function's work on both of its paths: a state
machine task (cleanup.py) and an abnormal end of an execution (execution_end.py).

Which resources may go is `hfpipe.core.run.cleanup`'s rule (shared with `hfpipe stop` and `hfpipe cleanup`):
the plan's names (after an abnormal end, derived from the execution name), tagged by hfpipe for this
environment and execution, and not kept by a user (``hfpipe:keep``). Every step works from what exists now
and is tried even when an earlier one failed; when any failed, ``CleanupIncomplete`` is raised after all,
so the run is repeated (Lambda's retries of an asynchronous invocation; on the state machine's path, the
abnormal-end rule). An endpoint SageMaker will not delete yet (``rule.NOT_DELETABLE_YET``) takes minutes,
longer than this function runs: it is reported in ``skipped`` with its config and model, and the report
points at `hfpipe cleanup --env ENV`, which waits for it.
"""

from __future__ import annotations

from typing import Any

from hfpipe import contract
from hfpipe.core.names import PlannedNames
from hfpipe.core.run import cleanup as rule
from pipeline_lambdas import aws

LOG = aws.logger(__name__)


class CleanupIncomplete(Exception):
    """Some step failed (throttled, or another AWS error); rerunning the clean-up finishes it."""


def cleanup(sagemaker: Any, target: PlannedNames) -> dict[str, Any]:
    """Delete what this execution created; return what was deleted and what was left (and why)."""
    deleted: list[str] = []
    skipped: list[str] = []
    failed: list[str] = []
    stopped = _stop_training_job(sagemaker, target, skipped, failed)
    endpoint_deleted = False
    busy: str | None = None  # "endpoint X is Creating": its config and model stay while it does
    try:
        planned = list(rule.planned_resources(sagemaker, target))
    except Exception as err:
        failed.append(f"reading the execution's endpoint, config and model: {err}")
        planned = []
    for item in planned:
        label = f"{item.kind.plan_key.removesuffix('_name')} {item.name}"
        if not item.ours:
            skipped.append(f"{label}: not tagged with this environment and execution")
            continue
        if item.kept:
            skipped.append(
                f"{label}: kept by the user ({contract.TAG_KEEP}); `hfpipe endpoints delete "
                f"{target.endpoint_name} --env {target.env}` deletes it"
            )
            continue
        if item.kind.name == "endpoint" and item.status in rule.NOT_DELETABLE_YET:
            busy = f"endpoint {item.name} is {item.status}"
            skipped.append(
                f"{label}: not deletable yet ({item.status}); run `hfpipe cleanup --env {target.env}`, "
                "which waits until SageMaker allows it"
            )
            continue
        if busy is not None:
            skipped.append(f"{label}: in use while {busy}; `hfpipe cleanup --env {target.env}` deletes it")
            continue
        if item.kind.name == "endpoint" and item.status == rule.DELETING:
            deleted.append(f"{label} (already deleting)")
            endpoint_deleted = True
            continue
        try:
            rule.delete(sagemaker, item.kind, item.name)
        except Exception as err:
            failed.append(f"deleting {label}: {err}")
            if item.kind.name == "endpoint":
                busy = f"endpoint {item.name} is not deleted"
            continue
        deleted.append(label)
        endpoint_deleted = endpoint_deleted or item.kind.name == "endpoint"
    result = {
        "deleted": deleted,
        "skipped": skipped,
        "training_job_stopped": stopped,
        "endpoint_deleted": endpoint_deleted,
    }
    if failed:
        aws.log_json(LOG, "cleanup incomplete", failed=failed, **result)
        raise CleanupIncomplete(
            "; ".join(failed) + f" (done so far: {result}); rerunning the clean-up finishes it"
        )
    return result


def _stop_training_job(sagemaker: Any, target: PlannedNames, skipped: list[str], failed: list[str]) -> bool:
    """Stop the execution's training job when it is InProgress and tagged for this environment and execution."""
    try:
        job = sagemaker.describe_training_job(TrainingJobName=target.training_job_name)
    except Exception as err:
        if not rule.is_not_found(err):
            failed.append(f"reading training job {target.training_job_name}: {err}")
        return False  # not found: Launch never created it
    if job.get("TrainingJobStatus") != "InProgress":
        return False
    try:
        # The abnormal-end rule gets here with names derived from the execution name alone: a job of that
        # name is stopped only when its tags name this environment and execution (the same rule as the
        # endpoint, config and model, and as `hfpipe stop`). A user's keep tag is for endpoints: a job
        # whose execution ended abnormally is still stopped.
        if not rule.is_ours(
            rule.tags_of(sagemaker, job["TrainingJobArn"]), target.env, target.execution_name
        ):
            skipped.append(
                f"training job {target.training_job_name}: not tagged with this environment and execution"
            )
            return False
        sagemaker.stop_training_job(TrainingJobName=target.training_job_name)
    except Exception as err:
        failed.append(f"stopping training job {target.training_job_name}: {err}")
        return False
    return True
