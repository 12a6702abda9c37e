"""Fixtures for the hfpipe command tests: fake credentials, a moto account, one deployed environment\n(the app's real state machine and handlers on moto)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cli_moto import Environment, aws_credentials, deployed, engine
from moto import mock_aws
from world_helpers import world

__all__ = ["aws_credentials", "deployed", "engine", "world"]  # shared with tests/hostile (cli_moto)


@pytest.fixture
def moto_account(aws_credentials: None) -> Iterator[None]:
    with mock_aws(config={"stepfunctions": {"execute_state_machine": True}}):
        yield


@pytest.fixture
def environment(moto_account: None) -> Environment:
    """The dev environment's parameters and buckets, nothing running (clean-up, data upload)."""
    return Environment("dev")


@pytest.fixture
def plotted(monkeypatch: pytest.MonkeyPatch) -> list[tuple[dict[str, Any], str | None]]:
    """What `report --plot` hands the plot: its series and the x axis's label."""
    from hfpipe.cli.run import report

    calls: list[tuple[dict[str, Any], str | None]] = []
    real = report.plot_losses

    def record(series: dict[str, Any], path: Path, title: str, xlabel: str | None = None) -> Path:
        calls.append((series, xlabel))
        return real(series, path, title, xlabel=xlabel)

    monkeypatch.setattr(report, "plot_losses", record)
    return calls
