"""What each adapter on a shared base costs, for `hfpipe endpoints`: the endpoint's fleet cost split over the
adapter components on it by hfpipe.core.adapter_cost's rule (docs/adapters.md).

The adapters are read from the endpoint (ListInferenceComponents, then each component's
``Specification.BaseInferenceComponentName``), never from a record. The split is the rule's equal shares:
the invocation counts per component (CloudWatch's ``Invocations`` by ``InferenceComponentName``) are not
read yet.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hfpipe.core import adapter_cost
from hfpipe.core.adapter_deploy import components_on


@dataclass(frozen=True)
class AdapterShare:
    """One adapter component of an endpoint and its share of the fleet's cost."""

    component: str
    base: str
    rule: str
    usd_per_hour: float | None


def adapter_shares(sagemaker: Any, endpoint: str, fleet_per_hour: float | None) -> list[AdapterShare]:
    """Each adapter component on ``endpoint`` with its equal share of ``fleet_per_hour`` (None: the price is
    not known); [] when the endpoint holds no adapter."""
    adapters = [c for c in components_on(sagemaker, endpoint) if c.base is not None]
    if not adapters:
        return []
    if fleet_per_hour is None:
        return [AdapterShare(c.name, str(c.base), adapter_cost.EQUAL, None) for c in adapters]
    split = adapter_cost.split_cost(fleet_per_hour, [c.name for c in adapters])
    return [AdapterShare(c.name, str(c.base), split.rule, split.shares[c.name]) for c in adapters]


def print_shares(console: Any, endpoints: list[tuple[str, tuple[AdapterShare, ...]]]) -> None:
    """One line per adapter of each endpoint that holds adapters: its share and the rule."""
    for endpoint, shares in endpoints:
        for share in shares:
            cost = "price unknown" if share.usd_per_hour is None else f"{share.usd_per_hour:.4g} USD/h"
            console.print(
                f"{endpoint}: adapter {share.component} on {share.base}: {cost} "
                f"({share.rule} shares of the fleet's cost, of {len(shares)} adapters)"
            )
