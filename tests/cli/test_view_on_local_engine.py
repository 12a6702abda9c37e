"""`watch` and `report` against the real pipeline: the app's synthesized PipelineStack (state machine
and Lambda handlers) on moto (hfpipe.local.engine), the way `hfpipe local` drives them. Training and the
endpoint are the engine's stand-ins here; this checks the command reads the real Plan output, history
and report."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from rich.console import Console

from hfpipe.cli import aws
from hfpipe.cli.execution import snapshot
from hfpipe.cli.report import build_report
from hfpipe.cli.watch import watch

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def engine(pipeline_template: dict[str, Any]) -> Iterator[Any]:
    """The app's real dev PipelineStack (the session's synthesis) on moto, for this module only."""
    from app_synth import ENV, data_imports, region_of

    from hfpipe.local.engine import LocalEngine

    with LocalEngine(
        pipeline_template,
        endpoint=lambda name, body: [{"answer": "SageMaker", "score": 0.71}],
        imports=data_imports(ENV),
        region=region_of(ENV),
        time_scale=0.0,
    ) as eng:
        yield eng


def start(engine: Any, name: str, **execution_input: Any) -> tuple[aws.Clients, str]:
    import boto3

    arn = engine.client("stepfunctions").start_execution(
        stateMachineArn=engine.state_machine_arn,
        name=name,
        input=json.dumps({"recipe_name": "tiny-qa", "poll_seconds": 1, **execution_input}),
    )["executionArn"]
    # The clients `hfpipe local` hands the view: a session on the engine's moto account.
    return aws.Clients(boto3.Session(region_name=engine.region)), arn


def test_watch_a_pipeline_run_to_its_report(engine: Any) -> None:
    engine.training = None
    clients, arn = start(engine, "view-ok")
    console = Console(record=True, width=160)
    snap = watch(clients, arn, console, interval=0.2)
    assert snap.status == "SUCCEEDED"
    assert snap.plan is not None and snap.plan["training_job_name"] == "view-ok"
    assert snap.plan["endpoint_name"] == "view-ok-ep"
    text = console.export_text()
    assert "view-ok-ep  deleted" in text
    assert "report: view-ok" in text
    assert "SageMaker" in text  # the smoke test's answer

    report = build_report(clients, snapshot(clients, arn))
    output = json.loads(clients.sfn.describe_execution(executionArn=arn)["output"])
    assert report == {**output["report"], "execution_status": "SUCCEEDED"}
    assert report["smoke_test"]["ok"] is True


def test_watch_a_failed_training_job(engine: Any) -> None:
    def fail(request: dict[str, Any], job: Any) -> None:
        job.training_job_status = "Failed"
        job.failure_reason = "AlgorithmError: loss is NaN"

    engine.training = fail
    try:
        clients, arn = start(engine, "view-failed")
        console = Console(record=True, width=160)
        snap = watch(clients, arn, console, interval=0.2)
    finally:
        engine.training = None
    assert snap.status == "FAILED"
    text = console.export_text()
    assert "view-failed" in text and "Failed" in text
    assert snap.failure is not None and "loss is NaN" in snap.failure
