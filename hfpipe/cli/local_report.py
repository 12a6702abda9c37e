"""`hfpipe report --local`: the report a local run wrote (`hfpipe local`), and its loss curves."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from rich.console import Console, Group

from hfpipe.cli.aws import HfpipeError
from hfpipe.core import json_text


def local_series(run_dir: Path) -> tuple[dict[str, list[tuple[Any, float]]], str]:
    """A local run's loss curves: from the Trainer's trainer_state.json (x: the training step) when the run
    saved one, else from the loss lines of its training log (x: the epoch they print)."""
    from hfpipe.cli.report import history_loss_series, local_loss_series
    from hfpipe.local import outputs

    state = outputs.trainer_state(run_dir)
    if state is not None:
        try:
            series = history_loss_series(json.loads(state.read_text(encoding="utf-8")))
        except (ValueError, RecursionError):  # cut short while written: the log still has the lines
            series = {}
        if series:
            return series, "training step"
    log = run_dir / outputs.TRAINING_LOG
    text = log.read_text(errors="replace") if log.is_file() else ""
    return local_loss_series(text), "epoch"


def report_local(args: argparse.Namespace, console: Console) -> int:
    """`report --local`: the report a local run wrote, and its loss curves from the run's training log."""
    from hfpipe.cli.logs import local_run_dir, read_local_report, runs_out
    from hfpipe.cli.report import plot_losses, render_report
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
        series, xlabel = local_series(run_dir)
        try:
            path = plot_losses(series, Path(args.plot), title=run_dir.name, xlabel=xlabel)
        except ValueError:
            raise HfpipeError(
                f"local run {run_dir.name}: nothing to plot, its training log has no loss lines (the Trainer "
                "logs the loss every `logging_steps` steps, more than this run trained); run it again with "
                "--set training.hyperparameters.logging_steps=1"
            ) from None
        console.print(f"loss plot: {path}")
    return 0
