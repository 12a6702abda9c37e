"""`hfpipe completion bash|zsh|tcsh`: a shell completion script, generated from the parser itself by shtab."""

from __future__ import annotations

import argparse
import sys

from hfpipe.cli.parser import Subparsers


def add_to(sub: Subparsers) -> None:
    """`hfpipe completion`'s arguments and help."""
    p = sub.add_parser("completion", help="print a shell completion script (bash, zsh or tcsh)")
    p.add_argument("shell", choices=["bash", "zsh", "tcsh"], help="the shell to complete in")
    p.set_defaults(func=cmd_completion, command_parser=p)


def cmd_completion(args: argparse.Namespace) -> int:
    """Print the completion script for a shell (the parser that built it walks the whole command)."""
    import shtab

    sys.stdout.write(shtab.complete(args.root_parser, shell=args.shell))
    return 0
