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
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from accounts import ACCOUNT, ACCOUNT_D
from faults import NoHistory

from hfpipe import contract
from hfpipe.cli import main
from hfpipe.core.adapters.adapter_deploy import AdapterRefused, BaseNames, component_name
from stacks.functions.adapter import BAKE_PROBES

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
    bake = ["Bake", "BakeProbe", "BakeCheck", "Baked?"] * BAKE_PROBES
    assert first.states == [
        "Action?",
        "Apply",
        "WaitAdapter",
        "SmokeTest",
        "BakeStart",
        *bake,
        "Confirm",
        "Deployed",
    ]
    baked = exited(first, "BakeCheck")["bake"]
    assert (baked["probes"], baked["done"]) == (BAKE_PROBES, True)
    assert (
        baked["metrics"] == f"{BAKE_PROBES + 1} Invocations counted"
    )  # the smoke test's call and the probes'
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
    assert (
        "no version before it is Approved (it is the first); nothing to roll back to"
        in json.loads(again.cause)["errorMessage"]
    )
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
        ("newline name", "--adapter: 'support\\n' is not accepted"),  # not a second component
        ("other region", "a version in region us-west-2, account"),  # not "not found"
        ("other account", f"account {ACCOUNT_D}; environment 'dev' is in region"),
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
    elif case == "newline name":
        request["adapter"] = "support\n"
    elif case == "other region":
        request["version"] = version.replace(":eu-west-1:", ":us-west-2:")
    elif case == "other account":
        request["version"] = version.replace(f":{ACCOUNT}:", f":{ACCOUNT_D}:")
    r = run(clean, **request)
    assert (r.status, r.error) == ("FAILED", "AdapterRefused"), r.cause
    assert message in json.loads(r.cause)["errorMessage"]
    assert r.states == ["Action?", "Apply", "Refused"]
    assert components(clean) == []
    sm = clean.client("sagemaker")
    assert not [e for e in sm.list_endpoints()["Endpoints"] if e["EndpointName"] == NAMES.endpoint]


def test_an_adapter_that_would_make_the_base_checks_its_quota_beside_the_named_endpoints(clean):
    """The first adapter makes the base: the endpoint-usage quota of its type must hold its instance beside
    what the environment's named endpoints run of that type (read from SageMaker); refused with nothing
    created otherwise."""
    sm, summaries = clean.client("sagemaker"), contract.deployed_endpoint_name(ENV, "summaries")
    role = f"arn:aws:iam::{ACCOUNT}:role/r"
    sm.create_model(ModelName=summaries, ExecutionRoleArn=role, PrimaryContainer={"Image": "image"})
    variant = {"VariantName": "AllTraffic", "ModelName": summaries, "InstanceType": "ml.g5.4xlarge"}
    sm.create_endpoint_config(
        EndpointConfigName=summaries, ProductionVariants=[{**variant, "InitialInstanceCount": 1}]
    )
    sm.create_endpoint(EndpointName=summaries, EndpointConfigName=summaries)
    before = clean.quotas.value_for
    version = register(clean)
    try:
        clean.quotas.value_for = lambda name: 1.0 if name == "ml.g5.4xlarge for endpoint usage" else 100.0
        r = run(clean, action="deploy", adapter="support", version=version)
        assert (r.status, r.error, r.states) == ("FAILED", "AdapterRefused", ["Action?", "Apply", "Refused"])
        assert json.loads(r.cause)["errorMessage"] == (
            f"shared base {NAMES.endpoint}: quota 'ml.g5.4xlarge for endpoint usage': applied value 1 < needed "
            "2; request an increase (the QuotaStack does this for the quotas in cdk.json): its 1 instance(s) of "
            f"ml.g5.4xlarge (shared_base.copies), {summaries} 1 beside it must fit before the base is made; "
            "raise the quota (cdk.json quotas, the QuotaStack) or lower shared_base.copies"
        )
        assert components(clean) == [] and NAMES.endpoint not in [
            e["EndpointName"] for e in sm.list_endpoints()["Endpoints"]
        ]
        clean.quotas.value_for = lambda name: 2.0 if name == "ml.g5.4xlarge for endpoint usage" else 100.0
        assert run(clean, action="deploy", adapter="support", version=version).status == "SUCCEEDED"
    finally:
        clean.quotas.value_for = before
        sm.delete_endpoint(EndpointName=summaries)
        sm.delete_endpoint_config(EndpointConfigName=summaries)
        sm.delete_model(ModelName=summaries)


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
    # The smoke test's call and the first probe's each put one (the first BakeCheck fails the bake).
    assert "Invocation5XXErrors 2" in json.loads(updated.cause)["errorMessage"]
    assert updated.states.count("BakeCheck") == 1
    assert serving(clean, "baked") == artifact(clean, v1)


def test_an_adapter_that_stops_answering_during_the_bake_is_put_back(clean):
    """The bake calls the adapter BAKE_PROBES times: one that answered the smoke test and then stops answering
    fails the bake (its error metrics counted in local CloudWatch), and the adapter goes back."""
    v1, v2 = register(clean), register(clean)
    assert run(clean, action="deploy", adapter="flaky", version=v1).status == "SUCCEEDED"
    calls = itertools.count()

    def failing_after_the_smoke_test(route: Any, body: Any) -> Any:
        if route.adapter_artifact == artifact(clean, v2) and next(calls) >= 2:
            raise clean.traffic.InvocationError(500, "CUDA error: an illegal memory access")
        return chat_answer(route, body)

    clean.component = failing_after_the_smoke_test
    updated = run(clean, action="deploy", adapter="flaky", version=v2)
    assert updated.status == "FAILED", updated.cause
    assert "BakeProbe" in updated.states and updated.states[-3:] == ["WayBack", "WayBackSettled", "Failed"]
    assert updated.states.count("BakeCheck") == 1  # the first probe answered, the second did not
    assert "ModelError" in updated.cause
    assert serving(clean, "flaky") == artifact(clean, v1)
    now = datetime.now(UTC)
    (point,) = clean.client("cloudwatch").get_metric_statistics(
        Namespace="AWS/SageMaker",
        MetricName="InvocationModelErrors",
        Dimensions=[{"Name": "InferenceComponentName", "Value": component_name(ENV, "flaky")}],
        StartTime=now - timedelta(minutes=10),
        EndTime=now + timedelta(minutes=1),
        Period=900,
        Statistics=["Sum"],
    )["Datapoints"]
    assert point["Sum"] == 1.0


def _bake(probe: Any, progress: Any = None, sums: dict[str, float] | None = None) -> dict[str, Any]:
    """One round of the bake step against CloudWatch holding one datapoint of each metric in ``sums``."""
    from pipeline_lambdas import adapter

    class Metrics:
        def get_metric_statistics(self, MetricName: str, **_: Any) -> dict[str, Any]:
            found = (sums or {}).get(MetricName)
            return {"Datapoints": [] if found is None else [{"Sum": found}]}

    applied = {
        "adapter": "support",
        "component": component_name(ENV, "support"),
        "applied_at": datetime.now(UTC).isoformat(),
    }
    return dict(adapter.bake(applied, Metrics(), 300, probes=2, progress=progress, probe=probe))


def test_a_bake_with_no_data_does_not_pass():
    """No answer is never healthy: a round without its probe's answer fails, with CloudWatch holding no
    datapoint at all (what passed before); metrics with no datapoints pass nothing, they are reported as
    such; errors fail it; the bake is done after its probes' answers only."""
    from pipeline_lambdas.adapter import AdapterBakeFailed

    for probe in (None, {}, {"ok": False}):
        with pytest.raises(
            AdapterBakeFailed,
            match=r"probe 1 of 2 during the 300 s bake brought no answer \(.*\); a bake with no answer is not healthy",
        ):
            _bake(probe)
    first = _bake({"ok": True, "latency_ms": 12.0})
    assert (first["probes"], first["done"]) == (1, False)  # one answer of two: not done
    assert first["metrics"] == "no datapoints (not counted as healthy)"
    second = _bake({"ok": True}, progress=first, sums={"Invocations": 3.0, "Invocation5XXErrors": 0.0})
    assert (second["probes"], second["done"]) == (2, True)
    assert second["metrics"] == "3 Invocations counted"
    with pytest.raises(AdapterBakeFailed, match="errors during the 300 s bake: InvocationModelErrors 2"):
        _bake({"ok": True}, progress=first, sums={"Invocations": 3.0, "InvocationModelErrors": 2.0})


def test_a_retried_apply_creates_nothing_twice(clean):
    v1 = register(clean)
    clean.after_errors["adapter"] = ["Lambda.ServiceException"]  # Apply ran, then its answer was lost
    r = run(clean, action="deploy", adapter="support", version=v1)
    assert r.status == "SUCCEEDED", (r.error, r.cause)
    # The retry found the component its first call had made: nothing created twice, and it is reported as
    # this execution's creation (CreationTime after the execution's start), so a way back would delete it.
    assert r.output["action"] == "created"
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


# --- issue 44: one lifecycle for base and adapters, every decision re-checked at the act -------------------


def nothing_billing(engine: Any) -> None:
    """No shared base left: no endpoint, config, model or component of it."""
    sm = engine.client("sagemaker")
    assert components(engine) == []
    assert not [e for e in sm.list_endpoints()["Endpoints"] if e["EndpointName"] == NAMES.endpoint]
    for call in (
        lambda: sm.describe_endpoint_config(EndpointConfigName=NAMES.endpoint_config),
        lambda: sm.describe_model(ModelName=NAMES.model),
    ):
        with pytest.raises(sm.exceptions.ClientError):
            call()


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (lora_config(r=32), "has rank 32, above the shared base's max_lora_rank 16"),
        (
            lora_config(target_modules=["query_key_value"]),
            "changes query_key_value, which vLLM does not wrap",
        ),
        (lora_config("meta-llama/Llama-3.1-8B"), "base_model_name_or_path: adapter 'support' was trained on"),
    ],
    ids=["rank", "modules", "base"],
)
def test_an_adapter_that_would_not_load_is_refused_before_a_base_exists(clean, config, message):
    """Read from the adapter's own adapter_config.json in its model.tar.gz: a rank 32 adapter on a base of
    max_lora_rank 16 made the whole base and was caught only by the smoke test; now nothing is made."""
    r = run(clean, action="deploy", adapter="support", version=register(clean, config=config))
    assert (r.status, r.error) == ("FAILED", "AdapterRefused"), r.cause
    assert message in json.loads(r.cause)["errorMessage"]
    assert r.states == ["Action?", "Apply", "Refused"]
    nothing_billing(clean)


def test_a_failed_first_deploy_leaves_nothing_billing(clean):
    """A first deploy refused at the smoke test made the base; its way back deletes the adapter and, no
    adapter remaining, retires the base it made (component, endpoint, config, model)."""
    clean.component = lambda route, body: {"object": "error"}
    r = run(clean, action="deploy", adapter="support", version=register(clean))
    assert (r.status, r.error) == ("FAILED", "SmokeTestFailed"), r.cause
    assert r.states[-3:] == ["WayBack", "WayBackSettled", "Failed"]
    assert exited(r, "WayBackSettled")["settled"]["base"] == "retired"
    nothing_billing(clean)


def test_a_version_rejected_while_its_smoke_test_runs_is_taken_back(clean):
    """The approval is read again before the deploy is reported done (Confirm): a version rejected while
    it is smoke-tested ends failed and is taken back (an update back to what served; a new adapter deleted)."""
    v1, v2 = register(clean), register(clean)
    assert run(clean, action="deploy", adapter="support", version=v1).status == "SUCCEEDED"
    sm, deploying = clean.client("sagemaker"), [v2]

    def rejecting(route: Any, body: Any) -> Any:
        sm.update_model_package(ModelPackageArn=deploying[-1], ModelApprovalStatus="Rejected")
        return chat_answer(route, body)

    clean.component = rejecting
    updated = run(clean, action="deploy", adapter="support", version=v2)
    assert (updated.status, updated.error) == ("FAILED", "AdapterNotApproved"), updated.cause
    assert "is Rejected now, no longer Approved" in json.loads(updated.cause)["errorMessage"]
    assert updated.states[-4:] == ["Confirm", "WayBack", "WayBackSettled", "Failed"]
    assert serving(clean, "support") == artifact(clean, v1)
    deploying.append(v3 := register(clean))
    created = run(clean, action="deploy", adapter="sales", version=v3)
    assert (created.status, created.error) == ("FAILED", "AdapterNotApproved"), created.cause
    assert serving(clean, "sales") is None
    assert sm.describe_model_package(ModelPackageName=v3)["ModelApprovalStatus"] == "Rejected"


def test_the_way_back_retries_what_aws_throttles_and_shows_its_own_error(clean):
    """The way back's UpdateInferenceComponent throttled once is retried (the adapter is back); failing for
    another reason, its own error joins the cause the command prints, and the newer version is named there."""
    v1, v2, v3 = register(clean), register(clean), register(clean)
    assert run(clean, action="deploy", adapter="support", version=v1).status == "SUCCEEDED"

    def failing_with(code: str) -> Any:
        def answer(route: Any, body: Any) -> Any:
            clean.sagemaker_errors["update_inference_component"] = [code]
            return {"object": "error"}

        return answer

    clean.component = failing_with("ThrottlingException")
    throttled = run(clean, action="deploy", adapter="support", version=v2)
    assert (throttled.status, throttled.error) == ("FAILED", "SmokeTestFailed"), throttled.cause
    assert serving(clean, "support") == artifact(clean, v1)  # updated back after the retry
    clean.component = failing_with("ValidationException")
    refused = run(clean, action="deploy", adapter="support", version=v3)
    assert (refused.status, refused.error) == ("FAILED", "SmokeTestFailed"), refused.cause
    assert "the way back failed too: ClientError" in refused.cause, refused.cause
    assert "ValidationException" in refused.cause
    assert refused.states[-3:] == ["WayBack", "WayBackFailed", "Failed"]
    assert serving(clean, "support") == artifact(clean, v3)  # what serves, as it is


def test_deleting_the_last_adapter_names_what_bills_and_retiring_waits_for_no_adapter(clean):
    """Deleting the last adapter says the base keeps billing (its USD/h) and names --retire-base; retiring
    is refused while an adapter remains, then deletes the base in AWS's order and nothing bills."""
    v1 = register(clean)
    assert run(clean, action="deploy", adapter="support", version=v1).status == "SUCCEEDED"
    assert run(clean, action="deploy", adapter="sales", version=v1).status == "SUCCEEDED"
    refused = run(clean, action="retire")
    assert (refused.status, refused.error) == ("FAILED", "AdapterRefused"), refused.cause
    assert "still holds 2 adapter(s): sales, support" in json.loads(refused.cause)["errorMessage"]
    assert refused.states == ["Action?", "Retire", "RetireRefused"]
    first = run(clean, action="delete", adapter="sales")
    assert first.output["remaining"] == [component_name(ENV, "support")]
    last = run(clean, action="delete", adapter="support")
    assert last.status == "SUCCEEDED", last.cause
    assert last.output["remaining"] == []
    assert last.output["base"]["usd_per_hour"] == 2.03
    assert last.output["base"]["retire_command"] == "hfpipe deploy --env dev --retire-base"
    retired = run(clean, action="retire")
    assert retired.status == "SUCCEEDED", (retired.error, retired.cause)
    assert retired.states == ["Action?", "Retire", "Retired"]
    assert retired.output["gone"][0] == f"inference component {NAMES.endpoint}"
    nothing_billing(clean)


class FakeSageMaker:
    """DescribeInferenceComponent answering one status; every other call recorded."""

    def __init__(self, status: str) -> None:
        self.status, self.calls = status, []

    def describe_inference_component(self, **request: Any) -> dict[str, Any]:
        return {
            "InferenceComponentName": request["InferenceComponentName"],
            "InferenceComponentStatus": self.status,
            "FailureReason": "CUDA out of memory",
            "Specification": {"Container": {"ArtifactUrl": "s3://artifacts/new/model.tar.gz"}},
        }

    def __getattr__(self, name: str) -> Any:
        return lambda **request: self.calls.append(name)


def test_the_way_back_waits_while_the_component_is_updating_and_a_failed_one_names_its_way_out():
    from pipeline_lambdas import adapter

    from hfpipe.core.adapters.adapter_plan import AdapterPlan
    from hfpipe.core.deploy.deploy_requests import SmokeSpec

    plan = AdapterPlan(
        request="deploy",
        adapter="support",
        component=component_name(ENV, "support"),
        action="updated",
        version_ref="r/2",
        version_arn="arn",
        artifact="s3://artifacts/new/model.tar.gz",
        previous_artifact="s3://artifacts/old/model.tar.gz",
        smoke=SmokeSpec("e", "vllm", {}, [], 1.0, "x"),
        applied_at="2026-01-01T00:00:00+00:00",
    )
    updating = FakeSageMaker("Updating")
    with pytest.raises(adapter.AdapterNotReady, match="is Updating; the way back waits"):
        adapter.way_back(plan, updating, ENV)
    assert updating.calls == []
    failed = FakeSageMaker("Failed")
    with pytest.raises(adapter.AdapterFailed, match=r"--adapter support --delete"):
        adapter._wait(failed, ENV)("inference-component", plan.component)
    with pytest.raises(adapter.AdapterFailed, match=r"--retire-base"):
        adapter._wait(failed, ENV)("inference-component", NAMES.component)
    assert adapter.way_back(plan, failed, ENV)["way_back"] == "updated back"
    assert failed.calls == ["update_inference_component"]


def test_the_state_machine_reads_the_typed_plan_through_its_field_names(pipeline_app):
    """Every path the adapter state machine reads of what Apply decided is a field of AdapterPlan (the
    paths come from AdapterPlan.path), every step it asks the function for is one of STEPS, and no state
    reads the untyped ``applied`` dict of before; the plan itself is read back field by field."""
    import re

    from hfpipe.core.adapters.adapter_plan import STEPS, AdapterPlan, AdapterPlanFormatError

    template = pipeline_app.assertions(ENV, "Pipeline")
    ((_, machine),) = [
        (k, v)
        for k, v in template.find_resources("AWS::StepFunctions::StateMachine").items()
        if v["Properties"].get("StateMachineName") == contract.adapter_state_machine_name(ENV)
    ]
    parts = machine["Properties"]["DefinitionString"]["Fn::Join"][1]
    text = "".join(p if isinstance(p, str) else "0" for p in parts)
    states = json.loads(text)["States"]
    assert "$.applied" not in text
    paths = set(re.findall(r"\$\.plan(?:\.[a-z_]+)*", text))
    assert paths >= {"$.plan", "$.plan.smoke", "$.plan.component"}, paths
    for path in paths - {"$.plan"}:
        assert AdapterPlan.path(*path.split(".")[2:]) == path
    steps = {s["Parameters"]["step"] for s in states.values() if "step" in (s.get("Parameters") or {})}
    assert steps and steps <= set(STEPS), steps
    planned = {n for n, s in states.items() if "plan.$" in (s.get("Parameters") or {})}
    assert planned == {"WaitAdapter", "BakeCheck", "Confirm", "WayBack", "WayBackSettled"}, planned
    with pytest.raises(AdapterPlanFormatError, match=r"adapter.adapter: missing"):
        AdapterPlan.from_json({"schema_version": 1, "request": "deploy"})
    with pytest.raises(AdapterPlanFormatError, match=r"adapter.applied: unknown field"):
        AdapterPlan.from_json({"schema_version": 1, "applied": {}})


def test_a_first_deploy_whose_apply_was_retried_still_retires_the_base_it_made(clean):
    """On AWS, Apply is retried while the base comes up, and each call creates only what is still absent: what
    this execution made is read from the base's CreationTimes against the execution's start, so its way
    back still retires the base (one call's own list would be empty)."""
    clean.after_errors["adapter"] = ["Lambda.ServiceException"]  # Apply ran, then its answer was lost
    clean.component = lambda route, body: {"object": "error"}
    r = run(clean, action="deploy", adapter="support", version=register(clean))
    assert (r.status, r.error) == ("FAILED", "SmokeTestFailed"), r.cause
    plan = exited(r, "Apply")["plan"]
    assert plan["action"] == "created"  # by the call whose answer was lost: the way back deletes it
    assert plan["base_created"] == [
        "CreateModel",
        "CreateEndpointConfig",
        "CreateEndpoint",
        "CreateInferenceComponent",
    ]
    nothing_billing(clean)


def test_an_apply_that_fails_after_making_the_base_leaves_nothing_billing(clean):
    """Apply made the base's model, config and endpoint, then CreateInferenceComponent of the base failed:
    Abandon retires what this execution made (nothing else holds an adapter), and the execution fails with
    Apply's own error."""
    clean.sagemaker_errors["create_inference_component"] = ["ValidationException"]
    r = run(clean, action="deploy", adapter="support", version=register(clean))
    assert r.status == "FAILED" and "ValidationException" in r.cause, (r.error, r.cause)
    assert r.states[-3:] == ["Apply", "Abandon", "Failed"], r.states
    assert exited(r, "Abandon")["abandoned"]["base"] == "retired"
    nothing_billing(clean)


def test_dev_base_scales_to_zero_a_deploy_wakes_it_and_retiring_removes_its_scaling(clean):
    """Scale to zero (dev's cdk.json: hfpipe.core.adapters.scale_to_zero): the base Apply made gets its scalable
    target and the no-capacity alarm; an adapter deployed while the base is at zero wakes it first (Apply
    retried until its copy is up), so its smoke test is answered; the retirement removes both."""
    from hfpipe.core.adapters import scale_to_zero

    v1 = register(clean)
    first = run(clean, action="deploy", adapter="support", version=v1)
    assert first.status == "SUCCEEDED", (first.error, first.cause)
    metrics, sm = clean.client("cloudwatch"), clean.client("sagemaker")
    alarm = scale_to_zero.alarm_name(NAMES.component)
    (found,) = metrics.describe_alarms(AlarmNames=[alarm])["MetricAlarms"]
    assert (found["MetricName"], found["Threshold"]) == ("NoCapacityInvocationFailures", 1.0)
    assert (ACCOUNT, "eu-west-1", NAMES.component) in clean.inference_components._scaling
    # The base scaled in to zero (as its idle policy would), then a second adapter is deployed.
    sm.update_inference_component_runtime_config(
        InferenceComponentName=NAMES.component, DesiredRuntimeConfig={"CopyCount": 0}
    )
    assert sm.describe_inference_component(InferenceComponentName=NAMES.component)["RuntimeConfig"] == {
        "DesiredCopyCount": 0,
        "CurrentCopyCount": 0,
    }
    second = run(clean, action="deploy", adapter="sales", version=v1)
    assert second.status == "SUCCEEDED", (second.error, second.cause)
    # Apply raised AdapterNotReady while the base came back, and was retried.
    assert "is waking from zero" in json.dumps(second.history, default=str)
    copies = sm.describe_inference_component(InferenceComponentName=NAMES.component)["RuntimeConfig"]
    assert copies["CurrentCopyCount"] == 1
    for adapter in ("support", "sales"):
        assert run(clean, action="delete", adapter=adapter).status == "SUCCEEDED"
    retired = run(clean, action="retire")
    assert retired.status == "SUCCEEDED", (retired.error, retired.cause)
    assert metrics.describe_alarms(AlarmNames=[alarm])["MetricAlarms"] == []
    assert (ACCOUNT, "eu-west-1", NAMES.component) not in clean.inference_components._scaling


def _description(engine: Any, version: str) -> str:
    sm = engine.client("sagemaker")
    return str(sm.describe_model_package(ModelPackageName=version).get("ApprovalDescription") or "")


def test_apply_records_the_override_it_passed_with_once_and_nothing_otherwise(clean, monkeypatch):
    """docs/evaluation.md, "Overriding the gate": the adapter execution records the override when Apply passes
    the gate with it, once (a retried Apply appends nothing again); a change the gate passes on its own, or
    refuses, appends nothing."""
    v1, v2 = register(clean), register(clean)
    passed = run(clean, action="deploy", adapter="support", version=v1, override_evaluation="not needed")
    assert passed.status == "SUCCEEDED", passed.cause  # advisory, no evaluation: passed without it
    assert _description(clean, v1) == ""
    monkeypatch.setenv("EVALUATION_GATE", "mandatory")  # v2 has no evaluation: refused without an override
    refused = run(clean, action="deploy", adapter="support", version=v2)
    assert (refused.status, refused.error) == ("FAILED", "AdapterRefused"), refused.cause
    assert _description(clean, v2) == ""
    clean.after_errors["adapter"] = ["Lambda.ServiceException"]  # Apply ran, then its answer was lost
    machine = clean.state_machine_arns[contract.adapter_state_machine_name(ENV)]
    name = f"adapter-override-{next(_ids)}"
    request = {"action": "deploy", "adapter": "support", "version": v2, "override_evaluation": "hotfix"}
    r = clean.run(request, name=name, state_machine_arn=machine)
    assert r.status == "SUCCEEDED", (r.error, r.cause)
    assert not clean.after_errors["adapter"]  # Apply was invoked again for the same execution
    description = _description(clean, v2)
    assert description.startswith("evaluation gate overridden: hotfix (refused: "), description
    assert description.endswith(f"; [execution {name}])") and description.count("overridden") == 1
    status = clean.client("sagemaker").describe_model_package(ModelPackageName=v2)["ModelApprovalStatus"]
    assert status == "Approved"


def test_an_adapter_override_is_recorded_by_its_execution_not_the_command(
    clean: Any, capsys: Any, monkeypatch: Any
) -> None:
    """`deploy --adapter --model V --override-evaluation R --no-wait` starts the execution and returns without
    reading its history; the execution's Apply records R on V when it passes the gate with it."""
    from hfpipe.cli import aws

    machine = clean.state_machine_arns[contract.adapter_state_machine_name("dev")]
    ssm = clean.client("ssm")
    names = [contract.ssm_parameter_name("dev", k) for k in (contract.SSM_ADAPTER_STATE_MACHINE_ARN,)]
    gate = contract.ssm_parameter_name("dev", contract.SSM_EVALUATION_GATE)
    ssm.put_parameter(Name=names[0], Value=machine, Type="String", Overwrite=True)
    ssm.put_parameter(Name=gate, Value="mandatory", Type="String", Overwrite=True)
    monkeypatch.setenv("EVALUATION_GATE", "mandatory")  # the execution's Apply: this environment's gate
    version = register(clean)
    made = aws.make_clients(region=clean.region)
    made._clients["stepfunctions"] = NoHistory(made.sfn)
    monkeypatch.setattr(aws, "clients_factory", lambda profile, region: made)
    listed = clean.client("stepfunctions").list_executions
    before = {e["executionArn"] for e in listed(stateMachineArn=machine)["executions"]}
    try:
        code = main(
            ["deploy", "--env", "dev", "--adapter", "support", "--model", version, "--region", clean.region,
             "--override-evaluation", "hotfix", "--no-wait"]
        )  # fmt: skip
        out, err = capsys.readouterr()
        (execution,) = [
            e for e in listed(stateMachineArn=machine)["executions"] if e["executionArn"] not in before
        ]
        ended = clean.wait(execution["executionArn"], timeout_s=60)
    finally:
        for name in (*names, gate):
            ssm.delete_parameter(Name=name)
    assert code == 0, err
    assert "recorded in the version's approval description by the execution" in " ".join(out.split()), out
    sm = clean.client("sagemaker")
    description = sm.describe_model_package(ModelPackageName=version).get("ApprovalDescription") or ""
    assert description.startswith("evaluation gate overridden: hotfix (refused: "), (
        ended.states,
        description,
    )
    assert description.endswith(f"[execution {execution['name']}])"), description
