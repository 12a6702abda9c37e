"""The grants of the training task's hand-over (lambda/pipeline/pipeline_lambdas/training_task.py), which
Launch and OnTrainingEvent both perform: the task token kept under the task-tokens/ prefix of the
artifacts bucket, and SendTaskSuccess/SendTaskFailure to complete the waiting task.
"""

from __future__ import annotations

from aws_cdk import aws_iam as iam

from hfpipe import contract
from stacks.functions.common import allow, grant_artifacts
from stacks.nag import acknowledge


def grant_tokens(role: iam.IRole, artifacts_bucket_name: str, actions: list[str]) -> None:
    """``actions`` on the task tokens' objects only: ``task-tokens/*`` of this environment's artifacts bucket
    (training_task.token_key), with the acknowledgement of that ``*``."""
    grant_artifacts(
        role,
        artifacts_bucket_name,
        actions,
        contract.ARTIFACTS_TASK_TOKENS_PREFIX,
        "Task tokens are kept per training job (named at run time) under the task-tokens/ prefix of "
        "this environment's artifacts bucket only.",
    )


def grant_complete_task(role: iam.IRole) -> None:
    """states:SendTaskSuccess and SendTaskFailure (training_task.complete), with their acknowledgement."""
    # They take the task token, not an ARN: they support no resource-level permissions (Service
    # Authorization Reference, Step Functions).
    allow(role, ["states:SendTaskSuccess", "states:SendTaskFailure"], ["*"])
    acknowledge(
        role,
        "AwsSolutions-IAM5[Resource::*]",
        "states:SendTaskSuccess and SendTaskFailure support no resource-level permissions (the task "
        "token names the task); Service Authorization Reference, Step Functions.",
    )
