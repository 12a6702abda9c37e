"""What one deploy of a registered model version to a named endpoint sends to SageMaker (what it records:
hfpipe.core.deploy.deploy_plan.DeploymentRecord).

The Prepare Lambda builds every request here (and checks each against botocore's shapes, hfpipe.core.api_shapes)
before anything exists; the deploy state machine sends them as built. A registered version is deployed as AWS
documents it: CreateModel with ``Containers=[{"ModelPackageName": <version ARN>}]`` and the environment's
execution role ("Deploy a Model from the Registry with Python",
https://docs.aws.amazon.com/sagemaker/latest/dg/model-registry-deploy.html).

Every resource a deploy creates carries the environment's tags, the recipe's, the endpoint's short name
(``TAG_DEPLOYMENT``), the version (``TAG_MODEL_VERSION``) and the deploy execution (``TAG_DEPLOY_EXECUTION``),
never ``TAG_EXECUTION``: a pipeline run's clean-up selects by that, and must never see a named endpoint.

Stdlib only: the Lambdas run it, the tests read it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from hfpipe import contract
from hfpipe.core.deploy.deployments import Autoscaling, EndpointSettings, deployment_config
from hfpipe.core.deploy.fleets import VARIANT, production_variant
from hfpipe.core.promotion import registry
from hfpipe.core.recipe.typed import Recipe

#: SageMaker model and endpoint config names (^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}).
MAX_NAME = 63
#: Application Auto Scaling's names for a SageMaker variant's instance count.
SCALING_NAMESPACE = "sagemaker"
SCALING_DIMENSION = "sagemaker:variant:DesiredInstanceCount"
SCALING_METRIC = "SageMakerVariantInvocationsPerInstance"


@dataclass(frozen=True)
class VersionInfo:
    """What a deploy needs of a registered version (DescribeModelPackage)."""

    arn: str
    group: str
    number: int
    recipe: str
    status: str
    instance_type: str | None

    @property
    def ref(self) -> str:
        return f"{self.recipe}/{self.number}"


def version_info(env: str, description: Mapping[str, Any]) -> VersionInfo:
    """The version's ARN, group, number, recipe (its CustomerMetadataProperties "recipe", else its group's
    name), approval status and the first instance type it supports for real-time inference."""
    arn = str(description["ModelPackageArn"])
    group = str(description.get("ModelPackageGroupName") or arn.rsplit("/", 2)[-2])
    number = int(description.get("ModelPackageVersion") or arn.rsplit("/", 1)[-1])
    metadata = description.get("CustomerMetadataProperties") or {}
    recipe = str(metadata.get("recipe") or group.removeprefix(registry.group_prefix(env)))
    types = (description.get("InferenceSpecification") or {}).get(
        "SupportedRealtimeInferenceInstanceTypes"
    ) or []
    return VersionInfo(
        arn=arn,
        group=group,
        number=number,
        recipe=recipe,
        status=str(description.get("ModelApprovalStatus", "")),
        instance_type=str(types[0]) if types else None,
    )


def resource_name(endpoint_name: str, number: int, execution_name: str) -> str:
    """The model's and endpoint config's name for one deploy execution: the endpoint's name, the version and
    a hash of the execution name (unique per execution), within SageMaker's 63 characters."""
    suffix = f"-v{number}-{hashlib.sha256(execution_name.encode()).hexdigest()[:8]}"
    return f"{endpoint_name[: MAX_NAME - len(suffix)].rstrip('-')}{suffix}"


def deploy_tags(
    env: str, name: str, recipe: str, version_arn: str, execution_name: str, task: str | None = None
) -> list[dict[str, str]]:
    """The tags of everything a deploy creates (model, endpoint config, endpoint); with ``task``, the task
    kind the named endpoint is bound to (``contract.TAG_TASK``)."""
    tags = [
        {"Key": contract.TAG_ENV, "Value": env},
        {"Key": contract.TAG_MANAGED_BY, "Value": contract.PROJECT},
        {"Key": contract.TAG_RECIPE, "Value": recipe},
        {"Key": contract.TAG_DEPLOYMENT, "Value": name},
        {"Key": contract.TAG_MODEL_VERSION, "Value": version_arn},
        {"Key": contract.TAG_DEPLOY_EXECUTION, "Value": execution_name},
    ]
    return tags + ([{"Key": contract.TAG_TASK, "Value": task}] if task else [])


def model_request(name: str, role_arn: str, version_arn: str, tags: list[dict[str, str]]) -> dict[str, Any]:
    """CreateModel of a registered version: its container is the model package."""
    return {
        "ModelName": name,
        "ExecutionRoleArn": role_arn,
        "Containers": [{"ModelPackageName": version_arn}],
        "Tags": tags,
    }


def endpoint_config_request(
    name: str,
    model_name: str,
    instance_type: str,
    instance_count: int,
    tags: list[dict[str, str]],
    serving_kind: str,
) -> dict[str, Any]:
    """CreateEndpointConfig: one variant, AllTraffic (a blue/green update keeps the variant name), with what
    the version's serving kind needs of its host (fleets.production_variant)."""
    return {
        "EndpointConfigName": name,
        "ProductionVariants": [production_variant(model_name, instance_type, instance_count, serving_kind)],
        "Tags": tags,
    }


def endpoint_request(endpoint_name: str, config_name: str, tags: list[dict[str, str]]) -> dict[str, Any]:
    """CreateEndpoint of a named endpoint that does not exist yet."""
    return {"EndpointName": endpoint_name, "EndpointConfigName": config_name, "Tags": tags}


def update_request(env: str, settings: EndpointSettings, config_name: str) -> dict[str, Any]:
    """UpdateEndpoint to the new config with the endpoint's blue/green DeploymentConfig and its alarms."""
    return {
        "EndpointName": settings.endpoint_name(env),
        "EndpointConfigName": config_name,
        "DeploymentConfig": deployment_config(env, settings),
    }


def rollback_request(endpoint_name: str, previous_config: str, autoscaled: bool = False) -> dict[str, Any]:
    """UpdateEndpoint back to the previous config after a failed smoke test: SageMaker's default blue/green,
    all at once, so the old version serves again as soon as its fleet is up.

    An autoscaled fleet keeps its live instance count rather than the previous config's InitialInstanceCount:
    RetainAllVariantProperties "enables ... the retention of variant properties, such as the instance count"
    (API reference, UpdateEndpoint; VariantProperty DesiredInstanceCount), the way the SDK's users keep an
    autoscaled count (aws/sagemaker-python-sdk#3126). The new fleet started as large as the old one was."""
    return {
        "EndpointName": endpoint_name,
        "EndpointConfigName": previous_config,
        "RetainAllVariantProperties": autoscaled,  # false is the API's default: the config's count
    }


@dataclass(frozen=True)
class SmokeSpec:
    """What the SmokeTest function needs to test a named endpoint: the recipe's serving section."""

    endpoint_name: str
    serving_kind: str
    sample_request: Any
    expected_keys: list[str]
    max_latency_ms: float
    execution_name: str

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SmokeSpec:
        return cls(**{key: data[key] for key in cls.__dataclass_fields__})


def smoke_spec(recipe: Recipe, endpoint_name: str, execution_name: str) -> SmokeSpec:
    """The smoke test of a resolved recipe (hfpipe.core.recipe.recipes.resolve_recipe), aimed at ``endpoint_name``."""
    serving = recipe["serving"]
    return SmokeSpec(
        endpoint_name=endpoint_name,
        serving_kind=str(serving["kind"]),
        sample_request=serving["sample_request"],
        expected_keys=list(serving["expected_keys"]),
        max_latency_ms=float(serving["max_latency_ms"]),
        execution_name=execution_name,
    )


def scaling_resource_id(endpoint_name: str) -> str:
    """Application Auto Scaling's ResourceId of the endpoint's variant."""
    return f"endpoint/{endpoint_name}/variant/{VARIANT}"


def scaling_tags(env: str) -> dict[str, str]:
    """The tags of an environment's scalable targets (Application Auto Scaling's Tags: a map): its IAM grants
    allow writes only on targets that carry them (stacks/functions/common.py, grant_endpoint_scaling)."""
    return {contract.TAG_MANAGED_BY: contract.PROJECT, contract.TAG_ENV: env}


def scalable_target_request(endpoint_name: str, scaling: Autoscaling, env: str) -> dict[str, Any]:
    """RegisterScalableTarget (registers, or updates the bounds of a registered target), with the environment's
    tags. AWS applies Tags when it creates the target ("To tag an existing scalable target, use the TagResource
    operation", the API reference), so an existing target is tagged first (deploy_common.claim_target)."""
    return {
        "ServiceNamespace": SCALING_NAMESPACE,
        "ResourceId": scaling_resource_id(endpoint_name),
        "ScalableDimension": SCALING_DIMENSION,
        "MinCapacity": scaling.min_instances,
        "MaxCapacity": scaling.max_instances,
        "Tags": scaling_tags(env),
    }


def scaling_policy_request(endpoint_name: str, scaling: Autoscaling) -> dict[str, Any]:
    """PutScalingPolicy: target tracking of invocations per instance (creates or replaces the policy)."""
    return {
        "PolicyName": f"{endpoint_name}-invocations-per-instance",
        "ServiceNamespace": SCALING_NAMESPACE,
        "ResourceId": scaling_resource_id(endpoint_name),
        "ScalableDimension": SCALING_DIMENSION,
        "PolicyType": "TargetTrackingScaling",
        "TargetTrackingScalingPolicyConfiguration": {
            "TargetValue": float(scaling.invocations_per_instance),
            "PredefinedMetricSpecification": {"PredefinedMetricType": SCALING_METRIC},
        },
    }
