"""What an endpoint's fleet cost, priced per period at the instance type and count it actually had, and what a
token it served cost (docs/deploy.md, "What an endpoint costs"). One rule for `hfpipe endpoints`, `hfpipe
report` and the adapters' shares; the prices are hfpipe.core.prices', the arithmetic hfpipe.core.cost's.

An endpoint bills per instance-hour for every instance it holds, whether or not it is called. What it held
when is read from its sources (``read_history``), each cited where it is read:

- DescribeEndpoint: ``CreationTime``; the live fleet (``EndpointConfigName``, whose config gives the variants'
  ``InstanceType``) with each variant's ``CurrentInstanceCount``; during a blue/green update the new fleet in
  ``PendingDeploymentSummary`` (its ``StartTime``, and per variant ``InstanceType`` and
  ``CurrentInstanceCount``), billed beside the old one until the update ends (botocore's model of SageMaker;
  "the previous endpoint configuration is used until the update completes", UpdateEndpoint);
- the project's deployment record of a named endpoint (hfpipe.core.deploy.deploy_plan.DeploymentRecord:
  ``endpoint_config``, ``previous_endpoint_config``, ``deployed_at``): the fleet before the last update is the
  previous config's (DescribeEndpointConfig), from the endpoint's creation until the record was written, and the
  live one from its config's ``CreationTime`` (Prepare creates it right before UpdateEndpoint), so both are
  priced while the update ran. Only the last update is recorded: earlier fleets are priced as the previous one;
- Application Auto Scaling's scaling activities of the fleet's scalable target (DescribeScalingActivities:
  "descriptive information about the scaling activities ... from the previous six weeks",
  https://docs.aws.amazon.com/sagemaker/latest/dg/endpoint-scaling-query-history.html): the count over time of
  an autoscaled variant (``endpoint/NAME/variant/VARIANT``) or of a shared base's copies
  (``inference-component/NAME``, one copy per instance: hfpipe.core.adapters.shared_base), scale to zero
  included. A Successful activity's ``Description`` ends in the new count ("Setting desired instance count to
  2.", the page's example form; for an inference component's copies the same form is assumed, not confirmed);
  a scale-out bills from its ``StartTime`` (instances bill while they start), a scale-in from its ``EndTime``;
  an activity still InProgress counts once it has succeeded.

SageMaker's CloudWatch metrics (``AWS/SageMaker``) count invocations, not instances, so no metric says the
count over time; without activities the live fleet is priced at its count now for its whole period.

Cost per million tokens: the tokens each endpoint or inference component served (prompt and completion, the
vLLM OpenAI server's ``usage.prompt_tokens`` and ``usage.completion_tokens``: vllm/entrypoints/openai/protocol.py,
``UsageInfo``) as `hfpipe invoke` records them in CloudWatch (``TOKENS_NAMESPACE``; SageMaker publishes no
token metric and the container's own counters are not exported), over the fleet's cost for the same window.
An adapter's share of its base's cost is by the tokens it served, so each token on one base costs the same.

Stdlib only: the command imports it, and clients are passed in.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from hfpipe.core.cost import as_utc, cost_usd
from hfpipe.core.prices import price_per_hour

#: Where `hfpipe invoke` puts the tokens of each answer (the project's own namespace: AWS publishes none).
TOKENS_NAMESPACE = "hfpipe-tokens"
PROMPT_TOKENS, COMPLETION_TOKENS = "PromptTokens", "CompletionTokens"
ENDPOINT_DIMENSION, COMPONENT_DIMENSION = "EndpointName", "InferenceComponentName"
_COUNT = re.compile(r"([0-9]+)\.?\s*\Z")


@dataclass(frozen=True)
class Period:
    """``count`` instances of ``instance_type`` from ``start`` to ``end`` (None: still running), and the source
    that said so."""

    start: datetime
    end: datetime | None
    instance_type: str | None
    count: int
    source: str


@dataclass(frozen=True)
class FleetCost:
    """The periods priced: USD in all (None: a period with instances has no known price) and per period."""

    usd: float | None
    periods: tuple[Period, ...]
    usd_by_period: tuple[float | None, ...]


def _clip(period: Period, now: datetime, window: tuple[datetime, datetime] | None) -> float:
    """The seconds of ``period`` up to ``now`` (and inside ``window`` when given)."""
    start, end = period.start, period.end or now
    end = min(end, now)
    if window is not None:
        start, end = max(start, window[0]), min(end, window[1])
    return max(0.0, (end - start).total_seconds())


def price(
    periods: Sequence[Period], now: datetime, window: tuple[datetime, datetime] | None = None
) -> FleetCost:
    """Each period at its type and count for its seconds (inside ``window`` when given), summed: periods that
    overlap (the two fleets of a blue/green update) are each billed."""
    usd: list[float | None] = []
    for period in periods:
        seconds = _clip(period, now, window)
        if period.count == 0 or seconds == 0:
            usd.append(0.0)
            continue
        per_hour = price_per_hour(period.instance_type) if period.instance_type else None
        usd.append(cost_usd(per_hour, period.count, seconds))
    total = None if any(u is None for u in usd) else round(sum(u or 0.0 for u in usd), 4)
    return FleetCost(total, tuple(periods), tuple(usd))


def activity_count(activity: Mapping[str, Any]) -> int | None:
    """The count a Successful scaling activity set (the number its ``Description`` ends in); None otherwise."""
    if activity.get("StatusCode") != "Successful":
        return None
    match = _COUNT.search(str(activity.get("Description") or ""))
    return int(match.group(1)) if match else None


def counted(
    start: datetime,
    instance_type: str | None,
    initial: int,
    activities: Sequence[Mapping[str, Any]],
    source: str,
) -> list[Period]:
    """One fleet from ``start`` on, at ``initial`` instances until the first scaling activity after ``start``
    that changed it, then at each activity's count: a scale-out from its StartTime, a scale-in from its
    EndTime (module docstring)."""
    changes: list[tuple[datetime, int]] = []
    for activity in activities:
        count, began = activity_count(activity), as_utc(activity.get("StartTime"))
        if count is None or began is None or began < start:
            continue
        changes.append((began, count))
    changes.sort(key=lambda change: change[0])
    periods, since, now_count = [], start, initial
    for began, count in changes:
        ended = next(
            (as_utc(a.get("EndTime")) for a in activities if as_utc(a.get("StartTime")) == began), None
        )
        at = began if count > now_count else (ended or began)
        if count == now_count:
            continue
        if at > since:
            periods.append(Period(since, at, instance_type, now_count, source))
        since, now_count = max(since, at), count
    periods.append(Period(since, None, instance_type, now_count, source))
    return periods


@dataclass(frozen=True)
class Fleet:
    """One fleet as its config and the endpoint describe it: its type, its count now and its first count."""

    instance_type: str | None
    count: int
    initial: int | None = None


def history(
    created: datetime,
    live: Fleet,
    activities: Sequence[Mapping[str, Any]] = (),
    previous: tuple[Fleet, datetime, datetime] | None = None,
    pending: tuple[Fleet, datetime] | None = None,
    changed: datetime | None = None,
) -> list[Period]:
    """The periods of an endpoint created at ``created``: the fleet before its last update (``previous``: that
    fleet, the update's start and its end) until the update ended, the live fleet from the update's start (else
    from ``created``) counted by its scaling ``activities`` when there are any (else at its count now), and
    the new fleet of an update under way (``pending``: that fleet and its StartTime) from its start on. A count
    now that differs from the activities' last (a base woken by UpdateInferenceComponentRuntimeConfig, which is
    no scaling activity) holds from ``changed`` (the component's LastModifiedTime) on."""
    periods: list[Period] = []
    live_start = created
    if previous is not None and previous[2] <= created:  # a record older than this endpoint: not its update
        previous = None
    if previous is not None:
        fleet, started, ended = previous
        periods.append(Period(created, ended, fleet.instance_type, fleet.count, "previous config (record)"))
        live_start = max(created, started)
    if activities:
        initial = live.initial if live.initial is not None else live.count
        counts = counted(live_start, live.instance_type, initial, activities, "scaling activities")
        periods += _to_now(counts, live, changed)
    else:
        periods.append(Period(live_start, None, live.instance_type, live.count, "DescribeEndpoint"))
    if pending is not None:
        fleet, started = pending
        periods.append(Period(started, None, fleet.instance_type, fleet.count, "PendingDeploymentSummary"))
    return periods


def _to_now(counts: list[Period], live: Fleet, changed: datetime | None) -> list[Period]:
    """The counted periods, the last one split at ``changed`` when the count now is another."""
    last = counts[-1]
    if last.count == live.count:
        return counts
    at = max(last.start, changed) if changed is not None else last.start
    split = [Period(last.start, at, last.instance_type, last.count, last.source)] if at > last.start else []
    return [*counts[:-1], *split, Period(at, None, live.instance_type, live.count, "DescribeEndpoint")]


def per_million_tokens(usd: float | None, tokens: int) -> float | None:
    """USD per million tokens: ``usd`` over ``tokens`` (None: no price, or no token served)."""
    if usd is None or tokens <= 0:
        return None
    return round(usd * 1_000_000 / tokens, 4)


def usage_of(answer: Any) -> tuple[int, int] | None:
    """(prompt, completion) tokens of an OpenAI answer's ``usage`` (vLLM's UsageInfo); None without one."""
    usage = answer.get("usage") if isinstance(answer, Mapping) else None
    if not isinstance(usage, Mapping):
        return None
    prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
    if not isinstance(prompt, int) or isinstance(prompt, bool) or prompt < 0:
        return None
    completion = completion if isinstance(completion, int) and not isinstance(completion, bool) else 0
    return prompt, max(0, completion)


# --- reading the history from its sources (module docstring) ----------------------------------------------


def scaling_activities(autoscaling: Any, resource_id: str) -> list[dict[str, Any]]:
    """Every scaling activity Application Auto Scaling keeps of ``resource_id`` (DescribeScalingActivities,
    paged by NextToken; botocore's model of application-autoscaling)."""
    found: list[dict[str, Any]] = []
    pages = autoscaling.get_paginator("describe_scaling_activities").paginate(
        ServiceNamespace="sagemaker", ResourceId=resource_id
    )
    for page in pages:
        found += page.get("ScalingActivities", [])
    return found


def config_fleet(sagemaker: Any, name: str) -> tuple[Fleet, datetime | None] | None:
    """An endpoint config's fleet (its first variant's InstanceType, the variants' InitialInstanceCount summed)
    and its CreationTime (DescribeEndpointConfig); None when it cannot be read (deleted)."""
    try:
        config = sagemaker.describe_endpoint_config(EndpointConfigName=name)
    except Exception:
        return None
    variants = config.get("ProductionVariants") or []
    types = [v["InstanceType"] for v in variants if v.get("InstanceType")]
    count = sum(int(v.get("InitialInstanceCount") or 0) for v in variants)
    return Fleet(types[0] if types else None, count), as_utc(config.get("CreationTime"))


def _when(text: Any) -> datetime | None:
    try:
        return as_utc(datetime.fromisoformat(str(text)))
    except ValueError:
        return None


def previous_fleet(
    sagemaker: Any, live_config: str | None, record: Any
) -> tuple[Fleet, datetime, datetime] | None:
    """The fleet before a named endpoint's last update, with the update's start and end: from its deployment
    record (``endpoint_config`` the live one, ``previous_endpoint_config``, ``deployed_at``), the previous
    config's fleet and the live config's CreationTime; None when the record names no update of this config."""
    if record is None or not live_config or record.endpoint_config != live_config:
        return None
    if not record.previous_endpoint_config or record.previous_endpoint_config == live_config:
        return None
    before, now = (
        config_fleet(sagemaker, record.previous_endpoint_config),
        config_fleet(sagemaker, live_config),
    )
    ended = _when(record.deployed_at)
    if before is None or now is None or now[1] is None or ended is None:
        return None
    return before[0], now[1], ended


def pending_fleet(summary: Mapping[str, Any] | None) -> tuple[Fleet, datetime] | None:
    """The new fleet of a blue/green update under way (DescribeEndpoint's ``PendingDeploymentSummary``: its
    ``StartTime``, its variants' ``InstanceType`` and ``DesiredInstanceCount``, else ``CurrentInstanceCount``:
    the instances it starts bill while they start)."""
    started = as_utc((summary or {}).get("StartTime"))
    if not summary or started is None:
        return None
    variants = summary.get("ProductionVariants") or []
    types = [v["InstanceType"] for v in variants if v.get("InstanceType")]
    count = sum(int(v.get("DesiredInstanceCount", v.get("CurrentInstanceCount")) or 0) for v in variants)
    return Fleet(types[0] if types else None, count), started
