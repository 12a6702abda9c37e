"""Scale to zero for a shared base (hfpipe.core.adapters.scale_to_zero): cdk.json's ``shared_base.scale_to_zero``
(on for dev, off for prod), and each request's fields as AWS's "Scale an endpoint to zero instances" writes them,
validated against botocore's models of SageMaker, Application Auto Scaling and CloudWatch."""

from __future__ import annotations

import json
from pathlib import Path

import boto3
import botocore.session
import pytest
from botocore.stub import ANY, Stubber
from botocore.validate import validate_parameters

from hfpipe.core import cost, prices
from hfpipe.core.adapters import adapter_deploy, scale_to_zero
from hfpipe.core.adapters.scale_to_zero import ScaleToZero
from hfpipe.core.adapters.shared_base import SharedBase
from stacks.config import ConfigError, parse_environment

ROOT = Path(__file__).resolve().parents[2]
ENVIRONMENTS = json.loads((ROOT / "cdk.json").read_text())["context"]["hfpipe:environments"]
PATH = "hfpipe:environments.dev.shared_base.scale_to_zero"
ENTRY = {"base_model": "my-org/base-8b", "instance_type": "ml.g5.4xlarge", "max_adapters": 10}
COMPONENT = "hfpipe-dev-shared-base"


def shared(env: str, entry: dict) -> SharedBase | None:
    return parse_environment(env, {**ENVIRONMENTS[env], "shared_base": entry}).shared_base


def test_dev_scales_its_base_to_zero_and_prod_keeps_it_up():
    dev = parse_environment("dev", ENVIRONMENTS["dev"]).shared_base
    assert dev is not None and dev.scale_to_zero == ScaleToZero(enabled=True, idle_minutes=15)
    prod = parse_environment("prod", ENVIRONMENTS["prod"])
    assert prod.shared_base is None or not prod.shared_base.scale_to_zero.enabled
    # A shared base declared without the key (prod's, were it given one) stays up: off unless turned on.
    base = shared("prod", {**ENTRY, "instance_type": "ml.g5.12xlarge"})
    assert base is not None and base.scale_to_zero == ScaleToZero(enabled=False)
    (variant,) = adapter_deploy.base_requests(
        "prod", base, image="i", role_arn="arn:aws:iam::1:role/r", gpus=1, memory_mb=1024, tags=[]
    )["CreateEndpointConfig"]["ProductionVariants"]
    assert "ManagedInstanceScaling" not in variant
    # The entry the stack publishes (SSM shared-base) reads back the same, with or without the setting.
    on = shared("dev", {**ENTRY, "scale_to_zero": {"enabled": True, "idle_minutes": 30}})
    for one in (base, on):
        assert shared("dev", one.entry()) == one and SharedBase.from_json(one.to_json()) == one


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        (True, rf"^{PATH}: True is not accepted; accepted: an object with keys enabled, idle_minutes$"),
        ({"idle_minutes": 5}, rf"^{PATH}.enabled: None is not accepted; accepted: true or false"),
        ({"enabled": "yes"}, rf"^{PATH}.enabled: 'yes' is not accepted; accepted: true or false"),
        (
            {"enabled": True, "idle_minutes": 0},
            rf"^{PATH}.idle_minutes: 0 is not accepted; accepted: a whole",
        ),
        (
            {"enabled": True, "idle_minutes": 1441},
            rf"^{PATH}.idle_minutes: 1441 is not accepted; .* to 1440 ",
        ),
        ({"enabled": True, "idle_minutes": 2.5}, rf"^{PATH}.idle_minutes: 2.5 is not accepted"),
        ({"enabled": True, "idle": 5}, rf"^{PATH}.idle: unknown key; accepted: enabled, idle_minutes$"),
    ],
)
def test_a_bad_scale_to_zero_stops_synth_with_one_line_naming_the_key(setting, message):
    with pytest.raises(ConfigError, match=message) as caught:
        shared("dev", {**ENTRY, "scale_to_zero": setting})
    assert "\n" not in str(caught.value)


def test_the_variant_carries_managed_instance_scaling_down_to_zero_in_botocores_shape():
    base = SharedBase(
        "my-org/base-8b", "ml.g5.4xlarge", max_adapters=4, copies=2, scale_to_zero=ScaleToZero(True)
    )
    requests = adapter_deploy.base_requests(
        "dev", base, image="i", role_arn="arn:aws:iam::1:role/r", gpus=1, memory_mb=1024, tags=[]
    )
    model = botocore.session.get_session().get_service_model("sagemaker")
    validate_parameters(
        requests["CreateEndpointConfig"], model.operation_model("CreateEndpointConfig").input_shape
    )
    (variant,) = requests["CreateEndpointConfig"]["ProductionVariants"]
    assert variant["ManagedInstanceScaling"] == {
        "Status": "ENABLED",
        "MinInstanceCount": 0,
        "MaxInstanceCount": 2,
    }
    shape = model.shape_for("ProductionVariantManagedInstanceScaling").members
    assert "ENABLED" in shape["Status"].enum and shape["MinInstanceCount"].metadata["min"] == 0
    assert variant["RoutingConfig"] == {"RoutingStrategy": "LEAST_OUTSTANDING_REQUESTS"}


def test_the_scaling_requests_carry_each_field_of_awss_page_in_botocores_shapes():
    """Stubber checks every request against botocore's input shape before it answers."""
    autoscaling = boto3.client("application-autoscaling", region_name="us-east-1")
    metrics = boto3.client("cloudwatch", region_name="us-east-1")
    arn = "arn:aws:autoscaling:us-east-1:1:scalingPolicy:x:resource/sagemaker/inference-component/c:policyName/w"
    tags = {"hfpipe:managed-by": "hfpipe", "hfpipe:env": "dev"}
    requests = scale_to_zero.scaling_requests(COMPONENT, ScaleToZero(True, idle_minutes=20), 3, tags)
    target = {
        "ServiceNamespace": "sagemaker",
        "ResourceId": f"inference-component/{COMPONENT}",
        "ScalableDimension": "sagemaker:inference-component:DesiredCopyCount",
    }
    assert requests["RegisterScalableTarget"] == {**target, "MinCapacity": 0, "MaxCapacity": 3, "Tags": tags}
    tracking = requests["PutScalingPolicy:TargetTracking"]["TargetTrackingScalingPolicyConfiguration"]
    assert tracking["PredefinedMetricSpecification"] == {
        "PredefinedMetricType": "SageMakerInferenceComponentInvocationsPerCopy"
    }
    assert (tracking["TargetValue"], tracking["ScaleInCooldown"]) == (1.0, 1200)
    step = requests["PutScalingPolicy:StepScaling"]["StepScalingPolicyConfiguration"]
    assert step == {
        "AdjustmentType": "ChangeInCapacity",
        "MetricAggregationType": "Maximum",
        "Cooldown": 60,
        "StepAdjustments": [{"MetricIntervalLowerBound": 0.0, "ScalingAdjustment": 1}],
    }
    alarm = scale_to_zero.alarm_request(COMPONENT, arn)
    assert (alarm["Namespace"], alarm["MetricName"], alarm["Statistic"], alarm["Period"]) == (
        "AWS/SageMaker",
        "NoCapacityInvocationFailures",
        "Sum",
        60,
    )
    assert alarm["Dimensions"] == [{"Name": "InferenceComponentName", "Value": COMPONENT}]
    assert (alarm["Threshold"], alarm["ComparisonOperator"], alarm["AlarmActions"]) == (
        1.0,
        "GreaterThanOrEqualToThreshold",
        [arn],
    )
    with Stubber(autoscaling) as a, Stubber(metrics) as c:
        a.add_response("register_scalable_target", {}, requests["RegisterScalableTarget"])
        a.add_response(
            "put_scaling_policy", {"PolicyARN": arn + "t"}, requests["PutScalingPolicy:TargetTracking"]
        )
        a.add_response("put_scaling_policy", {"PolicyARN": arn}, requests["PutScalingPolicy:StepScaling"])
        c.add_response("put_metric_alarm", {}, alarm)
        name = scale_to_zero.apply_scaling(autoscaling, metrics, COMPONENT, ScaleToZero(True, 20), 3, tags)
        a.assert_no_pending_responses()
        c.assert_no_pending_responses()
    assert name == alarm["AlarmName"]
    with Stubber(autoscaling) as a, Stubber(metrics) as c:
        c.add_response("delete_alarms", {}, {"AlarmNames": [name]})
        a.add_client_error("deregister_scalable_target", "ObjectNotFoundException", expected_params=target)
        scale_to_zero.remove_scaling(autoscaling, metrics, COMPONENT)  # already gone: no error
        c.add_client_error("delete_alarms", "InternalServiceError", expected_params={"AlarmNames": ANY})
        with pytest.raises(Exception, match="InternalServiceError"):
            scale_to_zero.remove_scaling(autoscaling, metrics, COMPONENT)


def test_dev_idle_cost_per_day_before_and_after():
    """The closing figure: dev's shared base (1 x ml.g5.4xlarge) idle for a day, from the cost model."""
    dev = parse_environment("dev", ENVIRONMENTS["dev"]).shared_base
    assert dev is not None
    assert prices.price_per_hour(dev.instance_type) == 2.03 and dev.instances == 1
    before = scale_to_zero.idle_day_usd(dev.instance_type, dev.instances, ScaleToZero(enabled=False))
    assert before == cost.estimate_cost(dev.instance_type, 1, 24 * 3600) == 48.72
    after = [scale_to_zero.idle_day_usd(dev.instance_type, 1, dev.scale_to_zero, wakes=n) for n in (0, 1, 4)]
    # No call: 0; each call on a base at zero: the 300 s cold start and the 15 idle minutes after it.
    assert after == [0.0, 0.6767, 2.7067]
