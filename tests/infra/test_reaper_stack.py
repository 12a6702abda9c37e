"""The reaper in each environment's PipelineStack (stacks/functions/reaper.py): its hourly schedule, its function
and a role that reads unscoped only what AWS cannot scope and deletes only what carries the environment's tags
(docs/deploy.md, "Time to live"). From the session's synthesis (tests/conftest.py ``synthesized``)."""

from __future__ import annotations

from typing import Any

import pytest
from iam_reference import check_template


def _reaper(template: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    (found,) = [
        (k, r)
        for k, r in template["Resources"].items()
        if r["Type"] == "AWS::Lambda::Function" and r["Properties"]["Handler"].endswith("reaper.handler")
    ]
    return found


def _statements(template: dict[str, Any], role: str) -> list[dict[str, Any]]:
    return [
        s
        for r in template["Resources"].values()
        if r["Type"] == "AWS::IAM::Policy" and {"Ref": role} in r["Properties"]["Roles"]
        for s in r["Properties"]["PolicyDocument"]["Statement"]
    ]


def _actions(statement: dict[str, Any]) -> set[str]:
    value = statement["Action"]
    return {value} if isinstance(value, str) else set(value)


def _text(value: Any) -> str:
    return str(value)


@pytest.mark.parametrize(("env", "idle"), [("dev", "60"), ("prod", "60")])
def test_each_environment_runs_its_reaper_every_hour(synthesized, env, idle):
    template = dict(synthesized.pipeline(env))
    logical, function = _reaper(template)
    variables = function["Properties"]["Environment"]["Variables"]
    assert variables["HFPIPE_ENV"] == env and variables["IDLE_MINUTES"] == idle and "TOPIC_ARN" in variables
    rules = [
        r["Properties"]
        for r in template["Resources"].values()
        if r["Type"] == "AWS::Events::Rule" and "ScheduleExpression" in r["Properties"]
    ]
    (rule,) = rules
    assert rule["ScheduleExpression"] == "rate(1 hour)" and rule["State"] == "ENABLED"
    (target,) = rule["Targets"]
    assert target["Arn"] == {"Fn::GetAtt": [logical, "Arn"]} and "DeadLetterConfig" in target


def test_the_reapers_role_deletes_only_with_the_environments_tags_and_lists_only_unscoped(synthesized):
    template = dict(synthesized.pipeline("dev"))
    _, function = _reaper(template)
    statements = _statements(template, function["Properties"]["Role"]["Fn::GetAtt"][0])
    deletes = [s for s in statements if any(a.startswith("sagemaker:Delete") for a in _actions(s))]
    assert set().union(*map(_actions, deletes)) == {
        "sagemaker:DeleteEndpoint",
        "sagemaker:DeleteEndpointConfig",
        "sagemaker:DeleteModel",
    }
    for statement in deletes:
        assert statement["Condition"] == {
            "StringEquals": {
                "aws:ResourceTag/hfpipe:managed-by": "hfpipe",
                "aws:ResourceTag/hfpipe:env": "dev",
            }
        }
        assert statement["Resource"] != "*"
        resources = _text(statement["Resource"])
        assert ":endpoint/dev-*" in resources and ":endpoint/hfpipe-dev-*" in resources
    unscoped = [s for s in statements if s["Resource"] == "*"]
    assert set().union(*map(_actions, unscoped)) == {
        "sagemaker:ListEndpoints",
        "sagemaker:ListEndpointConfigs",
        "sagemaker:ListModels",
        "sagemaker:ListInferenceComponents",
        "cloudwatch:GetMetricStatistics",
    }
    reads = [s for s in statements if "sagemaker:ListTags" in _actions(s)]
    assert len(reads) == 1 and "hfpipe-dev-*" in _text(reads[0]["Resource"])
    assert any("sns:Publish" in _actions(s) for s in statements)
    # The shared base (dev's) is retired by its own state machine: the reaper may only start it.
    (start,) = [s for s in statements if "states:StartExecution" in _actions(s)]
    assert _actions(start) == {"states:StartExecution"} and "stateMachine:hfpipe-dev-adapters" in _text(start)
    assert "ADAPTER_STATE_MACHINE_ARN" in function["Properties"]["Environment"]["Variables"]
    prod = dict(synthesized.pipeline("prod"))
    _, prod_function = _reaper(prod)
    prod_statements = _statements(prod, prod_function["Properties"]["Role"]["Fn::GetAtt"][0])
    assert "ADAPTER_STATE_MACHINE_ARN" not in prod_function["Properties"]["Environment"]["Variables"]
    assert not [
        s
        for s in prod_statements
        if _actions(s) & {"states:StartExecution", "sagemaker:DescribeInferenceComponent"}
    ]
    # What AWS's Service Authorization Reference says of each action, resource and condition key.
    found = check_template("Hfpipe-dev-Pipeline", template, "eu-west-1")
    assert [f for f in found if "Reaper" in str(f)] == []


def test_cdk_json_gives_devs_endpoints_a_day_and_prods_no_expiry(synthesized):
    dev, prod = synthesized.environments["dev"], synthesized.environments["prod"]
    assert (dev.endpoint_ttl_hours, dev.endpoint_idle_minutes) == (24, 60)
    assert (prod.endpoint_ttl_hours, prod.endpoint_idle_minutes) == (None, 60)
    # What the functions that create endpoints read it from: dev's in seconds, prod's not at all.
    for env, value in (("dev", "86400"), ("prod", None)):
        template = dict(synthesized.pipeline(env))
        for handler in ("plan", "deploy_prepare", "adapter"):
            found = [
                r["Properties"]["Environment"]["Variables"]
                for r in template["Resources"].values()
                if r["Type"] == "AWS::Lambda::Function"
                and r["Properties"]["Handler"] == f"pipeline_lambdas.{handler}.handler"
            ]
            assert all(v.get("ENDPOINT_TTL_SECONDS") == value for v in found), (env, handler)


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        (
            {"endpoint_ttl_hours": 0},
            "hfpipe:environments.dev.endpoint_ttl_hours: 0 is not accepted; accepted: a whole number of hours "
            "from 1 to 8760, or null",
        ),
        ({"endpoint_ttl_hours": "8h"}, "hfpipe:environments.dev.endpoint_ttl_hours: '8h' is not accepted"),
        (
            {"endpoint_idle_minutes": 2},
            "hfpipe:environments.dev.endpoint_idle_minutes: 2 is not accepted; accepted: a whole number of "
            "minutes from 5 to 1440",
        ),
    ],
)
def test_a_bad_ttl_or_idle_window_in_cdk_json_names_the_key(entry, message):
    from stacks.config import ConfigError, parse_environment

    with pytest.raises(ConfigError) as raised:
        parse_environment("dev", {"region": "eu-west-1", **entry})
    assert str(raised.value).startswith(message)
    defaults = parse_environment("dev", {"region": "eu-west-1"})
    assert (defaults.endpoint_ttl_hours, defaults.endpoint_idle_minutes) == (None, 60)
