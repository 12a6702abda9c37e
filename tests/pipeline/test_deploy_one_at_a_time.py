"""One deploy at a time per endpoint, and the version's approval re-checked before traffic moves and before the
record is written: on the local engine (the real deploy state machine, UpdateEndpoint played by the test-only
stand-in), a deploy started while another of the same endpoint runs is refused and the first one is recorded;
a version rejected while its update ran is not recorded and the previous config serves again."""

from __future__ import annotations

import datetime
import json
from typing import Any

import pytest
from accounts import ACCOUNT
from botocore.stub import Stubber
from deploy_helpers import (
    ENDPOINT,
    NAME,
    assert_serves_again,
    deploy,
    named,
    register,
    state_input,
    stored_record,
    wiped,
)
from deploy_standin import Update, stand_in_updates

pytestmark = pytest.mark.slow
ANSWER = [{"answer": "pipeline", "score": 0.9}]
MACHINE = f"arn:aws:states:eu-west-1:{ACCOUNT}:stateMachine:hfpipe-dev-deploy"


@pytest.fixture
def clean(fresh):
    yield from wiped(fresh)


def first_deploy(engine: Any) -> dict[str, Any]:
    _, r = deploy(engine, register(engine))
    assert r.status == "SUCCEEDED", r.cause
    return dict(r.output)


def test_a_deploy_started_while_another_of_the_endpoint_runs_is_refused(clean):
    before = first_deploy(clean)
    second, third = register(clean), register(clean)
    refused: list[Any] = []

    def smoke(name: str, body: Any) -> Any:
        # The second deploy is RUNNING (its smoke test): a third one of the same endpoint starts now.
        if not refused:
            refused.append(deploy(clean, third))
        return ANSWER

    clean.endpoint = smoke
    with stand_in_updates(clean, Update(polls=1)):
        name, r = deploy(clean, second)
    assert r.status == "SUCCEEDED", r.cause
    ((_, late),) = refused
    assert (late.status, late.error, late.states) == ("FAILED", "DeployInProgress", ["Prepare", "Refused"])
    message = json.loads(late.cause)["errorMessage"]
    assert message.startswith(f"endpoint {NAME!r}: deploy execution {name} (started ")
    assert "is still running; accepted: one deploy at a time per endpoint" in message
    # The first deploy's way back and record are its own: it serves, it is recorded, nothing of the third.
    assert stored_record(clean)["model_version_arn"] == second == r.output["model_version_arn"]
    assert r.output["previous_endpoint_config"] == before["endpoint_config"]
    assert not [
        c for c in named(clean)["endpoint_configs"] if c.startswith(f"{ENDPOINT}-v{third.rsplit('/', 1)[1]}-")
    ]


def test_a_version_rejected_during_its_update_is_not_recorded_and_the_previous_config_serves(clean):
    before = first_deploy(clean)
    second = register(clean)
    sm = clean.client("sagemaker")

    def reject_then_answer(name: str, body: Any) -> Any:
        sm.update_model_package(ModelPackageArn=second, ModelApprovalStatus="Rejected")
        return ANSWER

    clean.endpoint = reject_then_answer
    with stand_in_updates(clean, Update(polls=1), Update(polls=1)) as play:
        _, r = deploy(clean, second)
    assert (r.status, r.error) == ("FAILED", "VersionRejectedDuringDeploy"), r.cause
    cause = json.loads(r.cause)["errorMessage"]
    assert (
        "is Rejected now, checked before the record is written: it was Approved when the deploy started"
        in cause
    )
    assert (
        f"endpoint {ENDPOINT} serves config {state_input(r, 'DeployFailed')['deploy']['endpoint_config_name']}"
        in cause
    )
    assert "the previous config is put back, and nothing is recorded" in cause
    assert r.states[r.states.index("SmokeTest") :][:4] == [
        "SmokeTest",
        "ApprovalBeforeRecord",
        "PutPreviousBack?",
        "PutPreviousConfigBack",
    ]
    assert "Record" not in r.states
    assert play.requests[1]["EndpointConfigName"] == before["endpoint_config"]
    assert_serves_again(clean, before)


def test_a_version_rejected_before_traffic_moves_starts_nothing(clean, monkeypatch):
    """Rejected between Prepare and the update: ApprovalBeforeTraffic refuses, no UpdateEndpoint is sent, and
    the model and config this deploy made are cleaned up."""
    from pipeline_lambdas import deploy_prepare

    before = first_deploy(clean)
    second = register(clean)
    prepare = deploy_prepare.prepare

    def prepare_then_reject(*args: Any, **kwargs: Any) -> Any:
        prepared = prepare(*args, **kwargs)
        clean.client("sagemaker").update_model_package(ModelPackageArn=second, ModelApprovalStatus="Rejected")
        return prepared

    monkeypatch.setattr(deploy_prepare, "prepare", prepare_then_reject)
    with stand_in_updates(clean) as play:
        _, r = deploy(clean, second)
    assert (r.status, r.error) == ("FAILED", "VersionRejectedDuringDeploy"), r.cause
    assert "checked before traffic moves" in r.cause and "what this deploy made is cleaned up" in r.cause
    assert r.states[-4:] == ["CreateEndpointConfig", "ApprovalBeforeTraffic", "DeployCleanup", "DeployFailed"]
    assert play.requests == []
    assert named(clean)["endpoint_configs"] == [before["endpoint_config"]] and stored_record(clean) == before


def _execution(name: str, started: datetime.datetime) -> dict[str, Any]:
    arn = f"arn:aws:states:eu-west-1:{ACCOUNT}:execution:hfpipe-dev-deploy:{name}"
    return {
        "executionArn": arn,
        "stateMachineArn": MACHINE,
        "name": name,
        "status": "RUNNING",
        "startDate": started,
    }


@pytest.mark.parametrize(
    ("others", "goes_first"),
    [
        # (name, endpoint, seconds after ours) of the other RUNNING executions; the one that goes first, if not ours.
        ([("a", NAME, -5)], "a"),
        ([("a", "classifier", -5)], None),  # another endpoint's deploy does not hold this one
        ([("b", NAME, +5)], None),  # started after ours: it is the one refused (by its own Prepare)
        ([("a", NAME, 0)], "a"),  # the same second: the least name goes first
        ([("z", NAME, 0)], None),
        # ListExecutions does not list this one yet (eventually consistent): a listed one started first.
        ([("m", None, 0), ("b", NAME, -1)], "b"),
    ],
)
def test_which_deploy_goes_first(others, goes_first):
    """ListExecutions (RUNNING) and DescribeExecution as the API reference answers them, through Stubber."""
    import boto3
    from pipeline_lambdas import deploy_guards

    ours = datetime.datetime(2026, 1, 1, 12, 0, 0, tzinfo=datetime.UTC)
    machine = MACHINE
    client = boto3.client(
        "stepfunctions", region_name="eu-west-1", aws_access_key_id="x", aws_secret_access_key="x"
    )
    # ("m", None, 0) among ``others``: this execution itself is not listed.
    listed = [_execution("m", ours)] * (("m", None, 0) not in others) + [
        _execution(n, ours + datetime.timedelta(seconds=s)) for n, e, s in others if e
    ]
    inputs = {"m": NAME, **{n: e for n, e, _ in others if e}}
    with Stubber(client) as stub:
        stub.add_response(
            "list_executions", {"executions": listed}, {"stateMachineArn": machine, "statusFilter": "RUNNING"}
        )
        for execution in listed:
            stub.add_response(
                "describe_execution",
                {
                    **{
                        k: execution[k]
                        for k in ("executionArn", "stateMachineArn", "name", "status", "startDate")
                    },
                    "input": json.dumps({"version": "tiny-qa/1", "endpoint": inputs[execution["name"]]}),
                },
                {"executionArn": execution["executionArn"]},
            )
        first = deploy_guards.other_deploy(client, machine, "m", NAME)
    assert (first.split(" ")[0] if first else None) == goes_first
