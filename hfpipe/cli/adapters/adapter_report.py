"""Where an adapter run is served and what its share of the serving costs, for `hfpipe report` (docs/adapters.md).

An adapter run (its plan names ``adapter_base_model``) gets no endpoint of its own: it is served on its
environment's shared base, as that environment was deployed: the SSM parameter ``/hfpipe/<env>/shared-base``
its Pipeline stack writes (cdk.json's ``shared_base`` when it was deployed, or what `hfpipe local up --set`
gave a local world), read with hfpipe.core.adapters.shared_base's own validation. The checkout's cdk.json is read only
where the environment cannot say (deployed before it published the parameter, or its parameters not
readable), and the line says so. The report states the rule, with the figures of that base, never a
measurement: the base fleet's USD per hour (``copies`` instances of its instance type, hfpipe.core.prices), the
equal share each adapter pays when the base holds its ``max_adapters``, and what one endpoint of its own would
cost instead (hfpipe.core.adapters.adapter_cost.shared_vs_separate). What it pays in fact is the split by invocations
that `hfpipe endpoints` shows; the adapter components serving the run's model now are listed (``served``) with
the tokens they served and their USD per million tokens (hfpipe.cli.deploy.endpoint_cost). An adapter trained on another model than the base serves is said to be refused
there (hfpipe.core.adapters.adapter_rules.base_model_problem).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hfpipe import contract
from hfpipe.core.adapters import adapter_cost, adapter_rules
from hfpipe.core.adapters.adapter_deploy import BaseNames, components_on
from hfpipe.core.adapters.shared_base import SharedBase, SharedBaseError, parse_shared_base


@dataclass(frozen=True)
class Found:
    """An environment's shared base (None: it has none, or it was not found) and where that was read:
    ``deployed`` when the environment itself said it, False for the checkout's cdk.json."""

    base: SharedBase | None
    source: str
    deployed: bool


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


def _from_checkout(env: str, why: str, root: Path | None) -> Found:
    """cdk.json's shared base, where the environment cannot say (``why``): the line says it is not the deployed one."""
    base, source = declared_shared_base(env, root)
    return Found(base, f"{why}; {'read from ' if base else ''}{source}", deployed=False)


def environment_shared_base(ssm: Any, env: str, root: Path | None = None) -> Found:
    """The shared base environment ``env`` serves adapters on as deployed: its SSM parameter shared-base. Its
    absence where the pipeline's own parameters are there means no shared base; cdk.json is read only where
    the environment cannot say (``_from_checkout``)."""
    import botocore.exceptions

    from hfpipe.cli.aws import aws_error

    keys = (contract.SSM_SHARED_BASE, contract.SSM_ADAPTER_STATE_MACHINE_ARN, contract.SSM_STATE_MACHINE_ARN)
    names = {key: contract.ssm_parameter_name(env, key) for key in keys}
    try:
        answer = ssm.get_parameters(Names=list(names.values()))
    except (botocore.exceptions.ClientError, botocore.exceptions.BotoCoreError) as exc:
        return _from_checkout(env, str(aws_error(exc, f"reading environment {env!r}'s SSM parameters")), root)
    found = {p["Name"]: p["Value"] for p in answer.get("Parameters", [])}
    parameter = names[contract.SSM_SHARED_BASE]
    if parameter in found:
        try:
            base = parse_shared_base(json.loads(found[parameter]), f"SSM parameter {parameter}")
        except (ValueError, SharedBaseError) as exc:
            return Found(None, f"SSM parameter {parameter} not read ({exc})", deployed=True)
        return Found(base, f"environment {env!r} as deployed (SSM parameter {parameter})", deployed=True)
    if names[contract.SSM_ADAPTER_STATE_MACHINE_ARN] in found:
        why = f"environment {env!r} publishes no {parameter} (deployed before its Pipeline stack wrote it)"
        return _from_checkout(env, why, root)
    if names[contract.SSM_STATE_MACHINE_ARN] in found:
        return Found(
            None,
            # No command suggested: `hfpipe local`'s own environment is not one of cdk.json's to deploy.
            f"environment {env!r} as deployed has no shared base (its stacks wrote no SSM parameter {parameter}: "
            "its settings had no shared_base)",
            deployed=True,
        )
    return _from_checkout(env, f"no SSM parameters of environment {env!r} found under /hfpipe/{env}/", root)


def adapter_serving(env: str, recipe: str, trained_on: str, found: Found) -> dict[str, Any]:
    """The report's ``adapter`` for a run of ``recipe``: the base it was trained on, the environment's shared
    base (or why none) and where that was read, and the cost rule's figures for it (None where the price is
    not known)."""
    record: dict[str, Any] = {
        "base_model": trained_on,
        "env": env,
        "shared_base": None,
        "source": found.source,
        "deployed": found.deployed,
    }
    base = found.base
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
    # A base read from cdk.json is what the checkout declares, which the deployed one may not be: said so.
    declared = "" if adapter.get("deployed", True) else f" (as cdk.json declares it: {adapter.get('source')})"
    if adapter.get("refused"):
        return f"{trained}; not servable on {where}{declared}: {adapter['refused']}"
    now = "".join(
        f"; served now by {s['component']}: {s['tokens']} tokens, "
        + (
            "no token recorded"
            if s["usd_per_million_tokens"] is None
            else f"{s['usd_per_million_tokens']:.4g} USD"
        )
        + " per million tokens"
        for s in adapter.get("served") or []
    )
    return (
        f"{trained}; served on {where}{declared} once deployed: the fleet's cost split by invocations over "
        f"the last {adapter_cost.COUNTED_HOURS} h (`hfpipe endpoints --env {env}`), equal shares without calls: "
        f"{_usd(adapter.get('full_base_share_usd_per_hour'))} with its {base['max_adapters']} adapters "
        f"(max_adapters), against {_usd(adapter.get('own_endpoint_usd_per_hour'))} for an endpoint of its own"
        f"{now}"
    )


def of_plan(
    plan: Any, clients: Any, root: Path | None = None, artifact: str | None = None
) -> dict[str, Any] | None:
    """The report's ``adapter`` of an adapter run's plan (None: the run is not an adapter's), with the shared
    base of the environment it ran in, read with ``clients`` (hfpipe.cli.aws.Clients of that environment), and
    the adapter components that serve its ``artifact`` now with their cost per million tokens (``served``)."""
    if plan is None or not plan.adapter_base_model:
        return None
    found = environment_shared_base(clients.ssm, plan.env, root)
    record = adapter_serving(plan.env, plan.recipe_name, plan.adapter_base_model, found)
    if found.base is not None and artifact:
        record["served"] = served(clients, plan.env, artifact)
    return record


def served(clients: Any, env: str, artifact: str) -> list[dict[str, Any]]:
    """The adapter components on ``env``'s shared base whose artifact (``Container.ArtifactUrl``) is the run's
    model, each with the tokens it served in `hfpipe endpoints`' window and its cost per million tokens by
    them (hfpipe.cli.deploy.endpoint_cost); [] when none serves it, or the base cannot be read."""
    from hfpipe.cli.deploy import endpoints

    base = BaseNames.of(env).endpoint
    try:
        names = [
            c["InferenceComponentName"]
            for c in (
                clients.sagemaker.describe_inference_component(InferenceComponentName=s.name)
                for s in components_on(clients.sagemaker, base)
                if s.base is not None
            )
            if ((c.get("Specification") or {}).get("Container") or {}).get("ArtifactUrl") == artifact
        ]
    except Exception:  # the report must not fail because the base is unreadable
        return []
    if not names:
        return []
    info = endpoints.endpoint_of(
        clients.sagemaker, base, env, clients.cloudwatch, clients.client("application-autoscaling")
    )
    costs = {t.component: t for t in (info.tokens if info else ())}
    return [
        {
            "component": name,
            "tokens": costs[name].tokens if name in costs else 0,
            "usd": costs[name].usd if name in costs else None,
            "usd_per_million_tokens": costs[name].usd_per_million_tokens if name in costs else None,
        }
        for name in names
    ]
