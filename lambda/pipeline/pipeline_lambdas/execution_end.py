"""Clean-up after an abnormal end: an execution that timed out, was stopped, or failed where no Catch applies.

Step Functions sends "Step Functions Execution Status Change" events to EventBridge
(https://docs.aws.amazon.com/step-functions/latest/dg/cw-events.html); a rule sends this state
machine's TIMED_OUT, ABORTED and FAILED ones to the Cleanup function, which hands them here. None of
these ends runs a Catch, so without this an endpoint already created would keep billing.

The names of what an execution may have created follow from the environment and the execution name
alone (hfpipe.core.names), so no plan is needed; the clean-up itself (tags of this environment and
execution) is the Cleanup function's (teardown.py, shared with cleanup.py's state machine path). A failure
report goes to the notification topic unless the state machine already sent one: its own Fail states never carry a ``States.`` error name (Report renames
them), so a FAILED event with another name has been reported and cleaned up already; clean-up runs
again anyway (it deletes nothing twice).
"""

from __future__ import annotations

import json
from typing import Any

from hfpipe.core.names import derive_names
from pipeline_lambdas import aws
from pipeline_lambdas.report import publish
from pipeline_lambdas.teardown import cleanup

LOG = aws.logger(__name__)

DETAIL_TYPE = "Step Functions Execution Status Change"
ABNORMAL = ("TIMED_OUT", "ABORTED", "FAILED")


def is_execution_status_change(event: Any) -> bool:
    """Whether ``event`` is an EventBridge execution status change (not a state machine task's input)."""
    return isinstance(event, dict) and event.get("detail-type") == DETAIL_TYPE


def needs_report(detail: dict[str, Any]) -> bool:
    """No report was sent by the state machine: timed out, stopped, or failed with a States.* error."""
    status = detail.get("status")
    return status in ("TIMED_OUT", "ABORTED") or (
        status == "FAILED" and str(detail.get("error") or "").startswith("States.")
    )


def planned_names(env: str, execution_name: str) -> dict[str, Any]:
    """What the Cleanup function needs of a plan: environment, execution and the derived names."""
    return {"env": env, "execution_name": execution_name, **derive_names(execution_name, env)}


def failure_report(detail: dict[str, Any], cleaned: dict[str, Any]) -> dict[str, Any]:
    """The failure report of an execution that ended without reaching its own Report state."""
    try:
        execution_input = json.loads(detail.get("input") or "{}")
    except ValueError:
        execution_input = {}
    status = str(detail.get("status"))
    default_error = {"TIMED_OUT": "ExecutionTimedOut", "ABORTED": "ExecutionAborted"}.get(
        status, "ExecutionFailed"
    )
    return {
        "execution_name": detail.get("name"),
        "recipe_name": (execution_input.get("recipe_name") if isinstance(execution_input, dict) else None)
        or "-",
        "outcome": "failed",
        "execution_status": status,
        # A Fail state may not raise a States.* name of its own; keep the name recognisable.
        "error": str(detail.get("error") or default_error).replace("States.", "States"),
        "cause": detail.get("cause") or f"execution {detail.get('name')} ended {status}",
        "cleanup": cleaned,
        "endpoint_deleted": bool(cleaned.get("endpoint_deleted")),
    }


def on_execution_end(
    event: dict[str, Any], sagemaker: Any, sns: Any, topic_arn: str | None, env: str
) -> dict[str, Any]:
    """Clean up after one abnormal end and report it; other statuses are ignored."""
    detail = event.get("detail") or {}
    if detail.get("status") not in ABNORMAL or not detail.get("name"):
        return {"execution_name": detail.get("name"), "ignored": True}
    aws.bind(event, detail["name"])
    cleaned = cleanup(sagemaker, planned_names(env, detail["name"]))
    report = failure_report(detail, cleaned)
    if needs_report(detail):
        publish(sns, topic_arn, report)
    report["reported"] = needs_report(detail)
    aws.log_json(LOG, "execution ended abnormally", status=detail.get("status"), **cleaned)
    return report
