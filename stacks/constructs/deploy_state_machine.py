"""The deploy state machine (Standard, JSONPath), as docs/deploy.md draws it: a registered, approved version onto
a named endpoint of this environment, created or updated blue/green with SageMaker's deployment guardrails.

Prepare -> Action? -> [none: AlreadyServing] | [record: SmokeTest -> ApprovalBeforeRecord -> Record] |
[wait: WaitForAlarms -> PrepareAgain -> Action?] | CreateModel -> CreateEndpointConfig -> ApprovalBeforeTraffic
-> CreateEndpoint | UpdateEndpoint -> poll DescribeEndpoint -> SmokeTest -> ApprovalBeforeRecord -> Record ->
Deployed. A refusal of Prepare ends at Refused with nothing created; every later error goes through DeployCleanup
to DeployFailed, after an update first putting the previous config back (the way back). The polling bounds and
the execution timeout come from hfpipe.core.deploy.deploy_limits, which counts the history they can cost (far
below 25,000 events).

Prepare's result, a ``DeployPlan`` (hfpipe/core/deploy/deploy_plan.py), is kept at ``$.deploy``; every path into
it is built by ``DeployPlan.path`` from the plan's field names, and every request is Prepare's (checked against
botocore's shapes there): this definition only sends them.
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
from hfpipe.core.deploy import deploy_limits
from hfpipe.core.deploy.deploy_plan import ACTIONS, DeployPlan
from stacks.constructs.deploy_state_machine_role import grant_deploy
from stacks.constructs.endpoint_alarms import EndpointAlarms
from stacks.constructs.pipeline_state_machine import PLAN_THROTTLING_ERRORS
from stacks.constructs.workflow import (
    CAPACITY_ATTEMPTS,
    CAPACITY_RETRY_INTERVAL,
    RETRY_INTERVAL,
    RUNNING,
    SAGEMAKER_OPTIMIZED_ERRORS,
    SAGEMAKER_SDK_ERRORS,
    THROTTLING_ATTEMPTS,
    Retryable,
    describe_sagemaker,
    fail_with,
    lambda_task,
    retry,
    retry_sagemaker,
    standard_workflow,
)
from stacks.functions.common import PassRoleGrant, deploy_arn

J = sfn.JsonPath
C = sfn.Condition
#: JSONPaths into the deploy plan, from its field names: a field that does not exist fails the synth.
P = DeployPlan.path
#: A member of one of the plan's requests (``DeployRequests``' field, then the AWS request's member).
R = DeployPlan.request_path
#: What DescribeEndpoint answered (the endpoint waits' ResultPath).
STATUS = "$.endpoint.EndpointStatus"
LIVE_CONFIG = "$.endpoint.EndpointConfigName"
FAILURE_REASON = "$.endpoint.FailureReason"
POLLS_LEFT = "$.polls.left"
#: Where a caught error, and one of the way back, are kept (as a Catch puts them: {Error, Cause}).
ERROR = "$.error"
ROLLBACK_ERROR = "$.rollback_error"
EXECUTION_NAME = "$$.Execution.Name"
PREPARE_THROTTLING_ERRORS = [*PLAN_THROTTLING_ERRORS, "AlarmLookupThrottled"]
#: DescribeEndpoint statuses after which SageMaker changes nothing more by itself.
FAILED = ("Failed", "UpdateRollbackFailed")
EXECUTION_TIMEOUT = cdk.Duration.seconds(deploy_limits.EXECUTION_TIMEOUT_SECONDS)


def _action_is(action: str) -> sfn.Condition:
    """The plan's ``action`` is ``action`` (one of deploy_plan.ACTIONS: a misspelt one fails the synth)."""
    if action not in ACTIONS:
        raise ValueError(f"deploy action {action!r}: not one of {ACTIONS}")
    return C.string_equals(P("action"), action)


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
        if sorted(functions) != sorted(self.INVOKES):
            raise ValueError(f"the deploy state machine invokes {self.INVOKES}, given {tuple(functions)}")
        self._stack = cdk.Stack.of(self)
        self._env_name = env_name
        self._functions = functions
        self._cleanup = self._error_path()
        prepare, prepare_again, wait_for_alarms = self._prepare()
        smoke = self._smoke_test_and_record()
        create_model = self._create_or_update(self._endpoint_wait(smoke))
        action = (
            sfn.Choice(self, "Action?")
            .when(_action_is("none"), sfn.Succeed(self, "AlreadyServing", output_path=P("record")))
            .when(_action_is("record"), smoke)
            .when(_action_is("wait"), wait_for_alarms)
            .otherwise(create_model)
        )
        prepare_again.next(action)
        definition = prepare.next(action)
        name = contract.deploy_state_machine_name(env_name)
        self.state_machine = standard_workflow(
            self, definition, name=name, timeout=timeout, log_group=log_group
        )
        grant_deploy(self.state_machine, env_name, functions, grant_pass_role, alarms)

    # -- building blocks ---------------------------------------------------------------------------------

    def _invoke(self, cid: str, fn_key: str, result_path: str, payload: dict) -> tasks.LambdaInvoke:
        function = self._functions[fn_key]
        return lambda_task(self, cid, function, result_path, sfn.TaskInput.from_object(payload))

    def _fail(self, cid: str) -> sfn.Fail:
        return fail_with(self, cid, ERROR)

    def _catch(self, state: Retryable) -> None:
        state.add_catch(self._cleanup, errors=["States.ALL"], result_path=ERROR)

    def _error_path(self) -> tasks.LambdaInvoke:
        """DeployCleanup -> DeployFailed: every error after Prepare. A failed clean-up still ends with the
        deploy's own error; its error is kept beside it."""
        deploy_failed = self._fail("DeployFailed")
        cleanup = self._invoke(
            "DeployCleanup",
            "deploy_cleanup",
            "$.cleanup",
            {
                "deploy": J.object_at(P()),
                "execution_name": J.string_at(EXECUTION_NAME),
                "error": J.object_at(ERROR),
                # What earlier deploys' failed clean-ups left is found by their executions' end.
                "state_machine": J.string_at("$$.StateMachine.Id"),
            },
        )
        cleanup.add_catch(deploy_failed, errors=["States.ALL"], result_path="$.cleanup_error")
        cleanup.next(deploy_failed)
        return cleanup

    def _error(self, cid: str, name: str, text: str, *values: str) -> sfn.Chain:
        """A Pass that puts {Error, Cause} at $.error, as a Catch would, and goes to DeployCleanup."""
        cause = J.format(text, *(J.string_at(v) for v in values)) if values else text
        return sfn.Pass(self, cid, parameters={"Error": name, "Cause": cause}, result_path=ERROR).next(
            self._cleanup
        )

    # -- Prepare, and its wait for rollback alarms ---------------------------------------------------------

    def _prepare(self) -> tuple[tasks.LambdaInvoke, tasks.LambdaInvoke, sfn.Wait]:
        """Prepare, and Prepare again after a wait for rollback alarms in ALARM (with the wait so far: its
        bound). A refusal ends at Refused with nothing created."""
        refused = self._fail("Refused")
        # One deploy at a time per endpoint: Prepare lists this state machine's running executions.
        again = {"input": J.object_at(P("input")), "alarm_wait": J.object_at(P("alarm_wait"))}
        prepare, prepare_again = (
            self._invoke(cid, "deploy_prepare", P(), {**payload, **RUNNING})
            for cid, payload in (("Prepare", {"input": J.object_at("$")}), ("PrepareAgain", again))
        )
        for state in (prepare, prepare_again):
            # Service Quotas throttling the fleet's quota check (hfpipe.core.run.quotas) and CloudWatch throttling
            # the alarms' look (deploy_guards.firing_alarms) are retried as the Plan's throttling is.
            retry(state, PREPARE_THROTTLING_ERRORS, THROTTLING_ATTEMPTS, RETRY_INTERVAL)
            state.add_catch(refused, errors=["States.ALL"], result_path=ERROR)
        wait_seconds = sfn.WaitTime.seconds_path(P("alarm_wait", "poll_seconds"))
        wait_for_alarms = sfn.Wait(self, "WaitForAlarms", time=wait_seconds)
        wait_for_alarms.next(prepare_again)
        return prepare, prepare_again, wait_for_alarms

    # -- SageMaker ----------------------------------------------------------------------------------------

    def _sagemaker_task(
        self, cid: str, resource: str, request: str, members: tuple[str, ...], result_path: str
    ) -> sfn.CustomState:
        """A SageMaker task sending one of Prepare's requests as built (each member from the plan's
        ``requests``)."""
        state = sfn.CustomState(
            self,
            cid,
            state_json={
                "Type": "Task",
                "Resource": f"arn:{self._stack.partition}:states:::{resource}",
                "Parameters": {f"{m}.$": R(request, m) for m in members},
                "ResultPath": result_path,
            },
        )
        sdk = resource.startswith("aws-sdk:")
        retry_sagemaker(state, SAGEMAKER_SDK_ERRORS if sdk else SAGEMAKER_OPTIMIZED_ERRORS)
        return state

    def _created(self, cid: str, resource: str, members: tuple[str, ...]) -> sfn.CustomState:
        """One of the deploy's writes (the request of the same name), caught to DeployCleanup."""
        state = self._sagemaker_task(cid, resource, cid, members, f"$.created.{cid}")
        self._catch(state)
        return state

    def _describe(self, cid: str, on_error: sfn.IChainable, error_path: str) -> tasks.CallAwsService:
        state = describe_sagemaker(
            self,
            cid,
            "describeEndpoint",
            {"EndpointName": J.string_at(P("endpoint_name"))},
            deploy_arn(self, "endpoint", self._env_name),
            "$.endpoint",
        )
        state.add_catch(on_error, errors=["States.ALL"], result_path=error_path)
        return state

    def _bounded_poll(
        self, prefix: str, max_polls: str, timed_out: sfn.IChainable
    ) -> tuple[sfn.Pass, sfn.Wait, sfn.Pass]:
        """Start -> Wait -> DescribeEndpoint -> (the caller's Choice) ... -> Count -> Left? -> Wait."""
        start = sfn.Pass(
            self, f"Start{prefix}Wait", parameters={"left": J.number_at(max_polls)}, result_path="$.polls"
        )
        wait = sfn.Wait(self, f"WaitFor{prefix}", time=sfn.WaitTime.seconds_path(P("poll_seconds")))
        count = sfn.Pass(
            self,
            f"Count{prefix}Poll",
            parameters={"left": J.math_add(J.number_at(POLLS_LEFT), -1)},
            result_path="$.polls",
        )
        count.next(
            sfn.Choice(self, f"{prefix}WaitLeft?")
            .when(C.number_less_than_equals(POLLS_LEFT, 0), timed_out)
            .otherwise(wait)
        )
        start.next(wait)
        return start, wait, count

    def _with_reason(self, cid: str, name: str, text: str, *values: str) -> sfn.Choice:
        """The error, quoting the endpoint's FailureReason when DescribeEndpoint gave one."""
        return (
            sfn.Choice(self, f"{cid}Reason?")
            .when(
                C.is_present(FAILURE_REASON),
                self._error(f"{cid}WithReason", name, text + ": {}", *values, FAILURE_REASON),
            )
            .otherwise(self._error(cid, name, text + " (no FailureReason given)", *values))
        )

    # -- the smoke test, the approval re-checks and the record ---------------------------------------------

    def _approval(self, cid: str, before: str) -> tasks.LambdaInvoke:
        """Prepare's re-check that the version is still Approved (VersionRejectedDuringDeploy if not)."""
        return self._invoke(cid, "deploy_prepare", J.DISCARD, {"recheck": J.object_at(P()), "before": before})

    def _smoke_test_and_record(self) -> tasks.LambdaInvoke:
        """SmokeTest -> ApprovalBeforeRecord -> Record -> SweepLeftovers -> Deployed; a failed smoke test or a version rejected
        meanwhile goes back to the previous config after an update (``_way_back``), else to DeployCleanup."""
        smoke = self._invoke("SmokeTest", "smoke_test", "$.smoke", {"smoke": J.object_at(P("smoke"))})
        record = self._invoke(
            "Record",
            "deploy_record",
            "$.record",
            {"deploy": J.object_at(P()), "execution_name": J.string_at(EXECUTION_NAME)},
        )
        # The version serves and passed its smoke test, but a claim could not be written (deploy_record.py):
        # nothing to clean up or put back; the error names what serves, and a rerun writes the claims.
        record.add_catch(self._fail("RecordIncomplete"), errors=["RecordIncomplete"], result_path=ERROR)
        self._catch(record)
        deployed = sfn.Succeed(self, "Deployed", output_path="$.record")
        # A deploy that succeeds also removes what earlier deploys' failed clean-ups left (deploy_cleanup.py,
        # hfpipe.core.run.cleanup.deploy_leftovers); the version serves and is recorded whatever it finds.
        sweep = self._invoke(
            "SweepLeftovers",
            "deploy_cleanup",
            "$.swept",
            {"sweep": J.object_at(P()), **RUNNING},
        )
        sweep.add_catch(deployed, errors=["States.ALL"], result_path="$.sweep_error")
        record.next(sweep).next(deployed)
        # A version rejected while the update ran is not recorded: the previous config goes back (below).
        approval_before_record = self._approval("ApprovalBeforeRecord", "the record is written")
        smoke.next(approval_before_record).next(record)
        put_back = (
            sfn.Choice(self, "PutPreviousBack?")
            .when(_action_is("update"), self._way_back())
            .otherwise(self._cleanup)
        )
        smoke.add_catch(put_back, errors=["States.ALL"], result_path=ERROR)
        approval_before_record.add_catch(put_back, errors=["States.ALL"], result_path=ERROR)
        return smoke

    # -- the endpoint's wait -------------------------------------------------------------------------------

    def _endpoint_wait(self, smoke: sfn.IChainable) -> sfn.Pass:
        """Poll DescribeEndpoint until it is InService on the plan's config (then ``smoke``), rolled back,
        failed, or out of polls; the first state of the wait."""
        timed_out = self._error(
            "EndpointWaitTimedOut",
            "EndpointWaitTimeout",
            "endpoint {} not InService on {} after {} polls",
            P("endpoint_name"),
            P("endpoint_config_name"),
            P("max_polls"),
        )
        start_wait, wait, count = self._bounded_poll("Endpoint", P("max_polls"), timed_out)
        in_service = C.string_equals(STATUS, "InService")
        wait.next(self._describe("DescribeEndpoint", self._cleanup, ERROR)).next(
            sfn.Choice(self, "EndpointStatus?")
            .when(
                C.and_(in_service, C.string_equals_json_path(LIVE_CONFIG, P("endpoint_config_name"))), smoke
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
                in_service,
                self._with_reason(
                    "DeploymentRolledBack",
                    "DeploymentRolledBack",
                    "endpoint {} was rolled back to {}",
                    P("endpoint_name"),
                    LIVE_CONFIG,
                ),
            )
            .when(
                C.or_(*(C.string_equals(STATUS, s) for s in FAILED)),
                self._with_reason(
                    "EndpointFailed", "EndpointFailed", "endpoint {} is {}", P("endpoint_name"), STATUS
                ),
            )
            .otherwise(count)
        )
        return start_wait

    # -- the way back after a failed smoke test or a rejection -------------------------------------------

    def _way_back(self) -> tasks.LambdaInvoke:
        """PutPreviousConfigBack (SageMaker's default all-at-once blue/green, sent by DeployCleanup's function
        once the endpoint can take it: its Retry waits for an endpoint still changing and retries throttling;
        deploy_way_back.py) and its own bounded poll, then DeployCleanup; the execution still fails with the
        smoke test's error. A failed way back (the update back refused, e.g. the previous config deleted
        meanwhile; failed; timed out; or ended on another config) goes to WhatServesAfterWayBack
        (deploy_guards.way_back_failed): WayBackFailed naming what serves, after DeployCleanup."""
        rollback = self._put_previous_back()
        way_back_failed = self._invoke(
            "WhatServesAfterWayBack",
            "deploy_prepare",
            J.DISCARD,
            {
                "way_back_failed": J.object_at(P()),
                "error": J.object_at(ERROR),
                "rollback_error": J.object_at(ROLLBACK_ERROR),
            },
        )
        self._catch(way_back_failed)
        way_back_failed.next(self._cleanup)
        rollback.add_catch(way_back_failed, errors=["States.ALL"], result_path=ROLLBACK_ERROR)
        rb_start, rb_wait, rb_count = self._bounded_poll(
            "Rollback",
            P("rollback_max_polls"),
            self._rollback_note(
                way_back_failed, "RollbackWaitTimeout", "endpoint {} not back on its previous config in time"
            ),
        )
        rollback.next(rb_start)
        in_service = C.string_equals(STATUS, "InService")
        back = C.string_equals_json_path(LIVE_CONFIG, P("previous", "endpoint_config_name"))
        rb_wait.next(self._describe("DescribeRolledBack", way_back_failed, ROLLBACK_ERROR)).next(
            sfn.Choice(self, "RolledBack?")
            .when(C.and_(in_service, back), self._cleanup)
            # InService on another config: the update back ended without moving (SageMaker rolled it back).
            .when(
                in_service,
                self._rollback_note(
                    way_back_failed,
                    "RollbackNotTaken",
                    "endpoint {} ended the update back InService on config {}",
                    P("endpoint_name"),
                    LIVE_CONFIG,
                ),
            )
            .when(
                C.or_(*(C.string_equals(STATUS, s) for s in FAILED)),
                self._rollback_note(
                    way_back_failed, "RollbackFailed", "endpoint {} did not go back to its previous config"
                ),
            )
            .otherwise(rb_count)
        )
        return rollback

    def _put_previous_back(self) -> tasks.LambdaInvoke:
        """PutPreviousConfigBack: DeployCleanup's function sends the Rollback request once the endpoint can
        take it, and names AWS's error codes (deploy_way_back.py): the SDK integration names a throttle and a
        refusal alike. An endpoint still changing is waited for (a Retry every poll, WAY_BACK_READY_ATTEMPTS
        at most); a throttle past botocore's retries is retried as throttling, a capacity error as capacity."""
        rollback = self._invoke(
            "PutPreviousConfigBack", "deploy_cleanup", "$.rollback", {"way_back": J.object_at(P())}
        )
        poll = cdk.Duration.seconds(deploy_limits.POLL_SECONDS)
        retry(rollback, ["EndpointNotReadyForWayBack"], deploy_limits.WAY_BACK_READY_ATTEMPTS, poll, 1)
        retry(rollback, ["WayBackThrottled"], THROTTLING_ATTEMPTS, RETRY_INTERVAL)
        retry(rollback, ["WayBackCapacity"], CAPACITY_ATTEMPTS, CAPACITY_RETRY_INTERVAL)
        return rollback

    def _rollback_note(self, then: sfn.IChainable, cid: str, text: str, *values: str) -> sfn.Chain:
        """{Error: cid, Cause: text} at $.rollback_error, then ``then``."""
        paths = values or (P("endpoint_name"),)
        return sfn.Pass(
            self,
            cid,
            parameters={"Error": cid, "Cause": J.format(text, *(J.string_at(v) for v in paths))},
            result_path=ROLLBACK_ERROR,
        ).next(then)

    # -- create or update ------------------------------------------------------------------------------

    def _create_or_update(self, start_wait: sfn.IChainable) -> sfn.CustomState:
        """CreateModel -> CreateEndpointConfig -> ApprovalBeforeTraffic -> CreateEndpoint | UpdateEndpoint ->
        the endpoint's wait; the first state."""
        create_model = self._created(
            "CreateModel", "sagemaker:createModel", ("ModelName", "ExecutionRoleArn", "Containers", "Tags")
        )
        create_config = self._created(
            "CreateEndpointConfig",
            "sagemaker:createEndpointConfig",
            ("EndpointConfigName", "ProductionVariants", "Tags"),
        )
        create_endpoint = self._created(
            "CreateEndpoint", "sagemaker:createEndpoint", ("EndpointName", "EndpointConfigName", "Tags")
        )
        # No optimized integration for UpdateEndpoint: the AWS SDK one (its errors: SageMaker.<Exception>).
        update_endpoint = self._created(
            "UpdateEndpoint",
            "aws-sdk:sagemaker:updateEndpoint",
            ("EndpointName", "EndpointConfigName", "DeploymentConfig"),
        )
        create_endpoint.next(start_wait)
        update_endpoint.next(start_wait)
        # Right before traffic moves: a version rejected since Prepare creates no endpoint and starts no update.
        approval_before_traffic = self._approval("ApprovalBeforeTraffic", "traffic moves")
        self._catch(approval_before_traffic)
        create_model.next(create_config).next(approval_before_traffic).next(
            sfn.Choice(self, "CreateOrUpdate?")
            .when(_action_is("create"), create_endpoint)
            .otherwise(update_endpoint)
        )
        return create_model
