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

from hfpipe.core.plan import DISTRIBUTION_KEY, catalog_key
from hfpipe.core.recipes import available_recipes, load_recipe
from hfpipe.core.serving_fit import GPUS_KEY
from hfpipe.kinds import serving_kind_of

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
def image_uri(
    scope: str, transformers: str, pytorch: str, py: str, region: str, processor: str
) -> str | None:
    """The Hugging Face image `sagemaker.image_uris.retrieve` gives for these versions, or None where the SDK
    has none (it raises ValueError for an unknown version, Python version, processor or region)."""
    try:
        uri = _sdk()["image_uris"].retrieve(
            "huggingface",
            region=region,
            version=transformers,
            py_version=py,
            instance_type=_PROCESSOR_INSTANCE[processor],
            image_scope=scope,
            base_framework_version=f"pytorch{pytorch}",
        )
    except ValueError:
        return None
    return str(uri)


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
    the vllm serving kind's fit check reads, hfpipe/core/serving_fit.py); compact, as the Plan Lambda's
    environment (4 KB in all) carries the catalog."""
    info = _sdk_config("instance_gpu_info.json")
    return {
        instance: [int(v["Count"]), int(v["TotalGpuMemoryInMiB"]) // int(v["Count"])]
        for instance, v in sorted(info.get(region, {}).items())
    }


def build_catalog(region: str, recipes: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """{scope: {"<transformers>/<pytorch>/<py>": {processor: uri}}} for the recipes' containers, plus the
    SDK's distribution tables under "distribution" (see `distribution_rules`)."""
    if not region or region.startswith("${Token"):
        raise ValueError(
            f"region: {region!r} is not a concrete region; image URIs are resolved at synth time, "
            "so set the environment's region in cdk.json"
        )
    recipes = recipes if recipes is not None else [load_recipe(n) for n in available_recipes()]
    catalog: dict[str, Any] = {s: {} for s in _SCOPES}
    catalog[DISTRIBUTION_KEY] = distribution_rules()
    for recipe in recipes:
        # Training: the Hugging Face training DLC. Inference: where the recipe's serving kind says.
        serving = serving_kind_of(recipe)
        if serving.image_table not in ("huggingface", "aws-dlc"):
            # The SDK's huggingface table and the pinned DLC table are read; a serving kind on another table
            # adds its reader here (docs/extending.md).
            raise ValueError(
                f"recipe {recipe['name']}: serving kind {serving.name!r} reads the {serving.image_table!r} "
                "image table, which stacks/image_catalog.py cannot read; accepted: 'huggingface', 'aws-dlc'"
            )
        for part, scope, table, table_scope, key_of in (
            ("training", "training", "huggingface", "training", catalog_key),
            (
                "inference",
                serving.image_scope,
                serving.image_table,
                serving.image_table_scope,
                serving.catalog_key,
            ),
        ):
            container = recipe["container"][part]
            if container.get("image_uri"):
                continue
            key = key_of(container)
            found = {
                p: uri
                for p in ("gpu", "cpu")
                if (
                    uri := image_uri(
                        table_scope,
                        container["transformers_version"],
                        container["pytorch_version"],
                        container["py_version"],
                        region,
                        p,
                    )
                    if table == "huggingface"
                    else dlc_image_uri(table_scope, key, region, p)
                )
            }
            if not found:
                where = (
                    f"SageMaker SDK's huggingface {table_scope}"
                    if table == "huggingface"
                    else "dlc_images.json"
                )
                raise ValueError(
                    f"recipe {recipe['name']}: container.{part} {key} is not in the {where} table for {region}"
                )
            catalog.setdefault(scope, {})[key] = found
    catalog[GPUS_KEY] = gpu_table(region)
    return catalog
