"""The command's argparse parser class: "did you mean" (difflib) for a mistyped option, subcommand or choice,
and the positional ACTION of a command that has several, each described in the help."""

from __future__ import annotations

import argparse
import difflib
import re
import sys
from collections.abc import Callable, Sequence
from typing import Any

#: A word argparse reads as a value though it starts with "-": a negative number (-1, -0.5, -.5, -1e3).
_NEGATIVE_NUMBER = re.compile(r"^-\.?\d")
#: Options that take no value (flags, counts, --help, --version).
_NO_VALUE = (
    argparse._StoreConstAction,
    argparse._AppendConstAction,
    argparse._CountAction,
    argparse._HelpAction,
    argparse._VersionAction,
    argparse.BooleanOptionalAction,
)


#: `hfpipe local --serve`'s port and `hfpipe invoke --local`'s: hfpipe.local.serving.serve.DEFAULT_PORT, the port
#: SageMaker's model containers listen on (not imported: the parser is built for every command, and serve
#: imports the HTTP server; tests/cli/test_usage.py holds them equal).
LOCAL_PORT = 8080


#: The namespace attributes `option_rules` works with: the options given, and the command's rules.
GIVEN, RULES = "_given", "_option_rules"


class Parser(argparse.ArgumentParser):
    """argparse with "did you mean" (difflib): a mistyped option is named as unknown with the option meant,
    before it can be misread as the value of a positional (`hfpipe local --recpie tiny-lora`), and a
    mistyped subcommand or choice gets the close one. Every subcommand's parser is one of these (argparse
    makes subparsers of the parent's class), and argparse hands each its own words."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.register("action", "parsers", _DescribedSubparsers)

    def format_usage(self) -> str:
        return self._action_optional(super().format_usage())

    def format_help(self) -> str:
        return self._action_optional(super().format_help())

    def _action_optional(self, text: str) -> str:
        """The usage of a command whose action may be left out (`with_actions`: a command line without one runs
        the default action or the command's own options) shows it in brackets, as argparse shows an optional
        argument: `hfpipe local [-h] [--recipe RECIPE] ... [ACTION ...]`."""
        if "default_action" not in self._defaults:
            return text
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction) and action.metavar:
                return text.replace(f" {action.metavar} ...", f" [{action.metavar} ...]", 1)
        return text

    # typeshed spells the namespace's type with overloads; one signature covers them all here.
    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: Any = None
    ) -> tuple[Any, list[str]]:
        words = self._with_default_action(list(sys.argv[1:] if args is None else args))
        self._refuse_unknown_option(words)
        parsed, extra = super().parse_known_args(words, namespace)
        # Which options the command line gave (a value other than the default), for `option_rules`; a
        # subcommand's parser records its own, argparse copies them up, each level adds its own.
        given: set[str] = set(getattr(parsed, GIVEN, ()))
        for action in self._actions:
            if action.option_strings and action.dest != argparse.SUPPRESS and hasattr(parsed, action.dest):
                value = getattr(parsed, action.dest)
                if not isinstance(value, Deferred) and value != action.default:
                    given.add(max(action.option_strings, key=len))
        setattr(parsed, GIVEN, frozenset(given))
        return resolve_deferred(parsed), extra

    def _with_default_action(self, words: list[str]) -> list[str]:
        """A command line without an action runs the command's default one (`with_actions`): `hfpipe models
        --env dev` is `hfpipe models list --env dev`, and gets list's options, help and errors."""
        default = self._defaults.get("default_action")
        if default is None or self._subparsers is None:
            return words
        if words and (not words[0].startswith("-") or words[0] in ("-h", "--help")):
            return (
                words  # an action (or a mistyped one, for argparse's "did you mean"), or the command's help
            )
        return [default, *words]

    def _refuse_unknown_option(self, words: list[str]) -> None:
        """An option this parser does not have (abbreviations of its own, as argparse allows, are not
        unknown); a parser with subcommands checks only the words before its subcommand."""
        options = sorted(self._option_string_actions)
        takes_value = False
        for word in words:
            if takes_value:
                takes_value = False
                continue
            if word == "--" or (self._subparsers is not None and not word.startswith("-")):
                return  # the rest are positionals, or the subcommand's to check
            if not word.startswith("-") or word == "-" or _NEGATIVE_NUMBER.match(word):
                continue
            name = word.split("=", 1)[0] if word.startswith("--") else word[:2]
            known = [o for o in options if o == name or (name.startswith("--") and o.startswith(name))]
            if known:
                # Its value is the next word (`local --recipe tiny-lora up`), not a subcommand.
                action = self._option_string_actions[known[0]]
                takes_value = "=" not in word and action.nargs is None and bool(action.option_strings)
                takes_value = takes_value and not isinstance(action, _NO_VALUE)
                continue
            close = difflib.get_close_matches(name, [o for o in options if o.startswith("--")], n=1)
            self.error(f"unrecognized arguments: {word}" + (f"; did you mean {close[0]}?" if close else ""))

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        try:
            super()._check_value(action, value)
        except argparse.ArgumentError as err:
            close = difflib.get_close_matches(str(value), [str(c) for c in action.choices or ()], n=1)
            if not close:
                raise
            raise argparse.ArgumentError(action, f"{err.message}; did you mean {close[0]!r}?") from None


#: What add_subparsers returns (argparse's private class, named once).
Subparsers = argparse._SubParsersAction


class _DescribedSubparsers(argparse._SubParsersAction):  # type: ignore[type-arg]
    """A subcommand's or action's own `--help` opens with the line the list of its parent shows for it (argparse
    shows a parser's description, not its help, there)."""

    def add_parser(self, name: str, **kwargs: Any) -> Any:
        if kwargs.get("help") and "description" not in kwargs:
            text = kwargs["help"]
            kwargs["description"] = text[:1].upper() + text[1:] + ("" if text.endswith(".") else ".")
        parser = super().add_parser(name, **kwargs)
        parser.set_defaults(**{RULES: ()})  # its own option_rules, not its parent command's
        return parser


class Deferred:
    """A default that needs more than the parser knows when it is built (the checkout a folder lives in):
    resolved once, by `Parser.parse_known_args`, as the arguments are parsed, so no command can see it
    unset. Its text is what `--help` shows for `%(default)s`."""

    def __init__(self, resolve: Callable[[], Any], text: str) -> None:
        self.resolve = resolve
        self.text = text

    def __str__(self) -> str:
        return self.text


def resolve_deferred(namespace: Any) -> Any:
    """Every `Deferred` default of ``namespace`` replaced by its value."""
    for key, value in vars(namespace).items():
        if isinstance(value, Deferred):
            setattr(namespace, key, value.resolve())
    return namespace


def aws_options(parser: argparse.ArgumentParser) -> None:
    """--profile and --region, for a command that calls AWS."""
    group = parser.add_argument_group("AWS")
    group.add_argument("--profile", help="AWS profile (default: AWS_PROFILE or the default profile)")
    group.add_argument(
        "--region",
        help="AWS region (default: AWS_REGION, then AWS_DEFAULT_REGION, then the profile's region)",
    )


def env_name(text: str) -> str:
    """--env in form (``type=`` of every --env): a usage error (exit 2) before credentials or any AWS call
    otherwise, by the rule the stacks apply (hfpipe.core.names.env_name_problem)."""
    from hfpipe.core import names

    problem = names.env_name_problem(text)
    if problem:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a valid environment name; accepted: {problem}, as in cdk.json"
        )
    return text


def ttl(text: str) -> str:
    """--ttl in form (``type=`` of every --ttl): 90m, 8h, 3d or none, else a usage error (exit 2) before anything
    is read or made, by the rule the Lambdas apply (hfpipe.core.deploy.expiry.parse_ttl)."""
    from hfpipe.core.deploy import expiry

    try:
        expiry.parse_ttl(text, "--ttl")
    except expiry.TtlError as err:
        raise argparse.ArgumentTypeError(str(err).removeprefix("--ttl: ")) from None
    return text.strip().lower()


def ttl_option(parser: argparse.ArgumentParser, what: str) -> None:
    """--ttl: how long the endpoint a command creates lives (docs/deploy.md, "Time to live")."""
    parser.add_argument(
        "--ttl",
        type=ttl,
        metavar="TTL",
        help=f"{what} expires this long after it is created: 90m, 8h, 3d, or none (never); default: cdk.json's "
        "endpoint_ttl_hours. The environment's reaper deletes an expired endpoint once idle",
    )


def env_option(parser: argparse.ArgumentParser, required: bool = True, text: str = "") -> None:
    """--env: an environment of cdk.json."""
    parser.add_argument(
        "--env", type=env_name, required=required, help=text or "environment name (as in cdk.json)"
    )


def recipe_options(
    parser: argparse.ArgumentParser, example: str, required: bool = True, also: str = ""
) -> None:
    """--recipe and --set, as start and local take them (``also``: what else --set does there)."""
    parser.add_argument(
        "--recipe", required=required, help="recipe name (see `hfpipe recipes`) or path to a recipe file"
    )
    parser.add_argument(
        "--set",
        dest="sets",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help=f"override one recipe field, e.g. --set {example} (repeatable){also}",
    )


def dry_run_options(parser: argparse.ArgumentParser, of: str = "") -> None:
    """--dry-run and its --json, as start and local take them (``of``: whose request it shows)."""
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help=f"show the plan, the cost estimate and the CreateTrainingJob request{of}; start nothing",
    )
    parser.add_argument("--json", action="store_true", help="with --dry-run: print the plan as JSON")


def with_actions(
    parser: argparse.ArgumentParser, title: str = "ACTION", default: str | None = "list"
) -> Subparsers:
    """The actions of a command that has several (`models approve`), each a parser of its own with its own
    options and help; ``default``: the action a command line without one runs (`hfpipe models --env dev` is
    `hfpipe models list --env dev`), None for a command whose own options run it (`hfpipe local --recipe`)."""
    sub = parser.add_subparsers(dest="action", metavar=title)
    parser.set_defaults(action=None, default_action=default)
    return sub


def listing_command(
    sub: Subparsers, name: str, text: str, listing: str
) -> tuple[Subparsers, argparse.ArgumentParser]:
    """A command of several actions whose default is ``list`` (`hfpipe models`): its actions, and the list
    action's parser (``listing``: its help)."""
    p = sub.add_parser(name, help=text)
    p.set_defaults(command_parser=p)
    actions = with_actions(p)
    return actions, actions.add_parser("list", help=f"{listing} (the default)")


def runs_folder_option(parser: argparse.ArgumentParser, text: str) -> None:
    """--out, the folder of local runs (``text``: what it is for in this command); its default, the
    checkout's `.hfpipe/local` (hfpipe.local.outputs.runs_folder), resolved as the arguments are parsed."""

    def checkout_runs() -> str:
        from hfpipe.local.outputs import runs_folder

        return runs_folder()

    parser.add_argument(
        "--out",
        metavar="DIR",
        type=_folder,
        default=Deferred(checkout_runs, ".hfpipe/local in the checkout"),
        help=f"{text} (default: %(default)s)",
    )


def local_run_options(parser: argparse.ArgumentParser, text: str) -> None:
    """--local (``text``: what the command reads of a local run) with its --out, then the AWS options."""
    parser.add_argument("--local", action="store_true", help=text)
    runs_folder_option(parser, "folder of the local runs, with --local")
    aws_options(parser)


def execution_argument(parser: argparse.ArgumentParser, optional: str = "") -> None:
    """EXECUTION and --env, as watch, stop, report and logs take them (``optional``: what a command line
    without EXECUTION means, for a command where it may be left out)."""
    parser.add_argument(
        "execution",
        metavar="EXECUTION",
        nargs="?" if optional else None,
        help="execution ARN, or its name together with --env" + (f" ({optional})" if optional else ""),
    )
    parser.add_argument(
        "--env", type=env_name, help="environment whose state machine ran EXECUTION (when it is a name)"
    )


def version_ref(text: str) -> str:
    """VERSION on the command line (``type=`` of the argument): RECIPE/N or a version ARN in form, a usage
    error (exit 2) before any AWS call otherwise (hfpipe.core.promotion.registry.check_ref_form)."""
    from hfpipe.core.promotion import registry

    try:
        return registry.check_ref_form(text)
    except registry.RegistryRefError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def _folder(text: str) -> str:
    """A folder given on the command line: a path that is not empty and not a file (it may not exist yet)."""
    import os

    if not text.strip():
        raise argparse.ArgumentTypeError(f"{text!r} is not accepted; accepted: a folder path")
    if os.path.exists(text) and not os.path.isdir(text):
        raise argparse.ArgumentTypeError(f"{text!r} is a file; accepted: a folder path")
    return text


def option_rules(
    parser: argparse.ArgumentParser,
    needs: dict[str, str] | None = None,
    excludes: dict[tuple[str, str], str] | None = None,
) -> None:
    """What a command's options mean only together: ``needs`` maps an option to the one it is an option of
    (`--json`: `--dry-run`), ``excludes`` a pair that does not go together to why. Checked by `check_rules`
    before the command runs (faults.run): a usage error (exit 2) before any AWS call, never an option
    silently ignored."""
    rules = list(parser.get_default(RULES) or ())
    rules += [("needs", option, other, "") for option, other in (needs or {}).items()]
    rules += [("excludes", a, b, why) for (a, b), why in (excludes or {}).items()]
    parser.set_defaults(**{RULES: tuple(rules)})


def check_rules(args: argparse.Namespace) -> None:
    """`option_rules`' usage error for the first rule the command line breaks."""
    from hfpipe.cli.clients import UsageError

    given: frozenset[str] = getattr(args, GIVEN, frozenset())
    for kind, option, other, why in getattr(args, RULES, ()):
        if kind == "needs" and option in given and other not in given:
            raise UsageError(f"{option} is an option of {other}; pass {other} too, or drop {option}")
        if kind == "excludes" and option in given and other in given:
            raise UsageError(f"{option} does not go with {other}: {why}")


#: --local reads or reaches this machine (`hfpipe local`'s runs, its server), not an AWS environment.
LOCAL_EXCLUDES = {
    ("--env", "--local"): "--local reads this machine's runs and server, not an environment's; drop one",
    ("--profile", "--local"): "--local calls no AWS account; drop --profile",
    ("--region", "--local"): "--local calls no AWS account; drop --region",
}
