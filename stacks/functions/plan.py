"""PlanFunction: lambda/pipeline/pipeline_lambdas/plan.py, which validates an execution's input and builds
its plan (hfpipe.core.run.plan), including the quota check.

Its environment carries what a plan is built from (execution role, sourcedir, buckets, image catalog);
its grants are reading Service Quotas and reading a recipe's own training source back (s3:GetObject, which
also authorizes HeadObject, on sources/* of the artifacts bucket only: hfpipe.core.recipe.sources).
"""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from constructs import Construct

from hfpipe import contract
from stacks.functions.common import (
    FunctionSettings,
    PipelineFunction,
    grant_artifacts,
    grant_quota_reads,
)


class PlanFunction(PipelineFunction):
    """The Plan function (``function``) and its role (``role``)."""

    RUNTIME_MODULE = "plan"

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        settings: FunctionSettings,
        execution_role: iam.IRole,
        sourcedir_uri: str,
        data_bucket_name: str,
        image_catalog: dict[str, Any],
        default_poll_seconds: int = 60,
        allowed_s3_buckets: tuple[str, ...] = (),
        allowed_image_registries: tuple[str, ...] = (),
    ) -> None:
        environment = {
            "EXECUTION_ROLE_ARN": execution_role.role_arn,
            "SOURCEDIR_URI": sourcedir_uri,
            "DATA_BUCKET": data_bucket_name,
            "ARTIFACTS_BUCKET": settings.artifacts_bucket_name,
            "IMAGE_CATALOG": cdk.Stack.of(scope).to_json_string(image_catalog),
            "DEFAULT_POLL_SECONDS": str(default_poll_seconds),
            **settings.ttl_environment(),
        }
        # Only when cdk.json allows anything outside the environment (pipeline_lambdas/plan.py reads them).
        if allowed_s3_buckets:
            environment["ALLOWED_S3_BUCKETS"] = ",".join(allowed_s3_buckets)
        if allowed_image_registries:
            environment["ALLOWED_IMAGE_REGISTRIES"] = ",".join(allowed_image_registries)
        super().__init__(scope, construct_id, settings, environment=environment)
        grant_quota_reads(self.role, "the Plan Lambda")
        # HeadObject is authorized by s3:GetObject (Amazon S3 API reference, HeadObject: "Permissions").
        grant_artifacts(
            self.role,
            settings.artifacts_bucket_name,
            ["s3:GetObject"],
            contract.ARTIFACTS_SOURCES_PREFIX,
            "A recipe's own training source is uploaded at sources/<sha256>/sourcedir.tar.gz (the hash known at "
            "run time); the Plan reads it back to check the hash, in this environment's artifacts bucket only.",
        )
