"""Fixtures: the test stack synthesized once per session, and one moto engine per session."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parents[1] / "lambda" / "pipeline"))
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
os.environ.setdefault("SAGEMAKER_SUPPRESS_V2_WARNING", "1")


@pytest.fixture(scope="session")
def template() -> dict:
    from pipeline_stack_under_test import synth_template

    return synth_template()


@pytest.fixture(scope="session")
def engine(template):
    from hfpipe.local_engine import LocalEngine

    with LocalEngine(template) as eng:
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
