"""What each adapter on a shared base costs, for `hfpipe endpoints`: the endpoint's fleet cost split over the
adapter components on it by hfpipe.core.adapters.adapter_cost's rule (docs/adapters.md).

The adapters are read from the endpoint (ListInferenceComponents, then each component's
``Specification.BaseInferenceComponentName``), never from a record. The split is by invocations: each
component's ``Invocations`` (CloudWatch, ``AWS/SageMaker``, dimension ``InferenceComponentName``:
https://docs.aws.amazon.com/sagemaker/latest/dg/monitoring-cloudwatch.html, "SageMaker AI endpoint invocation
metrics") summed over ``adapter_cost.counted_period`` (the last 24 hours, or since the endpoint was created
when that is later) in one GetMetricData call (``cloudwatch:GetMetricData``, the user's own credentials).
The base component's own calls count under its name, a tenant like an adapter. Equal shares when no
component was called in the period, or when the counts cannot be read (a warning says why).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from hfpipe.cli import aws
from hfpipe.core.adapters import adapter_cost
from hfpipe.core.adapters.adapter_deploy import components_on

#: GetMetricData takes at most 500 queries a call.
_QUERIES_PER_CALL = 500


@dataclass(frozen=True)
class AdapterShare:
    """One tenant of an endpoint's fleet (an adapter component, or the base's own calls) and its share."""

    component: str
    base: str
    rule: str
    usd_per_hour: float | None
    #: Its calls in the period (CloudWatch's Sum of Invocations); None: the counts were not read.
    invocations: int | None = None
    #: The period counted, ISO 8601 UTC (None: not read).
    period_start: str | None = None
    period_end: str | None = None
    #: True for the base component's own calls (a call that names the base, not an adapter).
    is_base: bool = False


def invocation_counts(
    cloudwatch: Any, components: list[str], start: datetime, end: datetime
) -> dict[str, int]:
    """Each component's Invocations (Sum) from ``start`` to ``end``: 0 for one with no datapoint (not called)."""
    period = max(60, -(-int((end - start).total_seconds()) // 60) * 60)  # one period: the whole span
    counts = dict.fromkeys(components, 0)
    for first in range(0, len(components), _QUERIES_PER_CALL):
        chunk = components[first : first + _QUERIES_PER_CALL]
        queries = [
            {
                "Id": f"c{i}",
                "MetricStat": {
                    "Metric": {
                        "Namespace": adapter_cost.METRIC_NAMESPACE,
                        "MetricName": adapter_cost.INVOCATIONS_METRIC,
                        "Dimensions": [{"Name": adapter_cost.COMPONENT_DIMENSION, "Value": name}],
                    },
                    "Period": period,
                    "Stat": "Sum",
                },
                "ReturnData": True,
            }
            for i, name in enumerate(chunk)
        ]
        pages = cloudwatch.get_paginator("get_metric_data").paginate(
            MetricDataQueries=queries, StartTime=start, EndTime=end
        )
        for page in pages:
            for result in page.get("MetricDataResults", []):
                name = chunk[int(result["Id"][1:])]
                counts[name] += round(sum(result.get("Values", [])))
    return counts


def adapter_shares(
    sagemaker: Any,
    endpoint: str,
    fleet_per_hour: float | None,
    cloudwatch: Any = None,
    period: tuple[datetime, datetime] | None = None,
) -> list[AdapterShare]:
    """Each adapter component on ``endpoint`` with its share of ``fleet_per_hour`` (None: the price is not
    known) by the invocations ``cloudwatch`` counts over ``period`` (no client or period: equal shares), and
    the base's own share when it was called; [] when the endpoint holds no adapter."""
    found = components_on(sagemaker, endpoint)
    adapters = [c for c in found if c.base is not None]
    if not adapters:
        return []
    names = [c.name for c in adapters]
    bases = sorted({str(c.base) for c in adapters})
    counts = _counts(cloudwatch, endpoint, names + bases, period)
    tenants = {c.name: str(c.base) for c in adapters}
    if counts is not None:  # a base called under its own name is a tenant; one not called pays nothing
        tenants.update({b: b for b in bases if counts.get(b)})
        counts = {name: counts[name] for name in tenants}
    split = adapter_cost.split_cost(fleet_per_hour or 0.0, names, counts)
    start, end = (t.isoformat() for t in period) if period and counts is not None else (None, None)
    return [
        AdapterShare(
            component=name,
            base=base,
            rule=split.rule,
            usd_per_hour=None if fleet_per_hour is None else split.shares[name],
            invocations=None if counts is None else counts[name],
            period_start=start,
            period_end=end,
            is_base=name == base,
        )
        for name, base in tenants.items()
    ]


def _counts(
    cloudwatch: Any, endpoint: str, components: list[str], period: tuple[datetime, datetime] | None
) -> dict[str, int] | None:
    """The components' invocations over ``period``; None (with a warning) when they cannot be read."""
    if cloudwatch is None or period is None:
        return None
    try:
        return invocation_counts(cloudwatch, components, *period)
    except Exception as exc:  # the endpoints are still worth listing, in equal shares
        print(
            f"warning: {aws.aws_error(exc, 'reading the Invocations of ' + endpoint + ' from CloudWatch')}; "
            "its adapters are shown in equal shares",
            file=sys.stderr,
        )
        return None


def _why(share: AdapterShare, shares: tuple[AdapterShare, ...]) -> str:
    """The rule that applied, in words: by invocations (its calls of all), or equal shares (and why)."""
    when = f"{share.period_start} to {share.period_end}"
    if share.rule == adapter_cost.INVOCATIONS:
        calls = sum(s.invocations or 0 for s in shares)
        return f"by invocations: {share.invocations} of {calls} calls from {when}"
    adapters = sum(1 for s in shares if not s.is_base)
    if share.invocations is None:
        return f"equal shares of {adapters} adapters: the invocation counts were not read"
    return f"equal shares of {adapters} adapters: no calls from {when}"


def print_shares(console: Any, endpoints: list[tuple[str, tuple[AdapterShare, ...]]]) -> None:
    """One line per tenant of each endpoint that holds adapters: its share and the rule that gave it."""
    for endpoint, shares in endpoints:
        for share in shares:
            cost = "price unknown" if share.usd_per_hour is None else f"{share.usd_per_hour:.4g} USD/h"
            who = (
                f"base component {share.component}'s own calls"
                if share.is_base
                else f"adapter {share.component} on {share.base}"
            )
            console.print(f"{endpoint}: {who}: {cost} ({_why(share, shares)})")
