"""DeployRecordFunction: lambda/pipeline/pipeline_lambdas/deploy_record.py, the deploy's last step: it tags the
named endpoint with the version it now serves, writes the deployment record to SSM and applies the declared
autoscaling.

Its role may read the environment's named endpoints, their configs and models (what serves is read from them
before it is recorded), tag them (this environment's only, and only the version,
deploy-execution and recipe tag keys), write the deployment records (/hfpipe/<env>/deployments/*), and register
and scale the endpoints' variants with Application Auto Scaling; nothing else.
"""

from __future__ import annotations

import aws_cdk as cdk
from constructs import Construct

from hfpipe import contract
from stacks.functions.common import (
    FunctionSettings,
    PipelineFunction,
    deploy_arn,
    deployment_parameters_arn,
    grant_endpoint_scaling,
    owned_by,
)
from stacks.nag import acknowledge, rendered

#: The tags Record puts on a named endpoint (AddTags replaces a key's value).
RECORD_TAG_KEYS = [contract.TAG_MODEL_VERSION, contract.TAG_DEPLOY_EXECUTION, contract.TAG_RECIPE]


class DeployRecordFunction(PipelineFunction):
    """The Record function (``function``) and its role (``role``)."""

    RUNTIME_MODULE = "deploy_record"

    def __init__(self, scope: Construct, construct_id: str, *, settings: FunctionSettings) -> None:
        super().__init__(scope, construct_id, settings)
        stack = cdk.Stack.of(self)
        env = settings.env_name
        endpoint = deploy_arn(self, "endpoint", env)
        parameters = deployment_parameters_arn(self, env)
        self.allow(
            ["sagemaker:AddTags"],
            [endpoint],
            {
                **owned_by(env, "aws:ResourceTag"),
                "ForAllValues:StringEquals": {"aws:TagKeys": RECORD_TAG_KEYS},
            },
        )
        self.allow(["ssm:PutParameter"], [parameters])
        # What serves, read before recording (hfpipe.core.deploy.what_serves): the endpoint, its config (both among
        # the scaling grants' target-service actions) and the config's model.
        models = deploy_arn(self, "model", env)
        self.allow(["sagemaker:DescribeModel"], [models])
        grant_endpoint_scaling(self.role, env, register=True)
        acknowledge(
            self.role,
            f"AwsSolutions-IAM5[Resource::{rendered(stack, parameters)}]",
            "Writes the deployment records of the environment's named endpoints, one SSM parameter per "
            "endpoint under /hfpipe/<env>/deployments/.",
        )
        acknowledge(
            self.role,
            f"AwsSolutions-IAM5[Resource::{rendered(stack, models)}]",
            "Reads (DescribeModel) the models the deploys made (hfpipe-<env>-<name>-v<n>-<hash>), to read the "
            "version the endpoint serves before recording it: read-only.",
        )
