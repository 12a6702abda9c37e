"""`hfpipe report` of an adapter run (its plan names adapter_base_model) says where it is served and the share
of the serving cost the rule gives it: from the environment's shared base in cdk.json, the fleet's price and
shared_vs_separate's figures (hfpipe.cli.adapter_report). Pure: plans built with the local quota table, the
Report Lambda's report made in process, no AWS."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from plan_config import dev_config
from rich.console import Console, Group

from hfpipe.cli.execution import Snapshot
from hfpipe.cli.report import build_report, render_report
from hfpipe.core.plan import build_plan
from hfpipe.local import checkout
from hfpipe.local.checkout import CHECKOUT_ENV, NEEDED
from hfpipe.local.quotas import QuotaTable, default_quotas

ROOT = Path(__file__).resolve().parents[2]
QUOTAS = QuotaTable(default_quotas()).client("eu-west-1")


@pytest.fixture(scope="module")
def config():
    return dev_config()


def reported(config, recipe: str, monkeypatch: pytest.MonkeyPatch) -> tuple[dict, str]:
    """The report `hfpipe report` prints for a completed run of ``recipe`` (the ReportAdapter state's own
    report in the execution's output), as a dict and as the printed text."""
    monkeypatch.syspath_prepend(str(ROOT / "lambda" / "pipeline"))
    from pipeline_lambdas.report import build_report as lambda_report

    plan = build_plan({"recipe_name": recipe}, f"{recipe}-1", config, QUOTAS)
    output = {
        "report": lambda_report({"plan": plan.to_json(), "training": {"TrainingJobStatus": "Completed"}})
    }
    snap = Snapshot("arn:x", f"{recipe}-1", "SUCCEEDED", datetime.now(UTC), None, plan=plan, output=output)
    report = build_report(None, snap)  # type: ignore[arg-type]  # a succeeded run reads no AWS
    console = Console(file=io.StringIO(), width=1000, record=True, color_system=None)
    console.print(Group(*render_report(report, plan.env)))
    return report, console.export_text()


def checkout_with(tmp_path: Path, shared_base: dict | None) -> Path:
    """A checkout whose cdk.json is the project's with ``shared_base`` declared for dev (None: none)."""
    for name in NEEDED:
        (tmp_path / name).mkdir(parents=True, exist_ok=True)
    (tmp_path / "cdk.json").rmdir()
    cdk = json.loads((ROOT / "cdk.json").read_text())
    dev = cdk["context"]["hfpipe:environments"]["dev"]
    dev.pop("shared_base", None)
    if shared_base is not None:
        dev["shared_base"] = shared_base
    (tmp_path / "cdk.json").write_text(json.dumps(cdk))
    return tmp_path


def adapter_row(text: str) -> str:
    [row] = [line for line in text.splitlines() if line.startswith("│ adapter ")]
    return " ".join(row.strip("│ ").split())


def test_an_adapter_run_reports_its_shared_base_and_the_share_the_rule_gives_it(
    config, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = {"base_model": "hfpipe-fixtures/tiny-llama", "instance_type": "ml.g5.4xlarge", "max_adapters": 10}
    monkeypatch.setenv(CHECKOUT_ENV, str(checkout_with(tmp_path, base)))
    report, text = reported(config, "tiny-adapter", monkeypatch)
    adapter = report["adapter"]
    assert adapter["shared_base"] == {
        "endpoint": "hfpipe-dev-shared-base",
        "base_model": "hfpipe-fixtures/tiny-llama",
        "instance_type": "ml.g5.4xlarge",
        "copies": 1,
        "max_adapters": 10,
    }
    # One ml.g5.4xlarge (2.03 USD/h) in ten equal shares, against an endpoint of its own.
    assert (adapter["fleet_usd_per_hour"], adapter["own_endpoint_usd_per_hour"]) == (2.03, 2.03)
    assert adapter["full_base_share_usd_per_hour"] == pytest.approx(0.203)
    assert adapter_row(text) == (
        "adapter │ trained on hfpipe-fixtures/tiny-llama; served on dev's shared base hfpipe-dev-shared-base "
        "(hfpipe-fixtures/tiny-llama on 1 x ml.g5.4xlarge, 2.03 USD/h) once deployed: the fleet's cost split "
        "by invocations over the last 24 h (`hfpipe endpoints --env dev`), equal shares without calls: "
        "0.203 USD/h with its 10 adapters (max_adapters), against 2.03 USD/h for an endpoint of its own"
    )


def test_an_adapter_of_another_base_or_without_a_shared_base_is_not_served_and_says_why(
    config, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A cdk.json whose dev declares no shared base.
    bare = checkout_with(tmp_path / "bare", None)
    monkeypatch.setenv(CHECKOUT_ENV, str(bare))
    report, text = reported(config, "tiny-adapter", monkeypatch)
    assert report["adapter"]["shared_base"] is None
    assert adapter_row(text) == (
        f"adapter │ trained on hfpipe-fixtures/tiny-llama; not served: {bare / 'cdk.json'} declares no "
        "shared_base for environment 'dev' (docs/adapters.md)"
    )
    other = {
        "base_model": "my-org/base-8b",
        "instance_type": "ml.g5.4xlarge",
        "max_adapters": 10,
        "copies": 2,
    }
    monkeypatch.setenv(CHECKOUT_ENV, str(checkout_with(tmp_path, other)))
    _, text = reported(config, "tiny-adapter", monkeypatch)
    assert adapter_row(text) == (
        "adapter │ trained on hfpipe-fixtures/tiny-llama; not servable on dev's shared base "
        "hfpipe-dev-shared-base (my-org/base-8b on 2 x ml.g5.4xlarge, 4.06 USD/h): adapter 'tiny-adapter' was "
        "trained on 'hfpipe-fixtures/tiny-llama', and the shared base serves 'my-org/base-8b'; accepted: an "
        "adapter trained on 'my-org/base-8b' (its registry version records the base it needs)"
    )

    # Outside a checkout (the wheel alone) there is no cdk.json to read: said so, and how to point at one.
    def no_checkout() -> Path:
        raise checkout.LocalModeError("no checkout")

    monkeypatch.setattr(checkout, "checkout_root", no_checkout)
    _, text = reported(config, "tiny-adapter", monkeypatch)
    assert adapter_row(text) == (
        "adapter │ trained on hfpipe-fixtures/tiny-llama; not served: no hfpipe checkout here to read cdk.json's "
        "shared_base from (run it inside the clone that deploys 'dev', or set HFPIPE_CHECKOUT=PATH) "
        "(docs/adapters.md)"
    )
    # A run that merges its adapter has an endpoint of its own: no adapter line.
    report, text = reported(config, "tiny-lora", monkeypatch)
    assert "adapter" not in report and "│ adapter " not in text
