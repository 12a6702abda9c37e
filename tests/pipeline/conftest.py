"""Fixtures: the app's real dev PipelineStack (synthesized once per run in tests/conftest.py), one
moto engine per session."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest
from app_synth import ENV, Synthesized, data_imports, region_of

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "lambda" / "pipeline"))
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
os.environ.setdefault("SAGEMAKER_SUPPRESS_V2_WARNING", "1")


@pytest.fixture(scope="session")
def pipeline_app(synthesized: Synthesized) -> Synthesized:
    """The whole app from cdk.json, synthesized once per run (shared with tests/infra and tests/cli, and by the workers)."""
    return synthesized


@pytest.fixture(scope="session")
def template(pipeline_template: dict[str, Any]) -> dict[str, Any]:
    """The dev environment's PipelineStack template."""
    return pipeline_template


@pytest.fixture(scope="module")
def engine(template):
    """The dev PipelineStack on moto, per module: moto's backends belong to the process and a mock started
    inside another one does not reset them, so an engine that outlived its module would leak its account
    into every later module of the worker (an IAM role already there, a bucket not empty)."""
    from hfpipe.local.engine.engine import LocalEngine

    # The template's own region (cdk.json), so the image catalog and ARNs agree; no waiting.
    with LocalEngine(template, imports=data_imports(), region=region_of(ENV), time_scale=0.0) as eng:
        yield eng


def _defaults(engine):
    from evaluations import StandInEvaluation

    engine.training = None
    # The recipes' evaluation job writes a contract document (evaluate.py itself: tests/training).
    engine.processing = StandInEvaluation()
    engine.endpoint = lambda name, body: [{"answer": "pipeline", "score": 0.9}]
    engine.on_endpoint = None
    engine.fleets = None
    engine.quotas.value_for = lambda name: 100.0
    engine.create_errors.clear()
    engine.sagemaker_errors.clear()
    engine.after_errors.clear()
    engine.drop_training_events = False
    engine.timeout_scale = 1.0


@pytest.fixture
def fresh(engine):
    """The shared engine with its plug-ins at the defaults, before the test (whatever ran first, with -k or
    alone) and after it."""
    _defaults(engine)
    yield engine
    _defaults(engine)


@pytest.fixture
def s3() -> Any:
    """moto's S3 with the bucket "artifacts" (the Launch and OnTrainingEvent handlers' tests)."""
    import boto3
    from moto import mock_aws

    with mock_aws():
        client = boto3.client("s3", region_name="us-east-1")
        client.create_bucket(Bucket="artifacts")
        yield client
