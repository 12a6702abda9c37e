"""Errors and help as people expect them: a mistyped option, command, choice, recipe or instance type gets the
one meant; a bare `hfpipe` prints its help; every action of a command has its own help and options; hints
name the environment the user is in."""

from __future__ import annotations

import argparse
import json
from typing import Any

import pytest
from accounts import ACCOUNT
from cli_run import run, start_tiny_lora

from hfpipe.cli import build_parser
from hfpipe.core.recipe.recipes import resolve_recipe
from hfpipe.core.recipe.schema import RecipeError


@pytest.mark.parametrize(
    ("argv", "usage", "message"),
    [
        (
            ["local", "--recpie", "tiny-lora"],
            "usage: hfpipe local",
            "unrecognized arguments: --recpie; did you mean --recipe?",
        ),
        (
            ["start", "--env", "dev", "--recipe", "tiny-qa", "--dry-run", "--jsn"],
            "usage: hfpipe start",
            "unrecognized arguments: --jsn; did you mean --json?",
        ),
        (["--verison"], "usage: hfpipe [-h]", "unrecognized arguments: --verison; did you mean --version?"),
        (
            ["data", "upload", "x.jsonl", "--env", "dev", "--nmae", "n"],
            "usage: hfpipe data upload",
            "unrecognized arguments: --nmae; did you mean --name?",
        ),
        (["strat", "--env", "dev"], "usage: hfpipe [-h]", "(choose from 'recipes', 'start', "),
        (["models", "aprove", "--env", "dev"], "usage: hfpipe models", "did you mean 'approve'?"),
        (["local", "upp", "--env", "dev"], "usage: hfpipe local", "did you mean 'up'?"),
        (["strat"], "usage: hfpipe [-h]", "did you mean 'start'?"),
        # Each action has its own options: another action's, or the command's run's, are not taken.
        (["models", "list", "--env", "dev", "--to", "d"], "usage: hfpipe models list", "arguments: --to"),
        (["models", "--env", "dev", "--to", "d"], "usage: hfpipe models list", "arguments: --to"),
        (["endpoints", "list", "x", "--env", "dev"], "usage: hfpipe endpoints list", "arguments: x"),
        (["recipes", "show"], "usage: hfpipe recipes show", "required: NAME"),
        (["local", "up"], "usage: hfpipe local up", "required: --env"),
        (["local", "prune", "--recipe", "tiny-qa"], "usage: hfpipe local prune", "arguments: --recipe"),
        (["local", "--recipe", "tiny-qa", "--keep", "2"], "usage: hfpipe local", "arguments: --keep"),
        (["local", "status", "--env", "dev"], "usage: hfpipe local status", "arguments: --env"),
        # A folder of local runs that is a file, in every command that takes one.
        (["logs", "--local", "--out", __file__], "usage: hfpipe logs", f"{__file__!r} is a file"),
        (["report", "--local", "--out", __file__], "usage: hfpipe report", f"{__file__!r} is a file"),
        (["local", "prune", "--out", __file__], "usage: hfpipe local prune", f"{__file__!r} is a file"),
    ],
)
def test_a_mistyped_option_command_or_choice_gets_the_one_meant(
    argv: list[str], usage: str, message: str, capsys: Any
) -> None:
    code, out, err = run(capsys, *argv)
    assert (code, out) == (2, "")
    assert err.startswith(usage), err
    assert message in err.splitlines()[-1], err


def test_abbreviations_and_negative_numbers_are_still_read_as_argparse_reads_them(capsys: Any) -> None:
    code, out, err = run(capsys, "recipes", "show", "tiny-qa", "--js")  # --json, abbreviated
    assert (code, err) == (0, "")
    assert json.loads(out)["name"] == "tiny-qa"
    code, _, err = run(capsys, "watch", "x", "--env", "dev", "--interval", "-5")  # a value, not an option
    assert code == 2 and err.startswith("error: --interval: -5.0 is not accepted"), err


def test_a_mistyped_recipe_name_gets_the_one_meant(capsys: Any) -> None:
    code, out, err = run(capsys, "start", "--env", "dev", "--recipe", "tiny-lroa")
    assert (code, out) == (1, "")
    assert err.startswith("error: unknown recipe 'tiny-lroa': did you mean tiny-lora? known recipes are ")
    assert len(err.splitlines()) == 1


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        (
            "training.instance_type=ml.g5.xlargee",
            "recipe.training.instance_type: 'ml.g5.xlargee' is not an instance type CreateTrainingJob takes; "
            "did you mean ml.g5.xlarge",
        ),
        (
            "serving.instance_type=ml.g5.2xlarg",
            "recipe.serving.instance_type: 'ml.g5.2xlarg' is not an instance type CreateEndpointConfig takes; "
            "did you mean ml.g5.2xlarge",
        ),
    ],
)
def test_a_mistyped_instance_type_is_one_line_naming_the_field_and_close_types(
    setting: str, message: str, capsys: Any
) -> None:
    # Before credentials or AWS are looked at: no fixture gives any here.
    code, out, err = start_tiny_lora(capsys, "--set", setting)
    assert (code, out) == (1, "")
    assert len(err.splitlines()) == 1 and message in err, err
    # The Plan Lambda refuses it with the same rule (hfpipe.core.validate), before the quota look-up.
    with pytest.raises(RecipeError, match="did you mean"):
        resolve_recipe(recipe_name="tiny-lora", overrides=[setting])


@pytest.mark.parametrize(
    ("argv", "listed"), [([], ["start", "local", "recipes", "models"]), (["data"], ["upload"])]
)
def test_a_bare_command_prints_its_help(argv: list[str], listed: list[str], capsys: Any) -> None:
    code, out, err = run(capsys, *argv)
    assert (code, err) == (2, "")
    assert out.startswith("usage: hfpipe") and len(out.splitlines()) > 5
    assert all(f"    {name} " in out for name in listed), out


def _commands_with_actions() -> list[tuple[str, str]]:
    """(command, action) for every action of every command that has several (`models approve`)."""
    [sub] = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    found = []
    for name, parser in sub.choices.items():
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                found.extend((name, str(choice)) for choice in action.choices)
    return found


def test_the_commands_with_actions_are_found() -> None:
    assert {("models", "approve"), ("local", "up"), ("local", "prune"), ("data", "upload")} <= set(
        _commands_with_actions()
    )


@pytest.mark.parametrize(("command", "action"), _commands_with_actions())
def test_every_action_has_its_own_help_and_the_command_lists_it(
    command: str, action: str, capsys: Any
) -> None:
    code, out, err = run(capsys, command, action, "--help")
    assert (code, err) == (0, "")
    assert out.startswith(f"usage: hfpipe {command} {action} "), out
    assert "show this help message" in out
    code, out, err = run(capsys, command, "--help")
    assert (code, err) == (0, "")
    assert f"    {action} " in out, out


def test_a_command_without_its_action_runs_the_default_one(capsys: Any) -> None:
    """`hfpipe models --env dev` is `hfpipe models list --env dev`: the same parse, the same command."""
    parser = build_parser()
    bare = parser.parse_args(["models", "--env", "dev", "--json"])
    listed = parser.parse_args(["models", "list", "--env", "dev", "--json"])
    assert vars(bare) == vars(listed) and bare.action == "list"
    assert parser.parse_args(["recipes"]).action == "list"
    assert parser.parse_args(["local", "--recipe", "tiny-qa"]).action is None


def test_the_models_and_endpoints_hints_name_the_environment(capsys: Any, aws_credentials: None) -> None:
    code, _, err = run(capsys, "endpoints", "delete", "--env", "prod")
    assert (code, err) == (
        2,
        "error: `endpoints delete` needs the endpoint's name: hfpipe endpoints delete NAME --env prod\n",
    )


def test_the_reports_hints_name_the_environment() -> None:
    from rich.console import Console

    from hfpipe.cli.run.report import render_report

    report = {
        "execution_name": "run-1",
        "execution_status": "SUCCEEDED",
        "endpoint_name": "prod-run-1-ep",
        "model_package_arn": f"arn:aws:sagemaker:eu-west-1:{ACCOUNT}:model-package/hfpipe-prod-tiny-lora/3",
    }
    console = Console(width=300, record=True)
    for part in render_report(report, env="prod"):
        console.print(part)
    text = console.export_text()
    assert "`hfpipe endpoints delete prod-run-1-ep --env prod`" in text
    assert "hfpipe-prod-tiny-lora/3 (`hfpipe models --env prod`)" in text
    assert "ENV" not in text
    # A local run's account ended with it: no command can reach its registry.
    for part in render_report({**report, "local_mode": True}, env="local"):
        console.print(part)
    assert "in the run's own registry, which ended with the run" in console.export_text()


@pytest.mark.parametrize(
    "argv",
    [
        ["endpoints", "delete", "--env", "dev"],
        ["report"],
        ["logs"],
        ["invoke", "--env", "dev"],
        ["local"],
        ["local", "prune", "--keep", "-1"],
        ["deploy", "--env", "dev", "--endpoint", "e"],
        ["deploy", "--env", "dev", "--adapter", "a"],
        ["list", "--env", "dev", "--max", "0"],
        ["watch", "x", "--env", "dev", "--interval", "0"],
        ["deploy", "--env", "dev", "--model", "tiny-lora/1", "--endpoint", "e", "--interval", "0"],
        ["promote", "tiny-lora/1", "--env", "prod", "--watch", "--interval", "nan"],
    ],
)
def test_a_usage_error_the_command_finds_exits_2_with_one_line(
    argv: list[str], capsys: Any, aws_credentials: None
) -> None:
    """As docs/cli.md says: 2 for a usage error, also one the command finds itself (an argument missing or
    not taken, a number out of its range), before any AWS call."""
    code, out, err = run(capsys, *argv)
    assert (code, out) == (2, ""), err
    assert err.startswith("error: ") and err.count("\n") == 1, err


def _every_parser() -> list[tuple[str, argparse.ArgumentParser]]:
    """(command line, parser) of every command and action."""
    found = []
    [top] = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    for name, parser in top.choices.items():
        found.append((name, parser))
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                found.extend((f"{name} {sub}", p) for sub, p in action.choices.items())
    return found


def test_no_command_sees_a_default_left_unresolved(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    """`hfpipe local --recipe NAME` crashed on `Path(args.out)` with --out left None: a default is resolved
    as the arguments are parsed, whichever command or action reads it."""
    from pathlib import Path

    from hfpipe.cli.parser import Deferred
    from hfpipe.local.checkout import checkout_root

    monkeypatch.chdir(tmp_path)  # from any folder: the checkout's runs folder
    runs = str(checkout_root() / ".hfpipe" / "local")
    with_out = 0
    for line, parser in _every_parser():
        defaults = {a.dest: a.default for a in parser._actions}
        if not any(isinstance(d, Deferred) for d in defaults.values()):
            continue
        required = [a for a in parser._actions if a.required and a.option_strings]
        argv = [*line.split(), *(w for a in required for w in (a.option_strings[0], "x"))]
        args = build_parser().parse_args(argv)
        assert not any(isinstance(v, Deferred) for v in vars(args).values()), line
        if "out" in defaults:
            with_out += 1
            assert args.out == runs and Path(args.out).is_absolute(), (line, args.out)
    assert with_out >= 4  # local, local prune, logs, report
