"""`hfpipe local prune [--keep N] [--out DIR]`: remove old local runs, keeping the newest N.

Every `hfpipe local --recipe` leaves a folder under `--out` (default .hfpipe/local): its training log, model,
report and fixtures. Only local run folders are counted and removed (`hfpipe.local.outputs.run_folders` with
its unwritten ones: a real folder named as an execution, also one a run cut off before it wrote anything);
the shared `.cache`, links, files and any other folder under `--out` are never touched, and neither is a
run that may still be running.
"""

from __future__ import annotations

import argparse
import shutil
import time
from pathlib import Path

from rich.console import Console

from hfpipe.cli.aws import UsageError
from hfpipe.cli.parser import Subparsers, runs_folder_option
from hfpipe.cli.terminal import with_console
from hfpipe.local import outputs

#: Runs kept when --keep is not given.
DEFAULT_KEEP = 5
#: An unfinished run (no report, not interrupted) whose log changed this recently may still be training.
RUNNING_WITHIN_S = 3600


def _size(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and not p.is_symlink())


def _may_be_running(run: Path, now: float) -> bool:
    finished = any((run / marker).exists() for marker in (outputs.REPORT, outputs.INTERRUPTED))
    return not finished and now - outputs.last_written(run) < RUNNING_WITHIN_S


def add_to(actions: Subparsers) -> None:
    """`hfpipe local prune`: arguments and help."""
    p = actions.add_parser("prune", help="remove old local runs under --out, keeping the newest --keep N")
    p.add_argument(
        "--keep",
        type=int,
        metavar="N",
        default=DEFAULT_KEEP,
        help=f"keep the newest N local runs (default {DEFAULT_KEEP})",
    )
    runs_folder_option(p, "the folder of the local runs")
    p.set_defaults(func=with_console(prune), command_parser=p)


def prune(args: argparse.Namespace, console: Console) -> int:
    """Remove the local runs under --out but the newest --keep; print what went and what it freed."""
    from hfpipe.cli.run.logs import runs_out

    keep = args.keep
    if keep < 0:
        raise UsageError(f"--keep {keep} is not accepted; accepted: a whole number of runs, 0 or more")
    out = runs_out(args.out)
    runs = outputs.run_folders(out, unwritten=True)  # oldest first, every folder a run made
    old = runs[: max(0, len(runs) - keep)]
    now = time.time()
    removed = freed = 0
    for run in old:
        if _may_be_running(run, now):
            console.print(f"kept {run.name}: it has no report and wrote its log in the last hour (running?)")
            continue
        size = _size(run)
        shutil.rmtree(run)
        removed, freed = removed + 1, freed + size
        console.print(f"removed {run.name} ({size / 1e6:.1f} MB)")
    left = len(runs) - removed
    console.print(
        f"{out}: removed {removed} local run{'s' if removed != 1 else ''} ({freed / 1e6:.1f} MB), "
        f"{left} left (--keep {keep})"
    )
    return 0
