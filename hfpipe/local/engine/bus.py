"""The local EventBridge bus: the template's rules (``AWS::Events::Rule``) and their Lambda targets.

An event put on the bus goes to the targets of every rule whose pattern matches it, matched by moto's own
EventBridge pattern implementation (``EventPattern``, through hfpipe.local.engine.moto_patches). moto's bus itself cannot be
used: its rules deliver to SQS, logs and other buses, not to Lambda functions; and nothing in moto puts
SageMaker's or Step Functions' state-change events on it, so the engine does (hfpipe.local.engine.engine).

A rule with a ``ScheduleExpression`` (the reaper's) matches no event: the engine fires it on its own clock
(``fire_schedules``, and a timer every ``schedule_seconds`` x ``time_scale``), with the "Scheduled Event" EventBridge
sends ("Creating a rule that runs on a schedule in Amazon EventBridge", the event's example:
https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-run-lambda-schedule.html). Only rate expressions
are played; a cron expression is refused here, naming the rule.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Callable
from typing import Any

from hfpipe.local.engine import moto_patches
from hfpipe.local.engine.template import ACCOUNT

#: ``rate(value unit)``: a positive number and minute(s), hour(s) or day(s) (EventBridge's "Schedule expressions
#: for rules", https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-scheduled-rule-pattern.html).
_RATE = re.compile(r"^rate\((\d+) (minute|minutes|hour|hours|day|days)\)$")
_UNIT_SECONDS = {"minute": 60, "hour": 3600, "day": 86400}


def schedule_seconds(rule: str, expression: str) -> float:
    """The period of a rate expression, in seconds; ValueError for any other expression (a cron one)."""
    match = _RATE.fullmatch(expression)
    if not match:
        raise ValueError(
            f"rule {rule}: ScheduleExpression {expression!r} is not played locally; accepted: rate(N minute|"
            "minutes|hour|hours|day|days)"
        )
    return int(match.group(1)) * _UNIT_SECONDS[match.group(2).rstrip("s")]


def matches(pattern: dict[str, Any], event: dict[str, Any]) -> bool:
    """Whether ``event`` matches the EventBridge ``pattern``, as moto's EventBridge decides it."""
    return moto_patches.event_pattern_matches(pattern, event)


class LocalBus:
    """``rules``: (pattern, target function logical IDs); ``deliver(logical, event)`` invokes a target."""

    def __init__(
        self,
        rules: list[tuple[dict[str, Any], list[str]]],
        deliver: Callable[[str, dict[str, Any]], Any],
        region: str,
    ) -> None:
        self.rules = rules
        #: (rule logical ID, period in seconds, target function logical IDs) of each scheduled rule.
        self.schedules: list[tuple[str, float, list[str]]] = []
        self.deliver = deliver
        self.region = region
        #: Every event put on the bus, and (detail-type, target, its answer) for each delivery.
        self.events: list[dict[str, Any]] = []
        self.deliveries: list[tuple[str, str, Any]] = []

    @classmethod
    def of_template(
        cls,
        resources: dict[str, Any],
        resolve: Callable[[Any], Any],
        deliver: Callable[[str, dict[str, Any]], Any],
        region: str,
    ) -> LocalBus:
        """The bus with the template's rules, their patterns resolved (a rule may name the state machine), and
        its scheduled rules."""
        found = {k: r["Properties"] for k, r in resources.items() if r["Type"] == "AWS::Events::Rule"}

        def targets(properties: dict[str, Any]) -> list[str]:
            return [t["Arn"]["Fn::GetAtt"][0] for t in properties.get("Targets", [])]

        bus = cls(
            [(resolve(p["EventPattern"]), targets(p)) for p in found.values() if "EventPattern" in p],
            deliver,
            region,
        )
        bus.schedules = [
            (k, schedule_seconds(k, str(p["ScheduleExpression"])), targets(p))
            for k, p in found.items()
            if "ScheduleExpression" in p
        ]
        return bus

    def fire_schedules(self, only: str | None = None) -> None:
        """Every scheduled rule (``only``: that one) fires once now: its targets get EventBridge's "Scheduled
        Event"."""
        for rule, _, targets in self.schedules:
            if only not in (None, rule):
                continue
            event = self._event(
                "aws.events", "Scheduled Event", {}, [f"arn:aws:events:{self.region}:{ACCOUNT}:rule/{rule}"]
            )
            self.events.append(event)
            for logical in targets:
                self.deliveries.append(("Scheduled Event", logical, self.deliver(logical, event)))

    def _event(
        self, source: str, detail_type: str, detail: dict[str, Any], resources: list[str]
    ) -> dict[str, Any]:
        return {
            "version": "0",
            "id": str(uuid.uuid4()),
            "detail-type": detail_type,
            "source": source,
            "account": ACCOUNT,
            "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "region": self.region,
            "resources": resources,
            "detail": json.loads(json.dumps(detail, default=str)),
        }

    def put(self, source: str, detail_type: str, detail: dict[str, Any], resources: list[str]) -> None:
        """Put one event on the bus: every rule it matches invokes its targets, in this thread."""
        event = self._event(source, detail_type, detail, resources)
        self.events.append(event)
        for pattern, targets in self.rules:
            if matches(pattern, event):
                for logical in targets:
                    self.deliveries.append((detail_type, logical, self.deliver(logical, event)))


def execution_status_change(execution: Any, state_machine_arn: str) -> dict[str, Any]:
    """The detail of Step Functions' "Step Functions Execution Status Change" event for an execution of
    moto's interpreter that ended (https://docs.aws.amazon.com/step-functions/latest/dg/cw-events.html)."""
    output = getattr(execution, "output", None)
    return {
        "executionArn": execution.exec_arn,
        "stateMachineArn": state_machine_arn,
        "name": execution.name,
        "status": execution.exec_status.value,
        "startDate": int(execution.start_date.timestamp() * 1000),
        "stopDate": int(execution.stop_date.timestamp() * 1000) if execution.stop_date else None,
        "input": json.dumps(execution.input_data) if execution.input_data is not None else None,
        "output": json.dumps(output) if output is not None else None,
        "error": getattr(execution, "error", None),
        "cause": getattr(execution, "cause", None),
    }
