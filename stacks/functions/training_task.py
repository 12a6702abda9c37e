"""The grants of the training task's hand-over (lambda/pipeline/pipeline_lambdas/training_task.py), which
Launch and OnTrainingEvent both perform: the task token kept under the task-tokens/ prefix of the
artifacts bucket, and SendTaskSuccess/SendTaskFailure to complete the waiting task.
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_iam as iam

from hfpipe import contract
from stacks.nag import acknowledge, rendered, rendered_value


def tokens_arn(role: iam.IRole, artifacts_bucket_name: str) -> str:
    """The task tokens' objects: ``task-tokens/*`` of this environment's artifacts bucket.

    The role acknowledges the ``*`` here (cdk-nag IAM5): tokens are kept per training job, named at run time.
    """
    stack = cdk.Stack.of(role)
    acknowledge(
        role,
        "AwsSolutions-IAM5[Resource::"
        + rendered(stack, f"arn:{stack.partition}:s3:::")
        + rendered_value(stack, artifacts_bucket_name)
        + f"/{contract.ARTIFACTS_TASK_TOKENS_PREFIX}*]",
        "Task tokens are kept per training job (named at run time) under the task-tokens/ prefix of "
        "this environment's artifacts bucket only.",
    )
    return f"arn:{stack.partition}:s3:::{artifacts_bucket_name}/{contract.ARTIFACTS_TASK_TOKENS_PREFIX}*"


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
