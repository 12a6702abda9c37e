"""Cleanup: delete the endpoint, endpoint config and model this execution created; nothing else.

The Cleanup function's handler, with two entry paths: ``{"plan": <plan>}`` from the state machine
(teardown.cleanup on ``Plan.names``), and an EventBridge execution status change of an abnormal end
(execution_end.on_execution_end, which runs the same teardown on the names derived from the environment
and the execution name, ``PlannedNames.derive``, and reports; only for Step Functions' events about this
environment's state machine, ``STATE_MACHINE_ARN``). Which resources may go is
`hfpipe.core.run.cleanup`'s rule (teardown.py).
"""

from __future__ import annotations

import os
from typing import Any

from hfpipe.core.run.plan_model import Plan
from pipeline_lambdas import aws, execution_end
from pipeline_lambdas.teardown import cleanup

LOG = aws.logger(__name__)


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Event: {"plan": <plan>} from the state machine, or an EventBridge execution status change."""
    if execution_end.is_execution_status_change(event):
        aws.bind(event)
        return execution_end.on_execution_end(
            event,
            aws.client("sagemaker"),
            aws.client("sns"),
            os.environ.get("TOPIC_ARN"),
            os.environ["HFPIPE_ENV"],
            os.environ["STATE_MACHINE_ARN"],
        )
    plan = Plan.from_json(event["plan"])
    aws.bind(event, plan.execution_name)
    result = cleanup(aws.client("sagemaker"), plan.names)
    aws.log_json(LOG, "cleanup", **result)
    return result
