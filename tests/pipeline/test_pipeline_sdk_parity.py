"""Our CreateTrainingJob request vs the SageMaker Python SDK's HuggingFace estimator, field by field.

The SDK (2.x) builds its request under moto (no credentials); a spy on the session's train() call
captures it with fit(wait=False). Intentional differences are listed in
hfpipe.core.run.request.INTENTIONAL_DIFFERENCES, which says why for each.
"""

from __future__ import annotations

import json
import os
from unittest import mock

import pytest
from accounts import ACCOUNT

from hfpipe.core.run.plan import PlanConfig, build_plan
from hfpipe.core.run.request import INTENTIONAL_DIFFERENCES
from hfpipe.local.engine.quotas import QuotaTable, default_quotas
from stacks.image_catalog import build_catalog

pytestmark = pytest.mark.slow
REGION = "us-east-1"
ROLE = f"arn:aws:iam::{ACCOUNT}:role/hfpipe-execution"
SOURCEDIR = "s3://artifacts-bucket/code/sourcedir.tar.gz"
RECIPES = [
    "bert-large-squad-ddp",
    "roberta-large-mnli-mp",
    "distilbert-spot",
    "bloomz-7b1-lora-samsum",
    "bert-large-squad-smddp",
    "roberta-large-mnli-smp",
]
# The original samples' own estimator arguments (HuggingFace(transformers_version="4.6", pytorch_version="1.7",
# py_version="py36", distribution=...)): the seed-faithful recipes with the seeds' container versions, short
# version strings included, must give the SDK's request too.
SEED_CONTAINERS = {
    "container.training.transformers_version": "4.6",
    "container.training.pytorch_version": "1.7",
    "container.training.py_version": "py36",
}


def sdk_request(recipe: dict, job_name: str, checkpoint: str | None) -> dict:
    from moto import mock_aws

    with (
        mock_aws(),
        mock.patch.dict(
            os.environ, {"AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "x", "AWS_DEFAULT_REGION": REGION}
        ),
    ):
        import boto3
        import sagemaker
        from sagemaker.huggingface import HuggingFace

        session = sagemaker.Session(
            boto_session=boto3.Session(region_name=REGION), default_bucket="artifacts-bucket"
        )
        t = recipe["training"]
        est = HuggingFace(
            entry_point=t["entry_point"],
            source_dir=SOURCEDIR,
            role=ROLE,
            instance_type=t["instance_type"],
            instance_count=t["instance_count"],
            volume_size=t["volume_size_gb"],
            max_run=t["max_run_seconds"],
            transformers_version=recipe["container"]["training"]["transformers_version"],
            pytorch_version=recipe["container"]["training"]["pytorch_version"],
            py_version=recipe["container"]["training"]["py_version"],
            hyperparameters=t["hyperparameters"],
            distribution=t["distribution"],
            use_spot_instances=t["spot"]["enabled"],
            max_wait=t["spot"]["max_wait_seconds"],
            checkpoint_s3_uri=checkpoint,
            checkpoint_local_path=t["checkpoint_local_path"] if checkpoint else None,
            metric_definitions=t["metric_definitions"] or None,
            output_path="s3://artifacts-bucket/models/",
            sagemaker_session=session,
        )
        captured = {}
        with mock.patch.object(
            session.sagemaker_client,
            "create_training_job",
            side_effect=lambda **kw: captured.update(kw) or {},
        ):
            est.fit(job_name=job_name, wait=False, logs=False)
        return captured


@pytest.mark.parametrize(
    ("name", "overrides"),
    [(name, {}) for name in RECIPES]
    + [(name, SEED_CONTAINERS) for name in ("bert-large-squad-smddp", "roberta-large-mnli-smp")],
    ids=[*RECIPES, "bert-large-squad-smddp-seed-args", "roberta-large-mnli-smp-seed-args"],
)
def test_request_matches_sdk(name, overrides):
    from hfpipe.core.recipe.recipes import resolve_recipe

    recipe = resolve_recipe(recipe_name=name, overrides=overrides)
    catalog = build_catalog(REGION, [recipe])
    config = PlanConfig(
        env="dev",
        region=REGION,
        role_arn=ROLE,
        sourcedir_uri=SOURCEDIR,
        data_bucket="data-bucket",
        artifacts_bucket="artifacts-bucket",
        image_catalog=catalog,
    )
    event = {"recipe_name": name, "overrides": overrides}
    plan = build_plan(event, f"{name}-sdk", config, QuotaTable(default_quotas()).client("eu-west-1"))
    ours = plan.training_job_request
    sdk = sdk_request(recipe, plan.training_job_name, plan.checkpoint_s3_uri)

    # Field by field: everything the SDK sends, we send identically, except the listed differences.
    for key in sorted(set(sdk) | set(ours)):
        if key in INTENTIONAL_DIFFERENCES:
            continue
        if key == "HyperParameters":
            assert ours[key] == sdk[key], json.dumps({"ours": ours[key], "sdk": sdk[key]}, indent=1)
        else:
            assert ours.get(key) == sdk.get(key), f"{key}: ours {ours.get(key)!r} != sdk {sdk.get(key)!r}"
    # Spelled out, the fields the issue names:
    assert ours["AlgorithmSpecification"]["TrainingImage"] == sdk["AlgorithmSpecification"]["TrainingImage"]
    assert ours.get("CheckpointConfig") == sdk.get("CheckpointConfig")
    assert ours["StoppingCondition"] == sdk["StoppingCondition"]
    assert ours.get("EnableManagedSpotTraining") == sdk.get("EnableManagedSpotTraining")
    # And the differences are real: the SDK sends a Debugger hook we leave out, we send tags it does not.
    assert "Tags" in ours and "DebugHookConfig" not in ours
