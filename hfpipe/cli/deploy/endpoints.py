"""`hfpipe endpoints`: the endpoints an environment's executions left up, what they cost, and deleting one.

    hfpipe endpoints --env dev [--json]
    hfpipe endpoints delete NAME --env dev [--yes]

An endpoint counts only when it carries the pipeline's tags for this environment (`hfpipe:managed-by` =
hfpipe and `hfpipe:env` = ENV); `delete` refuses any other. Deleting an endpoint also deletes the
endpoint config and model behind it when they carry the same tags (they serve nothing without it), also
when the endpoint itself is already gone (a rerun after an interrupted delete finds them by the pipeline's
names); it deletes a kept endpoint (`hfpipe:keep`) too, since it names it. An endpoint still Creating or
Updating is waited for (--wait-timeout, default 15m). S3 data and model artifacts are never touched.
Named endpoints (`hfpipe deploy`): hfpipe.cli.deploy.named_endpoints.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any

from rich.table import Table

from hfpipe import contract
from hfpipe.cli import aws, faults
from hfpipe.cli.adapters import adapter_endpoints
from hfpipe.cli.aws import HfpipeError, UsageError
from hfpipe.cli.deploy import endpoint_cost, named_endpoints
from hfpipe.cli.parser import Subparsers, aws_options, env_option, listing_command
from hfpipe.cli.run.cleanup import RERUN, delete_all, ready_to_delete, step, wait_timeout, wait_timeout_option
from hfpipe.cli.terminal import with_console
from hfpipe.core import cost, json_text
from hfpipe.core.adapters import adapter_cost, adapter_deploy
from hfpipe.core.adapters.adapter_deploy import components_on
from hfpipe.core.deploy import expiry
from hfpipe.core.deploy.what_serves import what_serves
from hfpipe.core.run.cleanup import Resource, delete, describe_or_none, is_ours, tags_of


@dataclass(frozen=True)
class EndpointInfo:
    """One endpoint of the environment, with its price and cost so far."""

    name: str
    status: str
    execution: str
    recipe: str
    instance_type: str | None
    instance_count: int
    created: datetime | None
    price_per_hour_usd: float | None
    cost_so_far_usd: float | None
    endpoint_config: str | None
    #: A named endpoint's name (cdk.json "endpoints"); None for a run's. The rest: named_endpoints.serving.
    deployment: str | None = None
    serves: str | None = None
    model_version_arn: str | None = None
    updating_to: str | None = None
    mismatch: tuple[str, ...] = ()
    unknown: tuple[str, ...] = ()
    #: An inference-component endpoint's adapters (and its base's own calls, when there were any), each with
    #: its share of the fleet's cost, the rule that gave it and the period counted.
    adapters: tuple[adapter_endpoints.AdapterShare, ...] = ()
    #: The periods its cost so far priced, each at the type and count it had (endpoint_cost.periods).
    cost_periods: tuple[dict[str, Any], ...] = ()
    #: Its tokens and cost per million tokens in the counted window, then each component's (endpoint_cost).
    tokens: tuple[endpoint_cost.TokenCost, ...] = ()
    #: Why its cost so far is less exact than that (its scaling activities could not be read), or None.
    cost_note: str | None = None
    #: When it expires ("in 3 h", "expired", "none (kept)": hfpipe.core.deploy.expiry.expiry_text) and the time
    #: since its last call (CloudWatch's Invocations; "unknown" when not read).
    expires: str = "none"
    idle: str = "unknown"


def running_count(current: int | None, configured: int, variants: Any) -> int:
    """The instances an endpoint runs, and so bills: DescribeEndpoint's current count where it says one,
    else the config's. 0 only for an endpoint whose variants name no model (it hosts inference components):
    that is a shared base scaled to zero (hfpipe.core.adapters.scale_to_zero; "An endpoint can scale to and
    from zero instances only if it hosts inference components"), which costs nothing while there."""
    if current == 0 and variants and all(v.model is None for v in variants):
        return 0
    return current or configured or 1


def describe(
    sagemaker: Any,
    name: str,
    tags: dict[str, str],
    now: datetime,
    cloudwatch: Any = None,
    autoscaling: Any = None,
    record: Any = None,
) -> EndpointInfo:
    """Status, what it serves (read from the endpoint: hfpipe.core.deploy.what_serves), instances (from its live
    config), price and cost so far of one endpoint; a tag naming another version is a ``mismatch``. The cost so
    far prices each period at the fleet it had (endpoint_cost.periods: its scaling activities through
    ``autoscaling``, the last update through its deployment ``record``). An inference-component endpoint's
    adapters get their shares by the invocations ``cloudwatch`` counts over
    hfpipe.core.adapters.adapter_cost.counted_period (without a client: equal shares), and its tokens there
    give its cost per million tokens."""
    serving = what_serves(sagemaker, name)
    if serving is None:
        raise named_endpoints.EndpointGone(f"endpoint {name} no longer exists")
    instance_type, count = serving.live.fleet if serving.live else (None, 0)
    variants = serving.live.variants if serving.live else ()
    # A running endpoint reports its current count per variant; prefer it over the initial one.
    count = running_count(serving.current_instance_count, count, variants)
    created = cost.as_utc(serving.creation_time)
    per_hour = cost.endpoint_price_per_hour(instance_type, count) if instance_type else None
    # Only an endpoint whose variants name no model holds inference components.
    components = components_on(sagemaker, name) if variants and all(v.model is None for v in variants) else []
    base = next((c.name for c in components if c.base is None), None)
    shares = (
        adapter_endpoints.adapter_shares(
            sagemaker, name, per_hour, cloudwatch, adapter_cost.counted_period(now, created)
        )
        if components
        else []
    )
    so_far, periods, tokens, note = endpoint_cost.cost_of(
        (sagemaker, autoscaling, cloudwatch), serving, count, record, [c.name for c in components], base, now
    )
    return EndpointInfo(
        name=name,
        adapters=tuple(shares),
        status=serving.status or "-",
        execution=tags.get(contract.TAG_EXECUTION) or tags.get(contract.TAG_DEPLOY_EXECUTION, "-"),
        recipe=tags.get(contract.TAG_RECIPE, "-"),
        instance_type=instance_type,
        instance_count=count,
        created=created,
        price_per_hour_usd=per_hour,
        cost_so_far_usd=so_far if instance_type else None,
        endpoint_config=serving.config,
        deployment=named_endpoints.deployment_of(tags),
        cost_periods=periods,
        cost_note=note,
        tokens=tokens,
        **named_endpoints.serving(serving, tags),
        expires=expiry.expiry_text(tags, now),
        idle=idle_time(cloudwatch, name, [v.name for v in variants], shares, now, created),
    )


def idle_time(
    cloudwatch: Any,
    name: str,
    variants: list[str],
    shares: list[Any],
    now: datetime,
    created: datetime | None = None,
) -> str:
    """The time since the endpoint's last call: CloudWatch's Invocations per variant and per inference component
    (hfpipe.core.deploy.expiry.last_call); "unknown" without a client or when CloudWatch cannot be read."""
    if cloudwatch is None:
        return expiry.idle_text(None, now, known=False)
    components = sorted({c for s in shares for c in (s.component, s.base)})
    series = expiry.metric_dimensions(
        {"EndpointName": name, "ProductionVariants": [{"VariantName": v} for v in variants]}, components
    )
    try:
        return expiry.idle_text(expiry.last_call(cloudwatch, series, now), now, came_up=created)
    except Exception:  # the listing is still worth showing
        return expiry.idle_text(None, now, known=False)


def endpoint_of(
    sagemaker: Any, name: str, env: str, cloudwatch: Any = None, autoscaling: Any = None
) -> EndpointInfo | None:
    """One endpoint by name when it exists and is this environment's, else None."""
    try:
        arn = sagemaker.describe_endpoint(EndpointName=name)["EndpointArn"]
        tags = tags_of(sagemaker, arn)
        if not is_ours(tags, env):
            return None
        return describe(sagemaker, name, tags, datetime.now(UTC), cloudwatch, autoscaling)
    except Exception:
        return None


def add_to_report(sagemaker: Any, report: dict[str, Any], snap: Any, clients: Any = None) -> None:
    """An execution's report gets its endpoint's status, price and cost so far while it is up, and with
    ``clients`` its cost per million tokens (endpoint_cost) and the periods its cost so far priced."""
    env = snap.plan.env if snap.plan else None
    if not report.get("endpoint_name") or not env:
        return
    if snap.endpoint_status in (None, "deleted", "not created yet"):
        return
    cloudwatch = clients.cloudwatch if clients is not None else None
    autoscaling = clients.client("application-autoscaling") if clients is not None else None
    info = endpoint_of(sagemaker, str(report["endpoint_name"]), env, cloudwatch, autoscaling)
    if info is not None:
        report["endpoint_deleted"] = False
        report["endpoint_status"] = info.status
        report["endpoint_price_per_hour_usd"] = info.price_per_hour_usd
        report["endpoint_cost_so_far_usd"] = info.cost_so_far_usd
        report["endpoint_env"] = env
        report["endpoint_cost_periods"] = list(info.cost_periods)
        whole = next((t for t in info.tokens if t.component is None), None)
        report["endpoint_tokens"] = None if whole is None else asdict(whole)
        report["endpoint_usd_per_million_tokens"] = None if whole is None else whole.usd_per_million_tokens


def by_execution(sagemaker: Any, env: str) -> dict[str, EndpointInfo]:
    """The environment's endpoints by the execution that created them; {} (with a warning) when unreadable."""
    try:
        found = find_endpoints(sagemaker, env)
    except Exception as exc:  # the executions are still worth listing
        print(
            f"warning: {aws.aws_error(exc, 'listing endpoints')}; the endpoint column is empty",
            file=sys.stderr,
        )
        return {}
    return {e.execution: e for e in found}


def execution_records(executions: list[dict[str, Any]], up: dict[str, EndpointInfo]) -> list[dict[str, Any]]:
    """`hfpipe list --json`: each execution with the endpoint it left up (or null)."""

    def when(value: Any) -> str | None:
        return value.isoformat() if isinstance(value, datetime) else None

    return [
        {
            "name": e["name"],
            "status": e["status"],
            "started": when(e.get("startDate")),
            "stopped": when(e.get("stopDate")),
            "endpoint": as_json(up[e["name"]]) if e["name"] in up else None,
        }
        for e in executions
    ]


def find_endpoints(
    sagemaker: Any,
    env: str,
    now: datetime | None = None,
    cloudwatch: Any = None,
    autoscaling: Any = None,
    records: dict[str, Any] | None = None,
) -> list[EndpointInfo]:
    """Every endpoint tagged for this environment by the pipeline, oldest first (``cloudwatch``,
    ``autoscaling``: describe's; ``records``: the named endpoints' deployment records by name)."""
    now = now or datetime.now(UTC)
    found = []
    for page in sagemaker.get_paginator("list_endpoints").paginate():
        for item in page["Endpoints"]:
            tags = tags_of(sagemaker, item["EndpointArn"])
            if is_ours(tags, env):
                record = (records or {}).get(named_endpoints.deployment_of(tags) or "")
                try:
                    found.append(
                        describe(sagemaker, item["EndpointName"], tags, now, cloudwatch, autoscaling, record)
                    )
                except named_endpoints.EndpointGone:
                    continue  # deleted since it was listed: not up
    found.sort(key=lambda e: e.created or datetime.min.replace(tzinfo=UTC))
    return found


def _money(value: float | None, unit: str = "USD") -> str:
    return "-" if value is None else f"{value:.4f} {unit}" if value < 10 else f"{value:.2f} {unit}"


def describe_cost(info: EndpointInfo) -> str:
    """'2.03 USD/h, 0.5075 USD so far' (or what is known of it)."""
    per_hour = "price unknown" if info.price_per_hour_usd is None else f"{info.price_per_hour_usd:.4g} USD/h"
    return f"{per_hour}, {_money(info.cost_so_far_usd)} so far"


def as_json(info: EndpointInfo) -> dict[str, Any]:
    record = asdict(info)
    record["created"] = info.created.isoformat() if info.created else None
    return record


def table(env: str, endpoints: list[EndpointInfo]) -> Table:
    out = Table(title=f"endpoints in {env}", title_justify="left")
    columns = ("name", "status", "serves", "execution", "instances", "USD/h", "so far (USD)", "created (UTC)")
    for column in columns:
        out.add_column(column, justify="right" if column.startswith(("USD", "so far")) else "left")
    for e in endpoints:
        out.add_row(
            e.name,
            e.status,
            named_endpoints.serves_cell(e),
            e.execution,
            f"{e.instance_count} x {e.instance_type or '-'}",
            "-" if e.price_per_hour_usd is None else f"{e.price_per_hour_usd:.4g}",
            "-" if e.cost_so_far_usd is None else f"{e.cost_so_far_usd:.4f}",
            e.created.strftime("%Y-%m-%d %H:%M:%S") if e.created else "-",
        )
    return out


def print_expiry(console: Any, endpoints: list[EndpointInfo], env: str) -> None:
    """Each endpoint's expiry and time since its last call, one line each, under the table (its columns are
    the cost's); then what the environment's reaper does with an expired one."""
    for e in endpoints:
        expires = (
            e.expires if e.expires in ("expired",) or e.expires.startswith("none") else f"expires {e.expires}"
        )
        console.print(f"{e.name}: {expires}; idle {e.idle}", markup=False, soft_wrap=True)
    if any(e.expires == "expired" for e in endpoints):
        console.print(
            f"an expired endpoint is deleted by {env}'s reaper (hourly) once idle for its window, unless it is "
            'the shared base with adapters on it (docs/deploy.md, "Time to live")',
            markup=False,
        )


def _record_json(records: dict[str, Any], e: EndpointInfo) -> dict[str, Any] | None:
    record = records.get(e.deployment or "")
    return None if record is None else dict(record.to_json())


def cmd_endpoints(args: argparse.Namespace, console: Any) -> int:
    """List the environment's endpoints, or delete one of them after asking."""
    aws.validate_env_name(args.env)
    if args.action == "delete" and not args.name:
        raise UsageError(
            f"`endpoints delete` needs the endpoint's name: hfpipe endpoints delete NAME --env {args.env}"
        )
    if args.action == "delete":  # what any failed AWS call of the delete ends with
        faults.state(RERUN)
    clients = aws.clients_for(args)
    # A mistyped or never-deployed environment is an error, not an empty one (as for list/start/report).
    aws.resolve_environment(clients, args.env)
    sagemaker = clients.sagemaker
    if args.action == "list":
        # What each named endpoint's deploys recorded (its last update is priced from it).
        records = named_endpoints.records(clients.ssm, args.env)
        try:
            found = find_endpoints(
                sagemaker,
                args.env,
                cloudwatch=clients.cloudwatch,
                autoscaling=clients.client("application-autoscaling"),
                records=records,
            )
        except Exception as exc:
            raise aws.aws_error(exc, "listing endpoints") from None
        found = [named_endpoints.with_record(e, records, args.env) for e in found]
        if args.json:
            listed = [{**as_json(e), "deployment_record": _record_json(records, e)} for e in found]
            sys.stdout.write(json_text.dumps(listed, indent=2) + "\n")
            return 0
        if not found:
            console.print(f"no endpoints up in environment {args.env!r}")
            return 0
        console.print(table(args.env, found))
        print_expiry(console, found, args.env)
        adapter_endpoints.print_shares(console, [(e.name, e.adapters) for e in found])
        endpoint_cost.print_tokens(console, [(e.name, e.tokens) for e in found])
        for e in found:
            if e.cost_note:
                console.print(f"{e.name}: {e.cost_note}", markup=False)
        named_endpoints.print_records(console, records, args.env)
        named_endpoints.print_mismatches(console, found)
        total = sum(e.price_per_hour_usd or 0.0 for e in found)
        retire = _shared_base_lines(console, found, args.env)
        console.print(
            f"{len(found)} endpoint{'s' if len(found) != 1 else ''} up: {total:.4g} USD/h together; "
            f"delete one with `hfpipe endpoints delete NAME --env {args.env}`{retire}"
        )
        return 0
    return _delete_one(clients, args, console)


def _tagged(
    sagemaker: Any, what: str, describe: Any, arn_key: str, **request: str
) -> tuple[dict[str, Any] | None, dict[str, str]]:
    """``describe(**request)`` (``what``: "model NAME") and the tags of the ARN at ``arn_key``; (None, {})
    when there is no such resource."""
    described = step(f"reading {what}", describe_or_none, call=describe, **request)
    if described is None:
        return None, {}
    tags = step(f"reading the tags of {what}", tags_of, sagemaker=sagemaker, arn=described[arn_key])
    return described, tags


def _leftovers(sagemaker: Any, endpoint: str, config_name: str | None, env: str) -> list[Resource]:
    """The endpoint config and model(s) behind ``endpoint`` that are this environment's: from the endpoint's
    own config when it still exists, else by the pipeline's names (`<base>-config`, `<base>-model` for an
    endpoint `<base>-ep`, hfpipe.core.names), so a rerun after the endpoint went still finds them."""
    from hfpipe.core.run.cleanup import KINDS

    config_kind, model_kind = KINDS[1], KINDS[2]
    base = endpoint.removesuffix("-ep") if endpoint.endswith("-ep") else None
    config_name = config_name or (f"{base}-config" if base else None)
    found: list[Resource] = []
    models: list[str] = [f"{base}-model"] if base else []
    if config_name:
        config, tags = _tagged(
            sagemaker,
            f"endpoint config {config_name}",
            sagemaker.describe_endpoint_config,
            "EndpointConfigArn",
            EndpointConfigName=config_name,
        )
        if config is not None:
            for variant in config.get("ProductionVariants", []):
                if variant.get("ModelName") and variant["ModelName"] not in models:
                    models.append(variant["ModelName"])
            if is_ours(tags, env):
                found.append(Resource(config_kind, config_name, tags.get(contract.TAG_EXECUTION, "-"), None))
    for model in models:
        described, tags = _tagged(
            sagemaker, f"model {model}", sagemaker.describe_model, "ModelArn", ModelName=model
        )
        if described is not None and is_ours(tags, env):
            found.append(Resource(model_kind, model, tags.get(contract.TAG_EXECUTION, "-"), None))
    return found


def _shared_base_lines(console: Any, found: list[Any], env: str) -> str:
    """A shared base with no adapter on it bills for nothing: said, with the command that retires it. Returns
    what the last line adds where the shared base is up (`endpoints delete` refuses it)."""
    from hfpipe.core.adapters import adapter_deploy

    base = adapter_deploy.BaseNames.of(env).endpoint
    standing = [e for e in found if e.name == base]
    if not standing:
        return ""
    command = adapter_deploy.retire_command(env)
    if not any(not share.is_base for share in standing[0].adapters):
        usd = standing[0].price_per_hour_usd
        cost = "" if usd is None else f" ({usd:.4g} USD/h)"
        console.print(
            f"{base}: no adapter on it: the shared base bills{cost} for nothing; retire it: `{command}`"
        )
    return f" (the shared base {base}: `{command}`)"


def _delete_one(clients: aws.Clients, args: argparse.Namespace, console: Any) -> int:
    """Delete endpoint NAME and the config and model behind it, each when it is this environment's.

    It works from what exists, so running it again after an interruption (a throttled call) finishes the job:
    when the endpoint is gone, its config and model are found by the pipeline's names and deleted, and the
    command says so. A user's keep tag (`hfpipe stop --keep-endpoint`) does not stop it: this command names the
    endpoint. An endpoint SageMaker will not delete yet (Creating, Updating, ...) is waited for, within
    --wait-timeout."""
    from hfpipe.core.run.cleanup import KINDS

    sagemaker = clients.sagemaker
    name = step(
        f"reading endpoint {args.name}",
        named_endpoints.resolve_name,
        sagemaker=sagemaker,
        name=args.name,
        env=args.env,
    )
    _refuse_shared_base(sagemaker, name, args.env)
    timeout_s = wait_timeout(args)
    info = _ours_or_none(sagemaker, name, args.env)
    name, deployment, leftovers, rest = _what_it_leaves(clients, name, info, args.env)
    if info is None and not leftovers and not rest:
        # A finished delete run again (its last step may have failed after AWS had done it): done, exit 0.
        console.print(
            f"endpoint {name}: nothing of it is left in {clients.region} (no endpoint, config, model, "
            f"deployment record or autoscaling target of environment {args.env}): deleted already, or never "
            f"made here (`hfpipe endpoints --env {args.env}` lists them); nothing to delete"
        )
        return 0
    if not _confirmed(args, console, name, info, [f"{r.kind.name} {r.name}" for r in leftovers] + rest):
        console.print("nothing deleted")
        return 1
    if info is not None and ready_to_delete(sagemaker, name, info.status, timeout_s, console):
        step(f"deleting endpoint {name}", delete, sagemaker=sagemaker, kind=KINDS[0], name=name)
        console.print(f"deleted endpoint {name} ({describe_cost(info)})")
    # The config and model served only this endpoint; they are deleted when they are this environment's too.
    delete_all(sagemaker, leftovers, console, timeout_s)
    if deployment and describe_or_none(sagemaker.describe_endpoint, EndpointName=name) is None:
        for removed in named_endpoints.forget(clients, args.env, name, deployment):
            console.print(f"deleted {removed}")
    console.print("S3 data and model artifacts are never touched")
    return 0


def _refuse_shared_base(sagemaker: Any, name: str, env: str) -> None:
    """The environment's shared base is not deleted here: DeleteEndpoint would leave its inference components
    recorded on a deleted endpoint, and its adapters with nothing to serve them. Its own command deletes the
    components first (AWS's order) and refuses while adapters remain; this one names them and it."""
    if name != adapter_deploy.BaseNames.of(env).endpoint:
        return
    held = step(f"reading the adapters on {name}", adapter_deploy.adapters_left, sagemaker=sagemaker, env=env)
    adapters = (
        f"it holds {len(held)} adapter(s) ({', '.join(held)}): delete each with `hfpipe deploy --env {env} "
        "--adapter NAME --delete`, then "
        if held
        else "it holds no adapter: "
    )
    raise HfpipeError(
        f"endpoint {name} is {env}'s shared base; {adapters}retire it with "
        f"`{adapter_deploy.retire_command(env)}` (its inference components first, then the endpoint, config "
        "and model); nothing deleted"
    )


def _ours_or_none(sagemaker: Any, name: str, env: str) -> EndpointInfo | None:
    """Endpoint `name` as it is now (None: there is none), refused when it is not environment `env`'s."""
    endpoint, tags = _tagged(
        sagemaker, f"endpoint {name}", sagemaker.describe_endpoint, "EndpointArn", EndpointName=name
    )
    if endpoint is None:
        return None
    if not is_ours(tags, env):
        owner = tags.get(contract.TAG_ENV)
        whose = f"environment {owner!r}" if owner else "no hfpipe environment"
        raise HfpipeError(
            f"endpoint {name} belongs to {whose} (tags {contract.TAG_ENV}, {contract.TAG_MANAGED_BY}), "
            f"not {env!r}: nothing deleted"
        )
    return step(
        f"reading endpoint {name}", describe, sagemaker=sagemaker, name=name, tags=tags, now=datetime.now(UTC)
    )


def _what_it_leaves(
    clients: aws.Clients, name: str, info: EndpointInfo | None, env: str
) -> tuple[str, Any, list[Any], list[str]]:
    """The endpoint's name, its named deployment (or None), the configs and models to delete with it, and what
    else an interrupted delete of a named endpoint left (none of them: nothing is left to delete)."""
    sagemaker = clients.sagemaker
    leftovers = _leftovers(sagemaker, name, info.endpoint_config if info else None, env)
    # A named endpoint's: every config and model its deploys made (found by tag, also once it is gone), and
    # after an interrupted delete what it still left (hfpipe.cli.deploy.named_endpoints.gone).
    deployment, rest = (info.deployment if info else None), list[str]()
    left_by_named = None if info or leftovers else named_endpoints.gone(clients, env, name)
    if left_by_named:
        name, deployment, rest = left_by_named
    if deployment:
        seen = {(r.kind.name, r.name) for r in leftovers}
        leftovers += [
            r
            for r in named_endpoints.leftovers(sagemaker, env, deployment)
            if (r.kind.name, r.name) not in seen
        ]
    return name, deployment, leftovers, rest


def _confirmed(
    args: argparse.Namespace, console: Any, name: str, info: EndpointInfo | None, left: list[str]
) -> bool:
    """What will be deleted, shown; then --yes, or the user's yes at a terminal (none: refused)."""
    if info is not None:
        console.print(table(args.env, [info]))
        question = f"Delete endpoint {name} ({describe_cost(info)})?"
    else:
        console.print(f"endpoint {name} is already gone; it left " + ", ".join(left))
        question = "Delete " + ", ".join(left) + "?"
    if args.yes:
        return True
    if not sys.stdin.isatty():
        raise HfpipeError("not deleting without confirmation: stdin is not a terminal; pass --yes to confirm")
    answer = input(f"{question} [y/N] ")
    return answer.strip().lower() in {"y", "yes"}


# --- hfpipe endpoints [list | delete NAME] ---------------------------------------------------------------


def add_to(sub: Subparsers) -> None:
    """`hfpipe endpoints` and its actions: arguments and help."""
    actions, listed = listing_command(
        sub,
        "endpoints",
        "the environment's endpoints and their cost; delete one",
        "the environment's endpoints, their status and cost",
    )
    env_option(listed)
    listed.add_argument("--json", action="store_true", help="print the endpoints as JSON")
    aws_options(listed)
    listed.set_defaults(func=with_console(cmd_endpoints), command_parser=listed)
    delete = actions.add_parser(
        "delete", help="delete endpoint NAME with its config and model (asks first, unless --yes)"
    )
    # Optional here, so a line without it gets the hint with its environment (cmd_endpoints).
    delete.add_argument("name", metavar="NAME", nargs="?", help="the endpoint's name")
    env_option(delete)
    delete.add_argument("--yes", action="store_true", help="do not ask before deleting (CI)")
    wait_timeout_option(delete)
    aws_options(delete)
    delete.set_defaults(func=with_console(cmd_endpoints), command_parser=delete)
