"""The report of one execution: metrics, cost, artifacts, smoke test; and drawing the loss plot (where its values
are read from: hfpipe.cli.run.loss_curves).

A succeeded execution carries the Report Lambda's `report` in its output (shape: `build_report` in lambda/pipeline/pipeline_lambdas/report.py); for a
running, failed or stopped one the same keys are filled from the plan and DescribeTrainingJob, so
`hfpipe report` and the end of `hfpipe watch` look the same whatever happened.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from hfpipe.cli.adapters import adapter_report
from hfpipe.core import cost
from hfpipe.core.promotion import evaluation_gate, registry

if TYPE_CHECKING:
    from hfpipe.cli.aws import Clients
    from hfpipe.cli.run.execution import Snapshot


def _report_from_job(snap: Snapshot) -> dict[str, Any]:
    # No plan (Plan did not finish): no job was launched, so the plan's keys stay empty.
    plan = snap.plan
    job = snap.training_job or {}
    billable = job.get("BillableTimeInSeconds")
    training = job.get("TrainingTimeInSeconds")
    spot = bool(job.get("EnableManagedSpotTraining", plan.spot if plan else False))
    price = plan.price_per_hour_usd if plan else None
    count = plan.instance_count if plan else None
    return {
        "execution_name": snap.execution_name,
        "recipe_name": plan.recipe_name if plan else None,
        "training_job_name": plan.training_job_name if plan else None,
        "training_job_status": job.get("TrainingJobStatus"),
        "instance_type": job.get("ResourceConfig", {}).get(
            "InstanceType", plan.instance_type if plan else None
        ),
        "instance_count": job.get("ResourceConfig", {}).get("InstanceCount", count),
        "spot": spot,
        "billable_seconds": billable,
        "training_seconds": training,
        "price_per_hour_usd": price,
        "cost_usd": cost.training_cost_so_far(job, price, count, snap.now) if job else None,
        "spot_savings_percent": cost.spot_savings_percent(spot, training, billable),
        "final_metrics": {m["MetricName"]: m["Value"] for m in job.get("FinalMetricDataList", [])}
        or dict(snap.metrics),
        # SageMaker names the artifact's URI before the job ends; only a completed job has written it.
        "model_artifacts": job.get("ModelArtifacts", {}).get("S3ModelArtifacts")
        if job.get("TrainingJobStatus") == "Completed"
        else None,
        "checkpoint_s3_uri": job.get("CheckpointConfig", {}).get("S3Uri"),
        "endpoint_name": plan.endpoint_name if plan and snap.endpoint_created else None,
        "endpoint_deleted": snap.endpoint_status == "deleted",
        "smoke_test": None,
        "hyperparameters_not_checked": plan.hyperparameters_not_checked if plan else None,
        **({"evaluation": _evaluation_so_far(snap)} if snap.evaluation_job else {}),
    }


def _evaluation_so_far(snap: Snapshot) -> dict[str, Any]:
    """The evaluation job of a run that stored no verdict (stopped, failed): its name, status, instances,
    seconds and cost so far, in the report's evaluation keys (docs/evaluation.md), with no verdict."""
    job = snap.evaluation_job or {}
    cluster = (job.get("ProcessingResources") or {}).get("ClusterConfig") or {}
    start, end = cost.as_utc(job.get("ProcessingStartTime")), cost.as_utc(job.get("ProcessingEndTime"))
    return {
        "verdict": None,
        "processing_job_name": job.get("ProcessingJobName"),
        "processing_job_status": job.get("ProcessingJobStatus"),
        "instance_type": cluster.get("InstanceType"),
        "instance_count": cluster.get("InstanceCount"),
        "seconds": None if start is None else max(0.0, ((end or snap.now) - start).total_seconds()),
        "cost_usd": snap.evaluation_cost_so_far_usd,
    }


def build_report(clients: Clients, snap: Snapshot) -> dict[str, Any]:
    """The execution's report: the Report Lambda's own when it ran, else assembled from the training job."""
    output = snap.output
    if isinstance(output, dict) and isinstance(output.get("report"), dict):
        report = dict(output["report"])
    else:
        report = _report_from_job(snap)
    report["execution_status"] = snap.status
    artifact = ((snap.training_job or {}).get("ModelArtifacts") or {}).get("S3ModelArtifacts")
    adapter = adapter_report.of_plan(snap.plan, clients, artifact=artifact)
    if adapter is not None:  # served on the environment's shared base, not on an endpoint of its own
        report["adapter"] = adapter
    if snap.failure:
        report["failure"] = snap.failure
    job = snap.training_job or {}
    if job.get("TrainingJobStatus") == "Failed" and not report.get("log_tail"):
        # A failed execution has no output: read the tail the Report Lambda put in its SNS message again.
        from hfpipe.core.run import logs

        try:
            tail = logs.format_lines(logs.log_tail(clients.logs, job["TrainingJobName"]))
        except Exception:  # the report must not fail because the log is unreadable
            tail = []
        if tail:
            report["log_tail"] = tail
    return report


def _fmt(value: Any, unit: str = "") -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.4g}{unit}"
    return f"{value}{unit}"


def render_report(report: dict[str, Any], env: str | None = None) -> list[RenderableType]:
    """The report as rich tables: summary, final metrics, smoke test; `env`: the environment the execution
    ran in, which the hints name (`hfpipe models --env ENV` without it)."""
    parts: list[RenderableType] = [_summary(report, env)]
    tail = report.get("log_tail")
    if tail:
        # Text, not markup: a traceback's [brackets] are not styles.
        parts.append(Panel(Text("\n".join(tail)), title="last lines of the training log", title_align="left"))
    metrics = report.get("final_metrics") or {}
    if metrics:
        parts.append(_metrics_table(metrics))
    smoke = report.get("smoke_test")
    if isinstance(smoke, dict):
        parts.append(_smoke_table(smoke))
    return parts


def _summary(report: dict[str, Any], env: str | None) -> Table:
    """The summary table: status, job, instances, times, cost, artifacts, endpoint and model version."""
    summary = Table(title=f"report: {report.get('execution_name')}", show_header=False, title_justify="left")
    summary.add_column(style="bold")
    summary.add_column()
    status = report.get("execution_status", "-")
    style = (
        "green" if status == "SUCCEEDED" else "red" if status in {"FAILED", "ABORTED", "TIMED_OUT"} else ""
    )
    summary.add_row("status", Text(str(status), style=style))
    if report.get("failure"):
        from hfpipe.core.run.logs import cause_without_tail

        summary.add_row("failure", Text(cause_without_tail(str(report["failure"])), style="red"))
    summary.add_row("recipe", _fmt(report.get("recipe_name")))
    summary.add_row(
        "training job", f"{_fmt(report.get('training_job_name'))} ({_fmt(report.get('training_job_status'))})"
    )
    summary.add_row(
        "instances",
        f"{_fmt(report.get('instance_count'))} x {_fmt(report.get('instance_type'))}"
        + (" (spot)" if report.get("spot") else ""),
    )
    summary.add_row("training time", _fmt(report.get("training_seconds"), " s"))
    summary.add_row("billable time", _fmt(report.get("billable_seconds"), " s"))
    summary.add_row("cost", _cost(report))
    if report.get("spot_savings_percent") is not None:
        summary.add_row("spot savings", f"{float(report['spot_savings_percent']):.1f} %")
    summary.add_row("model artifacts", _fmt(report.get("model_artifacts")))
    if report.get("checkpoint_s3_uri"):
        summary.add_row("checkpoints", str(report["checkpoint_s3_uri"]))
    if report.get("hyperparameters_not_checked"):  # a recipe's own script whose parser could not be read
        summary.add_row("hyperparameters", Text(str(report["hyperparameters_not_checked"]), style="yellow"))
    if report.get("model_warning"):  # a local run whose script wrote no model
        summary.add_row("model", Text(str(report["model_warning"]), style="yellow"))
    # A local run's environment is a throwaway one, gone with the run.
    env = "ENV" if report.get("local_mode") or not env else env
    if report.get("endpoint_name"):
        if report.get("endpoint_status"):
            env = report.get("endpoint_env") or env
        summary.add_row("endpoint", f"{report['endpoint_name']} ({_endpoint_state(report, env)})")
    if report.get("model_package_arn"):
        summary.add_row("model version", _model_version(report, env))
    if isinstance(report.get("adapter"), dict):
        summary.add_row("adapter", adapter_report.describe(report["adapter"]))
    if isinstance(report.get("evaluation"), dict):
        summary.add_row("evaluation", _evaluation(report["evaluation"], env))
    return summary


def _evaluation(e: dict[str, Any], env: str | None = None) -> str:
    """The evaluation job's verdict, both models' scores, the difference and what it cost (docs/evaluation.md):
    'worse: f1 58.1 [52, 64] on 40 against 61.2 [55, 67.1] on 40 (tiny-qa/1); difference -3.1 (-5 to -1.2);
    1 x ml.g4dn.xlarge, 6 s, 0.0012 USD'. A report written before the scores were in it gives the
    difference alone, labelled as such."""
    difference = e.get("difference") or {}
    champion = e.get("champion_version_arn")
    champion = registry.ref_of_arn(champion, env) if champion and env else champion or "the champion"
    scores = e.get("scores") or {}
    compared = (
        f"{evaluation_gate.score_text(scores.get('challenger') or {})} against "
        f"{evaluation_gate.score_text(scores.get('champion') or {})} ({champion})"
        if scores.get("challenger")
        else f"against {champion}"
    )
    figures = (
        f": {e.get('metric')} {compared}; difference {evaluation_gate.difference_text(difference)}"
        if difference
        else ""
    )
    if e.get("verdict") == "failed":  # the job failed (docs/evaluation.md, "A failed evaluation"): its cause
        figures = f": {e.get('reason') or 'no cause given'}"
        if (
            "processing_job_name" in e and e["processing_job_name"] is None
        ):  # refused before the job: none ran
            return f"failed{figures}; no evaluation job was created (nothing billed)"
    verdict, so_far = e.get("verdict"), ""
    if verdict is None:  # the run stored none (stopped during it): the job as it is, what it cost so far
        verdict, so_far = "no verdict", " so far"
        figures = f": evaluation job {e.get('processing_job_name')} {e.get('processing_job_status')}"
    usd = "-" if e.get("cost_usd") is None else f"{float(e['cost_usd']):.4f}"
    return (
        f"{verdict}{figures}; {_fmt(e.get('instance_count'))} x {_fmt(e.get('instance_type'))}, "
        f"{_fmt(e.get('seconds'), ' s')}, {usd} USD{so_far}"
    )


def _cost(report: dict[str, Any]) -> str:
    """The training cost, and its price per instance hour; a local run's, as it would be on AWS."""
    cost = report.get("cost_usd")
    price = report.get("price_per_hour_usd")
    aws_cost = ("-" if cost is None else f"{float(cost):.4f} USD") + (
        "" if price is None else f" at {float(price):.4g} USD/h per instance"
    )
    if report.get("local_mode"):
        # A local run bills nothing; what it shows is the same job on the recipe's instances on AWS.
        return f"0 USD here; on AWS: {aws_cost} (the recipe's instances, this run's time)"
    return aws_cost


def _endpoint_state(report: dict[str, Any], env: str) -> str:
    """The endpoint's state: up (its price, cost so far), deleted, or kept; with the command that deletes it."""
    name = report["endpoint_name"]
    if report.get("endpoint_status"):
        price, so_far = report.get("endpoint_price_per_hour_usd"), report.get("endpoint_cost_so_far_usd")
        cost = "price unknown" if price is None else f"{float(price):.4g} USD/h"
        cost += "" if so_far is None else f", {float(so_far):.4f} USD so far"
        per_million = report.get("endpoint_usd_per_million_tokens")
        cost += "" if per_million is None else f", {float(per_million):.4g} USD per million tokens"
        return f"up: {report['endpoint_status']}, {cost}; `hfpipe endpoints delete {name} --env {env}`"
    if report.get("endpoint_deleted"):
        return "deleted"
    price = report.get("endpoint_price_per_hour_usd")
    billed = (
        ""
        if price is None
        else f", {float(price):.4g} USD/h until deleted (by you, or once expired and idle by the reaper)"
    )
    return f"kept{billed}; delete it with `hfpipe endpoints delete {name} --env {env}`"


def _model_version(report: dict[str, Any], env: str) -> str:
    """The Register step's version (hfpipe.core.promotion.registry), and where it is decided on (`hfpipe models`)."""
    group, number = str(report["model_package_arn"]).rsplit("/", 2)[-2:]
    where = (
        "in the run's own registry, which ended with the run"
        if report.get("local_mode")
        else f"`hfpipe models --env {env}`"
    )
    return f"{group}/{number} ({where})"


def _metrics_table(metrics: dict[str, Any]) -> Table:
    """The final metrics, by name."""
    table = Table(title="final metrics", title_justify="left")
    table.add_column("metric")
    table.add_column("value", justify="right")
    for name, value in sorted(metrics.items()):
        table.add_row(name, _fmt(float(value)) if isinstance(value, int | float) else str(value))
    return table


def _smoke_table(smoke: dict[str, Any]) -> Table:
    """The smoke test's outcome, latency and response."""
    table = Table(title="smoke test", show_header=False, title_justify="left")
    table.add_column(style="bold")
    table.add_column()
    table.add_row("ok", Text(_fmt(smoke.get("ok")), style="green" if smoke.get("ok") else "red"))
    table.add_row("latency", _fmt(smoke.get("latency_ms"), " ms"))
    table.add_row("response", Text(str(smoke.get("response"))))
    return table


def plot_losses(
    series: dict[str, list[tuple[Any, float]]], path: Path, title: str, xlabel: str | None = None
) -> Path:
    """Write the training/eval loss curves to a PNG (x: `xlabel`, or the time for CloudWatch's series);
    raises ValueError when there is no loss to plot."""
    import matplotlib

    matplotlib.use("Agg")  # no display needed; must precede pyplot
    import matplotlib.pyplot as plt

    losses = {name: points for name, points in series.items() if "loss" in name.lower() and points}
    if not losses:
        raise ValueError("no loss metrics")
    fig, ax = plt.subplots(figsize=(8, 4.5))
    try:
        for name, points in sorted(losses.items()):
            xs = [p[0] for p in points]
            ax.plot(xs, [p[1] for p in points], marker="o", markersize=3, label=name)
        ax.set_title(title)
        ax.set_xlabel(
            xlabel or ("time" if isinstance(next(iter(losses.values()))[0][0], datetime) else "step")
        )
        ax.set_ylabel("loss")
        ax.legend()
        ax.grid(True, alpha=0.3)
        fig.autofmt_xdate()
        fig.tight_layout()
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=100)
    finally:
        plt.close(fig)
    return path
