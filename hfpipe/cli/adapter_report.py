"""Where an adapter run is served and what its share of the serving costs, for `hfpipe report` (docs/adapters.md).

An adapter run (its plan names ``adapter_base_model``) gets no endpoint of its own: it is served on its
environment's shared base, the one cdk.json declares (``shared_base``, read from the checkout's cdk.json with
hfpipe.core.shared_base's own validation). The report states the rule, with the figures of that declaration,
never a measurement: the base fleet's USD per hour (``copies`` instances of its instance type,
hfpipe.core.prices), the equal share each adapter pays when the base holds its ``max_adapters``, and what one
endpoint of its own would cost instead (hfpipe.core.adapter_cost.shared_vs_separate). What it pays in fact is
the split by invocations that `hfpipe endpoints` shows. An adapter trained on another model than the base
serves is said to be refused there (hfpipe.core.adapter_rules.base_model_problem).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hfpipe.core import adapter_cost, adapter_rules
from hfpipe.core.adapter_deploy import BaseNames
from hfpipe.core.shared_base import SharedBase, SharedBaseError, parse_shared_base


def declared_shared_base(env: str, root: Path | None = None) -> tuple[SharedBase | None, str]:
    """The shared base cdk.json (in ``root``, else the checkout's) declares for ``env``, and where it was read;
    (None, why) when there is none or it cannot be read."""
    from hfpipe.local.checkout import CHECKOUT_ENV, LocalModeError, cdk_environments, checkout_root

    try:
        root = root or checkout_root()
    except LocalModeError:  # the wheel alone: no cdk.json beside it
        return None, (
            "no hfpipe checkout here to read cdk.json's shared_base from (run it inside the clone that deploys "
            f"{env!r}, or set {CHECKOUT_ENV}=PATH)"
        )
    try:
        entry = cdk_environments(root).get(env)
    except (LocalModeError, OSError, ValueError, KeyError) as exc:
        return None, f"{root / 'cdk.json'} not read ({exc})"
    if not isinstance(entry, dict):
        return None, f"no environment {env!r} in {root / 'cdk.json'}"
    try:
        base = parse_shared_base(entry.get("shared_base"), f"hfpipe:environments.{env}.shared_base")
    except SharedBaseError as exc:
        return None, str(exc)
    if base is None:
        return None, f"{root / 'cdk.json'} declares no shared_base for environment {env!r}"
    return base, str(root / "cdk.json")


def adapter_serving(
    env: str, recipe: str, trained_on: str, base: SharedBase | None, source: str
) -> dict[str, Any]:
    """The report's ``adapter`` for a run of ``recipe``: the base it was trained on, the environment's shared
    base (or why none), and the cost rule's figures for it (None where the price is not known)."""
    record: dict[str, Any] = {"base_model": trained_on, "env": env, "shared_base": None, "source": source}
    if base is None:
        return record
    comparison = adapter_cost.shared_vs_separate(base.instance_type, base.max_adapters, base.copies)
    record.update(
        shared_base={
            "endpoint": BaseNames.of(env).endpoint,
            "base_model": base.base_model,
            "instance_type": base.instance_type,
            "copies": base.copies,
            "max_adapters": base.max_adapters,
        },
        refused=adapter_rules.base_model_problem(recipe, trained_on, base.base_model),
        fleet_usd_per_hour=comparison.shared_per_hour,
        full_base_share_usd_per_hour=comparison.per_adapter_per_hour,
        own_endpoint_usd_per_hour=comparison.own_endpoint_per_hour,
        rule=f"{adapter_cost.INVOCATIONS} over the last {adapter_cost.COUNTED_HOURS} h, else {adapter_cost.EQUAL}",
    )
    return record


def _usd(value: Any) -> str:
    return "price unknown" if value is None else f"{float(value):.4g} USD/h"


def describe(adapter: dict[str, Any]) -> str:
    """The report's line: where the adapter is served and the share the rule gives it."""
    trained = f"trained on {adapter['base_model']}"
    env = adapter.get("env")
    base = adapter.get("shared_base")
    if not base:
        return f"{trained}; not served: {adapter.get('source')} (docs/adapters.md)"
    fleet = f"{base['copies']} x {base['instance_type']}, {_usd(adapter.get('fleet_usd_per_hour'))}"
    where = f"{env}'s shared base {base['endpoint']} ({base['base_model']} on {fleet})"
    if adapter.get("refused"):
        return f"{trained}; not servable on {where}: {adapter['refused']}"
    return (
        f"{trained}; served on {where} once deployed: the fleet's cost split by invocations over the last "
        f"{adapter_cost.COUNTED_HOURS} h (`hfpipe endpoints --env {env}`), equal shares without calls: "
        f"{_usd(adapter.get('full_base_share_usd_per_hour'))} with its {base['max_adapters']} adapters "
        f"(max_adapters), against {_usd(adapter.get('own_endpoint_usd_per_hour'))} for an endpoint of its own"
    )


def of_plan(plan: Any, root: Path | None = None) -> dict[str, Any] | None:
    """The report's ``adapter`` of an adapter run's plan (None: the run is not an adapter's)."""
    if plan is None or not plan.adapter_base_model:
        return None
    base, source = declared_shared_base(plan.env, root)
    return adapter_serving(plan.env, plan.recipe_name, plan.adapter_base_model, base, source)
