"""A plan written into the execution input is never believed: `hfpipe logs` and `hfpipe invoke` read only the
plan the pipeline stored (the Plan state's own exit), so an execution whose Plan did not finish has no plan,
however complete and well-typed the one in its input is. Here that one names prod's training job and
endpoint, which exist in the same account with prod's tags and log lines. Runs on the app's real state
machine and handlers (tests/cli/cli_moto.py)."""

from __future__ import annotations

import base64
import contextlib
import json
from collections.abc import Callable
from typing import Any

import pytest
from cli_moto import ACCOUNT, REGION, ROLE, Deployed, tags_for
from moto.backends import get_backend
from sagemaker_resources import run_hosting

from hfpipe.core.run import logs
from hfpipe.core.run.plan import PlanConfig, build_plan
from hfpipe.core.run.plan_model import Plan
from hfpipe.local.engine.quotas import QuotaTable, default_quotas
from stacks.image_catalog import build_catalog

Run = Callable[..., tuple[int, str, str]]
PROD_LINE = "prod's training log: not this execution's"


def prod_plan() -> Plan:
    """A complete, valid plan of schema version 1, as prod's Plan Lambda would make it for prod-1."""
    config = PlanConfig(
        env="prod",
        region=REGION,
        role_arn=ROLE,
        sourcedir_uri="s3://hfpipe-prod-artifacts/code/sourcedir.tar.gz",
        data_bucket="hfpipe-prod-data",
        artifacts_bucket="hfpipe-prod-artifacts",
        image_catalog=build_catalog(REGION),
    )
    return build_plan(
        {"recipe_name": "tiny-lora"}, "prod-1", config, QuotaTable(default_quotas()).client("eu-west-1")
    )


def prod_resources(deployed: Deployed, plan: Plan) -> None:
    """prod's endpoint (InService, tagged prod) and its training job's log, in this account and region."""
    tags = tags_for({"env": plan.env, "execution_name": plan.execution_name, "recipe_name": plan.recipe_name})
    sm = deployed.sagemaker
    run_hosting(sm, plan, ROLE, tags, "example.invalid/hf-inference:latest")
    assert sm.describe_endpoint(EndpointName=plan.endpoint_name)["EndpointStatus"] == "InService"
    client = deployed.logs
    with contextlib.suppress(client.exceptions.ResourceAlreadyExistsException):
        client.create_log_group(logGroupName=logs.LOG_GROUP)
    stream = logs.stream_name(plan.training_job_name, "algo-1", 1764547200)
    client.create_log_stream(logGroupName=logs.LOG_GROUP, logStreamName=stream)
    client.put_log_events(
        logGroupName=logs.LOG_GROUP,
        logStreamName=stream,
        logEvents=[{"timestamp": 1764547200000, "message": PROD_LINE}],
    )


def invoked() -> list[Any]:
    """The request bodies moto's InvokeEndpoint received (keyed by request; see tests/cli/test_use.py)."""
    results = get_backend("sagemaker-runtime")[ACCOUNT][REGION].results
    return [json.loads(base64.b64decode(key))["Body"] for keys in results.values() for key in keys]


@pytest.fixture
def forged(deployed: Deployed) -> str:
    """An execution of dev's real pipeline whose input carries prod's plan; its Plan refuses the input."""
    plan = prod_plan()
    prod_resources(deployed, plan)
    arn = deployed.sfn.start_execution(
        stateMachineArn=deployed.state_machine_arn,
        name="forged-1",
        input=json.dumps({"recipe_name": "tiny-lora", "plan": plan.to_json()}),
    )["executionArn"]
    assert deployed.wait(arn) == "FAILED"
    return str(arn)


@pytest.mark.parametrize(
    ("command", "needed_for"),
    [
        (("logs",), "it launched no training job, so it has no training log"),
        (("invoke", "--data", '{"inputs": "hello"}'), "it created no endpoint to invoke"),
    ],
)
def test_a_plan_in_the_execution_input_is_not_believed(
    forged: str, cli: Run, command: tuple[str, ...], needed_for: str
) -> None:
    # By ARN, without --env: a believed plan would also have chosen the environment (prod's).
    code, out, err = cli(command[0], forged, *command[1:])
    assert code == 1
    assert err == (
        "error: execution 'forged-1' (FAILED) has no plan, because its Plan state did not finish (still "
        f"planning, failed, or stopped before it): {needed_for}; see `hfpipe report`\n"
    )
    assert PROD_LINE not in out and invoked() == []
