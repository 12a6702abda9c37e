"""Recipes against the infrastructure: quota targets in cdk.json and the synth-time image catalog."""

from __future__ import annotations

import pytest

import app as cdk_app
from hfpipe.core.recipe.recipes import available_recipes, load_recipe
from hfpipe.core.recipe.schema import validate
from hfpipe.core.run.plan import catalog_key
from hfpipe.core.run.quotas import quota_names, quota_users
from hfpipe.kinds import serving_kind_of
from stacks.config import load_environments
from stacks.image_catalog import build_catalog

ENVIRONMENTS = load_environments(cdk_app.cdk_json_context()["hfpipe:environments"])
# Validated: the schema fills the defaults (spot off, one serving instance) as the Plan Lambda does.
RECIPES = {name: validate(load_recipe(name)) for name in available_recipes()}
ORIGINALS = {"bert-large-squad-ddp", "roberta-large-mnli-mp", "distilbert-spot", "bloomz-7b1-lora-samsum"}
# An instance type per processor, for the SDK's retrieve() (it only reads the family's processor).
INSTANCE_FOR = {"gpu": "ml.g5.xlarge", "cpu": "ml.m5.xlarge"}


def test_the_original_recipes_are_all_there():
    assert set(RECIPES) >= ORIGINALS


@pytest.mark.parametrize("env", sorted(ENVIRONMENTS))
@pytest.mark.parametrize("recipe", sorted(RECIPES))
def test_every_instance_type_a_recipe_uses_has_a_quota_target(env, recipe):
    # The same names the Plan Lambda checks: training (spot or not) and the endpoint's instance type. A new
    # recipe on instance types the environment already has targets for needs no edit of cdk.json.
    targets = {q.name: q for q in ENVIRONMENTS[env].quotas if q.service_code == "sagemaker"}
    for name, needed in quota_names(RECIPES[recipe], deploy=True).items():
        assert name in targets, f"cdk.json {env}: no quota target {name!r} (needed by {recipe})"
        assert targets[name].value >= needed, (env, name, targets[name].value, needed)


@pytest.mark.parametrize("env", sorted(ENVIRONMENTS))
def test_every_quota_target_is_needed_by_a_recipe(env):
    # No stale targets (instance types a recipe used to name, or misspelt quota names).
    needed = {name for recipe in RECIPES.values() for name in quota_names(recipe, deploy=True)}
    for quota in ENVIRONMENTS[env].quotas:
        assert quota.name in needed, (env, quota.name)


def test_quota_users_names_each_quota_with_the_recipes_needing_it():
    # Written out by hand: spot and on-demand training are different quotas, a recipe's training and
    # endpoint instances of one type are two quotas, and recipes sharing one are listed once each, sorted.
    def recipe(instance, spot, endpoint):
        return {
            "training": {"instance_type": instance, "instance_count": 2, "spot": {"enabled": spot}},
            "serving": {"instance_type": endpoint, "instance_count": 1},
        }

    users = quota_users(
        {
            "b": recipe("ml.g5.xlarge", False, "ml.g5.xlarge"),
            "a": recipe("ml.g5.xlarge", False, "ml.m5.large"),
            "c": recipe("ml.g5.xlarge", True, "ml.m5.large"),
            # An adapter kept unmerged is served on the shared base: its training quota only.
            "d": {**recipe("ml.g5.xlarge", False, "ml.p4d.24xlarge"), "adapter": {"base_model": "org/base"}},
        }
    )
    assert users == {
        "ml.g5.xlarge for endpoint usage": ("b",),
        "ml.g5.xlarge for spot training job usage": ("c",),
        "ml.g5.xlarge for training job usage": ("a", "b", "d"),
        "ml.m5.large for endpoint usage": ("a", "c"),
    }
    assert quota_users({}) == {}


@pytest.mark.slow
@pytest.mark.parametrize("region", sorted({e.region for e in ENVIRONMENTS.values()}))
def test_image_catalog_agrees_with_the_sdk(region):
    from sagemaker import image_uris

    catalog = build_catalog(region)
    # The distinct containers the recipes name (many recipes share one), each processor the catalog has.
    # (The vllm serving kind's image is not in the SDK's tables: tests/pipeline/test_vllm_kind.py.)
    containers = {
        (scope, catalog_key(r["container"][scope])): r["container"][scope]
        for r in RECIPES.values()
        for scope in ("training", "inference")
        if not r["container"][scope].get("image_uri")
        and (scope == "training" or serving_kind_of(r).image_table == "huggingface")
    }
    assert containers
    for (scope, key), container in sorted(containers.items()):
        uris = catalog[scope][key]
        assert set(uris) <= {"gpu", "cpu"} and uris, (scope, key, uris)
        for processor, uri in uris.items():
            expected = image_uris.retrieve(
                "huggingface",
                region,
                version=container["transformers_version"],
                base_framework_version=f"pytorch{container['pytorch_version']}",
                py_version=container["py_version"],
                instance_type=INSTANCE_FOR[processor],
                image_scope=scope,
            )
            assert uri == expected, (scope, key, processor)
