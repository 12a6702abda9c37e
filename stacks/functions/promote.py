"""PromoteFunction: lambda/pipeline/pipeline_lambdas/promote.py, which promotes an approved version of the
source environment (cdk.json ``promote_from``) into this one: copies its model.tar.gz into this environment's
artifacts bucket, re-resolves its image for this region and registers it in this environment's group.

Its role may read the source's versions (DescribeModelPackage on the source's groups' versions, in the
source's region and account) and, in the source's artifacts bucket, the training outputs (models/) and the
metrics documents (model-metrics/) only; write under promoted/ of this environment's artifacts bucket; and
register as the Register function does (``grant_registry``). Where the source is in another account, the
role has a fixed name (``hfpipe.core.promotion.promotion.role_name``), which the source's bucket policy and group
policies name before the role exists.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from constructs import Construct

from hfpipe import contract
from hfpipe.core.promotion import promotion, promotion_access, registry
from hfpipe.core.recipe.serving_fit import GPUS_KEY
from hfpipe.core.run.plan import DISTRIBUTION_KEY
from stacks.config import PromoteOptions, PromotionPeer
from stacks.functions.common import (
    FunctionSettings,
    PipelineFunction,
    acknowledge_artifacts,
)
from stacks.functions.register import grant_registry
from stacks.nag import acknowledge, rendered

#: Lambda's maximum: the copy of a large model must fit in it (pipeline_lambdas/promote.py).
TIMEOUT_SECONDS = 900
#: Catalog entries that are not images (the Plan's distribution and GPU tables) stay out of the function's
#: environment (4 KB in all).
_NOT_IMAGES = (DISTRIBUTION_KEY, GPUS_KEY, "training")


class PromoteFunction(PipelineFunction):
    """The Promote function (``function``) and its role (``role``) of a target environment, made of
    ``options``."""

    RUNTIME_MODULE = "promote"

    def __init__(
        self, scope: Construct, construct_id: str, *, settings: FunctionSettings, options: PromoteOptions
    ) -> None:
        stack = cdk.Stack.of(scope)
        o = options
        if o.cross_account:
            settings = dataclasses.replace(
                settings, role_factory=_named_role_factory(stack, settings.env_name)
            )
        super().__init__(
            scope,
            construct_id,
            settings,
            environment=_environment(
                stack,
                o.source,
                settings.artifacts_bucket_name,
                o.image_catalog,
                o.model_approval,
                o.allowed_image_registries,
            )
            | {"EVALUATION_GATE": o.evaluation_gate},
            timeout_seconds=TIMEOUT_SECONDS,
        )
        grant_registry(self.role, settings.env_name, o.model_approval)
        source_versions, source_keys = self._grant_source_reads(o.source)
        self._grant_promoted_writes(settings.artifacts_bucket_name)
        self._acknowledge(source_versions, source_keys, settings.artifacts_bucket_name)

    def _grant_source_reads(self, source: PromotionPeer) -> tuple[str, list[str]]:
        """DescribeModelPackage on the source's versions, GetObject on its training outputs and metrics
        documents; the two ARNs (the versions', the keys') for the acknowledgements."""
        stack = cdk.Stack.of(self)
        source_versions = stack.format_arn(
            service="sagemaker",
            region=source.region,
            account=source.account or stack.account,
            resource="model-package",
            resource_name=f"{registry.group_prefix(source.name)}*/*",
        )
        self.allow(["sagemaker:DescribeModelPackage"], [source_versions])
        # The source's artifacts bucket is named by CloudFormation at deploy time (<stack name>-<logical id>-
        # <suffix>, lower case): its stack's name is what is known here. The version names the bucket itself
        # (its ModelDataUrl); where the source is in another account, its bucket policy names the one bucket.
        source_buckets = f"arn:{stack.partition}:s3:::{promotion_access.source_bucket_prefix(source.name)}*"
        source_keys = [f"{source_buckets}/{prefix}*" for prefix in promotion_access.SOURCE_KEY_PREFIXES]
        self.allow(["s3:GetObject"], source_keys)
        return source_versions, source_keys

    def _grant_promoted_writes(self, artifacts_bucket_name: str) -> None:
        """PutObject under promoted/ of this environment's artifacts bucket."""
        partition = cdk.Stack.of(self).partition
        promoted = f"arn:{partition}:s3:::{artifacts_bucket_name}/{contract.ARTIFACTS_PROMOTED_PREFIX}*"
        # The managed copy's multipart upload is aborted when a part fails.
        self.allow(["s3:PutObject", "s3:AbortMultipartUpload"], [promoted])

    def _acknowledge(self, source_versions: str, source_keys: list[str], artifacts_bucket_name: str) -> None:
        """cdk-nag's acknowledgements of the grants' ARNs that end in ``*``, each with its reason."""
        stack = cdk.Stack.of(self)
        acknowledge(
            self.role,
            f"AwsSolutions-IAM5[Resource::{rendered(stack, source_versions)}]",
            "Reads (DescribeModelPackage only) the versions of the source environment's groups "
            "(hfpipe-<source>-<recipe>), numbered by SageMaker; the function refuses any version not Approved.",
        )
        for key in source_keys:
            acknowledge(
                self.role,
                f"AwsSolutions-IAM5[Resource::{rendered(stack, key)}]",
                "The source environment's artifacts bucket is named by CloudFormation from its stack "
                "(hfpipe-<source>-data-...); GetObject on its training outputs and metrics documents only.",
            )
        acknowledge_artifacts(
            self.role,
            artifacts_bucket_name,
            contract.ARTIFACTS_PROMOTED_PREFIX,
            "Each promoted version's model.tar.gz and metrics document are written at "
            "promoted/<source>/<recipe>/<n>/ (the version is named at run time) of this environment's "
            "artifacts bucket only.",
        )


def _environment(
    stack: cdk.Stack,
    source: PromotionPeer,
    artifacts_bucket_name: str,
    image_catalog: dict[str, Any],
    model_approval: str,
    allowed_image_registries: tuple[str, ...],
) -> dict[str, str]:
    """The function's environment: the source, this environment's bucket, approval and images."""
    images = {k: v for k, v in image_catalog.items() if k not in _NOT_IMAGES}
    environment = {
        "SOURCE_ENV": source.name,
        "SOURCE_REGION": source.region,
        "SOURCE_ACCOUNT": source.account or stack.account,
        "PARTITION": stack.partition,
        "ARTIFACTS_BUCKET": artifacts_bucket_name,
        "MODEL_APPROVAL_STATUS": model_approval,
        "IMAGE_CATALOG": stack.to_json_string(images),
    }
    if allowed_image_registries:
        environment["ALLOWED_IMAGE_REGISTRIES"] = ",".join(allowed_image_registries)
    return environment


def _named_role_factory(stack: cdk.Stack, env_name: str) -> Any:
    def role(construct_id: str, description: str) -> iam.Role:
        return iam.Role(
            stack,
            construct_id,
            description=description,
            # The source account's bucket and group policies name it (aws:PrincipalArn) before it exists.
            role_name=promotion.role_name(env_name),
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
        )

    return role
