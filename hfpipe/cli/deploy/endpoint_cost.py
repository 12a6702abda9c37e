"""What an endpoint cost, for `hfpipe endpoints` and `hfpipe report`: its fleet priced per period at what ran
(hfpipe.core.fleet_cost, from DescribeEndpoint, its deployment record and its scaling activities), and the cost
per million tokens of it and of each inference component on it, from the tokens `hfpipe invoke` records
(``record_tokens``) over the fleet's cost for the same window (docs/deploy.md, "What an endpoint costs").

The tokens are the OpenAI answer's ``usage`` (vLLM's UsageInfo: ``prompt_tokens``, ``completion_tokens``), put
by `hfpipe invoke` as two CloudWatch metrics in the project's namespace (``fleet_cost.TOKENS_NAMESPACE``), by
``EndpointName`` and, for a call to an inference component, ``InferenceComponentName`` too: SageMaker publishes
no token metric (its ``AWS/SageMaker`` invocation metrics count calls and latency) and the container's own
token counters are not exported off the instance, so what a caller other than `hfpipe invoke` sends is not
counted: ``TokenCost.calls`` says how many calls carried tokens, which a reader compares with SageMaker's
``Invocations`` of the same window (for an adapter, its share's line in `hfpipe endpoints` counts them).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from hfpipe.cli import aws
from hfpipe.core import cost, fleet_cost
from hfpipe.core.adapters import adapter_cost

#: The window whose tokens and cost give the figure: hfpipe.core.adapters.adapter_cost.counted_period (the
#: last 24 hours, or since the endpoint was created when that is later), as the adapters' shares.
counted_period = adapter_cost.counted_period


@dataclass(frozen=True)
class TokenCost:
    """The tokens one tenant served in the window, its share of the fleet's cost then and per million tokens.
    ``component`` None: the endpoint as a whole."""

    component: str | None
    prompt_tokens: int
    completion_tokens: int
    calls: int
    usd: float | None
    usd_per_million_tokens: float | None
    period_start: str
    period_end: str

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


def periods(
    sagemaker: Any, autoscaling: Any, serving: Any, count_now: int, record: Any, base: str | None
) -> tuple[list[fleet_cost.Period], str | None]:
    """The endpoint's periods (hfpipe.core.fleet_cost.history) and a note when its scaling activities could
    not be read (then its live fleet is priced at its count now). ``base``: the base component of an
    inference-component endpoint, whose copies are its instances; else each variant's activities count."""
    instance_type, initial = serving.live.fleet if serving.live else (None, 0)
    live = fleet_cost.Fleet(instance_type, count_now, initial or count_now)
    resources = (
        [f"inference-component/{base}"]
        if base
        else [
            f"endpoint/{serving.endpoint}/variant/{v.name}"
            for v in (serving.live.variants if serving.live else ())
        ]
    )
    activities: list[dict[str, Any]] = []
    warning = None
    if autoscaling is not None:
        try:
            if not base:  # a variant has activities only while autoscaled (DescribeScalableTargets)
                resources = _registered(autoscaling, resources)
            for resource in resources:
                activities += fleet_cost.scaling_activities(autoscaling, resource)
        except Exception as exc:
            activities = []
            warning = (
                f"{aws.aws_error(exc, 'reading its scaling activities')}; its cost so far prices its live fleet "
                "at its count now"
            )
    created = cost.as_utc(serving.creation_time)
    assert created is not None
    previous = fleet_cost.previous_fleet(sagemaker, serving.config, record)
    pending = fleet_cost.pending_fleet(serving.pending_summary)
    changed = None
    if base and activities:
        try:  # when its copies last changed (a wake by UpdateInferenceComponentRuntimeConfig is no activity)
            described = sagemaker.describe_inference_component(InferenceComponentName=base)
            changed = cost.as_utc(described.get("LastModifiedTime"))
        except Exception:
            changed = None
    return fleet_cost.history(created, live, activities, previous, pending, changed), warning


def _registered(autoscaling: Any, resources: list[str]) -> list[str]:
    """The variants of ``resources`` registered as scalable targets (DescribeScalableTargets' ResourceIds)."""
    if not resources:
        return []
    answer = autoscaling.describe_scalable_targets(ServiceNamespace="sagemaker", ResourceIds=resources)
    return [t["ResourceId"] for t in answer.get("ScalableTargets", [])]


def periods_json(found: list[fleet_cost.Period], priced: fleet_cost.FleetCost) -> tuple[dict[str, Any], ...]:
    """The periods as `hfpipe endpoints --json` shows them."""
    return tuple(
        {
            "start": p.start.isoformat(),
            "end": p.end.isoformat() if p.end else None,
            "instance_type": p.instance_type,
            "instance_count": p.count,
            "source": p.source,
            "usd": usd,
        }
        for p, usd in zip(found, priced.usd_by_period, strict=True)
    )


def record_tokens(where: Any, endpoint: str, component: str | None, answer: Any) -> tuple[int, int] | None:
    """Put one answer's tokens (its OpenAI ``usage``) in CloudWatch (``where``: a CloudWatch client, or the
    command's clients); the tokens put, None for an answer without usage. What fails is said on stderr and
    does not fail the call."""
    usage = fleet_cost.usage_of(answer)
    cloudwatch = getattr(where, "cloudwatch", where)
    if usage is None or not hasattr(cloudwatch, "put_metric_data"):  # nowhere to put it
        return None
    dimensions = [{"Name": fleet_cost.ENDPOINT_DIMENSION, "Value": endpoint}]
    if component:
        dimensions.append({"Name": fleet_cost.COMPONENT_DIMENSION, "Value": component})
    try:
        cloudwatch.put_metric_data(
            Namespace=fleet_cost.TOKENS_NAMESPACE,
            MetricData=[
                {"MetricName": name, "Dimensions": dimensions, "Value": float(value), "Unit": "Count"}
                for name, value in zip(
                    (fleet_cost.PROMPT_TOKENS, fleet_cost.COMPLETION_TOKENS), usage, strict=True
                )
            ],
        )
    except Exception as exc:
        print(
            f"warning: {aws.aws_error(exc, 'recording the tokens of ' + endpoint)}; not counted",
            file=sys.stderr,
        )
        return None
    return usage


def token_counts(
    cloudwatch: Any, endpoint: str, components: list[str | None], start: datetime, end: datetime
) -> dict[str | None, tuple[int, int, int]]:
    """Each tenant's (prompt tokens, completion tokens, calls counted) from ``start`` to ``end`` (GetMetricData's
    Sum and SampleCount; a component None: calls naming none)."""
    period = max(60, -(-int((end - start).total_seconds()) // 60) * 60)
    queries, keys = [], []
    for i, component in enumerate(components):
        dimensions = [{"Name": fleet_cost.ENDPOINT_DIMENSION, "Value": endpoint}]
        if component:
            dimensions.append({"Name": fleet_cost.COMPONENT_DIMENSION, "Value": component})
        for j, (metric, stat) in enumerate(
            (
                (fleet_cost.PROMPT_TOKENS, "Sum"),
                (fleet_cost.COMPLETION_TOKENS, "Sum"),
                (fleet_cost.PROMPT_TOKENS, "SampleCount"),
            )
        ):
            queries.append(
                {
                    "Id": f"t{i}_{j}",
                    "MetricStat": {
                        "Metric": {
                            "Namespace": fleet_cost.TOKENS_NAMESPACE,
                            "MetricName": metric,
                            "Dimensions": dimensions,
                        },
                        "Period": period,
                        "Stat": stat,
                    },
                }
            )
            keys.append(f"t{i}_{j}")
    sums = dict.fromkeys(keys, 0.0)
    for page in cloudwatch.get_paginator("get_metric_data").paginate(
        MetricDataQueries=queries, StartTime=start, EndTime=end
    ):
        for result in page.get("MetricDataResults", []):
            sums[result["Id"]] += sum(result.get("Values", []))
    return {
        component: (round(sums[f"t{i}_0"]), round(sums[f"t{i}_1"]), round(sums[f"t{i}_2"]))
        for i, component in enumerate(components)
    }


def token_costs(
    window_usd: float | None,
    counts: dict[str | None, tuple[int, int, int]],
    window: tuple[datetime, datetime],
) -> list[TokenCost]:
    """The endpoint's figure (``component`` None: all its tokens over its fleet's cost in the window), then each
    component's that served tokens: its share of that cost by its tokens, over its tokens."""
    total = sum(p + c for p, c, _ in counts.values())
    start, end = (t.isoformat() for t in window)
    per_million = fleet_cost.per_million_tokens(window_usd, total)
    found = [
        TokenCost(
            None,
            sum(p for p, _, _ in counts.values()),
            sum(c for _, c, _ in counts.values()),
            sum(n for _, _, n in counts.values()),
            window_usd,
            per_million,
            start,
            end,
        )
    ]
    for component, (prompt, completion, calls) in counts.items():
        if component is None or not prompt + completion:
            continue
        share = None if window_usd is None else round(window_usd * (prompt + completion) / total, 6)
        found.append(TokenCost(component, prompt, completion, calls, share, per_million, start, end))
    return found


def tokens_of(
    cloudwatch: Any,
    endpoint: str,
    components: list[str],
    found: list[fleet_cost.Period],
    now: datetime,
    created: datetime,
) -> tuple[TokenCost, ...]:
    """The endpoint's cost per million tokens and each component's (``token_costs``) over the counted window;
    () with a warning when the tokens cannot be read, or without a client."""
    if cloudwatch is None:
        return ()
    window = counted_period(now, created)
    tenants: list[str | None] = [*components] if components else [None]
    try:
        counts = token_counts(cloudwatch, endpoint, tenants, *window)
    except Exception as exc:
        print(
            f"warning: {aws.aws_error(exc, 'reading the tokens of ' + endpoint)}; no cost per token",
            file=sys.stderr,
        )
        return ()
    if not components and not any(p + c for p, c, _ in counts.values()):
        return ()  # an endpoint of one model that served no token (not an LLM, or not called): nothing to say
    return tuple(token_costs(fleet_cost.price(found, now, window).usd, counts, window))


def cost_of(
    clients: tuple[Any, Any, Any],
    serving: Any,
    count_now: int,
    record: Any,
    components: list[str],
    base: str | None,
    now: datetime,
) -> tuple[float | None, tuple[dict[str, Any], ...], tuple[TokenCost, ...], str | None]:
    """An endpoint's cost so far priced per period, its periods as --json shows them, its tokens' cost and a
    note on what could not be read; ``clients``: SageMaker, Application Auto Scaling, CloudWatch (None: not read).
    Nothing without a CreationTime."""
    sagemaker, autoscaling, cloudwatch = clients
    created = cost.as_utc(serving.creation_time)
    if created is None:
        return None, (), (), None
    found, note = periods(sagemaker, autoscaling, serving, count_now, record, base)
    priced = fleet_cost.price(found, now)
    tokens = tokens_of(cloudwatch, serving.endpoint, components, found, now, created)
    return priced.usd, periods_json(found, priced), tokens, note


def print_tokens(console: Any, endpoints: list[tuple[str, tuple[TokenCost, ...]]]) -> None:
    """Per endpoint: its tokens in the window and its cost per million tokens; per component that served
    tokens, its share by tokens."""
    for endpoint, costs in endpoints:
        for tc in costs:
            usd = "price unknown" if tc.usd is None else f"{tc.usd:.4f} USD"
            figure = (
                "no USD per million tokens"
                if tc.usd_per_million_tokens is None
                else f"{tc.usd_per_million_tokens:.4g} USD per million tokens"
            )
            if tc.component is not None:
                console.print(
                    f"{endpoint}: {tc.component}: {tc.tokens} tokens, {usd} of the fleet by its tokens: {figure}"
                )
            elif not tc.tokens:
                console.print(
                    f"{endpoint}: no tokens recorded from {tc.period_start} to {tc.period_end} (`hfpipe invoke` "
                    f"records its answers'): {figure}; its fleet cost {usd} then"
                )
            else:
                calls = f"{tc.calls} call{'s' if tc.calls != 1 else ''}"
                console.print(
                    f"{endpoint}: {tc.tokens} tokens ({tc.prompt_tokens} prompt + {tc.completion_tokens} completion, "
                    f"{calls} recorded) from {tc.period_start} to {tc.period_end}; its fleet cost {usd} then: {figure}"
                )
