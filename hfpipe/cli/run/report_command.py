"""`hfpipe report`: an execution's report (or a local run's, with --local), as text or JSON, and its loss
curves as a PNG; the report itself is built by hfpipe.cli.run.report."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rich.console import Group

from hfpipe.cli import aws, terminal
from hfpipe.cli.aws import HfpipeError, UsageError
from hfpipe.cli.parser import (
    LOCAL_EXCLUDES,
    Subparsers,
    execution_argument,
    local_run_options,
    option_rules,
)
from hfpipe.cli.run.report import build_report, render_report
from hfpipe.core import json_text


def add_to(sub: Subparsers) -> None:
    """`hfpipe report`'s arguments and help."""
    p = sub.add_parser("report", help="metrics, cost and artifacts of an execution")
    execution_argument(p, optional="with --local: a local run's name; default: the newest")
    p.add_argument("--plot", metavar="FILE.png", help="write the training/eval loss curves to FILE.png")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    local_run_options(p, "a local run's report (hfpipe local)")
    option_rules(p, needs={"--out": "--local"}, excludes=LOCAL_EXCLUDES)
    p.set_defaults(func=cmd_report, command_parser=p)


def cmd_report(args: argparse.Namespace) -> int:
    """Print an execution's report (or JSON); with --plot, write its loss curves to a PNG."""
    from hfpipe.cli.run.execution import snapshot

    if args.plot is not None:
        from hfpipe.cli.paths import output_file

        if not args.plot.lower().endswith(".png"):
            raise HfpipeError(f"--plot {args.plot!r} must name a .png file")
        output_file(args.plot, "--plot")
    if args.local:
        from hfpipe.cli.run.local_report import report_local

        return report_local(args, terminal.console())
    if not args.execution:
        raise UsageError("hfpipe report needs an EXECUTION (its ARN, or its name with --env), or --local")
    clients = aws.clients_for(args)
    desc = aws.resolve_execution(clients, args.execution, args.env)
    snap = snapshot(clients, desc["executionArn"])
    report = build_report(clients, snap)
    from hfpipe.cli.deploy.endpoints import add_to_report

    add_to_report(clients.sagemaker, report, snap, clients)
    console = terminal.console()
    if args.json:
        sys.stdout.write(json_text.dumps(report, indent=2, sort_keys=True, default=str) + "\n")
    else:
        console.print(Group(*render_report(report, snap.plan.env if snap.plan else None)))
    if args.plot:
        if not snap.training_job:
            raise HfpipeError(f"execution {snap.execution_name!r} has no training job yet: nothing to plot")
        from hfpipe.cli.run.loss_curves import plot_job

        terminal.said(
            args, console, plot_job(clients, snap.training_job, Path(args.plot), snap.execution_name)
        )
    return 0
