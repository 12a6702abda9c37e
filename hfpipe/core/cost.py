"""Cost rules: a training job (billable seconds x instances x price) and an endpoint (per instance-hour)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from hfpipe.core import prices


def as_utc(value: Any) -> datetime | None:
    if not isinstance(value, datetime):
        return None
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def training_cost_so_far(job: dict[str, Any], plan: dict[str, Any], now: datetime) -> float | None:
    """Billable seconds x instances x price: from BillableTimeInSeconds once known, else the running clock."""
    price = plan.get("price_per_hour_usd")
    if price is None:
        return None
    count = int(job.get("ResourceConfig", {}).get("InstanceCount") or plan.get("instance_count") or 1)
    billable = job.get("BillableTimeInSeconds")
    if billable is None:
        start = as_utc(job.get("TrainingStartTime"))
        if start is None:
            return 0.0
        end = as_utc(job.get("TrainingEndTime")) or now
        billable = max(0.0, (end - start).total_seconds())
    return float(billable) * count * float(price) / 3600.0


# Real-time endpoints are billed per instance-hour for as long as they exist, whether or not they are used;
# the prices are the on-demand list prices of `hfpipe.core.prices`. The clock starts at the endpoint's
# CreationTime, which includes the minutes it spends Creating, so the figure is an upper bound.


def endpoint_price_per_hour(instance_type: str, instance_count: int) -> float | None:
    """USD per hour for `instance_count` instances of `instance_type` (None when the price is unknown)."""
    price = prices.price_per_hour(instance_type)
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
