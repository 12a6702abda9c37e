"""Local mode's SageMaker inference components (hfpipe.local.inference_components, routed through
hfpipe.local.moto_patches): boto3 calls against moto with the patches installed, no engine, no containers.
botocore's shapes, the statuses on a clock the test moves, AWS's refusals, and InvokeEndpoint's routing."""

from __future__ import annotations

import contextlib
from types import SimpleNamespace

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from hfpipe.local import inference_components, moto_patches
from hfpipe.local.inference_components import InferenceComponents

REGION = "us-east-1"
ENDPOINT, PLAIN = "hfpipe-dev-adapters", "hfpipe-dev-plain"
BASE_SPEC = {
    "ModelName": "base-model",
    "ComputeResourceRequirements": {"NumberOfAcceleratorDevicesRequired": 1, "MinMemoryRequiredInMb": 1024},
}


class Clock:
    now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def world():
    clock = Clock()
    store = InferenceComponents(time_scale=lambda: 1.0, clock=clock)
    engine = SimpleNamespace(time_scale=1.0, timeout_scale=1.0, world=None, inference_components=store)
    with contextlib.ExitStack() as stack, mock_aws():
        moto_patches.install(stack, engine)  # type: ignore[arg-type]
        sm = boto3.client("sagemaker", region_name=REGION)
        role = f"arn:aws:iam::{moto_patches.default_account_id()}:role/r"
        sm.create_model(ModelName="base-model", ExecutionRoleArn=role, PrimaryContainer={"Image": "image"})
        variant = {"VariantName": "AllTraffic", "InstanceType": "ml.g5.4xlarge", "InitialInstanceCount": 1}
        sm.create_endpoint_config(
            EndpointConfigName="ic", ProductionVariants=[variant], ExecutionRoleArn=role
        )
        sm.create_endpoint(EndpointName=ENDPOINT, EndpointConfigName="ic")
        sm.create_endpoint(EndpointName="hfpipe-dev-other", EndpointConfigName="ic")
        sm.create_endpoint_config(
            EndpointConfigName="plain", ProductionVariants=[{**variant, "ModelName": "base-model"}]
        )
        sm.create_endpoint(EndpointName=PLAIN, EndpointConfigName="plain")
        runtime = boto3.client("sagemaker-runtime", region_name=REGION)
        yield SimpleNamespace(sm=sm, runtime=runtime, clock=clock, store=store)


def create_base(sm, name="base", endpoint=ENDPOINT):
    return sm.create_inference_component(
        InferenceComponentName=name,
        EndpointName=endpoint,
        Specification=BASE_SPEC,
        RuntimeConfig={"CopyCount": 1},
    )


def create_adapter(sm, name, base="base", endpoint=ENDPOINT, **spec):
    return sm.create_inference_component(
        InferenceComponentName=name,
        EndpointName=endpoint,
        Specification={
            "BaseInferenceComponentName": base,
            "Container": {"ArtifactUrl": f"s3://artifacts/adapters/{name}.tar.gz"},
            **spec,
        },
    )


def refused(call, code="ValidationException") -> str:
    with pytest.raises(ClientError) as caught:
        call()
    assert caught.value.response["Error"]["Code"] == code
    return str(caught.value.response["Error"]["Message"])


def test_a_base_then_its_adapters_in_botocores_shapes_and_statuses(world):
    sm, clock = world.sm, world.clock
    account = moto_patches.default_account_id()
    arn = create_base(sm)["InferenceComponentArn"]
    assert arn == f"arn:aws:sagemaker:{REGION}:{account}:inference-component/base"
    described = sm.describe_inference_component(InferenceComponentName="base")
    assert described["InferenceComponentStatus"] == "Creating"
    assert described["VariantName"] == "AllTraffic" and described["EndpointName"] == ENDPOINT
    assert described["Specification"]["ModelName"] == "base-model"
    assert described["RuntimeConfig"] == {"DesiredCopyCount": 1, "CurrentCopyCount": 0}
    # An adapter before its base is InService is refused, in the project's one wording of the rule.
    message = refused(lambda: create_adapter(sm, "samsum"))
    assert message.startswith("adapter component 'samsum' names base component 'base', which is Creating")
    clock.now += inference_components.SETTLE_SECONDS["Creating"]
    described = sm.describe_inference_component(InferenceComponentName="base")
    assert described["InferenceComponentStatus"] == "InService"
    assert described["RuntimeConfig"]["CurrentCopyCount"] == 1
    create_adapter(sm, "samsum")
    create_adapter(sm, "dialogsum")
    adapter = sm.describe_inference_component(InferenceComponentName="samsum")
    assert adapter["Specification"] == {
        "BaseInferenceComponentName": "base",
        "Container": {"ArtifactUrl": "s3://artifacts/adapters/samsum.tar.gz"},
    }
    assert "RuntimeConfig" not in adapter  # an adapter runs on its base's copies
    listed = sm.list_inference_components(EndpointNameEquals=ENDPOINT, SortBy="Name", SortOrder="Ascending")
    assert [c["InferenceComponentName"] for c in listed["InferenceComponents"]] == [
        "base",
        "dialogsum",
        "samsum",
    ]
    pages = sm.get_paginator("list_inference_components").paginate(PaginationConfig={"PageSize": 1})
    assert sorted(c["InferenceComponentName"] for p in pages for c in p["InferenceComponents"]) == [
        "base",
        "dialogsum",
        "samsum",
    ]
    assert sm.list_inference_components(StatusEquals="Creating")["InferenceComponents"] != []
    assert (
        sm.list_inference_components(NameContains="sum", StatusEquals="InService")["InferenceComponents"]
        == []
    )


def test_aws_refusals_of_a_component_and_of_an_adapter(world):
    sm, clock = world.sm, world.clock
    create_base(sm)
    create_base(sm, "elsewhere", endpoint="hfpipe-dev-other")
    clock.now += 60
    assert "Could not find endpoint" in refused(lambda: create_base(sm, "x", endpoint="hfpipe-dev-none"))
    assert "cannot host inference components" in refused(lambda: create_base(sm, "x", endpoint=PLAIN))
    assert "Cannot create already existing inference component" in refused(lambda: create_base(sm))
    assert "failed to satisfy constraint" in refused(lambda: create_base(sm, "no_underscores"))
    assert "does not exist" in refused(lambda: create_adapter(sm, "a", base="missing"))
    assert "is on endpoint 'hfpipe-dev-other'" in refused(lambda: create_adapter(sm, "a", base="elsewhere"))
    crr = BASE_SPEC["ComputeResourceRequirements"]
    message = refused(lambda: create_adapter(sm, "a", ComputeResourceRequirements=crr))
    assert "takes neither ComputeResourceRequirements nor ModelName" in message
    bad_url = {"ArtifactUrl": "s3://artifacts/adapters/a/"}
    assert "single gzip compressed tar archive" in refused(lambda: create_adapter(sm, "a", Container=bad_url))
    no_resources = {"ModelName": "base-model"}
    message = refused(
        lambda: sm.create_inference_component(
            InferenceComponentName="x", EndpointName=ENDPOINT, Specification=no_resources
        )
    )
    assert message.startswith("ComputeResourceRequirements is required")
    create_adapter(sm, "a")
    clock.now += 60
    assert "is itself an adapter component" in refused(lambda: create_adapter(sm, "b", base="a"))


def test_a_base_outlives_its_adapters_and_an_update_keeps_its_base(world):
    sm, clock = world.sm, world.clock
    create_base(sm)
    clock.now += 60
    create_adapter(sm, "samsum")
    clock.now += 60
    message = refused(lambda: sm.delete_inference_component(InferenceComponentName="base"))
    assert (
        message
        == "base component 'base' still holds 1 adapter component(s) (samsum); accepted: deleting its adapters first"
    )
    sm.update_inference_component(
        InferenceComponentName="samsum",
        Specification={
            "BaseInferenceComponentName": "base",
            "Container": {"ArtifactUrl": "s3://a/v2.tar.gz"},
        },
    )
    assert (
        sm.describe_inference_component(InferenceComponentName="samsum")["InferenceComponentStatus"]
        == "Updating"
    )
    assert "while it is Updating" in refused(
        lambda: sm.update_inference_component(InferenceComponentName="samsum", RuntimeConfig={"CopyCount": 2})
    )
    clock.now += inference_components.SETTLE_SECONDS["Updating"]
    adapter = sm.describe_inference_component(InferenceComponentName="samsum")
    assert adapter["InferenceComponentStatus"] == "InService"
    assert adapter["Specification"]["Container"]["ArtifactUrl"] == "s3://a/v2.tar.gz"
    moved = {"BaseInferenceComponentName": "other", "Container": {"ArtifactUrl": "s3://a/v3.tar.gz"}}
    assert "cannot change" in refused(
        lambda: sm.update_inference_component(InferenceComponentName="samsum", Specification=moved)
    )
    sm.delete_inference_component(InferenceComponentName="samsum")
    assert (
        sm.describe_inference_component(InferenceComponentName="samsum")["InferenceComponentStatus"]
        == "Deleting"
    )
    clock.now += inference_components.SETTLE_SECONDS["Deleting"]
    assert "Could not find inference component" in refused(
        lambda: sm.describe_inference_component(InferenceComponentName="samsum")
    )
    sm.delete_inference_component(InferenceComponentName="base")  # no adapter left on it


def test_invoke_endpoint_reaches_a_named_component_of_its_endpoint_only(world):
    sm, runtime, clock = world.sm, world.runtime, world.clock
    create_base(sm)
    clock.now += 60
    create_adapter(sm, "samsum")

    def invoke(endpoint=ENDPOINT, **named):
        return runtime.invoke_endpoint(
            EndpointName=endpoint, Body=b"{}", ContentType="application/json", **named
        )

    assert refused(invoke, "ValidationError") == inference_components.COMPONENT_REQUIRED
    assert "is Creating, not InService" in refused(
        lambda: invoke(InferenceComponentName="samsum"), "ValidationError"
    )
    assert "does not exist on endpoint" in refused(
        lambda: invoke(InferenceComponentName="nope"), "ValidationError"
    )
    message = refused(lambda: invoke(PLAIN, InferenceComponentName="samsum"), "ValidationError")
    assert "serves a model, not inference components" in message
    clock.now += 60
    # Outside the local world moto's canned answer ("body") comes back once the call is one AWS takes.
    assert invoke(InferenceComponentName="samsum")["Body"].read() == b"body"
    assert invoke(PLAIN)["Body"].read() == b"body"
    account = moto_patches.default_account_id()
    hosting = moto_patches._MotoHosting(account, REGION)
    assert world.store.route(account, REGION, ENDPOINT, "samsum", hosting) == inference_components.Route(
        ENDPOINT, "samsum", "base", "s3://artifacts/adapters/samsum.tar.gz"
    )
    assert world.store.route(account, REGION, ENDPOINT, "base", hosting) == inference_components.Route(
        ENDPOINT, "base", "base", None
    )
    assert world.store.route(account, REGION, PLAIN, None, hosting) is None
