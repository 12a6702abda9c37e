"""ReportFunction: lambda/pipeline/pipeline_lambdas/report.py, which builds the execution's report (cost,
metrics, artifacts; the training log's last lines for a failed job) and publishes it to the notification
topic.

Its role may publish to that topic and read the log streams of SageMaker's training-job log group.
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_sns as sns
from constructs import Construct

from hfpipe.core.run.logs import LOG_GROUP as TRAINING_LOG_GROUP
from stacks.functions.common import FunctionSettings, PipelineFunction, colon_arn, grant_publish
from stacks.nag import acknowledge, rendered


class ReportFunction(PipelineFunction):
    """The Report function (``function``) and its role (``role``)."""

    RUNTIME_MODULE = "report"

    def __init__(
        self, scope: Construct, construct_id: str, *, settings: FunctionSettings, topic: sns.ITopic
    ) -> None:
        super().__init__(scope, construct_id, settings, environment={"TOPIC_ARN": topic.topic_arn})
        grant_publish(self.role, topic)
        # A failed job's report carries the last lines of its log (hfpipe.core.run.logs.log_tail): the streams of
        # SageMaker's training-job log group only. DescribeLogStreams acts on the log group, GetLogEvents on
        # its log streams (Service Authorization Reference, Amazon CloudWatch Logs).
        stack = cdk.Stack.of(self)
        training_logs = colon_arn(stack, "logs", "log-group", TRAINING_LOG_GROUP)
        self.allow(["logs:DescribeLogStreams"], [training_logs])
        training_streams = f"{training_logs}:log-stream:*"
        self.allow(["logs:GetLogEvents"], [training_streams])
        acknowledge(
            self.role,
            f"AwsSolutions-IAM5[Resource::{rendered(stack, training_streams)}]",
            "SageMaker names a training job's log streams <job>/algo-<n>-<epoch> at run time; the grant is "
            "read-only (GetLogEvents) and limited to the streams of the /aws/sagemaker/TrainingJobs log group.",
        )
