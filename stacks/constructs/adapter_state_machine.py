"""The adapter state machine (Standard, JSONPath): one adapter of the environment's shared base deployed,
rolled back or deleted, or the base retired (docs/adapters.md, "Deploying an adapter", draws it). Made where
cdk.json declares a shared base.

Action? -> [delete: Delete -> Gone -> Deleted] | [retire: Retire -> Retired] |
Apply -> WaitAdapter -> SmokeTest -> BakeStart -> [Bake -> BakeProbe -> BakeCheck -> Baked?] x BAKE_PROBES
-> Confirm -> Deployed; after Apply every error goes the way back (WayBack -> WayBackSettled -> Failed).

Apply's answer, the typed adapter plan (hfpipe.core.adapters.adapter_plan.AdapterPlan), is kept at ``$.plan``;
every path into it comes from ``AdapterPlan.path`` and every step asked of the function is one of
``adapter_plan.STEPS``, so a misspelt one fails the synth. Why a bake of its own: SageMaker's rolling update of
an inference component moves copies, and an adapter component has none of its own (it uses its base's), so the
smoke test, the bake (each probe must answer; the adapter's error metrics read after each) and the way back
give the same guarantees.
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
from hfpipe.core.adapters.adapter_plan import (
    DELETED,
    REQUESTS,
    RETIRED,
    ROOT_PATH,
    STEPS,
    AdapterDeleted,
    AdapterPlan,
)
from stacks.constructs.state_machine_role import acknowledge_cdk_grants, depend_on_policy_only
from stacks.constructs.workflow import RUNNING, fail_with, lambda_task, retry, standard_workflow
from stacks.functions.adapter import BAKE_PROBES, BAKE_SECONDS, AdapterFunction
from stacks.functions.common import handler_of

J = sfn.JsonPath
#: The wait for the shared base and for an adapter's component: every 30 s, for an hour at most.
POLL = cdk.Duration.seconds(30)
POLLS = 120
NOT_READY = ["AdapterNotReady"]
ERROR = "$.error"
WAY_BACK_ERROR = "$.way_back_error"
#: JSONPaths into the adapter plan, from its field names.
P = AdapterPlan.path
PLAN = ROOT_PATH
#: The execution input's action (hfpipe deploy --adapter's request; one of adapter_plan.REQUESTS).
INPUT_ACTION = "$.action"
EXECUTION_TIMEOUT = cdk.Duration.hours(3)


def _action_is(action: str) -> sfn.Condition:
    if action not in REQUESTS:
        raise ValueError(f"adapter action {action!r}: not one of {REQUESTS}")
    return sfn.Condition.string_equals(INPUT_ACTION, action)


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
        failed = fail_with(self, "Failed", ERROR)
        way_back = self._way_back(failed)
        action = (
            sfn.Choice(self, "Action?")
            .when(_action_is("delete"), self._delete())
            .when(_action_is("retire"), self._retire())
            .otherwise(self._deploy(way_back, failed))
        )
        name = contract.adapter_state_machine_name(env_name)
        self.state_machine = standard_workflow(
            self, action, name=name, timeout=EXECUTION_TIMEOUT, log_group=log_group
        )
        acknowledge_cdk_grants(self.state_machine.role, functions.values())
        depend_on_policy_only(self.state_machine)

    def _step(
        self, cid: str, step: str, result_path: str, *, waits: bool = False, **extra: object
    ) -> tasks.LambdaInvoke:
        if step not in STEPS:
            raise ValueError(f"adapter step {step!r}: not one of {STEPS}")
        payload = {
            "step": step,
            "input": J.object_at("$$.Execution.Input"),
            **RUNNING,
            **extra,
        }
        state = lambda_task(
            self, cid, self._functions["adapter"], result_path, sfn.TaskInput.from_object(payload)
        )
        if waits:
            retry(state, NOT_READY, POLLS, POLL, 1)
        return state

    def _planned(
        self, cid: str, step: str, result_path: str, *, waits: bool = False, **fields: object
    ) -> tasks.LambdaInvoke:
        """A step after Apply: it gets the plan (and ``fields``)."""
        return self._step(cid, step, result_path, waits=waits, plan=J.object_at(PLAN), **fields)

    def _deploy(self, way_back: sfn.IChainable, failed: sfn.Fail) -> sfn.Chain:
        refused = fail_with(self, "Refused", ERROR)
        # The execution's start: what of the base was made since is this execution's (retired on its way back
        # when no adapter remains), however often Apply was retried while the base came up.
        apply = self._step("Apply", "apply", PLAN, waits=True, started=J.string_at("$$.Execution.StartTime"))
        apply.add_catch(refused, errors=["AdapterRefused"], result_path=ERROR)
        # Apply failed (not refused) after it may have made the base or the component: Abandon takes back what
        # this execution made, then the execution fails with Apply's error.
        abandon = self._step(
            "Abandon", "abandon", "$.abandoned", waits=True, started=J.string_at("$$.Execution.StartTime")
        )
        abandon.add_catch(failed, errors=["States.ALL"], result_path=WAY_BACK_ERROR)
        abandon.next(failed)
        apply.add_catch(abandon, errors=["States.ALL"], result_path=ERROR)
        wait = self._planned("WaitAdapter", "wait", "$.status", waits=True)
        smoke = self._smoke("SmokeTest", "$.smoke_test")
        confirm = self._planned("Confirm", "confirm", "$.confirmed")
        for state in (wait, smoke, confirm):
            state.add_catch(way_back, errors=["States.ALL"], result_path=ERROR)
        deployed = sfn.Succeed(self, "Deployed", output_path=PLAN)
        return apply.next(wait).next(smoke).next(self._bake(way_back, confirm.next(deployed)))

    def _smoke(self, cid: str, result_path: str) -> tasks.LambdaInvoke:
        """The SmokeTest function's call of the adapter's component with its version's smoke test."""
        return tasks.LambdaInvoke(
            self,
            cid,
            lambda_function=self._functions["smoke_test"],
            payload=sfn.TaskInput.from_object(
                {"smoke": J.object_at(P("smoke")), "inference_component": J.string_at(P("component"))}
            ),
            payload_response_only=True,
            result_path=result_path,
            retry_on_service_exceptions=True,
        )

    def _bake(self, way_back: sfn.IChainable, baked_then: sfn.IChainable) -> sfn.Chain:
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
        check = self._planned(
            "BakeCheck", "bake", "$.bake", bake=J.object_at("$.bake"), probe=J.object_at("$.bake_probe")
        )
        for state in (probe, check):
            state.add_catch(way_back, errors=["States.ALL"], result_path=ERROR)
        baked = sfn.Choice(self, "Baked?").when(sfn.Condition.boolean_equals("$.bake.done", True), baked_then)
        return start.next(wait).next(probe).next(check).next(baked.otherwise(wait))

    def _way_back(self, failed: sfn.Fail) -> sfn.Chain:
        back = self._planned("WayBack", "way_back", "$.way_back", waits=True)
        settled = self._step(
            "WayBackSettled",
            "settled",
            "$.settled",
            waits=True,
            plan=J.object_at(PLAN),
            way_back=J.object_at("$.way_back"),
        )
        # The way back's own error joins the one that sent it there: the command shows both.
        both = sfn.Pass(
            self,
            "WayBackFailed",
            parameters={
                "Error.$": f"{ERROR}.Error",
                "Cause.$": (
                    f"States.Format('{{}}; the way back failed too: {{}}: {{}}', {ERROR}.Cause, "
                    f"{WAY_BACK_ERROR}.Error, {WAY_BACK_ERROR}.Cause)"
                ),
            },
            result_path=ERROR,
        )
        for state in (back, settled):
            state.add_catch(both, errors=["States.ALL"], result_path=WAY_BACK_ERROR)
        both.next(failed)
        return back.next(settled).next(failed)

    def _delete(self) -> sfn.Chain:
        refused = fail_with(self, "DeleteRefused", ERROR)
        delete = self._step("Delete", "delete", DELETED.root)
        delete.add_catch(refused, errors=["States.ALL"], result_path=ERROR)
        gone = self._step(
            "Gone", "gone", "$.gone", waits=True, component=J.string_at(AdapterDeleted.path("component"))
        )
        return delete.next(gone).next(sfn.Succeed(self, "Deleted", output_path=DELETED.root))

    def _retire(self) -> sfn.Chain:
        refused = fail_with(self, "RetireRefused", ERROR)
        retire = self._step("Retire", "retire", RETIRED.root, waits=True)
        retire.add_catch(refused, errors=["States.ALL"], result_path=ERROR)
        return retire.next(sfn.Succeed(self, "Retired", output_path=RETIRED.root))
