"""Scale to zero for an environment's shared base: its instances go to 0 after an idle period and come back on
the first call (docs/adapters.md, "Scale to zero").

Everything here follows AWS's "Scale an endpoint to zero instances" (Amazon SageMaker AI Developer Guide,
https://docs.aws.amazon.com/sagemaker/latest/dg/endpoint-auto-scaling-zero-instances.html; "the page" below)
and botocore's models of SageMaker, Application Auto Scaling and CloudWatch:

- the endpoint config's variant carries ``ManagedInstanceScaling`` with ``MinInstanceCount`` 0 (the page's
  third requirement; botocore's ProductionVariantManagedInstanceScaling: ``Status`` ENABLED|DISABLED,
  ``MinInstanceCount`` min 0, ``MaxInstanceCount`` min 1). Only an endpoint that hosts inference components
  can scale to zero (the page's second requirement): the shared base is one;
- the base component's copies are a scalable target (``ServiceNamespace`` sagemaker, ``ResourceId``
  ``inference-component/NAME``, ``ScalableDimension`` ``sagemaker:inference-component:DesiredCopyCount``,
  ``MinCapacity`` 0), with the page's target tracking policy (``SageMakerInferenceComponentInvocationsPerCopy``,
  target 1) whose ``ScaleInCooldown`` is the idle period;
- the way back from zero: the page's step scaling policy (``ChangeInCapacity``, ``Maximum``, cooldown 60, one
  step of +1 from a lower bound of 0) and a CloudWatch alarm on ``NoCapacityInvocationFailures`` ("SageMaker AI
  emits this metric when an endpoint receives an inference request, but the endpoint has no active instances
  to serve the request") in ``AWS/SageMaker`` by ``InferenceComponentName``, Sum over 60 s, whose action is that
  policy. One deviation, stated: the page's alarm compares ``GreaterThanThreshold`` 1, which needs two failed
  calls in a minute; this one is ``GreaterThanOrEqualToThreshold`` 1, so the first call that finds no copy
  wakes the base.

While the base has no copy, InvokeEndpoint answers ValidationError "Inference Component has no capacity to
process this request. ApplicationAutoScaling may be in-progress (if configured) or try to increase the capacity
by invoking UpdateInferenceComponentRuntimeConfig API." (as quoted from AWS's blog "Unlock cost savings with the
new scale down to zero feature in SageMaker Inference"), and "the provisioning process takes several minutes.
During that time, any attempts to invoke the endpoint will produce an error" (the page): ``is_cold_start``
tells that answer from others, and ``hfpipe invoke`` retries it.

Stdlib only: the stacks, the adapter function and local mode read it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from hfpipe.core import cost
from hfpipe.core.throttling import error_code

#: The idle period's default and bounds, minutes. The upper bound is Application Auto Scaling's cooldown
#: limit of one day (the Cooldown shape has no bound in botocore's model; a day keeps a dev base from
#: billing a whole day for one call).
DEFAULT_IDLE_MINUTES = 15
MAX_IDLE_MINUTES = 1440
#: The page's step policy cooldown, seconds.
STEP_COOLDOWN_SECONDS = 60
#: How long a base takes to come back from zero, seconds: "the provisioning process takes several minutes"
#: (the page); 300 s is the project's figure for it (local mode's cold start, the idle-day cost), not measured.
COLD_START_SECONDS = 300
#: The page's alarm period, seconds.
ALARM_PERIOD_SECONDS = 60
NAMESPACE = "sagemaker"
DIMENSION = "sagemaker:inference-component:DesiredCopyCount"
NO_CAPACITY_METRIC = "NoCapacityInvocationFailures"
#: InvokeEndpoint's answer while the component has no copy (ValidationError; quoted above).
NO_CAPACITY_MESSAGE = (
    "Inference Component has no capacity to process this request. ApplicationAutoScaling may be in-progress "
    "(if configured) or try to increase the capacity by invoking UpdateInferenceComponentRuntimeConfig API."
)
_KEYS = {
    "enabled": "true or false: the base's instances go to 0 after idle_minutes without calls (required)",
    "idle_minutes": f"a whole number of minutes from 1 to {MAX_IDLE_MINUTES} without calls before the base "
    f"scales to 0 (optional; default {DEFAULT_IDLE_MINUTES})",
}


class ScaleToZeroError(ValueError):
    """A malformed ``scale_to_zero`` entry; the message names the dotted path and what is accepted."""


@dataclass(frozen=True)
class ScaleToZero:
    """cdk.json's ``shared_base.scale_to_zero``, validated; off unless the entry turns it on."""

    enabled: bool = False
    idle_minutes: int = DEFAULT_IDLE_MINUTES

    @property
    def idle_seconds(self) -> int:
        return self.idle_minutes * 60


def parse_scale_to_zero(entry: object, path: str) -> ScaleToZero:
    """Validate ``scale_to_zero`` (None: off), every error naming ``path``'s key and what is accepted."""
    if entry is None:
        return ScaleToZero()
    accepted = "an object with keys " + ", ".join(_KEYS)
    if not isinstance(entry, Mapping):
        raise ScaleToZeroError(f"{path}: {entry!r} is not accepted; accepted: {accepted}")
    for key in entry:
        if key not in _KEYS:
            raise ScaleToZeroError(f"{path}.{key}: unknown key; accepted: {', '.join(sorted(_KEYS))}")
    if not isinstance(entry.get("enabled"), bool):
        raise ScaleToZeroError(
            f"{path}.enabled: {entry.get('enabled')!r} is not accepted; accepted: {_KEYS['enabled']}"
        )
    idle = entry.get("idle_minutes", DEFAULT_IDLE_MINUTES)
    if isinstance(idle, bool) or not isinstance(idle, int) or not 1 <= idle <= MAX_IDLE_MINUTES:
        raise ScaleToZeroError(
            f"{path}.idle_minutes: {idle!r} is not accepted; accepted: {_KEYS['idle_minutes']}"
        )
    return ScaleToZero(enabled=entry["enabled"], idle_minutes=idle)


def managed_instance_scaling(max_instances: int) -> dict[str, Any]:
    """The variant's ``ManagedInstanceScaling`` (botocore's ProductionVariantManagedInstanceScaling; the page's
    third requirement): SageMaker adds and removes instances as the components' copies need, down to 0."""
    return {"Status": "ENABLED", "MinInstanceCount": 0, "MaxInstanceCount": max_instances}


def resource_id(component: str) -> str:
    """Application Auto Scaling's ResourceId of an inference component (the page: inference-component/NAME)."""
    return f"inference-component/{component}"


def policy_names(component: str) -> tuple[str, str]:
    """The scale-in (target tracking) and scale-out-from-zero (step) policies' names."""
    return f"{component}-idle-to-zero", f"{component}-wake-from-zero"


def alarm_name(component: str) -> str:
    return f"{component}-no-capacity"


def _target(component: str) -> dict[str, str]:
    return {
        "ServiceNamespace": NAMESPACE,
        "ResourceId": resource_id(component),
        "ScalableDimension": DIMENSION,
    }


def scaling_requests(
    component: str, setting: ScaleToZero, max_copies: int, tags: Mapping[str, str] | None = None
) -> dict[str, dict[str, Any]]:
    """The requests that make the base component scale to zero and back, by operation, in order: the scalable
    target (min 0), the target tracking policy (the page's, its ScaleInCooldown the idle period) and the step
    policy; the alarm's request is ``alarm_request``, which needs the step policy's ARN."""
    idle_policy, wake_policy = policy_names(component)
    return {
        "RegisterScalableTarget": {
            **_target(component),
            "MinCapacity": 0,
            "MaxCapacity": max_copies,
            **({"Tags": dict(tags)} if tags else {}),
        },
        "PutScalingPolicy:TargetTracking": {
            **_target(component),
            "PolicyName": idle_policy,
            "PolicyType": "TargetTrackingScaling",
            "TargetTrackingScalingPolicyConfiguration": {
                "PredefinedMetricSpecification": {
                    "PredefinedMetricType": "SageMakerInferenceComponentInvocationsPerCopy"
                },
                "TargetValue": 1.0,
                "ScaleInCooldown": setting.idle_seconds,
                "ScaleOutCooldown": STEP_COOLDOWN_SECONDS,
            },
        },
        "PutScalingPolicy:StepScaling": {
            **_target(component),
            "PolicyName": wake_policy,
            "PolicyType": "StepScaling",
            "StepScalingPolicyConfiguration": {
                "AdjustmentType": "ChangeInCapacity",
                "MetricAggregationType": "Maximum",
                "Cooldown": STEP_COOLDOWN_SECONDS,
                "StepAdjustments": [{"MetricIntervalLowerBound": 0.0, "ScalingAdjustment": 1}],
            },
        },
    }


def alarm_request(component: str, policy_arn: str) -> dict[str, Any]:
    """PutMetricAlarm on the component's ``NoCapacityInvocationFailures`` whose action is the step policy."""
    return {
        "AlarmName": alarm_name(component),
        "AlarmDescription": f"{component} was called with no copy: wake it from zero",
        "AlarmActions": [policy_arn],
        "Namespace": "AWS/SageMaker",
        "MetricName": NO_CAPACITY_METRIC,
        "Dimensions": [{"Name": "InferenceComponentName", "Value": component}],
        "Statistic": "Sum",
        "Period": ALARM_PERIOD_SECONDS,
        "EvaluationPeriods": 1,
        "DatapointsToAlarm": 1,
        "Threshold": 1.0,
        "ComparisonOperator": "GreaterThanOrEqualToThreshold",
        "TreatMissingData": "notBreaching",
    }


def apply_scaling(
    autoscaling: Any,
    cloudwatch: Any,
    component: str,
    setting: ScaleToZero,
    max_copies: int,
    tags: Mapping[str, str] | None = None,
) -> str:
    """Register the base component's copies, put both policies and the alarm; each call creates or updates,
    so a rerun changes nothing twice. Returns the alarm's name."""
    requests = scaling_requests(component, setting, max_copies, tags)
    autoscaling.register_scalable_target(**requests["RegisterScalableTarget"])
    autoscaling.put_scaling_policy(**requests["PutScalingPolicy:TargetTracking"])
    step = autoscaling.put_scaling_policy(**requests["PutScalingPolicy:StepScaling"])
    cloudwatch.put_metric_alarm(**alarm_request(component, step["PolicyARN"]))
    return alarm_name(component)


def remove_scaling(autoscaling: Any, cloudwatch: Any, component: str) -> None:
    """Undo ``apply_scaling`` when the base is retired: the alarm, then the scalable target ("If a scalable
    target is deregistered ... Any scaling policies that were specified for the scalable target are deleted",
    PutScalingPolicy's documentation). What is already gone (CloudWatch's ResourceNotFound, Application Auto
    Scaling's ObjectNotFoundException: botocore's models) is no error, so a rerun deletes nothing twice."""
    for call, gone in (
        (lambda: cloudwatch.delete_alarms(AlarmNames=[alarm_name(component)]), "ResourceNotFound"),
        (lambda: autoscaling.deregister_scalable_target(**_target(component)), "ObjectNotFoundException"),
    ):
        try:
            call()
        except Exception as err:
            if error_code(err) != gone:
                raise


def at_zero(described: Mapping[str, Any] | None) -> bool:
    """Whether a component (DescribeInferenceComponent's answer) has no copy now and none is coming: its
    RuntimeConfig's ``CurrentCopyCount`` and ``DesiredCopyCount`` both 0."""
    copies = (described or {}).get("RuntimeConfig") or {}
    return copies.get("CurrentCopyCount") == 0 and copies.get("DesiredCopyCount") == 0


def wake_request(component: str, copies: int) -> dict[str, Any]:
    """UpdateInferenceComponentRuntimeConfig that brings a base at zero back to ``copies`` (what SageMaker's
    no-capacity answer itself names: "try to increase the capacity by invoking
    UpdateInferenceComponentRuntimeConfig API"; botocore: ``DesiredRuntimeConfig.CopyCount``). A deploy sends it
    before it smoke-tests an adapter on the base, rather than fail its first call."""
    return {"InferenceComponentName": component, "DesiredRuntimeConfig": {"CopyCount": copies}}


def is_cold_start(err: Exception) -> bool:
    """InvokeEndpoint's answer while the component has no copy (ValidationError, ``NO_CAPACITY_MESSAGE``)."""
    return error_code(err) == "ValidationError" and "has no capacity to process this request" in str(err)


#: How often ``hfpipe invoke`` calls again while a base comes back from zero, and for how long at most,
#: seconds: the page says only that provisioning "takes several minutes" and that calls meanwhile fail, and
#: names no retry interval; every 10 s for 15 minutes covers its several minutes.
RETRY_SECONDS = 10.0
RETRY_LIMIT_SECONDS = 900.0


def through_cold_start(
    call: Callable[[], Any],
    say: Callable[[str], None],
    *,
    sleep: Callable[[float], None] | None = None,
    clock: Callable[[], float] | None = None,
    interval: float = RETRY_SECONDS,
    limit: float = RETRY_LIMIT_SECONDS,
) -> Any:
    """``call()``, called again every ``interval`` seconds while it gets SageMaker's no-capacity answer
    (``is_cold_start``: the base is at zero and coming back), for ``limit`` seconds at most; ``say`` tells
    when a call waits for a cold start and, once answered, how long it took. Any other error is raised as
    it is; the last no-capacity answer too once the limit is passed."""
    sleep, clock = sleep or time.sleep, clock or time.monotonic
    started = None
    while True:
        try:
            answer = call()
        except Exception as err:
            if not is_cold_start(err):
                raise
            now = clock()
            if started is None:
                started = now
                say(
                    "no copy of the base is up (it scaled to zero): waiting for a cold start, calling again "
                    f"every {interval:g} s for at most {limit:g} s"
                )
            if now - started >= limit:
                raise
            sleep(interval)
            continue
        if started is not None:
            say(f"cold start: answered after {clock() - started:.1f} s")
        return answer


def idle_day_usd(instance_type: str, instances: int, setting: ScaleToZero, wakes: int = 0) -> float | None:
    """What the base costs over a day with no traffic but ``wakes`` calls, each after more than the idle
    period (hfpipe.core.cost, on-demand): all day when it does not scale to zero; else, per wake, the cold start
    and the idle period that follows before it is back at 0 (billed as instances running then)."""
    day = 24 * 3600
    seconds = day if not setting.enabled else min(day, wakes * (COLD_START_SECONDS + setting.idle_seconds))
    return cost.estimate_cost(instance_type, instances, seconds)
