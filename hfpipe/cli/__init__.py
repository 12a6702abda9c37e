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
from hfpipe.cli.parser import Parser

#: Each command's module (its `add_to` registers the commands named, in the order `hfpipe --help` lists
#: them) and each command's one-line help. A command line imports only the module of the command it runs:
#: the others are listed from here, so `hfpipe --help` and `hfpipe models ...` skip importing every
#: command (boto3's, rich's and the serving code's modules); tests/cli/test_lazy_parser.py holds this table
#: equal to what the modules register.
COMMANDS: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = (
    ("hfpipe.cli.recipe.recipes", (("recipes", "list the recipes, or show one resolved"),)),
    ("hfpipe.cli.run.start", (("start", "validate a recipe and start an execution in an environment"),)),
    ("hfpipe.cli.run.watch", (("watch", "live view of an execution until it ends, then its report"),)),
    (
        "hfpipe.cli.run.cleanup",
        (
            ("stop", "stop an execution, its training job and the endpoint it created"),
            ("cleanup", "delete the endpoints, configs and models the pipeline left (by tag)"),
        ),
    ),
    ("hfpipe.cli.run.report_command", (("report", "metrics, cost and artifacts of an execution"),)),
    (
        "hfpipe.cli.run.executions",
        (("list", "recent executions of an environment, and the endpoints they left up"),),
    ),
    ("hfpipe.cli.recipe.data", (("data", "data sets in the environment's data bucket"),)),
    (
        "hfpipe.cli.deploy.invoke",
        (("invoke", "send requests to an endpoint (or to `hfpipe local --serve`)"),),
    ),
    (
        "hfpipe.cli.deploy.endpoints",
        (("endpoints", "the environment's endpoints and their cost; delete one"),),
    ),
    (
        "hfpipe.cli.promotion.models",
        (("models", "registered model versions: list, approve, reject, compare, download"),),
    ),
    (
        "hfpipe.cli.deploy.deploy",
        (
            (
                "deploy",
                "put an approved model version on a named endpoint (blue/green), or an adapter on the shared base",
            ),
        ),
    ),
    ("hfpipe.cli.run.logs", (("logs", "an execution's training log (every instance), or a local run's"),)),
    (
        "hfpipe.cli.promotion.promote",
        (("promote", "copy an approved version of the source environment into this one (promote_from)"),),
    ),
    ("hfpipe.cli.completion", (("completion", "print a shell completion script (bash, zsh or tcsh)"),)),
    (
        "hfpipe.cli.local",
        (("local", "run a recipe end to end on this machine, no AWS account; or serve an environment"),),
    ),
)
#: Every command: the whole parser, for the completion script (it walks the whole parser) and the tests.
ALL = "*"


def build_parser(command: str | None = ALL) -> argparse.ArgumentParser:
    """The argument parser of every command (`command`: the one command line's command, whose module alone is
    imported and declares its arguments; the others are listed by name and help only; None: no command's)."""
    import importlib

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
    for module, commands in COMMANDS:
        if command == ALL or command in dict(commands):
            importlib.import_module(module).add_to(sub)
        else:
            for name, help_text in commands:
                sub.add_parser(name, help=help_text)
    if command == ALL:
        # The completion script walks the whole parser.
        sub.choices["completion"].set_defaults(root_parser=parser)
    return parser


def _command_of(words: list[str]) -> str | None:
    """The command a command line runs: its first word when that names one (the top level has no option
    that takes a value), else None (`hfpipe --help`, a mistyped command). `completion` walks every command."""
    known = {name for _, commands in COMMANDS for name, _ in commands}
    first = words[0] if words else None
    if first == "completion":
        return ALL
    return first if first in known else None


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; returns the exit status (the console script exits with it)."""
    words = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(_command_of(words))
    try:
        args, extra = parser.parse_known_args(words)
        if args.func is None:
            # `hfpipe` (or `hfpipe data`) alone: what there is to run, not one line.
            args.command_parser.print_help()
            return 2
        if extra:
            # The subcommand's own usage and error, not the top level's (`hfpipe start --bogus`).
            args.command_parser.error(f"unrecognized arguments: {' '.join(extra)}")
    except SystemExit as exc:  # argparse has printed usage and the problem
        return int(exc.code or 0)
    from hfpipe.cli import faults

    return faults.run(args.func, args)
