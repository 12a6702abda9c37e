"""A Step Functions error's cause (hfpipe.core.causes.cause_message): a Lambda error's JSON object gives its
errorMessage, any other cause is kept as it is; the Report Lambda, the deploy's way-back text and the command
all show that one message."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from plan_config import dev_config

from hfpipe.core.causes import NO_CAUSE, cause_message
from hfpipe.core.run.plan import build_plan
from hfpipe.local.engine.quotas import QuotaTable, default_quotas

LAMBDA_ERROR = json.dumps(
    {"errorMessage": "recipe.training.instance_type: bad", "errorType": "RecipeError", "stackTrace": ["..."]}
)


@pytest.mark.parametrize(
    ("cause", "message"),
    [
        (LAMBDA_ERROR, "recipe.training.instance_type: bad"),
        ("endpoint e not InService after 3 polls", "endpoint e not InService after 3 polls"),
        (json.dumps({"errorType": "Boom"}), json.dumps({"errorType": "Boom"})),  # no message: the whole cause
        (json.dumps({"errorMessage": ""}), json.dumps({"errorMessage": ""})),
        ("[1, 2]", "[1, 2]"),  # JSON, but no error object
        ("", NO_CAUSE),
        (None, NO_CAUSE),
    ],
)
def test_the_message_of_a_cause(cause: str | None, message: str) -> None:
    assert cause_message(cause) == message


def test_the_report_the_deploy_and_the_command_show_the_same_message(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[2] / "lambda" / "pipeline"))
    from pipeline_lambdas.deploy_guards import _error_text
    from pipeline_lambdas.report import build_report

    from hfpipe.cli.run.execution import failure_of

    plan = build_plan(
        {"recipe_name": "tiny-lora"}, "run-1", dev_config(), QuotaTable(default_quotas()).client("eu-west-1")
    )
    for cause in (LAMBDA_ERROR, "plain text", None):
        expected = cause_message(cause)
        caught: dict[str, Any] = {"Error": "RecipeError", **({"Cause": cause} if cause is not None else {})}
        report = build_report({"plan": plan.to_json(), "error": caught, "cleanup_error": caught})
        assert report["cause"] == report["cleanup_error"]["cause"] == expected
        assert _error_text(caught) == f"RecipeError: {expected}"
        event = {"taskFailedEventDetails": {"error": "RecipeError", "cause": cause}}
        shown = failure_of([{"type": "TaskStateEntered"}, event], {})
        assert shown == (f"RecipeError: {expected}" if cause else "RecipeError")
