"""The commands behind `hfpipe ...`: each takes the parsed arguments and returns an exit status."""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.console import Console, Group
from rich.table import Table

from hfpipe.cli import aws
from hfpipe.cli.aws import HfpipeError
from hfpipe.core.names import default_execution_name


def _console() -> Console:
    """Created per command so that whatever sys.stdout is now (tests capture it) gets the output."""
    import os

    # Logs and pipes have no width: do not squeeze tables into 80 columns there. soft_wrap keeps URIs whole.
    width = None if sys.stdout.isatty() or os.environ.get("COLUMNS") else 160
    return Console(soft_wrap=True, highlight=False, width=width)


def _clients(args: argparse.Namespace) -> aws.Clients:
    return aws.clients_factory(getattr(args, "profile", None), getattr(args, "region", None))


def _call(doing: str, fn: Any, **kwargs: Any) -> Any:
    import botocore.exceptions

    try:
        return fn(**kwargs)
    except (botocore.exceptions.ClientError, botocore.exceptions.BotoCoreError) as exc:
        raise aws.aws_error(exc, doing) from None


# --- recipes / start ---------------------------------------------------------------------------------


def cmd_recipes(args: argparse.Namespace) -> int:
    """List the recipes, or print one resolved with its documented fields."""
    from hfpipe.cli import recipes

    console = _console()
    if args.action == "list":
        if args.name:
            raise HfpipeError(
                f"`recipes list` takes no name (got {args.name!r}); use `hfpipe recipes show NAME`"
            )
        console.print(recipes.recipes_table())
        return 0
    if not args.name:
        raise HfpipeError("`recipes show` needs a recipe name or path: hfpipe recipes show NAME")
    console.print(recipes.show(recipes.load(args.name, args.sets)))
    return 0


def cmd_start(args: argparse.Namespace) -> int:
    """Validate the recipe locally, start the execution in the environment, print its console link."""
    from hfpipe import contract
    from hfpipe.cli import recipes

    aws.validate_env_name(args.env)
    if args.name:
        aws.validate_execution_name(args.name)
    # Validation first: a bad recipe or --set fails here, before credentials or AWS are looked at.
    loaded = recipes.load(args.recipe, args.sets)
    name = args.name or default_execution_name(loaded.name)
    clients = _clients(args)
    environment = aws.resolve_environment(clients, args.env)
    recipes.check_images(loaded, environment.values.get(contract.SSM_IMAGE_CATALOG))

    import botocore.exceptions

    try:
        started = clients.sfn.start_execution(
            stateMachineArn=environment.state_machine_arn,
            name=name,
            input=json.dumps(recipes.execution_input(loaded)),
        )
    except botocore.exceptions.ClientError as exc:
        if exc.response.get("Error", {}).get("Code") == "ExecutionAlreadyExists":
            raise HfpipeError(
                f"an execution named {name!r} already exists in environment {args.env!r}; pass another --name"
            ) from None
        raise aws.aws_error(exc, "starting the execution") from None
    arn = started["executionArn"]
    console = _console()
    console.print(f"started {name} (recipe {loaded.name})")
    console.print(f"execution: {arn}")
    console.print(f"console:   {aws.console_url(arn, clients.region)}")
    if args.watch:
        return _watch(clients, arn, console, args.interval)
    console.print(f"follow it with: hfpipe watch {name} --env {args.env}")
    return 0


# --- watch / report / list / stop --------------------------------------------------------------------


def _watch(clients: aws.Clients, arn: str, console: Console, interval: float) -> int:
    from hfpipe.cli.watch import watch

    if interval <= 0:
        raise HfpipeError(f"--interval {interval} must be a positive number of seconds")
    snap = watch(clients, arn, console, interval=interval)
    return 0 if snap.status == "SUCCEEDED" else 1


def cmd_watch(args: argparse.Namespace) -> int:
    """Live view of an execution until it ends (right away for a finished one), then its report."""
    clients = _clients(args)
    desc = aws.resolve_execution(clients, args.execution, args.env)
    return _watch(clients, desc["executionArn"], _console(), args.interval)


def cmd_report(args: argparse.Namespace) -> int:
    """Print an execution's report (or JSON); with --plot, write its loss curves to a PNG."""
    from hfpipe.cli.execution import metric_series, snapshot
    from hfpipe.cli.report import build_report, plot_losses, render_report

    if args.plot and not args.plot.lower().endswith(".png"):
        raise HfpipeError(f"--plot {args.plot!r} must name a .png file")
    clients = _clients(args)
    desc = aws.resolve_execution(clients, args.execution, args.env)
    snap = snapshot(clients, desc["executionArn"])
    report = build_report(clients, snap)
    console = _console()
    if args.json:
        sys.stdout.write(json.dumps(report, indent=2, sort_keys=True, default=str) + "\n")
    else:
        console.print(Group(*render_report(report)))
    if args.plot:
        if not snap.training_job:
            raise HfpipeError(f"execution {snap.execution_name!r} has no training job yet: nothing to plot")
        series = _call(
            "reading metrics from CloudWatch", metric_series, clients=clients, job=snap.training_job
        )
        try:
            path = plot_losses(series, Path(args.plot), title=snap.execution_name)
        except ValueError:
            raise HfpipeError(
                f"training job {snap.training_job['TrainingJobName']} has no loss metrics in CloudWatch "
                "(namespace /aws/sagemaker/TrainingJobs); check the recipe's metric definitions"
            ) from None
        console.print(f"loss plot: {path}")
    return 0


def _when(value: Any) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S") if isinstance(value, datetime) else "-"


def cmd_list(args: argparse.Namespace) -> int:
    """Recent executions of an environment's state machine, newest first."""
    if args.max < 1:
        raise HfpipeError(f"--max {args.max} must be at least 1")
    clients = _clients(args)
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
    console = _console()
    if not executions:
        console.print(
            f"no executions in environment {args.env!r}"
            + (f" with status {args.status}" if args.status else "")
        )
        return 0
    table = Table(title=f"executions in {args.env}", title_justify="left")
    for column in ("name", "status", "started (UTC)", "stopped (UTC)"):
        table.add_column(column)
    executions.sort(key=lambda e: e.get("startDate") or datetime.min.replace(tzinfo=UTC), reverse=True)
    for execution in executions[: args.max]:
        table.add_row(
            execution["name"],
            execution["status"],
            _when(execution.get("startDate")),
            _when(execution.get("stopDate")),
        )
    console.print(table)
    return 0


def cmd_stop(args: argparse.Namespace) -> int:
    """Stop the execution, then its training job; delete the endpoint/config/model it created."""
    from hfpipe.cli import cleanup

    clients = _clients(args)
    desc = aws.resolve_execution(clients, args.execution, args.env)
    arn = desc["executionArn"]
    console = _console()
    if desc["status"] != "RUNNING":
        console.print(f"execution {desc['name']} already ended ({desc['status']}); nothing to stop")
        return 0
    # The execution first, so it cannot go on to create an endpoint after its job is stopped.
    _call(
        "stopping the execution",
        clients.sfn.stop_execution,
        executionArn=arn,
        error="hfpipe.Stopped",
        cause="stopped with `hfpipe stop`",
    )
    console.print(f"stopped execution {desc['name']}")
    events = list(aws.execution_history(clients.sfn, arn))
    execution_input = json.loads(desc["input"]) if desc.get("input") else None
    plan = aws.find_plan(events, execution_input)
    if not plan:
        console.print("no training job was launched")
        return 0
    job_name = plan["training_job_name"]
    import botocore.exceptions

    try:
        job = clients.sagemaker.describe_training_job(TrainingJobName=job_name)
    except botocore.exceptions.ClientError:
        job = None  # Plan ran but Launch did not: there is no job to stop
    if job is None:
        console.print(f"training job {job_name} was never launched")
    elif job["TrainingJobStatus"] == "InProgress":
        _call(
            f"stopping training job {job_name}", clients.sagemaker.stop_training_job, TrainingJobName=job_name
        )
        console.print(
            f"stopping training job {job_name} (SageMaker uploads what it has, then marks it Stopped)"
        )
    else:
        console.print(f"training job {job_name} already {job['TrainingJobStatus']}")
    # A stopped execution never reaches its Cleanup state, so do its work here.
    env = plan.get("env") or args.env
    if env and not args.keep_endpoint:
        for resource in cleanup.find_resources(clients.sagemaker, env, execution=desc["name"]):
            _call(
                f"deleting {resource.kind} {resource.name}",
                cleanup.delete,
                sagemaker=clients.sagemaker,
                resource=resource,
            )
            console.print(f"deleted {resource.kind} {resource.name}")
    return 0


# --- cleanup / data ----------------------------------------------------------------------------------


def cmd_cleanup(args: argparse.Namespace) -> int:
    """Delete the pipeline's endpoints, endpoint configs and models in an environment, after asking."""
    from hfpipe.cli import cleanup

    aws.validate_env_name(args.env)
    older_than = cleanup.parse_duration(args.older_than) if args.older_than else None
    clients = _clients(args)
    found = _call(
        "listing SageMaker resources",
        cleanup.find_resources,
        sagemaker=clients.sagemaker,
        env=args.env,
        older_than=older_than,
    )
    console = _console()
    age = f" older than {args.older_than}" if args.older_than else ""
    if not found:
        console.print(f"nothing to clean up in environment {args.env!r}{age}")
        return 0
    table = Table(title=f"hfpipe resources in {args.env}{age}", title_justify="left")
    for column in ("kind", "name", "execution", "created (UTC)"):
        table.add_column(column)
    for resource in found:
        table.add_row(resource.kind, resource.name, resource.execution, _when(resource.created))
    console.print(table)
    if args.dry_run:
        console.print(f"dry run: {len(found)} resources would be deleted")
        return 0
    if not args.yes:
        if not sys.stdin.isatty():
            raise HfpipeError(
                "not deleting without confirmation: stdin is not a terminal; pass --yes to confirm"
            )
        answer = input(f"Delete these {len(found)} resources? [y/N] ")
        if answer.strip().lower() not in {"y", "yes"}:
            console.print("nothing deleted")
            return 1
    for resource in found:
        _call(
            f"deleting {resource.kind} {resource.name}",
            cleanup.delete,
            sagemaker=clients.sagemaker,
            resource=resource,
        )
        console.print(f"deleted {resource.kind} {resource.name}")
    console.print(f"deleted {len(found)} resources (S3 data and artifacts are never touched)")
    return 0


def cmd_data_upload(args: argparse.Namespace) -> int:
    """Upload a local data set under a new prefix of the data bucket and print its channel URI."""
    from hfpipe.cli import data

    aws.validate_env_name(args.env)
    path = Path(args.path)
    name = data.validate_name(args.name) if args.name else data.default_name(path)
    data.collect_files(path)  # bad input fails before credentials or the environment are looked at
    clients = _clients(args)
    bucket = aws.resolve_environment(clients, args.env).data_bucket
    uri, count = data.upload(clients.s3, bucket, path, name)
    console = _console()
    console.print(f"uploaded {count} file{'s' if count != 1 else ''} to {uri}")
    console.print(f"use it in a recipe as a channel: {json.dumps({'training': uri})}")
    return 0


# --- local ----------------------------------------------------------------------------------------------


def cmd_local(args: argparse.Namespace) -> int:
    """Run a recipe end to end on this machine (see hfpipe.cli.local and hfpipe.local)."""
    from hfpipe.cli.local import run

    return run(args, _console())
