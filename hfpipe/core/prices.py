"""On-demand prices (USD per instance-hour, us-east-1, SageMaker training/hosting list prices). Prices
change; the table is a planning aid and the report says which price it used. Costs: `hfpipe.core.cost`."""

from __future__ import annotations

PRICES_USD_PER_HOUR: dict[str, float] = {
    "ml.m5.large": 0.115,
    "ml.m5.xlarge": 0.23,
    "ml.m5.2xlarge": 0.461,
    "ml.c5.xlarge": 0.204,
    "ml.g4dn.xlarge": 0.736,
    "ml.g5.xlarge": 1.408,
    "ml.g5.2xlarge": 1.515,
    "ml.g5.4xlarge": 2.03,
    "ml.g5.12xlarge": 7.09,
    "ml.g5.48xlarge": 20.36,
    "ml.p3.2xlarge": 3.825,
    "ml.p3.8xlarge": 14.688,
    "ml.p3.16xlarge": 28.152,
    "ml.p3dn.24xlarge": 35.894,
    "ml.p4d.24xlarge": 37.688,
}


def price_per_hour(instance_type: str) -> float | None:
    """The on-demand price of one instance-hour, or None when the table does not know the type."""
    return PRICES_USD_PER_HOUR.get(instance_type)
