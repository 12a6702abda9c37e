"""hfpipe: the command-line tool of the pipelines (console script `hfpipe = hfpipe.cli:main`).

Every command, its options and what it does: docs/cli.md ("Command reference"); `hfpipe --help` and
`hfpipe COMMAND --help` print them from the parser.

Exit status: 0 success; 1 a one-line `error: ...` on stderr (or, for `watch`/`start --watch`, an execution
that did not succeed; for `logs --follow`, a job that did not complete; under an AWS fault, the line ends with
what still runs and what to run next: hfpipe.cli.faults); 2 bad command-line usage, argparse's or one the
command finds (`hfpipe` or `hfpipe data` alone prints its help on stdout; a mistyped command, option or choice
gets "did you mean"); 130 interrupted (Ctrl-C ending `local --serve` is its normal end: 0).

The commands sit in rooms by concern (recipe, run, deploy, promotion, adapters: docs/layers.md), over what
they share here: the parser, the console, AWS access, faults, paths, and `hfpipe local`'s commands.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from hfpipe import __version__
from hfpipe.cli import faults
from hfpipe.cli.parser import Parser


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every command."""
    parser = Parser(
        prog="hfpipe",
        description="Hugging Face fine-tuning pipelines on Amazon SageMaker, as code.",
    )
    parser.add_argument("--version", action="version", version=f"hfpipe {__version__}")
    # Not required: a bare `hfpipe` (or `hfpipe data`) prints its help (main).
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    parser.set_defaults(command_parser=parser, func=None)
    # The modules of the commands, in the order `hfpipe --help` lists them: each owns its arguments, its
    # help and what runs (its `add_to`, which registers one command or two: cleanup has stop and cleanup).
    from hfpipe.cli import completion, local
    from hfpipe.cli.deploy import deploy, endpoints, invoke
    from hfpipe.cli.promotion import models, promote
    from hfpipe.cli.recipe import data, recipes
    from hfpipe.cli.run import cleanup, executions, logs, report_command, start, watch

    for module in (
        recipes,
        start,
        watch,
        cleanup,
        report_command,
        executions,
        data,
        invoke,
        endpoints,
        models,
        deploy,
        logs,
        promote,
        completion,
        local,
    ):
        module.add_to(sub)
    # The completion script walks the whole parser.
    sub.choices["completion"].set_defaults(root_parser=parser)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; returns the exit status (the console script exits with it)."""
    parser = build_parser()
    try:
        args, extra = parser.parse_known_args(list(sys.argv[1:] if argv is None else argv))
        if args.func is None:
            # `hfpipe` (or `hfpipe data`) alone: what there is to run, not one line.
            args.command_parser.print_help()
            return 2
        if extra:
            # The subcommand's own usage and error, not the top level's (`hfpipe start --bogus`).
            args.command_parser.error(f"unrecognized arguments: {' '.join(extra)}")
    except SystemExit as exc:  # argparse has printed usage and the problem
        return int(exc.code or 0)
    return faults.run(args.func, args)
