"""`hfpipe endpoints`: the endpoints an environment's executions left up, what they cost, and deleting one.

    hfpipe endpoints --env dev [--json]
    hfpipe endpoints delete NAME --env dev [--yes]

An endpoint counts only when it carries the pipeline's tags for this environment (`hfpipe:managed-by` =
hfpipe and `hfpipe:env` = ENV); `delete` refuses any other. Deleting an endpoint also deletes the
endpoint config and model behind it when they carry the same tags (they serve nothing without it);
S3 data and model artifacts are never touched.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any

from rich.table import Table

from hfpipe import contract
from hfpipe.cli import aws
from hfpipe.cli.aws import HfpipeError
from hfpipe.core import cost


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


def _utc(value: Any) -> datetime | None:
    if not isinstance(value, datetime):
        return None
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def _tags(sagemaker: Any, arn: str) -> dict[str, str]:
    tags: dict[str, str] = {}
    for page in sagemaker.get_paginator("list_tags").paginate(ResourceArn=arn):
        tags.update({t["Key"]: t["Value"] for t in page.get("Tags", [])})
    return tags


def _ours(tags: dict[str, str], env: str) -> bool:
    return tags.get(contract.TAG_MANAGED_BY) == contract.PROJECT and tags.get(contract.TAG_ENV) == env


def describe(sagemaker: Any, name: str, tags: dict[str, str], now: datetime) -> EndpointInfo:
    """Status, instances (from the endpoint config), price and cost so far of one endpoint."""
    desc = sagemaker.describe_endpoint(EndpointName=name)
    config_name = desc.get("EndpointConfigName")
    instance_type, count = None, 0
    if config_name:
        try:
            variants = sagemaker.describe_endpoint_config(EndpointConfigName=config_name)[
                "ProductionVariants"
            ]
        except Exception:
            variants = []  # the config may be gone already; the endpoint still runs
        for variant in variants:
            instance_type = instance_type or variant.get("InstanceType")
            count += int(variant.get("InitialInstanceCount") or 0)
    # A running endpoint reports its current count per variant; prefer it over the initial one.
    current = [v.get("CurrentInstanceCount") for v in desc.get("ProductionVariants") or []]
    if current and all(isinstance(c, int) for c in current):
        count = sum(current)
    count = count or 1
    created = _utc(desc.get("CreationTime"))
    per_hour = cost.endpoint_price_per_hour(instance_type, count) if instance_type else None
    so_far = (
        cost.endpoint_cost_so_far(instance_type, count, created, now) if instance_type and created else None
    )
    return EndpointInfo(
        name=name,
        status=str(desc.get("EndpointStatus", "-")),
        execution=tags.get(contract.TAG_EXECUTION, "-"),
        recipe=tags.get(contract.TAG_RECIPE, "-"),
        instance_type=instance_type,
        instance_count=count,
        created=created,
        price_per_hour_usd=per_hour,
        cost_so_far_usd=so_far,
        endpoint_config=config_name,
    )


def endpoint_of(sagemaker: Any, name: str, env: str) -> EndpointInfo | None:
    """One endpoint by name when it exists and is this environment's, else None."""
    try:
        arn = sagemaker.describe_endpoint(EndpointName=name)["EndpointArn"]
        tags = _tags(sagemaker, arn)
        return describe(sagemaker, name, tags, datetime.now(UTC)) if _ours(tags, env) else None
    except Exception:
        return None


def add_to_report(sagemaker: Any, report: dict[str, Any], snap: Any) -> None:
    """An execution's report gets its endpoint's status, price and cost so far while it is up."""
    env = (snap.plan or {}).get("env")
    if not report.get("endpoint_name") or not env:
        return
    if snap.endpoint_status in (None, "deleted", "not created yet"):
        return
    info = endpoint_of(sagemaker, str(report["endpoint_name"]), env)
    if info is not None:
        report["endpoint_deleted"] = False
        report["endpoint_status"] = info.status
        report["endpoint_price_per_hour_usd"] = info.price_per_hour_usd
        report["endpoint_cost_so_far_usd"] = info.cost_so_far_usd
        report["endpoint_env"] = env


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


def find_endpoints(sagemaker: Any, env: str, now: datetime | None = None) -> list[EndpointInfo]:
    """Every endpoint tagged for this environment by the pipeline, oldest first."""
    now = now or datetime.now(UTC)
    found = []
    for page in sagemaker.get_paginator("list_endpoints").paginate():
        for item in page["Endpoints"]:
            tags = _tags(sagemaker, item["EndpointArn"])
            if _ours(tags, env):
                found.append(describe(sagemaker, item["EndpointName"], tags, now))
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
    for column in ("name", "status", "execution", "instances", "USD/h", "so far (USD)", "created (UTC)"):
        out.add_column(column, justify="right" if column.startswith(("USD", "so far")) else "left")
    for e in endpoints:
        out.add_row(
            e.name,
            e.status,
            e.execution,
            f"{e.instance_count} x {e.instance_type or '-'}",
            "-" if e.price_per_hour_usd is None else f"{e.price_per_hour_usd:.4g}",
            "-" if e.cost_so_far_usd is None else f"{e.cost_so_far_usd:.4f}",
            e.created.strftime("%Y-%m-%d %H:%M:%S") if e.created else "-",
        )
    return out


def _delete(sagemaker: Any, call: str, **kwargs: str) -> bool:
    """One delete call; a resource that is already gone counts as deleted (returns False)."""
    import botocore.exceptions

    try:
        getattr(sagemaker, call)(**kwargs)
    except botocore.exceptions.ClientError as exc:
        message = exc.response.get("Error", {}).get("Message", "")
        if "Could not find" in message or "does not exist" in message:
            return False
        raise
    return True


def cmd_endpoints(args: argparse.Namespace, console: Any) -> int:
    """List the environment's endpoints, or delete one of them after asking."""
    aws.validate_env_name(args.env)
    if args.action == "list" and args.name:
        raise HfpipeError(
            f"`endpoints list` takes no name (got {args.name!r}); delete one with `endpoints delete NAME`"
        )
    if args.action == "delete" and not args.name:
        raise HfpipeError(
            "`endpoints delete` needs the endpoint's name: hfpipe endpoints delete NAME --env ENV"
        )
    clients = aws.clients_factory(args.profile, args.region)
    # A mistyped or never-deployed environment is an error, not an empty one (as for list/start/report).
    aws.resolve_environment(clients, args.env)
    sagemaker = clients.sagemaker
    if args.action == "list":
        try:
            found = find_endpoints(sagemaker, args.env)
        except Exception as exc:
            raise aws.aws_error(exc, "listing endpoints") from None
        if args.json:
            sys.stdout.write(json.dumps([as_json(e) for e in found], indent=2) + "\n")
            return 0
        if not found:
            console.print(f"no endpoints up in environment {args.env!r}")
            return 0
        console.print(table(args.env, found))
        total = sum(e.price_per_hour_usd or 0.0 for e in found)
        console.print(
            f"{len(found)} endpoint{'s' if len(found) != 1 else ''} up: {total:.4g} USD/h together; "
            f"delete one with `hfpipe endpoints delete NAME --env {args.env}`"
        )
        return 0
    return _delete_one(clients, args, console)


def _delete_one(clients: aws.Clients, args: argparse.Namespace, console: Any) -> int:
    import botocore.exceptions

    sagemaker, name = clients.sagemaker, args.name
    try:
        endpoint = sagemaker.describe_endpoint(EndpointName=name)
    except botocore.exceptions.ClientError as exc:
        if exc.response.get("Error", {}).get("Code") in {"ValidationException", "ResourceNotFound"}:
            raise HfpipeError(
                f"no endpoint {name!r} in {clients.region}: list them with `hfpipe endpoints --env {args.env}`"
            ) from None
        raise aws.aws_error(exc, f"reading endpoint {name}") from None
    try:
        tags = _tags(sagemaker, endpoint["EndpointArn"])
    except botocore.exceptions.ClientError as exc:
        raise aws.aws_error(exc, f"reading the tags of endpoint {name}") from None
    if not _ours(tags, args.env):
        owner = tags.get(contract.TAG_ENV)
        whose = f"environment {owner!r}" if owner else "no hfpipe environment"
        raise HfpipeError(
            f"endpoint {name} belongs to {whose} (tags {contract.TAG_ENV}, {contract.TAG_MANAGED_BY}), "
            f"not {args.env!r}: nothing deleted"
        )
    info = describe(sagemaker, name, tags, datetime.now(UTC))
    console.print(table(args.env, [info]))
    if not args.yes:
        if not sys.stdin.isatty():
            raise HfpipeError(
                "not deleting without confirmation: stdin is not a terminal; pass --yes to confirm"
            )
        answer = input(f"Delete endpoint {name} ({describe_cost(info)})? [y/N] ")
        if answer.strip().lower() not in {"y", "yes"}:
            console.print("nothing deleted")
            return 1
    try:
        _delete(sagemaker, "delete_endpoint", EndpointName=name)
        console.print(f"deleted endpoint {name} ({describe_cost(info)})")
        # The config and model served only this endpoint; delete them when they are this environment's too.
        if info.endpoint_config:
            config = sagemaker.describe_endpoint_config(EndpointConfigName=info.endpoint_config)
            if _ours(_tags(sagemaker, config["EndpointConfigArn"]), args.env):
                models = [v["ModelName"] for v in config.get("ProductionVariants", []) if v.get("ModelName")]
                if _delete(sagemaker, "delete_endpoint_config", EndpointConfigName=info.endpoint_config):
                    console.print(f"deleted endpoint config {info.endpoint_config}")
                for model in models:
                    arn = sagemaker.describe_model(ModelName=model)["ModelArn"]
                    if _ours(_tags(sagemaker, arn), args.env) and _delete(
                        sagemaker, "delete_model", ModelName=model
                    ):
                        console.print(f"deleted model {model}")
    except botocore.exceptions.ClientError as exc:
        raise aws.aws_error(exc, f"deleting endpoint {name}") from None
    console.print("S3 data and model artifacts are never touched")
    return 0
