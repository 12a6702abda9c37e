"""DeployPrepareFunction: lambda/pipeline/pipeline_lambdas/deploy_prepare.py, the deploy state machine's first
step: it reads the registered version and the named endpoint, refuses what may not be deployed, and builds the
requests the state machine sends (create, or a blue/green update).

Its role may read this environment's model package versions (hfpipe-<env>-*), its named endpoints, their
configs with their tags and the configs' models (hfpipe-<env>-*; what serves is read from them) and its deployment records (SSM), read the account's SageMaker quotas
(the fleets must fit the endpoint-usage quota), and read and deregister the endpoints' scalable targets (an
instance type change needs that before UpdateEndpoint), and read the versions' statistics documents in this
environment's artifacts bucket (model-metrics/<execution>/metrics.json, promoted/<source>/<recipe>/<n>/
metrics.json: the evaluation the gate reads, hfpipe.core.promotion.evaluation_reads); nothing else here. The stack grants it DescribeAlarms
on the named endpoints' rollback alarms (EndpointAlarms.grant_describe), which an update looks at first. The
endpoints cdk.json declares go to the function as ``DEPLOY_ENDPOINTS``, the execution role's ARN (the models'
role) as ``EXECUTION_ROLE_ARN``, cdk.json ``evaluation_gate`` as ``EVALUATION_GATE``.
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from constructs import Construct

from hfpipe import contract
from hfpipe.core.deploy import deployments
from hfpipe.core.promotion import registry
from stacks.functions.common import (
    FunctionSettings,
    PipelineFunction,
    colon_arn,
    deploy_arn,
    deployment_parameters_arn,
    grant_endpoint_scaling,
    grant_quota_reads,
)
from stacks.nag import acknowledge, rendered, rendered_value


class DeployPrepareFunction(PipelineFunction):
    """The Prepare function (``function``) and its role (``role``)."""

    RUNTIME_MODULE = "deploy_prepare"

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        settings: FunctionSettings,
        execution_role: iam.IRole,
        endpoints: tuple[deployments.EndpointSettings, ...],
        evaluation_gate: str = "advisory",
    ) -> None:
        super().__init__(
            scope,
            construct_id,
            settings,
            environment={
                "DEPLOY_ENDPOINTS": deployments.settings_json(endpoints),
                "EXECUTION_ROLE_ARN": execution_role.role_arn,
                # cdk.json evaluation_gate: Prepare refuses an unevaluated version where it is mandatory.
                "EVALUATION_GATE": evaluation_gate,
                **settings.ttl_environment(),
            },
        )
        env = settings.env_name
        versions = versions_arn(self, env)
        hosting = [deploy_arn(self, r, env) for r in ("endpoint", "endpoint-config", "model")]
        parameters = deployment_parameters_arn(self, env)
        machine_arn, executions = state_machine_arns(self, contract.deploy_state_machine_name(env))
        self._grant_reads(versions, hosting, parameters, machine_arn, executions)
        grant_endpoint_scaling(self.role, env, register=False)
        # The fleet's endpoint-usage quota, read before anything starts.
        grant_quota_reads(self.role, "Prepare", " Application Auto Scaling: as the autoscaling grant says.")
        self._acknowledge_reads(versions, hosting, parameters, executions)
        self._grant_statistics_reads(settings.artifacts_bucket_name)

    def _grant_statistics_reads(self, artifacts_bucket_name: str) -> None:
        """GetObject of the versions' statistics documents only (the evaluation the gate reads): a version's
        ModelMetrics.ModelQuality.Statistics, written by Register (model-metrics/, registry.metrics_key) or
        by a promotion into this environment (promoted/, the Promote function). A `*` inside the object key
        matches any characters, `/` included ("Using wildcards in resource ARNs",
        https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_elements_resource.html), so
        `model-metrics/*/metrics.json` is every version's document: objects named metrics.json there only."""
        stack = cdk.Stack.of(self)
        bucket = f"arn:{stack.partition}:s3:::"
        keys = [
            f"/{prefix}*/metrics.json"
            for prefix in (contract.ARTIFACTS_MODEL_METRICS_PREFIX, contract.ARTIFACTS_PROMOTED_PREFIX)
        ]
        documents = [f"{bucket}{artifacts_bucket_name}{key}" for key in keys]
        self.allow(["s3:GetObject"], documents)
        for key in keys:
            acknowledge(
                self.role,
                f"AwsSolutions-IAM5[Resource::{rendered(stack, bucket)}{rendered_value(stack, artifacts_bucket_name)}"
                f"{key}]",
                "Reads (GetObject) the model package versions' statistics documents (metrics.json, one per "
                "version, keyed by its execution or its promoted source) in this environment's artifacts bucket "
                "only: the evaluation the gate reads before traffic moves.",
            )

    def _grant_reads(
        self, versions: str, hosting: list[str], parameters: str, machine_arn: str, executions: str
    ) -> None:
        """The role's reads: versions, named endpoints and their configs and models, records, deploys; and the
        one write of a version: an override's note (UpdateModelPackage)."""
        for actions, resources in (
            (["sagemaker:DescribeModelPackage"], [versions]),
            # An override Prepare passed with, appended to the version's ApprovalDescription by the act
            # (deploy_prepare.record_override; UpdateModelPackage's resource type is model-package).
            (["sagemaker:UpdateModelPackage"], [versions]),
            (
                ["sagemaker:DescribeEndpoint", "sagemaker:DescribeEndpointConfig", "sagemaker:ListTags"],
                hosting[:2],
            ),
            # What serves (hfpipe.core.deploy.what_serves): the live config's model, for its package version.
            (["sagemaker:DescribeModel"], hosting[2:]),
            (["ssm:GetParameter"], [parameters]),
            (["states:ListExecutions"], [machine_arn]),
            (["states:DescribeExecution"], [executions]),
        ):
            self.allow(actions, resources)

    def _acknowledge_reads(self, versions: str, hosting: list[str], parameters: str, executions: str) -> None:
        """cdk-nag's acknowledgements of the reads' ARNs that end in ``*``, each with its reason."""
        stack = cdk.Stack.of(self)
        for resource, reason in (
            (
                versions,
                "Reads (DescribeModelPackage) the versions of this environment's model package groups only "
                "(hfpipe-<env>-<recipe>), numbered by SageMaker at registration, and appends an evaluation-gate "
                "override's reason to their ApprovalDescription (UpdateModelPackage, approval status unchanged).",
            ),
            (
                hosting[0],
                "Reads the environment's named endpoints (hfpipe-<env>-<name>, declared in cdk.json) and their "
                "tags: read-only.",
            ),
            (
                hosting[1],
                "Reads the named endpoints' configs (hfpipe-<env>-<name>-v<n>-<hash>, one per deploy) and their "
                "tags: read-only.",
            ),
            (
                hosting[2],
                "Reads (DescribeModel) the models the deploys made (hfpipe-<env>-<name>-v<n>-<hash>): the version "
                "an endpoint serves is its live config's model's package; read-only.",
            ),
            (
                executions,
                "Reads (DescribeExecution) the executions of this environment's deploy state machine only, to "
                "refuse a deploy while another one of the same endpoint runs.",
            ),
            (
                parameters,
                "Reads the deployment records of the environment's named endpoints, one SSM parameter per "
                "endpoint under /hfpipe/<env>/deployments/.",
            ),
        ):
            acknowledge(self.role, f"AwsSolutions-IAM5[Resource::{rendered(stack, resource)}]", reason)


def versions_arn(scope: Construct, env: str) -> str:
    """The versions of this environment's model package groups (hfpipe-<env>-*)."""
    return cdk.Stack.of(scope).format_arn(
        service="sagemaker", resource="model-package", resource_name=f"{registry.group_prefix(env)}*/*"
    )


def state_machine_arns(scope: Construct, machine: str) -> tuple[str, str]:
    """State machine ``machine``'s ARN and its executions' (for ListExecutions and DescribeExecution)."""
    # One deploy at a time per endpoint (per adapter): the state machine's running executions and their
    # inputs (named, not referenced: the state machine invokes this function). Service Authorization
    # Reference, Step Functions: ListExecutions on stateMachine, DescribeExecution on execution.
    stack = cdk.Stack.of(scope)
    machine_arn = colon_arn(stack, "states", "stateMachine", machine)
    executions = colon_arn(stack, "states", "execution", f"{machine}:*")
    return machine_arn, executions
