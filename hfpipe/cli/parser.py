"""The command's argparse parser class: "did you mean" (difflib) for a mistyped option, subcommand or choice,
and the positional ACTION of a command that has several, each described in the help."""

from __future__ import annotations

import argparse
import difflib
import re
import sys
from collections.abc import Sequence
from typing import Any

#: A word argparse reads as a value though it starts with "-": a negative number (-1, -0.5, -.5, -1e3).
_NEGATIVE_NUMBER = re.compile(r"^-\.?\d")


class Parser(argparse.ArgumentParser):
    """argparse with "did you mean" (difflib): a mistyped option is named as unknown with the option meant,
    before it can be misread as the value of a positional (`hfpipe local --recpie tiny-lora`), and a
    mistyped subcommand or choice gets the close one. Every subcommand's parser is one of these (argparse
    makes subparsers of the parent's class), and argparse hands each its own words."""

    # typeshed spells the namespace's type with overloads; one signature covers them all here.
    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: Any = None
    ) -> tuple[Any, list[str]]:
        words = list(sys.argv[1:] if args is None else args)
        self._refuse_unknown_option(words)
        return super().parse_known_args(words, namespace)

    def _refuse_unknown_option(self, words: list[str]) -> None:
        """An option this parser does not have (abbreviations of its own, as argparse allows, are not
        unknown); a parser with subcommands checks only the words before its subcommand."""
        options = sorted(self._option_string_actions)
        for word in words:
            if word == "--" or (self._subparsers is not None and not word.startswith("-")):
                return  # the rest are positionals, or the subcommand's to check
            if not word.startswith("-") or word == "-" or _NEGATIVE_NUMBER.match(word):
                continue
            name = word.split("=", 1)[0] if word.startswith("--") else word[:2]
            if name in options or (name.startswith("--") and any(o.startswith(name) for o in options)):
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


def actions(parser: argparse.ArgumentParser, actions: dict[str, str], default: str | None = "list") -> None:
    """The positional ACTION of a command that has several (`models approve`): each described in the help."""
    parser.add_argument(
        "action",
        nargs="?",
        choices=list(actions),
        default=default,
        help="; ".join(f"{name}: {text}" for name, text in actions.items()),
    )
