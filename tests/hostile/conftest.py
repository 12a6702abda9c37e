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

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cli"))

from cli_moto import REGION, ROLE, Environment, aws_credentials, deployed, engine
from moto import mock_aws

from hfpipe.cli import main

__all__ = ["aws_credentials", "deployed", "engine"]  # the fixtures of tests/cli (cli_moto)


@pytest.fixture
def environment(aws_credentials: None) -> Iterator[Environment]:
    with mock_aws(config={"stepfunctions": {"execute_state_machine": True}}):
        import boto3

        definition = {"StartAt": "Plan", "States": {"Plan": {"Type": "Pass", "End": True}}}
        arn = boto3.client("stepfunctions", region_name=REGION).create_state_machine(
            name="hfpipe-dev", definition=json.dumps(definition), roleArn=ROLE
        )["stateMachineArn"]
        yield Environment("dev", arn)


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Callable[..., tuple[int, str, str]]:
    """Run `hfpipe ARGV...`; returns (exit status, stdout, stderr)."""

    def run(*argv: str) -> tuple[int, str, str]:
        code = main(list(argv))
        out, err = capsys.readouterr()
        return code, out, err

    return run
