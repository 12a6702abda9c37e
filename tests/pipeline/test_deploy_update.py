"""The deploy's update path on the local engine, with UpdateEndpoint played by a test-only stand-in
(deploy_standin.py: status and config only) until local mode emulates blue/green updates: a successful update
is recorded with the version it replaced, an update SageMaker rolled back and a failed smoke test both leave the
old version serving and this execution's resources gone, and autoscaling is taken off before an instance type
change and put back after it, whichever way the deploy ends."""

from __future__ import annotations

import json

import pytest
from deploy_helpers import ENDPOINT, NAME, deploy, named, register, state_input, stored_record, tags, wiped
from deploy_standin import Update, stand_in_updates

from hfpipe import contract
from hfpipe.core.deploy import deploy_requests, deployments
from hfpipe.core.deploy.deployments import Autoscaling, EndpointSettings, Traffic


@pytest.fixture
def clean(fresh):
    yield from wiped(fresh)


pytestmark = pytest.mark.slow
SCALED = EndpointSettings(
    name=NAME,
    traffic=Traffic("ALL_AT_ONCE", None, 0),
    bake_seconds=0,
    autoscaling=Autoscaling(min_instances=1, max_instances=3, invocations_per_instance=50),
)


def first_deploy(engine, **register_args):
    version = register(engine, **register_args)
    _, r = deploy(engine, version)
    assert r.status == "SUCCEEDED", r.cause
    return version, r.output


def test_an_update_moves_the_endpoint_and_records_the_version_it_replaced(clean):
    first, before = first_deploy(clean)
    second = register(clean)
    with stand_in_updates(clean, Update(polls=2)) as play:
        name, r = deploy(clean, second)
    assert r.status == "SUCCEEDED", (r.error, r.cause)
    assert "UpdateEndpoint" in r.states and "CreateEndpoint" not in r.states
    assert r.states.count("DescribeEndpoint") == 2
    (sent,) = play.requests
    assert sent == state_input(r, "Record")["deploy"]["requests"]["UpdateEndpoint"]
    assert r.output["model_version_arn"] == second and r.output["execution"] == name
    assert (r.output["previous_version"], r.output["previous_endpoint_config"]) == (
        first,
        before["endpoint_config"],
    )
    assert stored_record(clean) == r.output
    endpoint = clean.client("sagemaker").describe_endpoint(EndpointName=ENDPOINT)
    assert endpoint["EndpointConfigName"] == r.output["endpoint_config"]
    assert tags(clean, endpoint["EndpointArn"])[contract.TAG_MODEL_VERSION] == second
    # The previous version's config and model stay (a way back by hand); nothing else is left.
    assert named(clean)["endpoint_configs"] == sorted(
        [before["endpoint_config"], r.output["endpoint_config"]]
    )


def test_an_update_sagemaker_rolled_back_fails_and_the_old_version_serves(clean):
    _, before = first_deploy(clean)
    with stand_in_updates(clean, Update(polls=1, outcome="rolled back")):
        _, r = deploy(clean, register(clean))
    assert (r.status, r.error) == ("FAILED", "DeploymentRolledBack"), r.cause
    assert r.cause == (
        f"endpoint {ENDPOINT} was rolled back to {before['endpoint_config']}: Alarm hfpipe-dev-summaries-5xx-errors "
        "went into ALARM during the deployment"
    )
    assert r.states[-4:] == [
        "DeploymentRolledBackReason?",
        "DeploymentRolledBackWithReason",
        "DeployCleanup",
        "DeployFailed",
    ]
    assert named(clean)["endpoint_configs"] == [before["endpoint_config"]]
    assert named(clean)["models"] == [before["model"]] and named(clean)["endpoints"] == [ENDPOINT]
    assert stored_record(clean) == before


def test_a_failed_smoke_test_after_an_update_puts_the_previous_config_back(clean):
    _, before = first_deploy(clean)
    clean.endpoint = lambda name, body: [{"generated_text": "not an answer"}]
    with stand_in_updates(clean, Update(polls=1), Update(polls=1)) as play:
        _, r = deploy(clean, register(clean))
    assert (r.status, r.error) == ("FAILED", "SmokeTestFailed"), r.cause
    assert r.states[r.states.index("SmokeTest") :][:4] == [
        "SmokeTest",
        "PutPreviousBack?",
        "PutPreviousConfigBack",
        "StartRollbackWait",
    ]
    assert r.states[-4:] == ["DescribeRolledBack", "RolledBack?", "DeployCleanup", "DeployFailed"]
    assert play.requests[1] == {
        "EndpointName": ENDPOINT,
        "EndpointConfigName": before["endpoint_config"],
        "RetainAllVariantProperties": False,
    }
    endpoint = clean.client("sagemaker").describe_endpoint(EndpointName=ENDPOINT)
    assert (endpoint["EndpointStatus"], endpoint["EndpointConfigName"]) == (
        "InService",
        before["endpoint_config"],
    )
    assert named(clean)["endpoint_configs"] == [before["endpoint_config"]] and stored_record(clean) == before


def scaling(engine):
    aas = engine.client("application-autoscaling")
    resource = deploy_requests.scaling_resource_id(ENDPOINT)
    targets = aas.describe_scalable_targets(ServiceNamespace="sagemaker", ResourceIds=[resource])[
        "ScalableTargets"
    ]
    policies = aas.describe_scaling_policies(ServiceNamespace="sagemaker", ResourceId=resource)[
        "ScalingPolicies"
    ]
    return [(t["MinCapacity"], t["MaxCapacity"]) for t in targets], [
        p["TargetTrackingScalingPolicyConfiguration"]["TargetValue"] for p in policies
    ]


@pytest.fixture
def scaled(clean, monkeypatch):
    """The named endpoint declared with autoscaling (the Prepare function's DEPLOY_ENDPOINTS)."""
    monkeypatch.setenv("DEPLOY_ENDPOINTS", deployments.settings_json((SCALED,)))
    yield clean
    aas = clean.client("application-autoscaling")
    if scaling(clean)[0]:
        aas.deregister_scalable_target(
            ServiceNamespace="sagemaker",
            ResourceId=deploy_requests.scaling_resource_id(ENDPOINT),
            ScalableDimension=deploy_requests.SCALING_DIMENSION,
        )


def test_record_applies_the_declared_autoscaling(scaled):
    first_deploy(scaled)
    assert scaling(scaled) == ([(1, 3)], [50.0])
    aas = scaled.client("application-autoscaling")
    (target,) = aas.describe_scalable_targets(
        ServiceNamespace="sagemaker", ResourceIds=[deploy_requests.scaling_resource_id(ENDPOINT)]
    )["ScalableTargets"]
    # Tagged for the environment: its grants allow writes only on targets so tagged.
    assert aas.list_tags_for_resource(ResourceARN=target["ScalableTargetARN"])["Tags"] == (
        deploy_requests.scaling_tags("dev")
    )


def test_an_instance_type_change_takes_autoscaling_off_and_puts_it_back(scaled):
    """AWS refuses an update that changes an autoscaled variant's instance type: Prepare deregisters first; a
    failed deploy's clean-up and a successful one's Record register it again."""
    first_deploy(scaled)
    sm = scaled.client("sagemaker")
    # Scaled out meanwhile: the new fleet starts as large as the old one is.
    from moto.backends import get_backend

    from hfpipe.local.engine.template import ACCOUNT

    backend = get_backend("sagemaker")[ACCOUNT][scaled.region]
    backend.endpoints[ENDPOINT].production_variants[0]["CurrentInstanceCount"] = 2
    bigger = register(scaled, types=["ml.m5.xlarge"])
    with stand_in_updates(scaled, Update(polls=1, outcome="rolled back")):
        _, r = deploy(scaled, bigger)
    assert r.error == "DeploymentRolledBack", r.cause
    prepared = state_input(r, "DeployFailed")["deploy"]
    assert prepared["scaling_deregistered"] is True and prepared["instance_count"] == 2
    assert state_input(r, "DeployFailed")["cleanup"]["autoscaling_restored"] == {
        "min_instances": 1,
        "max_instances": 3,
        "invocations_per_instance": 50,
    }
    assert scaling(scaled) == ([(1, 3)], [50.0])
    with stand_in_updates(scaled, Update(polls=1)):
        _, r = deploy(scaled, bigger)
    assert r.status == "SUCCEEDED", r.cause
    assert r.output["instance_type"] == "ml.m5.xlarge" and scaling(scaled) == ([(1, 3)], [50.0])
    config = sm.describe_endpoint_config(EndpointConfigName=r.output["endpoint_config"])
    assert config["ProductionVariants"][0]["InitialInstanceCount"] == 2
    assert json.loads(json.dumps(r.output))["previous_version"]


def test_a_way_back_that_ends_on_the_new_config_ends_with_an_error_naming_what_serves(clean):
    """The update back ends InService on the new config (SageMaker rolled it back): the deploy stops polling
    and fails with WayBackFailed, naming the version that serves, read from the endpoint (its config's
    model's package), not the one its tag and the record name."""
    _, before = first_deploy(clean)
    clean.endpoint = lambda name, body: [{"generated_text": "not an answer"}]
    second = register(clean)
    with stand_in_updates(clean, Update(polls=1), Update(polls=1, outcome="rolled back")):
        _, r = deploy(clean, second)
    assert (r.status, r.error) == ("FAILED", "WayBackFailed"), (r.error, r.cause)
    assert r.states.count("DescribeRolledBack") == 1
    assert r.states[-5:] == [
        "RolledBack?",
        "RollbackNotTaken",
        "WhatServesAfterWayBack",
        "DeployCleanup",
        "DeployFailed",
    ]
    new = state_input(r, "DeployFailed")["deploy"]["endpoint_config_name"]
    cause = json.loads(r.cause)["errorMessage"]
    assert f"ended the update back InService on config {new}" in cause
    assert f"serving tiny-qa/{second.rsplit('/', 1)[1]} (config {new}, model {new})" in cause
    assert f"still name tiny-qa/{before['version']}, which does not serve" in cause
    endpoint = clean.client("sagemaker").describe_endpoint(EndpointName=ENDPOINT)
    assert endpoint["EndpointConfigName"] == new and stored_record(clean) == before
    assert tags(clean, endpoint["EndpointArn"])[contract.TAG_MODEL_VERSION] == before["model_version_arn"]
