"""Local mode plays scale to zero of the shared base (hfpipe.local.engine.scale_to_zero, through the store of
hfpipe.local.engine.inference_components and the Application Auto Scaling patch of hfpipe.local.engine.moto_patches):
the base's copies go to 0 after the idle period on the engine's clock, the next call is refused with
SageMaker's no-capacity ValidationError, publishes NoCapacityInvocationFailures and fires the alarm, and the
base comes back after the cold start (scaled by the time scale) and answers."""

from __future__ import annotations

import contextlib
from types import SimpleNamespace

import boto3
import pytest
from botocore.exceptions import ClientError
from deploy_helpers import Clock
from moto import mock_aws

from hfpipe.core.adapters import scale_to_zero as rules
from hfpipe.core.adapters.scale_to_zero import ScaleToZero
from hfpipe.local.engine import cloudwatch, moto_patches, scale_to_zero
from hfpipe.local.engine.inference_components import InferenceComponents

REGION = "us-east-1"
ENDPOINT, BASE = "hfpipe-dev-shared-base", "hfpipe-dev-shared-base"
SCALE = 0.01  # the engine's time_scale: a 15-minute idle period is 9 s here, the 300 s cold start 3 s


@pytest.fixture
def world():
    clock = Clock()

    def no_capacity(account: str, region: str, component: str) -> bool:  # as LocalEngine.no_capacity
        return (
            cloudwatch.record_no_capacity(boto3.client("cloudwatch", region_name=region), component)
            == "ALARM"
        )

    store = InferenceComponents(time_scale=lambda: SCALE, clock=clock, no_capacity=no_capacity)
    engine = SimpleNamespace(time_scale=SCALE, timeout_scale=1.0, world=None, inference_components=store)
    with contextlib.ExitStack() as stack, mock_aws():
        moto_patches.install(stack, engine)  # type: ignore[arg-type]
        sm = boto3.client("sagemaker", region_name=REGION)
        role = f"arn:aws:iam::{moto_patches.default_account_id()}:role/r"
        sm.create_model(ModelName="base-model", ExecutionRoleArn=role, PrimaryContainer={"Image": "image"})
        variant = {
            "VariantName": "AllTraffic",
            "InstanceType": "ml.g5.4xlarge",
            "InitialInstanceCount": 1,
            "ManagedInstanceScaling": rules.managed_instance_scaling(1),
        }
        sm.create_endpoint_config(
            EndpointConfigName="ic", ProductionVariants=[variant], ExecutionRoleArn=role
        )
        sm.create_endpoint(EndpointName=ENDPOINT, EndpointConfigName="ic")
        sm.create_inference_component(
            InferenceComponentName=BASE,
            EndpointName=ENDPOINT,
            VariantName="AllTraffic",
            Specification={
                "ModelName": "base-model",
                "ComputeResourceRequirements": {
                    "NumberOfAcceleratorDevicesRequired": 1,
                    "MinMemoryRequiredInMb": 1024,
                },
            },
            RuntimeConfig={"CopyCount": 1},
        )
        clock.now += 60 * SCALE  # Creating -> InService
        yield SimpleNamespace(
            sm=sm,
            runtime=boto3.client("sagemaker-runtime", region_name=REGION),
            autoscaling=boto3.client("application-autoscaling", region_name=REGION),
            cloudwatch=boto3.client("cloudwatch", region_name=REGION),
            clock=clock,
            store=store,
        )


def call(world):
    return world.runtime.invoke_endpoint(
        EndpointName=ENDPOINT, InferenceComponentName=BASE, Body=b"{}", ContentType="application/json"
    )


def copies(world):
    described = world.sm.describe_inference_component(InferenceComponentName=BASE)["RuntimeConfig"]
    return described["CurrentCopyCount"], described["DesiredCopyCount"]


def test_a_base_idle_for_the_window_reaches_zero_and_the_next_request_wakes_it(world):
    setting = ScaleToZero(enabled=True, idle_minutes=15)
    alarm = rules.apply_scaling(world.autoscaling, world.cloudwatch, BASE, setting, max_copies=1)
    assert call(world)["ResponseMetadata"]["HTTPStatusCode"] == 200  # a call keeps it warm
    world.clock.now += 15 * 60 * SCALE - 0.5
    assert copies(world) == (1, 1)
    assert call(world)["ResponseMetadata"]["HTTPStatusCode"] == 200  # the idle window starts again
    world.clock.now += 15 * 60 * SCALE
    assert copies(world) == (0, 0)  # one copy per instance on the shared base: 0 instances
    (variant,) = world.sm.describe_endpoint(EndpointName=ENDPOINT)["ProductionVariants"]
    assert variant["CurrentInstanceCount"] == 0

    with pytest.raises(ClientError) as caught:
        call(world)
    assert caught.value.response["Error"]["Code"] == "ValidationError"
    assert rules.is_cold_start(caught.value)
    state = world.cloudwatch.describe_alarms(AlarmNames=[alarm])["MetricAlarms"][0]["StateValue"]
    assert state == "ALARM"
    stats = world.cloudwatch.get_metric_statistics(
        Namespace="AWS/SageMaker",
        MetricName="NoCapacityInvocationFailures",
        Dimensions=[{"Name": "InferenceComponentName", "Value": BASE}],
        StartTime="2000-01-01T00:00:00Z",
        EndTime="2100-01-01T00:00:00Z",
        Period=60,
        Statistics=["Sum"],
    )["Datapoints"]
    assert sum(d["Sum"] for d in stats) == 1.0
    assert copies(world) == (0, 1)  # the step policy's copy, starting

    world.clock.now += scale_to_zero.COLD_START_SECONDS * SCALE - 0.5
    with pytest.raises(ClientError):  # still starting: refused the same way
        call(world)
    world.clock.now += 0.5
    assert copies(world) == (1, 1)
    assert call(world)["ResponseMetadata"]["HTTPStatusCode"] == 200


def test_without_scaling_the_base_never_goes_to_zero(world):
    world.clock.now += 24 * 3600
    assert copies(world) == (1, 1)
    assert call(world)["ResponseMetadata"]["HTTPStatusCode"] == 200


def test_retiring_removes_the_alarm_and_the_scalable_target_and_a_rerun_deletes_nothing_twice(world):
    rules.apply_scaling(world.autoscaling, world.cloudwatch, BASE, ScaleToZero(enabled=True), max_copies=1)
    rules.remove_scaling(world.autoscaling, world.cloudwatch, BASE)
    rules.remove_scaling(world.autoscaling, world.cloudwatch, BASE)
    assert world.cloudwatch.describe_alarms(AlarmNames=[rules.alarm_name(BASE)])["MetricAlarms"] == []
    world.clock.now += 24 * 3600
    assert copies(world) == (1, 1)  # no policy left: it stays up


def test_a_policy_before_its_target_is_refused_as_aws_refuses_it(world):
    request = rules.scaling_requests(BASE, ScaleToZero(enabled=True), 1)["PutScalingPolicy:StepScaling"]
    with pytest.raises(ClientError) as caught:
        world.autoscaling.put_scaling_policy(**request)
    assert caught.value.response["Error"]["Code"] == "ObjectNotFoundException"


def test_hfpipe_invoke_says_it_waits_for_a_cold_start_retries_and_says_how_long_it_took(
    world, monkeypatch, capsys
):
    from hfpipe.cli.deploy import invoke

    rules.apply_scaling(world.autoscaling, world.cloudwatch, BASE, ScaleToZero(enabled=True), max_copies=1)
    world.clock.now += 15 * 60 * SCALE
    assert copies(world) == (0, 0)
    slept = []

    def sleep(seconds: float) -> None:  # the command's wait between calls, on the engine's clock
        slept.append(seconds)
        world.clock.now += seconds * SCALE

    monkeypatch.setattr(rules.time, "sleep", sleep)
    target = invoke.Target(name=ENDPOINT, task=None, component=BASE)
    answer, _ = invoke.send(SimpleNamespace(runtime=world.runtime), target, {"inputs": "hi"})
    assert answer is not None and copies(world) == (1, 1)
    # The cold start (300 s scaled) is 30 waits of 10 s scaled: the first call fired the alarm.
    assert slept == [rules.RETRY_SECONDS] * int(scale_to_zero.COLD_START_SECONDS / rules.RETRY_SECONDS)
    err = capsys.readouterr().err.splitlines()
    assert err[0] == (
        f"{ENDPOINT}: no copy of the base is up (it scaled to zero): waiting for a cold start, calling again "
        "every 10 s for at most 900 s"
    )
    assert err[1].startswith(f"{ENDPOINT}: cold start: answered after ") and len(err) == 2


def test_a_base_that_never_comes_back_is_reported_after_the_limit(world, monkeypatch):
    rules.apply_scaling(world.autoscaling, world.cloudwatch, BASE, ScaleToZero(enabled=True), max_copies=1)
    world.clock.now += 15 * 60 * SCALE
    said, calls = [], []

    def refused():
        calls.append(1)
        return world.runtime.invoke_endpoint(
            EndpointName=ENDPOINT, InferenceComponentName="missing", Body=b"{}"
        )

    with pytest.raises(ClientError) as caught:  # another error: raised at once, not retried
        rules.through_cold_start(refused, said.append, sleep=lambda s: None)
    assert not rules.is_cold_start(caught.value) and said == [] and len(calls) == 1
    ticks = iter(range(0, 10_000, 10))
    with pytest.raises(ClientError) as caught:  # the base never comes back: the limit, then its answer
        rules.through_cold_start(
            lambda: (_ for _ in ()).throw(_no_capacity()),
            said.append,
            sleep=lambda s: None,
            clock=lambda: next(ticks),
        )
    assert rules.is_cold_start(caught.value) and len(said) == 1


def _no_capacity() -> ClientError:
    return ClientError(
        {"Error": {"Code": "ValidationError", "Message": rules.NO_CAPACITY_MESSAGE}}, "InvokeEndpoint"
    )


def test_a_base_at_zero_instances_costs_nothing_in_hfpipe_endpoints(world):
    """The emulated base idle for the window: DescribeEndpoint's CurrentInstanceCount follows its copies to 0
    (AWS's answer for an endpoint scaled to zero), and `hfpipe endpoints` prices it at 0 USD/h; woken, at the
    fleet's again."""
    from datetime import UTC, datetime

    from hfpipe.cli.deploy import endpoints

    def running():
        info = endpoints.describe(world.sm, ENDPOINT, {}, datetime.now(UTC))
        (variant,) = world.sm.describe_endpoint(EndpointName=ENDPOINT)["ProductionVariants"]
        assert variant["CurrentInstanceCount"] == info.instance_count
        return info.instance_count, info.price_per_hour_usd

    rules.apply_scaling(world.autoscaling, world.cloudwatch, BASE, ScaleToZero(enabled=True), max_copies=1)
    assert running() == (1, 2.03)
    world.clock.now += 15 * 60 * SCALE
    assert running() == (0, 0.0)
    with pytest.raises(ClientError):
        call(world)
    world.clock.now += scale_to_zero.COLD_START_SECONDS * SCALE
    assert running() == (1, 2.03)


def test_hfpipe_endpoints_prices_a_base_per_period_from_its_scaling_activities_and_its_tokens(world):
    """The emulated base goes to 0 and is woken: DescribeScalingActivities answers both activities (newest
    first), and `hfpipe endpoints` prices the periods it had instances, not its whole age; the tokens `hfpipe
    invoke` records (its answers' usage) give its cost per million tokens over the same window."""
    from datetime import UTC, datetime

    from hfpipe.cli.deploy import endpoint_cost, endpoints
    from hfpipe.core import fleet_cost

    # The wall clock moves with the test's engine clock from here (the endpoint was created a moment ago).
    wall0 = datetime.now(UTC).timestamp() - world.clock.now
    world.store.wall = lambda: wall0 + world.clock.now
    rules.apply_scaling(world.autoscaling, world.cloudwatch, BASE, ScaleToZero(enabled=True), max_copies=1)
    world.clock.now += 15 * 60 * SCALE + 5  # at 0 for the last 5 s
    with pytest.raises(ClientError):
        call(world)  # wakes it
    world.clock.now += scale_to_zero.COLD_START_SECONDS * SCALE
    answer = {"usage": {"prompt_tokens": 30, "completion_tokens": 10, "total_tokens": 40}}
    assert endpoint_cost.record_tokens(world.cloudwatch, ENDPOINT, BASE, answer) == (30, 10)
    assert endpoint_cost.record_tokens(world.cloudwatch, ENDPOINT, BASE, {"text": "no usage"}) is None

    found = world.autoscaling.describe_scaling_activities(
        ServiceNamespace="sagemaker", ResourceId=f"inference-component/{BASE}"
    )["ScalingActivities"]
    assert [(a["Description"], a["StatusCode"]) for a in found] == [
        ("Setting desired copy count to 1.", "Successful"),
        ("Setting desired copy count to 0.", "Successful"),
    ]
    assert found[0]["StartTime"] < found[0]["EndTime"]  # the cold start, on the wall clock
    # A variant's activities: local mode plays none (moto has no DescribeScalingActivities).
    assert (
        world.autoscaling.describe_scaling_activities(
            ServiceNamespace="sagemaker", ResourceId=f"endpoint/{ENDPOINT}/variant/AllTraffic"
        )["ScalingActivities"]
        == []
    )

    now = datetime.fromtimestamp(world.store.wall(), UTC)
    info = endpoints.describe(world.sm, ENDPOINT, {}, now, world.cloudwatch, world.autoscaling)
    assert [p["instance_count"] for p in info.cost_periods] == [1, 0, 1]
    assert all(p["source"] == "scaling activities" for p in info.cost_periods)
    up = sum(
        (
            (datetime.fromisoformat(p["end"]) if p["end"] else now) - datetime.fromisoformat(p["start"])
        ).total_seconds()
        for p in info.cost_periods
        if p["instance_count"]
    )
    assert info.cost_so_far_usd == pytest.approx(2.03 * up / 3600, abs=1e-4)
    whole = info.tokens[0]
    assert (whole.component, whole.prompt_tokens, whole.completion_tokens, whole.calls) == (None, 30, 10, 1)
    window = endpoint_cost.counted_period(now, info.created)
    window_usd = fleet_cost.price(
        endpoint_cost.periods(world.sm, world.autoscaling, _serving(world), 1, None, BASE)[0], now, window
    ).usd
    assert whole.usd_per_million_tokens == pytest.approx(window_usd * 1_000_000 / 40, rel=1e-3)
    assert [t.component for t in info.tokens[1:]] == [BASE]


def _serving(world):
    from hfpipe.core.deploy.what_serves import what_serves

    return what_serves(world.sm, ENDPOINT)
