"""`aws.stored_plan`, the command's one reader of an execution's plan: the Plan state's own exit only, read
through the type; any other state's output, however plan-shaped, is not a plan."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from accounts import ACCOUNT
from plan_config import dev_config

from hfpipe.cli.aws import HfpipeError, stored_plan
from hfpipe.core.run.plan import build_plan
from hfpipe.core.run.plan_model import Plan
from hfpipe.local.engine.quotas import QuotaTable, default_quotas


@pytest.fixture(scope="module")
def plan() -> Plan:
    config = dev_config()
    return build_plan(
        {"recipe_name": "tiny-lora"}, "run-1", config, QuotaTable(default_quotas()).client("eu-west-1")
    )


def exited(state: str, output: Any) -> dict[str, Any]:
    return {
        "type": "TaskStateExited",
        "stateExitedEventDetails": {"name": state, "output": json.dumps(output)},
    }


def test_the_plan_states_exit_is_the_plan(plan: Plan) -> None:
    events = [
        {"type": "ExecutionStarted", "executionStartedEventDetails": {"input": "{}"}},
        exited("Plan", {"recipe_name": "tiny-lora", "plan": plan.to_json()}),
    ]
    assert stored_plan(events) == plan


def test_no_other_state_and_no_input_is_believed(plan: Plan) -> None:
    """Before Plan exits, `$.plan` is the caller's: every other state's output may carry a forged one."""
    forged = {"plan": plan.to_json()}
    events = [
        {"type": "ExecutionStarted", "executionStartedEventDetails": {"input": json.dumps(forged)}},
        exited("Wait", forged),
        {"type": "TaskSucceeded", "taskSucceededEventDetails": {"output": json.dumps(plan.to_json())}},
        {
            "type": "LambdaFunctionSucceeded",
            "lambdaFunctionSucceededEventDetails": {"output": json.dumps(plan.to_json())},
        },
    ]
    assert stored_plan(events) is None
    # Plan's exit without a plan (it did not produce one) is no plan either.
    assert stored_plan([*events, exited("Plan", {"recipe_name": "tiny-lora"})]) is None


def test_a_stored_plan_of_another_schema_is_refused_naming_the_field(plan: Plan) -> None:
    doc = {**plan.to_json(), "schema_version": 1}
    with pytest.raises(
        HfpipeError, match=r"^the execution's stored plan cannot be read: plan\.schema_version: 1 "
    ):
        stored_plan([exited("Plan", {"plan": doc})])


def test_an_execution_of_another_state_machine_is_refused(environment, plan: Plan) -> None:
    """An ARN of another state machine, whose own state called "Plan" writes a plan naming this
    environment's resources, is not this environment's execution: resolve_execution refuses it."""
    from cli_moto import REGION, ROLE

    from hfpipe.cli.aws import execution_history, make_clients, resolve_execution

    clients = make_clients(region=REGION)

    def machine(name: str) -> str:
        definition = {
            "StartAt": "Plan",
            "States": {
                "Plan": {"Type": "Pass", "Result": plan.to_json(), "ResultPath": "$.plan", "End": True}
            },
        }
        return str(
            clients.sfn.create_state_machine(name=name, definition=json.dumps(definition), roleArn=ROLE)[
                "stateMachineArn"
            ]
        )

    ours = machine(environment.state_machine_arn.rsplit(":", 1)[-1])
    assert ours == environment.state_machine_arn
    other = machine("someone-else")
    forged = clients.sfn.start_execution(stateMachineArn=other, name="run-1", input="{}")["executionArn"]
    mine = clients.sfn.start_execution(stateMachineArn=ours, name="run-1", input="{}")["executionArn"]
    # The other machine's history does hold a "Plan" state's exit with a plan in it ...
    for _ in range(100):
        events = list(execution_history(clients.sfn, forged))
        if stored_plan(events) is not None:
            break
        time.sleep(0.05)
    assert stored_plan(events) == plan
    # ... but with --env the command refuses the execution before reading it.
    with pytest.raises(HfpipeError, match=r"ran on state machine .*someone-else.*not on environment 'dev'"):
        resolve_execution(clients, forged, "dev")
    assert resolve_execution(clients, mine, "dev")["executionArn"] == mine
    # By name, --env finds only its own state machine's execution.
    assert resolve_execution(clients, "run-1", "dev")["stateMachineArn"] == ours


@pytest.mark.parametrize(
    "arn",
    [
        f"arn:aws:states:eu-west-1:{ACCOUNT}:execution:some-other-machine:run-1",
        f"arn:aws:states:eu-west-1:{ACCOUNT}:execution:hfpipe-Bad_Env-pipeline:run-1",
    ],
)
def test_an_arn_alone_must_name_an_hfpipe_pipeline(arn: str) -> None:
    """Without --env the environment is the one in the state machine's name; any other machine is refused
    before anything is read."""
    from hfpipe.cli.aws import HfpipeError, resolve_execution

    with pytest.raises(HfpipeError, match="did not run on an hfpipe pipeline"):
        resolve_execution(None, arn, None)  # type: ignore[arg-type]
