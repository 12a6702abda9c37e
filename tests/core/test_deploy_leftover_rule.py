"""hfpipe.core.run.cleanup.deploy_leftovers: what a named endpoint's failed deploy clean-up left, on moto's
SageMaker: only this environment's deploys' configs and models (by tags), of executions that ended without
success, that neither the endpoint (live or pending config) nor its deployment record uses."""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from accounts import ACCOUNT
from moto import mock_aws
from sagemaker_resources import serving_resources

from hfpipe import contract
from hfpipe.core.run.cleanup import deploy_leftovers

REGION = "eu-west-1"
ENDPOINT = contract.deployed_endpoint_name("dev", "summaries")


def made(
    sm: Any, name: str, execution: str, *, env: str = "dev", deployment: str = "summaries", **extra: str
) -> None:
    tags = [
        {"Key": contract.TAG_ENV, "Value": env},
        {"Key": contract.TAG_MANAGED_BY, "Value": contract.PROJECT},
        {"Key": contract.TAG_DEPLOYMENT, "Value": deployment},
        {"Key": contract.TAG_DEPLOY_EXECUTION, "Value": execution},
        *({"Key": k, "Value": v} for k, v in extra.items()),
    ]
    serving_resources(
        sm,
        model=name,
        config=name,
        role=f"arn:aws:iam::{ACCOUNT}:role/x",
        tags=tags,
        PrimaryContainer={"Image": f"{ACCOUNT}.dkr.ecr.eu-west-1.amazonaws.com/x:1"},
    )


@pytest.fixture
def sm() -> Any:
    with mock_aws():
        yield boto3.client("sagemaker", region_name=REGION)


def test_only_an_unused_config_and_model_of_an_unsuccessful_deploy_are_leftovers(sm: Any) -> None:
    statuses = {
        "d-live": "SUCCEEDED",
        "d-old": "SUCCEEDED",
        "d-failed": "FAILED",
        "d-aborted": "ABORTED",
        "d-running": "RUNNING",
        "d-recorded": "FAILED",
    }
    made(sm, f"{ENDPOINT}-v1-live", "d-live")
    sm.create_endpoint(EndpointName=ENDPOINT, EndpointConfigName=f"{ENDPOINT}-v1-live")
    made(sm, f"{ENDPOINT}-v0-old", "d-old")  # an earlier version that served: kept (a way back by hand)
    made(sm, f"{ENDPOINT}-v2-failed", "d-failed")
    made(sm, f"{ENDPOINT}-v3-aborted", "d-aborted")
    made(sm, f"{ENDPOINT}-v4-running", "d-running")  # a deploy under way
    made(sm, f"{ENDPOINT}-v5-recorded", "d-recorded")  # the record names it: kept
    made(sm, f"{ENDPOINT}-v6-gone", "d-gone")  # Step Functions no longer knows the execution: kept
    made(sm, f"{ENDPOINT}-v7-kept", "d-failed", **{contract.TAG_KEEP: contract.TAG_KEEP_VALUE})
    made(sm, "hfpipe-prod-summaries-v2-x", "d-failed", env="prod")  # another environment's
    made(sm, f"{ENDPOINT}-v8-other", "d-failed", deployment="other")  # tagged for another name
    found = deploy_leftovers(
        sm,
        statuses.get,
        lambda name: {f"{ENDPOINT}-v5-recorded"} if name == "summaries" else set(),
        "dev",
        "summaries",
    )
    assert [(r.kind.name, r.name, r.execution) for r in found] == [
        ("endpoint config", f"{ENDPOINT}-v2-failed", "d-failed"),
        ("endpoint config", f"{ENDPOINT}-v3-aborted", "d-aborted"),
        ("model", f"{ENDPOINT}-v2-failed", "d-failed"),
        ("model", f"{ENDPOINT}-v3-aborted", "d-aborted"),
    ]
    # Every named endpoint of the environment (`hfpipe cleanup`): the other name's leftover too.
    everything = deploy_leftovers(sm, statuses.get, lambda name: set(), "dev")
    assert {r.name for r in everything} == {
        f"{ENDPOINT}-v2-failed",
        f"{ENDPOINT}-v3-aborted",
        f"{ENDPOINT}-v5-recorded",  # no record read here
        f"{ENDPOINT}-v8-other",  # named endpoint "other" has no endpoint: nothing uses it
    }


def test_an_endpoint_still_changing_keeps_them_all(sm: Any) -> None:
    made(sm, f"{ENDPOINT}-v1-live", "d-live")
    sm.create_endpoint(EndpointName=ENDPOINT, EndpointConfigName=f"{ENDPOINT}-v1-live")
    made(sm, f"{ENDPOINT}-v2-failed", "d-failed")
    from moto.backends import get_backend

    get_backend("sagemaker")[ACCOUNT][REGION].endpoints[ENDPOINT].endpoint_status = "Updating"
    assert deploy_leftovers(sm, {"d-failed": "FAILED"}.get, lambda name: set(), "dev", "summaries") == []
