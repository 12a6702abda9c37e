"""DeployCleanupFunction: lambda/pipeline/pipeline_lambdas/deploy_cleanup.py, where every failed deploy ends: it
deletes the model and endpoint config the execution made when no endpoint uses them, and an endpoint the
execution created (never one it was updating), and puts back autoscaling Prepare took off the old fleet; and
the way back after a failed smoke test (deploy_way_back.py: UpdateEndpoint to the previous config).

Its role may read the environment's named endpoints, their configs and models (hfpipe-<env>-*) and their tags,
delete them and update an endpoint back to a previous config only with this environment's tags, and register, scale and deregister the endpoints' variants
with Application Auto Scaling; nothing else.
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
    grant_hosting_deletes,
    owned_by,
)
from stacks.functions.deploy_prepare import state_machine_arns
from stacks.nag import acknowledge, rendered


class DeployCleanupFunction(PipelineFunction):
    """The DeployCleanup function (``function``) and its role (``role``)."""

    RUNTIME_MODULE = "deploy_cleanup"

    def __init__(self, scope: Construct, construct_id: str, *, settings: FunctionSettings) -> None:
        super().__init__(scope, construct_id, settings)
        env = settings.env_name
        hosting = [deploy_arn(self, r, env) for r in ("endpoint", "endpoint-config", "model")]
        self.allow(
            ["sagemaker:DescribeEndpointConfig", "sagemaker:DescribeModel", "sagemaker:ListTags"],
            hosting,
        )
        grant_hosting_deletes(self.role, env, hosting)
        # The way back after a failed smoke test (deploy_way_back.py): UpdateEndpoint checks the endpoint and
        # the config it moves to, both tagged by this environment's deploys.
        self.allow(["sagemaker:UpdateEndpoint"], hosting[:2], owned_by(env, "aws:ResourceTag"))
        self._grant_leftover_reads(env)
        grant_endpoint_scaling(
            self.role,
            env,
            register=True,
            also=" SageMaker's ListEndpointConfigs and ListModels (what failed deploy clean-ups left) support no "
            "resource-level permissions (Service Authorization Reference, Amazon SageMaker); what they list is "
            "read and deleted only as the other statements allow (hfpipe-<env>-* names, this environment's tags).",
        )
        acknowledge(
            self.role,
            f"AwsSolutions-IAM5[Resource::{rendered(cdk.Stack.of(self), hosting[2])}]",
            "The models of the named endpoints (hfpipe-<env>-<name>-v<n>-<hash>, one per deploy execution): "
            "read-only, or deleted only with this environment's hfpipe:managed-by and hfpipe:env tags.",
        )

    def _grant_leftover_reads(self, env: str) -> None:
        """What finding earlier deploys' leftovers reads (hfpipe.core.run.cleanup.deploy_leftovers): the
        configs and models listed (ListEndpointConfigs, ListModels: no resource-level permissions, Service
        Authorization Reference, Amazon SageMaker), the deploy executions' status (DescribeExecution on
        this environment's deploy state machine's executions) and the deployment records (GetParameter)."""
        _, executions = state_machine_arns(self, contract.deploy_state_machine_name(env))
        parameters = deployment_parameters_arn(self, env)
        for actions, resources in (
            (["sagemaker:ListEndpointConfigs", "sagemaker:ListModels"], ["*"]),
            (["states:DescribeExecution"], [executions]),
            (["ssm:GetParameter"], [parameters]),
        ):
            self.allow(actions, resources)
        stack = cdk.Stack.of(self)
        for resource, reason in (
            (
                executions,
                "Reads (DescribeExecution) the executions of this environment's deploy state machine only: "
                "what a deploy that ended unsuccessfully left is found by its execution's status.",
            ),
            (
                parameters,
                "Reads the deployment records of the environment's named endpoints (the configs they name "
                "stay), one SSM parameter per endpoint under /hfpipe/<env>/deployments/.",
            ),
        ):
            acknowledge(self.role, f"AwsSolutions-IAM5[Resource::{rendered(stack, resource)}]", reason)
