"""`hfpipe list`: an environment's recent executions, newest first, and the endpoints they left up."""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime
from typing import Any

from rich.table import Table

from hfpipe.cli import aws, terminal
from hfpipe.cli.aws import UsageError
from hfpipe.cli.parser import Subparsers, aws_options, env_option
from hfpipe.core import json_text


def add_to(sub: Subparsers) -> None:
    """`hfpipe list`'s arguments and help."""
    p = sub.add_parser("list", help="recent executions of an environment, and the endpoints they left up")
    env_option(p)
    p.add_argument(
        "--status",
        choices=["RUNNING", "SUCCEEDED", "FAILED", "TIMED_OUT", "ABORTED"],
        help="only executions with this status",
    )
    p.add_argument("--max", type=int, default=20, help="at most this many (default 20)")
    p.add_argument("--json", action="store_true", help="print the executions as JSON")
    aws_options(p)
    p.set_defaults(func=cmd_list, command_parser=p)


def cmd_list(args: argparse.Namespace) -> int:
    """Recent executions of an environment's state machine, newest first."""
    if args.max < 1:
        raise UsageError(f"--max {args.max} must be at least 1")
    clients = aws.clients_for(args)
    environment = aws.resolve_environment(clients, args.env)
    kwargs: dict[str, Any] = {"stateMachineArn": environment.state_machine_arn}
    if args.status:
        kwargs["statusFilter"] = args.status
    executions: list[dict[str, Any]] = []
    paginator = clients.sfn.get_paginator("list_executions")
    try:
        for page in paginator.paginate(**kwargs, PaginationConfig={"MaxItems": args.max}):
            executions.extend(page["executions"])
    except Exception as exc:
        raise aws.aws_error(exc, "listing executions") from None
    from hfpipe.cli.deploy.endpoints import by_execution, describe_cost, execution_records

    up = by_execution(clients.sagemaker, args.env)  # the endpoints still up, by the execution that made them
    executions.sort(key=lambda e: e.get("startDate") or datetime.min.replace(tzinfo=UTC), reverse=True)
    executions = executions[: args.max]
    if args.json:
        sys.stdout.write(json_text.dumps(execution_records(executions, up), indent=2) + "\n")
        return 0
    from hfpipe.cli.run.cleanup import when

    console = terminal.console()
    if not executions:
        console.print(
            f"no executions in environment {args.env!r}"
            + (f" with status {args.status}" if args.status else "")
        )
        return 0
    table = Table(title=f"executions in {args.env}", title_justify="left")
    for column in ("name", "status", "started (UTC)", "stopped (UTC)", "endpoint up"):
        table.add_column(column)
    for execution in executions:
        endpoint = up.get(execution["name"])
        table.add_row(
            execution["name"],
            execution["status"],
            when(execution.get("startDate")),
            when(execution.get("stopDate")),
            f"{endpoint.name} ({endpoint.status}, {describe_cost(endpoint)})" if endpoint else "-",
        )
    console.print(table)
    return 0
