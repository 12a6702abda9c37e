"""The guardrails' own rules at deploy time (Prepare called directly, on the session engine's moto): the traffic shifting the resolved
fleet can take, the endpoint-usage quota holding both fleets of a blue/green update, the way back keeping
an autoscaled fleet's live instance count, and an update's rollback alarms already in ALARM (waited for within
a bound, then refused). The same rules in cdk.json: tests/infra/test_endpoint_config.py."""

from __future__ import annotations

import contextlib
import itertools
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from accounts import ACCOUNT
from app_synth import state_machine_definition
from deploy_helpers import ENDPOINT, ENV, NAME, register_in, wiped

from hfpipe import contract
from hfpipe.core.deploy import deploy_limits, deployments
from hfpipe.core.deploy import deploy_requests as requests
from hfpipe.core.deploy.deploy_plan import alarm_wait_from_json
from hfpipe.core.deploy.deployments import Autoscaling, EndpointSettings, Traffic
from hfpipe.local.engine.quotas import QuotaTable

REGION = "eu-west-1"  # dev's (cdk.json), the session engine's
ROLE = f"arn:aws:iam::{ACCOUNT}:role/execution"
TYPE = "ml.m5.large"
_ids = itertools.count()


@pytest.fixture
def clients(fresh):
    """The session engine's moto clients, with no named endpoint, config, model, record or scalable target of
    NAME before and after the test (deploy_helpers.wiped)."""
    clients = {
        s: fresh.client(s) for s in ("sagemaker", "ssm", "application-autoscaling", "cloudwatch", "s3")
    }

    def deregister() -> None:
        scaling = clients["application-autoscaling"]
        # moto answers a missing target with ValidationException (AWS: ObjectNotFoundException).
        with contextlib.suppress(
            scaling.exceptions.ObjectNotFoundException, scaling.exceptions.ValidationException
        ):
            scaling.deregister_scalable_target(
                ServiceNamespace=requests.SCALING_NAMESPACE,
                ResourceId=requests.scaling_resource_id(ENDPOINT),
                ScalableDimension=requests.SCALING_DIMENSION,
            )

    deregister()
    for _ in wiped(fresh):
        yield clients
        deregister()


def quotas(value: float) -> Any:
    """Service Quotas answering ``value`` applied for every SageMaker quota."""
    return QuotaTable(lambda _name: value).client(REGION)


def serving(clients: dict[str, Any], instances: int, scaled_to: int | None = None) -> None:
    """The named endpoint, made by an earlier deploy, serving another version on ``instances``; with
    ``scaled_to`` a registered scalable target whose fleet autoscaling grew to that many."""
    sm = clients["sagemaker"]
    old = register_in(sm)
    config = f"{ENDPOINT}-v1-{next(_ids):08x}"
    tags = requests.deploy_tags(ENV, NAME, "tiny-qa", old, "deploy-0")
    sm.create_model(
        ModelName=config, ExecutionRoleArn=ROLE, Containers=[{"ModelPackageName": old}], Tags=tags
    )
    sm.create_endpoint_config(
        **requests.endpoint_config_request(config, config, TYPE, instances, tags, "hf-inference")
    )
    sm.create_endpoint(EndpointName=ENDPOINT, EndpointConfigName=config, Tags=tags)
    if scaled_to is not None:
        clients["application-autoscaling"].register_scalable_target(
            **requests.scalable_target_request(ENDPOINT, Autoscaling(1, 8, 100), ENV)
        )
        from moto.backends import get_backend

        endpoint = get_backend("sagemaker")[ACCOUNT][REGION].endpoints[ENDPOINT]
        for variant in endpoint.production_variants:
            variant["CurrentInstanceCount"] = scaled_to


def prepare(
    clients: dict[str, Any],
    settings: EndpointSettings,
    quota: float = 100.0,
    recipe: str = "tiny-qa",
    **kw: Any,
) -> dict[str, Any]:
    from pipeline_lambdas import deploy_prepare

    arn = register_in(clients["sagemaker"], recipe=recipe)
    if isinstance(kw.get("waiting"), dict):  # what PrepareAgain hands back: the previous look's alarm_wait
        kw["waiting"] = alarm_wait_from_json(kw["waiting"])
    return deploy_prepare.prepare(
        {"version": arn, "endpoint": NAME},
        f"deploy-{next(_ids)}",
        ENV,
        {NAME: settings},
        ROLE,
        {**clients, "service-quotas": quotas(quota)},
        **kw,
    ).to_json()


def test_an_update_refuses_canary_or_linear_on_a_fleet_of_one(clients):
    """Settings made before the rule (or a target capped at one instance): the fleet resolves to one instance,
    which SageMaker cannot shift as a canary or in linear steps; refused before anything is created."""
    from pipeline_lambdas import deploy_prepare

    serving(clients, instances=1)
    for traffic in (Traffic("CANARY", 10, 300), Traffic("LINEAR", 20, 300)):
        with pytest.raises(deploy_prepare.DeployRequestRefused) as refused:
            prepare(clients, EndpointSettings(name=NAME, instance_count=1, traffic=traffic))
        message = str(refused.value)
        assert message.startswith(f"endpoint {ENDPOINT}: the new fleet resolves to 1 instance(s)"), message
        assert f"{traffic.type} needs at least 2; accepted: ALL_AT_ONCE with a bake" in message
    configs = clients["sagemaker"].list_endpoint_configs(NameContains=ENDPOINT)["EndpointConfigs"]
    assert [c["EndpointConfigName"] for c in configs] == [
        clients["sagemaker"].describe_endpoint(EndpointName=ENDPOINT)["EndpointConfigName"]
    ]
    # All at once (the default for one instance) is accepted; a canary on two instances too.
    assert prepare(clients, EndpointSettings(name=NAME))["action"] == "update"
    two = EndpointSettings(name=NAME, instance_count=2, traffic=Traffic("CANARY", 50, 0))
    assert prepare(clients, two)["instance_count"] == 2


def test_the_endpoint_quota_must_hold_both_fleets_of_an_update(clients):
    from pipeline_lambdas import deploy_prepare

    serving(clients, instances=2)
    settings = EndpointSettings(name=NAME, instance_count=2, traffic=Traffic("CANARY", 50, 0))
    with pytest.raises(deploy_prepare.EndpointQuotaTooLow) as refused:
        prepare(clients, settings, quota=3)
    assert str(refused.value).startswith(
        f"quota '{TYPE} for endpoint usage': applied value 3 < needed 4; request an increase"
    )
    assert "the new fleet beside the old one (4 instance(s) of ml.m5.large)" in str(refused.value)
    assert prepare(clients, settings, quota=4)["action"] == "update"


def test_a_first_deploy_needs_the_quota_for_its_one_fleet(clients):
    from pipeline_lambdas import deploy_prepare

    settings = EndpointSettings(name=NAME, instance_count=2, traffic=Traffic("CANARY", 50, 0))
    with pytest.raises(deploy_prepare.EndpointQuotaTooLow) as refused:
        prepare(clients, settings, quota=1)
    assert "applied value 1 < needed 2" in str(refused.value)
    assert prepare(clients, settings, quota=2)["action"] == "create"


@contextlib.contextmanager
def running(clients: dict[str, Any], name: str, instances: int, model: bool = True) -> Any:
    """Endpoint ``name`` holding ``instances`` of TYPE (``model``: False, an inference-component endpoint as
    the shared base's: a variant naming no model), deleted afterwards."""
    sm = clients["sagemaker"]
    variant = {"VariantName": "AllTraffic", "InstanceType": TYPE, "InitialInstanceCount": instances}
    if model:
        sm.create_model(ModelName=name, ExecutionRoleArn=ROLE, PrimaryContainer={"Image": "image"})
        variant["ModelName"] = name
    sm.create_endpoint_config(EndpointConfigName=name, ProductionVariants=[variant], ExecutionRoleArn=ROLE)
    sm.create_endpoint(EndpointName=name, EndpointConfigName=name)
    try:
        yield
    finally:
        sm.delete_endpoint(EndpointName=name)
        sm.delete_endpoint_config(EndpointConfigName=name)
        if model:
            sm.delete_model(ModelName=name)


def test_the_endpoint_quota_counts_the_shared_base_and_the_other_named_endpoints(clients):
    """What the environment runs of the fleet's type counts (read from SageMaker): the shared base's instance
    and another named endpoint's beside a first deploy of one instance need 3; a quota of 2 is refused."""
    from pipeline_lambdas import deploy_prepare

    base = contract.deployed_endpoint_name(ENV, contract.SHARED_BASE)
    other = contract.deployed_endpoint_name(ENV, "other")
    settings = EndpointSettings(name=NAME)
    declared = {NAME: settings, "other": EndpointSettings(name="other")}

    def first_deploy(quota: float) -> Any:
        return deploy_prepare.prepare(
            {"version": register_in(clients["sagemaker"]), "endpoint": NAME},
            f"deploy-{next(_ids)}",
            ENV,
            declared,
            ROLE,
            {**clients, "service-quotas": quotas(quota)},
        )

    with running(clients, base, 1, model=False), running(clients, other, 1):
        assert deploy_prepare.running_of_type(clients["sagemaker"], (other, base), TYPE) == {
            other: 1,
            base: 1,
        }
        assert deploy_prepare.running_of_type(clients["sagemaker"], (other, base), "ml.g5.4xlarge") == {}
        with pytest.raises(deploy_prepare.EndpointQuotaTooLow) as refused:
            first_deploy(2)
        assert str(refused.value).startswith(
            f"quota '{TYPE} for endpoint usage': applied value 2 < needed 3; request an increase"
        )
        assert (
            f"the new fleet (1 instance(s) of {TYPE}), {other} 1 beside it, {base} 1 beside it must fit"
            in str(refused.value)
        )
        assert first_deploy(3).action == "create"


def test_the_way_back_keeps_an_autoscaled_fleets_live_count(clients):
    """Autoscaling grew the fleet to 5: the new fleet starts with 5, and the way back after a failed smoke test
    keeps the live count (RetainAllVariantProperties) instead of the previous config's initial 2."""
    serving(clients, instances=2, scaled_to=5)
    scaled = Autoscaling(min_instances=2, max_instances=8, invocations_per_instance=100)
    prepared = prepare(clients, EndpointSettings(name=NAME, instance_count=2, autoscaling=scaled))
    assert prepared["instance_count"] == 5
    assert prepared["requests"]["Rollback"] == {
        "EndpointName": ENDPOINT,
        "EndpointConfigName": prepared["previous"]["endpoint_config_name"],
        "RetainAllVariantProperties": True,
    }


def test_the_way_back_of_a_fixed_fleet_is_the_previous_config_as_it_was(clients):
    serving(clients, instances=1)
    prepared = prepare(clients, EndpointSettings(name=NAME))
    assert prepared["requests"]["Rollback"]["RetainAllVariantProperties"] is False


def test_the_definition_sends_the_way_backs_retention(template):
    states = state_machine_definition(template, contract.deploy_state_machine_name(ENV))["States"]
    # DeployCleanup's function sends the plan's Rollback request as built, RetainAllVariantProperties included
    # (deploy_way_back.put_back; test_deploy_update.py checks the request sent).
    assert states["PutPreviousConfigBack"]["Parameters"] == {"way_back.$": "$.deploy"}
    retries = {
        e: r["MaxAttempts"] for r in states["PutPreviousConfigBack"]["Retry"] for e in r["ErrorEquals"]
    }
    assert (
        retries["EndpointNotReadyForWayBack"],
        retries["WayBackThrottled"],
        retries["WayBackCapacity"],
    ) == (
        30,
        6,
        5,
    )
    assert any("QuotaLookupThrottled" in r["ErrorEquals"] for r in states["Prepare"]["Retry"])


def test_a_vllm_versions_endpoint_config_carries_the_kinds_host_image(clients):
    """The deploy writes the serving kind's InferenceAmiVersion, as the pipeline does (test_host_image.py)."""
    from hfpipe import kinds

    prepared = prepare(clients, EndpointSettings(name=NAME), recipe="bloomz-7b1-lora-samsum")
    (variant,) = prepared["requests"]["CreateEndpointConfig"]["ProductionVariants"]
    assert variant["InferenceAmiVersion"] == kinds.serving_kind("vllm").inference_ami_version is not None
    (variant,) = prepare(clients, EndpointSettings(name=NAME))["requests"]["CreateEndpointConfig"][
        "ProductionVariants"
    ]
    assert "InferenceAmiVersion" not in variant


def test_the_deploy_tags_every_scalable_target_it_registers_or_finds(clients):
    """The environment's grants allow autoscaling writes only on its tagged targets (stacks/functions/common.py,
    grant_endpoint_scaling): a target is registered with the tags, and one registered before targets were tagged
    (no Tags) is tagged before it is updated or deregistered (AWS applies RegisterScalableTarget's Tags at
    creation only; the emulation plays that, hfpipe.local.engine.moto_patches)."""
    from pipeline_lambdas import deploy_common

    aas = clients["application-autoscaling"]

    def tags() -> dict[str, str]:
        (target,) = aas.describe_scalable_targets(
            ServiceNamespace=requests.SCALING_NAMESPACE, ResourceIds=[requests.scaling_resource_id(ENDPOINT)]
        )["ScalableTargets"]
        return dict(aas.list_tags_for_resource(ResourceARN=target["ScalableTargetARN"])["Tags"])

    ours = {contract.TAG_MANAGED_BY: contract.PROJECT, contract.TAG_ENV: ENV}
    assert deploy_common.apply_scaling(aas, ENDPOINT, Autoscaling(1, 4, 20), ENV)
    assert tags() == ours
    assert deploy_common.remove_scaling(aas, ENDPOINT, ENV) is True
    legacy = requests.scalable_target_request(ENDPOINT, Autoscaling(1, 2, 10), ENV)
    aas.register_scalable_target(**{k: v for k, v in legacy.items() if k != "Tags"})
    assert tags() == {}
    deploy_common.apply_scaling(aas, ENDPOINT, Autoscaling(1, 4, 20), ENV)
    assert tags() == ours
    aas.register_scalable_target(
        **{**legacy, "Tags": {contract.TAG_ENV: "prod"}}
    )  # an update: Tags not applied
    assert tags() == ours
    with pytest.raises(aas.exceptions.ResourceNotFoundException):
        aas.tag_resource(
            ResourceARN=f"arn:aws:application-autoscaling:{REGION}:{ACCOUNT}:scalable-target/x", Tags={}
        )
    assert deploy_common.remove_scaling(aas, ENDPOINT, ENV) is True
    assert deploy_common.remove_scaling(aas, ENDPOINT, ENV) is False


# --- an update whose rollback alarms are in ALARM before it begins ----------------------------------------

ALARMS = [spec.name for spec in deployments.alarm_specs(ENV, EndpointSettings(name=NAME))]
ALARM_4XX = contract.endpoint_alarm_name(ENV, NAME, "4xx-errors")


@contextlib.contextmanager
def cloudwatch_answers(clients: dict[str, Any], *states: dict[str, str] | str) -> Any:
    """``clients["cloudwatch"]`` answering each DescribeAlarms in turn, as CloudWatch does (AlarmNames asked,
    the alarms' StateValue; API reference: DescribeAlarms): a dict of states by name (others OK), or an error
    code. Stubbed: the session's moto alarms are the other tests' too."""
    import boto3
    from botocore.stub import Stubber

    client = boto3.client("cloudwatch", region_name=REGION)
    with Stubber(client) as stub:
        for state in states:
            if isinstance(state, str):
                stub.add_client_error("describe_alarms", service_error_code=state, http_status_code=400)
                continue
            alarms = [
                {"AlarmName": n, "StateValue": state.get(n, "OK"), "Period": 60, "EvaluationPeriods": 1}
                for n in ALARMS
            ]
            stub.add_response("describe_alarms", {"MetricAlarms": alarms}, {"AlarmNames": ALARMS})
        yield {**clients, "cloudwatch": client}
        stub.assert_no_pending_responses()


def test_an_update_waits_while_a_rollback_alarm_is_in_alarm_then_goes_on(clients):
    """SageMaker would roll an update back at once for errors that came before it: Prepare waits, writing
    nothing, and looks again after the wait (issue #34: the lifecycle walk-through's last deploy came within the alarm's
    minute after a rollback and was rolled back by it)."""
    serving(clients, instances=1)
    settings = EndpointSettings(name=NAME)
    began = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
    with cloudwatch_answers(clients, {ALARM_4XX: "ALARM"}, {ALARM_4XX: "ALARM"}, {}) as looks:
        first = prepare(looks, settings, now=began)
        assert (first["action"], first["alarm_wait"]["alarms"]) == ("wait", [ALARM_4XX])
        assert first["alarm_wait"]["poll_seconds"] == deploy_limits.ALARM_POLL_SECONDS
        assert first["input"]["endpoint"] == NAME
        assert set(first["requests"].values()) == {None}  # nothing to send yet
        later = began + timedelta(seconds=60)
        second = prepare(looks, settings, waiting=first["alarm_wait"], now=later)
        assert second["alarm_wait"] == {**first["alarm_wait"], "polls": 2, "waited_seconds": 60}
        ok = prepare(looks, settings, waiting=second["alarm_wait"], now=later + timedelta(seconds=60))
    assert ok["action"] == "update" and ok["requests"]["UpdateEndpoint"]["EndpointName"] == ENDPOINT
    assert ok["waited_for_alarms"]["alarms"] == [ALARM_4XX]
    # Nothing was written while it waited: the endpoint's config is the only one.
    configs = clients["sagemaker"].list_endpoint_configs(NameContains=ENDPOINT)["EndpointConfigs"]
    assert len(configs) == 1


def test_an_alarm_still_in_alarm_at_the_bound_refuses_the_deploy_naming_it(clients):
    from pipeline_lambdas import deploy_guards

    serving(clients, instances=1)
    began = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
    waiting = {
        "since": began.isoformat(),
        "polls": 5,
        "alarms": [ALARM_4XX],
        "waited_seconds": 240,
        "wait_seconds": deploy_limits.ALARM_WAIT_SECONDS,
        "poll_seconds": deploy_limits.ALARM_POLL_SECONDS,
    }
    bound = began + timedelta(seconds=deploy_limits.ALARM_WAIT_SECONDS)
    with (
        cloudwatch_answers(clients, {ALARM_4XX: "ALARM"}) as looks,
        pytest.raises(deploy_guards.RollbackAlarmInAlarm) as refused,
    ):
        prepare(looks, EndpointSettings(name=NAME), waiting=waiting, now=bound)
    message = str(refused.value)
    assert "\n" not in message
    assert message.startswith(
        f"rollback alarm(s) {ALARM_4XX} of endpoint {ENDPOINT} were in ALARM before this deploy began "
        f"({began.isoformat()}) and still are after {deploy_limits.ALARM_WAIT_SECONDS} s of waiting"
    ), message
    assert "nothing was changed: deploy again once they are OK" in message
    assert f"aws cloudwatch describe-alarms --alarm-names {ALARM_4XX}" in message


def test_cloudwatch_throttling_the_alarms_look_is_an_error_the_state_machine_retries(clients, template):

    from pipeline_lambdas import deploy_guards

    serving(clients, instances=1)
    with (
        cloudwatch_answers(clients, "Throttling") as looks,
        pytest.raises(deploy_guards.AlarmLookupThrottled) as throttled,
    ):
        prepare(looks, EndpointSettings(name=NAME))
    assert str(throttled.value).startswith("CloudWatch throttled DescribeAlarms for the rollback alarms ")
    states = state_machine_definition(template, contract.deploy_state_machine_name(ENV))["States"]
    for state in ("Prepare", "PrepareAgain"):
        assert any("AlarmLookupThrottled" in r["ErrorEquals"] for r in states[state]["Retry"]), state


def test_an_endpoint_being_updated_counts_both_fleets_of_the_type():
    """DescribeEndpoint's live variants (their type from the config) and, during an update, its
    PendingDeploymentSummary's variants (their own InstanceType) both hold instances."""
    from hfpipe.core.deploy.fleets import instances_of_type

    config = {"ProductionVariants": [{"VariantName": "AllTraffic", "InstanceType": TYPE}]}
    endpoint = {
        "ProductionVariants": [{"VariantName": "AllTraffic", "CurrentInstanceCount": 2}],
        "PendingDeploymentSummary": {
            "ProductionVariants": [
                {"VariantName": "AllTraffic", "InstanceType": TYPE, "CurrentInstanceCount": 1}
            ]
        },
    }
    assert instances_of_type(endpoint, config, TYPE) == 3
    assert instances_of_type(endpoint, config, "ml.g5.4xlarge") == 0
    assert instances_of_type(None, None, TYPE) == 0
