"""What running SageMaker resources cost: the price of an endpoint per hour and what it has cost so far.

Real-time endpoints are billed per instance-hour for as long as they exist, whether or not they are used;
the prices are the on-demand list prices of `hfpipe.core.prices`. The clock starts at the endpoint's
CreationTime, which includes the minutes it spends Creating, so the figure is an upper bound.
"""

from __future__ import annotations

from datetime import datetime

from hfpipe.core import prices


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
