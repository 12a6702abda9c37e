"""The adapter state machine on the real dev template (moto, local mode's inference components): adapter
versions deployed onto dev's shared base (made on the first deploy), updated, rolled back and deleted, each
touching no other adapter; refusals create nothing; a failed smoke test or errors during the bake put the
adapter back as it was; a retried step creates nothing twice (docs/adapters.md)."""

from __future__ import annotations

import contextlib
import io
import itertools
import json
import tarfile
from typing import Any

import pytest
from accounts import ACCOUNT

from hfpipe import contract
from hfpipe.core.adapters.adapter_deploy import AdapterRefused, BaseNames, component_name

pytestmark = pytest.mark.slow

ENV = "dev"
RECIPE = "qwen-7b-lora-samsum-adapter"
BASE = "Qwen/Qwen2.5-7B-Instruct"
NAMES = BaseNames.of(ENV)
_ids = itertools.count()


def chat_answer(route: Any, body: Any) -> dict[str, Any]:
    """What the vLLM container answers a chat request (the smoke test's shape), saying who answered."""
    return {
        "object": "chat.completion",
        "model": route.component,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": route.adapter_artifact},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6},
    }


@pytest.fixture
def clean(fresh):
    fresh.component = chat_answer
    fresh.group = contract.model_package_group_name(ENV, f"{RECIPE}-{next(_ids)}")
    wipe(fresh)
    yield fresh
    wipe(fresh)


def wipe(engine: Any) -> None:
    """No inference component or shared base before and after each test (each test registers its versions
    in a group of its own: moto has no DeleteModelPackage)."""
    sm = engine.client("sagemaker")
    store = engine.inference_components
    with store._lock:
        store._records.clear()
    for call in (
        lambda: sm.delete_endpoint(EndpointName=NAMES.endpoint),
        lambda: sm.delete_endpoint_config(EndpointConfigName=NAMES.endpoint_config),
        lambda: sm.delete_model(ModelName=NAMES.model),
    ):
        with contextlib.suppress(sm.exceptions.ClientError):
            call()


def adapter_archive(config: dict[str, Any]) -> bytes:
    """A model.tar.gz as run_clm.py leaves an adapter: adapter_config.json (PEFT's) at the top, weights next."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as tar:
        for name, data in (
            ("adapter_config.json", json.dumps(config).encode()),
            ("adapter_model.safetensors", b"\0" * 64),
        ):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def lora_config(base: str = BASE, **changes: Any) -> dict[str, Any]:
    """PEFT's adapter_config.json of a rank-8 adapter on q_proj and v_proj of ``base``."""
    return {
        "peft_type": "LORA",
        "base_model_name_or_path": base,
        "r": 8,
        "lora_alpha": 16,
        "target_modules": ["q_proj", "v_proj"],
        **changes,
    }


def register(
    engine: Any, *, status: str = "Approved", base: str = BASE, config: dict[str, Any] | None = None
) -> str:
    """An adapter version as RegisterAdapter makes one: its artifact (uploaded: an adapter_config.json on
    ``base``, or ``config``), its recipe and the base it needs."""
    sm, group = engine.client("sagemaker"), engine.group
    try:
        sm.describe_model_package_group(ModelPackageGroupName=group)
    except sm.exceptions.ClientError:
        sm.create_model_package_group(ModelPackageGroupName=group)
    n = next(_ids)
    s3 = engine.client("s3")
    with contextlib.suppress(s3.exceptions.ClientError):
        s3.create_bucket(Bucket="artifacts", CreateBucketConfiguration={"LocationConstraint": "eu-west-1"})
    s3.put_object(
        Bucket="artifacts",
        Key=f"run-{n}/output/model.tar.gz",
        Body=adapter_archive(config or lora_config(base)),
    )
    spec = {
        "Containers": [
            {
                "Image": f"{ACCOUNT}.dkr.ecr.eu-west-1.amazonaws.com/vllm:1",
                "ModelDataUrl": f"s3://artifacts/run-{n}/output/model.tar.gz",
            }
        ],
        "SupportedContentTypes": ["application/json"],
        "SupportedResponseMIMETypes": ["application/json"],
    }
    return str(
        sm.create_model_package(
            ModelPackageGroupName=group,
            InferenceSpecification=spec,
            ModelApprovalStatus=status,
            CustomerMetadataProperties={
                "recipe": RECIPE,
                "execution": f"run-{n}",
                "adapter_base_model": base,
            },
        )["ModelPackageArn"]
    )


def run(engine: Any, **request: str) -> Any:
    machine = engine.state_machine_arns[contract.adapter_state_machine_name(ENV)]
    return engine.run(request, name=f"adapter-{next(_ids)}", state_machine_arn=machine)


def serving(engine: Any, adapter: str) -> str | None:
    sm = engine.client("sagemaker")
    try:
        described = sm.describe_inference_component(InferenceComponentName=component_name(ENV, adapter))
    except sm.exceptions.ClientError:
        return None
    return str(described["Specification"]["Container"]["ArtifactUrl"])


def artifact(engine: Any, version: str) -> str:
    described = engine.client("sagemaker").describe_model_package(ModelPackageName=version)
    return str(described["InferenceSpecification"]["Containers"][0]["ModelDataUrl"])


def exited(r: Any, state: str) -> dict[str, Any]:
    """The output of the last visit of ``state`` (the state data it passed on)."""
    (event, *_) = [
        e for e in reversed(r.history) if e.get("stateExitedEventDetails", {}).get("name") == state
    ]
    return dict(json.loads(event["stateExitedEventDetails"]["output"]))


def components(engine: Any) -> list[str]:
    listed = engine.client("sagemaker").list_inference_components(EndpointNameEquals=NAMES.endpoint)
    return sorted(c["InferenceComponentName"] for c in listed["InferenceComponents"])


def test_two_adapters_make_one_base_one_fleet_and_each_is_smoke_tested(clean):
    v1, v2 = register(clean), register(clean)
    first = run(clean, action="deploy", adapter="support", version=v1)
    assert first.status == "SUCCEEDED", (first.error, first.cause)
    assert first.output["action"] == "created"
    assert first.output["base_created"] == [
        "CreateModel",
        "CreateEndpointConfig",
        "CreateEndpoint",
        "CreateInferenceComponent",
    ]
    assert first.states == [
        "Action?",
        "Apply",
        "WaitAdapter",
        "SmokeTest",
        "Bake",
        "BakeCheck",
        "Confirm",
        "Deployed",
    ]
    smoke = exited(first, "SmokeTest")["smoke_test"]
    assert smoke["response"]["model"] == component_name(ENV, "support")  # the call named the adapter
    second = run(clean, action="deploy", adapter="sales", version=v2)
    assert second.status == "SUCCEEDED", (second.error, second.cause)
    assert second.output["base_created"] == []
    sm = clean.client("sagemaker")
    config = sm.describe_endpoint_config(EndpointConfigName=NAMES.endpoint_config)
    assert [v.get("ModelName") for v in config["ProductionVariants"]] == [None]  # no model: components
    assert components(clean) == sorted(
        [NAMES.component, component_name(ENV, "support"), component_name(ENV, "sales")]
    )
    base = sm.describe_model(ModelName=NAMES.model)["PrimaryContainer"]
    assert base["Environment"]["SM_VLLM_MODEL"] == BASE
    assert base["Environment"]["SM_VLLM_MAX_LORAS"] == "10"
    assert "/vllm:" in base["Image"]
    assert (serving(clean, "support"), serving(clean, "sales")) == (artifact(clean, v1), artifact(clean, v2))


def test_update_rollback_and_delete_touch_only_their_adapter(clean):
    v1, v2 = register(clean), register(clean)
    assert run(clean, action="deploy", adapter="support", version=v1).status == "SUCCEEDED"
    assert run(clean, action="deploy", adapter="sales", version=v1).status == "SUCCEEDED"
    updated = run(clean, action="deploy", adapter="support", version=v2)
    assert updated.status == "SUCCEEDED", (updated.error, updated.cause)
    assert (updated.output["action"], updated.output["previous_artifact"]) == ("updated", artifact(clean, v1))
    assert serving(clean, "support") == artifact(clean, v2)
    back = run(clean, action="rollback", adapter="support")
    assert back.status == "SUCCEEDED", (back.error, back.cause)
    assert back.output["version_arn"] == v1 and serving(clean, "support") == artifact(clean, v1)
    assert serving(clean, "sales") == artifact(clean, v1)  # untouched
    again = run(clean, action="rollback", adapter="support")
    assert (again.status, again.error) == ("FAILED", "AdapterRefused")
    assert "first approved version; nothing to roll back to" in json.loads(again.cause)["errorMessage"]
    deleted = run(clean, action="delete", adapter="sales")
    assert deleted.status == "SUCCEEDED", (deleted.error, deleted.cause)
    assert deleted.states == ["Action?", "Delete", "Gone", "Deleted"]
    assert components(clean) == sorted([NAMES.component, component_name(ENV, "support")])
    assert serving(clean, "support") == artifact(clean, v1)


def test_the_same_version_again_changes_nothing(clean):
    v1 = register(clean)
    assert run(clean, action="deploy", adapter="support", version=v1).status == "SUCCEEDED"
    again = run(clean, action="deploy", adapter="support", version=v1)
    assert again.status == "SUCCEEDED" and again.output["action"] == "unchanged"


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("pending", "is PendingManualApproval; accepted: an Approved version"),
        ("other base", "was trained on"),
        ("bad name", "--adapter: 'Bad_Name' is not accepted"),
        ("bad input", "not accepted; accepted: "),
        ("unknown version", "not found"),
    ],
)
def test_a_refused_deploy_creates_nothing(clean, case, message):
    version = register(
        clean,
        status="PendingManualApproval" if case == "pending" else "Approved",
        base="meta-llama/Llama-3.1-8B" if case == "other base" else BASE,
    )
    request: dict[str, str] = {"action": "deploy", "adapter": "support", "version": version}
    if case == "bad name":
        request["adapter"] = "Bad_Name"
    elif case == "bad input":
        request = {"action": "deploy", "adapter": "support"}
    elif case == "unknown version":
        request["version"] = version.rsplit("/", 1)[0] + "/999"
    r = run(clean, **request)
    assert (r.status, r.error) == ("FAILED", "AdapterRefused"), r.cause
    assert message in json.loads(r.cause)["errorMessage"]
    assert r.states == ["Action?", "Apply", "Refused"]
    assert components(clean) == []
    sm = clean.client("sagemaker")
    assert not [e for e in sm.list_endpoints()["Endpoints"] if e["EndpointName"] == NAMES.endpoint]


def test_deleting_an_adapter_not_on_the_base_is_refused(clean):
    r = run(clean, action="delete", adapter="nobody")
    assert (r.status, r.error) == ("FAILED", "AdapterRefused")
    assert "is not on dev's shared base" in json.loads(r.cause)["errorMessage"]


def test_a_failed_smoke_test_puts_the_adapter_back(clean):
    v1, v2 = register(clean), register(clean)
    assert run(clean, action="deploy", adapter="support", version=v1).status == "SUCCEEDED"
    clean.component = lambda route, body: {"object": "error"}
    updated = run(clean, action="deploy", adapter="support", version=v2)
    assert (updated.status, updated.error) == ("FAILED", "SmokeTestFailed"), updated.cause
    assert updated.states[-3:] == ["WayBack", "WayBackSettled", "Failed"]
    assert serving(clean, "support") == artifact(clean, v1)  # updated back
    created = run(clean, action="deploy", adapter="sales", version=v2)
    assert (created.status, created.error) == ("FAILED", "SmokeTestFailed")
    assert serving(clean, "sales") is None  # the new component deleted
    assert serving(clean, "support") == artifact(clean, v1)


def test_errors_during_the_bake_put_the_adapter_back(clean):
    v1, v2 = register(clean), register(clean)
    assert run(clean, action="deploy", adapter="baked", version=v1).status == "SUCCEEDED"
    cloudwatch = clean.client("cloudwatch")

    def erring(route: Any, body: Any) -> Any:
        cloudwatch.put_metric_data(
            Namespace="AWS/SageMaker",
            MetricData=[
                {
                    "MetricName": "Invocation5XXErrors",
                    "Dimensions": [{"Name": "InferenceComponentName", "Value": route.component}],
                    "Value": 1.0,
                }
            ],
        )
        return chat_answer(route, body)

    clean.component = erring
    updated = run(clean, action="deploy", adapter="baked", version=v2)
    assert (updated.status, updated.error) == ("FAILED", "AdapterBakeFailed"), updated.cause
    assert "Invocation5XXErrors 1" in json.loads(updated.cause)["errorMessage"]
    assert serving(clean, "baked") == artifact(clean, v1)


def test_a_retried_apply_creates_nothing_twice(clean):
    v1 = register(clean)
    clean.after_errors["adapter"] = ["Lambda.ServiceException"]  # Apply ran, then its answer was lost
    r = run(clean, action="deploy", adapter="support", version=v1)
    assert r.status == "SUCCEEDED", (r.error, r.cause)
    assert r.output["action"] == "unchanged"  # the retry found the component it had made
    assert components(clean) == sorted([NAMES.component, component_name(ENV, "support")])


def test_a_second_change_of_an_adapter_while_one_runs_is_refused():
    """One change at a time per adapter: Apply and Delete read the state machine's running executions (their
    inputs) and refuse while an earlier one for the same adapter runs; another adapter's does not count."""
    from datetime import UTC, datetime

    import boto3
    from botocore.stub import Stubber
    from pipeline_lambdas import adapter

    sfn = boto3.client("stepfunctions", region_name="eu-west-1")
    machine = f"arn:aws:states:eu-west-1:{ACCOUNT}:stateMachine:hfpipe-dev-adapters"
    running = [
        ("first", "support", datetime(2026, 1, 1, tzinfo=UTC)),
        ("other", "sales", datetime(2026, 1, 1, tzinfo=UTC)),
    ]
    with Stubber(sfn) as stub:
        stub.add_response(
            "list_executions",
            {
                "executions": [
                    {
                        "executionArn": f"{machine}:{name}".replace("stateMachine", "execution"),
                        "stateMachineArn": machine,
                        "name": name,
                        "status": "RUNNING",
                        "startDate": started,
                    }
                    for name, _, started in running
                ]
            },
        )
        for name, which, started in running:
            stub.add_response(
                "describe_execution",
                {
                    "executionArn": f"{machine}:{name}".replace("stateMachine", "execution"),
                    "stateMachineArn": machine,
                    "status": "RUNNING",
                    "startDate": started,
                    "input": json.dumps({"action": "delete", "adapter": which}),
                },
            )
        event = {
            "input": {"action": "deploy", "adapter": "support", "version": "tiny-adapter/2"},
            "execution_name": "second",
            "state_machine": machine,
        }
        with pytest.raises(
            AdapterRefused, match=r"execution first .* is still running; accepted: one change"
        ):
            adapter._first_change(event, sfn)
