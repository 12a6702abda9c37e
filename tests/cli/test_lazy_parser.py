"""A command line imports only its own command's module: the other commands are listed from
hfpipe.cli.COMMANDS, which must say what their modules register, so every help stays as it was."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

import pytest

from hfpipe.cli import ALL, COMMANDS, build_parser


def _commands(parser: argparse.ArgumentParser) -> argparse._SubParsersAction:
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return sub


def test_the_table_lists_what_the_modules_register_in_order() -> None:
    sub = _commands(build_parser(ALL))
    registered = [(a.dest, a.help) for a in sub._choices_actions]
    assert registered == [command for _, commands in COMMANDS for command in commands]
    for module, commands in COMMANDS:
        assert module.startswith("hfpipe.cli."), module  # imported by name: within the CLI's own layer
        for name, _ in commands:
            func = sub.choices[name].get_default("func")
            # A command with actions keeps its func on each action's parser; its module is the table's.
            assert func is None or func.__module__ == module, name


@pytest.mark.parametrize("command", [None] + [name for _, commands in COMMANDS for name, _ in commands])
def test_each_help_is_the_whole_parsers(command: str | None) -> None:
    whole, lazy = build_parser(ALL), build_parser(command)
    assert lazy.format_help() == whole.format_help()
    if command is not None:
        assert (
            _commands(lazy).choices[command].format_help() == _commands(whole).choices[command].format_help()
        )


def test_help_imports_no_command_module() -> None:
    probe = (
        "import contextlib, io, json, sys\n"
        "from hfpipe.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    assert main(['--help']) == 0\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith(('hfpipe.cli.', 'boto3', 'rich')))))\n"
    )
    found = json.loads(
        subprocess.run([sys.executable, "-c", probe], capture_output=True, check=True, text=True).stdout
    )
    assert found == ["hfpipe.cli.parser"]
