"""Named endpoints: what cdk.json's per-environment ``endpoints`` declare, and the rules a deploy follows for them.

One rule for the stack (the alarms, the deploy state machine's bounds) and the deploy Lambdas (Prepare's
DeploymentConfig, Record's autoscaling): ``parse_endpoints`` validates the cdk.json entry into one frozen
``EndpointSettings`` per endpoint, which travels to the Prepare function as JSON (``to_json``/``from_json``).

SageMaker's limits these follow (API reference, ``TrafficRoutingConfig``, ``CapacitySize``,
``BlueGreenUpdatePolicy``: https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_TrafficRoutingConfig.html,
https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_BlueGreenUpdatePolicy.html): a canary of at most
50% of the new fleet, linear steps of 10% to 50%, a wait between steps of 0 to 3,600 s, a bake time
(TerminationWaitInSeconds) of 0 to 3,600 s, and MaximumExecutionTimeoutInSeconds from 600 to 28,800 s,
larger than the waiting it covers. The instance counts canary and linear traffic shifting need: hfpipe.core.deploy.fleets.
Stdlib only: the stacks import it at synth time, the Lambda bundle copies it.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from hfpipe import contract
from hfpipe.core.deploy.fleets import MIN_SHIFTING_INSTANCES, shifting_problem

TRAFFIC_TYPES = ("ALL_AT_ONCE", "CANARY", "LINEAR")
#: Step sizes SageMaker accepts, in percent of the new fleet (CapacitySize CAPACITY_PERCENT).
STEP_PERCENT = {"CANARY": (1, 50), "LINEAR": (10, 50)}
MAX_WAIT_SECONDS = 3600  # WaitIntervalInSeconds and TerminationWaitInSeconds
MIN_DEPLOYMENT_SECONDS, MAX_DEPLOYMENT_SECONDS = 600, 28_800  # MaximumExecutionTimeoutInSeconds
#: Time a new fleet may take to come up before traffic moves (large models download for many minutes).
PROVISIONING_SECONDS = 3600
#: The alarms' metrics: AWS/SageMaker per endpoint and variant, one-minute periods.
ALARM_METRICS = {
    "5xx-errors": ("Invocation5XXErrors", "Sum"),
    "4xx-errors": ("Invocation4XXErrors", "Sum"),
    "model-latency": ("ModelLatency", "Average"),
}
ALARM_PERIOD_SECONDS = 60
MAX_MODEL_LATENCY_MS = 60_000  # a real-time endpoint answers within 60 s (InvokeEndpoint)
MAX_INSTANCES = 100

_NAME = re.compile(r"^[a-z0-9]([a-z0-9-]*[a-z0-9])?$")
_DEFAULT_STEP: dict[str, int | None] = {"CANARY": 10, "LINEAR": 20}
_DEFAULT_WAIT = {"ALL_AT_ONCE": 0, "CANARY": 300, "LINEAR": 300}
_KEYS = {
    "instance_count": f"a whole number of instances from 1 to {MAX_INSTANCES} (optional; default 1)",
    "traffic": 'an object {"type": "ALL_AT_ONCE" | "CANARY" | "LINEAR", "step_percent": N, "wait_seconds": N} '
    '(optional; default {"type": "CANARY", "step_percent": 10, "wait_seconds": 300} for a fleet of at least 2 '
    'instances, {"type": "ALL_AT_ONCE"} for one that can be 1 instance)',
    "bake_seconds": "a whole number of seconds from 0 to 3600: how long the old fleet is kept after all "
    "traffic moved, with the alarms watching (optional; default 600)",
    "alarms": 'an object {"max_5xx_errors": N, "max_4xx_errors": N, "max_model_latency_ms": N} (optional; '
    "defaults 1, 1 and 10000)",
    "autoscaling": 'an object {"min_instances": N, "max_instances": N, "invocations_per_instance": N} '
    "(optional; default none)",
}
_TRAFFIC_KEYS = {
    "type": " or ".join(f'"{t}"' for t in TRAFFIC_TYPES)
    + f" (CANARY and LINEAR on a fleet of at least {MIN_SHIFTING_INSTANCES} instances)",
    "step_percent": "for CANARY a whole percent from 1 to 50 (default 10), for LINEAR from 10 to 50 "
    "(default 20); not for ALL_AT_ONCE",
    "wait_seconds": "a whole number of seconds from 0 to 3600 between traffic steps (default 300; 0 for "
    "ALL_AT_ONCE)",
}
_ALARM_KEYS = {
    "max_5xx_errors": "a whole number >= 1: more 5xx errors than this in one minute trips the alarm (default 1)",
    "max_4xx_errors": "a whole number >= 1: more 4xx errors (requests the model refused) than this in one minute "
    "trips the alarm (default 1; raise it where clients send requests the model may refuse)",
    "max_model_latency_ms": f"a whole number of milliseconds from 1 to {MAX_MODEL_LATENCY_MS}: a minute whose "
    "average ModelLatency is above it trips the alarm (default 10000)",
}
_SCALING_KEYS = {
    "min_instances": "a whole number >= 1, at most instance_count (default: instance_count)",
    "max_instances": f"a whole number from instance_count to {MAX_INSTANCES} (required)",
    "invocations_per_instance": "a whole number >= 1: the target of SageMakerVariantInvocationsPerInstance, "
    "invocations per instance per minute (required)",
}


class EndpointSettingsError(ValueError):
    """A malformed ``endpoints`` entry; the message names the dotted path and what is accepted."""


@dataclass(frozen=True)
class Traffic:
    """How traffic moves to the new fleet (SageMaker's TrafficRoutingConfig); all at once by default, as a
    one-instance fleet must (``shifting_problem``)."""

    type: str = "ALL_AT_ONCE"
    step_percent: int | None = None
    wait_seconds: int = 0

    @property
    def waits(self) -> int:
        """How many WaitIntervalInSeconds a deployment can spend, counted generously (the bound must hold)."""
        if self.type == "LINEAR" and self.step_percent:
            return math.ceil(100 / self.step_percent)
        return 1


@dataclass(frozen=True)
class Alarms:
    """Thresholds of the endpoint's three CloudWatch alarms, the deployments' automatic rollback triggers."""

    max_5xx_errors: int = 1
    max_4xx_errors: int = 1
    max_model_latency_ms: int = 10_000


@dataclass(frozen=True)
class Autoscaling:
    """Target tracking on SageMakerVariantInvocationsPerInstance, applied by the deploy's Record step."""

    min_instances: int
    max_instances: int
    invocations_per_instance: int


@dataclass(frozen=True)
class EndpointSettings:
    """One named endpoint of one environment, validated (``parse_endpoint``)."""

    name: str
    instance_count: int = 1
    traffic: Traffic = Traffic()
    bake_seconds: int = 600
    alarms: Alarms = Alarms()
    autoscaling: Autoscaling | None = None

    def endpoint_name(self, env: str) -> str:
        return contract.deployed_endpoint_name(env, self.name)

    @property
    def largest_fleet(self) -> int:
        """The most instances the endpoint's fleet can have: ``autoscaling.max_instances``, else its count."""
        return self.autoscaling.max_instances if self.autoscaling else self.instance_count

    @property
    def deployment_seconds(self) -> int:
        """MaximumExecutionTimeoutInSeconds: the new fleet's start, every traffic wait and the bake time."""
        waiting = PROVISIONING_SECONDS + self.traffic.waits * self.traffic.wait_seconds + self.bake_seconds
        return min(MAX_DEPLOYMENT_SECONDS, max(MIN_DEPLOYMENT_SECONDS, waiting))

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> EndpointSettings:
        scaling = data.get("autoscaling")
        return cls(
            name=str(data["name"]),
            instance_count=int(data["instance_count"]),
            traffic=Traffic(**data["traffic"]),
            bake_seconds=int(data["bake_seconds"]),
            alarms=Alarms(**data["alarms"]),
            autoscaling=Autoscaling(**scaling) if scaling else None,
        )


def settings_json(endpoints: tuple[EndpointSettings, ...]) -> str:
    """The endpoints as the Prepare function's DEPLOY_ENDPOINTS environment variable: {name: settings}."""
    return json.dumps({e.name: e.to_json() for e in endpoints}, sort_keys=True, separators=(",", ":"))


def settings_from_json(text: str) -> dict[str, EndpointSettings]:
    return {name: EndpointSettings.from_json(entry) for name, entry in json.loads(text or "{}").items()}


# -- validation -----------------------------------------------------------------------------------------


def _rejected(path: str, value: object, accepted: str) -> EndpointSettingsError:
    return EndpointSettingsError(f"{path}: {value!r} is not accepted; accepted: {accepted}")


def _object(path: str, value: object, known: Mapping[str, str]) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise _rejected(path, value, "an object with keys " + ", ".join(known))
    for key in value:
        if key not in known:
            raise EndpointSettingsError(f"{path}.{key}: unknown key; accepted: {', '.join(sorted(known))}")
    return value


def _whole(path: str, value: object, low: int, high: int, accepted: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise _rejected(path, value, accepted)
    return value


def _traffic(path: str, entry: object, instance_count: int) -> Traffic:
    """A deploy's new fleet has at least ``instance_count`` instances (as many as the old one when it
    autoscaled above that), so the traffic type is checked against it."""
    data = _object(path, entry, _TRAFFIC_KEYS)
    default = "CANARY" if instance_count >= MIN_SHIFTING_INSTANCES else "ALL_AT_ONCE"
    kind = data.get("type", default)
    if kind not in TRAFFIC_TYPES:
        raise _rejected(f"{path}.type", kind, _TRAFFIC_KEYS["type"])
    problem = shifting_problem(kind, instance_count)
    if problem:
        raise EndpointSettingsError(
            f"{path}.type: {kind!r} is not accepted with instance_count {instance_count}: {problem}"
        )
    step = data.get("step_percent", _DEFAULT_STEP.get(kind))
    if kind == "ALL_AT_ONCE" and step is not None:
        raise _rejected(f"{path}.step_percent", step, "no step_percent with ALL_AT_ONCE (one step of 100%)")
    if kind in STEP_PERCENT:
        low, high = STEP_PERCENT[kind]
        step = _whole(f"{path}.step_percent", step, low, high, _TRAFFIC_KEYS["step_percent"])
    wait = _whole(
        f"{path}.wait_seconds",
        data.get("wait_seconds", _DEFAULT_WAIT[kind]),
        0,
        3600,
        _TRAFFIC_KEYS["wait_seconds"],
    )
    return Traffic(type=kind, step_percent=step, wait_seconds=wait)


def _alarms(path: str, entry: object) -> Alarms:
    data = _object(path, entry, _ALARM_KEYS)
    return Alarms(
        max_5xx_errors=_whole(
            f"{path}.max_5xx_errors", data.get("max_5xx_errors", 1), 1, 10**9, _ALARM_KEYS["max_5xx_errors"]
        ),
        max_4xx_errors=_whole(
            f"{path}.max_4xx_errors", data.get("max_4xx_errors", 1), 1, 10**9, _ALARM_KEYS["max_4xx_errors"]
        ),
        max_model_latency_ms=_whole(
            f"{path}.max_model_latency_ms",
            data.get("max_model_latency_ms", 10_000),
            1,
            MAX_MODEL_LATENCY_MS,
            _ALARM_KEYS["max_model_latency_ms"],
        ),
    )


def _autoscaling(path: str, entry: object, instance_count: int) -> Autoscaling:
    data = _object(path, entry, _SCALING_KEYS)
    for required in ("max_instances", "invocations_per_instance"):
        if required not in data:
            raise EndpointSettingsError(f"{path}.{required}: required; accepted: {_SCALING_KEYS[required]}")
    low = _whole(
        f"{path}.min_instances",
        data.get("min_instances", instance_count),
        1,
        instance_count,
        _SCALING_KEYS["min_instances"] + f" ({instance_count} here)",
    )
    high = _whole(
        f"{path}.max_instances",
        data["max_instances"],
        instance_count,
        MAX_INSTANCES,
        _SCALING_KEYS["max_instances"] + f" (instance_count is {instance_count})",
    )
    target = _whole(
        f"{path}.invocations_per_instance",
        data["invocations_per_instance"],
        1,
        10**6,
        _SCALING_KEYS["invocations_per_instance"],
    )
    return Autoscaling(min_instances=low, max_instances=high, invocations_per_instance=target)


def parse_endpoint(env: str, name: object, entry: object, path: str) -> EndpointSettings:
    """Validate one ``endpoints`` entry; ``path`` is the dotted path of the ``endpoints`` object."""
    accepted = (
        "lower-case letters, digits and '-' (not first or last), so that the SageMaker endpoint "
        f"{contract.deployed_endpoint_name(env, 'NAME')} has at most 63 characters"
    )
    if (
        not isinstance(name, str)
        or not _NAME.fullmatch(name)
        or len(contract.deployed_endpoint_name(env, name)) > 63
    ):
        raise _rejected(path, name, f"endpoint names of {accepted}")
    if name == contract.SHARED_BASE:
        raise _rejected(
            path, name, f"any other name: {name!r} is the environment's shared base (docs/adapters.md)"
        )
    where = f"{path}.{name}"
    data = _object(where, entry, _KEYS)
    count = _whole(
        f"{where}.instance_count", data.get("instance_count", 1), 1, MAX_INSTANCES, _KEYS["instance_count"]
    )
    bake = _whole(
        f"{where}.bake_seconds", data.get("bake_seconds", 600), 0, MAX_WAIT_SECONDS, _KEYS["bake_seconds"]
    )
    scaling = (
        _autoscaling(f"{where}.autoscaling", data["autoscaling"], count)
        if data.get("autoscaling") is not None
        else None
    )
    settings = EndpointSettings(
        name=name,
        instance_count=count,
        traffic=_traffic(f"{where}.traffic", data.get("traffic", {}), count),
        bake_seconds=bake,
        alarms=_alarms(f"{where}.alarms", data.get("alarms", {})),
        autoscaling=scaling,
    )
    t = settings.traffic
    waiting = PROVISIONING_SECONDS + t.waits * t.wait_seconds + bake
    if waiting > MAX_DEPLOYMENT_SECONDS:
        raise EndpointSettingsError(
            f"{where}.traffic: {t.waits} wait(s) of {t.wait_seconds} s + bake_seconds {bake} + "
            f"{PROVISIONING_SECONDS} s for the new fleet to start = {waiting} s; accepted: at most "
            f"{MAX_DEPLOYMENT_SECONDS} s in all (SageMaker's MaximumExecutionTimeoutInSeconds): fewer or "
            "shorter waits, or a larger step_percent"
        )
    return settings


def parse_endpoints(env: str, entry: object, path: str) -> tuple[EndpointSettings, ...]:
    """Validate an environment's ``endpoints`` object ({NAME: settings}); sorted by name."""
    if not isinstance(entry, Mapping):
        raise _rejected(path, entry, 'an object {NAME: settings}, e.g. {"summaries": {"instance_count": 1}}')
    return tuple(parse_endpoint(env, name, entry[name], path) for name in sorted(entry))


# -- what SageMaker and CloudWatch get --------------------------------------------------------------------


@dataclass(frozen=True)
class AlarmSpec:
    """One CloudWatch alarm on a named endpoint (the stack makes it; a deploy's rollback names it)."""

    name: str
    metric_name: str
    statistic: str
    threshold: float
    description: str


def alarm_specs(env: str, settings: EndpointSettings) -> tuple[AlarmSpec, ...]:
    """The 5xx-errors, 4xx-errors and model-latency alarms (GreaterThanThreshold, one minute, missing data not
    breaching). 4xx errors are requests the model refused (the inference toolkit answers a handler's error with
    a 400): a version that cannot read what production sends trips it, as AWS's own deployment-guardrails
    example monitors Invocation4XXErrors besides 5XX and latency.
    ModelLatency is in microseconds, Invocation4XXErrors and Invocation5XXErrors count the requests a model
    answered with 4xx and 5xx statuses, per endpoint and variant
    (https://docs.aws.amazon.com/sagemaker/latest/dg/monitoring-cloudwatch.html)."""
    endpoint = settings.endpoint_name(env)
    limits = {
        "5xx-errors": settings.alarms.max_5xx_errors,
        "4xx-errors": settings.alarms.max_4xx_errors,
        "model-latency": settings.alarms.max_model_latency_ms,
    }
    text = {
        "5xx-errors": f"more than {limits['5xx-errors']} 5xx error(s) in a minute",
        "4xx-errors": f"more than {limits['4xx-errors']} 4xx error(s) in a minute",
        "model-latency": f"average model latency above {limits['model-latency']} ms in a minute",
    }
    specs = []
    for metric, (metric_name, statistic) in ALARM_METRICS.items():
        threshold = float(limits[metric] * 1000 if metric == "model-latency" else limits[metric])
        specs.append(
            AlarmSpec(
                name=contract.endpoint_alarm_name(env, settings.name, metric),
                metric_name=metric_name,
                statistic=statistic,
                threshold=threshold,
                description=f"hfpipe {env}: endpoint {endpoint} has {text[metric]}; a deploy in progress "
                "rolls back to the previous version (AutoRollbackConfiguration)",
            )
        )
    return tuple(specs)


def traffic_routing(traffic: Traffic) -> dict[str, Any]:
    """TrafficRoutingConfig."""
    routing: dict[str, Any] = {"Type": traffic.type, "WaitIntervalInSeconds": traffic.wait_seconds}
    size = {"Type": "CAPACITY_PERCENT", "Value": traffic.step_percent}
    if traffic.type == "CANARY":
        routing["CanarySize"] = size
    elif traffic.type == "LINEAR":
        routing["LinearStepSize"] = size
    return routing


def deployment_config(env: str, settings: EndpointSettings) -> dict[str, Any]:
    """UpdateEndpoint's DeploymentConfig: blue/green with the declared traffic routing and bake time, rolled
    back automatically when either of the endpoint's alarms goes off."""
    return {
        "BlueGreenUpdatePolicy": {
            "TrafficRoutingConfiguration": traffic_routing(settings.traffic),
            "TerminationWaitInSeconds": settings.bake_seconds,
            "MaximumExecutionTimeoutInSeconds": settings.deployment_seconds,
        },
        "AutoRollbackConfiguration": {"Alarms": [{"AlarmName": a.name} for a in alarm_specs(env, settings)]},
    }


def endpoint_usage(endpoints: tuple[EndpointSettings, ...], base_instances: int) -> tuple[int, str]:
    """(instances, why) of one instance type the environment's endpoints can hold at once, counted against the
    account's "<type> for endpoint usage" quota: the shared base's instances when it is of that type
    (``base_instances``: cdk.json's shared_base copies), every named endpoint's largest fleet (nothing binds a
    named endpoint to an instance type: a version served on any type may be deployed to any of them), and the
    new fleet of one blue/green update beside them (the largest; SageMaker runs both fleets until the bake
    ends). Two updates at once need more: the deploy counts what runs before it starts (deploy_prepare)."""
    fleets = sum(e.largest_fleet for e in endpoints)
    widest = max(endpoints, key=lambda e: e.largest_fleet, default=None)
    update = widest.largest_fleet if widest else 0
    parts = [f"the shared base's {base_instances} (shared_base.copies)"] if base_instances else []
    if widest is not None:
        each = ", ".join(f"{e.name} {e.largest_fleet}" for e in endpoints)
        parts.append(f"the named endpoints' fleets ({each}; instance_count, or autoscaling.max_instances)")
        parts.append(f"a blue/green update's new fleet beside them ({update}, endpoint {widest.name!r})")
    return base_instances + fleets + update, ", ".join(parts) or "nothing"
