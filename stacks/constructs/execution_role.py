"""The SageMaker execution role: what training jobs and endpoints act as, and nothing more.

Scoped to: reading the data bucket, reading/writing the artifacts bucket (model artifacts, outputs,
checkpoints), reading the one sourcedir.tar.gz asset, writing the SageMaker log groups and metrics, and
pulling the repositories of the environment's image catalog (the Deep Learning Containers its recipes name,
resolved at synth time through the SageMaker Python SDK, stacks/image_catalog.py; never hand-written
account IDs).
"""

from __future__ import annotations

import re
from typing import Any

from aws_cdk import Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from constructs import Construct

from hfpipe.contract import (
    ARTIFACTS_CHECKPOINTS_PREFIX,
    ARTIFACTS_EVALUATIONS_PREFIX,
    ARTIFACTS_OUTPUT_PREFIX,
)
from stacks.nag import acknowledge, rendered, rendered_value

# Processing jobs (the evaluation) log to /aws/sagemaker/ProcessingJobs, as training jobs to theirs.
SAGEMAKER_LOG_GROUP_PREFIXES = (
    "/aws/sagemaker/TrainingJobs",
    "/aws/sagemaker/Endpoints/",
    "/aws/sagemaker/ProcessingJobs",
)
SAGEMAKER_METRIC_NAMESPACE = "/aws/sagemaker/*"


#: An image URI as the catalog holds it: <account>.dkr.ecr.<region>.<domain>/<repository>:<tag>.
_IMAGE_URI = re.compile(
    r"^(?P<account>[0-9]{12})\.dkr\.ecr\.(?P<region>[a-z0-9-]+)\.[a-z0-9.]+/(?P<repo>[^:@]+)[:@]"
)


def catalog_repositories(image_catalog: dict[str, Any]) -> tuple[tuple[str, str, str], ...]:
    """(registry account, region, repository) of every image URI in the environment's catalog
    (stacks/image_catalog.py: {scope: {key: {processor: uri}}}), sorted: the only images its jobs and
    endpoints run, unless a recipe names its own `image_uri` (whose repository the user grants)."""
    found = set()
    for scope in image_catalog.values():
        for entry in scope.values() if isinstance(scope, dict) else ():
            for uri in entry.values() if isinstance(entry, dict) else ():
                match = _IMAGE_URI.match(uri) if isinstance(uri, str) else None
                if match:
                    found.add((match["account"], match["region"], match["repo"]))
    if not found:
        raise ValueError("image catalog: no image URIs; the execution role would pull nothing")
    return tuple(sorted(found))


#: The artifacts prefixes SageMaker jobs write under with the execution role.
WRITTEN_PREFIXES = (ARTIFACTS_OUTPUT_PREFIX, ARTIFACTS_CHECKPOINTS_PREFIX, ARTIFACTS_EVALUATIONS_PREFIX)


class SageMakerExecutionRole(Construct):
    """IAM role assumed by SageMaker training jobs and endpoints of this environment's account."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        data_bucket: s3.IBucket,
        artifacts_bucket: s3.IBucket,
        image_catalog: dict[str, Any],
    ) -> None:
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        self.role = iam.Role(
            self,
            "Role",
            description="hfpipe: SageMaker training jobs and endpoints",
            # Confused-deputy guard: only SageMaker acting for this account may assume the role.
            assumed_by=iam.ServicePrincipal(
                "sagemaker.amazonaws.com",
                conditions={
                    "StringEquals": {"aws:SourceAccount": stack.account},
                    "ArnLike": {
                        "aws:SourceArn": f"arn:{stack.partition}:sagemaker:{stack.region}:{stack.account}:*"
                    },
                },
            ),
        )
        self._grant_buckets(data_bucket, artifacts_bucket)
        self._grant_logs_and_metrics(stack)
        self._grant_image_pull(stack, image_catalog)

    def _grant_buckets(self, data_bucket: s3.IBucket, artifacts_bucket: s3.IBucket) -> None:
        self.role.add_to_policy(
            iam.PolicyStatement(
                sid="ListBuckets",
                actions=["s3:ListBucket", "s3:GetBucketLocation", "s3:ListBucketMultipartUploads"],
                resources=[data_bucket.bucket_arn, artifacts_bucket.bucket_arn],
            )
        )
        self.role.add_to_policy(
            iam.PolicyStatement(
                sid="ReadData", actions=["s3:GetObject"], resources=[data_bucket.arn_for_objects("*")]
            )
        )
        # Jobs read model artifacts (CreateModel) and checkpoints (a spot resume) back; they write only
        # under the prefixes a job's request names: OutputDataConfig.S3OutputPath (models/),
        # CheckpointConfig.S3Uri (checkpoints/, which SageMaker's checkpoint sync also prunes) and the
        # evaluation job's ProcessingOutputConfig (evaluations/: hfpipe.core.run.evaluation_job).
        self.role.add_to_policy(
            iam.PolicyStatement(
                sid="ReadArtifacts",
                actions=["s3:GetObject"],
                resources=[artifacts_bucket.arn_for_objects("*")],
            )
        )
        self.role.add_to_policy(
            iam.PolicyStatement(
                sid="WriteJobOutputs",
                actions=[
                    "s3:PutObject",
                    "s3:DeleteObject",
                    "s3:AbortMultipartUpload",
                    "s3:ListMultipartUploadParts",
                ],
                resources=[artifacts_bucket.arn_for_objects(f"{prefix}*") for prefix in WRITTEN_PREFIXES],
            )
        )
        for prefix in WRITTEN_PREFIXES:
            acknowledge(
                self.role,
                f"AwsSolutions-IAM5[Resource::{rendered_value(Stack.of(self), artifacts_bucket.bucket_arn)}/{prefix}*]",
                "Training jobs write their model artifacts and checkpoints, the evaluation job its document, "
                "under keys named per job at run time; writes are limited to these prefixes of this "
                "environment's artifacts bucket.",
            )
        for bucket in (data_bucket, artifacts_bucket):
            acknowledge(
                self.role,
                f"AwsSolutions-IAM5[Resource::{rendered_value(Stack.of(self), bucket.bucket_arn)}/*]",
                "Object keys (data sets, training job outputs, checkpoints) are named per execution at run "
                "time; the bucket is dedicated to this environment's pipeline, so every key in it is in scope.",
            )

    def _grant_logs_and_metrics(self, stack: Stack) -> None:
        log_group_arns = [
            f"arn:{stack.partition}:logs:{stack.region}:{stack.account}:log-group:{prefix}*"
            for prefix in SAGEMAKER_LOG_GROUP_PREFIXES
        ]
        self.role.add_to_policy(
            iam.PolicyStatement(
                sid="SageMakerLogs",
                actions=[
                    "logs:CreateLogGroup",
                    "logs:CreateLogStream",
                    "logs:PutLogEvents",
                    "logs:DescribeLogStreams",
                ],
                resources=log_group_arns,
            )
        )
        self.role.add_to_policy(
            iam.PolicyStatement(
                sid="SageMakerMetrics",
                actions=["cloudwatch:PutMetricData"],
                resources=["*"],
                conditions={"StringLike": {"cloudwatch:namespace": SAGEMAKER_METRIC_NAMESPACE}},
            )
        )
        for arn in log_group_arns:
            acknowledge(
                self.role,
                f"AwsSolutions-IAM5[Resource::{rendered(stack, arn)}]",
                "SageMaker names the log streams (training) and log groups (one per endpoint) after "
                "run-time job and endpoint names; the resource is limited to SageMaker's own log group prefixes.",
            )
        acknowledge(
            self.role,
            "AwsSolutions-IAM5[Resource::*]",
            "cloudwatch:PutMetricData supports no resource-level permissions (Service Authorization "
            "Reference, Amazon CloudWatch); it is limited by the cloudwatch:namespace condition to /aws/sagemaker/*, "
            "and ecr:GetAuthorizationToken likewise has no resource type.",
        )

    def _grant_image_pull(self, stack: Stack, image_catalog: dict[str, Any]) -> None:
        # The DLC registries are AWS-owned accounts the SDK lists per region; the repositories are those of
        # the catalog's images, nothing else of those accounts.
        self.image_repository_arns = [
            f"arn:{stack.partition}:ecr:{region}:{account}:repository/{repository}"
            for account, region, repository in catalog_repositories(image_catalog)
        ]
        self.role.add_to_policy(
            iam.PolicyStatement(
                sid="PullHuggingFaceContainers",
                actions=[
                    "ecr:BatchGetImage",
                    "ecr:GetDownloadUrlForLayer",
                    "ecr:BatchCheckLayerAvailability",
                ],
                resources=self.image_repository_arns,
            )
        )
        self.role.add_to_policy(
            iam.PolicyStatement(sid="EcrLogin", actions=["ecr:GetAuthorizationToken"], resources=["*"])
        )
