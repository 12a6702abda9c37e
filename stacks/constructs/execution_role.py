"""The SageMaker execution role: what training jobs and endpoints act as, and nothing more.

Scoped to: reading the data bucket, reading/writing the artifacts bucket (model artifacts, outputs,
checkpoints), reading the one sourcedir.tar.gz asset, writing the SageMaker log groups and metrics, and
pulling the Hugging Face Deep Learning Container repositories of the environment's region, taken from
the SageMaker Python SDK's own image tables at synth time (never hand-written account IDs).
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import cache
from typing import Any

from aws_cdk import Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from constructs import Construct

from hfpipe.contract import ARTIFACTS_CHECKPOINTS_PREFIX, ARTIFACTS_OUTPUT_PREFIX
from stacks.image_catalog import dlc_registries, dlc_table, sdk_table
from stacks.nag import acknowledge, rendered, rendered_value

# The recipes run PyTorch only, so the TensorFlow repositories of the same table are left out.
HF_REPOSITORY_MARKER = "pytorch"

SAGEMAKER_LOG_GROUP_PREFIXES = ("/aws/sagemaker/TrainingJobs", "/aws/sagemaker/Endpoints/")
SAGEMAKER_METRIC_NAMESPACE = "/aws/sagemaker/*"


def _registries(node: Any) -> Iterator[tuple[dict[str, str], str]]:
    if isinstance(node, dict):
        if isinstance(node.get("registries"), dict) and isinstance(node.get("repository"), str):
            yield node["registries"], node["repository"]
        for value in node.values():
            yield from _registries(value)


@cache
def huggingface_dlc_repositories(region: str) -> tuple[tuple[str, str], ...]:
    """(registry account, repository) of every Hugging Face DLC the SDK knows in `region`, and of the
    pinned DLC table's repositories (stacks/dlc_images.json), sorted."""
    found = {
        (regs[region], repo)
        for regs, repo in _registries(sdk_table())
        if region in regs and HF_REPOSITORY_MARKER in repo
    }
    # The DLC repositories the SDK does not list (the AWS vLLM DLC), in the same per-region accounts.
    account = dlc_registries().get(region)
    if account is not None:
        found |= {(account, scope["repository"]) for scope in dlc_table().values()}
    if not found:
        raise ValueError(
            f"region: {region!r} has no Hugging Face Deep Learning Containers in the SageMaker SDK's image "
            "tables; accepted: a region where SageMaker offers them, such as 'us-east-1' or 'eu-west-1'"
        )
    return tuple(sorted(found))


class SageMakerExecutionRole(Construct):
    """IAM role assumed by SageMaker training jobs and endpoints of this environment's account."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        data_bucket: s3.IBucket,
        artifacts_bucket: s3.IBucket,
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
        self._grant_image_pull(stack)

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
        # under the two prefixes a job's request names: OutputDataConfig.S3OutputPath (models/) and
        # CheckpointConfig.S3Uri (checkpoints/, which SageMaker's checkpoint sync also prunes).
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
                resources=[
                    artifacts_bucket.arn_for_objects(f"{prefix}*")
                    for prefix in (ARTIFACTS_OUTPUT_PREFIX, ARTIFACTS_CHECKPOINTS_PREFIX)
                ],
            )
        )
        for prefix in (ARTIFACTS_OUTPUT_PREFIX, ARTIFACTS_CHECKPOINTS_PREFIX):
            acknowledge(
                self.role,
                f"AwsSolutions-IAM5[Resource::{rendered_value(Stack.of(self), artifacts_bucket.bucket_arn)}/{prefix}*]",
                "Training jobs write their model artifacts and checkpoints under keys named per job at run "
                "time; writes are limited to these two prefixes of this environment's artifacts bucket.",
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

    def _grant_image_pull(self, stack: Stack) -> None:
        # The DLC registries are AWS-owned accounts listed by the SDK per region.
        repositories = huggingface_dlc_repositories(stack.region)
        self.image_repository_arns = [
            f"arn:{stack.partition}:ecr:{stack.region}:{account}:repository/{repository}"
            for account, repository in repositories
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
