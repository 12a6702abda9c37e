"""The S3 buckets of one environment: data, artifacts (+ checkpoints) and server access logs."""

from __future__ import annotations

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_s3 as s3
from constructs import Construct

from hfpipe.contract import ARTIFACTS_CHECKPOINTS_PREFIX
from stacks import checkov
from stacks.nag import acknowledge

INCOMPLETE_UPLOAD_DAYS = 7
"""Multipart uploads a crashed training job left behind are aborted after this many days."""


class PipelineBuckets(Construct):
    """Data, artifacts and access-log buckets with block public access, TLS-only policies and SSE-S3.

    `retain=True` (prod) keeps every bucket and its objects when the stack is deleted; `retain=False`
    (dev) deletes them, objects included, so a dev environment leaves nothing behind.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        retain: bool,
        checkpoint_expiration_days: int,
        noncurrent_version_expiration_days: int,
        access_log_expiration_days: int,
    ) -> None:
        super().__init__(scope, construct_id)
        self._retain = retain
        self._noncurrent_days = noncurrent_version_expiration_days
        self.access_logs_bucket = self._bucket(
            "AccessLogsBucket",
            None,
            s3.LifecycleRule(id="ExpireAccessLogs", expiration=Duration.days(access_log_expiration_days)),
        )
        acknowledge(
            self.access_logs_bucket,
            "AwsSolutions-S1",
            "This is the server access log bucket; logging its own accesses into itself would loop.",
        )
        checkov.access_log_bucket(self.access_logs_bucket)
        self.data_bucket = self._bucket("DataBucket", "data/")
        self.artifacts_bucket = self._bucket(
            "ArtifactsBucket",
            "artifacts/",
            # Checkpoints only matter until the job that wrote them finishes (spot resumes read them).
            s3.LifecycleRule(
                id="ExpireCheckpoints",
                prefix=ARTIFACTS_CHECKPOINTS_PREFIX,
                expiration=Duration.days(checkpoint_expiration_days),
            ),
        )

    def _bucket(self, construct_id: str, logs_prefix: str | None, *rules: s3.LifecycleRule) -> s3.Bucket:
        """A bucket whose accesses are logged under ``logs_prefix`` and which is versioned (its noncurrent
        versions expire), or, without a prefix, the access-log bucket itself (neither); incomplete uploads
        are aborted in each, then ``rules`` apply."""
        versioned = logs_prefix is not None
        abort = s3.LifecycleRule(
            id="AbortIncompleteMultipartUploads",
            abort_incomplete_multipart_upload_after=Duration.days(INCOMPLETE_UPLOAD_DAYS),
        )
        noncurrent = s3.LifecycleRule(
            id="ExpireNoncurrentVersions",
            noncurrent_version_expiration=Duration.days(self._noncurrent_days),
        )
        return s3.Bucket(
            self,
            construct_id,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            encryption=s3.BucketEncryption.S3_MANAGED,
            enforce_ssl=True,
            minimum_tls_version=1.2,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            versioned=versioned,
            lifecycle_rules=[abort, noncurrent, *rules] if versioned else [abort, *rules],
            server_access_logs_bucket=self.access_logs_bucket if versioned else None,
            server_access_logs_prefix=logs_prefix,
            removal_policy=RemovalPolicy.RETAIN if self._retain else RemovalPolicy.DESTROY,
            auto_delete_objects=not self._retain,
        )
