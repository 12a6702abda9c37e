"""Image URIs composed by stacks/image_catalog.py vs sagemaker.image_uris.retrieve, for every version string
the SDK's Hugging Face table accepts: full versions and their short aliases ("4.26" and "4.26.0" give
different tags), every PyTorch base version and alias, every Python version, GPU and CPU."""

from __future__ import annotations

import functools
import logging
import os
from typing import Any

import pytest

from stacks.image_catalog import distribution_rules, image_uri, sdk_table

REGION = "us-east-1"
INSTANCE = {"gpu": "ml.p3.2xlarge", "cpu": "ml.c5.xlarge"}


def combinations(scope: str) -> list[tuple[str, str, str]]:
    table = sdk_table()[scope]
    versions = dict(table["versions"])
    names = list(versions) + list(table.get("version_aliases", {}))
    out = []
    for tv in names:
        entry = versions[table.get("version_aliases", {}).get(tv, tv)]
        bases = [b for b in entry if b.startswith("pytorch")] + [
            a for a in entry.get("version_aliases", {}) if a.startswith("pytorch")
        ]
        for base in bases:
            cfg = entry[entry.get("version_aliases", {}).get(base, base)]
            for py in cfg.get("py_versions", []):
                out.append((tv, base.removeprefix("pytorch"), py))
    return out


@pytest.mark.parametrize("scope", ["training", "inference"])
def test_every_accepted_version_string_gives_the_sdks_image_uri(scope, monkeypatch):
    monkeypatch.setitem(os.environ, "SAGEMAKER_SUPPRESS_V2_WARNING", "1")
    logging.getLogger("sagemaker").setLevel(logging.ERROR)
    from sagemaker import image_uris, utils

    # The SDK parses botocore's endpoints file (megabytes) again at every retrieve() to find the registry's
    # DNS suffix; one parse serves every call here (the resolver is only read), 40 s -> a few.
    monkeypatch.setattr(utils, "_botocore_resolver", functools.cache(utils._botocore_resolver))

    table = sdk_table()
    checked = 0
    short = 0
    for tv, pv, py in combinations(scope):
        container: dict[str, Any] = {"transformers_version": tv, "pytorch_version": pv, "py_version": py}
        for processor, instance_type in INSTANCE.items():
            ours = image_uri(table, scope, container, REGION, processor)
            try:
                sdk = image_uris.retrieve(
                    "huggingface",
                    region=REGION,
                    version=tv,
                    py_version=py,
                    instance_type=instance_type,
                    image_scope=scope,
                    base_framework_version=f"pytorch{pv}",
                )
            except ValueError:
                sdk = None
            assert ours == sdk, (scope, tv, pv, py, processor)
            checked += sdk is not None
            short += sdk is not None and tv.count(".") == 1
    assert checked > 50 and short > 10, (checked, short)


def test_distribution_tables_are_the_sdks():
    from sagemaker import fw_utils

    rules = distribution_rules()
    assert (
        rules["dataparallel_pytorch_versions"]
        == fw_utils.SM_DATAPARALLEL_SUPPORTED_FRAMEWORK_VERSIONS["pytorch"]
    )
    assert "1.7" in rules["dataparallel_pytorch_versions"]  # the seed's PyTorch version
    assert set(rules["dataparallel_instance_types"]) == {
        t for t in fw_utils.SM_DATAPARALLEL_SUPPORTED_INSTANCE_TYPES if t.startswith("ml.")
    }


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
    from hfpipe.core.plan import check_distribution, check_rules
    from hfpipe.core.recipes import resolve_recipe
    from hfpipe.core.schema import RecipeError

    overrides = {f"container.training.{k}": v for k, v in containers.items()}
    recipe = resolve_recipe(recipe_name="bert-large-squad-smddp", overrides=overrides)
    with pytest.raises(RecipeError, match=needle):
        check_rules(recipe)
        check_distribution(recipe, {"distribution": distribution_rules()})
