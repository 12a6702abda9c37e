"""Hostile execution inputs to the Plan Lambda: every one ends in RecipeError (the Plan state's error name)
naming the field, the value and what is accepted; nothing is created, since Plan runs first.

Also: URIs outside the environment (another environment's buckets, another account's registry) are refused
unless the environment's config allows them.
"""

from __future__ import annotations

import math
from typing import Any

import pytest
from accounts import ACCOUNT, ACCOUNT_A

from hfpipe.core.recipe.recipes import load_recipe
from hfpipe.core.recipe.schema import RecipeError
from hfpipe.core.run.plan import PlanConfig, build_plan
from hfpipe.core.run.plan_model import Plan

REGION = "eu-west-1"
REGISTRY = f"{ACCOUNT}.dkr.ecr.{REGION}.amazonaws.com"
OTHER_REGISTRY = f"{ACCOUNT_A}.dkr.ecr.{REGION}.amazonaws.com"
CATALOG = {
    "training": {
        "4.56.2/2.8.0/py312": {p: f"{REGISTRY}/huggingface-pytorch-training:{p}" for p in ("cpu", "gpu")}
    },
    "inference": {
        "4.51.3/2.6.0/py312": {p: f"{REGISTRY}/huggingface-pytorch-inference:{p}" for p in ("cpu", "gpu")}
    },
}


def config(**extra: Any) -> PlanConfig:
    return PlanConfig(
        env="dev",
        region=REGION,
        role_arn=f"arn:aws:iam::{ACCOUNT}:role/hfpipe-dev-sagemaker",
        sourcedir_uri="s3://hfpipe-dev-artifacts/code/sourcedir.tar.gz",
        data_bucket="hfpipe-dev-data",
        artifacts_bucket="hfpipe-dev-artifacts",
        image_catalog=CATALOG,
        **extra,
    )


class Quotas:
    """Every quota applied at 100: the inputs here fail (or pass) on their own, never on a quota.

    Shaped as the look-up reads Service Quotas (hfpipe.core.run.quotas): botocore paginators of
    ListServiceQuotas (the applied values) and ListAWSDefaultServiceQuotas (none needed here).
    """

    def get_paginator(self, operation_name: str) -> Any:
        names = [
            f"{t} for {k}"
            for t in ("ml.g4dn.xlarge", "ml.m5.large", "ml.p3.16xlarge", "ml.g5.xlarge")
            for k in (
                "training job usage",
                "spot training job usage",
                "endpoint usage",
                "processing job usage",
            )
        ]
        applied = operation_name == "list_service_quotas"
        quotas = [{"QuotaName": n, "QuotaCode": f"L-{i:08X}", "Value": 100.0} for i, n in enumerate(names)]
        pages = [{"Quotas": quotas if applied else []}]
        return type("Paginator", (), {"paginate": lambda self, **kwargs: iter(pages)})()


def plan(event: Any, cfg: PlanConfig | None = None) -> Plan:
    return build_plan(event, "exec-1", cfg or config(), Quotas())


RECIPE = load_recipe("tiny-qa")

# (execution input, fragments of the error)
# fmt: off
INPUT_CASES: list[tuple[Any, list[str]]] = [
    ([], ["input", "expected a JSON object", "list"]),
    ("tiny-qa", ["input", "expected a JSON object", "str"]),
    (5, ["input", "int"]),
    ({"recipe_name": "tiny-qa", "extra": 1}, ["input", "unknown field(s) ['extra']", "accepted"]),
    ({}, ["input", "give either 'recipe'", "'recipe_name'"]),
    # recipe names given to the Lambda are names, never paths
    ({"recipe_name": "/etc/passwd"}, ["input.recipe_name", "'/etc/passwd'", "lower-case letters"]),
    ({"recipe_name": "/var/task/recipes/tiny-qa.json"}, ["input.recipe_name", "tiny-qa.json'", "not a recipe name"]),
    ({"recipe_name": "../recipes/tiny-qa"}, ["input.recipe_name", "'../recipes/tiny-qa'", "accepted"]),
    ({"recipe_name": "tiny-qa.json"}, ["input.recipe_name", "'tiny-qa.json'", "accepted"]),
    ({"recipe_name": "Tiny-QA"}, ["input.recipe_name", "'Tiny-QA'", "accepted"]),
    ({"recipe_name": ""}, ["input.recipe_name", "''", "accepted"]),
    ({"recipe_name": 5}, ["input.recipe_name", "5", "accepted"]),
    ({"recipe_name": ["tiny-qa"]}, ["input.recipe_name", "['tiny-qa']", "accepted"]),
    ({"recipe_name": "no-such-recipe"}, ["recipe", "'no-such-recipe' is not a known recipe", "known"]),
    ({"recipe": RECIPE, "recipe_name": "tiny-qa"}, ["input", "both 'recipe' and 'recipe_name'", "exactly one"]),
    ({"recipe": 5}, ["input.recipe", "5", "a recipe object"]),
    ({"recipe": []}, ["input.recipe", "[]", "a recipe object"]),
    ({"recipe": "tiny-qa"}, ["input.recipe", "'tiny-qa'", "a recipe object"]),
    # overrides: an object or a list of key=value strings
    ({"recipe_name": "tiny-qa", "overrides": [1, 2]}, ["input.overrides[0]", "1", "'dotted.key=value' string"]),
    ({"recipe_name": "tiny-qa", "overrides": ["deploy=false", None]}, ["input.overrides[1]", "None", "accepted"]),
    ({"recipe_name": "tiny-qa", "overrides": "deploy=false"}, ["input.overrides", "'deploy=false'", "an object or a list"]),
    ({"recipe_name": "tiny-qa", "overrides": 7}, ["input.overrides", "7", "an object or a list"]),
    ({"recipe_name": "tiny-qa", "overrides": {"training..x": 1}}, ["'training..x'", "no empty part"]),
    ({"recipe_name": "tiny-qa", "overrides": {"": 1}}, ["key ''", "no empty part"]),
    ({"recipe_name": "tiny-qa", "overrides": {"serving.max_latency_ms": math.nan}}, ["serving.max_latency_ms", "nan", "finite"]),
    ({"recipe_name": "tiny-qa", "overrides": ["serving.max_latency_ms=NaN"]}, ["serving.max_latency_ms", "'NaN'", "finite"]),
    ({"recipe_name": "tiny-qa", "overrides": {"training.channels.training": 3}}, ["recipe.training.channels.training", "3", "accepted"]),
    ({"recipe_name": "tiny-qa", "overrides": {"training.distribution": {"torch_distributed": False}}}, ["recipe.training.distribution.torch_distributed", "False"]),
    ({"recipe_name": "tiny-qa", "overrides": {"deploy.x": 1}}, ["recipe.deploy", "{'x': 1}", "type boolean"]),
    ({ "recipe_name": "tiny-qa", "overrides": {"training.metric_definitions": [{"Name": "f", "Regex": "f=(["}]}, }, ["recipe.training.metric_definitions[0].Regex", "does not compile"]),
    # A recipe's own entry point (not one of the project's scripts, whose argument names are checked first).
    ({ "recipe_name": "tiny-qa", "overrides": {"training.entry_point": "own_train.py", "training.hyperparameters": {f"h{i}": 1 for i in range(96)}}, }, ["recipe.training.hyperparameters", "101 hyperparameters", "at most 100"]),
    ({ "recipe_name": "tiny-qa", "overrides": {"training.hyperparameters": {"h0": 1}}, }, ["recipe.training.hyperparameters.h0", "not an argument of run_qa.py"]),
    # top-level switches
    ({"recipe_name": "tiny-qa", "deploy": "no"}, ["recipe.deploy", "'no'", "type boolean"]),
    ({"recipe_name": "tiny-qa", "keep_endpoint": 1}, ["recipe.serving.keep_endpoint", "1", "type boolean"]),
    ({"recipe_name": "tiny-qa", "poll_seconds": 0}, ["input.poll_seconds", "0", "an integer from 1 to 3600"]),
    ({"recipe_name": "tiny-qa", "poll_seconds": 1.5}, ["input.poll_seconds", "1.5", "an integer"]),
    ({"recipe_name": "tiny-qa", "poll_seconds": True}, ["input.poll_seconds", "True", "an integer"]),
    ({"recipe_name": "tiny-qa", "poll_seconds": None}, ["input.poll_seconds", "None", "an integer"]),
    ({"recipe_name": "tiny-qa", "poll_seconds": math.nan}, ["input.poll_seconds", "nan", "an integer"]),
    ({"recipe_name": "tiny-qa", "poll_seconds": 10**9}, ["input.poll_seconds", "1000000000", "to 3600"]),
    # URIs outside the environment
    ({ "recipe_name": "tiny-qa", "overrides": {"training.channels.training": "s3://hfpipe-prod-data/train/"}, }, ["recipe.training.channels.training", "'s3://hfpipe-prod-data/train/'", "bucket 'hfpipe-prod-data'", "accepted: buckets ['hfpipe-dev-artifacts', 'hfpipe-dev-data']", "allowed_s3_buckets"]),
    ({ "recipe_name": "tiny-qa", "overrides": {"training.checkpoint_s3_uri": "s3://hfpipe-prod-artifacts/checkpoints/x/"}, }, ["recipe.training.checkpoint_s3_uri", "hfpipe-prod-artifacts", "not this environment's"]),
    ({ "recipe_name": "tiny-qa", "overrides": {"container.training.image_uri": f"{OTHER_REGISTRY}/evil:latest"}, }, ["recipe.container.training.image_uri", OTHER_REGISTRY, "not in this environment's image catalog", f"accepted: registries ['{REGISTRY}']"]),
    ({ "recipe_name": "tiny-qa", "overrides": {"container.inference.image_uri": "docker.io/library/evil:1"}, }, ["recipe.container.inference.image_uri", "'docker.io'", "allowed_image_registries"]),
    ({"recipe_name": "tiny-qa", "overrides": {"container.training.image_uri": "evil"}}, ["recipe.container.training.image_uri", "'evil'", "REGISTRY/REPOSITORY"]),
    ({"recipe_name": "tiny-qa", "overrides": {"container.training.image_uri": f"{REGISTRY}/a b:1"}}, ["recipe.container.training.image_uri", "accepted: an image URI"]),
    ({"recipe_name": "tiny-qa", "overrides": {"container.training.image_uri": 5}}, ["recipe.container.training.image_uri", "5", "type string or null"]),
]
# fmt: on


@pytest.mark.parametrize(("event", "fragments"), INPUT_CASES, ids=[f"p{i}" for i in range(len(INPUT_CASES))])
def test_plan_input_refused(event: Any, fragments: list[str]) -> None:
    with pytest.raises(RecipeError) as err:
        plan(event)
    for fragment in fragments:
        assert fragment in str(err.value), (fragment, str(err.value))


# Accepted on purpose: what the environment's config allows, own buckets, key prefixes, JSON spellings.
def test_allow_lists_widen_the_environment() -> None:
    event = {
        "recipe_name": "tiny-qa",
        "overrides": {
            "training.channels.training": "s3://shared-datasets/squad/",
            "container.training.image_uri": f"{OTHER_REGISTRY}/custom:1",
        },
    }
    with pytest.raises(RecipeError):
        plan(event)
    allowed = config(allowed_s3_buckets=("shared-datasets",), allowed_image_registries=(OTHER_REGISTRY,))
    result = plan(event, allowed)
    assert result.image_uri == f"{OTHER_REGISTRY}/custom:1"
    channels = {c["ChannelName"]: c for c in result.training_job_request["InputDataConfig"]}
    assert channels["training"]["DataSource"]["S3DataSource"]["S3Uri"] == "s3://shared-datasets/squad/"


def test_own_buckets_and_string_environments_accepted() -> None:
    result = plan(
        {
            "recipe_name": "tiny-qa",
            "overrides": {
                "training.channels.training": "s3://hfpipe-dev-data/squad/",
                "training.checkpoint_s3_uri": "s3://hfpipe-dev-artifacts/checkpoints/x/",
                "training.environment": {"FLAG": "true", "RATE": "0.5", "NAME": "x"},
                "serving.environment": {"SM_NUM_GPUS": "1", "TRUST": "false"},
            },
        }
    )
    assert result.training_job_request["Environment"] == {"FLAG": "true", "RATE": "0.5", "NAME": "x"}
    assert result.serving_environment == {"SM_NUM_GPUS": "1", "TRUST": "false"}


def test_lambda_reads_the_allow_lists_from_its_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib
    import sys
    from pathlib import Path

    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[2] / "lambda" / "pipeline"))
    plan_module = importlib.import_module("pipeline_lambdas.plan")
    assert "pipeline_lambdas.plan" in sys.modules
    env = {
        "HFPIPE_ENV": "dev",
        "AWS_REGION": REGION,
        "EXECUTION_ROLE_ARN": f"arn:aws:iam::{ACCOUNT}:role/r",
        "SOURCEDIR_URI": "s3://hfpipe-dev-artifacts/code/sourcedir.tar.gz",
        "DATA_BUCKET": "hfpipe-dev-data",
        "ARTIFACTS_BUCKET": "hfpipe-dev-artifacts",
        "ALLOWED_S3_BUCKETS": "shared-a,shared-b",
    }
    cfg = plan_module.config_from_env(env)
    assert cfg.allowed_s3_buckets == ("shared-a", "shared-b")
    assert cfg.allowed_image_registries == ()
