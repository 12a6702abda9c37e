"""The seed-faithful recipes carry every setting of the originals, or say in their description why not.

The originals are Hugging Face's SageMaker notebooks (huggingface/notebooks, sagemaker/03_distributed_training_
data_parallelism, sagemaker/04_distributed_training_model_parallelism and, in its IMDb version (commit 2c9da03),
sagemaker/05_spot_instances with its scripts/train.py); their estimator settings are written down once (here;
03's and 04's in tests/notebooks.py), as the notebooks pass them to the SDK's HuggingFace estimator, which is
what the job got: 04 passes its metric definitions as `metrics_definition=`, which the estimator's **kwargs
swallow, so its job had none; 05's script hard-codes its TrainingArguments (written here in
run_classification.py's argument names, with the Trainer's defaults of transformers 4.12 where it leaves one out).
"""

from __future__ import annotations

from typing import Any

import pytest
from notebooks import METRICS, MNLI_HYPERPARAMETERS, SMP_DISTRIBUTION, SQUAD_HYPERPARAMETERS

from hfpipe.core.recipe.recipes import resolve_recipe

ORIGINALS: dict[str, dict[str, Any]] = {
    "bert-large-squad-smddp": {
        "training.instance_type": "ml.p3.16xlarge",
        "training.instance_count": 2,
        "training.volume_size_gb": 200,
        "training.distribution": {"smdistributed": {"dataparallel": {"enabled": True}}},
        "training.metric_definitions": METRICS,
        "container.training.transformers_version": "4.6",
        "container.training.pytorch_version": "1.7",
        "container.training.py_version": "py36",
        "training.hyperparameters": SQUAD_HYPERPARAMETERS,
    },
    "roberta-large-mnli-smp": {
        "training.instance_type": "ml.p3dn.24xlarge",
        "training.instance_count": 1,
        "training.volume_size_gb": 400,
        "training.distribution": SMP_DISTRIBUTION,
        "training.metric_definitions": [],  # metrics_definition=..., dropped by the SDK
        "container.training.transformers_version": "4.6",
        "container.training.pytorch_version": "1.7",
        "container.training.py_version": "py36",
        "training.hyperparameters": MNLI_HYPERPARAMETERS,
    },
    "distilbert-spot": {
        "training.instance_type": "ml.p3.2xlarge",
        "training.instance_count": 1,
        "training.spot.enabled": True,
        "training.max_run_seconds": 1000,
        "training.spot.max_wait_seconds": 3600,
        "training.checkpoint_s3_uri": "s3://SESSION_BUCKET/using-spot/checkpoints",
        "training.metric_definitions": [],
        "container.training.transformers_version": "4.12",
        "container.training.pytorch_version": "1.9",
        "container.training.py_version": "py38",
        "serving.instance_type": "ml.g4dn.xlarge",
        "training.hyperparameters": {
            "model_name_or_path": "distilbert-base-uncased",
            "do_train": True,
            "do_eval": True,
            "num_train_epochs": 1,
            "per_device_train_batch_size": 32,
            "per_device_eval_batch_size": 64,
            "warmup_steps": 500,
            "learning_rate": 5e-05,
            "eval_strategy": "epoch",
            "save_strategy": "steps",
            "save_steps": 500,
            "max_seq_length": 512,
            "pad_to_max_length": True,
            "max_eval_samples": 10000,
            "output_dir": "/opt/ml/checkpoints",
        },
    },
}


def _get(recipe: dict[str, Any], dotted: str) -> Any:
    value: Any = recipe
    for part in dotted.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def differences(recipe: dict[str, Any], original: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    """(setting, original, recipe) for every setting of the original the recipe does not carry as written."""
    found = []
    for key, want in original.items():
        have = _get(recipe, key)
        if key == "training.hyperparameters":
            for name in sorted(set(want) | set(have or {})):
                if (have or {}).get(name) != want.get(name):
                    found.append((name, want.get(name), (have or {}).get(name)))
        elif have != want:
            found.append((key, want, have))
    return found


def _named(setting: str, original: Any) -> list[str]:
    """How a description may name a setting: its key, or the words its value is written in."""
    last = setting.split(".")[-1]
    return {
        "instance_type": [str(original)],
        "transformers_version": ["container"],
        "pytorch_version": ["container"],
        "py_version": ["container"],
        "max_run_seconds": ["max_run"],
        "max_wait_seconds": ["max_wait"],
    }.get(last, [last])


@pytest.mark.parametrize("name", sorted(ORIGINALS))
def test_every_difference_from_the_original_is_stated_with_its_reason(name: str) -> None:
    recipe = resolve_recipe(recipe_name=name)
    description = recipe["description"]
    unstated = [
        d
        for d in differences(recipe, ORIGINALS[name])
        if not any(w in description for w in _named(d[0], d[1]))
    ]
    assert unstated == [], f"{name} differs from the original without saying why"
    assert "instead of" in description and "Differences" in description


def test_the_check_catches_an_unstated_difference() -> None:
    recipe = resolve_recipe(recipe_name="bert-large-squad-smddp")
    recipe["training"]["hyperparameters"]["learning_rate"] = (
        3e-5  # a setting the original left at its default
    )
    recipe["training"]["volume_size_gb"] = 100
    found = {d[0] for d in differences(recipe, ORIGINALS["bert-large-squad-smddp"])}
    assert {"learning_rate", "training.volume_size_gb"} <= found
