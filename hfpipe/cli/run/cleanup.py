"""`hfpipe stop` and `hfpipe cleanup`: the command's side of `hfpipe.core.run.cleanup`.

What may be deleted is the core rule (tagged by hfpipe for the environment, and the execution when one is
named), shared with the Cleanup Lambda; this module parses `--older-than`, stops an execution and its
training job, and deletes what the rule found, saying so for each resource. S3 objects (artifacts,
checkpoints, data) are never touched.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, cast

from rich.console import Console
from rich.table import Table

from hfpipe import contract
from hfpipe.cli import aws
from hfpipe.cli.aws import AwsFault, HfpipeError, UsageError, aws_error
from hfpipe.cli.parser import Subparsers, aws_options, env_option, execution_argument, option_rules
from hfpipe.cli.terminal import with_console
from hfpipe.core.names import PlannedNames
from hfpipe.core.run.cleanup import (
    DEFAULT_WAIT_S,
    DELETING,
    NOT_DELETABLE_YET,
    POLL_S,
    NotDeletableYet,
    Resource,
    delete,
    deploy_execution_status,
    deploy_leftovers,
    find_resources,
    is_ours,
    planned_resources,
    recorded_configs,
    tags_of,
    wait_until_deletable,
)
from hfpipe.core.run.plan_model import Plan

__all__ = [
    "cmd_cleanup",
    "cmd_stop",
    "delete_all",
    "find_resources",
    "parse_duration",
    "ready_to_delete",
    "step",
    "when",
]

_DURATION = re.compile(r"(\d+)([smhdw])")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def parse_duration(text: str, flag: str = "--older-than", units: str = "mhdw") -> timedelta:
    """'30m', '12h', '7d', '2w' (and '30s' where `units` has s) -> timedelta, at most 100 years, or an error
    naming the flag, the value and the accepted forms (the one duration rule of the command's options)."""
    match = _DURATION.fullmatch(text.strip())
    error = UsageError(
        f"{flag} {text!r} is not a duration: use a positive number followed by {', '.join(units[:-1])} or "
        f"{units[-1]} (e.g. 12h, 7d)"
    )
    if not match or match.group(2) not in units or int(match.group(1)) == 0:
        raise error
    age = timedelta(**{_UNITS[match.group(2)]: int(match.group(1))}) if len(match.group(1)) < 9 else None
    if age is None or age > timedelta(weeks=5200):
        raise UsageError(f"{flag} {text!r} is too long; accepted: at most 5200w (100 years)")
    return age


def wait_timeout(args: argparse.Namespace) -> float:
    """--wait-timeout in seconds (default 15 minutes: creating an endpoint rarely takes longer)."""
    text = getattr(args, "wait_timeout", None)
    if text is None:
        return float(DEFAULT_WAIT_S)
    return parse_duration(text, "--wait-timeout").total_seconds()


# Module attributes, so tests can run the bounded wait on a fake clock.
_sleep: Callable[[float], None] = time.sleep
_clock: Callable[[], float] = time.monotonic

RERUN = "run the same command again to finish (it carries on from what is left)"


def step(doing: str, fn: Callable[..., Any], **kwargs: Any) -> Any:
    """``fn(**kwargs)``; an AWS error becomes one line saying what failed and that a rerun finishes the job."""
    import botocore.exceptions

    try:
        return fn(**kwargs)
    except (botocore.exceptions.ClientError, botocore.exceptions.BotoCoreError) as exc:
        raise AwsFault(str(aws_error(exc, doing)), RERUN) from None


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.0f} min" if seconds >= 120 else f"{seconds:.0f} s"


def ready_to_delete(
    sagemaker: Any, name: str, status: str | None, timeout_s: float, console: Console
) -> bool:
    """Wait (within ``timeout_s``) until SageMaker lets endpoint ``name`` be deleted; False when it is gone
    or already being deleted (nothing to call), True when DeleteEndpoint may be called now.

    SageMaker refuses DeleteEndpoint while the endpoint is Creating, Updating, SystemUpdating or RollingBack
    (``NOT_DELETABLE_YET``, with the AWS documentation). Past the bound the error says so and to rerun."""
    if status == DELETING:
        console.print(f"endpoint {name} is already being deleted")
        return False
    if status in NOT_DELETABLE_YET:
        console.print(
            f"endpoint {name} is {status}: SageMaker deletes no endpoint until that is done; waiting "
            f"up to {_minutes(timeout_s)} (checking every {POLL_S:.0f} s)"
        )

        def progress(now: str, waited: float) -> None:
            if waited > 0:
                console.print(f"  endpoint {name} still {now} after {_minutes(waited)}")

        try:
            status = step(
                f"reading endpoint {name}",
                wait_until_deletable,
                sagemaker=sagemaker,
                name=name,
                timeout_s=timeout_s,
                progress=progress,
                sleep=_sleep,
                clock=_clock,
            )
        except NotDeletableYet as exc:
            raise HfpipeError(
                f"endpoint {name} is still {exc.status} after {_minutes(timeout_s)}: SageMaker refuses to "
                "delete it until then; its endpoint config and model were left for it. Run the same command "
                "again (or pass a longer --wait-timeout)"
            ) from None
        if status is None:
            console.print(f"endpoint {name} is gone")
            return False
        if status == DELETING:
            console.print(f"endpoint {name} is already being deleted")
            return False
    return status is not None


def delete_all(
    sagemaker: Any, resources: Iterable[Resource], console: Console, timeout_s: float = DEFAULT_WAIT_S
) -> int:
    """Delete each resource (in the order found: endpoints before their configs and models); returns the count.

    An endpoint SageMaker will not delete yet is waited for (``ready_to_delete``); a resource already gone
    counts as deleted, so a rerun after an interruption finishes the job."""
    count = 0
    for resource in resources:
        if resource.kind.name == "endpoint" and not ready_to_delete(
            sagemaker, resource.name, resource.status or "", timeout_s, console
        ):
            continue
        step(
            f"deleting {resource.kind.name} {resource.name}",
            delete,
            sagemaker=sagemaker,
            kind=resource.kind,
            name=resource.name,
        )
        console.print(f"deleted {resource.kind.name} {resource.name}")
        count += 1
    return count


def when(value: Any) -> str:
    """A creation or start time as the tables show it (UTC), or "-"."""
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S") if isinstance(value, datetime) else "-"


def keep(sagemaker: Any, names: PlannedNames, console: Console) -> list[str]:
    """Tag the execution's endpoint, config and model (those tagged for its environment and execution) with
    the keep tag, so no clean-up deletes them; returns what was tagged."""
    kept: list[str] = []
    for item in step("reading the execution's endpoint", lambda: list(planned_resources(sagemaker, names))):
        if not item.ours:
            continue
        if item.kept:  # kept by an earlier run of this command (a rerun says so again)
            kept.append(f"{item.kind.name} {item.name}")
            continue
        arn = step(
            f"reading {item.kind.name} {item.name}",
            lambda item=item: getattr(sagemaker, item.kind.describe)(**{item.kind.name_key: item.name})[
                item.kind.arn_key
            ],
        )
        step(
            f"tagging {item.kind.name} {item.name} to keep it",
            sagemaker.add_tags,
            ResourceArn=arn,
            Tags=[{"Key": contract.TAG_KEEP, "Value": contract.TAG_KEEP_VALUE}],
        )
        kept.append(f"{item.kind.name} {item.name}")
    return kept


def cmd_stop(args: argparse.Namespace, console: Console) -> int:
    """Stop the execution, then its training job; delete the endpoint/config/model it created.

    What is stopped or deleted comes only from what the pipeline wrote: the Plan state's output in the
    execution history (`aws.stored_plan`, never the execution input; without one, with --env, the names the
    environment's rule gives the execution) and the resources' tags, which must name this environment and
    this execution. Not from the execution's status: an execution that already ended (a stop interrupted
    after StopExecution, a failure whose clean-up was interrupted) still has its job stopped and its
    endpoint deleted, so running the command again finishes what a throttled call left.
    """
    if args.env is not None:
        aws.validate_env_name(args.env)
    timeout_s = wait_timeout(args)
    clients = aws.clients_for(args)
    target = _target(clients, args)
    running = target.status == "RUNNING"
    if not (_stop_execution(args, clients, console, target) if running else _has_names(console, target)):
        return 0
    names, env = target.names, target.env
    assert names is not None and env is not None
    if args.keep_endpoint:
        _keep_after_stop(clients, console, target)
    acted = _stop_job(clients.sagemaker, names, console)
    if target.plan is not None and target.plan.evaluation is not None:
        acted += _stop_evaluation_job(clients.sagemaker, target.plan, console)
    # A run that succeeded with keep_endpoint: true kept its endpoint by the user's decision; stopping it
    # afterwards (which stops nothing) does not undo that. `hfpipe endpoints delete` does.
    kept_by_run = bool(target.plan and target.plan.keep_endpoint and target.status == "SUCCEEDED")
    if kept_by_run and not args.keep_endpoint:
        console.print(
            f"its endpoint {names.endpoint_name} was kept (keep_endpoint: true) and stays; "
            f"`hfpipe endpoints delete {names.endpoint_name} --env {env}` deletes it"
        )
    # A stopped execution never reaches its Cleanup state, so do its work here (the abnormal-end rule's
    # Lambda does it too; whichever comes second finds less, and neither minds).
    if not args.keep_endpoint and not kept_by_run:
        deleted = _delete_what_it_made(args, clients, console, target, timeout_s)
        if deleted is None:
            return 0
        acted += deleted
    if not running and not acted and not target.kept and not kept_by_run:
        console.print("nothing left to stop or delete")
    return 0


@dataclass
class _Target:
    """The execution `hfpipe stop` stops: its ARN, name and status, the plan it stored (read again after the
    stop), its environment and names (from the plan, or derived for --env), and what was kept so far."""

    arn: str
    execution: str
    status: str
    plan: Plan | None
    env: str | None
    names: PlannedNames | None
    kept: list[str] = field(default_factory=list)


def _target(clients: aws.Clients, args: argparse.Namespace) -> _Target:
    """The execution named on the command line, refused when its plan names another environment than --env."""
    desc = aws.resolve_execution(clients, args.execution, args.env)
    arn, execution = desc["executionArn"], desc["name"]
    plan = _plan(clients, arn)
    if plan and args.env is not None and plan.env != args.env:
        raise HfpipeError(
            f"execution {execution!r} belongs to environment {plan.env!r}, not --env {args.env!r}; "
            "nothing stopped"
        )
    env = plan.env if plan else args.env
    names = plan.names if plan else PlannedNames.derive(execution, env) if env else None
    return _Target(arn, execution, desc["status"], plan, env, names)


def _stop_execution(
    args: argparse.Namespace, clients: aws.Clients, console: Console, target: _Target
) -> bool:
    """Stop a running execution (keeping its endpoint first with --keep-endpoint) and read its plan again;
    False when it had launched no training job, so nothing is left to do."""
    # Keep before StopExecution: the stop's ABORTED event runs the abnormal-end clean-up, which must find
    # the keep tag already there.
    if args.keep_endpoint and target.names is not None:
        target.kept += keep(clients.sagemaker, target.names, console)
    # The execution first, so it cannot go on to create an endpoint after its job is stopped.
    step(
        "stopping the execution",
        clients.sfn.stop_execution,
        executionArn=target.arn,
        error="hfpipe.Stopped",
        cause="stopped with `hfpipe stop`",
    )
    console.print(f"stopped execution {target.execution}")
    target.plan = plan = _plan(clients, target.arn)  # Plan may have finished meanwhile
    if plan:
        if args.env is not None and plan.env != args.env:
            raise HfpipeError(
                f"execution {target.execution!r} belongs to environment {plan.env!r}, not --env {args.env!r}; "
                "its training job and endpoint were left alone"
            )
        target.env, target.names = plan.env, plan.names
    if target.names is None or (plan is None and args.env is None):
        console.print("its Plan had not finished: no training job was launched")
        return False
    return True


def _has_names(console: Console, target: _Target) -> bool:
    """For an execution that already ended: whether there are names to look for what it made by."""
    console.print(f"execution {target.execution} already ended ({target.status})")
    if target.names is None:
        console.print(
            "it stored no plan: pass --env ENV to look for what it may have created by the names "
            "the environment gives it"
        )
        return False
    return True


def _keep_after_stop(clients: aws.Clients, console: Console, target: _Target) -> None:
    """--keep-endpoint's pass after the stop, and what was kept, with the command that deletes it."""
    assert target.names is not None
    # Again after the stop: an endpoint created in the moment before it is kept too (and, for an
    # execution that already ended, this is the only pass).
    target.kept += [k for k in keep(clients.sagemaker, target.names, console) if k not in target.kept]
    for resource in target.kept:
        console.print(
            f"kept {resource} (tagged {contract.TAG_KEEP}={contract.TAG_KEEP_VALUE}: clean-up leaves it; "
            f"`hfpipe endpoints delete {target.names.endpoint_name} --env {target.env}` deletes it)"
        )


def _delete_what_it_made(
    args: argparse.Namespace, clients: aws.Clients, console: Console, target: _Target, timeout_s: float
) -> int | None:
    """Delete the execution's tagged endpoint, config and model once confirmed (--yes); how many were
    deleted, or None when the user declined (they are left, and the command says how to delete them)."""
    found = step(
        "listing SageMaker resources",
        find_resources,
        sagemaker=clients.sagemaker,
        env=target.env,
        execution=target.execution,
    )
    if (
        found
        and not args.yes
        and not _confirm(f"Delete {', '.join(f'{r.kind.name} {r.name}' for r in found)}?")
    ):
        console.print(
            f"left {len(found)} resources of execution {target.execution}; delete them with "
            f"`hfpipe cleanup --env {target.env}` or rerun with --yes"
        )
        return None
    return delete_all(clients.sagemaker, found, console, timeout_s)


def _plan(clients: aws.Clients, arn: str) -> Plan | None:
    return cast(
        "Plan | None",
        step(
            "reading the execution's history",
            lambda: aws.stored_plan(list(aws.execution_history(clients.sfn, arn))),
        ),
    )


def _stop_job(sagemaker: Any, names: PlannedNames, console: Console) -> int:
    """Stop the execution's training job when it is InProgress and tagged for its environment and execution;
    1 when a stop was sent."""
    job_name = names.training_job_name
    job = _job_or_none(f"training job {job_name}", sagemaker.describe_training_job, TrainingJobName=job_name)
    if job is None:
        console.print(f"training job {job_name} was never launched")
        return 0
    status = job["TrainingJobStatus"]
    if status != "InProgress":
        console.print(f"training job {job_name} already {status}")
        return 0
    return _stop_if_ours(
        sagemaker,
        console,
        ("training job", job_name, job["TrainingJobArn"]),
        (names.env, names.execution_name),
        lambda: sagemaker.stop_training_job(TrainingJobName=job_name),
        " (SageMaker uploads what it has, then marks it Stopped)",
    )


def _job_or_none(what: str, describe: Any, **request: str) -> dict[str, Any] | None:
    """``describe(**request)`` of a job, or None for a name never used (ValidationException "Requested resource
    not found", or "Could not find"); any other error (throttled) must not pass for "never launched", or a
    running job would be left: one line saying what failed and that a rerun finishes the stop."""
    import botocore.exceptions

    try:
        return dict(describe(**request))
    except botocore.exceptions.ClientError as exc:
        message = str(exc.response.get("Error", {}).get("Message", ""))
        if not ("not found" in message.lower() or "Could not find" in message):
            raise AwsFault(str(aws_error(exc, f"reading {what}")), RERUN) from None
        return None
    except botocore.exceptions.BotoCoreError as exc:
        raise AwsFault(str(aws_error(exc, f"reading {what}")), RERUN) from None


def _stop_if_ours(
    sagemaker: Any,
    console: Console,
    job: tuple[str, str, str],
    run: tuple[str, str],
    stop: Any,
    how: str,
) -> int:
    """Stop ``job`` (its kind, name and ARN) only when its tags name ``run`` (environment, execution): the same
    name in another environment is not ours. 1 when a stop was sent."""
    kind, name, arn = job
    env, execution = run
    tags = step(f"reading the {kind}'s tags", tags_of, sagemaker=sagemaker, arn=arn)
    if not is_ours(tags, env, execution):
        console.print(
            f"not stopping {kind} {name}: its tags do not name environment {env!r} and execution "
            f"{execution!r} (the same name in another environment is not ours)"
        )
        return 0
    step(f"stopping {kind} {name}", stop)
    console.print(f"stopping {kind} {name}{how}")
    return 1


def _stop_evaluation_job(sagemaker: Any, plan: Plan, console: Console) -> int:
    """The run's evaluation job, named with its status and cost so far: stopped when InProgress and tagged for
    its environment and execution (StopExecution stops it too: Step Functions stops a `.sync` task's job with
    its execution, https://docs.aws.amazon.com/step-functions/latest/dg/connect-to-resource.html, "Run a Job
    (.sync)"; this finishes a stop that was interrupted). 1 when a stop was sent. Its output under the
    artifacts bucket is never touched (docs/pipeline.md, clean-up)."""
    from hfpipe.core import cost

    assert plan.evaluation is not None
    e = plan.evaluation
    name = e.processing_job_name
    job = _job_or_none(f"evaluation job {name}", sagemaker.describe_processing_job, ProcessingJobName=name)
    if (
        job is None
    ):  # never created: the run did not get to its evaluation (nothing to say, as for an endpoint)
        return 0
    usd = cost.processing_cost_so_far(job, e.price_per_hour_usd, e.instance_count, datetime.now(UTC))
    status = job["ProcessingJobStatus"]
    running = " so far" if status in ("InProgress", "Stopping") else ""
    so_far = f", {usd:.4f} USD{running}" if usd is not None and job.get("ProcessingStartTime") else ""
    if status != "InProgress":
        console.print(f"evaluation job {name} already {status}{so_far}")
        return 0
    return _stop_if_ours(
        sagemaker,
        console,
        ("evaluation job", name, job["ProcessingJobArn"]),
        (plan.env, plan.execution_name),
        lambda: sagemaker.stop_processing_job(ProcessingJobName=name),
        so_far,
    )


def _confirm(question: str) -> bool:
    """Ask on a terminal; without one, the answer is no (pass --yes in scripts)."""
    if not sys.stdin.isatty():
        return False
    return input(f"{question} [y/N] ").strip().lower() in {"y", "yes"}


def _deploy_leftovers(
    clients: aws.Clients, environment: Any, env: str, older_than: timedelta | None
) -> list[Resource]:
    """The configs and models named endpoints' deploys made and a failed clean-up of theirs left (the rule
    DeployCleanup applies: hfpipe.core.run.cleanup.deploy_leftovers); none where the environment has no deploy
    state machine."""
    machine = environment.values.get(contract.SSM_DEPLOY_STATE_MACHINE_ARN)
    if not machine:
        return []
    found = deploy_leftovers(
        clients.sagemaker,
        deploy_execution_status(clients.sfn, machine),
        recorded_configs(clients.ssm, env),
        env,
    )
    if older_than is None:
        return found
    cutoff = datetime.now(UTC) - older_than
    return [r for r in found if isinstance(r.created, datetime) and r.created <= cutoff]


def cmd_cleanup(args: argparse.Namespace, console: Console) -> int:
    """Delete the pipeline's endpoints, endpoint configs and models in an environment, after asking."""
    aws.validate_env_name(args.env)
    # `is not None`: an empty value (an unset variable in a script) is an error, never "no age filter".
    older_than = parse_duration(args.older_than) if args.older_than is not None else None
    timeout_s = wait_timeout(args)
    clients = aws.clients_for(args)
    # A mistyped or never-deployed environment is an error, not an empty one (as for list/start/report).
    environment = aws.resolve_environment(clients, args.env)
    found = step(
        "listing SageMaker resources",
        find_resources,
        sagemaker=clients.sagemaker,
        env=args.env,
        older_than=older_than,
    )
    found += step(
        "listing what failed deploy clean-ups left",
        _deploy_leftovers,
        clients=clients,
        environment=environment,
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
    count = delete_all(clients.sagemaker, found, console, timeout_s)
    console.print(f"deleted {count} resources (S3 data and artifacts are never touched)")
    return 0


# --- hfpipe stop / hfpipe cleanup ------------------------------------------------------------------------


def add_to(sub: Subparsers) -> None:
    """`hfpipe stop` and `hfpipe cleanup`: arguments and help."""
    p = sub.add_parser("stop", help="stop an execution, its training job and the endpoint it created")
    execution_argument(p)
    p.add_argument(
        "--keep-endpoint", action="store_true", help="leave an endpoint the execution already created"
    )
    p.add_argument("--yes", action="store_true", help="delete its endpoint/config/model without asking (CI)")
    wait_timeout_option(p)
    aws_options(p)
    p.set_defaults(func=with_console(cmd_stop), command_parser=p)

    p = sub.add_parser("cleanup", help="delete the endpoints, configs and models the pipeline left (by tag)")
    env_option(p)
    p.add_argument("--older-than", metavar="AGE", help="only resources older than AGE: 30m, 12h, 7d, 2w")
    p.add_argument("--yes", action="store_true", help="do not ask before deleting (CI)")
    p.add_argument("--dry-run", action="store_true", help="list what would be deleted and stop")
    wait_timeout_option(p)
    aws_options(p)
    option_rules(
        p, excludes={("--yes", "--dry-run"): "a dry run deletes nothing, so there is nothing to confirm"}
    )
    p.set_defaults(func=with_console(cmd_cleanup), command_parser=p)


def wait_timeout_option(parser: argparse.ArgumentParser) -> None:
    """--wait-timeout, for a command that deletes endpoints."""
    parser.add_argument(
        "--wait-timeout",
        metavar="AGE",
        help="how long to wait for an endpoint still Creating/Updating before deleting it (default 15m)",
    )
