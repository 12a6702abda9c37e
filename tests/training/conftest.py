"""Shared helpers for the training-script tests (all scripts run through hfpipe.local.training.container)."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def training_code_dir() -> Path:
    """The folder shipped as sourcedir.tar.gz (`sagemaker_submit_directory`)."""
    return REPO_ROOT / "training_code"


@pytest.fixture(scope="session")
def container_env() -> dict[str, str]:
    """Extra environment for local training containers in tests.

    One intra-op thread: tiny models gain nothing from more, and on a shared 2-core runner OpenMP workers
    spinning against each other made a 17 ms step take 400 ms.
    """
    return {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
