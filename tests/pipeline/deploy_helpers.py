"""What the deploy tests share: registering a version (as the Register step makes one, on moto), running the
deploy state machine, and reading what it left. ``wiped`` is the body of each module's ``clean`` fixture."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from typing import Any

from accounts import ACCOUNT

from hfpipe import contract

_ids = itertools.count()
ENV, NAME = "dev", "summaries"
ENDPOINT = contract.deployed_endpoint_name(ENV, NAME)
PARAMETER = contract.deployment_parameter_name(ENV, NAME)


class Clock:
    """A local world's clock, moved by the test (``clock.now += 120``)."""

    now = 1000.0

    def __call__(self) -> float:
        return self.now


def register(
    engine: Any, *, status: str = "Approved", recipe: str = "tiny-qa", types: Any = None, **metadata: str
) -> str:
    """A version in the recipe's group of dev, as the Register step makes one (moto); its ARN."""
    return register_in(engine.client("sagemaker"), status=status, recipe=recipe, types=types, **metadata)


def register_in(
    sm: Any, *, status: str = "Approved", recipe: str = "tiny-qa", types: Any = None, **metadata: str
) -> str:
    """The same through a SageMaker client of dev's region (``metadata``: more CustomerMetadataProperties)."""
    group = contract.model_package_group_name(ENV, recipe)
    try:
        sm.describe_model_package_group(ModelPackageGroupName=group)
    except sm.exceptions.ClientError:
        sm.create_model_package_group(ModelPackageGroupName=group)
    spec = {
        "Containers": [
            {"Image": f"{ACCOUNT}.dkr.ecr.eu-west-1.amazonaws.com/x:1", "ModelDataUrl": "s3://b/m"}
        ],
        "SupportedContentTypes": ["application/json"],
        "SupportedResponseMIMETypes": ["application/json"],
        "SupportedRealtimeInferenceInstanceTypes": ["ml.m5.large"] if types is None else types,
    }
    return str(
        sm.create_model_package(
            ModelPackageGroupName=group,
            InferenceSpecification=spec,
            ModelApprovalStatus=status,
            CustomerMetadataProperties={"recipe": recipe, "execution": f"run-{next(_ids)}", **metadata},
        )["ModelPackageArn"]
    )


def adapter_version(sm: Any, recipe: str, number: int, *, base: str, approved: bool = True) -> dict[str, Any]:
    """Version ``number`` of ``recipe``'s group as the Register step writes an adapter's (moto's registry):
    its adapter trained on ``base``; the group is made with version 1."""
    group = f"hfpipe-dev-{recipe}"
    if number == 1:
        sm.create_model_package_group(ModelPackageGroupName=group)
    arn = sm.create_model_package(
        ModelPackageGroupName=group,
        InferenceSpecification={
            "Containers": [
                {"Image": "image", "ModelDataUrl": f"s3://artifacts/{recipe}/{number}/model.tar.gz"}
            ],
            "SupportedContentTypes": ["application/json"],
            "SupportedResponseMIMETypes": ["application/json"],
        },
        CustomerMetadataProperties={"adapter_base_model": base},
        ModelApprovalStatus="Approved" if approved else "PendingManualApproval",
    )["ModelPackageArn"]
    return sm.describe_model_package(ModelPackageName=arn)


def put_on_base(
    world: Any,
    base: Any,
    adapter: str,
    version: dict,
    *,
    without: tuple[str, ...] = (),
    checked: bool = False,
) -> dict[str, Any]:
    """``adapter_deploy.apply_adapter`` of ``version`` as ``adapter`` on the shared ``base`` of dev in a local
    world (``world.sm``, ``world.clock``), then its component InService; ``checked``: the base's requests
    validated first as botocore's model of SageMaker takes them; ``without``: variables left out of the base
    model's environment."""
    from hfpipe.core.adapters import adapter_deploy
    from hfpipe.local.engine import moto_patches

    def wait(kind: str, name: str) -> None:
        world.clock.now += 120  # past every transitional status

    requests = adapter_deploy.base_requests(
        "dev",
        base,
        image="image",
        role_arn=f"arn:aws:iam::{moto_patches.default_account_id()}:role/r",
        gpus=1,
        memory_mb=1024,
        tags=[],
    )
    if checked:
        import botocore.session
        from botocore.validate import validate_parameters

        model = botocore.session.get_session().get_service_model("sagemaker")
        for operation, request in requests.items():
            validate_parameters(request, model.operation_model(operation).input_shape)
    environment = requests["CreateModel"]["PrimaryContainer"]["Environment"]
    for name in without:
        environment.pop(name, None)  # absent already on a base that never set it
    result = adapter_deploy.apply_adapter(
        world.sm, "dev", base, adapter, version, base_requests=requests, wait=wait, tags=[]
    )
    wait("inference-component", result["component"])  # the adapter's component InService
    return result


def deploy(engine: Any, version: str, endpoint: str = NAME) -> tuple[str, Any]:
    name = f"deploy-{next(_ids)}"
    machine = engine.state_machine_arns[contract.deploy_state_machine_name(ENV)]
    return name, engine.run({"version": version, "endpoint": endpoint}, name=name, state_machine_arn=machine)


def named(engine: Any) -> dict[str, list[str]]:
    """The named endpoint, and every config and model a deploy made for it, that exist now."""
    return {
        k: sorted(n for n in v if n.startswith(ENDPOINT)) for k, v in engine.sagemaker_resources().items()
    }


def tags(engine: Any, arn: str) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in engine.client("sagemaker").list_tags(ResourceArn=arn)["Tags"]}


def state_input(r: Any, state: str) -> dict[str, Any]:
    """The input of the last visit of ``state`` (the state data at that point)."""
    (event, *_) = [
        e for e in reversed(r.history) if e.get("stateEnteredEventDetails", {}).get("name") == state
    ]
    return dict(json.loads(event["stateEnteredEventDetails"]["input"]))


def stored_record(engine: Any) -> dict[str, Any] | None:
    try:
        return json.loads(engine.client("ssm").get_parameter(Name=PARAMETER)["Parameter"]["Value"])
    except engine.client("ssm").exceptions.ParameterNotFound:
        return None


def assert_serves_again(engine: Any, before: dict[str, Any]) -> dict[str, Any]:
    """The endpoint serves ``before``'s config again, InService, and the record is ``before``; its description."""
    endpoint = engine.client("sagemaker").describe_endpoint(EndpointName=ENDPOINT)
    assert (endpoint["EndpointStatus"], endpoint["EndpointConfigName"]) == (
        "InService",
        before["endpoint_config"],
    )
    assert stored_record(engine) == before
    return dict(endpoint)


def wiped(fresh: Any) -> Iterator[Any]:
    """No named endpoint, config, model or record before and after each test (the session's engine is shared)."""

    def wipe() -> None:
        sm = fresh.client("sagemaker")
        left = named(fresh)
        for endpoint in left["endpoints"]:
            sm.delete_endpoint(EndpointName=endpoint)
        for config in left["endpoint_configs"]:
            sm.delete_endpoint_config(EndpointConfigName=config)
        for model in left["models"]:
            sm.delete_model(ModelName=model)
        try:
            fresh.client("ssm").delete_parameter(Name=PARAMETER)
        except fresh.client("ssm").exceptions.ParameterNotFound:
            pass

    wipe()
    yield fresh
    wipe()


def an_alarm_wait(**changes: Any) -> Any:
    """A wait for the rollback alarm of NAME in ALARM (hfpipe.core.deploy.deploy_plan.AlarmWait), two polls in."""
    from hfpipe.core.deploy.deploy_plan import AlarmWait

    wait = {
        "since": "2026-01-01T12:00:00+00:00",
        "alarms": [f"{ENDPOINT}-5xx-errors"],
        "polls": 2,
        "waited_seconds": 60,
        "wait_seconds": 300,
        "poll_seconds": 60,
    }
    return AlarmWait(**{**wait, **changes})


def a_plan(**changes: Any) -> Any:
    """A deploy plan as Prepare makes one for an update of NAME to tiny-qa/2 (hfpipe.core.deploy.deploy_plan), built
    by hand: what the tests of the plan's readers start from, without a Prepare run."""
    from dataclasses import replace

    from hfpipe.core.deploy.deploy_plan import DeployInput, DeployPlan, DeployRequests, PreviousDeploy
    from hfpipe.core.deploy.deploy_requests import SmokeSpec
    from hfpipe.core.deploy.deployments import EndpointSettings

    arn = f"arn:aws:sagemaker:eu-west-1:{ACCOUNT}:model-package/hfpipe-dev-tiny-qa/"
    plan = DeployPlan(
        action="update",
        input=DeployInput(version="tiny-qa/2", endpoint=NAME),
        name=NAME,
        endpoint_name=ENDPOINT,
        model_version_arn=f"{arn}2",
        model_package_group="hfpipe-dev-tiny-qa",
        recipe="tiny-qa",
        version=2,
        version_ref="tiny-qa/2",
        settings=EndpointSettings(name=NAME),
        smoke=SmokeSpec(
            endpoint_name=ENDPOINT,
            serving_kind="hf-inference",
            sample_request={"question": "who?", "context": "the pipeline"},
            expected_keys=["answer", "score"],
            max_latency_ms=5000.0,
            execution_name="deploy-2",
        ),
        poll_seconds=60,
        max_polls=90,
        rollback_max_polls=90,
        previous=PreviousDeploy(
            endpoint_config_name=f"{ENDPOINT}-1-aaaa",
            model_version_arn=f"{arn}1",
            model_name=f"{ENDPOINT}-1-aaaa",
            instance_type="ml.m5.large",
        ),
        scaling_deregistered=False,
        model_name=f"{ENDPOINT}-2-bbbb",
        endpoint_config_name=f"{ENDPOINT}-2-bbbb",
        instance_type="ml.m5.large",
        instance_count=1,
        requests=DeployRequests(
            UpdateEndpoint={"EndpointName": ENDPOINT, "EndpointConfigName": f"{ENDPOINT}-2-bbbb"},
            Rollback={"EndpointName": ENDPOINT, "EndpointConfigName": f"{ENDPOINT}-1-aaaa"},
        ),
    )
    return replace(plan, **changes)
