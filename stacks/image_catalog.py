"""Container image URIs resolved at synth time from the SageMaker Python SDK's own image tables.

Reads ``sagemaker/image_uri_config/huggingface.json`` as data (importing ``sagemaker`` takes
seconds and is not needed for a table look-up) and composes the URIs exactly as
``sagemaker.image_uris.retrieve`` does; tests/pipeline/test_recipes_vs_infra.py checks the two agree.
The catalog shipped to the Lambdas is small: only the container versions the recipes name. The same
table gives the execution role its ECR repositories (stacks/constructs/execution_role.py); it is read
here, once per process.
"""

from __future__ import annotations

import importlib.util
import json
from functools import cache
from pathlib import Path
from typing import Any

from hfpipe.core.plan import catalog_key
from hfpipe.core.recipes import available_recipes, load_recipe

_SCOPES = ("training", "inference")


@cache
def sdk_table() -> dict[str, Any]:
    """The SageMaker Python SDK's ``image_uri_config/huggingface.json`` (training and inference scopes)."""
    spec = importlib.util.find_spec("sagemaker")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the sagemaker package (2.x) is needed at synth time for its image tables")
    path = Path(next(iter(spec.submodule_search_locations))) / "image_uri_config" / "huggingface.json"
    return json.loads(path.read_text())


def _domain(region: str) -> str:
    if region.startswith("cn-"):
        return "amazonaws.com.cn"
    if region.startswith("us-iso-"):
        return "c2s.ic.gov"
    if region.startswith("us-isob-"):
        return "sc2s.sgov.gov"
    return "amazonaws.com"


def image_uri(
    table: dict[str, Any], scope: str, container: dict[str, Any], region: str, processor: str
) -> str | None:
    """One image URI from the SDK's huggingface table, or None when that combination does not exist."""
    versions = table[scope]["versions"]
    tv = (
        table[scope]
        .get("version_aliases", {})
        .get(container["transformers_version"], container["transformers_version"])
    )
    entry = versions.get(tv)
    if entry is None:
        return None
    base = f"pytorch{container['pytorch_version']}"
    base = entry.get("version_aliases", {}).get(base, base)
    cfg = entry.get(base)
    if cfg is None or container["py_version"] not in cfg.get("py_versions", []):
        return None
    account = cfg["registries"].get(region)
    suffix = cfg.get("container_version", {}).get(processor)
    if account is None or suffix is None:
        return None
    tag = f"{container['pytorch_version']}-transformers{tv}-{processor}-{container['py_version']}-{suffix}"
    return f"{account}.dkr.ecr.{region}.{_domain(region)}/{cfg['repository']}:{tag}"


def build_catalog(
    region: str, recipes: list[dict[str, Any]] | None = None
) -> dict[str, dict[str, dict[str, str]]]:
    """{scope: {"<transformers>/<pytorch>/<py>": {processor: uri}}} for the recipes' containers."""
    if not region or region.startswith("${Token"):
        raise ValueError(
            f"region: {region!r} is not a concrete region; image URIs are resolved at synth time, "
            "so set the environment's region in cdk.json"
        )
    table = sdk_table()
    recipes = recipes if recipes is not None else [load_recipe(n) for n in available_recipes()]
    catalog: dict[str, dict[str, dict[str, str]]] = {s: {} for s in _SCOPES}
    for recipe in recipes:
        for scope in _SCOPES:
            container = recipe["container"][scope]
            if container.get("image_uri"):
                continue
            found = {p: uri for p in ("gpu", "cpu") if (uri := image_uri(table, scope, container, region, p))}
            if not found:
                raise ValueError(
                    f"recipe {recipe['name']}: container.{scope} {catalog_key(container)} is not in the "
                    f"SageMaker SDK's huggingface {scope} table for {region}"
                )
            catalog[scope][catalog_key(container)] = found
    return catalog
