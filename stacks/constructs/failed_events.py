"""Where the events the pipeline could not handle go: one SQS queue per environment and an alarm on it.

OnTrainingEvent and Cleanup are invoked asynchronously by EventBridge, so a failure has no caller to
see it. Two things can drop an event:

- EventBridge cannot invoke the function (throttled past the target's retries, permissions): the rule
  target's dead-letter queue gets the event
  (https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-rule-dlq.html);
- the function is invoked but fails every attempt of Lambda's asynchronous retries: the function's
  dead-letter queue gets the event, with ErrorCode/ErrorMessage attributes
  (https://docs.aws.amazon.com/lambda/latest/dg/invocation-async-retain-records.html).

Both use this queue: SSE (SQS-managed keys), TLS only, kept 14 days (SQS's maximum), and an alarm to the
environment's notification topic as soon as one message is visible (the topic's and its key's policies
admit CloudWatch for this alarm only). A lost training event costs at
most an hour (Launch's re-check); a lost abnormal-end event leaves an endpoint billing until someone
looks, which this alarm is for.
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from stacks.functions.common import colon_arn
from stacks.nag import acknowledge

RETENTION = cdk.Duration.days(14)


class FailedEvents(Construct):
    """``queue`` (the dead-letter queue of the event-driven functions and their rule targets) and
    ``alarm`` (visible messages >= 1, to ``topic``)."""

    def __init__(
        self, scope: Construct, construct_id: str, *, env_name: str, topic: sns.ITopic, topic_key: kms.IKey
    ) -> None:
        super().__init__(scope, construct_id)
        alarm_name = f"hfpipe-{env_name}-failed-events"
        self.queue = self._make_queue()
        self.alarm = self._make_alarm(env_name, alarm_name)
        self.alarm.add_alarm_action(cw_actions.SnsAction(topic))
        _admit_alarm(cdk.Stack.of(self), alarm_name, topic, topic_key)

    def _make_queue(self) -> sqs.Queue:
        """The queue: SSE, TLS only, kept RETENTION; itself a dead-letter queue, so none of its own."""
        queue = sqs.Queue(
            self,
            "Queue",
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            retention_period=RETENTION,
        )
        acknowledge(
            queue,
            "AwsSolutions-SQS3",
            "This queue is itself the dead-letter queue of the OnTrainingEvent and Cleanup functions and of "
            "their EventBridge rule targets (DeadLetterConfig of both functions and targets); nothing "
            "consumes it to fail again, so it needs no dead-letter queue of its own.",
        )
        return queue

    def _make_alarm(self, env_name: str, alarm_name: str) -> cloudwatch.Alarm:
        """The alarm on the queue's visible messages (>= 1), named ``alarm_name``."""
        return cloudwatch.Alarm(
            self,
            "Alarm",
            alarm_name=alarm_name,
            alarm_description=(
                f"hfpipe {env_name}: an EventBridge event the pipeline could not handle (a training job's end "
                "or an execution's abnormal end) is in the failed-events queue; see its ErrorMessage "
                "attribute, then `hfpipe cleanup` for an execution that may have left an endpoint."
            ),
            metric=self.queue.metric_approximate_number_of_messages_visible(
                period=cdk.Duration.minutes(5), statistic="Maximum"
            ),
            threshold=1,
            evaluation_periods=1,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            # No datapoints means no messages (SQS sends the metric only for active queues).
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )


def _admit_alarm(stack: cdk.Stack, alarm_name: str, topic: sns.ITopic, topic_key: kms.IKey) -> None:
    """The topic's and its key's policy statements that let CloudWatch publish for this alarm only."""
    # CloudWatch publishes as its service principal, which no identity policy covers: the topic's policy
    # (its only other statement denies non-TLS publishing) and the topic key's policy must admit it, for
    # this alarm only. The ARN is built from the fixed alarm name: a GetAtt would make a cycle (key ->
    # alarm -> topic -> key). Confused-deputy keys as CloudWatch documents them for SNS alarm actions.
    alarm_arn = colon_arn(stack, "cloudwatch", "alarm", alarm_name)
    from_this_alarm = {
        "ArnLike": {"aws:SourceArn": alarm_arn},
        "StringEquals": {"aws:SourceAccount": stack.account},
    }
    cloudwatch_principal = iam.ServicePrincipal("cloudwatch.amazonaws.com")
    topic.add_to_resource_policy(
        iam.PolicyStatement(
            sid="AlarmPublishes",
            principals=[cloudwatch_principal],
            actions=["sns:Publish"],
            resources=[topic.topic_arn],
            conditions=from_this_alarm,
        )
    )
    topic_key.add_to_resource_policy(
        iam.PolicyStatement(
            sid="AlarmUsesTopicKey",
            principals=[cloudwatch_principal],
            actions=["kms:GenerateDataKey", "kms:Decrypt"],
            resources=["*"],  # in a key policy, "*" is this key
            conditions=from_this_alarm,
        )
    )
