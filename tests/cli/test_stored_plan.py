"""`aws.stored_plan`, the command's one reader of an execution's plan: the Plan state's own exit only, read
through the type; any other state's output, however plan-shaped, is not a plan."""

from __future__ import annotations

import json
from typing import Any

import pytest

from hfpipe.cli.aws import HfpipeError, stored_plan
from hfpipe.core.plan import PlanConfig, build_plan
from hfpipe.core.plan_model import Plan
from hfpipe.local.quotas import QuotaTable, default_quotas
from stacks.image_catalog import build_catalog


@pytest.fixture(scope="module")
def plan() -> Plan:
    config = PlanConfig(
        env="dev",
        region="eu-west-1",
        role_arn="arn:aws:iam::123456789012:role/x",
        sourcedir_uri="s3://artifacts/code/sourcedir.tar.gz",
        data_bucket="data",
        artifacts_bucket="artifacts",
        image_catalog=build_catalog("eu-west-1"),
    )
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
    doc = {**plan.to_json(), "schema_version": 2}
    with pytest.raises(
        HfpipeError, match=r"^the execution's stored plan cannot be read: plan\.schema_version: 2 "
    ):
        stored_plan([exited("Plan", {"plan": doc})])
