"""Putting one approved adapter version on an environment's shared base, and taking one off, as SageMaker
inference components (docs/adapters.md, "Deploying an adapter").

``deploy_adapter`` makes the shared base when it is absent (a model on the vLLM container with the LoRA
settings of cdk.json's ``shared_base``, an endpoint config whose one variant names no model, the endpoint, the
base inference component), then creates the adapter's component (``Specification.BaseInferenceComponentName``
and ``Container.ArtifactUrl``), or updates it to the new version's artifact. ``delete_adapter`` deletes one
adapter's component; ``previous_version`` names the version a rollback goes back to. Each acts on its own
adapter's component only, so no other adapter is touched.

The refusals (hfpipe.core.adapters.adapter_rules, and the version's approval) are re-read from SageMaker and checked
just before each step acts: a version not approved, one trained on another base (the base it needs is read
from the version: hfpipe.core.promotion.registry.adapter_base), an adapter before its base, one adapter more than the
base holds; ``AdapterRefused`` says which, in one line, and nothing is created.

Stdlib only: the functions take a SageMaker client (boto3's, or local mode's, which plays inference
components: hfpipe.local.engine.inference_components) and a ``wait`` that returns once a resource is InService.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hfpipe import contract
from hfpipe.core.adapters import adapter_rules
from hfpipe.core.adapters.adapter_rules import Component
from hfpipe.core.adapters.shared_base import SharedBase
from hfpipe.core.promotion import registry
from hfpipe.kinds.serving import VLLM, serving_kind

#: An adapter's name (`--adapter NAME`): it becomes the component hfpipe-<env>-adapter-NAME (at most 63
#: characters of [a-zA-Z0-9-], botocore's InferenceComponentName) and what a call selects it by.
#: Matched whole (``fullmatch``), as AWS matches its patterns: Python's ``$`` also matches before a final
#: newline, so ``re.match`` would take ``"support\n"`` for ``support`` and make a second component.
ADAPTER_NAME = re.compile(r"[a-z0-9]([a-z0-9-]{0,30}[a-z0-9])?")
#: InferenceComponentName's length limit (botocore's model of SageMaker: max 63).
MAX_COMPONENT_NAME = 63
#: The one variant of the shared base's endpoint config.
VARIANT = "AllTraffic"
#: The shared base's name among the environment's deployments (contract.SHARED_BASE): its model, endpoint
#: config, endpoint and base component are hfpipe-<env>-shared-base, and its ``hfpipe:deployment`` tag keeps
#: clean-up from it (hfpipe.core.run.cleanup).
SHARED_BASE_NAME = contract.SHARED_BASE
APPROVED = "Approved"
#: The serving kind of the shared base: the AWS vLLM container, the kind that serves adapters
#: (hfpipe/kinds/serving.py); its host image is the kind's, as a named vLLM endpoint's.
SERVING_KIND = VLLM
#: vLLM's switch for the adapter routes (vllm/envs.py).
RUNTIME_LORA_UPDATING = "VLLM_ALLOW_RUNTIME_LORA_UPDATING"
#: The startup limits AWS's lora example gives the base (docs/sagemaker/05_lora_adapter_management.md: the
#: variant's ContainerStartupHealthCheckTimeoutInSeconds, the base component's StartupParameters), seconds.
STARTUP_TIMEOUT_SECONDS = 600
#: The example's RoutingConfig.RoutingStrategy (botocore's RoutingStrategy: LEAST_OUTSTANDING_REQUESTS,
#: RANDOM, PREFIX_AWARE, KV_AWARE): each call to the instance with the fewest outstanding requests.
ROUTING_STRATEGY = "LEAST_OUTSTANDING_REQUESTS"

#: ``wait(kind, name)``: returns once the endpoint or inference component ``name`` is InService.
Wait = Callable[[str, str], None]


class AdapterRefused(ValueError):
    """A step the rules forbid; the message names what and why, and nothing was created or changed."""


@dataclass(frozen=True)
class BaseNames:
    """The names of an environment's shared base (one per environment, so unique per account and region)."""

    model: str
    endpoint_config: str
    endpoint: str
    component: str

    @classmethod
    def of(cls, env: str) -> BaseNames:
        stem = contract.deployed_endpoint_name(env, SHARED_BASE_NAME)
        return cls(model=stem, endpoint_config=stem, endpoint=stem, component=stem)


def check_adapter_name(adapter: object) -> str:
    """``adapter`` when it is an adapter's name; AdapterRefused saying what is accepted otherwise."""
    if not isinstance(adapter, str) or not ADAPTER_NAME.fullmatch(adapter):
        raise AdapterRefused(
            f"--adapter: {adapter!r} is not accepted; accepted: 1 to 32 of a-z, 0-9 and '-', starting and "
            "ending with a letter or digit"
        )
    return adapter


def component_prefix(env: str) -> str:
    """What every adapter component of ``env`` starts with: ``hfpipe-<env>-adapter-``."""
    return f"{contract.PROJECT}-{env}-adapter-"


def longest_adapter_name(env: str) -> int:
    """The most characters an adapter's name may have in ``env``: the pattern's 32, or fewer where the
    component name ``hfpipe-<env>-adapter-NAME`` would pass InferenceComponentName's 63."""
    return min(32, MAX_COMPONENT_NAME - len(component_prefix(env)))


def component_name(env: str, adapter: str) -> str:
    """The adapter's inference component; AdapterRefused for a name that is not one, or one whose component
    name would be longer than SageMaker takes (checked before anything is made: AWS would refuse the
    CreateInferenceComponent after the base exists)."""
    name = f"{component_prefix(env)}{check_adapter_name(adapter)}"
    if len(name) > MAX_COMPONENT_NAME:
        raise AdapterRefused(
            f"--adapter: {adapter!r} makes the inference component name {name!r} of {len(name)} characters; "
            f"accepted: InferenceComponentName of at most {MAX_COMPONENT_NAME} characters (botocore's model of "
            f"SageMaker), so an adapter name of at most {longest_adapter_name(env)} characters in environment "
            f"{env!r}"
        )
    return name


def tags(env: str) -> list[dict[str, str]]:
    """The tags of the shared base's resources and of every adapter component: the environment's, and the
    shared base's deployment name (what clean-up leaves alone)."""
    return [
        {"Key": contract.TAG_MANAGED_BY, "Value": contract.PROJECT},
        {"Key": contract.TAG_ENV, "Value": env},
        {"Key": contract.TAG_DEPLOYMENT, "Value": SHARED_BASE_NAME},
    ]


def server_environment(base: SharedBase, gpus: int) -> dict[str, str]:
    """The base model's container environment. The vLLM container's flags as SM_VLLM_* variables (the container
    turns SM_VLLM_X_Y into --x-y: aws/deep-learning-containers, the vLLM SageMaker entrypoint): the base model,
    LoRA on, at most ``max_adapters`` adapters of rank ``max_lora_rank``, the context, and tensor parallel
    over the ``gpus`` the base component reserves (NumberOfAcceleratorDevicesRequired: the example sets
    SM_VLLM_TENSOR_PARALLEL_SIZE to the same count; without it vLLM uses one GPU). And vLLM's own switch for
    the adapter routes SageMaker loads adapter components through: VLLM_ALLOW_RUNTIME_LORA_UPDATING=true,
    marked Required for adapters with inference components (aws/model-hosting-container-standards,
    docs/sagemaker/05_lora_adapter_management.md; vLLM mounts the routes only with it:
    vllm/entrypoints/serve/lora/api_router.py, ``attach_router``)."""
    return {
        "SM_VLLM_MODEL": base.base_model,
        "SM_VLLM_ENABLE_LORA": "true",
        "SM_VLLM_MAX_LORAS": str(base.max_adapters),
        "SM_VLLM_MAX_LORA_RANK": str(base.max_lora_rank),
        "SM_VLLM_MAX_MODEL_LEN": str(base.max_model_len),
        "SM_VLLM_TENSOR_PARALLEL_SIZE": str(gpus),
        RUNTIME_LORA_UPDATING: "true",
    }


def base_variant(base: SharedBase) -> dict[str, Any]:
    """The shared base's one production variant, as AWS's lora example writes it
    (docs/sagemaker/05_lora_adapter_management.md, Step 1; each field in botocore's ProductionVariant):
    no ModelName (an endpoint for inference components), ``ContainerStartupHealthCheckTimeoutInSeconds``
    (60-3600) and ``RoutingConfig`` as the example sets them, and the host image the vllm serving kind needs
    (``InferenceAmiVersion``: the kind's ``variant_fields``, the one source named endpoints read too,
    hfpipe.core.deploy.fleets). Not set, as the example does not set it here: the variant's
    ``ModelDataDownloadTimeoutInSeconds`` (the example gives the base component's ``StartupParameters``
    that limit instead, ``component_startup``)."""
    return {
        "VariantName": VARIANT,
        "InstanceType": base.instance_type,
        "InitialInstanceCount": base.copies,
        "ContainerStartupHealthCheckTimeoutInSeconds": STARTUP_TIMEOUT_SECONDS,
        "RoutingConfig": {"RoutingStrategy": ROUTING_STRATEGY},
        **serving_kind(SERVING_KIND).variant_fields(),
    }


def component_startup() -> dict[str, int]:
    """The base component's ``Specification.StartupParameters`` (botocore's InferenceComponentStartupParameters:
    ``ModelDataDownloadTimeoutInSeconds`` and ``ContainerStartupHealthCheckTimeoutInSeconds``, 60-3600 each), as
    the example's Step 3 sets them for a base that downloads its weights when it starts."""
    return {
        "ModelDataDownloadTimeoutInSeconds": STARTUP_TIMEOUT_SECONDS,
        "ContainerStartupHealthCheckTimeoutInSeconds": STARTUP_TIMEOUT_SECONDS,
    }


def base_requests(
    env: str,
    base: SharedBase,
    *,
    image: str,
    role_arn: str,
    gpus: int,
    memory_mb: int,
    tags: list[dict[str, str]],
) -> dict[str, dict[str, Any]]:
    """The requests that make the shared base, by operation, in the order they are sent."""
    names = BaseNames.of(env)
    container = {"Image": image, "Environment": server_environment(base, gpus)}
    return {
        "CreateModel": {
            "ModelName": names.model,
            "ExecutionRoleArn": role_arn,
            "PrimaryContainer": container,
            "Tags": tags,
        },
        # No ModelName in the variant and an ExecutionRoleArn: an endpoint made for inference components.
        "CreateEndpointConfig": {
            "EndpointConfigName": names.endpoint_config,
            "ExecutionRoleArn": role_arn,
            "ProductionVariants": [base_variant(base)],
            "Tags": tags,
        },
        "CreateEndpoint": {
            "EndpointName": names.endpoint,
            "EndpointConfigName": names.endpoint_config,
            "Tags": tags,
        },
        # One copy takes every GPU of an instance (tensor parallel over it), so copies are instances.
        "CreateInferenceComponent": {
            "InferenceComponentName": names.component,
            "EndpointName": names.endpoint,
            "VariantName": VARIANT,
            "Specification": {
                "ModelName": names.model,
                "StartupParameters": component_startup(),
                "ComputeResourceRequirements": {
                    "NumberOfAcceleratorDevicesRequired": gpus,
                    "MinMemoryRequiredInMb": memory_mb,
                },
            },
            "RuntimeConfig": {"CopyCount": base.copies},
            "Tags": tags,
        },
    }


def adapter_specification(env: str, artifact_url: str) -> dict[str, Any]:
    """An adapter component's Specification: its base and its artifact, no compute of its own."""
    return {
        "BaseInferenceComponentName": BaseNames.of(env).component,
        "Container": {"ArtifactUrl": artifact_url},
    }


def components_on(sagemaker: Any, endpoint: str) -> list[Component]:
    """The inference components on ``endpoint``, each described (none for an endpoint that serves a model)."""
    found: list[Component] = []
    for page in sagemaker.get_paginator("list_inference_components").paginate(EndpointNameEquals=endpoint):
        for summary in page.get("InferenceComponents", []):
            described = sagemaker.describe_inference_component(
                InferenceComponentName=summary["InferenceComponentName"]
            )
            found.append(Component.from_description(described))
    return found


def is_absent(err: Exception) -> bool:
    """A Describe* error that says the resource does not exist (SageMaker answers ValidationException)."""
    code = str((getattr(err, "response", None) or {}).get("Error", {}).get("Code", ""))
    return code in ("ValidationException", "ResourceNotFound")


def _exists(call: Callable[[], Any]) -> bool:
    try:
        call()
    except Exception as err:
        if is_absent(err):
            return False
        raise
    return True


def version_problem(adapter: str, version: Mapping[str, Any], base: SharedBase) -> str | None:
    """Why a version (DescribeModelPackage's answer) may not go on the base: not approved, or trained on
    another base than the one it serves; None when it may."""
    status = version.get("ModelApprovalStatus")
    if status != APPROVED:
        return (
            f"version {version.get('ModelPackageArn')} is {status}; accepted: an {APPROVED} version "
            "(hfpipe models approve)"
        )
    return adapter_rules.base_model_problem(adapter, registry.adapter_base(dict(version)), base.base_model)


def ensure_base(sagemaker: Any, env: str, requests: Mapping[str, Mapping[str, Any]], wait: Wait) -> list[str]:
    """Create what of the shared base is absent, in order, waiting for the endpoint and the base component to
    be InService; returns what it created."""
    names, created = BaseNames.of(env), []
    steps = (
        ("CreateModel", lambda: sagemaker.describe_model(ModelName=names.model), sagemaker.create_model),
        (
            "CreateEndpointConfig",
            lambda: sagemaker.describe_endpoint_config(EndpointConfigName=names.endpoint_config),
            sagemaker.create_endpoint_config,
        ),
        (
            "CreateEndpoint",
            lambda: sagemaker.describe_endpoint(EndpointName=names.endpoint),
            sagemaker.create_endpoint,
        ),
        (
            "CreateInferenceComponent",
            lambda: sagemaker.describe_inference_component(InferenceComponentName=names.component),
            sagemaker.create_inference_component,
        ),
    )
    for operation, look, create in steps:
        if not _exists(look):
            create(**requests[operation])
            created.append(operation)
        if operation == "CreateEndpoint":
            wait("endpoint", names.endpoint)
    wait("inference-component", names.component)
    return created


def deploy_adapter(
    sagemaker: Any,
    env: str,
    base: SharedBase,
    adapter: str,
    version: Mapping[str, Any],
    *,
    base_requests: Mapping[str, Mapping[str, Any]],
    wait: Wait,
    tags: list[dict[str, str]],
) -> dict[str, Any]:
    """``apply_adapter``, then wait for the adapter's component to be InService."""
    result = apply_adapter(
        sagemaker, env, base, adapter, version, base_requests=base_requests, wait=wait, tags=tags
    )
    wait("inference-component", result["component"])
    return result


def apply_adapter(
    sagemaker: Any,
    env: str,
    base: SharedBase,
    adapter: str,
    version: Mapping[str, Any],
    *,
    base_requests: Mapping[str, Mapping[str, Any]],
    wait: Wait,
    tags: list[dict[str, str]],
    expect_serving: str | None = None,
) -> dict[str, Any]:
    """Put ``version`` (DescribeModelPackage's answer) on the shared base as adapter ``adapter``: the base
    made when absent, then the adapter's component created, or updated to this version's artifact (left as
    it is when it serves that artifact already: a rerun changes nothing). The refusals are checked before the
    base is made and again, read afresh, just before the adapter acts; ``expect_serving`` (a rollback's) is
    the artifact the component must still serve then. Returns what it did, with the artifact served before."""
    name = component_name(env, adapter)
    names = BaseNames.of(env)
    problem = version_problem(adapter, version, base)
    if problem:
        raise AdapterRefused(problem)
    created = ensure_base(sagemaker, env, base_requests, wait)
    components = components_on(sagemaker, names.endpoint)
    mine = next((c for c in components if c.name == name), None)
    problem = (
        adapter_rules.adapter_before_base_problem(name, names.component, names.endpoint, components)
        or adapter_rules.adapter_count_problem(name, names.component, components, base.max_adapters)
        or version_problem(adapter, _fresh(sagemaker, version), base)
        or _busy_problem(adapter, mine)
        or _changed_problem(sagemaker, env, adapter, mine, expect_serving)
    )
    if problem:
        raise AdapterRefused(problem)
    artifact = version["InferenceSpecification"]["Containers"][0]["ModelDataUrl"]
    before = serving_artifact(sagemaker, env, adapter) if mine is not None else None
    spec = adapter_specification(env, artifact)
    if before == artifact:
        action = "unchanged"
    elif mine is not None:
        sagemaker.update_inference_component(InferenceComponentName=name, Specification=spec)
        action = "updated"
    else:
        sagemaker.create_inference_component(
            InferenceComponentName=name, EndpointName=names.endpoint, Specification=spec, Tags=tags
        )
        action = "created"
    return {
        "component": name,
        "action": action,
        "artifact": artifact,
        "previous_artifact": before,
        "version_arn": version["ModelPackageArn"],
        "base_created": created,
    }


def _busy_problem(adapter: str, mine: Component | None) -> str | None:
    """An adapter whose component SageMaker is still changing (another deploy of it, or one not finished)."""
    if mine is None or mine.status in ("InService", "Failed"):
        return None
    return (
        f"adapter {adapter!r} is {mine.status} (another deploy of it, or one that has not finished); accepted: "
        "an adapter that is InService: run the same command again once it is"
    )


def _changed_problem(
    sagemaker: Any, env: str, adapter: str, mine: Component | None, expected: str | None
) -> str | None:
    """A rollback decided on what the adapter served; it is refused when that changed since."""
    if expected is None:
        return None
    now = serving_artifact(sagemaker, env, adapter) if mine is not None else None
    if now == expected:
        return None
    return (
        f"adapter {adapter!r} serves {now or 'nothing'} now, not {expected} that the rollback was decided on "
        "(another deploy changed it); accepted: run the rollback again"
    )


def _fresh(sagemaker: Any, version: Mapping[str, Any]) -> dict[str, Any]:
    """The version as SageMaker describes it now (its approval may have changed since it was first read)."""
    return dict(sagemaker.describe_model_package(ModelPackageName=version["ModelPackageArn"]))


def on_base(sagemaker: Any, env: str, adapter: str) -> str:
    """Adapter ``adapter``'s component, read from the environment's base; AdapterRefused naming the adapters
    that are there when it is not one of them."""
    name = component_name(env, adapter)
    components = components_on(sagemaker, BaseNames.of(env).endpoint)
    if not any(c.name == name for c in components):
        held = adapter_rules.adapters_of(BaseNames.of(env).component, components)
        raise AdapterRefused(
            f"--adapter: {adapter!r} is not on {env}'s shared base; accepted: one of "
            f"{', '.join(held) or 'none (no adapter is deployed)'}"
        )
    return name


def delete_adapter(sagemaker: Any, env: str, adapter: str) -> str:
    """Delete adapter ``adapter``'s component, and nothing else; returns its name. AdapterRefused when the
    environment's base holds no such adapter."""
    name = on_base(sagemaker, env, adapter)
    sagemaker.delete_inference_component(InferenceComponentName=name)
    return name


def serving_artifact(sagemaker: Any, env: str, adapter: str) -> str:
    """The artifact adapter ``adapter``'s component serves, read from it."""
    described = sagemaker.describe_inference_component(InferenceComponentName=component_name(env, adapter))
    return str(described["Specification"]["Container"]["ArtifactUrl"])


def previous_version(versions: Sequence[Mapping[str, Any]], serving: str) -> Mapping[str, Any]:
    """The version a rollback goes back to: of a group's versions (DescribeModelPackage answers), the newest
    Approved one older than the version whose artifact ``serving`` is; AdapterRefused when there is none."""

    def number(v: Mapping[str, Any]) -> int:
        return int(v.get("ModelPackageVersion") or str(v["ModelPackageArn"]).rsplit("/", 1)[-1])

    current = [v for v in versions if _artifact_of(v) == serving]
    if not current:
        raise AdapterRefused(
            f"the adapter serves {serving}, which no version of its group holds; nothing to roll back to"
        )
    older = [
        v for v in versions if number(v) < number(current[0]) and v.get("ModelApprovalStatus") == APPROVED
    ]
    if not older:
        raise AdapterRefused(
            f"version {number(current[0])} is the adapter's first approved version; nothing to roll back to"
        )
    return max(older, key=number)


def _artifact_of(version: Mapping[str, Any]) -> str:
    return str(version["InferenceSpecification"]["Containers"][0]["ModelDataUrl"])


def group_versions(sagemaker: Any, group: str) -> list[dict[str, Any]]:
    """Every version of model package group ``group``, described (DescribeModelPackage's answers)."""
    found = []
    for page in sagemaker.get_paginator("list_model_packages").paginate(ModelPackageGroupName=group):
        for summary in page.get("ModelPackageSummaryList", []):
            found.append(dict(sagemaker.describe_model_package(ModelPackageName=summary["ModelPackageArn"])))
    return found


def rollback_target(sagemaker: Any, env: str, adapter: str) -> tuple[Mapping[str, Any], str]:
    """The version adapter ``adapter`` rolls back to, and the artifact it serves now (read from its
    component): of the environment's model package groups, the one with a version holding that artifact,
    then ``previous_version`` of that group. AdapterRefused when the adapter is not on the base, or no
    version of the environment holds what it serves."""
    on_base(sagemaker, env, adapter)
    serving = serving_artifact(sagemaker, env, adapter)
    prefix = registry.group_prefix(env)
    for page in sagemaker.get_paginator("list_model_package_groups").paginate(NameContains=prefix):
        for group in page.get("ModelPackageGroupSummaryList", []):
            if not str(group["ModelPackageGroupName"]).lower().startswith(prefix):
                continue
            versions = group_versions(sagemaker, group["ModelPackageGroupName"])
            if any(_artifact_of(v) == serving for v in versions):
                return previous_version(versions, serving), serving
    raise AdapterRefused(
        f"adapter {adapter!r} serves {serving}, which no version of {env}'s model groups holds; nothing to "
        "roll back to"
    )
