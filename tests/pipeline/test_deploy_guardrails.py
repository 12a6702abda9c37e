"""The real Deploy state machine (dev PipelineStack) against local mode's UpdateEndpoint emulation, with no
test stand-in: the template's endpoint alarms are made in moto, a good version's update succeeds through the
blue/green deployment, and a version whose fleet fails the stand-in traffic trips the 5xx alarm, so SageMaker's
automatic rollback leaves the old version serving and the deploy fails with DeploymentRolledBack; a way back
refused (its config deleted meanwhile) fails with WayBackFailed naming what serves."""

from __future__ import annotations

import contextlib
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from deploy_helpers import ENDPOINT, NAME, deploy, named, register, state_input, stored_record, wiped

from hfpipe import contract

pytestmark = pytest.mark.slow
ALARM_5XX = contract.endpoint_alarm_name("dev", NAME, "5xx-errors")


class Fleets:
    """Every fleet answers as a QA model; a ``broken`` version's worker dies on a long context (a 5XX)."""

    def __init__(self) -> None:
        self.broken: str | None = None
        self.stopped: list[str] = []

    def start_fleet(self, endpoint: str, config: str) -> None:
        pass

    def invoke_fleet(self, endpoint: str, config: str | None, body: Any) -> Any:
        context = (body.get("inputs") or {}).get("context", "") if isinstance(body, dict) else ""
        if config and self.broken and config.startswith(self.broken) and len(context) > 120:
            raise _WorkerDied
        return [{"answer": "pipeline", "score": 0.9}]

    def stop_fleet(self, endpoint: str, config: str) -> None:
        self.stopped.append(config)


class _WorkerDied(BaseException):
    pass


@pytest.fixture
def clean(fresh, monkeypatch):
    """The module's engine with its named endpoint wiped, and CloudWatch as this test made it: the clock is
    real and the endpoint keeps its name, so an earlier test's errors of the last minute would otherwise put
    its alarms in ALARM (and a deploy would wait for them, or be refused); each test's alarms see only the
    datapoints of its own time."""
    from hfpipe.local.engine import cloudwatch

    horizon = datetime.now(UTC)
    real = cloudwatch._period_value

    def own_datapoints(client: Any, alarm: dict[str, Any], start: datetime, period: int) -> float | None:
        if start + timedelta(seconds=period) <= horizon:
            return None
        return real(client, alarm, max(start, horizon), period)

    monkeypatch.setattr(cloudwatch, "_period_value", own_datapoints)
    # An alarm an earlier test left in ALARM keeps that state while its data is missing: each test starts OK.
    watch = fresh.client("cloudwatch")
    for name in fresh.alarm_names:
        watch.set_alarm_state(AlarmName=name, StateValue="OK", StateReason="a new test starts")
    fresh.fleets = Fleets()
    yield from wiped(fresh)
    fresh.fleets = None


def config_of(engine: Any) -> str:
    return str(engine.client("sagemaker").describe_endpoint(EndpointName=ENDPOINT)["EndpointConfigName"])


def test_the_templates_endpoint_alarms_exist_in_moto(fresh):
    assert {ALARM_5XX, contract.endpoint_alarm_name("dev", NAME, "model-latency")} <= set(fresh.alarm_names)
    (alarm,) = fresh.client("cloudwatch").describe_alarms(AlarmNames=[ALARM_5XX])["MetricAlarms"]
    assert (alarm["MetricName"], alarm["Statistic"], alarm["Period"]) == ("Invocation5XXErrors", "Sum", 60)
    assert alarm["Dimensions"] == [
        {"Name": "EndpointName", "Value": ENDPOINT},
        {"Name": "VariantName", "Value": "AllTraffic"},
    ]


def test_an_update_succeeds_then_a_worse_version_is_rolled_back_by_its_alarm(clean):
    _, first = deploy(clean, register(clean))
    assert first.status == "SUCCEEDED", first.cause
    _, second = deploy(clean, register(clean))
    assert second.status == "SUCCEEDED", second.cause
    assert "UpdateEndpoint" in second.states and config_of(clean) == second.output["endpoint_config"]
    assert clean.guardrails.wait(ENDPOINT).outcome == "succeeded"
    assert first.output["endpoint_config"] in clean.fleets.stopped  # the old fleet terminated

    serving = config_of(clean)
    worse = register(clean)
    clean.fleets.broken = f"{ENDPOINT}-v{worse.rsplit('/', 1)[1]}-"  # the configs Prepare makes for it
    _, third = deploy(clean, worse)
    assert (third.status, third.error) == ("FAILED", "DeploymentRolledBack"), third.cause
    assert f"was rolled back to {serving}" in third.cause and ALARM_5XX in third.cause
    desc = clean.client("sagemaker").describe_endpoint(EndpointName=ENDPOINT)
    assert (desc["EndpointStatus"], desc["EndpointConfigName"]) == ("InService", serving)
    assert [c for c in clean.fleets.stopped if c.startswith(clean.fleets.broken)]  # the new fleet stopped
    assert clean.alarm_states(ALARM_5XX) == {ALARM_5XX: "ALARM"}
    assert named(clean)["endpoints"] == [ENDPOINT]


def test_a_way_back_refused_ends_with_an_error_naming_what_serves(clean, monkeypatch):
    """The previous config is deleted while the new version's smoke test runs: the way back (UpdateEndpoint to
    it) is refused as AWS refuses it, and the execution fails with WayBackFailed naming the version that
    serves, read from the endpoint; the tag and the record, which still name the previous version, are left
    as they were and said not to serve."""
    from hfpipe.local.engine import cloudwatch

    # Not a test of the alarms (the wait for them has its own, below): CloudWatch's clock is real, so errors
    # of an earlier test in this module may still hold one in ALARM; they are played OK here.
    monkeypatch.setattr(cloudwatch, "evaluate", lambda client, name, now=None: "OK")
    _, first = deploy(clean, register(clean))
    assert first.status == "SUCCEEDED", first.cause
    old = first.output["endpoint_config"]
    second = register(clean)
    ref = "tiny-qa/" + second.rsplit("/", 1)[1]
    sm = clean.client("sagemaker")
    fleets = clean.fleets

    def bad_answer_and_old_config_gone(endpoint: str, config: str | None, body: Any) -> Any:
        if config != old:
            with contextlib.suppress(sm.exceptions.ClientError):
                sm.delete_endpoint_config(EndpointConfigName=old)
            return [{"generated_text": "not an answer"}]
        return Fleets.invoke_fleet(fleets, endpoint, config, body)

    fleets.invoke_fleet = bad_answer_and_old_config_gone
    _, r = deploy(clean, second)
    assert (r.status, r.error) == ("FAILED", "WayBackFailed"), (r.error, r.cause)
    new = state_input(r, "DeployFailed")["deploy"]["endpoint_config_name"]
    assert config_of(clean) == new
    assert r.states[-4:] == [
        "PutPreviousConfigBack",
        "WhatServesAfterWayBack",
        "DeployCleanup",
        "DeployFailed",
    ]
    cause = json.loads(r.cause)["errorMessage"]
    assert f"the way back to config {old} (tiny-qa/{first.output['version']}) failed" in cause
    assert (
        "Could not find endpoint configuration" in cause
        and "after SmokeTestFailed: smoke test: answer" in cause
    )
    assert f"endpoint {ENDPOINT} is InService, serving {ref} (config {new}, model {new})" in cause
    assert (
        f"its tag and deployment record still name tiny-qa/{first.output['version']}, which does not serve"
        in cause
    )
    assert stored_record(clean) == first.output  # never written over with a version that does not serve
    # Nothing in use was deleted: the endpoint and the config and model that serve stay.
    assert named(clean)["endpoints"] == [ENDPOINT] and new in named(clean)["endpoint_configs"]


def test_an_update_started_while_an_alarm_is_in_alarm_waits_for_it_then_deploys(clean, monkeypatch):
    """The state machine's wait (Prepare says "wait", WaitForAlarms, PrepareAgain) until the alarm is OK;
    CloudWatch's clock is played by a script: the 5xx alarm reads ALARM for its first two looks."""
    from hfpipe.local.engine import cloudwatch

    _, first = deploy(clean, register(clean))
    assert first.status == "SUCCEEDED", first.cause
    looks = {"left": 2}
    real = cloudwatch.evaluate

    def evaluate(client: Any, name: str, now: Any = None) -> str:
        if name != ALARM_5XX:
            return real(client, name, now)
        # ALARM twice, then OK (whatever errors an earlier test of the module left in the last minute).
        state = "ALARM" if looks["left"] else "OK"
        looks["left"] = max(0, looks["left"] - 1)
        client.set_alarm_state(AlarmName=name, StateValue=state, StateReason="played by the test")
        return state

    monkeypatch.setattr(cloudwatch, "evaluate", evaluate)
    _, second = deploy(clean, register(clean))
    assert second.status == "SUCCEEDED", second.cause
    assert second.states.count("WaitForAlarms") == 2 and second.states.count("PrepareAgain") == 2
    assert second.states.index("PrepareAgain") < second.states.index("UpdateEndpoint")
    assert config_of(clean) == second.output["endpoint_config"]
