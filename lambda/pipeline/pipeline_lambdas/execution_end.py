"""Clean-up after an abnormal end: an execution that timed out, was stopped, or failed where no Catch applies.

Step Functions sends "Step Functions Execution Status Change" events to EventBridge
(https://docs.aws.amazon.com/step-functions/latest/dg/cw-events.html); a rule sends this state
machine's TIMED_OUT, ABORTED and FAILED ones to the Cleanup function, which hands them here. None of
these ends runs a Catch, so without this an endpoint already created would keep billing.

The names of what an execution may have created follow from the environment and the execution name
alone (``hfpipe.core.names.PlannedNames.derive``), so no plan is needed (nor read: none is in the event);
the clean-up itself (tags of this environment and execution) is the Cleanup function's (teardown.py, shared
with cleanup.py's state machine path). A failure report goes to the notification topic unless the state
machine already sent one: its own Fail states never carry a ``States.`` error name (Report renames
them), so a FAILED event with another name has been reported and cleaned up already; clean-up runs
again anyway (it deletes nothing twice).

Only Step Functions' own event about this environment's state machine is acted on: source ``aws.states``,
detail-type "Step Functions Execution Status Change" and ``detail.stateMachineArn`` equal to the
function's ``STATE_MACHINE_ARN`` (built from the state machine's fixed name). The rule matches the same;
this check holds for anything else that may invoke the function (another rule, a direct Invoke).
Anything else is ignored with a log line: it names no execution of ours, and clean-up and the report
must not run on someone else's word.
"""

from __future__ import annotations

import json
from typing import Any

from hfpipe.core.names import PlannedNames
from pipeline_lambdas import aws
from pipeline_lambdas.report import publish
from pipeline_lambdas.teardown import cleanup

LOG = aws.logger(__name__)

SOURCE = "aws.states"
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


def foreign(event: dict[str, Any], state_machine_arn: str) -> str | None:
    """Why ``event`` is not Step Functions' status change of ``state_machine_arn``; None when it is."""
    if (other := aws.not_sent_by(event, SOURCE, DETAIL_TYPE)) is not None:
        return other
    detail = event.get("detail")
    machine = detail.get("stateMachineArn") if isinstance(detail, dict) else None
    if not state_machine_arn or machine != state_machine_arn:
        return f"state machine {machine!r} is not this environment's ({state_machine_arn!r})"
    return None


def on_execution_end(
    event: dict[str, Any],
    sagemaker: Any,
    sns: Any,
    topic_arn: str | None,
    env: str,
    state_machine_arn: str,
) -> dict[str, Any]:
    """Clean up after one abnormal end of ``state_machine_arn``'s executions and report it; other
    statuses, and events that are not Step Functions' about that state machine, are ignored."""
    why = foreign(event, state_machine_arn)
    if why is not None:
        aws.log_json(LOG, "event ignored", reason=why)
        return {"execution_name": None, "ignored": True, "reason": why}
    detail = event.get("detail") or {}
    if detail.get("status") not in ABNORMAL or not detail.get("name"):
        return {"execution_name": detail.get("name"), "ignored": True}
    aws.bind(event, detail["name"])
    cleaned = cleanup(sagemaker, PlannedNames.derive(detail["name"], env))
    report = failure_report(detail, cleaned)
    if needs_report(detail):
        publish(sns, topic_arn, report)
    report["reported"] = needs_report(detail)
    aws.log_json(LOG, "execution ended abnormally", status=detail.get("status"), **cleaned)
    return report
