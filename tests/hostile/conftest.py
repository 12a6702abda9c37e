"""Fixtures for the hostile-input tests: the command's moto account (tests/cli/cli_moto.py) and a runner.

`environment`: the dev environment's parameters and buckets with a state machine of one Pass state, fresh
per test (a refused command must start nothing there). `deployed`: the app's real state machine and
handlers on the module's local engine, as in tests/cli.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cli"))

from cli_moto import REGION, ROLE, Deployed, Environment, pipeline_engine
from moto import mock_aws

from hfpipe.cli import main
from hfpipe.local.engine import LocalEngine


@pytest.fixture
def aws_credentials(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    """Fake credentials and a region; no real config files, no instance metadata lookups."""
    for var in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN"):
        monkeypatch.delenv(var, raising=False)
    for var, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_REGION": REGION,
        "AWS_DEFAULT_REGION": REGION,
        "AWS_CONFIG_FILE": str(tmp_path / "no-config"),
        "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "no-credentials"),
        "AWS_EC2_METADATA_DISABLED": "true",
    }.items():
        monkeypatch.setenv(var, value)


@pytest.fixture
def environment(aws_credentials: None) -> Iterator[Environment]:
    with mock_aws(config={"stepfunctions": {"execute_state_machine": True}}):
        import boto3

        definition = {"StartAt": "Plan", "States": {"Plan": {"Type": "Pass", "End": True}}}
        arn = boto3.client("stepfunctions", region_name=REGION).create_state_machine(
            name="hfpipe-dev", definition=json.dumps(definition), roleArn=ROLE
        )["stateMachineArn"]
        yield Environment("dev", arn)


@pytest.fixture(scope="module")
def engine(pipeline_template: dict[str, Any]) -> Iterator[LocalEngine]:
    with pipeline_engine(pipeline_template) as running:
        yield running


@pytest.fixture
def deployed(aws_credentials: None, engine: LocalEngine) -> Deployed:
    return Deployed(engine, "dev")


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Callable[..., tuple[int, str, str]]:
    """Run `hfpipe ARGV...`; returns (exit status, stdout, stderr)."""

    def run(*argv: str) -> tuple[int, str, str]:
        code = main(list(argv))
        out, err = capsys.readouterr()
        return code, out, err

    return run
