"""Fixtures shared by every part of the test suite. Keep this small and generic."""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest

# jsii prints a banner per process on a Node version it has not certified; the tests do not need it.
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
os.environ.setdefault("JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION", "1")
os.environ.setdefault("CDK_DISABLE_CLI_TELEMETRY", "true")
os.environ.setdefault("SAGEMAKER_SUPPRESS_V2_WARNING", "1")

REPO_ROOT = Path(__file__).resolve().parent.parent
# The inference handlers import their sibling `request_checks` as they do in <model_dir>/code/ on an
# endpoint; tests load them by path from training_code/, so that folder is importable too (last, so it
# shadows nothing).
if str(REPO_ROOT / "training_code") not in sys.path:
    sys.path.append(str(REPO_ROOT / "training_code"))
EVENTS_DIR = Path(__file__).resolve().parent / "events"


@pytest.fixture(scope="session")
def repo_root() -> Path:
    """The repository's root folder."""
    return REPO_ROOT


@pytest.fixture(scope="session")
def synthesized(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The whole app from cdk.json (every environment), synthesized once for the session (app_synth)."""
    from app_synth import synthesize

    return synthesize(tmp_path_factory.mktemp("cdk.out"))


@pytest.fixture(scope="session")
def pipeline_template(synthesized: Any) -> dict[str, Any]:
    """The dev environment's real PipelineStack template (from the session's synthesis)."""
    return dict(synthesized.pipeline("dev"))


@pytest.fixture(scope="session")
def load_lambda() -> Callable[[str], ModuleType]:
    """Import a Lambda module by path (`lambda/` is a keyword, so it cannot be a package).

    `load_lambda("quota/quota_request.py")` returns the module; its folder goes on sys.path first, as in
    the Lambda runtime, so the module's own sibling imports work.
    """

    def load(relative_path: str) -> ModuleType:
        path = REPO_ROOT / "lambda" / relative_path
        name = "lambda_" + relative_path.removesuffix(".py").replace("/", "_")
        if name in sys.modules:
            return sys.modules[name]
        sys.path.insert(0, str(path.parent))
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None, path
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        return module

    return load


@pytest.fixture
def lambda_context() -> SimpleNamespace:
    """A stand-in for the Lambda context object with the attributes handlers read."""
    return SimpleNamespace(
        function_name="test-function",
        aws_request_id="c0ffee00-0000-4000-8000-00000000c0de",
        get_remaining_time_in_millis=lambda: 60_000,
    )


@pytest.fixture(scope="session")
def load_event() -> Callable[[str], dict]:
    """A JSON test event from tests/events/ by file name; ``${ACCOUNT}`` in it stands for the tests' account
    (tests/accounts.py), so no account ID is written in the events."""
    import json

    from accounts import ACCOUNT

    def load(name: str) -> dict:
        return json.loads((EVENTS_DIR / name).read_text().replace("${ACCOUNT}", ACCOUNT))

    return load
