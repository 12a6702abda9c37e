"""The live view of one execution: state, training job, latest loss, elapsed time, cost so far, endpoint.

`snapshot` gathers what the view shows from Step Functions, SageMaker and CloudWatch (clients are passed
in, so `hfpipe local` points it at its own moto-backed clients); `render` turns it into a rich panel;
`watch` refreshes it until the execution ends and then prints the report.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from hfpipe import aws
from hfpipe.report import build_report, latest_metrics, render_report

TERMINAL = {"SUCCEEDED", "FAILED", "TIMED_OUT", "ABORTED"}
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


@dataclass
class Snapshot:
    """Everything the live view shows at one moment."""

    execution_arn: str
    execution_name: str
    status: str
    started: datetime | None
    stopped: datetime | None
    state: str | None = None
    plan: dict[str, Any] | None = None
    training_job: dict[str, Any] | None = None
    metrics: dict[str, float] = field(default_factory=dict)
    cost_so_far_usd: float | None = None
    endpoint_status: str | None = None
    failure: str | None = None
    output: Any = None
    now: datetime = field(default_factory=lambda: datetime.now(UTC))

    @property
    def finished(self) -> bool:
        return self.status in TERMINAL

    @property
    def elapsed_seconds(self) -> float:
        if self.started is None:
            return 0.0
        end = self.stopped or self.now
        return max(0.0, (end - self.started).total_seconds())


def _utc(value: Any) -> datetime | None:
    if not isinstance(value, datetime):
        return None
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def training_cost_so_far(job: dict[str, Any], plan: dict[str, Any], now: datetime) -> float | None:
    """Billable seconds x instances x price: from BillableTimeInSeconds once known, else the running clock."""
    price = plan.get("price_per_hour_usd")
    if price is None:
        return None
    count = int(job.get("ResourceConfig", {}).get("InstanceCount") or plan.get("instance_count") or 1)
    billable = job.get("BillableTimeInSeconds")
    if billable is None:
        start = _utc(job.get("TrainingStartTime"))
        if start is None:
            return 0.0
        end = _utc(job.get("TrainingEndTime")) or now
        billable = max(0.0, (end - start).total_seconds())
    return float(billable) * count * float(price) / 3600.0


def _client_error_code(exc: Exception) -> str | None:
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        return response.get("Error", {}).get("Code")
    return None


def snapshot(clients: aws.Clients, execution_arn: str, now: datetime | None = None) -> Snapshot:
    """Read the execution, its history, the training job, its metrics and the endpoint once."""
    import json

    import botocore.exceptions

    try:
        desc = clients.sfn.describe_execution(executionArn=execution_arn)
        events = list(aws.execution_history(clients.sfn, execution_arn))
    except (botocore.exceptions.ClientError, botocore.exceptions.BotoCoreError) as exc:
        raise aws.aws_error(exc, f"reading execution {execution_arn}") from None
    execution_input = json.loads(desc["input"]) if desc.get("input") else None
    snap = Snapshot(
        execution_arn=execution_arn,
        execution_name=desc.get("name", execution_arn.rsplit(":", 1)[-1]),
        status=desc["status"],
        started=_utc(desc.get("startDate")),
        stopped=_utc(desc.get("stopDate")),
        state=aws.current_state(events),
        plan=aws.find_plan(events, execution_input),
        now=now or datetime.now(UTC),
    )
    if desc.get("output"):
        try:
            snap.output = json.loads(desc["output"])
        except ValueError:
            snap.output = desc["output"]
    if snap.status in {"FAILED", "TIMED_OUT", "ABORTED"}:
        snap.failure = aws.failure_of(events, desc)
    if not snap.plan:
        return snap

    job_name = snap.plan.get("training_job_name")
    if job_name:
        try:
            snap.training_job = clients.sagemaker.describe_training_job(TrainingJobName=job_name)
        except botocore.exceptions.ClientError as exc:
            # Before Launch has run the job does not exist yet; that is a state, not an error.
            if _client_error_code(exc) not in {"ValidationException", "ResourceNotFound"}:
                raise aws.aws_error(exc, f"reading training job {job_name}") from None
    if snap.training_job:
        snap.metrics = latest_metrics(clients, snap.training_job)
        snap.cost_so_far_usd = training_cost_so_far(snap.training_job, snap.plan, snap.now)

    endpoint = snap.plan.get("endpoint_name")
    if endpoint and snap.plan.get("deploy", True):
        try:
            snap.endpoint_status = clients.sagemaker.describe_endpoint(EndpointName=endpoint)[
                "EndpointStatus"
            ]
        except botocore.exceptions.ClientError as exc:
            if _client_error_code(exc) not in {"ValidationException", "ResourceNotFound"}:
                raise aws.aws_error(exc, f"reading endpoint {endpoint}") from None
            snap.endpoint_status = "deleted" if snap.finished else "not created yet"
    return snap


def _styled(value: str | None) -> Text:
    if value is None:
        return Text("-", style="dim")
    return Text(value, style=_STATUS_STYLE.get(value, ""))


def _duration(seconds: float) -> str:
    seconds = int(seconds)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}h{minutes:02d}m{secs:02d}s" if hours else f"{minutes}m{secs:02d}s"


def render(snap: Snapshot) -> Panel:
    """The live view of one snapshot as a rich panel."""
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold")
    table.add_column()
    table.add_row("execution", snap.execution_name)
    table.add_row("status", _styled(snap.status))
    table.add_row("state", snap.state or "-")
    table.add_row("elapsed", _duration(snap.elapsed_seconds))
    plan = snap.plan or {}
    if plan:
        table.add_row("recipe", str(plan.get("recipe_name", "-")))
        spot = " (spot)" if plan.get("spot") else ""
        table.add_row(
            "instances", f"{plan.get('instance_count', 1)} x {plan.get('instance_type', '-')}{spot}"
        )
    job = snap.training_job
    if plan.get("training_job_name"):
        if job:
            status = Text.assemble(
                _styled(job.get("TrainingJobStatus")), " / ", Text(job.get("SecondaryStatus", "-"))
            )
        else:
            status = Text("not launched yet", style="dim")
        table.add_row("training job", Text.assemble(plan["training_job_name"], "  ", status))
        if job and job.get("SecondaryStatusTransitions"):
            last = job["SecondaryStatusTransitions"][-1]
            if last.get("StatusMessage"):
                table.add_row("", Text(last["StatusMessage"], style="dim"))
    if snap.metrics:
        shown = ", ".join(f"{k} {v:.4g}" for k, v in sorted(snap.metrics.items()))
        table.add_row("metrics", shown)
    if snap.cost_so_far_usd is not None:
        estimate = plan.get("estimated_cost_usd")
        suffix = f" (estimate {float(estimate):.2f} USD)" if estimate is not None else ""
        table.add_row("cost so far", f"{snap.cost_so_far_usd:.4f} USD{suffix}")
    if plan.get("endpoint_name") and plan.get("deploy", True):
        table.add_row("endpoint", Text.assemble(plan["endpoint_name"], "  ", _styled(snap.endpoint_status)))
    if snap.failure:
        table.add_row("failure", Text(snap.failure, style="red"))
    title = "hfpipe watch" + ("" if snap.finished else " (Ctrl-C stops watching, not the execution)")
    return Panel(table, title=title, expand=False)


def watch(
    clients: aws.Clients,
    execution_arn: str,
    console: Console,
    interval: float = 10.0,
    sleep: Callable[[float], None] = time.sleep,
    max_polls: int | None = None,
) -> Snapshot:
    """Refresh the view until the execution ends (or `max_polls`), then print the report; returns the last view."""
    snap = snapshot(clients, execution_arn)
    polls = 1
    if not snap.finished and console.is_terminal:
        with Live(render(snap), console=console, refresh_per_second=4, transient=False) as live:
            while not snap.finished and (max_polls is None or polls < max_polls):
                sleep(interval)
                snap = snapshot(clients, execution_arn)
                polls += 1
                live.update(render(snap))
    else:
        # Not a terminal (CI logs, pipes): print a view whenever the state changes instead of redrawing.
        console.print(render(snap))
        last = (snap.status, snap.state, (snap.training_job or {}).get("SecondaryStatus"))
        while not snap.finished and (max_polls is None or polls < max_polls):
            sleep(interval)
            snap = snapshot(clients, execution_arn)
            polls += 1
            key = (snap.status, snap.state, (snap.training_job or {}).get("SecondaryStatus"))
            if key != last:
                console.print(render(snap))
                last = key
    if snap.finished:
        console.print(Group(*render_report(build_report(clients, snap))))
    return snap
