"""The deploy state machine's role: create, update and read the environment's named endpoints and what each
deploy makes for them, PassRole on the execution role, DescribeAlarms on the rollback alarms, and the cdk-nag
acknowledgements of the prefixes and of CDK's own grants (LambdaInvoke, tracing, logs)."""

from __future__ import annotations

from collections.abc import Mapping

import aws_cdk as cdk
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_stepfunctions as sfn

from stacks.constructs.endpoint_alarms import EndpointAlarms
from stacks.constructs.state_machine_role import CREATE_HOSTING, acknowledge_cdk_grants, depend_on_policy_only
from stacks.functions.common import PassRoleGrant, allow, deploy_arn, owned_by
from stacks.nag import acknowledge, rendered


def grant_deploy(
    machine: sfn.StateMachine,
    env_name: str,
    functions: Mapping[str, lambda_.IFunction],
    grant_pass_role: PassRoleGrant,
    alarms: EndpointAlarms,
) -> None:
    """Create (this environment's request tags), update (its resource tags) and read the named endpoints,
    their configs and models; PassRole; DescribeAlarms on the rollback alarms."""
    stack = cdk.Stack.of(machine)
    role = machine.role
    hosting = [deploy_arn(machine, r, env_name) for r in ("model", "endpoint-config", "endpoint")]
    for actions, resources, conditions in (
        (CREATE_HOSTING, hosting, owned_by(env_name, "aws:RequestTag")),
        # The endpoint and both configs (the new one; the previous one when putting it back).
        (["sagemaker:UpdateEndpoint"], hosting[1:], owned_by(env_name, "aws:ResourceTag")),
        # CreateEndpoint reads the endpoint config, CreateEndpointConfig the model.
        (["sagemaker:DescribeEndpointConfig", "sagemaker:DescribeModel"], hosting[:2], None),
    ):
        allow(role, actions, resources, conditions)
    grant_pass_role(role)
    alarms.grant_describe(role)
    for resource in hosting:
        acknowledge(
            role,
            f"AwsSolutions-IAM5[Resource::{rendered(stack, resource)}]",
            "The named endpoints of this environment (hfpipe-<env>-<name>) and the configs and models each "
            "deploy makes for them (hfpipe-<env>-<name>-v<n>-<hash>); creating requires the request tags "
            "hfpipe:managed-by and hfpipe:env, updating those resource tags; Describe* is read-only.",
        )
    acknowledge_cdk_grants(role, functions.values())
    depend_on_policy_only(machine)
