"""The adapter function's role where dev's shared base scales to zero (stacks/functions/adapter.py,
``_grant_scale_to_zero``): exactly the scaling actions the function sends (hfpipe.core.adapters.scale_to_zero),
each limited to this environment's inference components' copy counts, and none in prod, which keeps its base
up (docs/adapters.md, "Scale to zero")."""

from __future__ import annotations

from typing import Any

SCALING = {
    "application-autoscaling:RegisterScalableTarget",
    "application-autoscaling:TagResource",
    "application-autoscaling:PutScalingPolicy",
    "application-autoscaling:DeregisterScalableTarget",
}


def adapter_statements(template: dict[str, Any]) -> list[dict[str, Any]]:
    roles = [
        name
        for name, r in template["Resources"].items()
        if r["Type"] == "AWS::IAM::Role" and name.startswith("AdapterFunction")
    ]
    found = []
    for resource in template["Resources"].values():
        if resource["Type"] != "AWS::IAM::Policy":
            continue
        if any(role.get("Ref") in roles for role in resource["Properties"]["Roles"]):
            found += resource["Properties"]["PolicyDocument"]["Statement"]
    return found


def actions(statement: dict[str, Any]) -> set[str]:
    value = statement["Action"]
    return {value} if isinstance(value, str) else set(value)


def test_the_adapter_role_gets_exactly_the_scaling_actions_on_the_base_components_copies(synthesized):
    statements = adapter_statements(dict(synthesized.pipeline("dev")))
    scaling = [s for s in statements if actions(s) & SCALING]
    assert set().union(*(actions(s) for s in scaling)) == SCALING
    for statement in scaling:
        conditions = statement["Condition"]["StringEquals"]
        assert statement["Resource"] == "*"  # scalable target ARNs end in a generated ID
        assert (
            conditions.get("aws:RequestTag/hfpipe:env", conditions.get("aws:ResourceTag/hfpipe:env")) == "dev"
        )
        if actions(statement) != {"application-autoscaling:TagResource"}:
            assert conditions["application-autoscaling:scalable-dimension"] == (
                "sagemaker:inference-component:DesiredCopyCount"
            )
            assert conditions["application-autoscaling:service-namespace"] == "sagemaker"
    alarms = [s for s in statements if "cloudwatch:PutMetricAlarm" in actions(s)]
    (alarm,) = alarms
    assert actions(alarm) == {
        "cloudwatch:PutMetricAlarm",
        "cloudwatch:DeleteAlarms",
        "cloudwatch:DescribeAlarms",
    }
    names = [str(part) for resource in alarm["Resource"] for part in resource["Fn::Join"][1]]
    assert any(n.endswith(":alarm:hfpipe-dev-shared-base-no-capacity") for n in names)
    assert any(
        n.endswith(":alarm:TargetTracking-inference-component/hfpipe-dev-shared-base-*") for n in names
    )
    runtime = [s for s in statements if "sagemaker:UpdateInferenceComponentRuntimeConfig" in actions(s)]
    assert len(runtime) == 1 and "Condition" in runtime[0]


def test_prod_keeps_its_base_up_and_gets_no_scaling_grant(synthesized):
    statements = adapter_statements(dict(synthesized.pipeline("prod")))
    assert not [s for s in statements if actions(s) & SCALING]
