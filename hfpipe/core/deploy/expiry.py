"""An endpoint's time to live: its expiry tag, the reaper's rule, and its idle time read from CloudWatch.

Every endpoint the project creates (a run's, a named endpoint's, the shared base) carries ``hfpipe:expires-at``
(``contract.TAG_EXPIRES_AT``, ISO 8601 UTC) from its creation, as do the endpoint config and model made for it,
when its environment has a time to live (cdk.json ``endpoint_ttl_hours``) or the command that made it was given
``--ttl``; without the tag it never expires. Each environment's reaper (lambda/pipeline/pipeline_lambdas/reaper.py)
deletes an endpoint only when ``refusal`` finds nothing against it and it had no ``Invocations`` in the idle window.

Invocations: SageMaker publishes ``Invocations`` ("The number of InvokeEndpoint requests sent to a model
endpoint") in the ``AWS/SageMaker`` namespace per ``EndpointName`` and ``VariantName``, and per
``InferenceComponentName`` for calls to an inference component (Amazon SageMaker Developer Guide, "Amazon
SageMaker AI metrics in Amazon CloudWatch", endpoint invocation metrics and inference component metrics,
https://docs.aws.amazon.com/sagemaker/latest/dg/monitoring-cloudwatch.html; "use the Sum statistic" for the
count). A period without a call has no datapoint or a Sum of 0: both count as no call.

Stdlib only; the CloudWatch client is passed in.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from hfpipe import contract
from hfpipe.core import cost
from hfpipe.core.run import cleanup

#: What --ttl and cdk.json's TTL accept, said in every refusal.
TTL_FORM = "a whole number and a unit: m (minutes), h (hours) or d (days), e.g. 90m, 8h, 3d; or none"
_TTL = re.compile(r"^([0-9]{1,6})([mhd])$")  # ASCII digits only (\d takes any script's)
_UNIT_SECONDS = {"m": 60, "h": 3600, "d": 86400}
#: The longest time to live: a year (past it, "never" is what is meant: none).
MAX_TTL_SECONDS = 365 * 86400
#: DescribeEndpoint's EndpointStatus values the reaper deletes in: a settled endpoint, serving or failed. Not
#: Creating/Updating/SystemUpdating/RollingBack (SageMaker refuses DeleteEndpoint then:
#: hfpipe.core.run.cleanup.NOT_DELETABLE_YET), not Deleting (under way) or OutOfService.
REAPABLE_STATUSES = frozenset({"InService", "Failed"})
NAMESPACE = "AWS/SageMaker"
INVOCATIONS = "Invocations"
#: How far back `hfpipe endpoints` looks for an endpoint's last call: 5-minute datapoints over 5 days, 1,440 of
#: them, GetMetricStatistics' most per call ("A single request can return up to 1,440 data points",
#: https://docs.aws.amazon.com/AmazonCloudWatch/latest/APIReference/API_GetMetricStatistics.html).
LOOKBACK = timedelta(days=5)
LOOKBACK_PERIOD_S = 300


class TtlError(ValueError):
    """A time to live that is not one (the message names the field and what is accepted)."""


def parse_ttl(text: object, field: str = "--ttl") -> int | None:
    """Seconds of a time to live written as ``TTL_FORM`` says (``none``: None, no expiry); TtlError otherwise."""
    value = str(text).strip().lower() if isinstance(text, str) else None
    if value == "none":
        return None
    match = _TTL.fullmatch(value or "")
    seconds = int(match.group(1)) * _UNIT_SECONDS[match.group(2)] if match else 0
    if not match or not 0 < seconds <= MAX_TTL_SECONDS:
        raise TtlError(f"{field}: {text!r} is not accepted; accepted: {TTL_FORM}, at most 365d")
    return seconds


#: The environment variable the functions that create endpoints (Plan, DeployPrepare, Adapter) read the
#: environment's time to live from, in seconds (the stack sets it from cdk.json's endpoint_ttl_hours).
TTL_VARIABLE = "ENDPOINT_TTL_SECONDS"


def ttl_of_variables(variables: Mapping[str, str]) -> int | None:
    """The environment's time to live from a function's environment variables (absent or empty: none)."""
    value = variables.get(TTL_VARIABLE)
    return round(float(value)) if value else None


def stamp(when: datetime) -> str:
    """ISO 8601 UTC to the second, as the tag holds it: 2026-12-08T17:30:00Z."""
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def expiry_tags(ttl_seconds: int | None, now: datetime) -> list[dict[str, str]]:
    """The expiry tag of something created ``now`` with this time to live (none without one)."""
    if ttl_seconds is None:
        return []
    return [{"Key": contract.TAG_EXPIRES_AT, "Value": stamp(now + timedelta(seconds=ttl_seconds))}]


def expiry_of(tags: Mapping[str, str]) -> datetime | None:
    """When it expires, from its tag; None without the tag or with one that is no ISO 8601 UTC time (such an
    endpoint never expires: the reaper deletes nothing on a guess)."""
    value = tags.get(contract.TAG_EXPIRES_AT)
    if not value:
        return None
    try:
        when = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return when if when.tzinfo else None


def _span(seconds: float, nearest: bool = False) -> str:
    """Minutes below an hour, hours below two days, else days: rounded down (``nearest``: to the nearest)."""
    whole = (lambda n, unit: round(n / unit)) if nearest else (lambda n, unit: n // unit)
    if seconds < 3600:
        return f"{max(1, int(whole(seconds, 60)))} min"
    if seconds < 2 * 86400:
        return f"{int(whole(seconds, 3600))} h"
    return f"{int(whole(seconds, 86400))} d"


def expiry_text(tags: Mapping[str, str], now: datetime) -> str:
    """What `hfpipe endpoints` shows: "in 3 h", "expired", "none (kept)", "none" or "unreadable: VALUE"."""
    when = expiry_of(tags)
    if when is None:
        if tags.get(contract.TAG_EXPIRES_AT):
            return f"unreadable: {tags[contract.TAG_EXPIRES_AT]}"
        return "none (kept)" if cleanup.is_kept(tags) else "none"
    left = (when - now).total_seconds()
    # Rounded to the nearest unit: a fresh day's expiry is "in 24 h", not "in 23 h".
    return "expired" if left <= 0 else f"in {_span(left, nearest=True)}"


def idle_text(
    last: datetime | None, now: datetime, known: bool = True, came_up: datetime | None = None
) -> str:
    """Time since the last call: "12 min", "over 5 d" (none in LOOKBACK), "no call since it came up 20 min ago"
    (none, and the endpoint is younger than LOOKBACK: ``came_up``, its LastModifiedTime), or "unknown"
    (CloudWatch unread). CloudWatch's 5-minute datapoints date a call to the start of its period."""
    if not known:
        return "unknown"
    if last is None:
        up = (now - came_up).total_seconds() if came_up is not None else None
        if up is not None and up < LOOKBACK.total_seconds():
            return f"no call since it came up {_span(max(60.0, up))} ago"
        return f"over {_span(LOOKBACK.total_seconds())}"
    return _span(max(60.0, (now - last).total_seconds()))


def refusal(tags: Mapping[str, str], status: str | None, env: str, now: datetime) -> str | None:
    """Why the reaper leaves this endpoint (None: it is a candidate, to be deleted if it had no calls in the idle
    window and is no shared base with adapters): another environment's or no hfpipe one, no expiry (a kept
    endpoint included), not expired yet, or a status SageMaker refuses a delete in."""
    if not cleanup.is_ours(tags, env):
        owner = tags.get(contract.TAG_ENV)
        return f"not environment {env}'s (tag {contract.TAG_ENV}: {owner or 'none'})"
    when = expiry_of(tags)
    if when is None:
        kept = " (kept)" if cleanup.is_kept(tags) else ""
        return f"no expiry{kept}"
    if when > now:
        return f"expires at {stamp(when)}"
    if status not in REAPABLE_STATUSES:
        return f"{status or 'gone'}, not InService or Failed"
    return None


def up_for_less_than(endpoint: Mapping[str, Any], now: datetime, idle: timedelta) -> str | None:
    """Why an endpoint that came up (or was last updated) less than the idle window ago stays (None: it has been
    up for the window): no call in a window it has not lived through is no idleness, and the smoke test's own
    call may not be in CloudWatch yet (SageMaker publishes Invocations once a minute). DescribeEndpoint's
    LastModifiedTime ("when the endpoint was last modified", CreationTime before any update: API reference)."""
    came_up = endpoint.get("LastModifiedTime") or endpoint.get("CreationTime")
    if not isinstance(came_up, datetime):
        return None
    up = now - came_up.astimezone(UTC)
    return f"up for {_span(up.total_seconds())}, less than the idle window {idle}" if up < idle else None


def is_expired(tags: Mapping[str, str], env: str, now: datetime) -> bool:
    """An endpoint config or model of this environment past its expiry: the reaper deletes one that no
    endpoint uses (what a run whose delete was interrupted after the endpoint's left)."""
    when = expiry_of(tags)
    return cleanup.is_ours(tags, env) and when is not None and when <= now


@dataclass(frozen=True)
class Reaped:
    """One endpoint the reaper deleted, with what it billed per day (None: price unknown)."""

    endpoint: str
    instance_type: str | None
    instance_count: int
    usd_per_day: float | None

    def to_json(self) -> dict[str, Any]:
        return {
            "endpoint": self.endpoint,
            "instance_type": self.instance_type,
            "instance_count": self.instance_count,
            "usd_per_day": self.usd_per_day,
        }


def usd_per_day(instance_type: str | None, instance_count: int) -> float | None:
    """What ``instance_count`` instances of ``instance_type`` bill per day (hfpipe.core.cost's hourly price x 24)."""
    if not instance_type:
        return None
    per_hour = cost.endpoint_price_per_hour(instance_type, instance_count)
    return None if per_hour is None else round(per_hour * 24, 4)


def metric_dimensions(endpoint: Mapping[str, Any], components: list[str]) -> list[list[dict[str, str]]]:
    """The ``Invocations`` series of an endpoint: one per variant (EndpointName, VariantName, from
    DescribeEndpoint's ProductionVariants) and one per inference component on it (InferenceComponentName)."""
    name = str(endpoint["EndpointName"])
    series = [
        [{"Name": "EndpointName", "Value": name}, {"Name": "VariantName", "Value": str(v["VariantName"])}]
        for v in endpoint.get("ProductionVariants") or []
        if v.get("VariantName")
    ]
    return series + [[{"Name": "InferenceComponentName", "Value": c}] for c in components]


def _datapoints(
    cloudwatch: Any, dimensions: list[dict[str, str]], start: datetime, end: datetime, period: int
) -> list[dict[str, Any]]:
    answer = cloudwatch.get_metric_statistics(
        Namespace=NAMESPACE,
        MetricName=INVOCATIONS,
        Dimensions=dimensions,
        StartTime=start,
        EndTime=end,
        Period=period,
        Statistics=["Sum"],
    )
    return [p for p in answer.get("Datapoints", []) if float(p.get("Sum", 0)) > 0]


def calls_in(cloudwatch: Any, series: list[list[dict[str, str]]], now: datetime, window: timedelta) -> float:
    """The calls over ``window`` up to ``now``, summed over the series. Period: the window rounded up to whole
    minutes (GetMetricStatistics' Period is a multiple of 60), so each series is one or two datapoints."""
    period = max(60, int(-(-window.total_seconds() // 60)) * 60)
    return sum(
        float(p["Sum"]) for dims in series for p in _datapoints(cloudwatch, dims, now - window, now, period)
    )


def last_call(cloudwatch: Any, series: list[list[dict[str, str]]], now: datetime) -> datetime | None:
    """The start of the last 5-minute period with a call within LOOKBACK (None: no call in it)."""
    stamps = [
        cost.as_utc(p["Timestamp"])
        for dims in series
        for p in _datapoints(cloudwatch, dims, now - LOOKBACK, now, LOOKBACK_PERIOD_S)
    ]
    return max((s for s in stamps if s is not None), default=None)
