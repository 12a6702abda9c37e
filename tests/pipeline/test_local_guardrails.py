"""Local mode's UpdateEndpoint (hfpipe.local.engine.guardrails), directly against moto inside the session's LocalEngine
(the dev PipelineStack, time_scale 0): blue/green with ALL_AT_ONCE, CANARY and LINEAR traffic shifting, bakes,
rollback on a CloudWatch alarm, AWS's refusals, and what DescribeEndpoint shows before, during and after."""

from __future__ import annotations

import itertools
import threading
import time
from typing import Any

import pytest
from accounts import ACCOUNT
from botocore.exceptions import ClientError
from leftovers import removed_after

from hfpipe import contract

pytestmark = pytest.mark.slow
_ids = itertools.count()
ROLE = f"arn:aws:iam::{ACCOUNT}:role/r"


class Fleets:
    """A ``fleets`` plug-in: records what the emulation does; ``broken`` configs answer as a dying worker
    (an exception outside Exception, as a tokenizer's Rust panic is) for requests with a long context."""

    def __init__(self, broken: tuple[str, ...] = (), hold: threading.Event | None = None) -> None:
        self.broken, self.hold = broken, hold
        self.started: list[str] = []
        self.stopped: list[str] = []
        self.served: list[tuple[str | None, Any]] = []

    def start_fleet(self, endpoint: str, config: str) -> None:
        self.started.append(config)
        if self.hold is not None:
            assert self.hold.wait(30)

    def invoke_fleet(self, endpoint: str, config: str | None, body: Any) -> Any:
        self.served.append((config, body))
        context = (body.get("inputs") or {}).get("context", "") if isinstance(body, dict) else ""
        if config in self.broken and len(context) > 120:
            raise _WorkerDied("index out of range in self")
        return {"answer": "a", "score": 1.0}

    def stop_fleet(self, endpoint: str, config: str) -> None:
        self.stopped.append(config)


class _WorkerDied(BaseException):
    pass


@pytest.fixture
def eng(fresh):
    fresh.fleets = Fleets()
    with removed_after(fresh):
        yield fresh
    fresh.fleets = None


def _model(sm: Any, name: str) -> None:
    sm.create_model(
        ModelName=name,
        ExecutionRoleArn=ROLE,
        PrimaryContainer={"Image": "x", "ModelDataUrl": f"s3://b/{name}.tar.gz"},
        Tags=[{"Key": contract.TAG_RECIPE, "Value": "tiny-qa"}],
    )


def _config(sm: Any, name: str, instances: int) -> str:
    _model(sm, f"{name}-m")
    sm.create_endpoint_config(
        EndpointConfigName=name,
        ProductionVariants=[
            {
                "VariantName": "AllTraffic",
                "ModelName": f"{name}-m",
                "InstanceType": "ml.m5.large",
                "InitialInstanceCount": instances,
            }
        ],
    )
    return name


def named_endpoint(engine: Any, instances: int = 3) -> tuple[str, str, str]:
    """A named endpoint InService on a first config, a second config, and the endpoint's 5xx alarm."""
    short = f"bg{next(_ids)}"
    name = contract.deployed_endpoint_name("dev", short)
    sm = engine.client("sagemaker")
    old, new = _config(sm, f"{name}-c1", instances), _config(sm, f"{name}-c2", instances)
    sm.create_endpoint(EndpointName=name, EndpointConfigName=old)
    alarm = contract.endpoint_alarm_name("dev", short, "5xx-errors")
    engine.client("cloudwatch").put_metric_alarm(
        AlarmName=alarm,
        Namespace="AWS/SageMaker",
        MetricName="Invocation5XXErrors",
        Statistic="Sum",
        Period=60,
        EvaluationPeriods=1,
        Threshold=1.0,
        ComparisonOperator="GreaterThanOrEqualToThreshold",
        TreatMissingData="notBreaching",
        Dimensions=[{"Name": "EndpointName", "Value": name}, {"Name": "VariantName", "Value": "AllTraffic"}],
    )
    return name, new, alarm


def policy(
    routing: dict[str, Any], bake: int = 600, alarm: str | None = None, **extra: Any
) -> dict[str, Any]:
    config: dict[str, Any] = {
        "BlueGreenUpdatePolicy": {
            "TrafficRoutingConfiguration": {"WaitIntervalInSeconds": 300, **routing},
            "TerminationWaitInSeconds": bake,
            **extra,
        }
    }
    if alarm:
        config["AutoRollbackConfiguration"] = {"Alarms": [{"AlarmName": alarm}]}
    return config


def describe(engine: Any, name: str) -> dict[str, Any]:
    desc = engine.client("sagemaker").describe_endpoint(EndpointName=name)
    desc.pop("ResponseMetadata")
    return desc


def update(engine: Any, name: str, config: str, deployment: dict[str, Any] | None = None) -> Any:
    kwargs = {"DeploymentConfig": deployment} if deployment else {}
    engine.client("sagemaker").update_endpoint(EndpointName=name, EndpointConfigName=config, **kwargs)
    return engine.guardrails.wait(name)


def test_all_at_once_shifts_once_bakes_and_terminates_the_old_fleet(eng):
    name, new, alarm = named_endpoint(eng)
    old = describe(eng, name)["EndpointConfigName"]
    deployment = policy({"Type": "ALL_AT_ONCE"}, bake=600, alarm=alarm)
    d = update(eng, name, new, deployment)
    assert d.outcome == "succeeded"
    assert d.log == [
        ("step 1/1 traffic", 1.0),
        ("step 1/1 baked 600 s", 1.0),
        ("old fleet terminated", 1.0),
    ]
    desc = describe(eng, name)
    assert (desc["EndpointStatus"], desc["EndpointConfigName"]) == ("InService", new)
    assert desc["LastDeploymentConfig"] == deployment
    assert "PendingDeploymentSummary" not in desc and "FailureReason" not in desc
    assert desc["ProductionVariants"][0]["CurrentInstanceCount"] == 3
    assert (eng.fleets.started, eng.fleets.stopped) == ([new], [old])
    # Stand-in traffic: the tiny-qa sample and fixture requests, all served by the new fleet.
    bodies = [body for config, body in eng.fleets.served if config == new]
    assert bodies[0] == {
        "inputs": {"question": "What does the pipeline deploy?", "context": bodies[0]["inputs"]["context"]}
    }
    assert len({b["inputs"]["context"] for b in bodies}) == 5
    assert eng.alarm_states(alarm) == {alarm: "OK"}
    kinds = {
        e["detail"]["EndpointStatus"]
        for e in eng.events
        if e["detail-type"].startswith("SageMaker Endpoint Deploy")
    }
    assert {"UPDATING", "IN_SERVICE"} <= kinds


def test_canary_shifts_the_canary_then_the_rest(eng):
    name, new, alarm = named_endpoint(eng, instances=4)
    canary = {"Type": "CANARY", "CanarySize": {"Type": "CAPACITY_PERCENT", "Value": 25}}
    d = update(eng, name, new, policy(canary, bake=60, alarm=alarm))
    assert d.outcome == "succeeded"
    assert [stage for stage, _ in d.log] == [
        "step 1/2 traffic",
        "step 1/2 baked 300 s",
        "step 2/2 traffic",
        "step 2/2 baked 60 s",
        "old fleet terminated",
    ]
    assert [share for _, share in d.log][:3] == [0.25, 0.25, 1.0]
    # While the canary carries a quarter of the traffic the old fleet serves its share of the stand-in requests.
    assert any(config != new for config, _ in eng.fleets.served)
    assert describe(eng, name)["EndpointConfigName"] == new


def test_linear_shifts_in_equal_steps_with_wait_intervals(eng):
    name, new, _ = named_endpoint(eng, instances=4)
    linear = {
        "Type": "LINEAR",
        "LinearStepSize": {"Type": "INSTANCE_COUNT", "Value": 1},
        "WaitIntervalInSeconds": 120,
    }
    d = update(eng, name, new, policy(linear, bake=0))
    assert d.outcome == "succeeded"
    assert [(stage, share) for stage, share in d.log if stage.endswith("traffic")] == [
        ("step 1/4 traffic", 0.25),
        ("step 2/4 traffic", 0.5),
        ("step 3/4 traffic", 0.75),
        ("step 4/4 traffic", 1.0),
    ]
    assert [stage for stage, _ in d.log if "baked" in stage] == [
        "step 1/4 baked 120 s",
        "step 2/4 baked 120 s",
        "step 3/4 baked 120 s",
        "step 4/4 baked 0 s",
    ]
    assert d.clock_s == 360


def test_no_deployment_config_is_all_at_once_without_a_bake(eng):
    name, new, _ = named_endpoint(eng)
    d = update(eng, name, new)
    assert d.log == [("step 1/1 traffic", 1.0), ("step 1/1 baked 0 s", 1.0), ("old fleet terminated", 1.0)]
    assert describe(eng, name)["EndpointConfigName"] == new
    assert "LastDeploymentConfig" not in describe(eng, name)


def test_an_alarm_in_the_bake_rolls_back_to_the_old_config(eng):
    name, new, alarm = named_endpoint(eng)
    old = describe(eng, name)["EndpointConfigName"]
    eng.fleets.broken = (new,)  # long contexts kill the new fleet's worker: 5XX
    deployment = policy({"Type": "ALL_AT_ONCE"}, bake=600, alarm=alarm, MaximumExecutionTimeoutInSeconds=3600)
    d = update(eng, name, new, deployment)
    assert d.outcome.startswith("rolled back: CloudWatch alarm(s) " + alarm)
    assert d.log == [("step 1/1 traffic", 1.0), ("rolled back", 0.0)]
    desc = describe(eng, name)
    assert (desc["EndpointStatus"], desc["EndpointConfigName"]) == ("InService", old)
    assert alarm in desc["FailureReason"] and "PendingDeploymentSummary" not in desc
    assert desc["LastDeploymentConfig"] == deployment  # what RetainDeploymentConfig reuses
    assert eng.fleets.stopped == [new] and old not in eng.fleets.stopped
    assert eng.alarm_states(alarm) == {alarm: "ALARM"}
    # All traffic is the old fleet's again: a real call is served by the endpoint's (old) config.
    eng.fleets.served.clear()
    runtime = _runtime()
    runtime.invoke_endpoint(EndpointName=name, Body=b'{"inputs": {"question": "q", "context": "c"}}')
    assert eng.fleets.served == [(None, {"inputs": {"question": "q", "context": "c"}})]


def test_a_fleet_that_does_not_start_rolls_back(eng):
    name, new, _ = named_endpoint(eng)

    def refuse(endpoint: str, config: str) -> None:
        raise RuntimeError("model.tar.gz has no code/inference.py")

    eng.fleets.start_fleet = refuse
    d = update(eng, name, new, policy({"Type": "ALL_AT_ONCE"}))
    assert d.log == [("rolled back", 0.0)]
    desc = describe(eng, name)
    assert desc["EndpointStatus"] == "InService" and desc["EndpointConfigName"] != new
    assert "no code/inference.py" in desc["FailureReason"]


def test_during_the_update_describe_shows_the_pending_fleet_and_a_second_update_is_refused(eng):
    name, new, alarm = named_endpoint(eng)
    old = describe(eng, name)["EndpointConfigName"]
    eng.fleets.hold = threading.Event()
    eng.client("sagemaker").update_endpoint(
        EndpointName=name,
        EndpointConfigName=new,
        DeploymentConfig=policy({"Type": "ALL_AT_ONCE"}, alarm=alarm),
    )
    try:
        desc = describe(eng, name)
        assert (desc["EndpointStatus"], desc["EndpointConfigName"]) == ("Updating", old)
        pending = desc["PendingDeploymentSummary"]
        assert pending["EndpointConfigName"] == new
        (variant,) = pending["ProductionVariants"]
        assert (variant["VariantName"], variant["CurrentInstanceCount"], variant["DesiredInstanceCount"]) == (
            "AllTraffic",
            0,
            3,
        )
        assert variant["VariantStatus"][0]["Status"] == "Creating"
        assert variant["VariantStatus"][0]["StatusMessage"] == "Launching 3 instance(s)."
        # `hfpipe endpoints` prices both fleets meanwhile: the old one's 3 and the 3 the new one launches.
        from datetime import UTC, datetime

        from hfpipe.cli.deploy import endpoints

        info = endpoints.describe(eng.client("sagemaker"), name, {}, datetime.now(UTC))
        assert [(p["source"], p["instance_type"], p["instance_count"]) for p in info.cost_periods] == [
            ("DescribeEndpoint", "ml.m5.large", 3),
            ("PendingDeploymentSummary", "ml.m5.large", 3),
        ]
        with pytest.raises(ClientError) as refused:
            eng.client("sagemaker").update_endpoint(EndpointName=name, EndpointConfigName=old)
        error = refused.value.response["Error"]
        assert error["Code"] == "ValidationException"
        assert error["Message"] == f'Cannot update in-progress endpoint "{desc["EndpointArn"]}".'
    finally:
        eng.fleets.hold.set()
    assert eng.guardrails.wait(name).outcome == "succeeded"


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"EndpointName": "nowhere"}, 'Could not find endpoint "arn:aws:sagemaker:'),
        (
            {"EndpointConfigName": "no-such-config"},
            'Could not find endpoint configuration "arn:aws:sagemaker:',
        ),
        (
            {
                "DeploymentConfig": policy(
                    {"Type": "CANARY", "CanarySize": {"Type": "INSTANCE_COUNT", "Value": 2}}
                )
            },
            "CanarySize: {'Type': 'INSTANCE_COUNT', 'Value': 2} is 2 of the new fleet's 3 instance(s); accepted: at most 50%",
        ),
        (
            {
                "DeploymentConfig": policy(
                    {"Type": "LINEAR", "LinearStepSize": {"Type": "CAPACITY_PERCENT", "Value": 5}}
                )
            },
            "LinearStepSize",
        ),
        ({"DeploymentConfig": policy({"Type": "LINEAR"})}, "LinearStepSize: required for Type LINEAR"),
        (
            {"DeploymentConfig": policy({"Type": "ALL_AT_ONCE", "WaitIntervalInSeconds": 5000})},
            "WaitIntervalInSeconds: 5000 is above the API's maximum 3600",
        ),
        (
            {"DeploymentConfig": policy({"Type": "ALL_AT_ONCE"}, alarm="no-such-alarm")},
            "'no-such-alarm' does not exist",
        ),
    ],
)
def test_refused_as_aws_refuses(eng, change, words):
    name, new, _ = named_endpoint(eng)
    request = {"EndpointName": name, "EndpointConfigName": new, **change}
    with pytest.raises(ClientError) as refused:
        eng.client("sagemaker").update_endpoint(**request)
    assert refused.value.response["Error"]["Code"] == "ValidationException"
    assert words in refused.value.response["Error"]["Message"]
    assert describe(eng, name)["EndpointStatus"] == "InService"


def test_time_scale_zero_makes_hours_of_waits_instant_and_the_timeout_bounds_them(eng):
    name, new, _ = named_endpoint(eng, instances=10)
    linear = {
        "Type": "LINEAR",
        "LinearStepSize": {"Type": "CAPACITY_PERCENT", "Value": 10},
        "WaitIntervalInSeconds": 3600,
    }
    started = time.monotonic()
    d = update(eng, name, new, policy(linear, bake=3600, MaximumExecutionTimeoutInSeconds=28800))
    assert time.monotonic() - started < 20
    assert (
        d.outcome
        == "rolled back: the deployment did not complete within MaximumExecutionTimeoutInSeconds (28800 s)"
    )
    assert d.clock_s == 28800 and describe(eng, name)["EndpointConfigName"] != new


def test_an_update_through_the_state_machine_integration(eng):
    """The optimized integration the Deploy state machine uses: an error is named as AWS names it."""
    import json

    name, new, alarm = named_endpoint(eng)
    definition = {
        "StartAt": "Update",
        "States": {
            "Update": {
                "Type": "Task",
                "Resource": "arn:aws:states:::sagemaker:updateEndpoint",
                "Parameters": {
                    "EndpointName.$": "$.name",
                    "EndpointConfigName.$": "$.config",
                    "DeploymentConfig.$": "$.deployment",
                },
                "End": True,
            }
        },
    }
    arn = eng.client("stepfunctions").create_state_machine(
        name=f"{name}-update", definition=json.dumps(definition), roleArn=ROLE
    )["stateMachineArn"]
    inp = {"name": name, "config": new, "deployment": policy({"Type": "ALL_AT_ONCE"}, alarm=alarm)}
    eng.fleets.hold = threading.Event()  # the update stays under way while the second execution runs
    try:
        first = eng.run(inp, name=f"{name}-1", state_machine_arn=arn)
        assert first.status == "SUCCEEDED", first.cause
        assert first.output["EndpointArn"].endswith(f"endpoint/{name}")
        second = eng.run(inp, name=f"{name}-2", state_machine_arn=arn)
    finally:
        eng.fleets.hold.set()
    assert (second.status, second.error) == ("FAILED", "SageMaker.AmazonSageMakerException")
    assert "Cannot update in-progress endpoint" in second.cause
    assert eng.guardrails.wait(name).outcome == "succeeded"


def _runtime() -> Any:
    from pipeline_lambdas import aws

    return aws.OVERRIDES["sagemaker-runtime"]


@pytest.mark.parametrize(
    ("routing", "words"),
    [
        # 10% of one instance is still one instance: all of the fleet, not at most half of it.
        (
            {"Type": "CANARY", "CanarySize": {"Type": "CAPACITY_PERCENT", "Value": 10}},
            "CanarySize: {'Type': 'CAPACITY_PERCENT', 'Value': 10} is 1 of the new fleet's 1 instance(s); "
            "accepted: at most 50% of the variant's total instance count",
        ),
        (
            {"Type": "LINEAR", "LinearStepSize": {"Type": "CAPACITY_PERCENT", "Value": 50}},
            "LinearStepSize: {'Type': 'CAPACITY_PERCENT', 'Value': 50} is 1 of the new fleet's 1 instance(s); "
            "accepted: 10% to 50%",
        ),
    ],
)
def test_a_one_instance_fleet_takes_neither_a_canary_nor_a_linear_step(eng, routing, words):
    name, new, _ = named_endpoint(eng, instances=1)
    with pytest.raises(ClientError) as refused:
        eng.client("sagemaker").update_endpoint(
            EndpointName=name, EndpointConfigName=new, DeploymentConfig=policy(routing)
        )
    assert refused.value.response["Error"]["Code"] == "ValidationException"
    assert words in refused.value.response["Error"]["Message"]
    assert describe(eng, name)["EndpointStatus"] == "InService"
    # All at once, with a bake, is what a one-instance fleet takes.
    assert update(eng, name, new, policy({"Type": "ALL_AT_ONCE"}, bake=600)).outcome == "succeeded"


def test_a_fleet_that_never_starts_is_rolled_back_at_the_execution_timeout(eng, monkeypatch):
    """AWS counts the new fleet's start against MaximumExecutionTimeoutInSeconds and rolls back when it is
    spent; here the fleet is held past it (time_scale 0: the timeout is the real floor, shortened)."""
    monkeypatch.setattr(eng.guardrails, "start_floor_s", 0.2)
    name, new, _ = named_endpoint(eng)
    old = describe(eng, name)["EndpointConfigName"]
    eng.fleets.hold = threading.Event()
    try:
        d = update(eng, name, new, policy({"Type": "ALL_AT_ONCE"}, MaximumExecutionTimeoutInSeconds=3600))
    finally:
        eng.fleets.hold.set()
    assert d.outcome == (
        f"rolled back: the new fleet ({new}) did not start within MaximumExecutionTimeoutInSeconds (3600 s)"
    )
    assert d.clock_s == 3600 and d.log == [("rolled back", 0.0)]
    desc = describe(eng, name)
    assert (desc["EndpointStatus"], desc["EndpointConfigName"]) == ("InService", old)
    assert "did not start within MaximumExecutionTimeoutInSeconds" in desc["FailureReason"]
    # The start that came up late is stopped.
    deadline = time.monotonic() + 10
    while eng.fleets.stopped.count(new) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert eng.fleets.stopped.count(new) >= 1 and old not in eng.fleets.stopped


def test_retain_all_variant_properties_keeps_the_live_instance_count(eng):
    """The deploy's way back for an autoscaled fleet: the previous config says 2, autoscaling made it 5."""
    from moto.backends import get_backend

    name, new, _ = named_endpoint(eng, instances=2)
    endpoint = get_backend("sagemaker")[ACCOUNT][eng.region].endpoints[name]
    for variant in endpoint.production_variants:
        variant["CurrentInstanceCount"] = 5
    eng.fleets.hold = threading.Event()
    eng.client("sagemaker").update_endpoint(
        EndpointName=name, EndpointConfigName=new, RetainAllVariantProperties=True
    )
    try:
        (variant,) = describe(eng, name)["PendingDeploymentSummary"]["ProductionVariants"]
        assert variant["DesiredInstanceCount"] == 5
    finally:
        eng.fleets.hold.set()
    assert eng.guardrails.wait(name).outcome == "succeeded"
    (served,) = describe(eng, name)["ProductionVariants"]
    assert (served["CurrentInstanceCount"], served["DesiredInstanceCount"]) == (5, 5)
