"""`hfpipe stop` and `hfpipe cleanup`: the command's side of `hfpipe.core.cleanup`.

What may be deleted is the core rule (tagged by hfpipe for the environment, and the execution when one is
named), shared with the Cleanup Lambda; this module parses `--older-than`, stops an execution and its
training job, and deletes what the rule found, saying so for each resource. S3 objects (artifacts,
checkpoints, data) are never touched.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

from rich.console import Console
from rich.table import Table

from hfpipe.cli import aws
from hfpipe.cli.aws import HfpipeError, aws_error
from hfpipe.core.cleanup import Resource, delete, find_resources

__all__ = ["cmd_cleanup", "cmd_stop", "delete_all", "find_resources", "parse_duration", "when"]

_DURATION = re.compile(r"^(\d+)([mhdw])$")
_UNITS = {"m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def parse_duration(text: str) -> timedelta:
    """'30m', '12h', '7d', '2w' -> timedelta, or an error naming the value and the accepted forms."""
    match = _DURATION.match(text)
    error = HfpipeError(
        f"--older-than {text!r} is not a duration: use a positive number followed by m, h, d or w "
        "(e.g. 12h, 7d)"
    )
    if not match or int(match.group(1)) == 0:
        raise error
    age = timedelta(**{_UNITS[match.group(2)]: int(match.group(1))}) if len(match.group(1)) < 9 else None
    if age is None or age > timedelta(weeks=5200):
        raise HfpipeError(f"--older-than {text!r} is too long; accepted: at most 5200w (100 years)")
    return age


def delete_all(sagemaker: Any, resources: Iterable[Resource], console: Console) -> int:
    """Delete each resource (in the order found: endpoints before their configs and models); returns the count."""
    import botocore.exceptions

    count = 0
    for resource in resources:
        try:
            delete(sagemaker, resource.kind, resource.name)
        except (botocore.exceptions.ClientError, botocore.exceptions.BotoCoreError) as exc:
            raise aws_error(exc, f"deleting {resource.kind.name} {resource.name}") from None
        console.print(f"deleted {resource.kind.name} {resource.name}")
        count += 1
    return count


def when(value: Any) -> str:
    """A creation or start time as the tables show it (UTC), or "-"."""
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S") if isinstance(value, datetime) else "-"


def cmd_stop(args: argparse.Namespace, console: Console) -> int:
    """Stop the execution, then its training job; delete the endpoint/config/model it created.

    What is stopped or deleted comes only from what the pipeline wrote: the Plan state's output in the
    execution history (never the execution input) and the resources' tags, which must name this
    environment and this execution.
    """
    if args.env is not None:
        aws.validate_env_name(args.env)
    clients = aws.clients_for(args)
    desc = aws.resolve_execution(clients, args.execution, args.env)
    arn = desc["executionArn"]
    if desc["status"] != "RUNNING":
        console.print(f"execution {desc['name']} already ended ({desc['status']}); nothing to stop")
        return 0
    before = aws.plan_from_history(list(aws.execution_history(clients.sfn, arn)))
    if before and args.env is not None and before["env"] != args.env:
        raise HfpipeError(
            f"execution {desc['name']!r} belongs to environment {before['env']!r}, not --env {args.env!r}; "
            "nothing stopped"
        )
    # The execution first, so it cannot go on to create an endpoint after its job is stopped.
    aws.call(
        "stopping the execution",
        clients.sfn.stop_execution,
        executionArn=arn,
        error="hfpipe.Stopped",
        cause="stopped with `hfpipe stop`",
    )
    console.print(f"stopped execution {desc['name']}")
    plan = aws.plan_from_history(list(aws.execution_history(clients.sfn, arn)))
    if not plan:
        console.print("its Plan had not finished: no training job was launched")
        return 0
    env = plan["env"]
    if args.env is not None and env != args.env:
        raise HfpipeError(
            f"execution {desc['name']!r} belongs to environment {env!r}, not --env {args.env!r}; "
            "its training job and endpoint were left alone"
        )
    job_name = plan["training_job_name"]
    import botocore.exceptions

    from hfpipe.core.cleanup import may_delete, tags_of

    try:
        job = clients.sagemaker.describe_training_job(TrainingJobName=job_name)
    except botocore.exceptions.ClientError:
        job = None  # Plan ran but Launch did not: there is no job to stop
    if job is None:
        console.print(f"training job {job_name} was never launched")
    elif not may_delete(
        aws.call(
            "reading the training job's tags", tags_of, sagemaker=clients.sagemaker, arn=job["TrainingJobArn"]
        ),
        env,
        desc["name"],
    ):
        console.print(
            f"not stopping training job {job_name}: its tags do not name environment {env!r} and execution "
            f"{desc['name']!r} (the same name in another environment is not ours)"
        )
    elif job["TrainingJobStatus"] == "InProgress":
        aws.call(
            f"stopping training job {job_name}", clients.sagemaker.stop_training_job, TrainingJobName=job_name
        )
        console.print(
            f"stopping training job {job_name} (SageMaker uploads what it has, then marks it Stopped)"
        )
    else:
        console.print(f"training job {job_name} already {job['TrainingJobStatus']}")
    # A stopped execution never reaches its Cleanup state, so do its work here.
    if not args.keep_endpoint:
        found = aws.call(
            "listing SageMaker resources",
            find_resources,
            sagemaker=clients.sagemaker,
            env=env,
            execution=desc["name"],
        )
        if (
            found
            and not args.yes
            and not _confirm(f"Delete {', '.join(f'{r.kind.name} {r.name}' for r in found)}?")
        ):
            console.print(
                f"left {len(found)} resources of execution {desc['name']}; delete them with "
                f"`hfpipe cleanup --env {env}` or rerun with --yes"
            )
            return 0
        delete_all(clients.sagemaker, found, console)
    return 0


def _confirm(question: str) -> bool:
    """Ask on a terminal; without one, the answer is no (pass --yes in scripts)."""
    if not sys.stdin.isatty():
        return False
    return input(f"{question} [y/N] ").strip().lower() in {"y", "yes"}


def cmd_cleanup(args: argparse.Namespace, console: Console) -> int:
    """Delete the pipeline's endpoints, endpoint configs and models in an environment, after asking."""
    aws.validate_env_name(args.env)
    # `is not None`: an empty value (an unset variable in a script) is an error, never "no age filter".
    older_than = parse_duration(args.older_than) if args.older_than is not None else None
    clients = aws.clients_for(args)
    # A mistyped or never-deployed environment is an error, not an empty one (as for list/start/report).
    aws.resolve_environment(clients, args.env)
    found = aws.call(
        "listing SageMaker resources",
        find_resources,
        sagemaker=clients.sagemaker,
        env=args.env,
        older_than=older_than,
    )
    age = f" older than {args.older_than}" if older_than is not None else ""
    if not found:
        console.print(f"nothing to clean up in environment {args.env!r}{age}")
        return 0
    table = Table(title=f"hfpipe resources in {args.env}{age}", title_justify="left")
    for column in ("kind", "name", "execution", "created (UTC)"):
        table.add_column(column)
    for resource in found:
        table.add_row(resource.kind.name, resource.name, resource.execution, when(resource.created))
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
    delete_all(clients.sagemaker, found, console)
    console.print(f"deleted {len(found)} resources (S3 data and artifacts are never touched)")
    return 0
