"""An endpoint's time to live (hfpipe.core.deploy.expiry): the --ttl form and its refusals (exit 2 before anything
is made), the tag a run's plan and a deploy put on what they create, what `hfpipe endpoints` shows, and the
reaper's rule."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from plan_config import dev_config

from hfpipe import contract
from hfpipe.core.deploy import expiry
from hfpipe.core.recipe.schema import RecipeError
from hfpipe.core.run.plan import build_plan
from hfpipe.local.engine.quotas import QuotaTable, default_quotas

NOW = datetime(2026, 12, 7, 17, 30, tzinfo=UTC)
OURS = {contract.TAG_MANAGED_BY: contract.PROJECT, contract.TAG_ENV: "dev"}


def test_the_ttl_form_and_its_refusals_name_the_field():
    assert [expiry.parse_ttl(t) for t in ("90m", "8h", "3d", "365d", "NONE")] == [
        5400,
        28800,
        259200,
        31536000,
        None,
    ]
    for bad in (
        "8",
        "0h",
        "1.5h",
        "8 hours",
        "366d",
        "",
        "-1h",
        "h",
        "\uff13h",
        "\u0663h",
    ):  # fullwidth, Arabic 3
        with pytest.raises(expiry.TtlError, match=r"^--ttl: .* is not accepted; accepted: a whole number"):
            expiry.parse_ttl(bad)
    with pytest.raises(expiry.TtlError, match=r"^input\.ttl: 7 is not accepted"):
        expiry.parse_ttl(7, "input.ttl")


@pytest.mark.parametrize(
    "argv",
    [
        ["start", "--env", "dev", "--recipe", "tiny-qa", "--ttl", "8x"],
        ["deploy", "--env", "dev", "--model", "tiny-qa/1", "--endpoint", "summaries", "--ttl", "1.5h"],
    ],
)
def test_a_bad_ttl_is_a_usage_error_before_anything(argv: list[str], capsys: Any, monkeypatch: Any) -> None:
    from hfpipe.cli import aws, main

    monkeypatch.setattr(aws, "clients_for", lambda *a, **k: pytest.fail("AWS was reached"))
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"error: argument --ttl: {argv[-1]!r} is not accepted; accepted: a whole number and a unit" in err


def test_ttl_is_an_option_of_a_named_endpoints_deploy(capsys: Any) -> None:
    from hfpipe.cli import main

    assert (
        main(["deploy", "--env", "dev", "--adapter", "samsum", "--model", "tiny-lora/1", "--ttl", "8h"]) == 2
    )
    assert "--ttl is an option of --endpoint" in capsys.readouterr().err


def _plan(**event: Any) -> Any:
    config = dev_config(endpoint_ttl_seconds=86400)
    quotas = QuotaTable(default_quotas()).client("eu-west-1")
    return build_plan({"recipe_name": "tiny-qa", **event}, "plan-1", config, quotas, now=NOW)


def test_a_runs_model_config_and_endpoint_carry_its_expiry_and_its_training_job_does_not():
    plan = _plan()
    assert plan.hosting_tags == [
        *plan.tags,
        {"Key": contract.TAG_EXPIRES_AT, "Value": "2026-12-08T17:30:00Z"},
    ]
    assert contract.TAG_EXPIRES_AT not in {t["Key"] for t in plan.training_job_request["Tags"]}
    assert _plan(ttl="90m").hosting_tags[-1]["Value"] == "2026-12-07T19:00:00Z"  # hfpipe start --ttl 90m
    assert _plan(ttl="none").hosting_tags == plan.tags
    with pytest.raises(RecipeError, match=r"^input\.ttl: '8 h' is not accepted"):
        _plan(ttl="8 h")


def test_what_endpoints_shows_of_the_expiry_and_the_idle_time():
    def text(**tags: str) -> str:
        return expiry.expiry_text({**OURS, **tags}, NOW)

    at = contract.TAG_EXPIRES_AT
    assert text(**{at: "2026-12-07T20:31:00Z"}) == "in 3 h"
    assert text(**{at: "2026-12-07T17:55:00Z"}) == "in 25 min"
    assert text(**{at: "2026-12-10T17:30:00Z"}) == "in 3 d"
    assert text(**{at: "2026-12-07T17:30:00Z"}) == "expired"
    day = expiry.stamp(NOW + timedelta(hours=24) - timedelta(seconds=30))  # a day's, read half a minute on
    assert text(**{at: day}) == "in 24 h"
    assert text(**{contract.TAG_KEEP: "true"}) == "none (kept)"
    assert text() == "none"
    assert text(**{at: "tomorrow"}) == "unreadable: tomorrow"
    assert expiry.idle_text(NOW - timedelta(minutes=12), NOW) == "12 min"
    assert expiry.idle_text(None, NOW) == "over 5 d"
    young = NOW - timedelta(minutes=20)
    assert expiry.idle_text(None, NOW, came_up=young) == "no call since it came up 20 min ago"
    assert expiry.idle_text(None, NOW, came_up=NOW - timedelta(days=6)) == "over 5 d"
    assert expiry.idle_text(None, NOW, known=False) == "unknown"


def test_the_reapers_rule_leaves_all_but_its_own_expired_settled_endpoints():
    past, future = (
        {contract.TAG_EXPIRES_AT: "2026-12-07T17:00:00Z"},
        {contract.TAG_EXPIRES_AT: "2026-12-08T00:00:00Z"},
    )
    assert expiry.refusal({**OURS, **past}, "InService", "dev", NOW) is None
    assert expiry.refusal({**OURS, **past}, "Failed", "dev", NOW) is None
    assert expiry.refusal({**OURS, **past, contract.TAG_KEEP: "true"}, "InService", "dev", NOW) is None
    assert expiry.refusal({**OURS, contract.TAG_KEEP: "true"}, "InService", "dev", NOW) == "no expiry (kept)"
    assert expiry.refusal({**OURS, **future}, "InService", "dev", NOW) == "expires at 2026-12-08T00:00:00Z"
    assert expiry.refusal({**OURS, **past}, "prod", "prod", NOW).startswith("not environment prod's")
    for status in ("Creating", "Updating", "SystemUpdating", "RollingBack", "Deleting", None):
        assert "not InService or Failed" in str(expiry.refusal({**OURS, **past}, status, "dev", NOW))
    assert expiry.is_expired({**OURS, **past}, "dev", NOW) and not expiry.is_expired({**past}, "dev", NOW)
