"""Synthesize every environment once per test session; the stack tests read the result."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import app as cdk_app
from stacks.config import EnvironmentConfig, load_environments


@dataclass(frozen=True)
class Synthesized:
    """One synthesis of the whole app: its cloud assembly folder, templates and stacks by name."""

    outdir: Path
    app: Any
    templates: dict[str, dict[str, Any]]
    environments: dict[str, EnvironmentConfig]
    seconds: float

    def stack(self, name: str) -> Any:
        return self.app.node.find_child(name)


def synthesize(outdir: Path) -> Synthesized:
    """Build and synthesize all environments of cdk.json into `outdir` (no CDK_DEFAULT_ACCOUNT)."""
    context = cdk_app.cdk_json_context()
    started = time.perf_counter()
    app = cdk_app.build_app(context=context, outdir=str(outdir), default_account=None)
    app.synth()
    seconds = time.perf_counter() - started
    manifest = json.loads((outdir / "manifest.json").read_text())
    templates = {
        artifact["displayName"]: json.loads((outdir / artifact["properties"]["templateFile"]).read_text())
        for artifact in manifest["artifacts"].values()
        if artifact["type"] == "aws:cloudformation:stack"
    }
    environments = load_environments(context["hfpipe:environments"])
    return Synthesized(
        outdir=outdir, app=app, templates=templates, environments=environments, seconds=seconds
    )


@pytest.fixture(scope="session")
def synthesized(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    """All environments, synthesized once for the whole session."""
    return synthesize(tmp_path_factory.mktemp("cdk.out"))
