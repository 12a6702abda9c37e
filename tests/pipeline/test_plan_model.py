"""The typed plan (hfpipe.core.run.plan_model): a plan survives JSON both ways; any other document is refused
with one line naming the field; the state machine's JSONPaths into `$.plan` name only fields the plan has."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from app_synth import state_machine_definition
from documents import assert_each_refused, strings, with_value, without
from plan_config import dev_config

from hfpipe import contract
from hfpipe.core.run.plan import build_plan
from hfpipe.core.run.plan_model import SCHEMA_VERSION, Gate, Plan, PlanFormatError
from hfpipe.local.engine.quotas import QuotaTable, default_quotas

CONFIG = dev_config()


def built(recipe_name: str, **event: Any) -> Plan:
    return build_plan(
        {"recipe_name": recipe_name, **event},
        "plan-1",
        CONFIG,
        QuotaTable(default_quotas()).client("eu-west-1"),
    )


@pytest.fixture(scope="module")
def gated() -> Plan:
    return built("tiny-mnli")  # a recipe with an evaluation gate


@pytest.mark.parametrize("recipe", ["tiny-lora", "tiny-mnli", "tiny-spot"])
def test_a_built_plan_survives_json_both_ways(recipe: str) -> None:
    plan = built(recipe)
    doc = json.loads(json.dumps(plan.to_json()))  # what the state machine keeps and hands back
    assert doc["schema_version"] == SCHEMA_VERSION
    assert Plan.from_json(doc) == plan
    assert Plan.from_json(doc).to_json() == doc


def test_the_gate_is_typed_and_a_recipe_without_one_has_it_off(gated: Plan) -> None:
    assert gated.gate.enabled is True and isinstance(gated.gate.metric, str)
    assert isinstance(gated.gate.threshold, int | float)
    assert built("tiny-lora").gate == Gate(enabled=False, metric=None, threshold=None, higher_is_better=True)


def test_serving_kind_defaults_to_the_inference_toolkit(gated: Plan) -> None:
    assert gated.serving_kind == "hf-inference"


def test_names_are_the_plans_own(gated: Plan) -> None:
    names = gated.names
    assert (names.env, names.execution_name, names.endpoint_name) == ("dev", "plan-1", gated.endpoint_name)


def _refusals(doc: dict[str, Any]) -> list[tuple[str, Any, str]]:
    return [
        (
            "another version",
            with_value(doc, ("schema_version",), 1),
            r"^plan\.schema_version: 1 is not accepted",
        ),
        (
            "version as bool",
            with_value(doc, ("schema_version",), True),
            r"^plan\.schema_version: True is not",
        ),
        ("no version", without(doc, "schema_version"), r"^plan\.schema_version: missing"),
        ("missing field", without(doc, "endpoint_name"), r"^plan\.endpoint_name: missing"),
        ("unknown field", {**doc, "endpoint_arn": "x"}, r"^plan\.endpoint_arn: unknown field"),
        (
            "wrong type",
            with_value(doc, ("instance_count",), "2"),
            r"^plan\.instance_count: '2' is not accepted; ",
        ),
        (
            "bool for int",
            with_value(doc, ("poll_seconds",), True),
            r"^plan\.poll_seconds: True is not accepted",
        ),
        (
            "null not allowed",
            with_value(doc, ("env",), None),
            r"^plan\.env: None is not accepted; accepted: a str",
        ),
        ("nested type", with_value(doc, ("gate", "enabled"), "yes"), r"^plan\.gate\.enabled: 'yes' is not"),
        ("nested missing", with_value(doc, ("gate",), {"enabled": False}), r"^plan\.gate\.metric: missing"),
        (
            "gate without metric",
            with_value(doc, ("gate", "metric"), None),
            r"^plan\.gate\.metric: null is not",
        ),
        ("list item", with_value(doc, ("expected_keys",), ["a", 1]), r"^plan\.expected_keys\[1\]: 1 is not"),
        (
            "dict value",
            with_value(doc, ("serving_environment",), {"A": 1}),
            r"^plan\.serving_environment\.A: 1",
        ),
        (
            "tag value",
            with_value(doc, ("tags",), [{"Key": "k", "Value": 3}]),
            r"^plan\.tags\[0\]\.Value: 3 is",
        ),
        ("not an object", [doc], r"^plan: expected a JSON object, got list"),
    ]


def test_every_other_document_is_refused_naming_the_field(gated: Plan) -> None:
    assert_each_refused(Plan.from_json, PlanFormatError, _refusals(gated.to_json()))


def test_path_names_fields_and_refuses_others() -> None:
    assert Plan.path() == "$.plan"
    assert Plan.path("endpoint_name") == "$.plan.endpoint_name"
    assert Plan.path("gate", "enabled") == "$.plan.gate.enabled"
    for parts in (("endpoint",), ("gate", "passed"), ("tags", "Key"), ("endpoint_name", "x")):
        with pytest.raises(ValueError, match="is not a field of the plan"):
            Plan.path(*parts)


# A JSONPath into the plan as it appears in the definition: "$.plan" and its dotted field names.
PLAN_PATH = re.compile(r"\$\.plan(?:\.[A-Za-z0-9_]+)*")


def test_every_plan_path_of_the_state_machine_names_a_plan_field(pipeline_template: dict[str, Any]) -> None:
    definition = state_machine_definition(pipeline_template, contract.state_machine_name("dev"))
    found = sorted({m for s in strings(definition) for m in PLAN_PATH.findall(s)})
    # The walk sees what the pipeline reads: the plan (Launch), the hosting's tags, the names, the gate switch.
    assert {"$.plan", "$.plan.hosting_tags", "$.plan.gate.enabled"} <= set(found)
    for path in found:
        parts = path.split(".")[2:]
        assert Plan.path(*parts) == path  # ValueError names a path the plan does not have
