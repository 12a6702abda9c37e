"""The console every command prints through."""

from __future__ import annotations

import argparse
import functools
import os
import sys
from collections.abc import Callable

from rich.console import Console


def console() -> Console:
    """Created per command so that whatever sys.stdout is now (tests capture it) gets the output."""
    # Logs and pipes have no width: do not squeeze tables into 80 columns there. soft_wrap keeps URIs whole.
    width = None if sys.stdout.isatty() or os.environ.get("COLUMNS") else 160
    return Console(soft_wrap=True, highlight=False, width=width)


def with_console(
    command: Callable[[argparse.Namespace, Console], int],
) -> Callable[[argparse.Namespace], int]:
    """A command that prints through a console, as the parser calls it: with the arguments alone."""

    @functools.wraps(command)
    def run(args: argparse.Namespace) -> int:
        return command(args, console())

    return run
