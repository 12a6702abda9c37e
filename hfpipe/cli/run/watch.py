"""The live view of one execution: state, training job, latest loss, elapsed time, cost so far, endpoint.

`hfpipe.cli.run.execution.snapshot` gathers what the view shows; `render` turns it into a rich panel; `watch`
refreshes it until the execution ends and then prints the report.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

from rich.console import Console, Group
from rich.live import Live
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from hfpipe.cli import aws, terminal
from hfpipe.cli.aws import UsageError
from hfpipe.cli.parser import Subparsers, aws_options, execution_argument
from hfpipe.cli.run.execution import Snapshot, snapshot
from hfpipe.cli.run.report import build_report, render_report
from hfpipe.core.run.logs import Progress

_STATUS_STYLE = {
    "RUNNING": "yellow",
    "InProgress": "yellow",
    "SUCCEEDED": "green",
    "Completed": "green",
    "InService": "green",
    "FAILED": "red",
    "Failed": "red",
    "TIMED_OUT": "red",
    "ABORTED": "red",
    "Stopped": "red",
    "Stopping": "red",
}


#: Without a terminal, the longest the view stays silent while nothing changes.
HEARTBEAT_S = 60.0


def heartbeat(snap: Snapshot) -> str:
    """One line of where a run stands: elapsed time, state, the job's status, progress and metrics."""
    parts = [f"{_duration(snap.elapsed_seconds)} {snap.execution_name}: {snap.status}, {snap.state or '-'}"]
    job = snap.training_job
    if job:
        parts.append(f"training job {job.get('TrainingJobStatus')} / {job.get('SecondaryStatus', '-')}")
    if snap.progress is not None:
        p = snap.progress
        parts.append(f"{p.step}/{p.total} steps ({100 * p.fraction:.0f}%), ETA {p.eta}")
    if snap.metrics:
        parts.append(", ".join(f"{k} {v:.4g}" for k, v in sorted(snap.metrics.items())))
    return "; ".join(parts)


def _styled(value: str | None) -> Text:
    if value is None:
        return Text("-", style="dim")
    return Text(value, style=_STATUS_STYLE.get(value, ""))


def _duration(seconds: float) -> str:
    seconds = int(seconds)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}h{minutes:02d}m{secs:02d}s" if hours else f"{minutes}m{secs:02d}s"


def _progress(p: Progress) -> Table:
    """A bar and the numbers: steps done of total, time left, steps (and samples or tokens) per second."""
    from rich.progress_bar import ProgressBar

    row = Table.grid(padding=(0, 1))
    speed = f"{p.steps_per_second:.3g} steps/s"
    if p.samples_per_second is not None:
        speed += f", {p.samples_per_second:.4g} samples/s"
    if p.tokens_per_second is not None:
        speed += f", {p.tokens_per_second:.4g} tokens/s"
    row.add_row(
        ProgressBar(total=max(p.total, 1), completed=p.step, width=24),
        f"{p.step}/{p.total} steps ({100 * p.fraction:.0f}%), ETA {p.eta}, {speed}",
    )
    return row


def render(snap: Snapshot, local: bool = False) -> Panel:
    """The live view of one snapshot as a rich panel (`local`: a run of `hfpipe local`, which costs nothing
    here; its cost line is what the recipe's instances would cost on AWS, and Ctrl-C ends the run)."""
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold")
    table.add_column()
    table.add_row("execution", snap.execution_name)
    table.add_row("status", _styled(snap.status))
    table.add_row("state", snap.state or "-")
    table.add_row("elapsed", _duration(snap.elapsed_seconds))
    plan = snap.plan
    if plan:
        table.add_row("recipe", plan.recipe_name)
        spot = " (spot)" if plan.spot else ""
        table.add_row("instances", f"{plan.instance_count} x {plan.instance_type}{spot}")
    job = snap.training_job
    if plan:
        if job:
            status = Text.assemble(
                _styled(job.get("TrainingJobStatus")), " / ", Text(job.get("SecondaryStatus", "-"))
            )
        else:
            status = Text("not launched yet", style="dim")
        table.add_row("training job", Text.assemble(plan.training_job_name, "  ", status))
        if job and job.get("SecondaryStatusTransitions"):
            last = job["SecondaryStatusTransitions"][-1]
            if last.get("StatusMessage"):
                table.add_row("", Text(last["StatusMessage"], style="dim"))
    if snap.metrics:
        shown = ", ".join(f"{k} {v:.4g}" for k, v in sorted(snap.metrics.items()))
        table.add_row("metrics", shown)
    if snap.progress is not None:
        table.add_row("progress", _progress(snap.progress))
    if snap.cost_so_far_usd is not None:
        estimate = plan.estimated_cost_usd if plan else None
        suffix = f" (estimate {float(estimate):.2f} USD)" if estimate is not None else ""
        label = "cost so far on AWS" if local else "cost so far"
        table.add_row(label, f"{snap.cost_so_far_usd:.4f} USD{suffix}" + (" (here: 0 USD)" if local else ""))
    if plan and plan.deploy:
        table.add_row("endpoint", Text.assemble(plan.endpoint_name, "  ", _styled(snap.endpoint_status)))
    if snap.failure:
        from hfpipe.core.run.logs import cause_without_tail

        table.add_row("failure", Text(cause_without_tail(snap.failure), style="red"))
    if local:
        title = "hfpipe local" + ("" if snap.finished else " (Ctrl-C stops the local run)")
    else:
        title = "hfpipe watch" + ("" if snap.finished else " (Ctrl-C stops watching, not the execution)")
    if snap.log_tail:
        # Text, not markup: log lines carry their own [brackets].
        log = Text("\n".join(snap.log_tail), style="dim", no_wrap=True, overflow="ellipsis")
        return Panel(
            Group(table, Text(""), Text("training log (last lines)", style="bold"), log),
            title=title,
            expand=False,
        )
    return Panel(table, title=title, expand=False)


def watch(
    clients: aws.Clients,
    execution_arn: str,
    console: Console,
    interval: float = 10.0,
    sleep: Callable[[float], None] = time.sleep,
    max_polls: int | None = None,
    local: bool = False,
) -> Snapshot:
    """Refresh the view until the execution ends (or `max_polls`), then print the report; returns the last view."""
    snap = snapshot(clients, execution_arn)
    polls = 1
    if not snap.finished and console.is_terminal:
        with Live(render(snap, local), console=console, refresh_per_second=4, transient=False) as live:
            while not snap.finished and (max_polls is None or polls < max_polls):
                sleep(interval)
                snap = snapshot(clients, execution_arn, previous=snap)
                polls += 1
                live.update(render(snap, local))
    else:
        # Not a terminal (CI logs, pipes): print a view whenever the state changes instead of redrawing, and
        # a line at least every HEARTBEAT_S in between, so a log shows the run alive through hours of training.
        console.print(render(snap, local))
        last = (snap.status, snap.state, (snap.training_job or {}).get("SecondaryStatus"))
        quiet = 0.0
        while not snap.finished and (max_polls is None or polls < max_polls):
            sleep(interval)
            quiet += interval
            snap = snapshot(clients, execution_arn, previous=snap)
            polls += 1
            key = (snap.status, snap.state, (snap.training_job or {}).get("SecondaryStatus"))
            if key != last:
                console.print(render(snap, local))
                last, quiet = key, 0.0
            elif quiet >= HEARTBEAT_S:
                console.print(heartbeat(snap), markup=False, highlight=False)
                quiet = 0.0
    if snap.finished:
        report = build_report(clients, snap)
        report["local_mode"] = local
        console.print(Group(*render_report(report, snap.plan.env if snap.plan else None)))
    return snap


# --- hfpipe watch ----------------------------------------------------------------------------------------


def add_to(sub: Subparsers) -> None:
    """`hfpipe watch`'s arguments and help."""
    p = sub.add_parser("watch", help="live view of an execution until it ends, then its report")
    execution_argument(p)
    p.add_argument(
        "--interval", type=float, help="seconds between refreshes (default 10; 1 in a local world)"
    )
    aws_options(p)
    p.set_defaults(func=cmd_watch, command_parser=p)


def interval_option(value: float | None) -> float | None:
    """--interval checked (None: the command's default, hfpipe.cli.aws.poll_interval)."""
    from hfpipe.core import validate

    if value is None:
        return None
    try:
        return validate.number(value, "--interval", exclusive_minimum=0, maximum=3600)
    except validate.RecipeError as err:
        raise UsageError(f"{err} seconds between refreshes") from None


def follow(clients: aws.Clients, arn: str, console: Console, interval: float) -> int:
    """The live view until the execution ends; 0 when it succeeded."""
    interval_option(interval)
    snap = watch(clients, arn, console, interval=interval)
    return 0 if snap.status == "SUCCEEDED" else 1


def cmd_watch(args: argparse.Namespace) -> int:
    """Live view of an execution until it ends (right away for a finished one), then its report."""
    interval_option(args.interval)
    clients = aws.clients_for(args)
    desc = aws.resolve_execution(clients, args.execution, args.env)
    return follow(
        clients, desc["executionArn"], terminal.console(), aws.poll_interval(args.interval, clients, 10.0)
    )
