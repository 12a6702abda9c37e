"""What a SageMaker fleet takes: the instance counts canary and linear traffic shifting need, and the one
production variant every endpoint config the pipeline and the deploy write has (with the serving kind's host
image).

A canary or a linear step is sized in the fleet's instances (API reference, ``TrafficRoutingConfig``:
"CanarySize ... Value must be less than or equal to 50% of the variant's total instance count", "LinearStepSize
... Value must be 10-50% of the variant's total instance count",
https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_TrafficRoutingConfig.html; ``CapacitySize``:
"the overall percentage of your fleet"): it is at least one instance, and one instance is at most half a fleet
of two or more, so CANARY and LINEAR need a fleet of at least two instances; a one-instance fleet shifts
ALL_AT_ONCE (with a bake). cdk.json is checked against ``instance_count`` (a deploy's new fleet is never
smaller; hfpipe.core.deploy.deployments), and the deploy checks the fleet it resolves (``shifting_problem``).

Stdlib only (and the kinds' registry): the stacks, the Lambdas and local mode import it.
"""

from __future__ import annotations

from typing import Any

from hfpipe.kinds import serving_kind

#: The smallest fleet CANARY and LINEAR can run on: a step of one instance is at most 50% of it.
MIN_SHIFTING_INSTANCES = 2
#: The one production variant of a named endpoint (the pipeline's endpoints use the same name).
VARIANT = "AllTraffic"


def production_variant(
    model_name: str, instance_type: str, instance_count: int, serving: str
) -> dict[str, Any]:
    """The ProductionVariant of every endpoint config the pipeline and the deploy write: one variant,
    AllTraffic (a blue/green update keeps the variant name), with what the serving kind ``serving``
    (hfpipe/kinds) needs of its host (InferenceAmiVersion)."""
    return {
        "VariantName": VARIANT,
        "ModelName": model_name,
        "InstanceType": instance_type,
        "InitialInstanceCount": instance_count,
        **serving_kind(serving).variant_fields(),
    }


def shifting_problem(traffic_type: str, instances: int) -> str | None:
    """Why a fleet of ``instances`` cannot shift traffic as ``traffic_type`` (None: it can). CANARY and LINEAR
    move at least one instance's share per step, and SageMaker accepts a step of at most 50% of the fleet
    (TrafficRoutingConfig's CanarySize and LinearStepSize), so they need MIN_SHIFTING_INSTANCES."""
    if traffic_type in ("CANARY", "LINEAR") and instances < MIN_SHIFTING_INSTANCES:
        return (
            f"{traffic_type} traffic shifting on a fleet of {instances} instance(s): SageMaker sizes a canary as "
            "at most 50% and a linear step as 10-50% of the fleet's instances, and a step is at least one "
            f"instance, so {traffic_type} needs at least {MIN_SHIFTING_INSTANCES}; accepted: ALL_AT_ONCE with a "
            f"bake (bake_seconds) for this fleet, or at least {MIN_SHIFTING_INSTANCES} instances"
        )
    return None


def instances_of_type(
    endpoint: dict[str, Any] | None, config: dict[str, Any] | None, instance_type: str
) -> int:
    """Instances of ``instance_type`` an endpoint holds now (what counts against the account's endpoint-usage
    quota of that type): its live variants' ``CurrentInstanceCount`` (DescribeEndpoint), each of the type its
    config (DescribeEndpointConfig) gives the variant, and, during an update, the new fleet's
    (DescribeEndpoint's ``PendingDeploymentSummary.ProductionVariants``: ``InstanceType`` and
    ``CurrentInstanceCount``; botocore's model of SageMaker). None: no such endpoint."""
    if endpoint is None:
        return 0
    types = {
        v.get("VariantName"): v.get("InstanceType") for v in (config or {}).get("ProductionVariants") or []
    }
    held = sum(
        int(v.get("CurrentInstanceCount") or 0)
        for v in endpoint.get("ProductionVariants") or []
        if types.get(v.get("VariantName")) == instance_type
    )
    pending = (endpoint.get("PendingDeploymentSummary") or {}).get("ProductionVariants") or []
    return held + sum(
        int(v.get("CurrentInstanceCount") or 0) for v in pending if v.get("InstanceType") == instance_type
    )
