"""The endpoint's tag and the deployment record follow what serves, or say they could not: Record tries each
write whatever the other did, a failed one ends the deploy ``RecordIncomplete`` (naming what serves, nothing
removed), and a rerun of the same deploy writes what is missing."""

from __future__ import annotations

import contextlib
import json

import pytest
from botocore.exceptions import ClientError
from deploy_helpers import ENDPOINT, deploy, named, register, stored_record, tags, wiped
from pipeline_lambdas import aws

from hfpipe import contract


@pytest.fixture
def clean(fresh):
    yield from wiped(fresh)


pytestmark = pytest.mark.slow


@contextlib.contextmanager
def refused(service: str, operation: str):
    """The Lambdas' ``service`` client answers AccessDeniedException to ``operation`` while the block runs."""

    def deny(**_):
        raise ClientError(
            {
                "Error": {"Code": "AccessDeniedException", "Message": f"not allowed: {operation}"},
                "ResponseMetadata": {"HTTPStatusCode": 400, "RequestId": "r"},
            },
            operation,
        )

    import boto3

    # The engine's client when it gives the Lambdas one, else one of boto3's default session.
    client = aws.OVERRIDES.get(service)
    events = client.meta.events if client is not None else boto3.DEFAULT_SESSION.events
    event = f"before-call.{service}.{operation}"
    events.register_first(event, deny)
    try:
        yield
    finally:
        events.unregister(event, deny)


@pytest.mark.parametrize(
    ("service", "operation", "missing"),
    [("sagemaker", "AddTags", "the endpoint's tag"), ("ssm", "PutParameter", "the deployment record")],
)
def test_a_failed_claim_write_leaves_the_other_written_and_a_rerun_repairs_it(
    clean, service, operation, missing
):
    version = register(clean)
    with refused(service, operation):
        _, r = deploy(clean, version)
    assert (r.status, r.error) == ("FAILED", "RecordIncomplete"), (r.error, r.cause)
    cause = json.loads(r.cause)["errorMessage"]
    assert f"endpoint {ENDPOINT} serves InService, serving tiny-qa/" in cause
    assert f"could not write {missing}" in cause and "AccessDeniedException" in cause
    assert "a rerun of `hfpipe deploy --env dev --model tiny-qa/" in cause
    # The version serves: nothing was removed, and what could be written names it.
    assert named(clean)["endpoints"] == [ENDPOINT]
    endpoint = clean.client("sagemaker").describe_endpoint(EndpointName=ENDPOINT)
    tag = tags(clean, endpoint["EndpointArn"]).get(contract.TAG_MODEL_VERSION)
    record = stored_record(clean)
    if operation == "AddTags":
        assert record is not None and record["model_version_arn"] == version
    else:
        assert record is None and tag == version
    # The rerun smoke-tests the serving version again and writes both.
    _, again = deploy(clean, version)
    assert again.status == "SUCCEEDED", again.cause
    assert "CreateEndpoint" not in again.states and "UpdateEndpoint" not in again.states
    assert stored_record(clean)["model_version_arn"] == version
    assert tags(clean, endpoint["EndpointArn"])[contract.TAG_MODEL_VERSION] == version
