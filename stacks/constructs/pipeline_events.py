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
"""

from __future__ import annotations

from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

TRAINING_FINAL_STATUSES = ["Completed", "Failed", "Stopped"]
EXECUTION_ABNORMAL_STATUSES = ["TIMED_OUT", "ABORTED", "FAILED"]


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
    ) -> None:
        super().__init__(scope, construct_id)
        self.training_rule = events.Rule(
            self,
            "TrainingJobStateChange",
            description=f"hfpipe {env_name}: training jobs that ended -> OnTrainingEvent (completes Launch)",
            event_pattern=events.EventPattern(
                source=["aws.sagemaker"],
                detail_type=["SageMaker Training Job State Change"],
                detail={
                    "TrainingJobStatus": TRAINING_FINAL_STATUSES,
                    "TrainingJobName": [{"prefix": f"{env_name}-"}],
                },
            ),
            targets=[targets.LambdaFunction(on_training_event, retry_attempts=8)],
        )
        self.execution_end_rule = events.Rule(
            self,
            "ExecutionEnded",
            description=f"hfpipe {env_name}: executions that timed out, were stopped or failed -> Cleanup",
            event_pattern=events.EventPattern(
                source=["aws.states"],
                detail_type=["Step Functions Execution Status Change"],
                detail={
                    "status": EXECUTION_ABNORMAL_STATUSES,
                    "stateMachineArn": [state_machine.state_machine_arn],
                },
            ),
            targets=[targets.LambdaFunction(cleanup, retry_attempts=8)],
        )
