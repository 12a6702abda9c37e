"""The registries of task kinds and serving kinds (docs/extending.md): what a recipe's `task` and
`serving.kind` decide, in one place. Stdlib only and below hfpipe.core (core imports it; it imports
nothing of hfpipe), so the Plan Lambda's bundle carries it.
"""

from __future__ import annotations

from pathlib import Path

from hfpipe.kinds.serving import (
    DEFAULT_SERVING_KIND,
    SERVING_KINDS,
    KindError,
    ServingKind,
    openai_sample_request,
    serving_kind,
    serving_kind_of,
)
from hfpipe.kinds.tasks import (
    TASK_KINDS,
    TINY_MODELS,
    Fixture,
    TaskKind,
    TinyModel,
    fixture_named,
    task_kind,
    tiny_model,
)

__all__ = [
    "DEFAULT_SERVING_KIND",
    "SERVING_KINDS",
    "TASK_KINDS",
    "TINY_MODELS",
    "Fixture",
    "KindError",
    "ServingKind",
    "TaskKind",
    "TinyModel",
    "fixture_named",
    "openai_sample_request",
    "serving_kind",
    "serving_kind_of",
    "task_kind",
    "tiny_model",
    "training_code_file",
]

# Where training_code/ is: inside the installed package (the wheel ships it as hfpipe/training_code/,
# pyproject.toml), else at the root of the checkout this package was imported from.
_TRAINING_CODE_DIRS = (
    Path(__file__).resolve().parents[1] / "training_code",
    Path(__file__).resolve().parents[2] / "training_code",
)


def training_code_file(filename: str) -> Path:
    """training_code/<filename>, from the installed package first, then from the checkout; KindError
    naming the folders looked in when neither has it."""
    for folder in _TRAINING_CODE_DIRS:
        if (folder / filename).is_file():
            return folder / filename
    raise KindError(
        f"training_code/{filename} is neither in the installed package nor in a checkout; looked in "
        f"{[str(d) for d in _TRAINING_CODE_DIRS]}"
    )
