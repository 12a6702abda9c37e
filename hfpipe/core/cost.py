"""Cost of a training job: billable seconds x instances x price."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any


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
