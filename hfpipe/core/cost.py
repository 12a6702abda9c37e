"""What a training job costs (billable seconds x instances x price per instance-hour), managed spot's savings,
and what an endpoint costs per instance-hour. One rule for the Report Lambda, `hfpipe report`, `hfpipe watch`,
`hfpipe list`, `hfpipe endpoints` and the plan's estimate."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from hfpipe.core.prices import price_per_hour

if TYPE_CHECKING:  # annotations only: the base imports no room (docs/layers.md)
    from hfpipe.core.recipe.typed import Training


def cost_usd(price_per_hour_usd: float | None, instance_count: int, seconds: float) -> float | None:
    """USD for ``instance_count`` instances for ``seconds`` at the given hourly price (None: price unknown)."""
    if price_per_hour_usd is None:
        return None
    return round(float(price_per_hour_usd) * instance_count * float(seconds) / 3600.0, 4)


def estimate_cost(instance_type: str, instance_count: int, seconds: float) -> float | None:
    """USD for ``instance_count`` instances of ``instance_type`` for ``seconds`` (None for an unknown price)."""
    return cost_usd(price_per_hour(instance_type), instance_count, seconds)


def expected_training_cost(training: Training) -> tuple[float | None, float]:
    """(USD, hours) a recipe's resolved ``training`` section expects: ``expected_hours``, else its max run."""
    hours = training["expected_hours"]
    if hours is None:
        hours = training["max_run_seconds"] / 3600.0
    return estimate_cost(training["instance_type"], training["instance_count"], hours * 3600.0), float(hours)


def spot_savings_percent(
    spot: bool, training_seconds: float | None, billable_seconds: float | None
) -> float | None:
    """Managed spot's savings as SageMaker reports them, 1 - billable / training time, in percent.

    None for an on-demand job, and until both times are known.
    """
    if not spot or not training_seconds or billable_seconds is None:
        return None
    return round(100.0 * (1.0 - float(billable_seconds) / float(training_seconds)), 1)


def as_utc(value: Any) -> datetime | None:
    """A datetime with a time zone (naive ones are UTC, as boto3 and moto return them); None otherwise."""
    if not isinstance(value, datetime):
        return None
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def training_cost_so_far(
    job: dict[str, Any], price_per_hour_usd: float | None, planned_count: int | None, now: datetime
) -> float | None:
    """Billable seconds x instances x price: from BillableTimeInSeconds once known, else the running clock.

    The price and planned instance count are the plan's (None when there is none); the job's own count wins."""
    count = int(job.get("ResourceConfig", {}).get("InstanceCount") or planned_count or 1)
    billable = job.get("BillableTimeInSeconds")
    if billable is None:
        start = as_utc(job.get("TrainingStartTime"))
        if start is None:
            return None if price_per_hour_usd is None else 0.0
        end = as_utc(job.get("TrainingEndTime")) or now
        billable = max(0.0, (end - start).total_seconds())
    return cost_usd(price_per_hour_usd, count, billable)


def processing_cost_so_far(
    job: dict[str, Any], price_per_hour_usd: float | None, planned_count: int | None, now: datetime
) -> float | None:
    """A processing job's (the evaluation's) instances x price from ProcessingStartTime to its
    ProcessingEndTime, or now while it runs (DescribeProcessingJob has no billable time: botocore's sagemaker
    service-2.json, DescribeProcessingJobResponse); 0 before it has started."""
    cluster = (job.get("ProcessingResources") or {}).get("ClusterConfig") or {}
    count = int(cluster.get("InstanceCount") or planned_count or 1)
    start = as_utc(job.get("ProcessingStartTime"))
    if start is None:
        return None if price_per_hour_usd is None else 0.0
    end = as_utc(job.get("ProcessingEndTime")) or now
    return cost_usd(price_per_hour_usd, count, max(0.0, (end - start).total_seconds()))


# Real-time endpoints are billed per instance-hour for as long as they exist, whether or not they are used;
# the prices are the on-demand list prices of `hfpipe.core.prices`. The clock starts at the endpoint's
# CreationTime, which includes the minutes it spends Creating, so the figure is an upper bound.


def endpoint_price_per_hour(instance_type: str, instance_count: int) -> float | None:
    """USD per hour for `instance_count` instances of `instance_type` (None when the price is unknown)."""
    price = price_per_hour(instance_type)
    return None if price is None else price * instance_count


def endpoint_cost_so_far(
    instance_type: str, instance_count: int, created: datetime, now: datetime
) -> float | None:
    """USD since `created` at the on-demand price (None when the price is unknown)."""
    per_hour = endpoint_price_per_hour(instance_type, instance_count)
    if per_hour is None:
        return None
    hours = max(0.0, (now - created).total_seconds()) / 3600.0
    return round(per_hour * hours, 4)
