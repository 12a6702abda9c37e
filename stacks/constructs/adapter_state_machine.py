"""The adapter state machine (Standard, JSONPath): one adapter of the environment's shared base deployed,
rolled back or deleted (docs/adapters.md, "Deploying an adapter"). Made where cdk.json declares a shared base.

Action? -> [delete: Delete -> Gone -> Deleted] |
Apply -> WaitAdapter -> SmokeTest -> BakeStart -> [Bake -> BakeProbe -> BakeCheck -> Baked?] x BAKE_PROBES
-> Deployed.

Apply (the adapter function's ``apply`` step) refuses a bad request at Refused with nothing created; while it
waits for the shared base to come up it raises AdapterNotReady, retried every ``POLL`` for at most
``POLLS`` times (the base is made on the first adapter's deploy: a GPU endpoint and its model's load). After
Apply, every error (the component failed, the smoke test of the version's recipe on the adapter failed, errors
during the bake) goes the way back: WayBack puts the adapter as it was (a new component deleted, an updated
one updated back to the artifact it served), WayBackSettled waits for that, and the execution fails with the
error that sent it there. Only the one adapter's component is touched on any path.

SageMaker's rolling update of an inference component (UpdateInferenceComponent's DeploymentConfig) moves
copies of a component in batches with alarms; an adapter component has no copies of its own (it uses its
base's), so the state machine states its own mechanism with the same guarantees: the smoke test, a bake of
``BAKE_SECONDS`` that calls the adapter ``BAKE_PROBES`` times (BakeProbe: the SmokeTest function; each call
must answer) and reads the adapter's own error metrics after each (BakeCheck: any error fails it; metrics with
no datapoints never pass it, the answers do), and the way back.
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
from stacks.constructs.pipeline_state_machine import (
    LAMBDA_THROTTLING_ERRORS,
    RETRY_INTERVAL,
    THROTTLING_ATTEMPTS,
)
from stacks.constructs.state_machine_role import acknowledge_cdk_grants, depend_on_policy_only
from stacks.functions.adapter import BAKE_PROBES, BAKE_SECONDS, AdapterFunction
from stacks.functions.common import handler_of

J = sfn.JsonPath
#: The wait for the shared base and for an adapter's component: every 30 s, for an hour at most.
POLL = cdk.Duration.seconds(30)
POLLS = 120
NOT_READY = ["AdapterNotReady"]
ERROR = "$.error"
APPLIED = "$.applied"
EXECUTION_TIMEOUT = cdk.Duration.hours(3)


class AdapterStateMachine(Construct):
    """``state_machine``: the environment's adapter state machine; ``functions``: its Lambdas (``INVOKES``)."""

    INVOKES = ("adapter", "smoke_test")
    #: Runtime module -> the Handler of its own function (as PipelineLambdas.HANDLERS for the pipeline's).
    HANDLERS = {AdapterFunction.RUNTIME_MODULE: handler_of(AdapterFunction.RUNTIME_MODULE)}

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        functions: Mapping[str, lambda_.IFunction],
        env_name: str,
        log_group: logs.ILogGroup,
    ) -> None:
        super().__init__(scope, construct_id)
        self._functions = functions
        failed = sfn.Fail(self, "Failed", error_path=f"{ERROR}.Error", cause_path=f"{ERROR}.Cause")
        way_back = self._way_back(failed)
        action = (
            sfn.Choice(self, "Action?")
            .when(sfn.Condition.string_equals("$.action", "delete"), self._delete())
            .otherwise(self._deploy(way_back, failed))
        )
        self.state_machine = sfn.StateMachine(
            self,
            "StateMachine",
            definition_body=sfn.DefinitionBody.from_chainable(action),
            state_machine_name=contract.adapter_state_machine_name(env_name),
            state_machine_type=sfn.StateMachineType.STANDARD,
            timeout=EXECUTION_TIMEOUT,
            tracing_enabled=True,
            logs=sfn.LogOptions(destination=log_group, level=sfn.LogLevel.ALL, include_execution_data=False),
        )
        acknowledge_cdk_grants(self.state_machine.role, functions.values())
        depend_on_policy_only(self.state_machine)

    def _step(
        self, cid: str, step: str, result_path: str, *, waits: bool = False, **extra: object
    ) -> tasks.LambdaInvoke:
        payload = {
            "step": step,
            "input": J.object_at("$$.Execution.Input"),
            "execution_name": J.string_at("$$.Execution.Name"),
            "state_machine": J.string_at("$$.StateMachine.Id"),
            **extra,
        }
        state = tasks.LambdaInvoke(
            self,
            cid,
            lambda_function=self._functions["adapter"],
            payload=sfn.TaskInput.from_object(payload),
            payload_response_only=True,
            result_path=result_path,
            retry_on_service_exceptions=True,
        )
        state.add_retry(
            errors=LAMBDA_THROTTLING_ERRORS,
            interval=RETRY_INTERVAL,
            backoff_rate=2,
            max_attempts=THROTTLING_ATTEMPTS,
        )
        if waits:
            state.add_retry(errors=NOT_READY, interval=POLL, backoff_rate=1, max_attempts=POLLS)
        return state

    def _deploy(self, way_back: sfn.IChainable, failed: sfn.Fail) -> sfn.Chain:
        refused = sfn.Fail(self, "Refused", error_path=f"{ERROR}.Error", cause_path=f"{ERROR}.Cause")
        apply = self._step("Apply", "apply", APPLIED, waits=True)
        apply.add_catch(refused, errors=["AdapterRefused"], result_path=ERROR)
        apply.add_catch(failed, errors=["States.ALL"], result_path=ERROR)
        wait = self._step("WaitAdapter", "wait", "$.status", waits=True, applied=J.object_at(APPLIED))
        smoke = self._smoke("SmokeTest", "$.smoke_test")
        for state in (wait, smoke):
            state.add_catch(way_back, errors=["States.ALL"], result_path=ERROR)
        deployed = sfn.Succeed(self, "Deployed", output_path=APPLIED)
        return apply.next(wait).next(smoke).next(self._bake(way_back, deployed))

    def _smoke(self, cid: str, result_path: str) -> tasks.LambdaInvoke:
        """The SmokeTest function's call of the adapter's component with its version's smoke test."""
        return tasks.LambdaInvoke(
            self,
            cid,
            lambda_function=self._functions["smoke_test"],
            payload=sfn.TaskInput.from_object(
                {
                    "smoke": J.object_at(f"{APPLIED}.smoke"),
                    "inference_component": J.string_at(f"{APPLIED}.component"),
                }
            ),
            payload_response_only=True,
            result_path=result_path,
            retry_on_service_exceptions=True,
        )

    def _bake(self, way_back: sfn.IChainable, deployed: sfn.Succeed) -> sfn.Chain:
        """BAKE_PROBES rounds over BAKE_SECONDS: wait, call the adapter (each call must answer), read its
        errors (BakeCheck, the function's ``bake`` step, says when the rounds are ``done``)."""
        start = sfn.Pass(
            self,
            "BakeStart",
            result=sfn.Result.from_object({"probes": 0, "done": False}),
            result_path="$.bake",
        )
        wait = sfn.Wait(
            self, "Bake", time=sfn.WaitTime.duration(cdk.Duration.seconds(BAKE_SECONDS // BAKE_PROBES))
        )
        probe = self._smoke("BakeProbe", "$.bake_probe")
        check = self._step(
            "BakeCheck",
            "bake",
            "$.bake",
            applied=J.object_at(APPLIED),
            bake=J.object_at("$.bake"),
            probe=J.object_at("$.bake_probe"),
        )
        for state in (probe, check):
            state.add_catch(way_back, errors=["States.ALL"], result_path=ERROR)
        baked = sfn.Choice(self, "Baked?").when(sfn.Condition.boolean_equals("$.bake.done", True), deployed)
        return start.next(wait).next(probe).next(check).next(baked.otherwise(wait))

    def _way_back(self, failed: sfn.Fail) -> sfn.Chain:
        back = self._step("WayBack", "way_back", "$.way_back", applied=J.object_at(APPLIED))
        settled = self._step(
            "WayBackSettled",
            "settled",
            "$.settled",
            waits=True,
            applied=J.object_at(APPLIED),
            way_back=J.object_at("$.way_back"),
        )
        for state in (back, settled):
            state.add_catch(failed, errors=["States.ALL"], result_path="$.way_back_error")
        return back.next(settled).next(failed)

    def _delete(self) -> sfn.Chain:
        refused = sfn.Fail(self, "DeleteRefused", error_path=f"{ERROR}.Error", cause_path=f"{ERROR}.Cause")
        delete = self._step("Delete", "delete", "$.deleted")
        delete.add_catch(refused, errors=["States.ALL"], result_path=ERROR)
        gone = self._step("Gone", "gone", "$.gone", waits=True, component=J.string_at("$.deleted.component"))
        return delete.next(gone).next(sfn.Succeed(self, "Deleted", output_path="$.deleted"))
