"""Container image URIs resolved at synth time from the SageMaker Python SDK's own image tables.

Reads ``sagemaker/image_uri_config/huggingface.json`` as data (importing ``sagemaker`` takes
seconds and is not needed for a table look-up) and composes the URIs exactly as
``sagemaker.image_uris.retrieve`` does; tests/pipeline/test_recipes_vs_infra.py checks the two agree.
The catalog shipped to the Lambdas is small: only the container versions the recipes name. The same
table gives the execution role its ECR repositories (stacks/constructs/execution_role.py); it is read
here, once per process.
"""

from __future__ import annotations

import ast
import importlib.util
import json
from functools import cache
from pathlib import Path
from typing import Any

from hfpipe.core.plan import DISTRIBUTION_KEY, catalog_key
from hfpipe.core.recipes import available_recipes, load_recipe
from hfpipe.core.serving_fit import GPUS_KEY
from hfpipe.kinds import serving_kind_of

_SCOPES = ("training", "inference")


def _sdk_dir() -> Path:
    spec = importlib.util.find_spec("sagemaker")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the sagemaker package (2.x) is needed at synth time for its image tables")
    return Path(next(iter(spec.submodule_search_locations)))


@cache
def sdk_table() -> dict[str, Any]:
    """The SageMaker Python SDK's ``image_uri_config/huggingface.json`` (training and inference scopes)."""
    return json.loads((_sdk_dir() / "image_uri_config" / "huggingface.json").read_text())


def _sdk_constants(module: str, names: tuple[str, ...]) -> dict[str, Any]:
    """Module-level literal constants of an SDK module, read from its source (no import: seconds saved)."""
    tree = ast.parse((_sdk_dir() / module).read_text())
    found = {}
    for node in tree.body:
        target = node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else None
        if isinstance(target, ast.Name) and target.id in names:
            found[target.id] = ast.literal_eval(node.value)  # type: ignore[attr-defined]
    missing = sorted(set(names) - set(found))
    if missing:
        raise RuntimeError(f"sagemaker/{module} no longer defines {missing}; update stacks/image_catalog.py")
    return found


def distribution_rules() -> dict[str, list[str]]:
    """The SDK's smdistributed data-parallel tables (sagemaker/fw_utils.py), as the Plan checks them.

    `dataparallel_pytorch_versions` is SM_DATAPARALLEL_SUPPORTED_FRAMEWORK_VERSIONS["pytorch"], the list the
    HuggingFace estimator checks `pytorch_version` against, as written (it holds "1.7" and "1.7.1" but not
    "1.13"); `dataparallel_instance_types` is SM_DATAPARALLEL_SUPPORTED_INSTANCE_TYPES without local mode.
    """
    sdk = _sdk_constants(
        "fw_utils.py",
        ("SM_DATAPARALLEL_SUPPORTED_FRAMEWORK_VERSIONS", "SM_DATAPARALLEL_SUPPORTED_INSTANCE_TYPES"),
    )
    return {
        "dataparallel_pytorch_versions": list(sdk["SM_DATAPARALLEL_SUPPORTED_FRAMEWORK_VERSIONS"]["pytorch"]),
        "dataparallel_instance_types": [
            t for t in sdk["SM_DATAPARALLEL_SUPPORTED_INSTANCE_TYPES"] if t.startswith("ml.")
        ],
    }


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
    processors = table[scope].get("processors") or cfg.get("processors") or []
    if account is None or processor not in processors:
        return None
    # As sagemaker.image_uris.retrieve (_format_tag): the tag carries the versions as the caller wrote them
    # ("4.26", not the alias target "4.26.0"; only the table look-ups go through the aliases), and the
    # container version only where the table has one.
    parts = (
        f"{container['pytorch_version']}-transformers{container['transformers_version']}",
        processor,
        container["py_version"],
        cfg.get("container_version", {}).get(processor),
    )
    tag = "-".join(p for p in parts if p)
    return f"{account}.dkr.ecr.{region}.{_domain(region)}/{cfg['repository']}:{tag}"


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
    info = json.loads((_sdk_dir() / "image_uri_config" / "instance_gpu_info.json").read_text())
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
    sdk = sdk_table()
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
                    uri := image_uri(sdk, table_scope, container, region, p)
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
