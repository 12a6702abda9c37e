"""`hfpipe report` of an adapter run (its plan names adapter_base_model) says where it is served and the share
of the serving cost the rule gives it: from the shared base of the environment as deployed (its SSM parameter
shared-base, which the Pipeline stack writes), the checkout's cdk.json only where the environment cannot say
(hfpipe.cli.adapters.adapter_report). Plans built with the local quota table, the Report Lambda's report made in
process, the environment's parameters in moto."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime
from pathlib import Path

import boto3
import pytest
from botocore.stub import Stubber
from cli_moto import ACCOUNT, REGION, Environment
from plan_config import dev_config
from rich.console import Console, Group

from hfpipe import contract
from hfpipe.cli.aws import Clients
from hfpipe.cli.run.execution import Snapshot
from hfpipe.cli.run.report import build_report, render_report
from hfpipe.core.run.plan import build_plan
from hfpipe.local import checkout
from hfpipe.local.checkout import CHECKOUT_ENV, NEEDED
from hfpipe.local.engine.quotas import QuotaTable, default_quotas

ROOT = Path(__file__).resolve().parents[2]
QUOTAS = QuotaTable(default_quotas()).client("eu-west-1")
TINY = {"base_model": "hfpipe-fixtures/tiny-llama", "instance_type": "ml.g5.4xlarge", "max_adapters": 10}
SHARED_BASE = contract.ssm_parameter_name("dev", contract.SSM_SHARED_BASE)
ADAPTER_MACHINE = contract.ssm_parameter_name("dev", contract.SSM_ADAPTER_STATE_MACHINE_ARN)


@pytest.fixture(scope="module")
def config():
    return dev_config()


@pytest.fixture
def clients(moto_account: None) -> Clients:
    """dev's clients, in a moto account with no parameters yet (each test writes what dev's stacks wrote)."""
    return Clients(boto3.Session(region_name=REGION))


def deployed_with(clients: Clients, shared_base: dict | None, adapter_machine: bool = True) -> None:
    """dev's parameters as its stacks wrote them: the pipeline's, and where it was deployed with a shared base,
    the adapter state machine's and `shared_base` (None: no shared-base parameter)."""
    Environment("dev")
    if adapter_machine:
        arn = f"arn:aws:states:{REGION}:{ACCOUNT}:stateMachine:hfpipe-dev-adapters"
        clients.ssm.put_parameter(Name=ADAPTER_MACHINE, Value=arn, Type="String", Overwrite=True)
    if shared_base is not None:
        value = json.dumps(shared_base)
        clients.ssm.put_parameter(Name=SHARED_BASE, Value=value, Type="String", Overwrite=True)


def reported(config, recipe: str, monkeypatch: pytest.MonkeyPatch, clients=None) -> tuple[dict, str]:
    """The report `hfpipe report` prints for a completed run of ``recipe`` (the ReportAdapter state's own
    report in the execution's output), as a dict and as the printed text; ``clients``: dev's."""
    monkeypatch.syspath_prepend(str(ROOT / "lambda" / "pipeline"))
    from pipeline_lambdas.report import build_report as lambda_report

    plan = build_plan({"recipe_name": recipe}, f"{recipe}-1", config, QUOTAS)
    output = {
        "report": lambda_report({"plan": plan.to_json(), "training": {"TrainingJobStatus": "Completed"}})
    }
    snap = Snapshot("arn:x", f"{recipe}-1", "SUCCEEDED", datetime.now(UTC), None, plan=plan, output=output)
    report = build_report(clients, snap)  # type: ignore[arg-type]  # a succeeded run reads only SSM
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
    config, clients: Clients, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    deployed_with(clients, TINY)
    monkeypatch.setenv(CHECKOUT_ENV, str(checkout_with(tmp_path, TINY)))
    report, text = reported(config, "tiny-adapter", monkeypatch, clients)
    adapter = report["adapter"]
    assert adapter["shared_base"] == {
        "endpoint": "hfpipe-dev-shared-base",
        "base_model": "hfpipe-fixtures/tiny-llama",
        "instance_type": "ml.g5.4xlarge",
        "copies": 1,
        "max_adapters": 10,
    }
    assert adapter["deployed"] and adapter["source"] == (
        "environment 'dev' as deployed (SSM parameter /hfpipe/dev/shared-base)"
    )
    # One ml.g5.4xlarge (2.03 USD/h) in ten equal shares, against an endpoint of its own.
    assert (adapter["fleet_usd_per_hour"], adapter["own_endpoint_usd_per_hour"]) == (2.03, 2.03)
    assert adapter["full_base_share_usd_per_hour"] == pytest.approx(0.203)
    assert adapter_row(text) == (
        "adapter │ trained on hfpipe-fixtures/tiny-llama; served on dev's shared base hfpipe-dev-shared-base "
        "(hfpipe-fixtures/tiny-llama on 1 x ml.g5.4xlarge, 2.03 USD/h) once deployed: the fleet's cost split "
        "by invocations over the last 24 h (`hfpipe endpoints --env dev`), equal shares without calls: "
        "0.203 USD/h with its 10 adapters (max_adapters), against 2.03 USD/h for an endpoint of its own"
    )


def test_the_deployed_shared_base_decides_not_the_checkouts_cdk_json(
    config, clients: Clients, monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/adapters.md's walk-through: `hfpipe local up --set` gives that world's dev the tiny Llama while
    the checkout's cdk.json declares Qwen 7B for dev; the report is of the environment the run ran in."""
    declared = json.loads((ROOT / "cdk.json").read_text())["context"]["hfpipe:environments"]["dev"]
    assert (
        declared["shared_base"]["base_model"] != TINY["base_model"]
    )  # what the walk-through's world changes
    deployed_with(clients, {**TINY, "copies": 2, "max_model_len": 256})
    report, text = reported(config, "tiny-adapter", monkeypatch, clients)
    assert report["adapter"]["shared_base"]["base_model"] == "hfpipe-fixtures/tiny-llama"
    assert report["adapter"].get("refused") is None
    assert "served on dev's shared base hfpipe-dev-shared-base (hfpipe-fixtures/tiny-llama on 2 x " in text
    assert "not servable" not in text and "cdk.json" not in text
    # dev deployed without one: not served, whatever the checkout's cdk.json declares.
    clients.ssm.delete_parameter(Name=SHARED_BASE)
    clients.ssm.delete_parameter(Name=ADAPTER_MACHINE)
    _, text = reported(config, "tiny-adapter", monkeypatch, clients)
    assert adapter_row(text) == (
        "adapter │ trained on hfpipe-fixtures/tiny-llama; not served: environment 'dev' as deployed has no "
        "shared base (its stacks wrote no SSM parameter /hfpipe/dev/shared-base: its settings had no "
        "shared_base) (docs/adapters.md)"
    )


def test_where_the_environment_cannot_say_cdk_json_is_read_and_the_line_says_so(
    config, clients: Clients, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    checkout = checkout_with(tmp_path, TINY)
    monkeypatch.setenv(CHECKOUT_ENV, str(checkout))
    # Deployed before the stack wrote shared-base: its adapter state machine is there, the base is cdk.json's.
    deployed_with(clients, None)
    report, text = reported(config, "tiny-adapter", monkeypatch, clients)
    assert not report["adapter"]["deployed"]
    assert adapter_row(text).startswith(
        "adapter │ trained on hfpipe-fixtures/tiny-llama; served on dev's shared base hfpipe-dev-shared-base "
        "(hfpipe-fixtures/tiny-llama on 1 x ml.g5.4xlarge, 2.03 USD/h) (as cdk.json declares it: environment "
        "'dev' publishes no /hfpipe/dev/shared-base (deployed before its Pipeline stack wrote it); read from "
        f"{checkout / 'cdk.json'}) once deployed: "
    )
    # Its parameters not readable: said, then cdk.json's.
    with Stubber(clients.ssm) as stub:
        stub.add_client_error("get_parameters", "AccessDeniedException", "not allowed")
        _, text = reported(config, "tiny-adapter", monkeypatch, clients)
    assert (
        "(as cdk.json declares it: reading environment 'dev''s SSM parameters failed: access denied (not "
        f"allowed); check your role's permissions; read from {checkout / 'cdk.json'}) once deployed"
    ) in adapter_row(text)


def test_an_adapter_of_another_base_or_without_a_shared_base_is_not_served_and_says_why(
    config, clients: Clients, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    other = {
        "base_model": "my-org/base-8b",
        "instance_type": "ml.g5.4xlarge",
        "max_adapters": 10,
        "copies": 2,
    }
    deployed_with(clients, other)
    _, text = reported(config, "tiny-adapter", monkeypatch, clients)
    assert adapter_row(text) == (
        "adapter │ trained on hfpipe-fixtures/tiny-llama; not servable on dev's shared base "
        "hfpipe-dev-shared-base (my-org/base-8b on 2 x ml.g5.4xlarge, 4.06 USD/h): adapter 'tiny-adapter' was "
        "trained on 'hfpipe-fixtures/tiny-llama', and the shared base serves 'my-org/base-8b'; accepted: an "
        "adapter trained on 'my-org/base-8b' (its registry version records the base it needs)"
    )
    # No parameter of dev at all (not deployed where these credentials look), and a cdk.json without one.
    clients.ssm.delete_parameters(Names=[p["Name"] for p in clients.ssm.describe_parameters()["Parameters"]])
    bare = checkout_with(tmp_path / "bare", None)
    monkeypatch.setenv(CHECKOUT_ENV, str(bare))
    report, text = reported(config, "tiny-adapter", monkeypatch, clients)
    assert report["adapter"]["shared_base"] is None
    assert adapter_row(text) == (
        "adapter │ trained on hfpipe-fixtures/tiny-llama; not served: no SSM parameters of environment 'dev' "
        f"found under /hfpipe/dev/; {bare / 'cdk.json'} declares no shared_base for environment 'dev' "
        "(docs/adapters.md)"
    )

    # Outside a checkout (the wheel alone) there is no cdk.json to read: said so, and how to point at one.
    def no_checkout() -> Path:
        raise checkout.LocalModeError("no checkout")

    monkeypatch.setattr(checkout, "checkout_root", no_checkout)
    _, text = reported(config, "tiny-adapter", monkeypatch, clients)
    assert adapter_row(text) == (
        "adapter │ trained on hfpipe-fixtures/tiny-llama; not served: no SSM parameters of environment 'dev' "
        "found under /hfpipe/dev/; no hfpipe checkout here to read cdk.json's shared_base from (run it inside "
        "the clone that deploys 'dev', or set HFPIPE_CHECKOUT=PATH) (docs/adapters.md)"
    )
    # A run that merges its adapter has an endpoint of its own: no adapter line, nothing read.
    report, text = reported(config, "tiny-lora", monkeypatch)
    assert "adapter" not in report and "│ adapter " not in text
