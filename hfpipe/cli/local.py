"""`hfpipe local`: the pipeline end to end on this machine (see DESIGN.md, "Local mode")."""

from __future__ import annotations

import argparse

from rich.console import Console

from hfpipe.aws import HfpipeError


def run(args: argparse.Namespace, console: Console) -> int:
    """Run one recipe through the local engine; placeholder until the engine is merged."""
    raise HfpipeError("local mode is not available in this build yet (hfpipe.local_engine missing)")
