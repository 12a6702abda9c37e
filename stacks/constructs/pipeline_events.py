"""The two EventBridge rules the pipeline runs on: SageMaker training-job state changes to OnTrainingEvent,
and the state machine's abnormal ends to Cleanup.

- "SageMaker Training Job State Change" (source aws.sagemaker; the detail is the job's description,
  https://docs.aws.amazon.com/sagemaker/latest/dg/automating-sagemaker-with-eventbridge.html), for
  jobs of this environment (their names start with "<env>-", hfpipe.core.names) that reached
  Completed, Failed or Stopped: OnTrainingEvent completes the waiting Launch task.
- "Step Functions Execution Status Change" (source aws.states,
  https://docs.aws.amazon.com/step-functions/latest/dg/cw-events.html) of this state machine with
  status TIMED_OUT, ABORTED or FAILED: Cleanup deletes what the execution created and sends the
  failure report when the state machine could not (lambda/pipeline/pipeline_lambdas/execution_end.py).

Each target retries for up to a day and then puts the event in the environment's failed-events queue
(stacks/constructs/failed_events.py; EventBridge's retry policy and dead-letter queues,
https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-rule-dlq.html), where an alarm reports it.
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sqs as sqs
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

TRAINING_FINAL_STATUSES = ["Completed", "Failed", "Stopped"]
EXECUTION_ABNORMAL_STATUSES = ["TIMED_OUT", "ABORTED", "FAILED"]
#: EventBridge's own default and maximum (24 h), written out: past it the event goes to the queue.
MAX_EVENT_AGE = cdk.Duration.hours(24)


class PipelineEvents(Construct):
    """``training_rule`` (to ``on_training_event``) and ``execution_end_rule`` (to ``cleanup``) of one
    environment's pipeline; the functions are the components' (stacks/functions/)."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        env_name: str,
        on_training_event: lambda_.IFunction,
        cleanup: lambda_.IFunction,
        state_machine: sfn.IStateMachine,
        failed_events: sqs.IQueue,
    ) -> None:
        super().__init__(scope, construct_id)

        def rule(
            cid: str, what: str, source: str, detail_type: str, detail: dict, function: lambda_.IFunction
        ) -> events.Rule:
            return events.Rule(
                self,
                cid,
                description=f"hfpipe {env_name}: {what}",
                event_pattern=events.EventPattern(source=[source], detail_type=[detail_type], detail=detail),
                targets=[
                    targets.LambdaFunction(
                        function,
                        retry_attempts=8,
                        max_event_age=MAX_EVENT_AGE,
                        dead_letter_queue=failed_events,
                    )
                ],
            )

        self.training_rule = rule(
            "TrainingJobStateChange",
            "training jobs that ended -> OnTrainingEvent (completes Launch)",
            "aws.sagemaker",
            "SageMaker Training Job State Change",
            {"TrainingJobStatus": TRAINING_FINAL_STATUSES, "TrainingJobName": [{"prefix": f"{env_name}-"}]},
            on_training_event,
        )
        self.execution_end_rule = rule(
            "ExecutionEnded",
            "executions that timed out, were stopped or failed -> Cleanup",
            "aws.states",
            "Step Functions Execution Status Change",
            {"status": EXECUTION_ABNORMAL_STATUSES, "stateMachineArn": [state_machine.state_machine_arn]},
            cleanup,
        )
