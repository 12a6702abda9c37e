"""No deploy outgrows Step Functions: the bounds hfpipe.core.deploy.deployments computes cover SageMaker's longest
deployment and stay far below 25,000 history events, and the longest deploy the settings allow, run on the
local engine, records no more events (counted as AWS counts them) than that bound."""

from __future__ import annotations

import math

import pytest
from app_synth import state_machine_definition
from deploy_helpers import ENDPOINT, NAME, deploy, named, register, state_input, wiped
from deploy_standin import Update, stand_in_updates
from test_pipeline_limits import aws_event_count

from hfpipe import contract
from hfpipe.core.deploy import deploy_limits, deployments
from hfpipe.core.deploy.deployments import EndpointSettings, Traffic


@pytest.fixture
def clean(fresh):
    yield from wiped(fresh)


#: The longest deployment cdk.json may declare: ten linear steps and the bake time fill SageMaker's 28,800 s.
LONGEST = EndpointSettings(
    name=NAME,
    instance_count=10,
    traffic=Traffic("LINEAR", 10, 2160),
    bake_seconds=deployments.MAX_WAIT_SECONDS,
)


def test_the_bounds_cover_the_longest_deployment_and_fit_the_history():
    assert LONGEST.deployment_seconds == deployments.MAX_DEPLOYMENT_SECONDS == 28_800
    # Every poll of the longest blue/green deployment and of SageMaker's rollback after it.
    assert deploy_limits.endpoint_polls(LONGEST) == deploy_limits.MAX_POLLS
    assert deploy_limits.MAX_POLLS * deploy_limits.POLL_SECONDS >= 28_800 + deploy_limits.ROLLBACK_SECONDS
    worst = deploy_limits.worst_case_history_events()
    assert worst < 15_000 < 25_000  # far below Step Functions' limit, the wait for the alarms counted
    assert deploy_limits.EXECUTION_TIMEOUT_SECONDS >= (
        (deploy_limits.MAX_POLLS + deploy_limits.ROLLBACK_POLLS) * deploy_limits.POLL_SECONDS
        + deploy_limits.ALARM_WAIT_SECONDS
        + deploy_limits.ALARM_POLL_SECONDS
    )
    # On AWS the wait's deadline comes before its poll count: every poll waits ALARM_POLL_SECONDS.
    aws_polls = deploy_limits.ALARM_WAIT_SECONDS // deploy_limits.ALARM_POLL_SECONDS + 1
    assert aws_polls < deploy_limits.ALARM_MAX_POLLS
    # No endpoint cdk.json may declare needs more polls than the bound counts.
    shortest = EndpointSettings(name=NAME, traffic=Traffic("ALL_AT_ONCE", None, 0), bake_seconds=0)
    assert deploy_limits.endpoint_polls(shortest) == math.ceil(
        (deployments.PROVISIONING_SECONDS + deploy_limits.ROLLBACK_SECONDS) / deploy_limits.POLL_SECONDS
    )


def test_the_definition_polls_as_the_bounds_count(template):
    d = state_machine_definition(template, contract.deploy_state_machine_name("dev"))
    states = d["States"]
    assert d["TimeoutSeconds"] == deploy_limits.EXECUTION_TIMEOUT_SECONDS
    # Both loops: Wait (from Prepare's poll_seconds) -> DescribeEndpoint -> Choice -> Count -> Choice.
    for prefix, describe, choice, left in (
        ("Endpoint", "DescribeEndpoint", "EndpointStatus?", "$.deploy.max_polls"),
        ("Rollback", "DescribeRolledBack", "RolledBack?", "$.deploy.rollback_max_polls"),
    ):
        assert states[f"Start{prefix}Wait"]["Parameters"] == {"left.$": left}
        assert states[f"WaitFor{prefix}"] == {
            "Type": "Wait",
            "SecondsPath": "$.deploy.poll_seconds",
            "Next": describe,
        }
        assert states[describe]["Next"] == choice and states[choice]["Default"] == f"Count{prefix}Poll"
        assert states[f"Count{prefix}Poll"]["Next"] == f"{prefix}WaitLeft?"
    # The wait for rollback alarms already in ALARM: Wait -> Prepare again -> Action? (EVENTS_PER_ALARM_POLL).
    assert states["Action?"]["Choices"][2] == {
        "Variable": "$.deploy.action",
        "StringEquals": "wait",
        "Next": "WaitForAlarms",
    }
    assert states["WaitForAlarms"] == {
        "Type": "Wait",
        "SecondsPath": "$.deploy.alarm_wait.poll_seconds",
        "Next": "PrepareAgain",
    }
    assert states["PrepareAgain"]["Next"] == "Action?"
    assert states["PrepareAgain"]["Parameters"]["alarm_wait.$"] == "$.deploy.alarm_wait"
    assert [c["Next"] for c in states["PrepareAgain"]["Catch"]] == ["Refused"]
    # The retries on the longest path, 3 events each, are what RETRY_EVENTS counts.
    path = [
        "Prepare",
        "CreateModel",
        "CreateEndpointConfig",
        "UpdateEndpoint",
        "SmokeTest",
        "PutPreviousConfigBack",
    ]
    path += ["DescribeEndpoint", "DescribeRolledBack", "WhatServesAfterWayBack", "DeployCleanup"]
    retries = sum(r.get("MaxAttempts", 3) for s in path for r in states[s].get("Retry", []))
    assert 3 * retries <= deploy_limits.RETRY_EVENTS


@pytest.mark.slow
def test_the_longest_deploy_fits_the_history_bound(clean, monkeypatch):
    """The longest settings: a first deploy, then an update that comes InService on its last allowed poll, fails
    its smoke test, and whose way back never ends; then the read of what serves, clean-up and the failure."""
    monkeypatch.setenv("DEPLOY_ENDPOINTS", deployments.settings_json((LONGEST,)))
    _, first = deploy(clean, register(clean))
    assert first.status == "SUCCEEDED", first.cause
    clean.endpoint = lambda name, body: [{"generated_text": "not an answer"}]
    polls = deploy_limits.MAX_POLLS
    with stand_in_updates(clean, Update(polls=polls), Update(polls=0, outcome="never")) as play:
        _, r = deploy(clean, register(clean))
    assert (r.status, r.error) == ("FAILED", "WayBackFailed"), r.cause
    new = state_input(r, "DeployFailed")["deploy"]["endpoint_config_name"]
    assert [q["EndpointConfigName"] for q in play.requests] == [new, first.output["endpoint_config"]]
    assert r.states.count("DescribeEndpoint") == polls
    assert r.states.count("DescribeRolledBack") == deploy_limits.ROLLBACK_POLLS
    assert r.states[-5:] == [
        "RollbackWaitLeft?",
        "RollbackWaitTimeout",
        "WhatServesAfterWayBack",
        "DeployCleanup",
        "DeployFailed",
    ]
    counted = aws_event_count(r.history)
    print(f"longest deploy: {counted} history events as AWS counts them ({len(r.history)} recorded by moto)")
    assert counted <= deploy_limits.worst_case_history_events() < 25_000
    # The serving endpoint was never deleted; it is still updating back, so its configs stay.
    assert named(clean)["endpoints"] == [ENDPOINT]
