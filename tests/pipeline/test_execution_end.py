"""The Cleanup function's abnormal-end path acts only on Step Functions' own status changes of this
environment's state machine (source, detail-type and detail.stateMachineArn); anything else is ignored
before any SageMaker or SNS call. The genuine path runs end to end in test_pipeline_abnormal_ends.py."""

from __future__ import annotations

import json

import pytest
from accounts import ACCOUNT
from pipeline_lambdas import cleanup, execution_end

OURS = f"arn:aws:states:eu-west-1:{ACCOUNT}:stateMachine:hfpipe-dev-pipeline"


class Untouchable:
    """A client any call to which fails the test."""

    def __getattr__(self, name):
        raise AssertionError(f"{name} called for an event that should have been ignored")


def status_change(**change):
    event = {
        "version": "0",
        "source": "aws.states",
        "detail-type": "Step Functions Execution Status Change",
        "detail": {
            "stateMachineArn": OURS,
            "executionArn": OURS.replace(":stateMachine:", ":execution:") + ":run-1",
            "name": "run-1",
            "status": "TIMED_OUT",
        },
    }
    return {**event, **change}


@pytest.mark.parametrize(
    "change",
    [
        {"source": "my.app"},
        {"detail-type": "Step Functions Execution Status Change (forged)"},
        {
            "detail": {
                "stateMachineArn": OURS.replace("hfpipe-dev-", "other-"),
                "name": "run-1",
                "status": "TIMED_OUT",
            }
        },
        {"detail": {"name": "run-1", "status": "TIMED_OUT"}},
        {"detail": "run-1"},
    ],
    ids=["source", "detail-type", "other-state-machine", "no-state-machine", "detail-not-object"],
)
def test_events_from_elsewhere_are_ignored_before_any_call(change):
    result = execution_end.on_execution_end(
        status_change(**change), Untouchable(), Untouchable(), "arn:topic", "dev", OURS
    )
    assert result["ignored"] is True and result["reason"]


def test_without_its_state_machine_arn_nothing_is_acted_on():
    result = execution_end.on_execution_end(status_change(), Untouchable(), Untouchable(), "t", "dev", "")
    assert result["ignored"] is True


def test_the_handler_checks_against_its_environment(monkeypatch):
    """The handler passes STATE_MACHINE_ARN: a forged event naming another state machine does nothing."""
    monkeypatch.setenv("HFPIPE_ENV", "dev")
    monkeypatch.setenv("STATE_MACHINE_ARN", OURS)
    monkeypatch.setattr(cleanup.aws, "OVERRIDES", {"sagemaker": Untouchable(), "sns": Untouchable()})
    forged = status_change(
        detail={"stateMachineArn": OURS + "x", "name": "run-1", "status": "ABORTED", "input": json.dumps({})}
    )
    assert cleanup.handler(forged, None)["ignored"] is True
