"""EvaluationFunction: lambda/pipeline/pipeline_lambdas/evaluation.py, the pipeline's two steps around the evaluation
job (docs/evaluation.md): ``prepare`` reads the champion from the run's target (hfpipe.core.promotion.
evaluation_reads), ``store`` reads the job's document and writes its wrapper beside it.

Its role may read what serves on this environment's named endpoints (DescribeEndpoint, DescribeEndpointConfig,
DescribeModel on hfpipe-<env>-*: hfpipe.core.deploy.what_serves) and adapters (DescribeInferenceComponent on
hfpipe-<env>-*), read the versions of its model package groups and list them (the version an adapter serves),
read the documents under evaluations/ of the artifacts bucket and write the wrapper there; nothing else (the
job itself is created and waited on by the state machine's role).
"""

from __future__ import annotations

import aws_cdk as cdk
from constructs import Construct

from hfpipe import contract
from stacks.functions.adapter import components_arn
from stacks.functions.common import (
    FunctionSettings,
    PipelineFunction,
    acknowledge_artifacts,
    deploy_arn,
)
from stacks.functions.deploy_prepare import versions_arn
from stacks.nag import acknowledge, rendered


class EvaluationFunction(PipelineFunction):
    """The Evaluation function (``function``) and its role (``role``)."""

    RUNTIME_MODULE = "evaluation"

    def __init__(self, scope: Construct, construct_id: str, *, settings: FunctionSettings) -> None:
        super().__init__(scope, construct_id, settings)
        env, stack = settings.env_name, cdk.Stack.of(self)
        versions = versions_arn(self, env)
        hosting = [deploy_arn(self, r, env) for r in ("endpoint", "endpoint-config", "model")]
        components = components_arn(self, env)
        documents = f"arn:{stack.partition}:s3:::{settings.artifacts_bucket_name}/{contract.ARTIFACTS_EVALUATIONS_PREFIX}*"
        for actions, resources in (
            (
                ["sagemaker:DescribeEndpoint", "sagemaker:DescribeEndpointConfig", "sagemaker:DescribeModel"],
                hosting,
            ),
            (["sagemaker:DescribeInferenceComponent"], [components]),
            (["sagemaker:DescribeModelPackage"], [versions]),
            # ListModelPackages: its one resource type is optional and a listing names no version (as Register's).
            (["sagemaker:ListModelPackages"], ["*"]),
            (["s3:GetObject", "s3:PutObject"], [documents]),
        ):
            self.allow(actions, resources)
        reasons = {
            hosting[
                0
            ]: "Reads (DescribeEndpoint) the environment's named endpoints (hfpipe-<env>-<name>): what "
            "serves there is the evaluation's champion; read-only.",
            hosting[1]: "Reads the named endpoints' configs (hfpipe-<env>-<name>-v<n>-<hash>): read-only.",
            hosting[
                2
            ]: "Reads (DescribeModel) the deploys' models, whose package is the version that serves.",
            components: "Reads (DescribeInferenceComponent) the adapters on the shared base (hfpipe-<env>-*).",
            versions: "Reads the versions of this environment's model package groups only (hfpipe-<env>-<recipe>).",
        }
        for resource, reason in reasons.items():
            acknowledge(self.role, f"AwsSolutions-IAM5[Resource::{rendered(stack, resource)}]", reason)
        acknowledge(
            self.role,
            "AwsSolutions-IAM5[Resource::*]",
            "sagemaker:ListModelPackages: its resource type is optional and a listing names no version (Service "
            "Authorization Reference), as for the Register function; read-only.",
        )
        acknowledge_artifacts(
            self.role,
            settings.artifacts_bucket_name,
            contract.ARTIFACTS_EVALUATIONS_PREFIX,
            "Each run's evaluation document and its wrapper are at evaluations/<execution>/ (named at run time) "
            "of this environment's artifacts bucket only.",
        )
