"""Fixtures for the hfpipe command tests: fake credentials, a moto account, one deployed environment\n(the app's real state machine and handlers on moto)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from cli_moto import REGION, Deployed, Environment, pipeline_engine
from moto import mock_aws

from hfpipe.local.engine import LocalEngine


@pytest.fixture
def aws_credentials(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    """Fake credentials and a region; no real config files, no instance metadata lookups."""
    for var in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_REGION", REGION)
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


@pytest.fixture
def moto_account(aws_credentials: None) -> Iterator[None]:
    with mock_aws(config={"stepfunctions": {"execute_state_machine": True}}):
        yield


@pytest.fixture
def environment(moto_account: None) -> Environment:
    """The dev environment's parameters and buckets, nothing running (clean-up, data upload)."""
    return Environment("dev")


@pytest.fixture(scope="module")
def engine(pipeline_template: dict[str, Any]) -> Iterator[LocalEngine]:
    with pipeline_engine(pipeline_template) as running:
        yield running


@pytest.fixture
def deployed(aws_credentials: None, engine: LocalEngine) -> Deployed:
    """The dev environment deployed: the real PipelineStack's state machine and handlers on moto."""
    return Deployed(engine, "dev")
