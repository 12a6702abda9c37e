"""LaunchFunction: lambda/pipeline/pipeline_lambdas/launch.py, which creates the plan's training job
(idempotently: an existing job is adopted only when tagged for this environment and execution) and keeps
the waiting task's token (training_task.py).

Its role may create training jobs tagged for this environment only, read training jobs and their tags,
put task tokens, complete the waiting task (an adopted job that already ended) and pass the execution
role to SageMaker.
"""

from __future__ import annotations

from constructs import Construct

from stacks.functions import training_task
from stacks.functions.common import (
    FunctionSettings,
    PassRoleGrant,
    PipelineFunction,
    acknowledge_run_time_names,
    owned_by,
    run_arn,
)


class LaunchFunction(PipelineFunction):
    """The Launch function (``function``) and its role (``role``).

    ``grant_pass_role(grantee)`` grants iam:PassRole on the execution role only, conditioned on
    iam:PassedToService (PipelineStack's ``grant_pass_execution_role``).
    """

    RUNTIME_MODULE = "launch"

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        settings: FunctionSettings,
        grant_pass_role: PassRoleGrant,
    ) -> None:
        super().__init__(
            scope,
            construct_id,
            settings,
            environment={"ARTIFACTS_BUCKET": settings.artifacts_bucket_name},
        )
        job_arn = run_arn(self, "training-job", settings.env_name)  # <env>-*: this environment's jobs only
        self.allow(
            ["sagemaker:CreateTrainingJob", "sagemaker:AddTags"],
            [job_arn],
            owned_by(settings.env_name, "aws:RequestTag"),
        )
        # Launch's idempotency check reads the job and its tags (adopted only when this env and execution's).
        self.allow(["sagemaker:DescribeTrainingJob", "sagemaker:ListTags"], [job_arn])
        training_task.grant_tokens(self.role, settings.artifacts_bucket_name, ["s3:PutObject"])
        training_task.grant_complete_task(self.role)
        grant_pass_role(self.role)
        acknowledge_run_time_names(self.role, [job_arn])
