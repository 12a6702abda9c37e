"""The pipeline state machine's role: what its native SageMaker tasks create and read, PassRole, and the
cdk-nag acknowledgements of the run-time names and of CDK's own grants (LambdaInvoke, tracing, logs)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_stepfunctions as sfn

from hfpipe import contract
from stacks.functions.common import PassRoleGrant, allow, owned_by, run_arn
from stacks.nag import acknowledge, rendered, rendered_value

#: A state machine's native tasks that make an endpoint: allowed with this environment's request tags only.
CREATE_HOSTING = [
    "sagemaker:CreateModel",
    "sagemaker:CreateEndpointConfig",
    "sagemaker:CreateEndpoint",
    "sagemaker:AddTags",
]


def grant_hosting(
    machine: sfn.StateMachine,
    env_name: str,
    functions: Mapping[str, lambda_.IFunction],
    grant_pass_role: PassRoleGrant,
) -> None:
    """CreateModel/CreateEndpointConfig/CreateEndpoint/AddTags on this environment's run names (<env>-*) only,
    with its request tags, the reads they make, PassRole; the machine depends on the role's policy only.

    The request tags alone would let AddTags put this environment's tags on any resource of the account (another
    environment's endpoint, say); the name prefix keeps it on this environment's own."""
    stack = cdk.Stack.of(machine)
    role = machine.role
    hosting = [run_arn(machine, r, env_name) for r in ("model", "endpoint-config", "endpoint")]
    allow(role, CREATE_HOSTING, hosting, owned_by(env_name, "aws:RequestTag"))
    # TagKeptEndpoint: the keep tag alone, on this environment's own endpoints (resource tags). AddTags takes
    # aws:TagKeys and aws:RequestTag, and the endpoint resource type aws:ResourceTag (Service Authorization
    # Reference, Amazon SageMaker AI: https://docs.aws.amazon.com/service-authorization/latest/reference/
    # list_amazonsagemaker.html; tests/infra/test_iam_reference.py checks them against the reference).
    allow(
        role,
        ["sagemaker:AddTags"],
        [hosting[2]],
        {
            **owned_by(env_name, "aws:ResourceTag"),
            "ForAllValues:StringEquals": {"aws:TagKeys": [contract.TAG_KEEP]},
        },
    )
    # CreateEndpoint reads the endpoint config and CreateEndpointConfig reads the model.
    allow(role, ["sagemaker:DescribeEndpointConfig", "sagemaker:DescribeModel"], hosting)
    grant_pass_role(role)
    _acknowledge(stack, role, functions, hosting)
    depend_on_policy_only(machine)


def _acknowledge(
    stack: cdk.Stack, role: iam.IRole, functions: Mapping[str, lambda_.IFunction], hosting: list[str]
) -> None:
    job_arn = stack.format_arn(service="sagemaker", resource="training-job", resource_name="*")
    for resource in (*hosting, job_arn):
        acknowledge(
            role,
            f"AwsSolutions-IAM5[Resource::{rendered(stack, resource)}]",
            "SageMaker resource names derive from the Step Functions execution name, chosen at start "
            "time, after the environment's prefix <env>- (no other environment's names start with it); "
            "CreateModel/CreateEndpointConfig/CreateEndpoint/AddTags require the request tags "
            "hfpipe:managed-by=hfpipe and hfpipe:env=<env>; Describe* (read-only) cannot be tag-scoped "
            "before the resource exists.",
        )
    acknowledge_cdk_grants(role, functions.values())


def acknowledge_cdk_grants(role: iam.IRole, functions: Iterable[lambda_.IFunction]) -> None:
    """The cdk-nag acknowledgements of what CDK grants every state machine of the project's role: LambdaInvoke
    on each invoked function's versions and aliases, X-Ray tracing and vended log delivery."""
    stack = cdk.Stack.of(role)
    for function in functions:
        acknowledge(
            role,
            f"AwsSolutions-IAM5[Resource::{rendered_value(stack, function.function_arn)}:*]",
            "CDK's LambdaInvoke grant: lambda:InvokeFunction on this one function's versions and "
            "aliases (the ARN qualifier), no other function.",
        )
    acknowledge(
        role,
        "AwsSolutions-IAM5[Resource::*]",
        "Step Functions tracing (xray:PutTraceSegments, PutTelemetryRecords, GetSamplingRules, "
        "GetSamplingTargets) and vended log delivery (logs:CreateLogDelivery, GetLogDelivery, "
        "UpdateLogDelivery, DeleteLogDelivery, ListLogDeliveries, PutResourcePolicy, "
        "DescribeResourcePolicies, DescribeLogGroups) support no resource-level permissions.",
    )


def depend_on_policy_only(machine: sfn.StateMachine) -> None:
    """The state machine depends on its role's policy only; the RoleArn GetAtt already orders it after the
    role (cfn-lint W3005)."""
    stack = cdk.Stack.of(machine)
    resource = machine.node.default_child
    policy = machine.role.node.find_child("DefaultPolicy").node.default_child
    assert isinstance(resource, cdk.CfnResource) and isinstance(policy, cdk.CfnResource)
    resource.add_override("DependsOn", [stack.get_logical_id(policy)])


#: The rule Step Functions manages for `.sync` processing jobs (the policy its `.sync` integration needs:
#: https://docs.aws.amazon.com/step-functions/latest/dg/sagemaker-iam.html, "CreateProcessingJob", Sync).
SYNC_PROCESSING_RULE = "StepFunctionsGetEventsForSageMakerProcessingJobsRule"


def grant_evaluation(machine: sfn.StateMachine, env_name: str) -> None:
    """The Evaluate task (createProcessingJob.sync): create and tag the run's processing job (<env>-*, with its
    request tags), describe, stop and list its tags (the `.sync` wait and its stop on abort), and the managed
    EventBridge rule the wait uses; PassRole of the execution role is granted with the hosting tasks'."""
    stack = cdk.Stack.of(machine)
    role = machine.role
    jobs = run_arn(machine, "processing-job", env_name)
    rule = stack.format_arn(service="events", resource="rule", resource_name=SYNC_PROCESSING_RULE)
    for actions, resources, conditions in (
        (
            ["sagemaker:CreateProcessingJob", "sagemaker:AddTags"],
            [jobs],
            owned_by(env_name, "aws:RequestTag"),
        ),
        (["sagemaker:DescribeProcessingJob", "sagemaker:ListTags"], [jobs], None),
        (["sagemaker:StopProcessingJob"], [jobs], owned_by(env_name, "aws:ResourceTag")),
        (["events:PutTargets", "events:PutRule", "events:DescribeRule"], [rule], None),
    ):
        allow(role, actions, resources, conditions)
    acknowledge(
        role,
        f"AwsSolutions-IAM5[Resource::{rendered(stack, jobs)}]",
        "The evaluation's processing job is named after the execution (<env>-<execution>-eval), chosen at start "
        "time; creating and tagging it require the request tags hfpipe:managed-by=hfpipe and hfpipe:env=<env>, "
        "stopping it the resource tags; Describe/ListTags are read-only.",
    )
