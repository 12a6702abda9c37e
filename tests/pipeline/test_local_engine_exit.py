"""Leaving a LocalEngine ends what it runs: an execution still running is stopped, its end event is handled by
this engine, and none of moto's interpreter threads outlives it.

moto's accounts, its interpreter, boto3's default session and the handlers' clients belong to the process, so
an execution an engine left running went on in the next engine of the process: a test file that left a
training job in progress (tests/hostile/test_hostile_stop.py) had its execution's end event delivered, and
the abnormal-end Cleanup run, inside the engine of the next test file on the same worker. Each test here
starts engines of its own, so this module has no module-scoped one."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import pytest
from accounts import ACCOUNT
from app_synth import ENV, data_imports, region_of

from hfpipe.local.engine.engine import LocalEngine

pytestmark = pytest.mark.slow
STATUS_CHANGE = "Step Functions Execution Status Change"


def _engine(template: dict[str, Any], time_scale: float = 0.0) -> LocalEngine:
    return LocalEngine(template, imports=data_imports(), region=region_of(ENV), time_scale=time_scale)


def _in_progress(request: dict[str, Any], job: Any) -> None:
    """The training plug-in of a job still training: the execution waits at Launch for the job's event."""
    job.training_job_status, job.secondary_status = "InProgress", "Training"
    job.final_metric_data_list, job.billable_time_in_seconds = [], None


def _ends_of(engine: LocalEngine, arn: str) -> list[str]:
    """The statuses of the status-change events about ``arn`` that reached ``engine``'s bus."""
    return [
        e["detail"]["status"]
        for e in engine.events
        if e["detail-type"] == STATUS_CHANGE and arn in json.dumps(e)
    ]


def test_leaving_the_engine_stops_an_execution_waiting_for_its_job_and_handles_its_end(template):
    before = set(threading.enumerate())
    with _engine(template) as engine:
        engine.training = _in_progress
        arn = engine.start({"recipe_name": "tiny-qa"}, name="left-at-launch")
        deadline = time.monotonic() + 60
        while "Launch" not in [
            e.get("stateEnteredEventDetails", {}).get("name") for e in engine.history(arn)
        ]:
            assert time.monotonic() < deadline, "the execution never reached Launch"
            time.sleep(0.05)
        deliveries = len(engine.deliveries)
    assert [t.name for t in threading.enumerate() if t not in before] == []
    assert _ends_of(engine, arn) == ["ABORTED"]
    # The abnormal-end rule's Cleanup ran for it in this engine, before the engine was gone.
    (delivery,) = engine.deliveries[deliveries:]
    assert delivery[0] == STATUS_CHANGE and "Cleanup" in delivery[1], delivery


def test_an_execution_left_running_does_not_reach_the_next_engine(template):
    hold = {"StartAt": "Hold", "States": {"Hold": {"Type": "Wait", "Seconds": 4, "End": True}}}
    with _engine(template, time_scale=1.0) as first:  # a real 4 s wait, which outlasts the engine
        sfn = first.client("stepfunctions")
        machine = sfn.create_state_machine(
            name="hold", definition=json.dumps(hold), roleArn=f"arn:aws:iam::{ACCOUNT}:role/sfn"
        )
        arn = sfn.start_execution(stateMachineArn=machine["stateMachineArn"], name="held")["executionArn"]
        started = time.monotonic()
    with _engine(template) as second:
        # Past the wait's end: an execution still running would have ended by now, inside this engine.
        while time.monotonic() < started + 7:
            time.sleep(0.1)
        assert _ends_of(second, arn) == []
    assert _ends_of(first, arn) == ["ABORTED"]
