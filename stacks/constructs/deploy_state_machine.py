"""The deploy state machine (Standard, JSONPath), as docs/deploy.md draws it: a registered, approved version onto
a named endpoint of this environment, created or updated blue/green with SageMaker's deployment guardrails.

Prepare -> Action? -> [none: AlreadyServing] | [record: SmokeTest -> ApprovalBeforeRecord -> Record] |
[wait: WaitForAlarms -> PrepareAgain -> Action?] (rollback alarms in ALARM before an update writes anything:
waited for within hfpipe.core.deploy_limits' bound, then refused) |
CreateModel -> CreateEndpointConfig -> ApprovalBeforeTraffic -> CreateOrUpdate? -> CreateEndpoint |
UpdateEndpoint -> poll DescribeEndpoint (every ``poll_seconds``, at most ``max_polls`` times, both from Prepare)
-> SmokeTest -> ApprovalBeforeRecord -> Record -> Deployed. A refusal of Prepare (another deploy of the
endpoint running included) ends at Refused with nothing created; every later error goes through DeployCleanup
to DeployFailed. A failed smoke test, or a version no longer Approved before the record, after an update first
puts the previous config back (UpdateEndpoint, then its own bounded poll), so the old version keeps serving; when
that way back fails, WhatServesAfterWayBack reads what serves from the endpoint and the execution fails with
WayBackFailed naming it. The polling bounds and the execution timeout come from
hfpipe.core.deployments, which counts the history they can cost (far below 25,000 events).

Every request is Prepare's (``$.deploy.requests``, checked against botocore's shapes there); this definition
only sends them. Retry and Catch follow the pipeline's (stacks/constructs/pipeline_state_machine.py).

Over 400 lines: one definition whose states name each other (every error path ends in DeployCleanup, the way
back shares the poll of the update); split across modules, each chain would need the others' states passed in.
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
from hfpipe.core import deploy_limits
from stacks.constructs.deploy_state_machine_role import grant_deploy
from stacks.constructs.endpoint_alarms import EndpointAlarms
from stacks.constructs.pipeline_state_machine import (
    CAPACITY_ATTEMPTS,
    CAPACITY_RETRY_INTERVAL,
    CATCH_ALL_ATTEMPTS,
    LAMBDA_THROTTLING_ERRORS,
    PLAN_THROTTLING_ERRORS,
    RETRY_INTERVAL,
    SAGEMAKER_CAPACITY_ERRORS,
    SAGEMAKER_OPTIMIZED_ERRORS,
    SAGEMAKER_SDK_ERRORS,
    THROTTLING_ATTEMPTS,
    Retryable,
)
from stacks.functions.common import PassRoleGrant, deploy_arn

J = sfn.JsonPath
C = sfn.Condition
#: Where Prepare's result, and in it the requests, are kept.
DEPLOY = "$.deploy"
REQUESTS = "$.deploy.requests"
STATUS = "$.endpoint.EndpointStatus"
PREPARE_THROTTLING_ERRORS = [*PLAN_THROTTLING_ERRORS, "AlarmLookupThrottled"]
#: DescribeEndpoint statuses after which SageMaker changes nothing more by itself.
FAILED = ("Failed", "UpdateRollbackFailed")
EXECUTION_TIMEOUT = cdk.Duration.seconds(deploy_limits.EXECUTION_TIMEOUT_SECONDS)


class DeployStateMachine(Construct):
    """The deploy of one environment; ``state_machine`` is the Step Functions resource.

    ``functions`` are the Lambdas it invokes (``INVOKES``), by the name of their runtime module; ``alarms``
    the endpoints' rollback alarms (its role may describe them).
    """

    INVOKES = ("deploy_prepare", "smoke_test", "deploy_record", "deploy_cleanup")

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        functions: Mapping[str, lambda_.IFunction],
        env_name: str,
        grant_pass_role: PassRoleGrant,
        log_group: logs.ILogGroup,
        alarms: EndpointAlarms,
        timeout: cdk.Duration = EXECUTION_TIMEOUT,
    ) -> None:
        super().__init__(scope, construct_id)
        stack = cdk.Stack.of(self)
        if sorted(functions) != sorted(self.INVOKES):
            raise ValueError(f"the deploy state machine invokes {self.INVOKES}, given {tuple(functions)}")

        def retry(state: Retryable, errors: list[str], attempts: int, interval: cdk.Duration) -> None:
            state.add_retry(errors=errors, interval=interval, backoff_rate=2, max_attempts=attempts)

        def retry_sagemaker(state: Retryable, catch_all: list[str]) -> None:
            retry(state, catch_all, CATCH_ALL_ATTEMPTS, RETRY_INTERVAL)
            retry(state, SAGEMAKER_CAPACITY_ERRORS, CAPACITY_ATTEMPTS, CAPACITY_RETRY_INTERVAL)

        def invoke(cid: str, fn_key: str, result_path: str, payload: dict) -> tasks.LambdaInvoke:
            state = tasks.LambdaInvoke(
                self,
                cid,
                lambda_function=functions[fn_key],
                payload=sfn.TaskInput.from_object(payload),
                payload_response_only=True,
                result_path=result_path,
                retry_on_service_exceptions=True,
            )
            retry(state, LAMBDA_THROTTLING_ERRORS, THROTTLING_ATTEMPTS, RETRY_INTERVAL)
            return state

        def fail(cid: str) -> sfn.Fail:
            return sfn.Fail(self, cid, error_path="$.error.Error", cause_path="$.error.Cause")

        execution = J.string_at("$$.Execution.Name")
        deploy_failed = fail("DeployFailed")
        cleanup = invoke(
            "DeployCleanup",
            "deploy_cleanup",
            "$.cleanup",
            {"deploy": J.object_at(DEPLOY), "execution_name": execution, "error": J.object_at("$.error")},
        )
        # A failed clean-up still ends with the deploy's own error; its error is kept beside it.
        cleanup.add_catch(deploy_failed, errors=["States.ALL"], result_path="$.cleanup_error")
        cleanup.next(deploy_failed)

        def catch(state: Retryable) -> None:
            state.add_catch(cleanup, errors=["States.ALL"], result_path="$.error")

        def error(cid: str, name: str, text: str, *values: str) -> sfn.Chain:
            """A Pass that puts {Error, Cause} at $.error, as a Catch would, and goes to DeployCleanup."""
            cause = J.format(text, *(J.string_at(v) for v in values)) if values else text
            return sfn.Pass(
                self, cid, parameters={"Error": name, "Cause": cause}, result_path="$.error"
            ).next(cleanup)

        refused = fail("Refused")
        # One deploy at a time per endpoint: Prepare lists this state machine's running executions.
        running = {"execution_name": execution, "state_machine": J.string_at("$$.StateMachine.Id")}
        again = {"input": J.object_at("$.deploy.input"), "alarm_wait": J.object_at("$.deploy.alarm_wait")}
        # Prepare, and Prepare again after a wait for rollback alarms in ALARM (with the wait so far: its bound).
        prepare, prepare_again = (
            invoke(cid, "deploy_prepare", DEPLOY, {**payload, **running})
            for cid, payload in (("Prepare", {"input": J.object_at("$")}), ("PrepareAgain", again))
        )
        for state in (prepare, prepare_again):
            # Service Quotas throttling the fleet's quota check (hfpipe.core.quotas) and CloudWatch throttling
            # the alarms' look (deploy_guards.firing_alarms) are retried as the Plan's throttling is.
            retry(state, PREPARE_THROTTLING_ERRORS, THROTTLING_ATTEMPTS, RETRY_INTERVAL)
            state.add_catch(refused, errors=["States.ALL"], result_path="$.error")
        wait_seconds = sfn.WaitTime.seconds_path("$.deploy.alarm_wait.poll_seconds")
        wait_for_alarms = sfn.Wait(self, "WaitForAlarms", time=wait_seconds)
        wait_for_alarms.next(prepare_again)

        def sagemaker_task(cid: str, resource: str, request: str, fields: tuple[str, ...]) -> sfn.CustomState:
            """A SageMaker task sending one of Prepare's requests as built (each field from ``$.deploy.requests``)."""
            state = sfn.CustomState(
                self,
                cid,
                state_json={
                    "Type": "Task",
                    "Resource": f"arn:{stack.partition}:states:::{resource}",
                    "Parameters": {f"{f}.$": f"{REQUESTS}.{request}.{f}" for f in fields},
                    "ResultPath": f"$.created.{cid}",
                },
            )
            sdk = resource.startswith("aws-sdk:")
            retry_sagemaker(state, SAGEMAKER_SDK_ERRORS if sdk else SAGEMAKER_OPTIMIZED_ERRORS)
            catch(state)
            return state

        create_model = sagemaker_task(
            "CreateModel",
            "sagemaker:createModel",
            "CreateModel",
            ("ModelName", "ExecutionRoleArn", "Containers", "Tags"),
        )
        create_config = sagemaker_task(
            "CreateEndpointConfig",
            "sagemaker:createEndpointConfig",
            "CreateEndpointConfig",
            ("EndpointConfigName", "ProductionVariants", "Tags"),
        )
        create_endpoint = sagemaker_task(
            "CreateEndpoint",
            "sagemaker:createEndpoint",
            "CreateEndpoint",
            ("EndpointName", "EndpointConfigName", "Tags"),
        )
        # No optimized integration for UpdateEndpoint: the AWS SDK one (its errors: SageMaker.<Exception>).
        update_endpoint = sagemaker_task(
            "UpdateEndpoint",
            "aws-sdk:sagemaker:updateEndpoint",
            "UpdateEndpoint",
            ("EndpointName", "EndpointConfigName", "DeploymentConfig"),
        )

        def describe(cid: str, on_error: sfn.IChainable, error_path: str) -> tasks.CallAwsService:
            state = tasks.CallAwsService(
                self,
                cid,
                service="sagemaker",
                action="describeEndpoint",
                parameters={"EndpointName": J.string_at("$.deploy.endpoint_name")},
                iam_resources=[deploy_arn(self, "endpoint", env_name)],
                result_path="$.endpoint",
            )
            retry_sagemaker(state, SAGEMAKER_SDK_ERRORS)
            state.add_catch(on_error, errors=["States.ALL"], result_path=error_path)
            return state

        def bounded_poll(
            prefix: str, max_polls: str, timed_out: sfn.IChainable
        ) -> tuple[sfn.Pass, sfn.Wait, sfn.Pass]:
            """Start -> Wait -> DescribeEndpoint -> (the caller's Choice) ... -> Count -> Left? -> Wait."""
            start = sfn.Pass(
                self, f"Start{prefix}Wait", parameters={"left": J.number_at(max_polls)}, result_path="$.polls"
            )
            wait = sfn.Wait(self, f"WaitFor{prefix}", time=sfn.WaitTime.seconds_path("$.deploy.poll_seconds"))
            count = sfn.Pass(
                self,
                f"Count{prefix}Poll",
                parameters={"left": J.math_add(J.number_at("$.polls.left"), -1)},
                result_path="$.polls",
            )
            count.next(
                sfn.Choice(self, f"{prefix}WaitLeft?")
                .when(C.number_less_than_equals("$.polls.left", 0), timed_out)
                .otherwise(wait)
            )
            start.next(wait)
            return start, wait, count

        def with_reason(cid: str, name: str, text: str, *values: str) -> sfn.Choice:
            """The error, quoting the endpoint's FailureReason when DescribeEndpoint gave one."""
            return (
                sfn.Choice(self, f"{cid}Reason?")
                .when(
                    C.is_present("$.endpoint.FailureReason"),
                    error(f"{cid}WithReason", name, text + ": {}", *values, "$.endpoint.FailureReason"),
                )
                .otherwise(error(cid, name, text + " (no FailureReason given)", *values))
            )

        smoke = invoke("SmokeTest", "smoke_test", "$.smoke", {"smoke": J.object_at("$.deploy.smoke")})
        record = invoke(
            "Record",
            "deploy_record",
            "$.record",
            {"deploy": J.object_at(DEPLOY), "execution_name": execution},
        )
        catch(record)
        record.next(sfn.Succeed(self, "Deployed", output_path="$.record"))

        def approval(cid: str, before: str) -> tasks.LambdaInvoke:
            """Prepare's re-check that the version is still Approved (VersionRejectedDuringDeploy if not)."""
            return invoke(
                cid,
                "deploy_prepare",
                sfn.JsonPath.DISCARD,
                {"recheck": J.object_at(DEPLOY), "before": before},
            )

        # A version rejected while the update ran is not recorded: the previous config goes back (below).
        approval_before_record = approval("ApprovalBeforeRecord", "the record is written")
        smoke.next(approval_before_record).next(record)

        timed_out = error(
            "EndpointWaitTimedOut",
            "EndpointWaitTimeout",
            "endpoint {} not InService on {} after {} polls",
            "$.deploy.endpoint_name",
            "$.deploy.endpoint_config_name",
            "$.deploy.max_polls",
        )
        start_wait, wait, count = bounded_poll("Endpoint", "$.deploy.max_polls", timed_out)
        wait.next(describe("DescribeEndpoint", cleanup, "$.error")).next(
            sfn.Choice(self, "EndpointStatus?")
            .when(
                C.and_(
                    C.string_equals(STATUS, "InService"),
                    C.string_equals_json_path(
                        "$.endpoint.EndpointConfigName", "$.deploy.endpoint_config_name"
                    ),
                ),
                smoke,
            )
            # InService on another config after UpdateEndpoint: SageMaker rolled the update back (an alarm,
            # or the deployment's own failure); the old version serves. UpdateEndpoint sets the status to
            # Updating when it receives the request and keeps the old fleet (and EndpointConfigName) until
            # traffic has moved (https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_UpdateEndpoint.html);
            # if an alarm trips, SageMaker shifts all traffic back to the old fleet and the endpoint ends
            # InService on the old configuration
            # (https://docs.aws.amazon.com/sagemaker/latest/dg/deployment-guardrails-configuration.html). The
            # first look comes a whole poll interval (60 s) after the request, not in the moment before it.
            .when(
                C.string_equals(STATUS, "InService"),
                with_reason(
                    "DeploymentRolledBack",
                    "DeploymentRolledBack",
                    "endpoint {} was rolled back to {}",
                    "$.deploy.endpoint_name",
                    "$.endpoint.EndpointConfigName",
                ),
            )
            .when(
                C.or_(*(C.string_equals(STATUS, s) for s in FAILED)),
                with_reason(
                    "EndpointFailed", "EndpointFailed", "endpoint {} is {}", "$.deploy.endpoint_name", STATUS
                ),
            )
            .otherwise(count)
        )

        # A failed smoke test after an update: back to the previous config (SageMaker's default all-at-once
        # blue/green), waited for, then DeployCleanup; the execution still fails with the smoke test's error.
        rollback = sfn.CustomState(
            self,
            "PutPreviousConfigBack",
            state_json={
                "Type": "Task",
                "Resource": f"arn:{stack.partition}:states:::aws-sdk:sagemaker:updateEndpoint",
                "Parameters": {
                    f"{f}.$": f"{REQUESTS}.Rollback.{f}"
                    for f in ("EndpointName", "EndpointConfigName", "RetainAllVariantProperties")
                },
                "ResultPath": "$.rollback",
            },
        )
        retry_sagemaker(rollback, SAGEMAKER_SDK_ERRORS)
        # A failed way back (the update back refused, e.g. the previous config deleted meanwhile; failed; timed
        # out; or ended on another config): what serves is read from the endpoint (Prepare's function,
        # deploy_guards.way_back_failed) and the execution ends with WayBackFailed naming it, after DeployCleanup.
        way_back_failed = invoke(
            "WhatServesAfterWayBack",
            "deploy_prepare",
            sfn.JsonPath.DISCARD,
            {
                "way_back_failed": J.object_at(DEPLOY),
                "error": J.object_at("$.error"),
                "rollback_error": J.object_at("$.rollback_error"),
            },
        )
        catch(way_back_failed)
        way_back_failed.next(cleanup)
        rollback.add_catch(way_back_failed, errors=["States.ALL"], result_path="$.rollback_error")

        def rollback_note(cid: str, text: str, *values: str) -> sfn.Chain:
            paths = values or ("$.deploy.endpoint_name",)
            return sfn.Pass(
                self,
                cid,
                parameters={"Error": cid, "Cause": J.format(text, *(J.string_at(v) for v in paths))},
                result_path="$.rollback_error",
            ).next(way_back_failed)

        rb_start, rb_wait, rb_count = bounded_poll(
            "Rollback",
            "$.deploy.rollback_max_polls",
            rollback_note("RollbackWaitTimeout", "endpoint {} not back on its previous config in time"),
        )
        rollback.next(rb_start)
        rb_wait.next(describe("DescribeRolledBack", way_back_failed, "$.rollback_error")).next(
            sfn.Choice(self, "RolledBack?")
            .when(
                C.and_(
                    C.string_equals(STATUS, "InService"),
                    C.string_equals_json_path(
                        "$.endpoint.EndpointConfigName", "$.deploy.previous.endpoint_config_name"
                    ),
                ),
                cleanup,
            )
            # InService on another config: the update back ended without moving (SageMaker rolled it back).
            .when(
                C.string_equals(STATUS, "InService"),
                rollback_note(
                    "RollbackNotTaken",
                    "endpoint {} ended the update back InService on config {}",
                    "$.deploy.endpoint_name",
                    "$.endpoint.EndpointConfigName",
                ),
            )
            .when(
                C.or_(*(C.string_equals(STATUS, s) for s in FAILED)),
                rollback_note("RollbackFailed", "endpoint {} did not go back to its previous config"),
            )
            .otherwise(rb_count)
        )
        put_back = (
            sfn.Choice(self, "PutPreviousBack?")
            .when(C.string_equals("$.deploy.action", "update"), rollback)
            .otherwise(cleanup)
        )
        smoke.add_catch(put_back, errors=["States.ALL"], result_path="$.error")
        approval_before_record.add_catch(put_back, errors=["States.ALL"], result_path="$.error")

        create_endpoint.next(start_wait)
        update_endpoint.next(start_wait)
        # Right before traffic moves: a version rejected since Prepare creates no endpoint and starts no update.
        approval_before_traffic = approval("ApprovalBeforeTraffic", "traffic moves")
        catch(approval_before_traffic)
        create_model.next(create_config).next(approval_before_traffic).next(
            sfn.Choice(self, "CreateOrUpdate?")
            .when(C.string_equals("$.deploy.action", "create"), create_endpoint)
            .otherwise(update_endpoint)
        )
        action = (
            sfn.Choice(self, "Action?")
            .when(
                C.string_equals("$.deploy.action", "none"),
                sfn.Succeed(self, "AlreadyServing", output_path="$.deploy.record"),
            )
            .when(C.string_equals("$.deploy.action", "record"), smoke)
            .when(C.string_equals("$.deploy.action", "wait"), wait_for_alarms)
            .otherwise(create_model)
        )
        prepare_again.next(action)
        definition = prepare.next(action)
        self.state_machine = sfn.StateMachine(
            self,
            "StateMachine",
            definition_body=sfn.DefinitionBody.from_chainable(definition),
            state_machine_name=contract.deploy_state_machine_name(env_name),
            state_machine_type=sfn.StateMachineType.STANDARD,
            timeout=timeout,
            tracing_enabled=True,
            logs=sfn.LogOptions(destination=log_group, level=sfn.LogLevel.ALL, include_execution_data=False),
        )
        grant_deploy(self.state_machine, env_name, functions, grant_pass_role, alarms)
