"""The console every command prints through."""

from __future__ import annotations

import argparse
import functools
import os
import sys
from collections.abc import Callable

from rich.console import Console


class _Console(Console):
    """rich's console, except where the reader of a pipe has gone: rich ends the process with status 1 there;
    this one raises BrokenPipeError, which every command ends on as the shell does (hfpipe.cli.faults: 141)."""

    def on_broken_pipe(self) -> None:
        import errno

        raise BrokenPipeError(errno.EPIPE, os.strerror(errno.EPIPE))


def console() -> Console:
    """Created per command so that whatever sys.stdout is now (tests capture it) gets the output."""
    # Logs and pipes have no width: do not squeeze tables into 80 columns there. soft_wrap keeps URIs whole.
    width = None if sys.stdout.isatty() or os.environ.get("COLUMNS") else 160
    return _Console(soft_wrap=True, highlight=False, width=width)


def with_console(
    command: Callable[[argparse.Namespace, Console], int],
) -> Callable[[argparse.Namespace], int]:
    """A command that prints through a console, as the parser calls it: with the arguments alone."""

    @functools.wraps(command)
    def run(args: argparse.Namespace) -> int:
        return command(args, console())

    return run


def said(args: argparse.Namespace, out: Console, line: str) -> None:
    """A line about what the command did besides its output: on stderr where stdout is JSON (`--json`), so that
    what is piped stays one JSON document."""
    if getattr(args, "json", False):
        print(line, file=sys.stderr)
    else:
        out.print(line, markup=False)
