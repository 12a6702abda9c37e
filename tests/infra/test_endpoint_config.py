"""cdk.json's named endpoints (``endpoints``): defaults, SageMaker's limits, and the exact messages a bad entry
stops synth with (hfpipe.core.deploy.deployments, through stacks/config.py)."""

from __future__ import annotations

import pytest

from hfpipe.core.deploy import deployments, fleets
from hfpipe.core.deploy.deployments import Alarms, Autoscaling, EndpointSettings, Traffic
from stacks.config import ConfigError, parse_environment

DEV = {"region": "eu-west-1"}
PATH = "hfpipe:environments.dev.endpoints"


def endpoints(entry):
    return parse_environment("dev", {**DEV, "endpoints": entry}).endpoints


def test_none_by_default_and_a_platform_teams_defaults():
    assert parse_environment("dev", DEV).endpoints == ()
    (summaries,) = endpoints({"summaries": {}})
    # One instance: all at once with a bake (SageMaker cannot run a canary or linear steps on it).
    assert summaries == EndpointSettings(
        name="summaries",
        instance_count=1,
        traffic=Traffic(type="ALL_AT_ONCE", step_percent=None, wait_seconds=0),
        bake_seconds=600,
        alarms=Alarms(max_5xx_errors=1, max_4xx_errors=1, max_model_latency_ms=10_000),
        autoscaling=None,
    )
    assert summaries.endpoint_name("dev") == "hfpipe-dev-summaries"
    assert EndpointSettings.from_json(summaries.to_json()) == summaries
    # Two instances or more: a 10% canary for 300 s.
    (pair,) = endpoints({"pair": {"instance_count": 2}})
    assert pair.traffic == Traffic(type="CANARY", step_percent=10, wait_seconds=300)


def test_traffic_types_their_defaults_and_deployment_config():
    a, b, c = endpoints(
        {
            "a": {"traffic": {"type": "ALL_AT_ONCE"}, "bake_seconds": 0},
            "b": {"instance_count": 5, "traffic": {"type": "LINEAR"}},
            "c": {
                "instance_count": 2,
                "traffic": {"type": "CANARY", "step_percent": 50, "wait_seconds": 0},
                "bake_seconds": 3600,
            },
        }
    )
    assert a.traffic == Traffic("ALL_AT_ONCE", None, 0) and b.traffic == Traffic("LINEAR", 20, 300)
    assert deployments.traffic_routing(a.traffic) == {"Type": "ALL_AT_ONCE", "WaitIntervalInSeconds": 0}
    assert deployments.traffic_routing(b.traffic)["LinearStepSize"] == {
        "Type": "CAPACITY_PERCENT",
        "Value": 20,
    }
    config = deployments.deployment_config("dev", c)
    assert config == {
        "BlueGreenUpdatePolicy": {
            "TrafficRoutingConfiguration": {
                "Type": "CANARY",
                "WaitIntervalInSeconds": 0,
                "CanarySize": {"Type": "CAPACITY_PERCENT", "Value": 50},
            },
            "TerminationWaitInSeconds": 3600,
            # The new fleet's start (3,600 s) + the canary's wait + the bake time.
            "MaximumExecutionTimeoutInSeconds": 7200,
        },
        "AutoRollbackConfiguration": {
            "Alarms": [
                {"AlarmName": "hfpipe-dev-c-5xx-errors"},
                {"AlarmName": "hfpipe-dev-c-4xx-errors"},
                {"AlarmName": "hfpipe-dev-c-model-latency"},
            ]
        },
    }
    # Never below SageMaker's minimum of 600 s, never above its 28,800 s.
    assert all(
        deployments.MIN_DEPLOYMENT_SECONDS <= e.deployment_seconds <= deployments.MAX_DEPLOYMENT_SECONDS
        for e in (a, b, c)
    )


def test_autoscaling_bounds_follow_instance_count():
    (e,) = endpoints(
        {"e": {"instance_count": 2, "autoscaling": {"max_instances": 4, "invocations_per_instance": 70}}}
    )
    assert e.autoscaling == Autoscaling(min_instances=2, max_instances=4, invocations_per_instance=70)


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ([], f"{PATH}: [] is not accepted; accepted: an object {{NAME: settings}}, e.g. "),
        (
            {"Summaries": {}},
            f"{PATH}: 'Summaries' is not accepted; accepted: endpoint names of lower-case letters, digits and '-' "
            "(not first or last), so that the SageMaker endpoint hfpipe-dev-NAME has at most 63 characters",
        ),
        ({"x" * 53: {}}, f"{PATH}: '{'x' * 53}' is not accepted; accepted: endpoint names of"),
        ({"s": {"size": 1}}, f"{PATH}.s.size: unknown key; accepted: alarms, autoscaling, bake_seconds,"),
        (
            {"s": {"instance_count": 0}},
            f"{PATH}.s.instance_count: 0 is not accepted; accepted: a whole number",
        ),
        (
            {"s": {"traffic": {"type": "BLUE"}}},
            f"{PATH}.s.traffic.type: 'BLUE' is not accepted; accepted: \"ALL",
        ),
        (
            # SageMaker sizes a canary and a linear step in the fleet's instances: one instance takes neither.
            {"s": {"traffic": {"type": "CANARY"}}},
            f"{PATH}.s.traffic.type: 'CANARY' is not accepted with instance_count 1: CANARY traffic shifting on "
            "a fleet of 1 instance(s): SageMaker sizes a canary as at most 50% and a linear step as 10-50% of the "
            "fleet's instances, and a step is at least one instance, so CANARY needs at least 2; accepted: "
            "ALL_AT_ONCE with a bake (bake_seconds) for this fleet, or at least 2 instances",
        ),
        (
            {"s": {"instance_count": 1, "traffic": {"type": "LINEAR", "step_percent": 50}}},
            f"{PATH}.s.traffic.type: 'LINEAR' is not accepted with instance_count 1: LINEAR traffic shifting",
        ),
        (
            {"s": {"instance_count": 2, "traffic": {"type": "CANARY", "step_percent": 60}}},
            f"{PATH}.s.traffic.step_percent: 60 is not accepted; accepted: for CANARY a whole percent from 1 to 50",
        ),
        (
            {"s": {"instance_count": 2, "traffic": {"type": "LINEAR", "step_percent": 5}}},
            f"{PATH}.s.traffic.step_percent: 5 is not accepted; accepted: for CANARY",
        ),
        (
            {"s": {"traffic": {"type": "ALL_AT_ONCE", "step_percent": 10}}},
            f"{PATH}.s.traffic.step_percent: 10 is not accepted; accepted: no step_percent with ALL_AT_ONCE",
        ),
        ({"s": {"traffic": {"wait_seconds": 3601}}}, f"{PATH}.s.traffic.wait_seconds: 3601 is not accepted"),
        ({"s": {"bake_seconds": -1}}, f"{PATH}.s.bake_seconds: -1 is not accepted; accepted: a whole number"),
        ({"s": {"alarms": {"max_5xx_errors": 0}}}, f"{PATH}.s.alarms.max_5xx_errors: 0 is not accepted"),
        (
            {"s": {"alarms": {"max_model_latency_ms": 60001}}},
            f"{PATH}.s.alarms.max_model_latency_ms: 60001 is not accepted",
        ),
        (
            {"s": {"autoscaling": {"max_instances": 2}}},
            f"{PATH}.s.autoscaling.invocations_per_instance: required; accepted: a whole number >= 1",
        ),
        (
            {"s": {"instance_count": 3, "autoscaling": {"max_instances": 2, "invocations_per_instance": 5}}},
            f"{PATH}.s.autoscaling.max_instances: 2 is not accepted; accepted: a whole number from instance_count "
            "to 100 (required) (instance_count is 3)",
        ),
        (
            # Ten waits of 3,600 s cannot fit SageMaker's 28,800 s deployment limit.
            {
                "s": {
                    "instance_count": 10,
                    "traffic": {"type": "LINEAR", "step_percent": 10, "wait_seconds": 3600},
                }
            },
            f"{PATH}.s.traffic: 10 wait(s) of 3600 s + bake_seconds 600 + 3600 s for the new fleet to start = "
            "40200 s; accepted: at most 28800 s in all",
        ),
    ],
)
def test_malformed_endpoints_name_the_key_and_what_is_accepted(entry, message):
    with pytest.raises(ConfigError) as raised:
        endpoints(entry)
    assert str(raised.value).startswith(message), str(raised.value)


def test_cdk_json_declares_summaries_and_classifier_in_dev_and_prod(synthesized):
    dev, prod = (synthesized.environments[e].endpoints for e in ("dev", "prod"))
    assert [e.name for e in dev] == [e.name for e in prod] == ["classifier", "summaries"]  # sorted by name
    assert all(e.traffic.type == "ALL_AT_ONCE" for e in dev)
    # Prod's one-instance fleets: all at once, then a bake with the alarms watching.
    assert all(e.traffic.type == "ALL_AT_ONCE" and e.bake_seconds > 0 for e in prod)


def test_cdk_jsons_deploys_would_be_accepted_by_aws(synthesized):
    """Every named endpoint's traffic shifting fits its fleet, and every endpoint-usage quota holds both fleets
    of an update of the largest one beside every other named endpoint and the shared base of its type."""
    for env in synthesized.environments.values():
        for e in env.endpoints:
            assert fleets.shifting_problem(e.traffic.type, e.instance_count) is None, (env.name, e)
        fleet_sum = sum(e.largest_fleet for e in env.endpoints)
        for quota in env.quotas:
            if quota.name.endswith(" for endpoint usage"):
                assert quota.value >= 2 * max(e.largest_fleet for e in env.endpoints), (env.name, quota)
                base = env.shared_base
                held = base.instances if base and quota.name.startswith(f"{base.instance_type} ") else 0
                assert quota.value >= held + fleet_sum + max(e.largest_fleet for e in env.endpoints)
    # dev's figures: the base holds one ml.g5.4xlarge, summaries and classifier one each, an update one more.
    dev = {q.name: q.value for q in synthesized.environments["dev"].quotas}
    assert dev["ml.g5.4xlarge for endpoint usage"] == 4


def test_endpoint_quotas_count_the_shared_base():
    """dev's figures: the shared base holds one ml.g5.4xlarge, and a blue/green update of a named endpoint on
    ml.g5.4xlarge needs two more (its old fleet and its new one) beside it: a quota of 2 cannot hold them."""
    base = {"base_model": "my-org/base-8b", "instance_type": "ml.g5.4xlarge", "max_adapters": 2}
    quota = [{"name": "ml.g5.4xlarge for endpoint usage", "value": 2}]
    with pytest.raises(ConfigError) as raised:
        parse_environment("dev", {**DEV, "shared_base": base, "endpoints": {"s": {}}, "quotas": quota})
    assert str(raised.value) == (
        "hfpipe:environments.dev.quotas[0].value: 2 is not accepted for 'ml.g5.4xlarge for endpoint usage'; "
        "accepted: at least 3: the shared base's 1 (shared_base.copies), the named endpoints' fleets (s 1; "
        "instance_count, or autoscaling.max_instances), a blue/green update's new fleet beside them (1, "
        "endpoint 's'), all of ml.g5.4xlarge at once"
    )
    three = [dict(quota[0], value=3)]
    assert parse_environment("dev", {**DEV, "shared_base": base, "endpoints": {"s": {}}, "quotas": three})
    # The base alone: its copies, one instance each.
    copies = [dict(quota[0], value=1)]
    with pytest.raises(
        ConfigError, match=r"accepted: at least 2: the shared base's 2 \(shared_base\.copies\)"
    ):
        parse_environment("dev", {**DEV, "shared_base": {**base, "copies": 2}, "quotas": copies})
    # A base of another type counts nothing against this quota.
    other = {**base, "instance_type": "ml.g5.12xlarge"}
    assert parse_environment("dev", {**DEV, "shared_base": other, "endpoints": {"s": {}}, "quotas": quota})


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        (
            {"endpoints": {"s": {}}, "quotas": [{"name": "ml.g5.xlarge for endpoint usage", "value": 1}]},
            "hfpipe:environments.dev.quotas[0].value: 1 is not accepted for 'ml.g5.xlarge for endpoint usage'; "
            "accepted: at least 2: the named endpoints' fleets (s 1; instance_count, or "
            "autoscaling.max_instances), a blue/green update's new fleet beside them (1, endpoint 's'), all of "
            "ml.g5.xlarge at once",
        ),
        (
            {
                "endpoints": {
                    "a": {},
                    "b": {
                        "instance_count": 2,
                        "autoscaling": {"max_instances": 3, "invocations_per_instance": 10},
                    },
                },
                "quotas": [
                    {"name": "ml.g5.xlarge for training job usage", "value": 1},
                    {"name": "ml.m5.large for endpoint usage", "value": 5},
                ],
            },
            "hfpipe:environments.dev.quotas[1].value: 5 is not accepted for 'ml.m5.large for endpoint usage'; "
            "accepted: at least 7: the named endpoints' fleets (a 1, b 3; instance_count, or "
            "autoscaling.max_instances), a blue/green update's new fleet beside them (3, endpoint 'b')",
        ),
    ],
)
def test_endpoint_quotas_must_hold_both_fleets_of_an_update(entry, message):
    with pytest.raises(ConfigError) as raised:
        parse_environment("dev", {**DEV, **entry})
    assert str(raised.value).startswith(message), str(raised.value)
    ok = dict(entry, quotas=[dict(q, value=7) for q in entry["quotas"]])
    assert parse_environment("dev", {**DEV, **ok}).endpoints


def test_a_deploys_resource_names_are_unique_per_execution_and_fit_sagemaker():
    from hfpipe.core.deploy.deploy_requests import resource_name

    env, name = "e" * 16, "n" * 39  # the longest environment and endpoint names accepted
    (settings,) = parse_environment(env, {**DEV, "endpoints": {name: {}}}).endpoints
    endpoint = settings.endpoint_name(env)
    assert len(endpoint) == 63
    names = {resource_name(endpoint, 12345, f"deploy-{i}") for i in range(50)}
    assert len(names) == 50 and all(len(n) <= 63 and n.startswith("hfpipe-") for n in names)
    assert resource_name("hfpipe-dev-summaries", 3, "x") == resource_name("hfpipe-dev-summaries", 3, "x")
