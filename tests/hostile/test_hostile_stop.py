"""`hfpipe stop` acts only on what the pipeline wrote: the Plan state's own output in the history (never the
execution input) and resources whose tags name this environment and this execution; it asks before
deleting. Runs on the app's real state machine and handlers (tests/cli/cli_moto.py); moto has no
StopTrainingJob, so a stop that reached a job the command must leave alone would fail the command."""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from cli_moto import (
    ACCOUNT,
    ROLE,
    Deployed,
    Environment,
    StopRecordingSageMaker,
    plan_for,
    running_training_job,
    sagemaker_backend,
    tagged_model,
    tags_for,
)

Run = Callable[..., tuple[int, str, str]]


model = functools.partial(tagged_model, recipe="tiny-lora")


def models(deployed: Deployed) -> set[str]:
    return {m["ModelName"] for m in deployed.sagemaker.list_models()["Models"]}


def running(deployed: Deployed, name: str) -> tuple[str, dict[str, Any]]:
    """An execution whose training job is InProgress: its Launch task waits for the job's state-change
    event (the event-driven wait), so a stop lands there once the job exists."""
    arn, plan = deployed.start(name, running=True, wait=False)
    deployed.wait_for_state(arn, "Launch")
    deadline = time.monotonic() + 30
    # TaskSubmitted: the Launch Lambda returned (the job exists) and the task waits for its token.
    while not any(
        e["type"] == "TaskSubmitted"
        for e in deployed.sfn.get_execution_history(executionArn=arn, maxResults=1000)["events"]
    ):
        assert time.monotonic() < deadline, f"execution {name} never reached the wait for its training job"
        time.sleep(0.05)
    assert plan["training_job_name"] in sagemaker_backend().training_jobs
    return arn, plan


def test_stop_ignores_a_plan_forged_in_the_execution_input(deployed: Deployed, cli: Run) -> None:
    """While Plan has not finished, $.plan is whatever the caller sent: here it names prod's job and model."""
    prod = plan_for("prod-run", env="prod")
    running_training_job(
        deployed.sagemaker, prod["training_job_name"], tags_for(prod), "s3://prod-artifacts/models/"
    )
    model(deployed, "prod-run-model-x", "prod", "prod-run")
    slow_plan = {"StartAt": "Plan", "States": {"Plan": {"Type": "Wait", "Seconds": 3600, "End": True}}}
    machine = deployed.sfn.create_state_machine(name="slow", definition=json.dumps(slow_plan), roleArn=ROLE)
    arn = deployed.sfn.start_execution(
        stateMachineArn=machine["stateMachineArn"], name="prod-run", input=json.dumps({"plan": prod})
    )["executionArn"]
    code, out, err = cli("stop", arn, "--yes")
    # Not the pipeline's state machine at all (hfpipe-<env>-pipeline): refused before anything is read.
    assert code == 1 and "did not run on an hfpipe pipeline" in err, (out, err)
    assert sagemaker_backend().training_jobs[prod["training_job_name"]].training_job_status == "InProgress"
    assert "prod-run-model-x" in models(deployed)


def test_stop_leaves_a_job_of_the_same_name_in_another_environment(deployed: Deployed, cli: Run) -> None:
    arn, plan = running(deployed, "clash")
    job = sagemaker_backend().training_jobs[plan["training_job_name"]]
    # The job's tags name another environment: its name carries "dev-" (hfpipe.core.names), but what stop
    # trusts is the tags, and a job tagged for prod is not this environment's to stop.
    deployed.sagemaker.add_tags(ResourceArn=job.arn, Tags=[{"Key": "hfpipe:env", "Value": "prod"}])
    model(deployed, "clash-prod-model", "prod", "clash")
    code, out, err = cli("stop", "clash", "--env", "dev", "--yes")
    assert (code, err) == (0, ""), err
    assert (
        f"not stopping training job {plan['training_job_name']}: its tags do not name environment 'dev'"
        in out
    )
    assert job.training_job_status == "InProgress"
    assert "clash-prod-model" in models(deployed)
    # moto shows the stop in the status once its worker thread ends (later on a busy machine): wait for the end.
    assert deployed.wait(arn) == "ABORTED"


def test_stop_refuses_an_execution_of_another_environment(deployed: Deployed, cli: Run) -> None:
    arn, plan = running(deployed, "their-run")
    model(deployed, "their-run-model-x", "dev", "their-run")
    prod = Environment("prod")  # deployed too: the ARN is still not one of its executions
    code, _, err = cli("stop", arn, "--env", "prod", "--yes")
    assert code == 1
    assert err == (
        f"error: execution {arn!r} ran on state machine {deployed.state_machine_arn!r}, not on environment "
        f"'prod''s ({prod.state_machine_arn}); hfpipe reads only its own pipeline's executions\n"
    )
    assert deployed.sfn.describe_execution(executionArn=arn)["status"] == "RUNNING"
    assert sagemaker_backend().training_jobs[plan["training_job_name"]].training_job_status == "InProgress"
    assert "their-run-model-x" in models(deployed)
    deployed.sfn.stop_execution(executionArn=arn)  # end it here, not in the engine's background


def stopping(plan: dict[str, Any]) -> None:
    """The job already stopping (moto has no StopTrainingJob; the execution keeps polling it)."""
    sagemaker_backend().training_jobs[plan["training_job_name"]].training_job_status = "Stopping"


def test_stop_asks_before_deleting_and_a_script_without_yes_deletes_nothing(
    deployed: Deployed, cli: Run
) -> None:
    _, plan = running(deployed, "mine")
    stopping(plan)
    model(deployed, "mine-model-x", "dev", "mine")
    code, out, err = cli("stop", "mine", "--env", "dev")  # stdin is not a terminal under pytest
    assert (code, err) == (0, ""), err
    assert "left 1 resources of execution mine; delete them with `hfpipe cleanup --env dev`" in out
    assert "mine-model-x" in models(deployed)


def test_stop_with_yes_deletes_only_its_own_tagged_resources(deployed: Deployed, cli: Run) -> None:
    _, plan = running(deployed, "own")
    stopping(plan)
    model(deployed, "own-model-x", "dev", "own")
    model(deployed, "own-prod-model-x", "prod", "own")  # same execution name, other environment
    model(deployed, "own-other-model-x", "dev", "other")
    deployed.sagemaker.create_model(  # no tags: a user's own model
        ModelName="own-users-model-x",
        ExecutionRoleArn=f"arn:aws:iam::{ACCOUNT}:role/r",
        PrimaryContainer={"Image": "example.invalid/i"},
    )
    code, out, _ = cli("stop", "own", "--env", "dev", "--yes")
    assert code == 0 and "deleted model own-model-x" in out
    left = models(deployed)
    assert "own-model-x" not in left
    assert {"own-prod-model-x", "own-other-model-x", "own-users-model-x"} <= left


@pytest.mark.parametrize(("tag_env", "stopped"), [("prod", False), ("dev", True)])
def test_abnormal_end_cleanup_stops_a_job_only_when_its_tags_name_the_environment(
    environment: Environment, tag_env: str, stopped: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`hfpipe stop` leaves a job tagged for another environment; the Cleanup Lambda, which the stop's
    ABORTED event reaches through the abnormal-end rule with names derived from the execution name alone,
    must leave it too."""
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[2] / "lambda" / "pipeline"))
    from pipeline_lambdas.teardown import cleanup

    from hfpipe.core.names import PlannedNames

    names = PlannedNames.derive("clash", "dev")
    tags = tags_for({"env": tag_env, "execution_name": "clash", "recipe_name": "tiny-lora"})
    running_training_job(environment.sagemaker, names.training_job_name, tags, "s3://prod-artifacts/models/")
    sagemaker = StopRecordingSageMaker(environment.sagemaker)
    result = cleanup(sagemaker, names)
    assert sagemaker.stopped == ([names.training_job_name] if stopped else [])
    assert result["training_job_stopped"] is stopped
    refused = f"training job {names.training_job_name}: not tagged with this environment and execution"
    assert (refused in result["skipped"]) is not stopped
