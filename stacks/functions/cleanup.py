"""CleanupFunction: lambda/pipeline/pipeline_lambdas/cleanup.py, the handler of both clean-up paths: a
state machine task, and EventBridge's abnormal end of an execution (execution_end.py, which also reports
it). Both run teardown.py: delete the endpoint, endpoint config and model the execution created and stop
its training job, each only when tagged for this environment and execution.

EventBridge's events are acted on only when they are Step Functions' status changes of this environment's
state machine: its ARN (built from its fixed name, stacks/constructs/state_machine_name.py) is the
function's ``STATE_MACHINE_ARN``.

Asynchronous invocations that fail every attempt go to the environment's failed-events queue
(stacks/constructs/failed_events.py).

Its role may read those resources and their tags, delete or stop them only with this environment's tags,
publish the abnormal end's report to the notification topic, and send to the failed-events queue.
"""

from __future__ import annotations

from aws_cdk import aws_sns as sns
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from stacks.functions.common import (
    FunctionSettings,
    PipelineFunction,
    acknowledge_run_time_names,
    grant_publish,
    owned_by,
    sagemaker_arn,
)


class CleanupFunction(PipelineFunction):
    """The Cleanup function (``function``) and its role (``role``)."""

    RUNTIME_MODULE = "cleanup"

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        settings: FunctionSettings,
        topic: sns.ITopic,
        state_machine_arn: str,
        failed_events: sqs.IQueue,
    ) -> None:
        super().__init__(
            scope,
            construct_id,
            settings,
            environment={"TOPIC_ARN": topic.topic_arn, "STATE_MACHINE_ARN": state_machine_arn},
            # EventBridge invokes it asynchronously: an abnormal end it failed on must not vanish.
            dead_letter_queue=failed_events,
        )
        grant_publish(self.role, topic)  # the report of an abnormal end (execution_end.py)
        hosting = [sagemaker_arn(self, r) for r in ("endpoint", "endpoint-config", "model")]
        job_arn = sagemaker_arn(self, "training-job")
        # Cleanup reads a resource (and its tags) before it decides; the delete itself is tag-conditioned.
        self.allow(
            [
                "sagemaker:DescribeEndpoint",
                "sagemaker:DescribeEndpointConfig",
                "sagemaker:DescribeModel",
                "sagemaker:DescribeTrainingJob",
                "sagemaker:ListTags",
            ],
            [*hosting, job_arn],
        )
        self.allow(
            [
                "sagemaker:DeleteEndpoint",
                "sagemaker:DeleteEndpointConfig",
                "sagemaker:DeleteModel",
                "sagemaker:StopTrainingJob",
            ],
            [*hosting, job_arn],
            owned_by(settings.env_name, "aws:ResourceTag"),
        )
        acknowledge_run_time_names(self.role, [job_arn, *hosting])
