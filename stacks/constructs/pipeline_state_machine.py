"""The pipeline state machine (Standard, JSONPath; no JSONata), as docs/pipeline.md draws it.

Plan -> Launch -> wait for the training job's end -> [Gate] -> [the evaluation: PrepareEvaluation -> Evaluate
(createProcessingJob.sync, the one `.sync`) -> StoreEvaluation; a job that failed, left no readable document or
was refused by PrepareEvaluation -> RecordEvaluationFailure, and the run goes on] -> CreateModel -> CreateEndpointConfig ->
CreateEndpoint -> poll endpoint (every plan poll_seconds, at most plan endpoint_max_polls times) ->
SmokeTest -> Register (a model package version) -> [Cleanup when keep_endpoint is false] -> Report. Any error after Launch goes through
Cleanup (and a failure report) to Fail. The training wait is an event (``.waitForTaskToken``, completed by
OnTrainingEvent), since a job may run for weeks, with an hourly re-check of the job by Launch in case the
event is lost; the endpoint wait polls DescribeEndpoint, at most 360
times (an endpoint comes up in minutes, and the bound keeps the history far below 25,000 events). The same
definition runs unchanged in local mode (hfpipe.local.engine.engine plays AWS's part).

The plan (hfpipe.core.run.plan_model.Plan) is kept at ``$.plan``; every path into it is built by ``Plan.path``
from the plan's field names, so the state machine cannot read a field the plan does not have.
"""

from __future__ import annotations

from collections.abc import Mapping

import aws_cdk as cdk
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_stepfunctions as sfn
from aws_cdk import aws_stepfunctions_tasks as tasks
from constructs import Construct

from hfpipe import contract
from hfpipe.core import limits
from hfpipe.core.run.plan_model import Plan
from stacks.constructs.state_machine_name import state_machine_name
from stacks.constructs.state_machine_role import grant_evaluation, grant_hosting
from stacks.constructs.workflow import (
    CAPACITY_ATTEMPTS,
    CAPACITY_RETRY_INTERVAL,
    LAMBDA_THROTTLING_ERRORS,
    RETRY_INTERVAL,
    SAGEMAKER_OPTIMIZED_ERRORS,
    SAGEMAKER_SDK_ERRORS,
    THROTTLING_ATTEMPTS,
    Retryable,
    describe_sagemaker,
    lambda_task,
    retry,
    retry_sagemaker,
    standard_workflow,
)
from stacks.functions.common import PassRoleGrant, run_arn

J = sfn.JsonPath
#: JSONPaths into the plan, from its field names: a field that does not exist fails the synth.
P = Plan.path
#: Raised by our own Lambdas (launch.py, core/plan.py): their class names are the error names.
LAUNCH_THROTTLING_ERRORS = ["ThrottlingException"]
LAUNCH_CAPACITY_ERRORS = ["CapacityError"]
PLAN_THROTTLING_ERRORS = ["QuotaLookupThrottled"]
#: A training job that ended Failed or Stopped (OnTrainingEvent's SendTaskFailure).
TRAINING_FAILED_ERRORS = ["TrainingJobFailed", "TrainingJobStopped"]
#: The evaluation job ended Failed or Stopped (a `.sync` task's failure: "Run a Job (.sync)",
#: https://docs.aws.amazon.com/step-functions/latest/dg/connect-to-resource.html), and StoreEvaluation finding no
#: document the gate can read (the evaluation Lambda's class name): the evaluation failed, not the run.
EVALUATION_JOB_FAILED = "States.TaskFailed"
EVALUATION_STORE_FAILED = "EvaluationFailed"
#: Where the caught error of the evaluation is kept ({Error, Cause}).
EVALUATION_ERROR = "$.evaluation_error"
#: The Launch task's own timeout: retried, each retry a re-check of the job (Launch runs again).
TRAINING_RECHECK_ERROR = "States.Timeout"
EXECUTION_TIMEOUT = cdk.Duration.seconds(limits.EXECUTION_TIMEOUT_SECONDS)


class PipelineStateMachine(Construct):
    """The fine-tuning pipeline of one environment; ``state_machine`` is the Step Functions resource.

    ``functions`` are the Lambdas it invokes (``INVOKES``), by the name of their runtime module. The
    definition is built from small named pieces: the error path, plan and training, the gate, the endpoint
    and its wait, and what follows the smoke test.
    """

    INVOKES = ("plan", "launch", "gate", "evaluation", "smoke_test", "register", "report", "cleanup")

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        functions: Mapping[str, lambda_.IFunction],
        env_name: str,
        grant_pass_role: PassRoleGrant,
        log_group: logs.ILogGroup,
        execution_role_arn: str,
        timeout: cdk.Duration = EXECUTION_TIMEOUT,
    ) -> None:
        super().__init__(scope, construct_id)
        if sorted(functions) != sorted(self.INVOKES):
            raise ValueError(f"the state machine invokes {self.INVOKES}, given {tuple(functions)}")
        self._stack = cdk.Stack.of(self)
        self._env_name = env_name
        self._functions = functions
        self._execution_role_arn = execution_role_arn
        self._cleanup_on_error = self._error_path()

        plan, launch = self._plan_and_launch()
        deploy_choice = self._deploy_choice(self._endpoint_and_smoke_test())
        evaluation = self._evaluation(deploy_choice)
        gate = self._gate(evaluation)
        after_training = (
            sfn.Choice(self, "GateEnabled?")
            .when(sfn.Condition.boolean_equals(P("gate", "enabled"), True), gate)
            .otherwise(evaluation)
        )
        definition = plan.next(launch).next(after_training)

        self.state_machine = standard_workflow(
            self, definition, name=state_machine_name(env_name), timeout=timeout, log_group=log_group
        )
        grant_hosting(self.state_machine, env_name, functions, grant_pass_role)
        grant_evaluation(self.state_machine, env_name)

    # -- building blocks ---------------------------------------------------------------------------------

    def _invoke(
        self, cid: str, fn_key: str, result_path: str | None, payload: sfn.TaskInput | None = None
    ) -> tasks.LambdaInvoke:
        # No payload: the Lambda gets the whole state (plan, training, error, ...).
        function = self._functions[fn_key]
        return lambda_task(self, cid, function, result_path if result_path else J.DISCARD, payload)

    def _fail(self, cid: str) -> sfn.Fail:
        return sfn.Fail(self, cid, error_path="$.report.error", cause_path="$.report.cause")

    def _catch(self, state: Retryable) -> None:
        state.add_catch(self._cleanup_on_error, errors=["States.ALL"], result_path="$.error")

    def _error_path(self) -> tasks.LambdaInvoke:
        """Errors after Launch: clean up what this execution created, report, fail with the original error.
        Clean-up's own failure is caught too: the report then carries both errors."""
        report_error = self._invoke("ReportError", "report", "$.report")
        report_error.next(self._fail("PipelineFailed"))
        cleanup_on_error = self._invoke("CleanupOnError", "cleanup", "$.cleanup")
        cleanup_on_error.add_catch(report_error, errors=["States.ALL"], result_path="$.cleanup_error")
        cleanup_on_error.next(report_error)
        return cleanup_on_error

    # -- plan and training -------------------------------------------------------------------------------

    def _plan_and_launch(self) -> tuple[tasks.LambdaInvoke, tasks.LambdaInvoke]:
        plan = self._invoke(
            "Plan",
            "plan",
            P(),
            sfn.TaskInput.from_object(
                {"input": J.object_at("$"), "execution_name": J.string_at("$$.Execution.Name")}
            ),
        )
        retry(plan, PLAN_THROTTLING_ERRORS, THROTTLING_ATTEMPTS, RETRY_INTERVAL)
        # Launch creates the job and returns; the task waits for OnTrainingEvent, whose SendTaskSuccess
        # output (the job description) lands in $.training. For a late or lost event, the task times out
        # every TRAINING_RECHECK_SECONDS and its Retry on States.Timeout runs Launch again, which completes
        # the task itself once DescribeTrainingJob says the job ended (launch.py; docs/pipeline.md).
        # AWS: a Task past its TimeoutSeconds fails with States.Timeout, which a Retrier may match
        # (https://docs.aws.amazon.com/step-functions/latest/dg/concepts-error-handling.html); a retried
        # attempt evaluates its Parameters again, $$.Task.Token included. The docs do not say outright that
        # the token is new, and nothing here depends on it: each attempt's Launch stores the token it got,
        # and answering a task no longer waiting (TaskTimedOut/InvalidToken) is ignored.
        launch = tasks.LambdaInvoke(
            self,
            "Launch",
            lambda_function=self._functions["launch"],
            integration_pattern=sfn.IntegrationPattern.WAIT_FOR_TASK_TOKEN,
            payload=sfn.TaskInput.from_object({"plan": J.object_at(P()), "task_token": J.task_token}),
            result_path="$.training",
            task_timeout=sfn.Timeout.duration(cdk.Duration.seconds(limits.TRAINING_RECHECK_SECONDS)),
            retry_on_service_exceptions=True,
        )
        retry(launch, LAMBDA_THROTTLING_ERRORS, THROTTLING_ATTEMPTS, RETRY_INTERVAL)
        retry(launch, LAUNCH_THROTTLING_ERRORS, THROTTLING_ATTEMPTS, RETRY_INTERVAL)
        retry(launch, LAUNCH_CAPACITY_ERRORS, CAPACITY_ATTEMPTS, CAPACITY_RETRY_INTERVAL)
        retry(launch, [TRAINING_RECHECK_ERROR], limits.TRAINING_RECHECKS, cdk.Duration.seconds(1), 1)
        launch.add_catch(self._training_failed(), errors=TRAINING_FAILED_ERRORS, result_path="$.error")
        self._catch(launch)
        return plan, launch

    def _training_failed(self) -> tasks.CallAwsService:
        """A job that ended Failed/Stopped: read its description (FailureReason, billable time) for the
        report, then fail."""
        describe_failed = describe_sagemaker(
            self,
            "DescribeFailedTraining",
            "describeTrainingJob",
            {"TrainingJobName": J.string_at(P("training_job_name"))},
            self._stack.format_arn(service="sagemaker", resource="training-job", resource_name="*"),
            "$.training",
        )
        self._catch(describe_failed)
        report_training_failed = self._invoke("ReportTrainingFailure", "report", "$.report")
        describe_failed.next(report_training_failed)
        report_training_failed.next(self._fail("TrainingFailed"))
        return describe_failed

    # -- the evaluation (docs/evaluation.md) ---------------------------------------------------------------

    def _evaluation(self, deploy_choice: sfn.Choice) -> sfn.Choice:
        """A recipe with ``evaluation``: PrepareEvaluation (the champion, read from the run's target now, and the
        whole request) -> Evaluate (the processing job, ``.sync``) -> StoreEvaluation (the document wrapped, at
        ``$.evaluation``, which Register stores with the version); without one, ``$.evaluation`` is null."""
        prepare = self._invoke(
            "PrepareEvaluation",
            "evaluation",
            "$.evaluation_job",
            sfn.TaskInput.from_object(
                {"step": "prepare", "plan": J.object_at(P()), "training": J.object_at("$.training")}
            ),
        )
        store = self._invoke(
            "StoreEvaluation",
            "evaluation",
            "$.evaluation",
            sfn.TaskInput.from_object(
                {
                    "step": "store",
                    "plan": J.object_at(P()),
                    "prepared": J.object_at("$.evaluation_job"),
                    "job": J.object_at("$.evaluation_job.job"),
                }
            ),
        )
        failed = self._evaluation_failed(deploy_choice)
        # The job's own failure (a bad document included), and PrepareEvaluation's refusal to create it (a
        # champion of another task or without model data, no model to score), fail the evaluation, not the run
        # (docs/evaluation.md, "A failed evaluation"); any other error of the steps still goes to clean-up.
        # First match wins. A refused PrepareEvaluation left no $.evaluation_job: {} there (no job, no cost).
        not_prepared = sfn.Pass(
            self, "EvaluationNotPrepared", result=sfn.Result.from_object({}), result_path="$.evaluation_job"
        )
        not_prepared.next(failed)
        prepare.add_catch(not_prepared, errors=[EVALUATION_STORE_FAILED], result_path=EVALUATION_ERROR)
        self._catch(prepare)
        store.add_catch(failed, errors=[EVALUATION_STORE_FAILED], result_path=EVALUATION_ERROR)
        self._catch(store)
        none = sfn.Pass(self, "NoEvaluation", result=sfn.Result.from_object({}), result_path="$.evaluation")
        prepare.next(self._evaluate(failed)).next(store).next(deploy_choice)
        none.next(deploy_choice)
        return (
            sfn.Choice(self, "Evaluate?")
            .when(sfn.Condition.is_not_null(P("evaluation")), prepare)
            .otherwise(none)
        )

    def _evaluation_failed(self, deploy_choice: sfn.Choice) -> tasks.LambdaInvoke:
        """RecordEvaluationFailure: the failure's record at ``$.evaluation`` (the job's status and cause, its
        instance, seconds and USD), which Register stores with the version; then the run goes on."""
        failed = self._invoke(
            "RecordEvaluationFailure",
            "evaluation",
            "$.evaluation",
            sfn.TaskInput.from_object(
                {
                    "step": "failed",
                    "plan": J.object_at(P()),
                    "prepared": J.object_at("$.evaluation_job"),
                    "error": J.object_at(EVALUATION_ERROR),
                }
            ),
        )
        self._catch(failed)
        failed.next(deploy_choice)
        return failed

    def _evaluate(self, failed: sfn.IChainable) -> sfn.CustomState:
        """CreateProcessingJob, waited on (``.sync``: Step Functions polls DescribeProcessingJob and returns its
        answer when the job has ended; a Failed or Stopped job fails the task, which goes to clean-up:
        https://docs.aws.amazon.com/step-functions/latest/dg/connect-sagemaker.html). The request is the one
        PrepareEvaluation built and checked (hfpipe.core.run.evaluation_job), field by field."""
        request = "$.evaluation_job.request"
        fields = (
            "ProcessingJobName",
            "ProcessingInputs",
            "ProcessingOutputConfig",
            "ProcessingResources",
            "StoppingCondition",
            "AppSpecification",
            "Tags",
        )
        # RoleArn as a value, not a path: moto's interpreter (5.2.5) reads the key "RoleArn.$" as a literal
        # field name (RoleArn is a keyword of its ASL grammar: Credentials), and local mode runs this definition.
        # The value is the execution role, the request's own (hfpipe.core.run.evaluation_job: the plan's
        # role_arn, the same ARN), which the role's PassRole grant names.
        state = sfn.CustomState(
            self,
            "Evaluate",
            state_json={
                "Type": "Task",
                "Resource": f"arn:{self._stack.partition}:states:::sagemaker:createProcessingJob.sync",
                "Parameters": {
                    **{f"{name}.$": f"{request}.{name}" for name in fields},
                    "RoleArn": self._execution_role_arn,
                },
                "ResultPath": "$.evaluation_job.job",
            },
        )
        retry_sagemaker(state, SAGEMAKER_OPTIMIZED_ERRORS)
        # A job that ended Failed or Stopped: States.TaskFailed, its DescribeProcessingJob answer the cause.
        state.add_catch(failed, errors=[EVALUATION_JOB_FAILED], result_path=EVALUATION_ERROR)
        self._catch(state)
        return state

    def _gate(self, deploy_choice: sfn.IChainable) -> tasks.LambdaInvoke:
        gate = self._invoke("Gate", "gate", "$.gate_result")
        self._catch(gate)
        report_gate = self._invoke("ReportGateNotPassed", "report", "$.report")
        report_gate.next(self._fail("EvaluationGateNotPassed"))
        gate.next(
            sfn.Choice(self, "GatePassed?")
            .when(sfn.Condition.boolean_equals("$.gate_result.passed", False), report_gate)
            .otherwise(deploy_choice)
        )
        return gate

    def _deploy_choice(self, deploy: sfn.IChainable) -> sfn.Choice:
        report_no_deploy = self._invoke("ReportTrainingOnly", "report", "$.report")
        report_no_deploy.next(sfn.Succeed(self, "TrainedWithoutDeploy"))
        return (
            sfn.Choice(self, "Deploy?")
            .when(sfn.Condition.is_string(P("adapter_base_model")), self._register_adapter())
            .when(sfn.Condition.boolean_equals(P("deploy"), False), report_no_deploy)
            .otherwise(deploy)
        )

    def _register(self, cid: str) -> tasks.LambdaInvoke:
        """The model (the plan, the job's description, the evaluation) becomes a version in the recipe's model
        package group; a failed registration fails the run (Catch -> CleanupOnError)."""
        register = self._invoke(
            cid,
            "register",
            "$.registered",
            sfn.TaskInput.from_object(
                {
                    "plan": J.object_at(P()),
                    "training": J.object_at("$.training"),
                    "evaluation": J.object_at("$.evaluation"),
                }
            ),
        )
        self._catch(register)
        return register

    def _register_adapter(self) -> tasks.LambdaInvoke:
        """An unmerged adapter (the plan names its base) has no endpoint of its own: it becomes a version in
        the recipe's group straight after training (and the gate), and is served on the environment's
        shared base by `hfpipe deploy --adapter` (docs/adapters.md)."""
        register = self._register("RegisterAdapter")
        report = self._invoke("ReportAdapter", "report", "$.report")
        report.next(sfn.Succeed(self, "AdapterRegistered"))
        return register.next(report)

    # -- the endpoint ------------------------------------------------------------------------------------

    def _sagemaker_task(self, cid: str, api: str, parameters: dict) -> sfn.CustomState:
        """A native SageMaker service integration (request/response), tagged like every other resource (and with
        the run's expiry: the plan's hosting_tags)."""
        state = sfn.CustomState(
            self,
            cid,
            state_json={
                "Type": "Task",
                "Resource": f"arn:{self._stack.partition}:states:::sagemaker:{api}",
                "Parameters": {**parameters, "Tags.$": P("hosting_tags")},
                # Keep the ARN under $.created (what this execution made); the rest of the state stays.
                "ResultPath": f"$.created.{api}",
            },
        )
        retry_sagemaker(state, SAGEMAKER_OPTIMIZED_ERRORS)
        self._catch(state)
        return state

    def _endpoint_and_smoke_test(self) -> sfn.IChainable:
        """CreateModel -> CreateEndpointConfig -> CreateEndpoint -> the wait, then the smoke test."""
        create_model = self._sagemaker_task(
            "CreateModel",
            "createModel",
            {
                "ModelName.$": P("model_name"),
                "ExecutionRoleArn.$": P("role_arn"),
                "PrimaryContainer": {
                    "Image.$": P("inference_image_uri"),
                    "ModelDataUrl.$": "$.training.ModelArtifacts.S3ModelArtifacts",
                    "Environment.$": P("serving_environment"),
                },
            },
        )
        create_config = self._sagemaker_task(
            "CreateEndpointConfig",
            "createEndpointConfig",
            {
                "EndpointConfigName.$": P("endpoint_config_name"),
                # Built once by the Plan (hfpipe.core.deploy.fleets.production_variant), the serving kind's
                # host image among them.
                "ProductionVariants.$": P("serving_production_variants"),
            },
        )
        create_endpoint = self._sagemaker_task(
            "CreateEndpoint",
            "createEndpoint",
            {"EndpointName.$": P("endpoint_name"), "EndpointConfigName.$": P("endpoint_config_name")},
        )
        start_endpoint_wait = sfn.Pass(
            self,
            "StartEndpointWait",
            parameters={"left": J.number_at(P("endpoint_max_polls"))},
            result_path="$.endpoint_polls",
        )
        wait_endpoint = sfn.Wait(self, "WaitForEndpoint", time=sfn.WaitTime.seconds_path(P("poll_seconds")))
        self._endpoint_wait(wait_endpoint, self._smoke_test_and_after())
        return (
            create_model.next(create_config)
            .next(create_endpoint)
            .next(start_endpoint_wait)
            .next(wait_endpoint)
        )

    def _endpoint_error(self, cid: str, error: str, cause: str, value: str) -> sfn.Pass:
        return sfn.Pass(
            self,
            cid,
            parameters={
                "Error": error,
                "Cause": J.format(cause, J.string_at(P("endpoint_name")), J.string_at(value)),
            },
            result_path="$.error",
        ).next(self._cleanup_on_error)

    def _endpoint_wait(self, wait_endpoint: sfn.Wait, in_service: sfn.IChainable) -> None:
        """Poll DescribeEndpoint every plan poll_seconds, at most plan endpoint_max_polls times."""
        # The whole description: FailureReason (present only when Failed) reaches the report.
        describe_endpoint = describe_sagemaker(
            self,
            "DescribeEndpoint",
            "describeEndpoint",
            {"EndpointName": J.string_at(P("endpoint_name"))},
            run_arn(self, "endpoint", self._env_name),
            "$.endpoint",
        )
        self._catch(describe_endpoint)
        count_down = sfn.Pass(
            self,
            "CountEndpointPoll",
            parameters={"left": J.math_add(J.number_at("$.endpoint_polls.left"), -1)},
            result_path="$.endpoint_polls",
        )
        endpoint_error = self._endpoint_error(
            "EndpointFailed", "EndpointFailed", "endpoint {} is {}", "$.endpoint.EndpointStatus"
        )
        endpoint_timeout = self._endpoint_error(
            "EndpointWaitTimedOut",
            "EndpointWaitTimeout",
            "endpoint {} not InService after {} polls",
            P("endpoint_max_polls"),
        )
        wait_endpoint.next(describe_endpoint).next(
            sfn.Choice(self, "EndpointStatus?")
            .when(sfn.Condition.string_equals("$.endpoint.EndpointStatus", "InService"), in_service)
            .when(sfn.Condition.string_equals("$.endpoint.EndpointStatus", "Failed"), endpoint_error)
            .otherwise(
                count_down.next(
                    sfn.Choice(self, "EndpointWaitLeft?")
                    .when(sfn.Condition.number_less_than_equals("$.endpoint_polls.left", 0), endpoint_timeout)
                    .otherwise(wait_endpoint)
                )
            )
        )

    # -- after the endpoint is up ------------------------------------------------------------------------

    def _smoke_test_and_after(self) -> tasks.LambdaInvoke:
        """SmokeTest -> Register -> keep the endpoint (tagged) or delete it -> Report."""
        smoke = self._invoke(
            "SmokeTest", "smoke_test", "$.smoke", sfn.TaskInput.from_object({"plan": J.object_at(P())})
        )
        self._catch(smoke)
        report_success = self._invoke("Report", "report", "$.report")
        report_success.next(sfn.Succeed(self, "Done"))
        cleanup_after_smoke = self._invoke("DeleteEndpoint", "cleanup", "$.cleanup")
        self._catch(cleanup_after_smoke)
        cleanup_after_smoke.next(report_success)
        # A model that passed the smoke test becomes a version in the recipe's model package group; a failed
        # registration fails the run (Catch -> CleanupOnError). Only the version's ARN and number go into
        # the state (the input is the plan and the job's description, already there).
        register = self._register("Register")
        smoke.next(register)
        register.next(
            sfn.Choice(self, "KeepEndpoint?")
            .when(sfn.Condition.boolean_equals(P("keep_endpoint"), True), self._tag_kept(report_success))
            .otherwise(cleanup_after_smoke)
        )
        return smoke

    def _tag_kept(self, report_success: tasks.LambdaInvoke) -> sfn.CustomState:
        """A kept endpoint carries the user's decision as a tag, so no clean-up path (an abnormal end after
        this point, `hfpipe stop`, `hfpipe cleanup`) deletes it; only `hfpipe endpoints delete NAME` does.
        Tagged after the smoke test: a kept endpoint that failed it is cleaned up like any other. A failed
        tagging does not undo the run: the endpoint stays (the report says keep_tag_error)."""
        tag_kept = sfn.CustomState(
            self,
            "TagKeptEndpoint",
            state_json={
                "Type": "Task",
                "Resource": f"arn:{self._stack.partition}:states:::aws-sdk:sagemaker:addTags",
                "Parameters": {
                    "ResourceArn.$": "$.endpoint.EndpointArn",
                    "Tags": [{"Key": contract.TAG_KEEP, "Value": "true"}],
                },
                "ResultPath": "$.keep_tag",
            },
        )
        retry_sagemaker(tag_kept, SAGEMAKER_SDK_ERRORS)
        tag_kept.add_catch(report_success, errors=["States.ALL"], result_path="$.keep_tag_error")
        tag_kept.next(report_success)
        return tag_kept
