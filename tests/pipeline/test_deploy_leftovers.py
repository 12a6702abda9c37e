"""What a failed clean-up left is found by the next one: a deploy whose DeployCleanup could not delete its
endpoint config leaves it; the next deploy that fails removes it in its own clean-up (this environment's, made
by a deploy of this endpoint whose execution ended unsuccessfully, used by nothing), and keeps the configs that
serve or are recorded."""

from __future__ import annotations

import contextlib

import pytest
from botocore.exceptions import ClientError
from deploy_helpers import deploy, named, register, state_input, wiped
from deploy_standin import Update, stand_in_updates
from pipeline_lambdas import aws


@pytest.fixture
def clean(fresh):
    yield from wiped(fresh)


pytestmark = pytest.mark.slow


@contextlib.contextmanager
def throttled(operation: str):
    """The Lambdas' SageMaker client answers ThrottlingException to ``operation`` while the block runs."""

    def refuse(**_):
        raise ClientError(
            {
                "Error": {"Code": "ThrottlingException", "Message": "Rate exceeded"},
                "ResponseMetadata": {"HTTPStatusCode": 400, "RequestId": "r"},
            },
            operation,
        )

    events = aws.OVERRIDES["sagemaker"].meta.events
    events.register_first(f"before-call.sagemaker.{operation}", refuse)
    try:
        yield
    finally:
        events.unregister(f"before-call.sagemaker.{operation}", refuse)


def test_a_config_a_failed_clean_up_left_is_removed_by_the_next_clean_up(clean):
    _, first = deploy(clean, register(clean))
    assert first.status == "SUCCEEDED", first.cause
    live = first.output["endpoint_config"]
    with stand_in_updates(clean, Update(polls=1, outcome="rolled back")), throttled("DeleteEndpointConfig"):
        failed_name, r = deploy(clean, register(clean))
    assert (r.status, r.error) == ("FAILED", "DeploymentRolledBack"), r.cause
    left = state_input(r, "DeployFailed")["deploy"]["endpoint_config_name"]
    assert "DeployCleanupIncomplete" in str(state_input(r, "DeployFailed").get("cleanup_error"))
    assert named(clean)["endpoint_configs"] == sorted([live, left])
    # The next deploy fails too; its clean-up finds what the failed one left.
    with stand_in_updates(clean, Update(polls=1, outcome="rolled back")):
        _, r = deploy(clean, register(clean))
    assert (r.status, r.error) == ("FAILED", "DeploymentRolledBack"), r.cause
    deleted = state_input(r, "DeployFailed")["cleanup"]["deleted"]
    assert f"endpoint config {left} (left by {failed_name})" in deleted
    assert named(clean)["endpoint_configs"] == [live] and named(clean)["models"] == [first.output["model"]]


def test_a_rerun_that_succeeds_removes_what_a_failed_clean_up_left(clean):
    _, first = deploy(clean, register(clean))
    assert first.status == "SUCCEEDED", first.cause
    second = register(clean)
    with stand_in_updates(clean, Update(polls=1, outcome="rolled back")), throttled("DeleteEndpointConfig"):
        failed_name, r = deploy(clean, second)
    assert (r.status, r.error) == ("FAILED", "DeploymentRolledBack"), r.cause
    left = state_input(r, "DeployFailed")["deploy"]["endpoint_config_name"]
    with stand_in_updates(clean, Update(polls=1)):
        _, r = deploy(clean, second)
    assert r.status == "SUCCEEDED", r.cause
    assert r.states[-3:] == ["Record", "SweepLeftovers", "Deployed"]
    assert state_input(r, "Deployed")["swept"] == {
        "deleted": [f"endpoint config {left} (left by {failed_name})"]
    }
    assert named(clean)["endpoint_configs"] == sorted(
        [first.output["endpoint_config"], r.output["endpoint_config"]]
    )
