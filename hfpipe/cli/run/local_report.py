"""`hfpipe report --local`: the report a local run wrote (`hfpipe local`), and its loss curves."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from rich.console import Console, Group

from hfpipe.cli import terminal
from hfpipe.cli.aws import HfpipeError
from hfpipe.core import json_text


def run_places(run_dir: Path, job: dict[str, Any], report: dict[str, Any]) -> list[Any]:
    """A local run's places of loss values (hfpipe.cli.run.loss_curves): its trainer_state.json, its training log,
    its final metrics; its account, and CloudWatch's metrics with it, ended with the run. ``job``: its
    training_job.json ({} for a run of an earlier version, which wrote none)."""
    from hfpipe.cli.run import loss_curves
    from hfpipe.local import outputs

    def state() -> loss_curves.Series:
        found = outputs.trainer_state(run_dir)
        return {} if found is None else loss_curves.state_of(found.read_text(encoding="utf-8"))

    def log() -> str:
        path = run_dir / outputs.TRAINING_LOG
        return path.read_text(errors="replace") if path.is_file() else ""

    final = loss_curves.job_final_metrics(job) or dict(report.get("final_metrics") or {})
    return [
        loss_curves.Place("its trainer_state.json", "training step", state),
        *loss_curves.log_places(log, loss_curves.job_definitions(job)),
        loss_curves.final_place(final),
    ]


def local_curves(run_dir: Path, report: dict[str, Any]) -> tuple[Any, list[str], dict[str, Any]]:
    """A local run's loss curves by the rule `report --plot` reads a job by (None: none), the places looked at,
    and its training job's description ({}: none recorded)."""
    from hfpipe.cli.run import loss_curves
    from hfpipe.local import outputs

    described = run_dir / outputs.TRAINING_JOB
    try:
        job = json.loads(described.read_text()) if described.is_file() else {}
    except (OSError, ValueError):  # cut short: the report still says what it can
        job = {}
    curves, looked = loss_curves.find(run_places(run_dir, job, report))
    return curves, looked, job if isinstance(job, dict) else {}


def _nothing_to_plot(run_dir: Path, looked: list[str], job: dict[str, Any]) -> str:
    """The one line for a local run without a loss value: the advice valid for the script it ran."""
    from hfpipe.cli.run import loss_curves
    from hfpipe.cli.run.job_script import job_script
    from hfpipe.local import outputs

    subject = f"local run {run_dir.name}"
    if not job:  # no advice without knowing the script and the metric definitions
        return (
            f"{subject}: nothing to plot, no loss value in {', '.join(looked)}; the run recorded no "
            f"{outputs.TRAINING_JOB} (an earlier hfpipe made it), so its script and metric definitions are not "
            "known: run it again for a run that records them"
        )
    name = str(job.get("TrainingJobName", ""))
    # The toolkit's copy of the job's own source, downloaded into the run's folder (hfpipe.local.runtime).
    script = job_script(job, lambda uri: (run_dir / outputs.SOURCE_ARCHIVE.format(job=name)).read_bytes())
    return loss_curves.nothing_to_plot(subject, looked, loss_curves.job_definitions(job), script)


def report_local(args: argparse.Namespace, console: Console) -> int:
    """`report --local`: the report a local run wrote, and its loss curves from the run's training log."""
    from hfpipe.cli.run.logs import local_run_dir, read_local_report, runs_out
    from hfpipe.cli.run.report import render_report
    from hfpipe.local import outputs

    out = runs_out(args.out)
    run_dir = local_run_dir(out, args.execution, finished=args.execution is None)
    report_file = run_dir / outputs.REPORT
    runs = outputs.run_folders(out)
    if not report_file.is_file():
        state = "was interrupted" if (run_dir / outputs.INTERRUPTED).exists() else "has not finished"
        done = [r.name for r in runs if (r / outputs.REPORT).is_file()]
        hint = f"; the newest finished one: {done[-1]} (`hfpipe report {done[-1]} --local`)" if done else ""
        raise HfpipeError(
            f"local run {run_dir.name} {state}: it has no {outputs.REPORT}{hint}"
        )  # oldest first: the runs after this one are newer and unfinished
    newer = [r.name for r in runs[runs.index(run_dir) + 1 :]]
    if args.execution is None and newer:
        print(
            f"note: showing {run_dir.name}, the newest finished local run; newer, unfinished or interrupted: "
            f"{', '.join(newer)}",
            file=sys.stderr,
        )
    report = read_local_report(run_dir)
    report["local_mode"] = True
    if args.json:
        sys.stdout.write(json_text.dumps(report, indent=2, sort_keys=True, default=str) + "\n")
    else:
        console.print(Group(*render_report(report)))
    if args.plot:
        from hfpipe.cli.run import loss_curves

        curves, looked, job = local_curves(run_dir, report)
        if curves is None:
            raise HfpipeError(_nothing_to_plot(run_dir, looked, job))
        terminal.said(args, console, loss_curves.plot(curves, Path(args.plot), title=run_dir.name))
    return 0
