"""The grants of the training task's hand-over (lambda/pipeline/pipeline_lambdas/training_task.py), which
Launch and OnTrainingEvent both perform: the task token kept under the task-tokens/ prefix of the
artifacts bucket, and SendTaskSuccess/SendTaskFailure to complete the waiting task.
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_iam as iam

from hfpipe import contract
from stacks.nag import acknowledge, rendered, rendered_value


def grant_tokens(role: iam.IRole, artifacts_bucket_name: str, actions: list[str]) -> None:
    """``actions`` on the task tokens' objects only: ``task-tokens/*`` of this environment's artifacts bucket
    (training_task.token_key), with the acknowledgement of that ``*``."""
    stack = cdk.Stack.of(role)
    prefix = contract.ARTIFACTS_TASK_TOKENS_PREFIX
    role.add_to_principal_policy(
        iam.PolicyStatement(
            actions=actions, resources=[f"arn:{stack.partition}:s3:::{artifacts_bucket_name}/{prefix}*"]
        )
    )
    acknowledge(
        role,
        "AwsSolutions-IAM5[Resource::"
        + rendered(stack, f"arn:{stack.partition}:s3:::")
        + rendered_value(stack, artifacts_bucket_name)
        + f"/{prefix}*]",
        "Task tokens are kept per training job (named at run time) under the task-tokens/ prefix of "
        "this environment's artifacts bucket only.",
    )


def grant_complete_task(role: iam.IRole) -> None:
    """states:SendTaskSuccess and SendTaskFailure (training_task.complete), with their acknowledgement."""
    # They take the task token, not an ARN: they support no resource-level permissions (Service
    # Authorization Reference, Step Functions).
    role.add_to_principal_policy(
        iam.PolicyStatement(actions=["states:SendTaskSuccess", "states:SendTaskFailure"], resources=["*"])
    )
    acknowledge(
        role,
        "AwsSolutions-IAM5[Resource::*]",
        "states:SendTaskSuccess and SendTaskFailure support no resource-level permissions (the task "
        "token names the task); Service Authorization Reference, Step Functions.",
    )
