"""OnTrainingEvent: lambda/pipeline/pipeline_lambdas/on_training_event.py, which EventBridge invokes with
SageMaker's training-job state changes (stacks/constructs/pipeline_events.py): it reads the waiting
task's token that Launch kept, completes the task from the job's description, and deletes the token.

Asynchronous invocations that fail every attempt go to the environment's failed-events queue
(stacks/constructs/failed_events.py).

Its role may read and delete task tokens, list the task-tokens/ prefix, describe training jobs,
complete the waiting task and send to the failed-events queue.
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from hfpipe import contract
from stacks.functions import training_task
from stacks.functions.common import (
    FunctionSettings,
    PipelineFunction,
    acknowledge_run_time_names,
    sagemaker_arn,
)


class OnTrainingEventFunction(PipelineFunction):
    """The OnTrainingEvent function (``function``) and its role (``role``)."""

    RUNTIME_MODULE = "on_training_event"

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        settings: FunctionSettings,
        failed_events: sqs.IQueue,
    ) -> None:
        super().__init__(
            scope,
            construct_id,
            settings,
            environment={"ARTIFACTS_BUCKET": settings.artifacts_bucket_name},
            # EventBridge invokes it asynchronously: an event it failed on must leave a trace.
            dead_letter_queue=failed_events,
        )
        training_task.grant_tokens(
            self.role, settings.artifacts_bucket_name, ["s3:GetObject", "s3:DeleteObject"]
        )
        # Without s3:ListBucket a missing key reads as AccessDenied, not NoSuchKey
        # (https://docs.aws.amazon.com/AmazonS3/latest/API/API_GetObject.html, Permissions);
        # listing is limited to the token prefix, so a duplicate event finds "no waiting task".
        self.allow(
            ["s3:ListBucket"],
            [f"arn:{cdk.Stack.of(self).partition}:s3:::{settings.artifacts_bucket_name}"],
            {"StringLike": {"s3:prefix": f"{contract.ARTIFACTS_TASK_TOKENS_PREFIX}*"}},
        )
        job_arn = sagemaker_arn(self, "training-job")
        self.allow(["sagemaker:DescribeTrainingJob"], [job_arn])
        training_task.grant_complete_task(self.role)
        acknowledge_run_time_names(self.role, [job_arn])
