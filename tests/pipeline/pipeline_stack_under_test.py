"""A test-only stack holding the pipeline constructs (until PipelineStack wires them in)."""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sns as sns

from stacks.constructs.pipeline_lambdas import PipelineLambdas
from stacks.constructs.pipeline_state_machine import PipelineStateMachine
from stacks.image_catalog import build_catalog

REGION = "us-east-1"


def synth_template() -> dict:
    """Synthesize the test stack once and return its CloudFormation template."""
    app = cdk.App()
    stack = cdk.Stack(app, "PipelineUnderTest", env=cdk.Environment(account="123456789012", region=REGION))
    data = s3.Bucket(stack, "DataBucket", bucket_name="hfpipe-test-data")
    artifacts = s3.Bucket(stack, "ArtifactsBucket", bucket_name="hfpipe-test-artifacts")
    topic = sns.Topic(stack, "Notifications")
    role = iam.Role(stack, "ExecutionRole", assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com"))
    lambdas = PipelineLambdas(
        stack,
        "Lambdas",
        env_name="test",
        execution_role=role,
        sourcedir_uri=f"s3://{artifacts.bucket_name}/code/sourcedir.tar.gz",
        data_bucket_name=data.bucket_name,
        artifacts_bucket_name=artifacts.bucket_name,
        image_catalog=build_catalog(REGION),
        topic=topic,
    )
    PipelineStateMachine(
        stack,
        "Pipeline",
        lambdas=lambdas,
        execution_role=role,
        retry_interval=cdk.Duration.seconds(1),
        capacity_retry_interval=cdk.Duration.seconds(1),
    )
    return app.synth().get_stack_by_name("PipelineUnderTest").template
