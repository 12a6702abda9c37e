"""Shared helpers for the training-script tests (all scripts run through hfpipe.local_container)."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def training_code_dir() -> Path:
    """The folder shipped as sourcedir.tar.gz (`sagemaker_submit_directory`)."""
    return REPO_ROOT / "training_code"
