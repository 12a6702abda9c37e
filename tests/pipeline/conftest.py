"""Fixtures: the app's real dev PipelineStack synthesized once per session, one moto engine per session."""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "lambda" / "pipeline"))
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
os.environ.setdefault("SAGEMAKER_SUPPRESS_V2_WARNING", "1")

ENV = "dev"
# What the engine answers for the DataStack exports the Pipeline stack imports.
DATA_BUCKET = "hfpipe-test-data"
ARTIFACTS_BUCKET = "hfpipe-test-artifacts"


@dataclass(frozen=True)
class PipelineApp:
    """One synthesis of the app (cdk.json's environments): every template by stack name, and the time."""

    templates: dict[str, dict[str, Any]]
    seconds: float
    outdir: Path

    def pipeline(self, env: str = ENV) -> dict[str, Any]:
        from hfpipe.contract import stack_name

        return self.templates[stack_name(env, "Pipeline")]


@pytest.fixture(scope="session")
def pipeline_app(tmp_path_factory: pytest.TempPathFactory) -> PipelineApp:
    """The whole app from cdk.json, synthesized once (cdk-nag runs during synth: a finding fails here)."""
    import app as cdk_app

    outdir = tmp_path_factory.mktemp("cdk.out")
    started = time.perf_counter()
    cdk_app.build_app(context=cdk_app.cdk_json_context(), outdir=str(outdir), default_account=None).synth()
    seconds = time.perf_counter() - started
    manifest = json.loads((outdir / "manifest.json").read_text())
    templates = {
        artifact["displayName"]: json.loads((outdir / artifact["properties"]["templateFile"]).read_text())
        for artifact in manifest["artifacts"].values()
        if artifact["type"] == "aws:cloudformation:stack"
    }
    return PipelineApp(templates=templates, seconds=seconds, outdir=outdir)


@pytest.fixture(scope="session")
def template(pipeline_app: PipelineApp) -> dict[str, Any]:
    """The dev environment's PipelineStack template."""
    return pipeline_app.pipeline(ENV)


def region_of(env: str) -> str:
    """The environment's region from cdk.json."""
    import app as cdk_app
    from stacks.config import load_environments

    return load_environments(cdk_app.cdk_json_context()["hfpipe:environments"])[env].region


def data_imports(env: str = ENV) -> dict[str, str]:
    """The DataStack export values the Pipeline stack imports, as the engine should answer them."""
    from hfpipe.contract import stack_name

    data = stack_name(env, "Data")
    return {
        f"{data}-DataBucketName": DATA_BUCKET,
        f"{data}-DataBucketArn": f"arn:aws:s3:::{DATA_BUCKET}",
        f"{data}-ArtifactsBucketName": ARTIFACTS_BUCKET,
        f"{data}-ArtifactsBucketArn": f"arn:aws:s3:::{ARTIFACTS_BUCKET}",
    }


@pytest.fixture(scope="session")
def engine(template):
    from hfpipe.local_engine import LocalEngine

    # The template's own region (cdk.json), so the image catalog and ARNs agree; no waiting.
    with LocalEngine(template, imports=data_imports(), region=region_of(ENV), time_scale=0.0) as eng:
        yield eng


@pytest.fixture
def fresh(engine):
    """The shared engine with its plug-ins reset to the defaults after the test."""
    yield engine
    engine.training = None
    engine.endpoint = lambda name, body: [{"answer": "pipeline", "score": 0.9}]
    engine.on_endpoint = None
    engine.quotas.value_for = lambda name: 100.0
    engine.create_errors.clear()
    engine.after_errors.clear()
