"""What an endpoint serves, read from it (hfpipe.core.deploy.what_serves), against SageMaker's answers as botocore's
Stubber checks them (AWS's shapes): an update under way says both the live config and the one it moves to
(DescribeEndpoint keeps EndpointConfigName on the old fleet and names the new one in PendingDeploymentSummary),
a config deleted while the endpoint runs makes the version unknown, and a model of an image and artifact (a
pipeline run's) serves no registered version."""

from __future__ import annotations

import datetime
from typing import Any

import botocore.session
from accounts import ACCOUNT
from botocore.stub import Stubber

from hfpipe.core.deploy.what_serves import what_serves

REGION = "eu-west-1"
ENDPOINT = "hfpipe-dev-summaries"
NOW = datetime.datetime(2026, 12, 2, tzinfo=datetime.UTC)


def arn(kind: str, name: str) -> str:
    return f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:{kind}/{name}"


def version(n: int) -> str:
    return arn("model-package", f"hfpipe-dev-tiny-qa/{n}")


def endpoint(status: str, config: str, pending: str | None = None) -> dict[str, Any]:
    answer: dict[str, Any] = {
        "EndpointName": ENDPOINT,
        "EndpointArn": arn("endpoint", ENDPOINT),
        "EndpointConfigName": config,
        "EndpointStatus": status,
        "CreationTime": NOW,
        "LastModifiedTime": NOW,
        "ProductionVariants": [{"VariantName": "AllTraffic", "CurrentInstanceCount": 2}],
    }
    if pending:
        answer["PendingDeploymentSummary"] = {"EndpointConfigName": pending, "StartTime": NOW}
    return answer


def config(name: str, model: str) -> dict[str, Any]:
    return {
        "EndpointConfigName": name,
        "EndpointConfigArn": arn("endpoint-config", name),
        "CreationTime": NOW,
        "ProductionVariants": [
            {
                "VariantName": "AllTraffic",
                "ModelName": model,
                "InitialInstanceCount": 1,
                "InstanceType": "ml.m5.large",
            }
        ],
    }


def model(name: str, container: dict[str, Any]) -> dict[str, Any]:
    return {"ModelName": name, "ModelArn": arn("model", name), "CreationTime": NOW, "Containers": [container]}


def stubbed(*answers: tuple[str, dict[str, Any], dict[str, Any]]) -> Any:
    client = botocore.session.get_session().create_client(
        "sagemaker", region_name=REGION, aws_access_key_id="x", aws_secret_access_key="x"
    )
    stub = Stubber(client)
    for operation, response, params in answers:
        stub.add_response(operation, response, params)
    stub.activate()
    return client, stub


def test_an_update_under_way_says_what_serves_and_what_it_moves_to() -> None:
    sm, stub = stubbed(
        ("describe_endpoint", endpoint("Updating", "c1", pending="c2"), {"EndpointName": ENDPOINT}),
        ("describe_endpoint_config", config("c1", "m1"), {"EndpointConfigName": "c1"}),
        ("describe_model", model("m1", {"ModelPackageName": version(1)}), {"ModelName": "m1"}),
        ("describe_endpoint_config", config("c2", "m2"), {"EndpointConfigName": "c2"}),
        ("describe_model", model("m2", {"ModelPackageName": version(2)}), {"ModelName": "m2"}),
    )
    serving = what_serves(sm, ENDPOINT)
    stub.assert_no_pending_responses()
    assert serving is not None
    assert (serving.version_arn, serving.pending_version_arn, serving.current_instance_count) == (
        version(1),
        version(2),
        2,
    )
    assert not serving.serves(version(1)) and not serving.serves(version(2))  # still updating
    assert serving.describe("dev") == (
        "Updating, serving tiny-qa/1 (config c1, model m1); updating to tiny-qa/2 (config c2, model m2)"
    )
    assert serving.mismatch(version(2), "deployment record", "dev") == (
        "the deployment record names tiny-qa/2, which is not what serves"
    )
    assert serving.mismatch(version(1), "deployment record", "dev") is None


def test_a_deleted_config_makes_the_version_unknown_and_a_runs_model_serves_no_version() -> None:
    gone = {"Code": "ValidationException", "Message": 'Could not find endpoint configuration "c1".'}
    sm, stub = stubbed(("describe_endpoint", endpoint("InService", "c1"), {"EndpointName": ENDPOINT}))
    stub.add_client_error("describe_endpoint_config", gone["Code"], gone["Message"], 400)
    serving = what_serves(sm, ENDPOINT)
    assert serving is not None and serving.version_arn is None
    assert serving.describe("dev") == (
        "InService, serving an unknown version (endpoint config c1 no longer exists) (config c1, model -)"
    )
    run_model = {"Image": f"{ACCOUNT}.dkr.ecr.{REGION}.amazonaws.com/x:1", "ModelDataUrl": "s3://b/m"}
    sm, stub = stubbed(
        ("describe_endpoint", endpoint("InService", "c1"), {"EndpointName": ENDPOINT}),
        ("describe_endpoint_config", config("c1", "m1"), {"EndpointConfigName": "c1"}),
        ("describe_model", model("m1", run_model), {"ModelName": "m1"}),
    )
    serving = what_serves(sm, ENDPOINT)
    assert serving is not None and serving.version_arn is None
    assert serving.describe("dev") == "InService, serving no registered version (config c1, model m1)"
