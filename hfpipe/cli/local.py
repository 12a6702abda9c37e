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
    from hfpipe.local.run import FIXTURES

    loaded = recipes.load(args.recipe, args.sets)
    if loaded.name not in FIXTURES:
        raise HfpipeError(
            f"recipe {loaded.name!r} has no local fixtures; `hfpipe local` runs: {', '.join(sorted(FIXTURES))}"
        )
    name = default_execution_name(loaded.name)
    out = Path(args.out).resolve() / name
    out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    console.print(f"local run {name}: building the pipeline and the fixtures (output in {out})")

    import boto3

    from hfpipe.cli.report import build_report
    from hfpipe.cli.watch import watch
    from hfpipe.local.run import LocalRun
    from hfpipe.local.stacks import LocalModeError

    try:
        with LocalRun(
            loaded.name, loaded.resolved["training"]["channels"], out, Path(args.out).resolve() / ".cache"
        ) as local:
            try:
                execution_input = {**recipes.execution_input(loaded), "poll_seconds": 1}
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
