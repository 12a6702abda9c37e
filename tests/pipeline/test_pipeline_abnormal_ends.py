"""Every abnormal end is cleaned up: stopped and timed-out executions on the local engine, mid-way through
the smoke test (model, endpoint config and endpoint exist), reach Cleanup through the EventBridge rule
on the state machine's "Step Functions Execution Status Change" events, which the engine emits as
Step Functions does (https://docs.aws.amazon.com/step-functions/latest/dg/cw-events.html)."""

from __future__ import annotations

import itertools
import threading
import time

import pytest

pytestmark = pytest.mark.slow
_ids = itertools.count()


def deployed(engine, name):
    res = engine.sagemaker_resources()
    base = f"dev-{name}"
    return {k: [n for n in v if n.startswith(base)] for k, v in res.items() if k != "training_jobs"}


NOTHING = {"models": [], "endpoint_configs": [], "endpoints": []}


class Blocking:
    """An endpoint plug-in that holds the smoke test until released (the execution is mid-way)."""

    def __init__(self):
        self.entered, self.release = threading.Event(), threading.Event()

    def __call__(self, name, body):
        self.entered.set()
        self.release.wait(30)
        return [{"answer": "late", "score": 0.1}]


def cleanup_reports(engine, name):
    return [
        answer
        for detail_type, _, answer in engine.deliveries
        if detail_type == "Step Functions Execution Status Change" and answer.get("execution_name") == name
    ]


def released_and_cleaned(engine, blocking, arn, name, status, error):
    """Release the held smoke test: the execution ends ``status``, the abnormal end's clean-up leaves nothing
    of it and reports ``error``; that report."""
    blocking.release.set()
    r = engine.wait(arn, timeout_s=60)
    assert r.status == status
    assert deployed(engine, name) == NOTHING
    (report,) = cleanup_reports(engine, name)
    assert report["reported"] is True and report["error"] == error
    return report


def test_a_stopped_execution_is_cleaned_up_and_reported(fresh):
    blocking = Blocking()
    fresh.endpoint = blocking
    name = f"stopped-{next(_ids)}"
    arn = fresh.start({"recipe_name": "tiny-qa", "poll_seconds": 1}, name=name)
    assert blocking.entered.wait(30), "the smoke test never started"
    assert deployed(fresh, name)["endpoints"] == [f"dev-{name}-ep"]
    fresh.client("stepfunctions").stop_execution(executionArn=arn, error="Stopped", cause="by the test")
    report = released_and_cleaned(fresh, blocking, arn, name, "ABORTED", "ExecutionAborted")
    assert report["endpoint_deleted"] is True


def test_a_timed_out_execution_is_cleaned_up_and_reported(fresh):
    blocking = Blocking()
    fresh.endpoint = blocking
    name = f"timedout-{next(_ids)}"
    # Long enough for the run to reach its smoke test on a loaded machine (3 s was not, on 2 busy cores).
    timeout_s = 10
    machine = fresh.state_machine_with_timeout(timeout_s)
    started = time.monotonic()
    arn = fresh.start({"recipe_name": "tiny-qa", "poll_seconds": 1}, name=name, state_machine_arn=machine)
    assert blocking.entered.wait(30), "the smoke test never started"
    assert time.monotonic() - started < timeout_s, "the smoke test started after the execution's timeout"
    # Hold the smoke test until the execution has timed out: the clock of TimeoutSeconds starts when the
    # interpreter begins the definition, later than start_execution returns (on 2 busy cores, by more than
    # any fixed margin), so the release waits on the execution's own status, not on a sleep.
    sfn = fresh.client("stepfunctions")
    deadline = time.monotonic() + 60
    while sfn.describe_execution(executionArn=arn)["status"] == "RUNNING":
        assert time.monotonic() < deadline, "the execution never timed out"
        time.sleep(0.2)
    released_and_cleaned(fresh, blocking, arn, name, "TIMED_OUT", "ExecutionTimedOut")


def test_a_failure_the_state_machine_reported_is_cleaned_again_but_not_reported_twice(fresh):
    fresh.endpoint = lambda name, body: []  # the smoke test fails: Catch -> Cleanup -> Report -> Fail
    name = f"caught-{next(_ids)}"
    r = fresh.run({"recipe_name": "tiny-qa", "poll_seconds": 1}, name=name)
    assert (r.status, r.error) == ("FAILED", "SmokeTestFailed")
    (report,) = cleanup_reports(fresh, name)
    assert report["reported"] is False and report["cleanup"]["deleted"] == []
