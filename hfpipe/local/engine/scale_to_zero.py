"""Local mode's scale to zero of inference components: Application Auto Scaling's scalable target and policies
on ``sagemaker:inference-component:DesiredCopyCount`` (moto 5.2.5 refuses that dimension), played on the
engine's clock (docs/adapters.md, "Scale to zero").

What is played, as AWS's "Scale an endpoint to zero instances" describes it
(https://docs.aws.amazon.com/sagemaker/latest/dg/endpoint-auto-scaling-zero-instances.html):

- a component registered with ``MinCapacity`` 0 and a target tracking policy loses its copies once no call
  reached it for the policy's ``ScaleInCooldown`` (scaled by ``time_scale``): its ``CurrentCopyCount`` and
  ``DesiredCopyCount`` go to 0, and with them the instances (one copy per instance on the shared base);
- a call that finds no copy is refused with InvokeEndpoint's ValidationError (hfpipe.core.adapters.scale_to_zero.
  NO_CAPACITY_MESSAGE) and publishes ``NoCapacityInvocationFailures`` through the ``no_capacity`` hook, which
  answers whether the alarm on it went to ALARM (the engine evaluates it in moto's CloudWatch); then the step
  policy's ``ScalingAdjustment`` copies are desired, and they are InService after ``COLD_START_SECONDS``
  (scaled by ``time_scale``): the cold start. Calls meanwhile are refused the same way.

Not played: the target tracking policy's scale-out above one copy, cooldowns between steps, predictive scaling.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from hfpipe.core.adapters import scale_to_zero
from hfpipe.local.engine.deployment import ApiError

OPERATIONS = (
    "RegisterScalableTarget",
    "PutScalingPolicy",
    "DeregisterScalableTarget",
    "DescribeScalingActivities",
)
#: How long a base takes to come back from zero, seconds (scaled by ``time_scale``): the project's figure
#: (hfpipe.core.adapters.scale_to_zero.COLD_START_SECONDS), not one measured.
COLD_START_SECONDS = float(scale_to_zero.COLD_START_SECONDS)
_PREFIX = "inference-component/"


@dataclass
class Scaling:
    """One component's registration: its bounds, the idle period and the wake step (None: no such policy)."""

    min_capacity: int = 0
    max_capacity: int = 1
    idle_seconds: float | None = None
    wake_step: int | None = None
    #: The engine's clock when a call last reached it (or it was registered, or it came back).
    last_active: float = 0.0
    #: When the cold start ends (None: none under way).
    wakes_at: float | None = None
    policies: dict[str, str] = field(default_factory=dict)
    #: Where the endpoint's instance count follows the copies (inference_components.Hosting; None: nowhere).
    hosting: Any = None
    #: The instance count last written there.
    instances: int | None = None
    #: Its scaling activities, oldest first: each scale-in to zero and each wake, with their times on the
    #: engine's clock (``activities`` answers DescribeScalingActivities).
    history: list[dict[str, Any]] = field(default_factory=list)


def is_ours(params: dict[str, Any]) -> bool:
    """An Application Auto Scaling call on an inference component's copies (what moto refuses)."""
    return params.get("ScalableDimension") == scale_to_zero.DIMENSION or str(
        params.get("ResourceId") or ""
    ).startswith(_PREFIX)


def component_of(params: dict[str, Any]) -> str:
    resource = str(params.get("ResourceId") or "")
    if params.get("ServiceNamespace") != scale_to_zero.NAMESPACE or not resource.startswith(_PREFIX):
        raise ApiError(
            "ValidationException",
            f"ResourceId {resource!r} with ServiceNamespace {params.get('ServiceNamespace')!r} is not accepted; "
            f"accepted: ServiceNamespace sagemaker and ResourceId {_PREFIX}NAME",
        )
    if params.get("ScalableDimension") != scale_to_zero.DIMENSION:
        raise ApiError(
            "ValidationException",
            f"ScalableDimension {params.get('ScalableDimension')!r} is not accepted for {resource}; accepted: "
            f"{scale_to_zero.DIMENSION}",
        )
    return resource[len(_PREFIX) :]


def register(found: Scaling | None, params: dict[str, Any], now: float) -> Scaling:
    """RegisterScalableTarget: created, or its bounds updated."""
    scaling = found or Scaling(last_active=now)
    scaling.min_capacity = int(params.get("MinCapacity", scaling.min_capacity))
    scaling.max_capacity = int(params.get("MaxCapacity", scaling.max_capacity))
    return scaling


def put_policy(scaling: Scaling | None, params: dict[str, Any], arn: str) -> dict[str, Any]:
    """PutScalingPolicy on a registered target ("You cannot create a scaling policy until you have registered
    the resource as a scalable target", PutScalingPolicy): the idle period of a target tracking policy, the
    wake step of a step policy."""
    if scaling is None:
        raise ApiError(
            "ObjectNotFoundException",
            f"No scalable target registered for {params.get('ResourceId')}; register it first",
        )
    if params.get("PolicyType") == "TargetTrackingScaling":
        config = params.get("TargetTrackingScalingPolicyConfiguration") or {}
        scaling.idle_seconds = float(config.get("ScaleInCooldown", 300))
    elif params.get("PolicyType") == "StepScaling":
        steps = (params.get("StepScalingPolicyConfiguration") or {}).get("StepAdjustments") or []
        scaling.wake_step = max((int(s["ScalingAdjustment"]) for s in steps), default=None)
    scaling.policies[str(params["PolicyName"])] = arn
    return {"PolicyARN": arn, "Alarms": []}


def idle(scaling: Scaling, copies: dict[str, Any], now: float, time_scale: float) -> None:
    """Scale in to the minimum once the idle period passed without a call (target tracking's scale-in). Under
    ``time_scale`` 0 (every wait played at once) the idle period never ends: going idle is no wait anyone waits
    on, and at once it would take a base to zero between any two calls."""
    if (
        time_scale == 0
        or scaling.idle_seconds is None
        or scaling.wakes_at is not None
        or not copies.get("CurrentCopyCount")
    ):
        return
    if now - scaling.last_active >= scaling.idle_seconds * time_scale:
        copies["DesiredCopyCount"] = copies["CurrentCopyCount"] = scaling.min_capacity
        at = scaling.last_active + scaling.idle_seconds * time_scale  # when the idle period ended
        _activity(
            scaling, scaling.min_capacity, at, at, "no call for the target tracking policy's ScaleInCooldown"
        )


def settle(scaling: Scaling, copies: dict[str, Any], now: float) -> None:
    """The cold start's end: the desired copies are InService."""
    if scaling.wakes_at is not None and scaling.wakes_at <= now:
        copies["CurrentCopyCount"] = copies["DesiredCopyCount"]
        if scaling.history and scaling.history[-1]["StatusCode"] == "InProgress":
            scaling.history[-1].update(StatusCode="Successful", EndTime=scaling.wakes_at)
        scaling.wakes_at, scaling.last_active = None, now


def wake(scaling: Scaling, copies: dict[str, Any], alarmed: bool, now: float, time_scale: float) -> None:
    """A call found no copy and the alarm is in ALARM: the step policy adds its copies (up to the maximum),
    which come up after the cold start."""
    if not alarmed or scaling.wake_step is None or scaling.wakes_at is not None:
        return
    copies["DesiredCopyCount"] = min(
        scaling.max_capacity, copies.get("DesiredCopyCount", 0) + scaling.wake_step
    )
    scaling.wakes_at = now + COLD_START_SECONDS * time_scale
    _activity(
        scaling, copies["DesiredCopyCount"], now, None, "the no-capacity alarm in ALARM ran the step policy"
    )


def follow(scaling: Scaling, description: dict[str, Any]) -> None:
    """The endpoint's instances follow the base component's copies (one copy per instance on the shared base:
    hfpipe.core.adapters.shared_base), so DescribeEndpoint's CurrentInstanceCount is 0 at zero, as on AWS."""
    count = int((description.get("RuntimeConfig") or {}).get("CurrentCopyCount", 0))
    if scaling.hosting is None or scaling.instances == count:
        return
    scaling.hosting.set_instances(description["EndpointName"], description["VariantName"], count)
    scaling.instances = count


def _activity(scaling: Scaling, count: int, start: float, end: float | None, cause: str) -> None:
    """One scaling activity, as DescribeScalingActivities describes it (botocore's ScalingActivity); the
    Description's form is that of AWS's example for a variant ("Setting desired instance count to 2."), in
    copies: AWS documents none for an inference component's."""
    scaling.history.append(
        {
            "ActivityId": str(uuid.uuid4()),
            "Description": f"Setting desired copy count to {count}.",
            "Cause": cause,
            "StartTime": start,
            "EndTime": end,
            "StatusCode": "Successful" if end is not None else "InProgress",
        }
    )


def activities(scaling: Scaling | None, params: dict[str, Any], to_wall: Any) -> dict[str, Any]:
    """DescribeScalingActivities of a component's copies: newest first, with its target's namespace, resource
    and dimension, each time on the wall clock (``to_wall`` of an engine time)."""
    found = []
    for activity in reversed(scaling.history if scaling else []):
        answer = {
            **activity,
            "ServiceNamespace": scale_to_zero.NAMESPACE,
            "ResourceId": params["ResourceId"],
            "ScalableDimension": scale_to_zero.DIMENSION,
            "StartTime": to_wall(activity["StartTime"]),
        }
        if activity["EndTime"] is None:
            del answer["EndTime"]
        else:
            answer["EndTime"] = to_wall(activity["EndTime"])
        found.append(answer)
    return {"ScalingActivities": found}
