"""Putting one approved adapter version on an environment's shared base, and taking one off, as SageMaker
inference components (docs/adapters.md, "Deploying an adapter").

``apply_adapter`` makes the shared base when it is absent (a model on the vLLM container with the LoRA
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
from datetime import datetime
from typing import Any

from hfpipe import contract
from hfpipe.core import prices
from hfpipe.core.adapters import adapter_load, adapter_rules, scale_to_zero
from hfpipe.core.adapters.adapter_plan import BaseBilling
from hfpipe.core.adapters.adapter_rules import Component
from hfpipe.core.adapters.shared_base import SharedBase
from hfpipe.core.promotion import registry
from hfpipe.core.run.cleanup import NOT_DELETABLE_YET
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
    that limit instead, ``component_startup``). With ``scale_to_zero`` on, ``ManagedInstanceScaling`` with a
    minimum of 0 and the copies as maximum (hfpipe.core.adapters.scale_to_zero); AWS's page asks for no other
    variant field for it (no RoutingConfig of its own: the example's above stays)."""
    variant = {
        "VariantName": VARIANT,
        "InstanceType": base.instance_type,
        "InitialInstanceCount": base.copies,
        "ContainerStartupHealthCheckTimeoutInSeconds": STARTUP_TIMEOUT_SECONDS,
        "RoutingConfig": {"RoutingStrategy": ROUTING_STRATEGY},
        **serving_kind(SERVING_KIND).variant_fields(),
    }
    if base.scale_to_zero.enabled:
        variant["ManagedInstanceScaling"] = scale_to_zero.managed_instance_scaling(base.copies)
    return variant


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


def _already_exists(err: Exception) -> bool:
    """A Create* refused because the resource exists: another deploy made it since this one looked (four
    first deploys at once on a fresh environment). SageMaker answers ValidationException "Cannot create
    already existing ..." (as local mode's emulation does; botocore's model names no error for it)."""
    code = str((getattr(err, "response", None) or {}).get("Error", {}).get("Code", ""))
    return code == "ValidationException" and "already exist" in str(err)


def ensure_base(sagemaker: Any, env: str, requests: Mapping[str, Mapping[str, Any]], wait: Wait) -> list[str]:
    """Create what of the shared base is absent, in order, waiting for the endpoint and the base component to
    be InService; returns what it created (not what another deploy made meanwhile)."""
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
            try:
                create(**requests[operation])
                created.append(operation)
            except Exception as err:
                if not _already_exists(err):
                    raise
        if operation == "CreateEndpoint":
            wait("endpoint", names.endpoint)
    wait("inference-component", names.component)
    return created


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
    s3: Any = None,
) -> dict[str, Any]:
    """Put ``version`` (DescribeModelPackage's answer) on the shared base as adapter ``adapter``: the base
    made when absent, then the adapter's component created, or updated to this version's artifact (left as
    it is when it serves that artifact already: a rerun changes nothing). The refusals are checked before the
    base is made (with ``s3``: also whether the adapter loads on the base, read from its own
    adapter_config.json: ``check_loads``) and again, read afresh, just before the adapter acts;
    ``expect_serving`` (a rollback's) is the artifact the component must still serve then. A component it
    created is counted again once it exists (``over_count``): the one over ``max_adapters`` is deleted and
    refused. Returns what it did, with the artifact served before."""
    name = component_name(env, adapter)
    names = BaseNames.of(env)
    problem = version_problem(adapter, version, base)
    if problem:
        raise AdapterRefused(problem)
    artifact = version["InferenceSpecification"]["Containers"][0]["ModelDataUrl"]
    if s3 is not None:
        check_loads(s3, adapter, artifact, base)
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
    before = serving_artifact(sagemaker, env, adapter) if mine is not None else None
    action = _act(sagemaker, env, base, adapter, artifact, before, mine is not None, tags)
    return {
        "component": name,
        "action": action,
        "artifact": artifact,
        "previous_artifact": before,
        "version_arn": version["ModelPackageArn"],
        "base_created": created,
    }


def _act(
    sagemaker: Any,
    env: str,
    base: SharedBase,
    adapter: str,
    artifact: str,
    before: str | None,
    exists: bool,
    tags: list[dict[str, str]],
) -> str:
    """The adapter's component created, updated to ``artifact`` or left as it is (what was done); a created
    one over ``max_adapters``, counted again, is deleted and refused (``over_count``)."""
    name, spec = component_name(env, adapter), adapter_specification(env, artifact)
    if before == artifact:
        return "unchanged"
    if exists:
        sagemaker.update_inference_component(InferenceComponentName=name, Specification=spec)
        return "updated"
    sagemaker.create_inference_component(
        InferenceComponentName=name, EndpointName=BaseNames.of(env).endpoint, Specification=spec, Tags=tags
    )
    problem = over_count(sagemaker, env, adapter, base)
    if problem:
        sagemaker.delete_inference_component(InferenceComponentName=name)
        raise AdapterRefused(problem)
    return "created"


def check_loads(s3: Any, adapter: str, artifact: str, base: SharedBase) -> None:
    """AdapterRefused when the adapter in ``artifact`` (s3://bucket/key of a model.tar.gz) would not load on
    ``base``, read from its own adapter_config.json (hfpipe.core.adapters.adapter_load), or cannot be read."""
    bucket, _, key = artifact.removeprefix("s3://").partition("/")
    if not artifact.startswith("s3://") or not bucket or not key:
        raise AdapterRefused(
            f"artifact {artifact!r}: not accepted; accepted: s3://BUCKET/KEY of a model.tar.gz"
        )
    try:
        body = s3.get_object(Bucket=bucket, Key=key)["Body"]
        config = adapter_load.read_config(body, artifact)
    except adapter_load.AdapterConfigError as err:
        raise AdapterRefused(f"adapter {adapter!r}: {err}") from None
    except Exception as err:
        if is_absent(err) or "NoSuchKey" in str(err) or "Not Found" in str(err):
            raise AdapterRefused(f"adapter {adapter!r}: artifact {artifact} not found") from None
        raise
    problem = adapter_load.load_problem(adapter, config, base)
    if problem:
        raise AdapterRefused(problem)


def over_count(sagemaker: Any, env: str, adapter: str, base: SharedBase) -> str | None:
    """Why adapter ``adapter``, whose component was just created, is one over ``max_adapters``, counted again
    once it exists (None: it is not). Two deploys that each counted before creating can both pass the count;
    each counts again after its own create, in one order all of them agree on: the adapters' CreationTime
    (DescribeInferenceComponent's, set by SageMaker when it accepted the create), then the name. The adapters
    after the first ``max_adapters`` in that order are the extra ones, so whichever deploys see the same
    components refuse exactly those: each deletes its own component and ends refused. What makes it hold:
    a create that returned is listed to every ListInferenceComponents sent after it (not stated by AWS's
    documentation; local mode's emulation lists it at once). Components being deleted do not count."""
    names = BaseNames.of(env)
    mine = component_name(env, adapter)
    held = []
    for page in sagemaker.get_paginator("list_inference_components").paginate(
        EndpointNameEquals=names.endpoint
    ):
        for summary in page.get("InferenceComponents", []):
            described = sagemaker.describe_inference_component(
                InferenceComponentName=summary["InferenceComponentName"]
            )
            spec = described.get("Specification") or {}
            if spec.get("BaseInferenceComponentName") != names.component:
                continue
            if described.get("InferenceComponentStatus") == "Deleting":
                continue
            held.append((described["CreationTime"], described["InferenceComponentName"]))
    order = [name for _, name in sorted(held)]
    if mine not in order or order.index(mine) < base.max_adapters:
        return None
    first = order[: base.max_adapters]
    return (
        f"adapter component {mine!r} would be adapter {order.index(mine) + 1} on base component "
        f"{names.component!r}, which holds at most {base.max_adapters} (shared_base.max_adapters): "
        f"{', '.join(first)} took its places while this deploy ran, and its component was deleted again; "
        "accepted: deleting one of them first, or a larger max_adapters that still fits the instance"
    )


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


def adapter_names(env: str, components: Sequence[str]) -> list[str]:
    """The names ``--adapter`` takes (NAME of hfpipe-<env>-adapter-NAME) of adapter components."""
    return [c.removeprefix(component_prefix(env)) for c in components]


def on_base(sagemaker: Any, env: str, adapter: str) -> str:
    """Adapter ``adapter``'s component, read from the environment's base; AdapterRefused naming the adapters
    that are there (by the names --adapter takes) when it is not one of them."""
    name = component_name(env, adapter)
    components = components_on(sagemaker, BaseNames.of(env).endpoint)
    if not any(c.name == name for c in components):
        held = adapter_names(env, adapter_rules.adapters_of(BaseNames.of(env).component, components))
        accepted = f"one of {', '.join(held)}" if held else "none: no adapter is on the base"
        raise AdapterRefused(f"--adapter: {adapter!r} is not on {env}'s shared base; accepted: {accepted}")
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
    earlier = sorted((v for v in versions if number(v) < number(current[0])), key=number)
    older = [v for v in earlier if v.get("ModelApprovalStatus") == APPROVED]
    if not older:
        statuses = ", ".join(f"{number(v)} {v.get('ModelApprovalStatus')}" for v in earlier)
        raise AdapterRefused(
            f"the adapter serves version {number(current[0])}, and no version before it is Approved "
            f"({statuses or 'it is the first'}); nothing to roll back to"
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


def _versions_holding(sagemaker: Any, env: str, artifact: str) -> list[dict[str, Any]] | None:
    """The versions of the environment's model package group that has a version holding ``artifact`` (None:
    no group has one)."""
    prefix = registry.group_prefix(env)
    for page in sagemaker.get_paginator("list_model_package_groups").paginate(NameContains=prefix):
        for group in page.get("ModelPackageGroupSummaryList", []):
            if not str(group["ModelPackageGroupName"]).lower().startswith(prefix):
                continue
            versions = group_versions(sagemaker, group["ModelPackageGroupName"])
            if any(_artifact_of(v) == artifact for v in versions):
                return versions
    return None


def version_of_artifact(sagemaker: Any, env: str, artifact: str) -> str | None:
    """RECIPE/N of the environment's version whose artifact is ``artifact`` (None: none holds it)."""
    versions = _versions_holding(sagemaker, env, artifact) or []
    held = [v for v in versions if _artifact_of(v) == artifact]
    return registry.ref_of_arn(str(held[0]["ModelPackageArn"]), env) if held else None


def rollback_target(sagemaker: Any, env: str, adapter: str) -> tuple[Mapping[str, Any], str]:
    """The version adapter ``adapter`` rolls back to, and the artifact it serves now (read from its
    component): of the environment's model package groups, the one with a version holding that artifact,
    then ``previous_version`` of that group. AdapterRefused when the adapter is not on the base, or no
    version of the environment holds what it serves."""
    on_base(sagemaker, env, adapter)
    serving = serving_artifact(sagemaker, env, adapter)
    versions = _versions_holding(sagemaker, env, serving)
    if versions is not None:
        return previous_version(versions, serving), serving
    raise AdapterRefused(
        f"adapter {adapter!r} serves {serving}, which no version of {env}'s model groups holds; nothing to "
        "roll back to"
    )


def retire_command(env: str) -> str:
    """The command that retires environment ``env``'s shared base (docs/adapters.md, "Retiring the base")."""
    return f"hfpipe deploy --env {env} --retire-base"


def billing(env: str, base: SharedBase) -> BaseBilling:
    """What the shared base bills while it stands (its fleet's on-demand price, hfpipe.core.prices)."""
    price = prices.price_per_hour(base.instance_type)
    return BaseBilling(
        endpoint=BaseNames.of(env).endpoint,
        instance_type=base.instance_type,
        instances=base.instances,
        usd_per_hour=None if price is None else round(price * base.instances, 4),
        retire_command=retire_command(env),
    )


def adapters_left(sagemaker: Any, env: str) -> list[str]:
    """The adapter components on the environment's base, by name (being deleted or not)."""
    names = BaseNames.of(env)
    return adapter_rules.adapters_of(names.component, components_on(sagemaker, names.endpoint))


def adapters_staying(sagemaker: Any, env: str) -> list[str]:
    """The adapter components on the environment's base that are not being deleted, read now: what still
    shares (and pays for) the base once the deletes under way end. Read at the end of a delete, not at its
    start: two deletes at once each saw the other's adapter still there."""
    names = BaseNames.of(env)
    staying = [c for c in components_on(sagemaker, names.endpoint) if c.status != "Deleting"]
    return adapter_rules.adapters_of(names.component, staying)


#: What the retirement deletes, in AWS's order: the endpoint's inference components first ("Delete inference
#: components first", https://docs.aws.amazon.com/sagemaker/latest/dg/realtime-endpoints-delete-resources.html),
#: then the endpoint, then its config (DeleteEndpointConfig: "You must not delete an EndpointConfig in use by
#: an endpoint that is live", API reference), then the model.
RETIRE_ORDER = ("inference component", "endpoint", "endpoint config", "model")


def retire_step(sagemaker: Any, env: str) -> str | None:
    """One pass of the shared base's retirement: refused (AdapterRefused naming them) while adapters remain;
    otherwise the first of ``RETIRE_ORDER`` that still exists is deleted, or waited for while SageMaker
    changes it. Returns what it waits for (the caller looks again later), None once all of it is gone.
    Every pass looks first, so a rerun deletes nothing twice; a Failed base component or endpoint is deleted
    like any other (the way out of a base that failed)."""
    names = BaseNames.of(env)
    components = components_on(sagemaker, names.endpoint)
    if adapter_rules.base_deletion_problem(names.component, components):
        held = adapter_names(env, adapter_rules.adapters_of(names.component, components))
        raise AdapterRefused(
            f"the shared base {names.endpoint} still holds {len(held)} adapter(s): {', '.join(held)}; "
            f"accepted: deleting them first (`hfpipe deploy --env {env} --adapter NAME --delete` each), then "
            f"`{retire_command(env)}`; nothing deleted"
        )
    found = next((c for c in components if c.name == names.component), None)
    if found is not None:
        if found.status in ("Creating", "Updating", "Deleting"):
            return f"base component {names.component} is {found.status}"
        sagemaker.delete_inference_component(InferenceComponentName=names.component)
        return f"base component {names.component} is Deleting"
    endpoint = _described(lambda: sagemaker.describe_endpoint(EndpointName=names.endpoint))
    if endpoint is not None:
        status = str(endpoint["EndpointStatus"])
        if status not in ("Deleting", *NOT_DELETABLE_YET):
            sagemaker.delete_endpoint(EndpointName=names.endpoint)
            status = "Deleting"
        return f"endpoint {names.endpoint} is {status}"
    if _exists(lambda: sagemaker.describe_endpoint_config(EndpointConfigName=names.endpoint_config)):
        sagemaker.delete_endpoint_config(EndpointConfigName=names.endpoint_config)
    if _exists(lambda: sagemaker.describe_model(ModelName=names.model)):
        sagemaker.delete_model(ModelName=names.model)
    return None


def base_parts(sagemaker: Any, env: str) -> list[str]:
    """Which of the shared base's parts (``RETIRE_ORDER``'s kinds) exist now."""
    names = BaseNames.of(env)
    reads = {
        "inference component": lambda: sagemaker.describe_inference_component(
            InferenceComponentName=names.component
        ),
        "endpoint": lambda: sagemaker.describe_endpoint(EndpointName=names.endpoint),
        "endpoint config": lambda: sagemaker.describe_endpoint_config(
            EndpointConfigName=names.endpoint_config
        ),
        "model": lambda: sagemaker.describe_model(ModelName=names.model),
    }
    return [kind for kind in RETIRE_ORDER if _described(reads[kind]) is not None]


def _described(call: Callable[[], Any]) -> Any:
    try:
        return call()
    except Exception as err:
        if is_absent(err):
            return None
        raise


def serving_state(sagemaker: Any, component: str) -> tuple[str, str | None] | None:
    """The component's status and the artifact it serves, read from it; None when it does not exist."""
    described = _described(lambda: sagemaker.describe_inference_component(InferenceComponentName=component))
    if described is None:
        return None
    artifact = ((described.get("Specification") or {}).get("Container") or {}).get("ArtifactUrl")
    return str(described["InferenceComponentStatus"]), artifact


def made_since(sagemaker: Any, env: str, started: datetime) -> list[str]:
    """The parts of the shared base (as the Create* requests that make them, in order) that SageMaker created
    at or after ``started`` (the execution's StartTime): what this execution made, also when its Apply was
    retried while the base came up (each retry creates only what is still absent, so what one call created is
    not the whole of it). A deploy started after the base was made finds none."""
    names = BaseNames.of(env)
    looks = (
        ("CreateModel", lambda: sagemaker.describe_model(ModelName=names.model)),
        (
            "CreateEndpointConfig",
            lambda: sagemaker.describe_endpoint_config(EndpointConfigName=names.endpoint_config),
        ),
        ("CreateEndpoint", lambda: sagemaker.describe_endpoint(EndpointName=names.endpoint)),
        (
            "CreateInferenceComponent",
            lambda: sagemaker.describe_inference_component(InferenceComponentName=names.component),
        ),
    )
    made = []
    for operation, look in looks:
        described = _described(look)
        created = (described or {}).get("CreationTime")
        if isinstance(created, datetime) and created >= started:
            made.append(operation)
    return made


def created_since(sagemaker: Any, component: str, started: datetime) -> bool:
    """Whether ``component`` was created at or after ``started``: a retried Apply that finds the component an
    earlier call of the same execution created reports it as created, so the way back deletes it."""
    described = _described(lambda: sagemaker.describe_inference_component(InferenceComponentName=component))
    created = (described or {}).get("CreationTime")
    return isinstance(created, datetime) and created >= started
