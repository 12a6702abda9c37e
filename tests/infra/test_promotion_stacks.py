"""Promotion in the synthesized stacks: the target's Promote state machine and its function's least-privilege
role; across accounts, the source's bucket policy statement, its Register step's group sharing and the fixed
role name, none of which exist when both environments share an account. cdk-nag runs in every synth here
(an unacknowledged finding fails it), and every policy, the group policy the Register step puts included,
is checked against the Service Authorization Reference."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from accounts import ACCOUNT_A, ACCOUNT_B
from app_synth import as_list, synthesize_environments
from iam_reference import check_statement, check_template

from hfpipe import contract, kinds
from hfpipe.core.promotion import promotion

DEV, PROD = ACCOUNT_A, ACCOUNT_B


def environments(dev_account: str | None, prod_account: str | None) -> dict[str, Any]:
    dev: dict[str, Any] = {"region": "eu-west-1", "removal_policy": "destroy"}
    prod: dict[str, Any] = {"region": "us-east-1", "promote_from": "dev"}
    if dev_account:
        dev["account"] = dev_account
    if prod_account:
        prod["account"] = prod_account
    return {"dev": dev, "prod": prod}


@pytest.fixture(scope="module")
def cross(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """dev and prod in two accounts, with cdk-nag."""
    return synthesize_environments(tmp_path_factory.mktemp("cross"), environments(DEV, PROD))


@pytest.fixture(scope="module")
def same(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """dev and prod in one account named in cdk.json, with cdk-nag."""
    return synthesize_environments(tmp_path_factory.mktemp("same"), environments(DEV, DEV))


def resources(template: dict[str, Any], rtype: str) -> dict[str, dict[str, Any]]:
    return {k: r for k, r in template["Resources"].items() if r["Type"] == rtype}


def function(
    template: dict[str, Any], module: str
) -> tuple[dict[str, Any], dict[str, Any], list[dict[str, Any]]]:
    """(function properties, its role's properties, its role's policy statements) of one pipeline Lambda."""
    (props,) = [
        r["Properties"]
        for r in resources(template, "AWS::Lambda::Function").values()
        if r["Properties"].get("Handler") == f"pipeline_lambdas.{module}.handler"
    ]
    role_id = props["Role"]["Fn::GetAtt"][0]
    statements = [
        s
        for p in resources(template, "AWS::IAM::Policy").values()
        if {"Ref": role_id} in p["Properties"]["Roles"]
        for s in p["Properties"]["PolicyDocument"]["Statement"]
    ]
    return props, template["Resources"][role_id]["Properties"], statements


def shared(template: dict[str, Any]) -> list[dict[str, Any]]:
    """The artifacts bucket policy's statements for another account's Promote role."""
    (policy,) = [
        r["Properties"]["PolicyDocument"]["Statement"]
        for r in resources(template, "AWS::S3::BucketPolicy").values()
        if "ArtifactsBucket" in r["Properties"]["Bucket"]["Ref"]
    ]
    return [s for s in policy if "aws:PrincipalArn" in json.dumps(s.get("Condition", {}))]


def test_only_the_target_has_a_promote_state_machine(cross):
    dev, prod = cross.pipeline("dev"), cross.pipeline("prod")
    names = {
        r["Properties"]["StateMachineName"]
        for r in resources(prod, "AWS::StepFunctions::StateMachine").values()
    }
    assert names == {"hfpipe-prod-pipeline", "hfpipe-prod-deploy", "hfpipe-prod-promote"}
    assert {
        r["Properties"]["StateMachineName"]
        for r in resources(dev, "AWS::StepFunctions::StateMachine").values()
    } == {"hfpipe-dev-pipeline", "hfpipe-dev-deploy"}
    params = {r["Properties"]["Name"] for r in resources(prod, "AWS::SSM::Parameter").values()}
    assert contract.ssm_parameter_name("prod", contract.SSM_PROMOTE_STATE_MACHINE_ARN) in params
    (machine,) = [
        r
        for r in resources(prod, "AWS::StepFunctions::StateMachine").values()
        if r["Properties"]["StateMachineName"] == "hfpipe-prod-promote"
    ]
    definition = "".join(
        p if isinstance(p, str) else "<fn>" for p in machine["Properties"]["DefinitionString"]["Fn::Join"][1]
    )
    states = json.loads(definition)["States"]
    assert list(states) == ["Promote"] and states["Promote"]["Type"] == "Task"
    retried = [e for r in states["Promote"]["Retry"] for e in r["ErrorEquals"]]
    assert {"Lambda.TooManyRequestsException", "ThrottlingException", "Lambda.ServiceException"} <= set(
        retried
    )
    assert states["Promote"]["Parameters"] == {"input.$": "$", "execution_name.$": "$$.Execution.Name"}


def test_the_promote_role_is_least_privilege(cross):
    props, role, statements = function(cross.pipeline("prod"), "promote")
    env = props["Environment"]["Variables"]
    assert {
        k: env[k] for k in ("SOURCE_ENV", "SOURCE_REGION", "SOURCE_ACCOUNT", "MODEL_APPROVAL_STATUS")
    } == {
        "SOURCE_ENV": "dev",
        "SOURCE_REGION": "eu-west-1",
        "SOURCE_ACCOUNT": DEV,
        "MODEL_APPROVAL_STATUS": "PendingManualApproval",
    }
    assert props["Timeout"] == 900  # Lambda's maximum: the copy of a large model
    # The serving images it re-resolves in prod: every serving kind's scope, not the training images.
    scopes = set(json.loads(env["IMAGE_CATALOG"]))
    assert {"inference", "vllm"} <= scopes and "training" not in scopes
    assert scopes == {k.image_scope for k in kinds.SERVING_KINDS.values()}  # a new kind's too
    by_action: dict[str, list[Any]] = {}
    for s in statements:
        for action in as_list(s["Action"]):
            by_action.setdefault(action, []).extend(as_list(s["Resource"]))
    assert set(by_action) == {
        "logs:CreateLogStream",
        "logs:PutLogEvents",
        "sagemaker:DescribeModelPackageGroup",
        "sagemaker:CreateModelPackageGroup",
        "sagemaker:AddTags",
        "sagemaker:CreateModelPackage",
        "sagemaker:ListModelPackages",
        "sagemaker:DescribeModelPackage",
        "s3:GetObject",
        "s3:PutObject",
        "s3:AbortMultipartUpload",
    }
    rendered = json.dumps(by_action)
    # The source's versions only, in its region and account; its training outputs and metrics documents only.
    assert f"arn:aws:sagemaker:eu-west-1:{DEV}:model-package/hfpipe-dev-*/*" in rendered
    assert sorted(by_action["s3:GetObject"]) == [
        "arn:aws:s3:::hfpipe-dev-data-*/model-metrics/*",
        "arn:aws:s3:::hfpipe-dev-data-*/models/*",
    ]
    assert all("/promoted/*" in json.dumps(r) for r in by_action["s3:PutObject"])
    # Registers as the Register step does: this environment's approval status, in its own groups (a version
    # takes its group's tags, so the request has none to condition on).
    (create,) = [s for s in statements if s["Action"] == "sagemaker:CreateModelPackage"]
    assert create["Condition"] == {"StringEquals": {"sagemaker:ModelApprovalStatus": "PendingManualApproval"}}
    assert all("hfpipe-prod-" in json.dumps(r) for r in create["Resource"])
    assert role["RoleName"] == promotion.role_name("prod") == "hfpipe-prod-promote"


def test_across_accounts_the_source_shares_its_artifacts_and_groups(cross):
    (statement,) = shared(cross.templates["Hfpipe-dev-Data"])
    assert statement["Principal"] == {"AWS": f"arn:aws:iam::{PROD}:root"}
    assert statement["Action"] == "s3:GetObject" and statement["Effect"] == "Allow"
    assert statement["Condition"] == {
        "ArnEquals": {"aws:PrincipalArn": f"arn:aws:iam::{PROD}:role/hfpipe-prod-promote"}
    }
    assert sorted(r["Fn::Join"][1][1] for r in statement["Resource"]) == ["/model-metrics/*", "/models/*"]
    props, _, statements = function(cross.pipeline("dev"), "register")
    assert (
        props["Environment"]["Variables"]["PROMOTE_ROLE_ARNS"]
        == f"arn:aws:iam::{PROD}:role/hfpipe-prod-promote"
    )
    assert any("sagemaker:PutModelPackageGroupPolicy" in as_list(s["Action"]) for s in statements)
    # prod shares nothing: no environment promotes from it.
    assert shared(cross.templates["Hfpipe-prod-Data"]) == []


def test_in_one_account_nothing_is_shared_and_the_role_is_unnamed(same):
    assert shared(same.templates["Hfpipe-dev-Data"]) == []
    props, _, statements = function(same.pipeline("dev"), "register")
    assert "PROMOTE_ROLE_ARNS" not in props["Environment"]["Variables"]
    assert not any("sagemaker:PutModelPackageGroupPolicy" in as_list(s["Action"]) for s in statements)
    _, role, _ = function(same.pipeline("prod"), "promote")
    assert "RoleName" not in role


@pytest.mark.parametrize("variant", ["cross", "same"])
def test_every_policy_matches_the_service_authorization_reference(variant, request):
    app = request.getfixturevalue(variant)
    findings = [
        str(f)
        for name, template in app.templates.items()
        for f in check_template(name, template, app.environments[name.split("-")[1]].region)
    ]
    assert findings == []
    # The group policy the source's Register step puts (PutModelPackageGroupPolicy) at run time.
    group = f"arn:aws:sagemaker:eu-west-1:{DEV}:model-package-group/hfpipe-dev-tiny-lora"
    policy = promotion.group_policy(group, [promotion.role_arn("aws", PROD, "prod")])
    (statement,) = policy["Statement"]
    assert check_statement(statement, {"Resources": {}}, "eu-west-1") == []
    assert statement["Resource"] == f"arn:aws:sagemaker:eu-west-1:{DEV}:model-package/hfpipe-dev-tiny-lora/*"


@pytest.mark.slow
def test_cfn_lint_passes_the_cross_account_templates(cross):
    templates = sorted(str(p) for p in Path(cross.outdir).glob("*.template.json"))
    cfn_lint = Path(sys.executable).parent / "cfn-lint"
    result = subprocess.run(
        [str(cfn_lint), "--format", "parseable", *templates], capture_output=True, text=True, check=False
    )
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")
