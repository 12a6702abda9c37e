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
from hfpipe.cli.aws import HfpipeError, UsageError
from hfpipe.core import json_text
from hfpipe.core.names import default_execution_name


def _console() -> Console:
    """Created per command so that whatever sys.stdout is now (tests capture it) gets the output."""
    import os

    # Logs and pipes have no width: do not squeeze tables into 80 columns there. soft_wrap keeps URIs whole.
    width = None if sys.stdout.isatty() or os.environ.get("COLUMNS") else 160
    return Console(soft_wrap=True, highlight=False, width=width)


# --- recipes / start ---------------------------------------------------------------------------------


def cmd_recipes(args: argparse.Namespace) -> int:
    """List the recipes, or print one resolved with its documented fields."""
    from hfpipe.cli import recipes

    console = _console()
    if args.action == "list":
        if args.name:
            raise UsageError(
                f"`recipes list` takes no name (got {args.name!r}); use `hfpipe recipes show NAME`"
            )
        if getattr(args, "json", False):
            sys.stdout.write(json_text.dumps(recipes.recipes_summary(), indent=2) + "\n")
            return 0
        console.print(recipes.recipes_table())
        return 0
    if not args.name:
        raise UsageError("`recipes show` needs a recipe name or path: hfpipe recipes show NAME")
    loaded = recipes.load(args.name, args.sets)
    if getattr(args, "json", False):
        # Only the document, so `hfpipe recipes show NAME --json | jq .training` works.
        sys.stdout.write(json_text.dumps(loaded.resolved, indent=2) + "\n")
        return 0
    console.print(recipes.show(loaded))
    return 0


def _start_execution(
    clients: Any, state_machine_arn: str, name: str, execution_input: dict[str, Any], env: str
) -> str:
    """StartExecution; its ARN. A name already used is a one-line error naming --name."""
    import botocore.exceptions

    try:
        started = clients.sfn.start_execution(
            stateMachineArn=state_machine_arn, name=name, input=json.dumps(execution_input, allow_nan=False)
        )
    except botocore.exceptions.ClientError as exc:
        if exc.response.get("Error", {}).get("Code") == "ExecutionAlreadyExists":
            raise HfpipeError(
                f"an execution named {name!r} already exists in environment {env!r}; pass another --name"
            ) from None
        raise aws.aws_error(exc, "starting the execution") from None
    return str(started["executionArn"])


def _execution_input(clients: Any, environment: Any, loaded: Any) -> tuple[dict[str, Any], Any]:
    """The input `start` sends and the recipe as accepted; a recipe's own `dir` or `git` source packed, its
    arguments checked (`hfpipe.core.plan.accept` with the archive), uploaded once per hash, and named by both
    (the environment's rules, its image catalog's among them, are the dry run's: `dryrun.plan_for`)."""
    from hfpipe import contract
    from hfpipe.cli import recipes, sources

    execution_input, accepted = recipes.execution_input(loaded), loaded.accepted
    if loaded.resolved["training"].get("source") is None:
        return execution_input, accepted
    packed = sources.pack_source(loaded.ref, loaded.resolved)
    if packed is None:  # an s3 source: the Plan checks it
        return execution_input, accepted
    accepted = sources.check_source(accepted, packed)
    for note in accepted.notes:
        print(f"note: {note}", file=sys.stderr)
    for name in packed.skipped_secrets:
        print(
            f"not packed: {name} (looks like a secret; list it in training.source.include)", file=sys.stderr
        )
    uri, uploaded = sources.upload(clients.s3, environment.require(contract.SSM_ARTIFACTS_BUCKET), packed)
    print(f"training source: {uri} ({'uploaded' if uploaded else 'already there'})", file=sys.stderr)
    return sources.with_uploaded(execution_input, uri, packed.sha256), accepted.with_source(
        uri, packed.sha256
    )


def cmd_start(args: argparse.Namespace) -> int:
    """Validate the recipe locally, start the execution in the environment, print its console link."""
    from hfpipe.cli import recipes

    aws.validate_env_name(args.env)
    if args.name is not None:  # `--name ""` (an unset variable) is an error, not the default name
        aws.validate_execution_name(args.name)
    if args.watch:
        _interval(args.interval)  # checked before the execution starts: a retry must not start a second run
    # Validation first: a bad recipe or --set fails here, before credentials or AWS are looked at.
    loaded = recipes.load(args.recipe, args.sets, keep_endpoint=args.keep_endpoint)
    if args.keep_endpoint and not loaded.resolved["deploy"]:
        raise HfpipeError(
            f"--keep-endpoint: recipe {loaded.name!r} sets deploy: false, so it creates no endpoint to keep"
        )
    name = args.name or default_execution_name(loaded.name)
    clients = aws.clients_for(args)
    environment = aws.resolve_environment(clients, args.env)
    execution_input, accepted = _execution_input(clients, environment, loaded)
    from hfpipe.cli import dryrun

    # The dry run's plan, before anything starts: what it refuses, start refuses.
    plan, notes = dryrun.plan_for(clients, environment, accepted, name, quotas_readable=args.dry_run)
    if args.dry_run:
        assert plan is not None
        if args.json:
            sys.stdout.write(json_text.dumps(plan.to_json(), indent=2, default=str) + "\n")
        else:
            dryrun.show(_console(), plan, notes)
        return 0

    arn = _start_execution(clients, environment.state_machine_arn, name, execution_input, args.env)
    console = _console()
    console.print(f"started {name} (recipe {loaded.name})")
    for note in notes if plan is None else []:  # only what stopped the check: the quota read
        console.print(f"note: {note}", markup=False)
    console.print(f"execution: {arn}")
    if not aws.is_local_world(clients):  # a local world environment has no console
        console.print(f"console:   {aws.console_url(arn, clients.region)}")
    if args.keep_endpoint or loaded.resolved["serving"]["keep_endpoint"]:
        console.print(
            f"the endpoint stays up after the smoke test (billed per hour): `hfpipe invoke {name} --env "
            f"{args.env} ...`, then `hfpipe endpoints delete NAME --env {args.env}`"
        )
    if args.watch:
        return _watch(clients, arn, console, aws.poll_interval(args.interval, clients, 10.0))
    console.print(f"follow it with: hfpipe watch {name} --env {args.env}")
    return 0


# --- watch / report / list / stop --------------------------------------------------------------------


def _interval(value: float | None) -> float | None:
    from hfpipe.core import validate

    if value is None:  # the default (hfpipe.cli.aws.poll_interval)
        return None
    try:
        return validate.number(value, "--interval", exclusive_minimum=0, maximum=3600)
    except validate.RecipeError as err:
        raise UsageError(f"{err} seconds between refreshes") from None


def _watch(clients: aws.Clients, arn: str, console: Console, interval: float) -> int:
    from hfpipe.cli.watch import watch

    _interval(interval)
    snap = watch(clients, arn, console, interval=interval)
    return 0 if snap.status == "SUCCEEDED" else 1


def cmd_watch(args: argparse.Namespace) -> int:
    """Live view of an execution until it ends (right away for a finished one), then its report."""
    _interval(args.interval)
    clients = aws.clients_for(args)
    desc = aws.resolve_execution(clients, args.execution, args.env)
    return _watch(clients, desc["executionArn"], _console(), aws.poll_interval(args.interval, clients, 10.0))


def cmd_report(args: argparse.Namespace) -> int:
    """Print an execution's report (or JSON); with --plot, write its loss curves to a PNG."""
    from hfpipe.cli.execution import snapshot
    from hfpipe.cli.report import build_report, render_report

    if args.plot is not None:
        from hfpipe.cli.paths import output_file

        if not args.plot.lower().endswith(".png"):
            raise HfpipeError(f"--plot {args.plot!r} must name a .png file")
        output_file(args.plot, "--plot")
    if args.local:
        from hfpipe.cli.local_report import report_local

        return report_local(args, _console())
    if not args.execution:
        raise UsageError("hfpipe report needs an EXECUTION (its ARN, or its name with --env), or --local")
    clients = aws.clients_for(args)
    desc = aws.resolve_execution(clients, args.execution, args.env)
    snap = snapshot(clients, desc["executionArn"])
    report = build_report(clients, snap)
    from hfpipe.cli.endpoints import add_to_report

    add_to_report(clients.sagemaker, report, snap)
    console = _console()
    if args.json:
        sys.stdout.write(json_text.dumps(report, indent=2, sort_keys=True, default=str) + "\n")
    else:
        console.print(Group(*render_report(report, snap.plan.env if snap.plan else None)))
    if args.plot:
        if not snap.training_job:
            raise HfpipeError(f"execution {snap.execution_name!r} has no training job yet: nothing to plot")
        from hfpipe.cli.loss_curves import plot_job

        console.print(
            plot_job(clients, snap.training_job, Path(args.plot), snap.execution_name), markup=False
        )
    return 0


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
    from hfpipe.cli.endpoints import by_execution, describe_cost, execution_records

    up = by_execution(clients.sagemaker, args.env)  # the endpoints still up, by the execution that made them
    executions.sort(key=lambda e: e.get("startDate") or datetime.min.replace(tzinfo=UTC), reverse=True)
    executions = executions[: args.max]
    if args.json:
        sys.stdout.write(json_text.dumps(execution_records(executions, up), indent=2) + "\n")
        return 0
    from hfpipe.cli.cleanup import when

    console = _console()
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


def cmd_stop(args: argparse.Namespace) -> int:
    """Stop an execution, its training job and what it created (see hfpipe.cli.cleanup)."""
    from hfpipe.cli.cleanup import cmd_stop as run

    return run(args, _console())


# --- cleanup / data ----------------------------------------------------------------------------------


def cmd_cleanup(args: argparse.Namespace) -> int:
    """Delete the pipeline's endpoints, configs and models in an environment (see hfpipe.cli.cleanup)."""
    from hfpipe.cli.cleanup import cmd_cleanup as run

    return run(args, _console())


def cmd_data_upload(args: argparse.Namespace) -> int:
    """Upload a local data set under a new prefix of the data bucket and print its channel URI."""
    from hfpipe.cli import data

    aws.validate_env_name(args.env)
    path = Path(args.path)
    name = data.validate_name(args.name) if args.name is not None else data.default_name(path)
    files = data.collect_files(path)  # bad input fails before credentials or the environment are looked at
    if args.recipe is not None:
        from hfpipe.cli import recipes

        data.check_records(files, recipes.load(args.recipe, []).resolved, args.recipe)
    clients = aws.clients_for(args)
    bucket = aws.resolve_environment(clients, args.env).data_bucket
    uri, count = data.upload(clients.s3, bucket, path, name)
    console = _console()
    console.print(f"uploaded {count} file{'s' if count != 1 else ''} to {uri}")
    console.print(f"use it in a recipe as a channel: {json.dumps({'training': uri})}")
    return 0


# --- invoke / endpoints / logs ------------------------------------------------------------------------


def cmd_invoke(args: argparse.Namespace) -> int:
    """Send requests to an endpoint or the local server (see hfpipe.cli.invoke)."""
    from hfpipe.cli.invoke import cmd_invoke as run

    return run(args, _console())


def cmd_endpoints(args: argparse.Namespace) -> int:
    """List the environment's endpoints with their cost, or delete one (see hfpipe.cli.endpoints)."""
    from hfpipe.cli.endpoints import cmd_endpoints as run

    return run(args, _console())


def cmd_models(args: argparse.Namespace) -> int:
    """List, approve, reject or compare the environment's model versions (see hfpipe.cli.models)."""
    from hfpipe.cli.models import cmd_models as run

    return run(args, _console())


def cmd_deploy(args: argparse.Namespace) -> int:
    """Put an approved version on a named endpoint (see hfpipe.cli.deploy), or an adapter on the shared base
    (hfpipe.cli.deploy_adapter)."""
    if args.adapter:
        from hfpipe.cli.deploy_adapter import cmd_deploy_adapter

        return cmd_deploy_adapter(args, _console())
    from hfpipe.cli.deploy import cmd_deploy as run

    return run(args, _console())


def cmd_logs(args: argparse.Namespace) -> int:
    """Print or follow an execution's training log (see hfpipe.cli.logs)."""
    from hfpipe.cli.logs import cmd_logs as run

    return run(args)


def cmd_promote(args: argparse.Namespace) -> int:
    """Promote a version of the source environment into --env (see hfpipe.cli.promote)."""
    from hfpipe.cli.promote import cmd_promote as run

    return run(args, _console())


# --- local ----------------------------------------------------------------------------------------------


def cmd_local(args: argparse.Namespace) -> int:
    """Run a recipe end to end on this machine (see hfpipe.cli.local and hfpipe.local), or `local up|down|status`
    (hfpipe.cli.local_world)."""
    from hfpipe.cli import local, local_world

    if args.keep is not None and args.action != "prune":
        raise UsageError("--keep is an option of `hfpipe local prune`: hfpipe local prune --keep N")
    if args.action == "prune":
        from hfpipe.cli.local_prune import prune

        return prune(args, _console())
    if args.action is not None:
        return local_world.run(args, _console())
    if args.env is not None:
        raise HfpipeError(
            f"--env {args.env}: `hfpipe local --recipe` runs in a throwaway environment of its own; to serve "
            f"{args.env} here: hfpipe local up --env {args.env}"
        )
    args.port = 8080 if args.port is None else args.port
    return local.run(args, _console())


def cmd_completion(args: argparse.Namespace) -> int:
    """Print the completion script for a shell, generated from the parser itself by shtab."""
    import shtab

    sys.stdout.write(shtab.complete(args.root_parser, shell=args.shell))
    return 0
