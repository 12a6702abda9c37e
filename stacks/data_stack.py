"""DataStack: the stateful part of an environment (S3 buckets); outlives the stateless stacks."""

from __future__ import annotations

from typing import Any

from aws_cdk import CfnOutput, Stack
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_ssm as ssm
from constructs import Construct

from hfpipe.contract import SSM_ARTIFACTS_BUCKET, SSM_DATA_BUCKET, ssm_parameter_name
from stacks.config import EnvironmentConfig
from stacks.constructs.buckets import PipelineBuckets
from stacks.constructs.promotion import share_artifacts
from stacks.template_hygiene import fix_auto_delete_provider


class DataStack(Stack):
    """Data, artifacts and access-log buckets of one environment, their names as outputs and SSM parameters.

    In an environment with `removal_policy: retain` the stack has termination protection and the buckets
    are retained; otherwise (dev) deleting the stack empties and deletes the buckets.
    """

    def __init__(
        self, scope: Construct, construct_id: str, *, config: EnvironmentConfig, **kwargs: Any
    ) -> None:
        super().__init__(scope, construct_id, termination_protection=config.retain, **kwargs)
        buckets = PipelineBuckets(
            self,
            "Buckets",
            retain=config.retain,
            checkpoint_expiration_days=config.checkpoint_expiration_days,
            noncurrent_version_expiration_days=config.noncurrent_version_expiration_days,
            access_log_expiration_days=config.log_retention_days,
        )
        fix_auto_delete_provider(self)
        # An environment in another account that promotes from this one reads its approved models from here.
        for target in config.promoted_to:
            if config.in_other_account(target):
                share_artifacts(buckets.artifacts_bucket, target)
        self.data_bucket: s3.Bucket = buckets.data_bucket
        self.artifacts_bucket: s3.Bucket = buckets.artifacts_bucket
        self.access_logs_bucket: s3.Bucket = buckets.access_logs_bucket
        # What PipelineStack receives: the same buckets through fixed-name exports (see `_shared`).
        self.shared_data_bucket: s3.IBucket
        self.shared_artifacts_bucket: s3.IBucket
        for key, bucket, output_id in (
            (SSM_DATA_BUCKET, self.data_bucket, "DataBucketName"),
            (SSM_ARTIFACTS_BUCKET, self.artifacts_bucket, "ArtifactsBucketName"),
        ):
            ssm.StringParameter(
                self,
                f"{output_id}Parameter",
                parameter_name=ssm_parameter_name(config.name, key),
                string_value=bucket.bucket_name,
                description=f"hfpipe {config.name}: {key}",
            )
            CfnOutput(self, output_id, value=bucket.bucket_name)
        self.shared_data_bucket = self._shared("DataBucket", self.data_bucket)
        self.shared_artifacts_bucket = self._shared("ArtifactsBucket", self.artifacts_bucket)

    def _shared(self, name: str, bucket: s3.Bucket) -> s3.IBucket:
        """The bucket as other stacks should reference it: through exports with fixed names.

        Fixed export names keep the other stacks' references (and the cdk-nag findings that quote
        them) stable across refactors, unlike CDK's generated `ExportsOutput...` names.
        """
        return s3.Bucket.from_bucket_attributes(
            self,
            f"{name}Export",
            bucket_arn=self.export_value(bucket.bucket_arn, name=f"{self.stack_name}-{name}Arn"),
            bucket_name=self.export_value(bucket.bucket_name, name=f"{self.stack_name}-{name}Name"),
        )
