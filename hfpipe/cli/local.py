"""`hfpipe local`: the pipeline end to end on this machine, no AWS account (DESIGN.md, "Local mode").

The pipeline is stood up by `hfpipe.local.run.LocalRun`; this command starts the execution and follows it
with `hfpipe watch`'s view on the local moto account, then writes the outputs to `--out/<execution name>/`.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from rich.console import Console

from hfpipe.cli.aws import Clients, HfpipeError


def run(args: argparse.Namespace, console: Console) -> int:
    """Run one recipe end to end locally; prints the live view, the smoke-test answer and the report."""
    from hfpipe.cli import recipes
    from hfpipe.core.names import default_execution_name
    from hfpipe.core.recipes import apply_overrides
    from hfpipe.local.substitute import for_this_machine, has_gpu

    loaded = recipes.load(args.recipe, args.sets)
    try:
        # The recipe as it would run (with --set), then what this machine needs instead.
        substitutions = for_this_machine(apply_overrides(loaded.raw, loaded.overrides), gpu=has_gpu())
    except ValueError as err:
        raise HfpipeError(f"recipe {loaded.name!r} cannot run locally: {err}") from None
    name = default_execution_name(loaded.name)
    out = Path(args.out).resolve() / name
    out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    console.print(f"local run {name}: building the pipeline and the fixtures (output in {out})")
    lines = substitutions.lines()
    console.print(
        f"substituted for this machine ({len(lines)}):" if lines else "substituted for this machine: nothing"
    )
    for line in lines:
        console.print(f"  - {line}", markup=False, highlight=False)

    import boto3

    from hfpipe.cli.report import build_report
    from hfpipe.cli.watch import watch
    from hfpipe.local.run import LocalRun
    from hfpipe.local.stacks import LocalModeError

    try:
        with LocalRun(substitutions, out, Path(args.out).resolve() / ".cache") as local:
            try:
                # The overrides are in the substituted recipe already.
                execution_input = {"recipe": substitutions.recipe, "poll_seconds": 1}
                arn = local.start(name, execution_input)
                clients = Clients(boto3.Session(region_name=local.region))
                snap = watch(clients, arn, console, interval=0.5)
                left = local.leftovers()
            finally:
                local.close_endpoints()
            local.write_outputs(build_report(clients, snap))
    except LocalModeError as exc:
        raise HfpipeError(str(exc)) from None
    console.print(f"left in the local account: {sum(map(len, left.values()))} endpoints/configs/models")
    console.print(f"output: {out} ({time.monotonic() - started:.0f} s)")
    return 0 if snap.status == "SUCCEEDED" else 1
