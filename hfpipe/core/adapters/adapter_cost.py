"""What each adapter of a shared base costs: the base fleet's cost split by a stated rule (stdlib only).

The fleet (``copies`` instances of the base's instance type, hfpipe.core.adapters.shared_base) is billed per
instance-hour whether or not an adapter is called (hfpipe.core.cost), and every adapter on it shares its GPUs,
so the rule splits that one bill:

- ``invocations``: when the invocation counts of the adapters over the period are known (CloudWatch's
  ``Invocations`` per inference component), each adapter pays its share of the calls; an adapter nobody
  called pays nothing;
- ``equal``: without counts, or when no adapter was called at all, each adapter present pays the same share.

The base component's own traffic (a call naming the base, not an adapter) is a tenant like an adapter under
the invocations rule: pass it in the counts under the base's name. The shares always add up to the fleet's cost.

The counts are SageMaker's ``Invocations`` metric in the ``AWS/SageMaker`` namespace with the one dimension
``InferenceComponentName`` ("Filters inference component invocation metrics", Amazon SageMaker AI Developer
Guide, "SageMaker AI endpoint invocation metrics",
https://docs.aws.amazon.com/sagemaker/latest/dg/monitoring-cloudwatch.html), summed over ``counted_period``:
the last ``COUNTED_HOURS`` hours, or since the endpoint was created when that is later. `hfpipe endpoints`
reads them; local mode publishes them for every call routed to a component.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from hfpipe.core.cost import endpoint_price_per_hour

EQUAL, INVOCATIONS = "equal", "invocations"
#: Where SageMaker counts the calls to each inference component (see the module's docstring).
METRIC_NAMESPACE = "AWS/SageMaker"
INVOCATIONS_METRIC = "Invocations"
COMPONENT_DIMENSION = "InferenceComponentName"
#: The calls of this many hours before now decide the split (a day: every hour of a daily traffic pattern).
COUNTED_HOURS = 24


def counted_period(now: datetime, since: datetime | None = None) -> tuple[datetime, datetime]:
    """The (start, end) whose invocations decide the split: the last ``COUNTED_HOURS`` hours up to ``now``, or
    from ``since`` (the endpoint's creation) when that is later; in whole seconds, CloudWatch's resolution (the
    end rounded up, so a call made in ``now``'s second counts)."""
    end = now.replace(microsecond=0) + timedelta(seconds=1 if now.microsecond else 0)
    start = end - timedelta(hours=COUNTED_HOURS)
    if since is not None and since.replace(microsecond=0) > start:
        start = min(since.replace(microsecond=0), end - timedelta(seconds=1))
    return start, end


@dataclass(frozen=True)
class Split:
    """The fleet's cost per hour shared out: the rule used and each tenant's USD per hour."""

    rule: str
    fleet_per_hour: float
    shares: dict[str, float]


def split_cost(
    fleet_per_hour: float, adapters: Sequence[str], invocations: Mapping[str, int] | None = None
) -> Split:
    """The fleet's ``fleet_per_hour`` split over ``adapters``: by ``invocations`` when any tenant was called,
    else in equal shares (ValueError for a negative count, or no tenant at all)."""
    if invocations and any(count < 0 for count in invocations.values()):
        raise ValueError(f"invocations: {dict(invocations)!r}; accepted: counts >= 0")
    tenants = sorted({*adapters, *(invocations or {})})
    if not tenants:
        raise ValueError("adapters: none; accepted: at least one adapter on the base to split its cost over")
    total = sum((invocations or {}).values())
    if total:
        counts = invocations or {}
        shares = {name: fleet_per_hour * counts.get(name, 0) / total for name in tenants}
        return Split(INVOCATIONS, fleet_per_hour, shares)
    return Split(EQUAL, fleet_per_hour, {name: fleet_per_hour / len(tenants) for name in tenants})


@dataclass(frozen=True)
class Comparison:
    """N adapters on one shared fleet against N endpoints of their own, USD per hour (None: price unknown)."""

    adapters: int
    shared_per_hour: float | None
    per_adapter_per_hour: float | None
    separate_per_hour: float | None

    @property
    def own_endpoint_per_hour(self) -> float | None:
        """What one adapter's endpoint of its own costs (``copies`` instances serving its merged model)."""
        return None if self.separate_per_hour is None else self.separate_per_hour / self.adapters

    @property
    def saving_per_hour(self) -> float | None:
        if self.shared_per_hour is None or self.separate_per_hour is None:
            return None
        return self.separate_per_hour - self.shared_per_hour


def shared_vs_separate(instance_type: str, adapters: int, copies: int = 1) -> Comparison:
    """``adapters`` fine-tunes on one base fleet of ``copies`` instances, against each on an endpoint of
    ``copies`` instances of its own (a merged model per endpoint), at the on-demand price (hfpipe.core.prices)."""
    fleet = endpoint_price_per_hour(instance_type, copies)
    if fleet is None:
        return Comparison(adapters, None, None, None)
    return Comparison(adapters, fleet, fleet / adapters, fleet * adapters)
