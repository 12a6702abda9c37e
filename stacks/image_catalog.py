"""Container image URIs resolved at synth time through the SageMaker Python SDK's own
``sagemaker.image_uris.retrieve``, the function the ``HuggingFace`` estimator and model call.

The SDK is imported once per synthesis (a few seconds; local mode caches what it synthesizes,
hfpipe/local/stacks.py). The catalog shipped to the Lambdas is small: only the container versions the
recipes name. The AWS vLLM Deep Learning Container is in none of the SDK's tables (it has a
``huggingface-vllm-neuronx`` table for Inferentia and Trainium only), so its repository and tags are pinned
in dlc_images.json, in the registry accounts the SDK lists for the Deep Learning Containers. The execution
role pulls exactly the repositories of the catalog's URIs (stacks/constructs/execution_role.py).
"""

from __future__ import annotations

import json
import logging
import os
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

from hfpipe.core.recipe.recipes import available_recipes, load_recipe
from hfpipe.core.recipe.serving_fit import GPUS_KEY
from hfpipe.core.run.plan import DISTRIBUTION_KEY, catalog_key
from hfpipe.kinds import ServingKind, serving_kind_of
from hfpipe.kinds.serving import HF_IMAGE_ARGUMENTS, PINNED_TABLE

_SCOPES = ("training", "inference")
#: The instance types `retrieve` is given to pick a processor: the SDK's own local-mode names, which map to
#: "gpu" and "cpu" (sagemaker/image_uris.py, _processor) whatever instance family a recipe names.
_PROCESSOR_INSTANCE = {"gpu": "local_gpu", "cpu": "local"}


@cache
def _sdk() -> dict[str, ModuleType]:
    """The SDK's modules this file reads: image_uris (retrieve), fw_utils (distribution tables), and the
    package itself (its image_uri_config folder). Its v2 deprecation banner and its config loader's INFO
    lines (written to standard output, sagemaker/config/config_utils.py) are silenced."""
    os.environ.setdefault("SAGEMAKER_SUPPRESS_V2_WARNING", "1")
    for name in ("sagemaker", "sagemaker.config"):
        logging.getLogger(name).setLevel(logging.WARNING)
    try:
        import sagemaker
        from sagemaker import fw_utils, image_uris
    except ImportError as exc:  # pragma: no cover - the pinned requirements install it
        raise RuntimeError(
            "the sagemaker package (2.x) is needed at synth time for its image tables"
        ) from exc
    return {"sagemaker": sagemaker, "fw_utils": fw_utils, "image_uris": image_uris}


def _sdk_config(name: str) -> dict[str, Any]:
    folder = Path(str(_sdk()["sagemaker"].__file__)).parent / "image_uri_config"
    return dict(json.loads((folder / name).read_text()))


@cache
def sdk_table() -> dict[str, Any]:
    """The SageMaker Python SDK's ``image_uri_config/huggingface.json``, read only for its registry accounts
    (`dlc_registries`); URIs come from `image_uri`."""
    return _sdk_config("huggingface.json")


def distribution_rules() -> dict[str, list[str]]:
    """The SDK's smdistributed data-parallel tables (sagemaker/fw_utils.py), as the Plan checks them.

    `dataparallel_pytorch_versions` is SM_DATAPARALLEL_SUPPORTED_FRAMEWORK_VERSIONS["pytorch"], the list the
    HuggingFace estimator checks `pytorch_version` against, as written (it holds "1.7" and "1.7.1" but not
    "1.13"); `dataparallel_instance_types` is SM_DATAPARALLEL_SUPPORTED_INSTANCE_TYPES without local mode.
    """
    fw_utils = _sdk()["fw_utils"]
    return {
        "dataparallel_pytorch_versions": list(
            fw_utils.SM_DATAPARALLEL_SUPPORTED_FRAMEWORK_VERSIONS["pytorch"]
        ),
        "dataparallel_instance_types": [
            t for t in fw_utils.SM_DATAPARALLEL_SUPPORTED_INSTANCE_TYPES if t.startswith("ml.")
        ],
    }


@cache
def sdk_image_uri(
    table: str, table_scope: str, arguments: tuple[tuple[str, str], ...], region: str, processor: str
) -> str | None:
    """The image `sagemaker.image_uris.retrieve(table, ...)` gives for `arguments` (its keyword arguments:
    version, py_version, base_framework_version, ...) in `region` for `processor`, or None where the SDK has
    none (it raises ValueError for an unknown version, Python version, processor or region)."""
    try:
        uri = _sdk()["image_uris"].retrieve(
            table,
            region=region,
            image_scope=table_scope,
            instance_type=_PROCESSOR_INSTANCE[processor],
            **dict(arguments),
        )
    except ValueError:
        return None
    return str(uri)


def image_uri(
    scope: str, transformers: str, pytorch: str, py: str, region: str, processor: str
) -> str | None:
    """The Hugging Face image `sagemaker.image_uris.retrieve` gives for these versions, or None where the SDK
    has none."""
    arguments = {"version": transformers, "py_version": py, "base_framework_version": f"pytorch{pytorch}"}
    return sdk_image_uri("huggingface", scope, tuple(sorted(arguments.items())), region, processor)


def _domain(region: str) -> str:
    if region.startswith("cn-"):
        return "amazonaws.com.cn"
    if region.startswith("us-iso-"):
        return "c2s.ic.gov"
    if region.startswith("us-isob-"):
        return "sc2s.sgov.gov"
    return "amazonaws.com"


#: Images the SageMaker SDK's tables do not list (the AWS vLLM DLC): repository and tags, with their source.
DLC_IMAGES = Path(__file__).resolve().parent / "dlc_images.json"


@cache
def dlc_table() -> dict[str, Any]:
    """stacks/dlc_images.json: {table scope: {"repository", "versions": {version: {processor: tag}}}}."""
    return {k: v for k, v in json.loads(DLC_IMAGES.read_text()).items() if not k.startswith("_")}


@cache
def dlc_registries() -> dict[str, str]:
    """{region: account} of the AWS Deep Learning Containers' registries: the accounts the SDK's
    huggingface inference entries name (one account per region for every DLC repository)."""
    accounts: dict[str, str] = {}
    for entry in sdk_table()["inference"]["versions"].values():
        for cfg in entry.values():
            if isinstance(cfg, dict) and isinstance(cfg.get("registries"), dict):
                accounts.update(cfg["registries"])
    return accounts


def dlc_image_uri(table_scope: str, version: str, region: str, processor: str) -> str | None:
    """One image URI of a pinned DLC table (dlc_images.json), or None when it has no such image."""
    scope = dlc_table().get(table_scope)
    tag = (scope or {}).get("versions", {}).get(version, {}).get(processor)
    account = dlc_registries().get(region)
    if scope is None or tag is None or account is None:
        return None
    return f"{account}.dkr.ecr.{region}.{_domain(region)}/{scope['repository']}:{tag}"


def gpu_table(region: str) -> dict[str, list[int]]:
    """{instance type: [GPU count, MiB per GPU]} in `region`, from the SDK's instance_gpu_info.json (what
    the vllm serving kind's fit check reads, hfpipe/core/recipe/serving_fit.py); compact, as the Plan Lambda's
    environment (4 KB in all) carries the catalog."""
    info = _sdk_config("instance_gpu_info.json")
    return {
        instance: [int(v["Count"]), int(v["TotalGpuMemoryInMiB"]) // int(v["Count"])]
        for instance, v in sorted(info.get(region, {}).items())
    }


def _sdk_tables() -> frozenset[str]:
    """The frameworks `image_uris.retrieve` knows: the SDK's image_uri_config/<table>.json files."""
    folder = Path(str(_sdk()["sagemaker"].__file__)).parent / "image_uri_config"
    return frozenset(p.stem for p in folder.glob("*.json"))


def _images(recipe: dict[str, Any], part: str, kind: ServingKind | None, region: str) -> dict[str, str]:
    """{processor: uri} of the recipe's container.<part>: the training DLC (kind None) or the serving
    kind's image, from the SDK's table the kind names or the pinned DLC table; ValueError when none."""
    container = recipe["container"][part]
    table, table_scope = (kind.image_table, kind.image_table_scope) if kind else ("huggingface", "training")
    pinned = table == PINNED_TABLE
    if not pinned and table not in _sdk_tables():
        raise ValueError(
            f"recipe {recipe['name']}: serving kind {kind.name if kind else '-'!r} reads the {table!r} image "
            f"table, which is neither one of the SageMaker SDK's image tables nor {PINNED_TABLE!r} "
            "(stacks/dlc_images.json)"
        )
    key = kind.catalog_key(container) if kind else catalog_key(container)
    templates = {} if pinned else kind.image_arguments if kind else HF_IMAGE_ARGUMENTS
    arguments = tuple(sorted((k, v.format(**container)) for k, v in templates.items()))
    found = {
        p: uri
        for p in ("gpu", "cpu")
        if (
            uri := dlc_image_uri(table_scope, key, region, p)
            if pinned
            else sdk_image_uri(table, table_scope, arguments, region, p)
        )
    }
    if not found:
        where = "dlc_images.json" if pinned else f"SageMaker SDK's {table} {table_scope}"
        raise ValueError(
            f"recipe {recipe['name']}: container.{part} {key} is not in the {where} table for {region}"
        )
    return found


def build_catalog(region: str, recipes: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """{scope: {"<transformers>/<pytorch>/<py>": {processor: uri}}} for the recipes' containers (training:
    the Hugging Face training DLC; inference: the image of the recipe's serving kind, under the kind's
    catalog scope and key), plus the SDK's distribution tables under "distribution" (see
    `distribution_rules`) and its GPU table."""
    if not region or region.startswith("${Token"):
        raise ValueError(
            f"region: {region!r} is not a concrete region; image URIs are resolved at synth time, "
            "so set the environment's region in cdk.json"
        )
    recipes = recipes if recipes is not None else [load_recipe(n) for n in available_recipes()]
    catalog: dict[str, Any] = {s: {} for s in _SCOPES}
    catalog[DISTRIBUTION_KEY] = distribution_rules()
    for recipe in recipes:
        serving = serving_kind_of(recipe)
        for part, kind in (("training", None), ("inference", serving)):
            container = recipe["container"][part]
            if container.get("image_uri"):
                continue
            scope, key = (
                (serving.image_scope, serving.catalog_key(container))
                if kind
                else ("training", catalog_key(container))
            )
            catalog.setdefault(scope, {})[key] = _images(recipe, part, kind, region)
    catalog[GPUS_KEY] = gpu_table(region)
    return catalog
