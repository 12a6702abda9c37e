"""One UpdateEndpoint of local mode's blue/green emulation (hfpipe.local.engine.guardrails): the traffic shifts a
DeploymentConfig asks for a new fleet, refused as AWS refuses sizes the fleet cannot take (TrafficRoutingConfig:
CanarySize at most 50%, LinearStepSize 10-50% of the variant's total instance count, counted in instances: a
step is at least one instance), and the record of what the deployment did.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

#: MaximumExecutionTimeoutInSeconds when no DeploymentConfig names one: the API's maximum (botocore's shape).
DEFAULT_EXECUTION_TIMEOUT_S = 28_800


class ApiError(Exception):
    """An AWS error answer to the call (hfpipe.local.engine.hooks answers it with HTTP 400)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code, self.message = code, message


@dataclass
class Step:
    """One traffic shift: the new fleet's instances and traffic share after it, and the bake that follows."""

    instances: int
    share: float
    bake_s: int
    bake_field: str
    capacity: str  # "canary", "linear step" or "full": the VariantStatus messages name it


@dataclass
class Deployment:
    """One UpdateEndpoint under way, and what it did (``log``: (stage, share of traffic on the new fleet))."""

    endpoint: str
    old_config: str
    new_config: str
    config: dict[str, Any]
    steps: list[Step]
    instance_count: int
    instance_type: str
    variant_name: str
    clock_s: float = 0.0
    #: The new fleet's instance count is the old fleet's live one (RetainAllVariantProperties).
    retained: bool = False
    log: list[tuple[str, float]] = field(default_factory=list)
    outcome: str | None = None
    done: threading.Event = field(default_factory=threading.Event)

    @property
    def timeout_s(self) -> int:
        """MaximumExecutionTimeoutInSeconds of the deployment."""
        policy = self.config.get("BlueGreenUpdatePolicy") or {}
        return int(policy.get("MaximumExecutionTimeoutInSeconds") or DEFAULT_EXECUTION_TIMEOUT_S)

    @property
    def alarms(self) -> list[str]:
        return [
            a["AlarmName"] for a in (self.config.get("AutoRollbackConfiguration") or {}).get("Alarms", [])
        ]


def _size(size: dict[str, Any], capacity: int) -> int:
    """Instances of a CapacitySize: a count, or a percent of ``capacity`` (rounded down, at least one)."""
    if size["Type"] == "INSTANCE_COUNT":
        return int(size["Value"])
    return max(1, capacity * int(size["Value"]) // 100)


def retains_count(request: dict[str, Any]) -> bool:
    """Whether the update keeps the variant's live instance count (RetainAllVariantProperties, without
    DesiredInstanceCount among ExcludeRetainedVariantProperties)."""
    excluded = {p.get("VariantPropertyType") for p in request.get("ExcludeRetainedVariantProperties") or []}
    return bool(request.get("RetainAllVariantProperties")) and "DesiredInstanceCount" not in excluded


def plan_steps(config: dict[str, Any], capacity: int) -> list[Step]:
    """The traffic shifts of a DeploymentConfig for a new fleet of ``capacity`` instances; ApiError when its
    sizes break TrafficRoutingConfig's rules (CanarySize at most 50%, LinearStepSize 10% to 50% of it)."""
    policy = config.get("BlueGreenUpdatePolicy") or {}
    routing = policy.get("TrafficRoutingConfiguration") or {"Type": "ALL_AT_ONCE"}
    wait, final = int(routing.get("WaitIntervalInSeconds", 0)), int(policy.get("TerminationWaitInSeconds", 0))
    kind = routing["Type"]
    last = Step(capacity, 1.0, final, "TerminationWaitInSeconds", "full")
    if kind == "ALL_AT_ONCE":
        return [last]
    name, low, words = (
        ("CanarySize", 0.0, "at most 50%") if kind == "CANARY" else ("LinearStepSize", 0.1, "10% to 50%")
    )
    if name not in routing:
        raise ApiError("ValidationException", f"TrafficRoutingConfiguration.{name}: required for Type {kind}")
    size = _size(routing[name], capacity)
    asked = routing[name]["Value"] / 100 if routing[name]["Type"] == "CAPACITY_PERCENT" else size / capacity
    # In instances as well: a step of at least one instance is more than half a one-instance fleet.
    if not low <= asked <= 0.5 or 2 * size > capacity:
        raise ApiError(
            "ValidationException",
            f"TrafficRoutingConfiguration.{name}: {routing[name]} is {size} of the new fleet's {capacity} "
            f"instance(s); accepted: {words} of the variant's total instance count",
        )
    label = "canary" if kind == "CANARY" else "linear step"
    counts = [size] if kind == "CANARY" else list(range(size, capacity, size))
    return [Step(n, n / capacity, wait, "WaitIntervalInSeconds", label) for n in counts] + [last]
