"""Local mode's SageMaker inference components (hfpipe.local.engine.inference_components, routed through
hfpipe.local.engine.moto_patches): boto3 calls against moto with the patches installed, no engine, no containers.
botocore's shapes, the statuses on a clock the test moves, AWS's refusals, and InvokeEndpoint's routing."""

from __future__ import annotations

import contextlib
import functools
from dataclasses import replace
from datetime import UTC, datetime
from types import SimpleNamespace

import boto3
import pytest
from botocore.exceptions import ClientError
from botocore.stub import Stubber
from deploy_helpers import Clock, adapter_version, put_on_base
from moto import mock_aws
from rich.console import Console

from hfpipe.cli.adapters import adapter_endpoints
from hfpipe.cli.aws import HfpipeError
from hfpipe.cli.deploy import endpoints, invoke
from hfpipe.core.adapters import adapter_cost, adapter_deploy
from hfpipe.core.adapters.adapter_deploy import AdapterRefused, BaseNames
from hfpipe.core.adapters.shared_base import SharedBase
from hfpipe.local.engine import cloudwatch, inference_components, moto_patches
from hfpipe.local.engine.inference_components import InferenceComponents

REGION = "us-east-1"
ENDPOINT, PLAIN = "hfpipe-dev-adapters", "hfpipe-dev-plain"
BASE_SPEC = {
    "ModelName": "base-model",
    "ComputeResourceRequirements": {"NumberOfAcceleratorDevicesRequired": 1, "MinMemoryRequiredInMb": 1024},
}


@pytest.fixture
def world():
    clock = Clock()

    # Each routed call puts its Invocations in moto's CloudWatch, as LocalEngine.count_invocation does.
    def count(account: str, region: str, component: str) -> None:
        cloudwatch.record_component_invocation(boto3.client("cloudwatch", region_name=region), component)

    store = InferenceComponents(time_scale=lambda: 1.0, clock=clock, count=count)
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
        metrics = boto3.client("cloudwatch", region_name=REGION)
        yield SimpleNamespace(sm=sm, runtime=runtime, cloudwatch=metrics, clock=clock, store=store)


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


def test_a_component_name_is_matched_whole_as_aws_matches_it(world):
    """botocore's InferenceComponentName pattern is the whole value: a name and a newline is not the name (the
    emulation's pattern ended in ``$``, which Python also matches before a final newline)."""
    sm, clock = world.sm, world.clock
    create_base(sm)
    clock.now += 60
    assert "failed to satisfy constraint" in refused(lambda: create_base(sm, "base\n"))
    assert "failed to satisfy constraint" in refused(lambda: create_adapter(sm, "support\n"))
    listed = sm.list_inference_components(EndpointNameEquals=ENDPOINT)["InferenceComponents"]
    assert [c["InferenceComponentName"] for c in listed] == ["base"]


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


# -- deploying adapter versions onto an environment's shared base (hfpipe.core.adapters.adapter_deploy) ------------

SHARED = SharedBase("my-org/base-8b", "ml.g5.4xlarge", max_adapters=2)
DEV_BASE = BaseNames.of("dev")


#: A version of a recipe's group as the Register step writes an adapter's (on SHARED's base unless told).
registered = functools.partial(adapter_version, base="my-org/base-8b")


def put_adapter(world, adapter: str, version: dict, base: SharedBase = SHARED) -> dict:
    return put_on_base(world, base, adapter, version, checked=True)


def on_base(sm) -> dict[str, str]:
    pages = sm.list_inference_components(EndpointNameEquals=DEV_BASE.endpoint)["InferenceComponents"]
    described = [
        sm.describe_inference_component(InferenceComponentName=c["InferenceComponentName"]) for c in pages
    ]
    return {
        d["InferenceComponentName"]: d["Specification"].get("Container", {}).get("ArtifactUrl", "base")
        for d in described
    }


def test_the_bases_startup_and_routing_fields_are_kept_as_aws_keeps_them(world):
    """The endpoint config's variant keeps its host image, startup health check and routing (moto stores the
    variant as given), the base component its StartupParameters; a timeout over 3600 s is AWS's refusal."""
    sm = world.sm
    put_adapter(world, "summary", registered(sm, "summary", 1))
    (variant,) = sm.describe_endpoint_config(EndpointConfigName=DEV_BASE.endpoint_config)[
        "ProductionVariants"
    ]
    assert variant["InferenceAmiVersion"] == "al2-ami-sagemaker-inference-gpu-3-1"
    assert variant["ContainerStartupHealthCheckTimeoutInSeconds"] == 600
    assert variant["RoutingConfig"] == {"RoutingStrategy": "LEAST_OUTSTANDING_REQUESTS"}
    spec = sm.describe_inference_component(InferenceComponentName=DEV_BASE.component)["Specification"]
    assert spec["StartupParameters"] == {
        "ModelDataDownloadTimeoutInSeconds": 600,
        "ContainerStartupHealthCheckTimeoutInSeconds": 600,
    }
    startup = {"ModelDataDownloadTimeoutInSeconds": 3601}
    message = refused(
        lambda: sm.create_inference_component(
            InferenceComponentName="late",
            EndpointName=DEV_BASE.endpoint,
            Specification={**BASE_SPEC, "StartupParameters": startup},
        ),
        "ValidationException",
    )
    assert message == (
        "1 validation error detected: Value 3601 at 'specification.startupParameters."
        "modelDataDownloadTimeoutInSeconds' failed to satisfy constraint: Member must have value between 60 "
        "and 3600"
    )


def test_two_adapters_share_one_base_and_one_fleet_and_each_moves_alone(world):
    sm = world.sm
    summary_1, summary_2 = registered(sm, "summary", 1), registered(sm, "summary", 2)
    topics_1 = registered(sm, "topics", 1)
    first = put_adapter(world, "summary", summary_1)
    assert first["base_created"] == [
        "CreateModel",
        "CreateEndpointConfig",
        "CreateEndpoint",
        "CreateInferenceComponent",
    ]
    second = put_adapter(world, "topics", topics_1)
    assert (second["action"], second["base_created"]) == ("created", [])  # the base is there: one fleet
    config = sm.describe_endpoint_config(EndpointConfigName=DEV_BASE.endpoint_config)
    (variant,) = config["ProductionVariants"]
    assert (variant["InstanceType"], variant["InitialInstanceCount"], "ModelName" in variant) == (
        "ml.g5.4xlarge",
        1,
        False,
    )
    model = sm.describe_model(ModelName=DEV_BASE.model)["PrimaryContainer"]["Environment"]
    assert (model["SM_VLLM_ENABLE_LORA"], model["SM_VLLM_MAX_LORAS"], model["SM_VLLM_MODEL"]) == (
        "true",
        "2",
        "my-org/base-8b",
    )
    summary, topics = "hfpipe-dev-adapter-summary", "hfpipe-dev-adapter-topics"
    # `hfpipe endpoints`: the one fleet's price, in equal shares per adapter read from the endpoint, since no
    # component was called in the period counted (the endpoint's life so far, under a day).
    info = endpoints.describe(sm, DEV_BASE.endpoint, {}, datetime.now(UTC), world.cloudwatch)
    assert (info.instance_type, info.instance_count, info.price_per_hour_usd) == ("ml.g5.4xlarge", 1, 2.03)
    assert {(a.component, a.rule, a.usd_per_hour, a.invocations) for a in info.adapters} == {
        (summary, "equal", 1.015, 0),
        (topics, "equal", 1.015, 0),
    }
    assert {a.period_start for a in info.adapters} == {info.created.replace(microsecond=0).isoformat()}
    assert on_base(sm) == {
        DEV_BASE.component: "base",
        summary: "s3://artifacts/summary/1/model.tar.gz",
        topics: "s3://artifacts/topics/1/model.tar.gz",
    }
    # `hfpipe invoke ENDPOINT --adapter NAME`: InvokeEndpoint's InferenceComponentName, which local mode routes.
    target = invoke.with_adapter(
        SimpleNamespace(sagemaker=sm), invoke.Target(DEV_BASE.endpoint, None), "summary", "dev"
    )
    assert (target.component, target.serving.name) == (summary, "vllm")
    invoke.send(SimpleNamespace(runtime=world.runtime), target, {"prompt": "Amanda:", "max_tokens": 4})
    with pytest.raises(HfpipeError, match=r"nope"):  # what is sent names the component
        invoke.send(SimpleNamespace(runtime=world.runtime), replace(target, component="nope"), {})
    with pytest.raises(HfpipeError, match=r"holds no adapter component hfpipe-dev-adapter-other"):
        invoke.with_adapter(SimpleNamespace(sagemaker=sm), target, "other", "dev")
    # With --local, the OpenAI route: the model field names the adapter, as vLLM routes it.
    assert invoke.with_model_field([{"prompt": "x"}], "summary") == [{"prompt": "x", "model": "summary"}]
    assert put_adapter(world, "summary", summary_2)["action"] == "updated"
    assert on_base(sm)[topics] == "s3://artifacts/topics/1/model.tar.gz"  # untouched
    # The way back: the newest approved version older than what the component serves, read from it.
    serving = adapter_deploy.serving_artifact(sm, "dev", "summary")
    back = adapter_deploy.previous_version([summary_1, summary_2], serving)
    assert back["ModelPackageArn"] == summary_1["ModelPackageArn"]
    put_adapter(world, "summary", dict(back))
    assert on_base(sm)[summary] == "s3://artifacts/summary/1/model.tar.gz"
    assert on_base(sm)[topics] == "s3://artifacts/topics/1/model.tar.gz"
    with pytest.raises(
        AdapterRefused, match=r"serves version 1, and no version before it is Approved \(it is the first\)"
    ):
        adapter_deploy.previous_version(
            [summary_1, summary_2], serving="s3://artifacts/summary/1/model.tar.gz"
        )
    # A rejected earlier version is no way back, and the refusal says so (not "the first approved version").
    rejected = {**summary_1, "ModelApprovalStatus": "Rejected"}
    with pytest.raises(
        AdapterRefused, match=r"serves version 2, and no version before it is Approved \(1 Rejected\)"
    ):
        adapter_deploy.previous_version(
            [rejected, summary_2], serving="s3://artifacts/summary/2/model.tar.gz"
        )
    assert adapter_deploy.delete_adapter(sm, "dev", "topics") == topics
    world.clock.now += 120
    assert set(on_base(sm)) == {DEV_BASE.component, summary}


def test_endpoints_split_the_fleet_by_each_adapters_invocations(world, capsys):
    sm, runtime = world.sm, world.runtime
    put_adapter(world, "summary", registered(sm, "summary", 1))
    put_adapter(world, "topics", registered(sm, "topics", 1))
    summary, topics = "hfpipe-dev-adapter-summary", "hfpipe-dev-adapter-topics"
    for component in (summary, summary, summary, topics):  # routed by local mode, counted in CloudWatch
        runtime.invoke_endpoint(
            EndpointName=DEV_BASE.endpoint,
            InferenceComponentName=component,
            Body=b"{}",
            ContentType="application/json",
        )
    with pytest.raises(ClientError):  # refused before it reaches a component: not counted
        runtime.invoke_endpoint(
            EndpointName=DEV_BASE.endpoint,
            InferenceComponentName="nope",
            Body=b"{}",
            ContentType="application/json",
        )
    now = datetime.now(UTC)
    info = endpoints.describe(sm, DEV_BASE.endpoint, {}, now, world.cloudwatch)
    shares = {a.component: (a.rule, a.invocations, a.usd_per_hour) for a in info.adapters}
    assert shares == {
        summary: ("invocations", 3, pytest.approx(0.75 * 2.03)),
        topics: ("invocations", 1, pytest.approx(0.25 * 2.03)),
    }
    # --json: each adapter's rule and the period its calls were counted over.
    (first, _) = endpoints.as_json(info)["adapters"]
    start, end = adapter_cost.counted_period(now, info.created)
    assert (first["rule"], first["period_start"], first["period_end"]) == (
        "invocations",
        start.isoformat(),
        end.isoformat(),
    )
    console = Console(width=400)
    adapter_endpoints.print_shares(console, [(info.name, info.adapters)])
    out = capsys.readouterr().out
    assert f"adapter {summary} on {DEV_BASE.component}: 1.522 USD/h (by invocations: 3 of 4 calls from" in out
    # Calls naming the base itself count under its name: a tenant that pays its share.
    runtime.invoke_endpoint(
        EndpointName=DEV_BASE.endpoint,
        InferenceComponentName=DEV_BASE.component,
        Body=b"{}",
        ContentType="application/json",
    )
    info = endpoints.describe(sm, DEV_BASE.endpoint, {}, datetime.now(UTC), world.cloudwatch)
    base = next(a for a in info.adapters if a.is_base)
    assert (base.component, base.invocations, base.usd_per_hour) == (
        DEV_BASE.component,
        1,
        pytest.approx(2.03 / 5),
    )
    assert sum(a.usd_per_hour for a in info.adapters) == pytest.approx(2.03)
    # Without a CloudWatch client the counts are not known: equal shares, said so.
    blind = endpoints.describe(sm, DEV_BASE.endpoint, {}, datetime.now(UTC))
    assert {(a.rule, a.invocations, a.period_start) for a in blind.adapters} == {("equal", None, None)}
    # Counts CloudWatch refuses (no cloudwatch:GetMetricData): equal shares, and a warning names the call.
    denied = boto3.client("cloudwatch", region_name=REGION)
    with Stubber(denied) as stubber:
        for _ in range(2):  # the invocations, then the tokens (hfpipe.cli.deploy.endpoint_cost)
            stubber.add_client_error(
                "get_metric_data", "AccessDenied", "not authorized: cloudwatch:GetMetricData"
            )
        refused_counts = endpoints.describe(sm, DEV_BASE.endpoint, {}, datetime.now(UTC), denied)
    assert {(a.rule, a.invocations) for a in refused_counts.adapters} == {("equal", None)}
    assert capsys.readouterr().err == (
        f"warning: reading the Invocations of {DEV_BASE.endpoint} from CloudWatch failed: access denied "
        "(not authorized: cloudwatch:GetMetricData); check your role's permissions; its adapters are shown "
        "in equal shares\n"
        f"warning: reading the tokens of {DEV_BASE.endpoint} failed: access denied (not authorized: "
        "cloudwatch:GetMetricData); check your role's permissions; no cost per token\n"
    )
    assert refused_counts.tokens == ()
    adapter_endpoints.print_shares(console, [(info.name, refused_counts.adapters)])
    assert "(equal shares of 2 adapters: the invocation counts were not read)" in capsys.readouterr().out


def test_a_version_the_rules_refuse_creates_nothing_and_says_why(world):
    sm = world.sm
    pending = registered(sm, "summary", 1, approved=False)
    with pytest.raises(AdapterRefused, match=r"is PendingManualApproval; accepted: an Approved version"):
        put_adapter(world, "summary", pending)
    other = registered(sm, "topics", 1, base="other-org/base-7b")
    with pytest.raises(
        AdapterRefused, match=r"was trained on 'other-org/base-7b', and the shared base serves"
    ):
        put_adapter(world, "topics", other)
    assert DEV_BASE.endpoint not in [e["EndpointName"] for e in sm.list_endpoints()["Endpoints"]]
    one = SharedBase("my-org/base-8b", "ml.g5.4xlarge", max_adapters=1)
    put_adapter(world, "a", registered(sm, "a", 1), base=one)
    with pytest.raises(AdapterRefused, match=r"holds at most 1 \(shared_base.max_adapters\)"):
        put_adapter(world, "b", registered(sm, "b", 1), base=one)
    with pytest.raises(AdapterRefused, match=r"--adapter: 'B_1' is not accepted"):
        put_adapter(world, "B_1", registered(sm, "c", 1), base=one)
    with pytest.raises(AdapterRefused, match=r"'b' is not on dev's shared base; accepted: one of a$"):
        adapter_deploy.delete_adapter(sm, "dev", "b")


def test_a_rollback_decided_on_what_no_longer_serves_is_refused(world):
    """The rollback's decision (the artifact the adapter served when its target was chosen) is checked just
    before the update: another deploy in between makes it refuse, and nothing changes."""
    sm = world.sm
    one, two, three = (registered(sm, "review", n) for n in (1, 2, 3))
    put_adapter(world, "review", one)
    put_adapter(world, "review", two)
    target, serving = adapter_deploy.rollback_target(sm, "dev", "review")
    two_artifact = artifact_of(two)
    assert (target["ModelPackageArn"], serving) == (one["ModelPackageArn"], two_artifact)
    put_adapter(world, "review", three)  # another deploy, after the decision
    with pytest.raises(AdapterRefused, match=f"not {two_artifact} that the rollback was decided on"):
        apply(sm, "review", target, expect_serving=serving)
    assert adapter_deploy.serving_artifact(sm, "dev", "review") == artifact_of(three)


def test_an_adapter_being_changed_is_not_changed_again(world):
    """A second change while SageMaker still updates the adapter's component is refused before it acts."""
    sm = world.sm
    one, two = registered(sm, "busy", 1), registered(sm, "busy", 2)
    put_adapter(world, "busy", one)
    sm.update_inference_component(
        InferenceComponentName=adapter_deploy.component_name("dev", "busy"),
        Specification=adapter_deploy.adapter_specification("dev", artifact_of(two)),
    )  # Updating until the clock moves
    with pytest.raises(AdapterRefused, match="'busy' is Updating"):
        apply(sm, "busy", one)


def artifact_of(version: dict) -> str:
    return str(version["InferenceSpecification"]["Containers"][0]["ModelDataUrl"])


def apply(
    sm, adapter: str, version: dict, base: SharedBase = SHARED, wait=lambda kind, name: None, **options
):
    """adapter_deploy.apply_adapter in dev, onto ``base`` made for an image of one GPU (no tags)."""
    requests = adapter_deploy.base_requests(
        "dev", base, image="image", role_arn="arn:aws:iam::1:role/r", gpus=1, memory_mb=1024, tags=[]
    )
    return adapter_deploy.apply_adapter(
        sm, "dev", base, adapter, version, base_requests=requests, wait=wait, tags=[], **options
    )


# --- issue 44: one lifecycle for base and adapters, every decision re-checked at the act -------------------


class Racing:
    """A SageMaker client whose adapter creates wait for each other: every deploy has counted the adapters
    on the base (and passed) before any of them creates its component, as deploys run at once can."""

    def __init__(self, sm, barrier) -> None:
        self._sm, self._barrier = sm, barrier

    def __getattr__(self, name: str):
        return getattr(self._sm, name)

    def create_inference_component(self, **request):
        if request["Specification"].get("BaseInferenceComponentName"):
            self._barrier.wait(timeout=60)
        return self._sm.create_inference_component(**request)


def test_four_first_deploys_at_once_put_no_more_adapters_on_the_base_than_it_holds(world):
    """Four first deploys on a fresh environment, each counting before any creates: the base is made once,
    and each counts again after its own create in the one order all agree on (CreationTime, then name), so
    the fourth adapter's deploy deletes its component and is refused (max_adapters 3)."""
    import threading

    sm = world.sm
    three = SharedBase("my-org/base-8b", "ml.g5.4xlarge", max_adapters=3)
    versions = {name: registered(sm, name, 1) for name in ("a", "b", "c", "d")}
    barrier, outcomes = threading.Barrier(4), {}

    def wait(kind: str, name: str) -> None:
        world.clock.now += 120  # past every transitional status

    def deploy(name: str) -> None:
        client = Racing(boto3.client("sagemaker", region_name=REGION), barrier)
        try:
            outcomes[name] = apply(client, name, versions[name], three, wait)["action"]
        except Exception as err:  # the outcome is what the test reads
            outcomes[name] = f"{type(err).__name__}: {err}"

    threads = [threading.Thread(target=deploy, args=(name,)) for name in versions]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    refused = [name for name, outcome in outcomes.items() if outcome != "created"]
    assert len(refused) == 1, outcomes
    assert "AdapterRefused" in outcomes[refused[0]] and "took its places" in outcomes[refused[0]], outcomes
    world.clock.now += 120  # the refused component's deletion done
    held = adapter_deploy.adapters_left(sm, "dev")
    assert len(held) == 3 and adapter_deploy.component_name("dev", refused[0]) not in held, held


class Recording:
    """A SageMaker client that records the Delete* calls it passes on."""

    def __init__(self, sm) -> None:
        self._sm, self.deleted = sm, []

    def __getattr__(self, name: str):
        call = getattr(self._sm, name)
        if not name.startswith("delete_"):
            return call

        def recorded(**request):
            self.deleted.append(name)
            return call(**request)

        return recorded


def test_retiring_the_base_is_refused_while_adapters_remain_then_deletes_in_aws_order(world):
    """Retiring the shared base names the adapters still on it and deletes nothing; once they are gone it
    deletes the base component first, then (once it is gone) the endpoint, then its config and model."""
    sm = world.sm
    put_adapter(world, "summary", registered(sm, "summary", 1))
    recording = Recording(sm)
    with pytest.raises(
        AdapterRefused, match=r"still holds 1 adapter\(s\): summary; accepted: deleting them first"
    ):
        adapter_deploy.retire_step(recording, "dev")
    assert recording.deleted == []
    adapter_deploy.delete_adapter(sm, "dev", "summary")
    world.clock.now += 120
    waits = []
    while (waiting := adapter_deploy.retire_step(recording, "dev")) is not None:
        waits.append(waiting)
        world.clock.now += 120
        assert len(waits) < 5, waits
    assert recording.deleted == [
        "delete_inference_component",
        "delete_endpoint",
        "delete_endpoint_config",
        "delete_model",
    ]
    assert DEV_BASE.endpoint not in [e["EndpointName"] for e in sm.list_endpoints()["Endpoints"]]
    with pytest.raises(ClientError):
        sm.describe_endpoint_config(EndpointConfigName=DEV_BASE.endpoint_config)
    with pytest.raises(ClientError):
        sm.describe_model(ModelName=DEV_BASE.model)
    assert adapter_deploy.retire_step(recording, "dev") is None  # a rerun deletes nothing twice
    assert len(recording.deleted) == 4


def test_endpoints_delete_refuses_the_shared_base_and_names_its_adapters(world):
    """`hfpipe endpoints delete hfpipe-dev-shared-base --yes` deleted the base with adapters on it (exit 0);
    it is refused, naming the adapters and the command that retires the base, and nothing is deleted."""
    sm = world.sm
    put_adapter(world, "summary", registered(sm, "summary", 1))
    put_adapter(world, "topics", registered(sm, "topics", 1))
    args = SimpleNamespace(name=DEV_BASE.endpoint, env="dev", yes=True, wait_timeout=None)
    clients = SimpleNamespace(sagemaker=sm, region=REGION)
    with pytest.raises(HfpipeError) as refused:
        endpoints._delete_one(clients, args, Console(record=True))  # type: ignore[arg-type]
    message = str(refused.value)
    assert "hfpipe-dev-adapter-summary, hfpipe-dev-adapter-topics" in message, message
    assert "hfpipe deploy --env dev --retire-base" in message and "nothing deleted" in message
    assert DEV_BASE.endpoint in [e["EndpointName"] for e in sm.list_endpoints()["Endpoints"]]
    assert len(on_base(sm)) == 3


def test_an_adapter_that_would_not_load_is_refused_before_the_base_is_made(world):
    """The adapter's own adapter_config.json (in the version's model.tar.gz) is read before anything is
    created: a rank over the base's max_lora_rank, a module vLLM does not wrap, another base."""
    import io
    import json
    import tarfile

    sm, s3 = world.sm, boto3.client("s3", region_name=REGION)
    s3.create_bucket(Bucket="artifacts")
    good = {"base_model_name_or_path": "my-org/base-8b", "r": 8, "target_modules": ["q_proj", "v_proj"]}
    cases = [
        (
            {**good, "r": 32},
            r"adapter_config.json.r: adapter 'summary' has rank 32, above the shared base's max_lora_rank 16",
        ),
        ({**good, "target_modules": ["query_key_value"]}, r"target_modules: .*changes query_key_value"),
        (
            {**good, "base_model_name_or_path": "other/base"},
            r"base_model_name_or_path: .*was trained on 'other/base'",
        ),
    ]
    for n, (config, message) in enumerate(cases, start=1):
        version = registered(sm, "summary", n)
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
            data = json.dumps(config).encode()
            info = tarfile.TarInfo("adapter_config.json")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        bucket, _, key = artifact_of(version).removeprefix("s3://").partition("/")
        s3.put_object(Bucket=bucket, Key=key, Body=buffer.getvalue())
        with pytest.raises(AdapterRefused, match=message):
            apply(sm, "summary", version, s3=s3)
    assert DEV_BASE.endpoint not in [e["EndpointName"] for e in sm.list_endpoints()["Endpoints"]]
    with pytest.raises(ClientError):
        sm.describe_model(ModelName=DEV_BASE.model)
