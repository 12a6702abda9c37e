"""Image URIs come from sagemaker.image_uris.retrieve itself (stacks/image_catalog.py); what the project adds
is the mapping around it: a processor chosen without an instance type, None for what the SDK has no image
of, and the SDK's distribution tables as the Plan checks them."""

from __future__ import annotations

import pytest

from stacks.image_catalog import distribution_rules, image_uri

REGION = "us-east-1"


@pytest.mark.parametrize(
    ("scope", "versions", "processor", "repository_and_tag"),
    [
        # What recipes/*.json name, tags as AWS's Deep Learning Containers list them ("Available Images").
        (
            "training",
            ("4.56.2", "2.8.0", "py312"),
            "gpu",
            "huggingface-pytorch-training:2.8.0-transformers4.56.2-gpu-py312-cu129-ubuntu22.04",
        ),
        (
            "inference",
            ("4.51.3", "2.6.0", "py312"),
            "cpu",
            "huggingface-pytorch-inference:2.6.0-transformers4.51.3-cpu-py312-ubuntu22.04",
        ),
        # A short version keeps its spelling in the tag (the SDK resolves the alias only for the look-up).
        (
            "training",
            ("4.26", "1.13", "py39"),
            "gpu",
            "huggingface-pytorch-training:1.13-transformers4.26-gpu-py39-cu117-ubuntu20.04",
        ),
    ],
)
def test_image_uri_is_the_dlc_image_for_the_versions(scope, versions, processor, repository_and_tag):
    uri = image_uri(scope, *versions, REGION, processor)
    assert uri is not None
    host, path = uri.split("/", 1)
    assert path == repository_and_tag
    assert host.endswith(f".dkr.ecr.{REGION}.amazonaws.com") and host.split(".")[0].isdigit()


@pytest.mark.parametrize(
    ("scope", "versions", "processor", "region"),
    [
        ("training", ("4.56.2", "2.8.0", "py312"), "cpu", REGION),  # the training DLC has no CPU image
        ("training", ("9.99.0", "2.8.0", "py312"), "gpu", REGION),  # no such transformers version
        ("training", ("4.56.2", "2.8.0", "py39"), "gpu", REGION),  # no such Python for it
        ("training", ("4.56.2", "2.8.0", "py312"), "gpu", "xx-nowhere-1"),  # no registry there
    ],
)
def test_image_uri_is_none_where_the_sdk_has_no_image(scope, versions, processor, region):
    assert image_uri(scope, *versions, region, processor) is None


def test_distribution_tables_are_the_sdks():
    rules = distribution_rules()
    assert "1.7" in rules["dataparallel_pytorch_versions"]  # the seed's PyTorch version
    assert "1.13" not in rules["dataparallel_pytorch_versions"]
    assert {"ml.p3.16xlarge", "ml.p4d.24xlarge"} <= set(rules["dataparallel_instance_types"])
    assert all(t.startswith("ml.") for t in rules["dataparallel_instance_types"])  # local modes left out


@pytest.mark.parametrize(
    ("containers", "needle"),
    [
        (
            {"pytorch_version": "1.13", "transformers_version": "4.26", "py_version": "py39"},
            "not in PyTorch 1.13",
        ),
        ({"pytorch_version": "2.0", "transformers_version": "4.28.1"}, "must both be full"),
    ],
)
def test_plan_refuses_what_the_sdk_refuses(containers, needle):
    from hfpipe.core.recipe.recipes import resolve_recipe
    from hfpipe.core.recipe.schema import RecipeError
    from hfpipe.core.run.plan import check_distribution, check_rules

    overrides = {f"container.training.{k}": v for k, v in containers.items()}
    recipe = resolve_recipe(recipe_name="bert-large-squad-smddp", overrides=overrides)
    with pytest.raises(RecipeError, match=needle):
        check_rules(recipe)
        check_distribution(recipe, {"distribution": distribution_rules()})
