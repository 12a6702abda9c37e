"""Every command the README and docs/ show runs as pasted, in CI, as far as a machine without an AWS account
allows; a block that drifts from the code fails here.

Each shell block carries a replay marker on the line before its fence (`<!-- replay: MODE [NAME] -->`,
tests/doc_blocks.py: MODES says what each mode means), and every fenced block says what it is (a language);
a shell block without a marker, a marker of an unknown mode, a fence without a language, and a `text` block
that hides a command each fail `test_every_block_says_what_it_is_and_how_it_is_replayed`. Then, by mode:

- `run`: the block, pasted into bash in an empty folder, exits 0.
- `local`: each `hfpipe local --recipe ...` line runs as typed plus `--dry-run` (in this process: the same
  parser and function the shell would reach, without an interpreter per line); `./scripts/local.sh` runs
  through bash as typed plus `--dry-run`. A full run (30-60 s each on two cores) is left to the test
  FULL_RUNS names for the recipe: the dry run checks the recipe, the local environment's rules and the plan.
- `world NAME` / `walkthrough NAME`: a test reads the block by its name (`doc_block` / `block_commands`) and
  runs every command of it as typed (a world block in a local world); here: that such a test exists.
- `aws`, `sample`: each command parses with the command's own parser, its command's `--help` works, a
  `start` line's recipe and `--set` pass `hfpipe recipes show` (the rules `start` applies before anything is
  created), its `--env` and the recipe of each `RECIPE/N` exist; `hfpipe recipes` lines run in full; `npx
  cdk` lines name environments of cdk.json and the stacks the app makes for them.
- `script`: the script exists, is executable and bash parses it; `./scripts/local.sh` also dry-runs as above;
  `./scripts/test.sh` is what `.ci/run` runs (the whole suite: it cannot run inside itself).
- `suite`: every test path, script and module the line names exists, every marker it selects is registered.

`test_the_replay_counts` prints how many commands are replayed how (`pytest -s`).
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import functools
import io
import json
import os
import re
import shlex
import subprocess
import sys
import tomllib
from collections import Counter
from pathlib import Path

import pytest
from doc_blocks import MODES, NAMED, REPO, Block, Command, blocks

#: The full run of each recipe a `local` line (or `./scripts/local.sh`) names: the test that runs it end to
#: end. tiny-qa's is a run of the same pipeline in the local world (`hfpipe start`, the same state machine,
#: training job and endpoint as `hfpipe local`'s), the one the suite has anyway.
FULL_RUNS = {
    "tiny-lora": "tests/cli/test_walkthrough.py::test_local_walkthrough_end_to_end",
    "tiny-qa": "tests/cli/test_local_world.py::test_an_endpoint_answers_over_http_and_errors_are_sagemakers",
    "recipes/own-code/spot/recipe.json": (
        "tests/cli/test_local.py::test_local_runs_the_original_estimators_from_their_git_source_and_own_folder"
    ),
}
#: Commands that need no AWS account: an `aws` or `sample` block's line of these runs in full.
OFFLINE = {("recipes",), ("recipes", "list"), ("recipes", "show"), ("completion",)}
#: What a `text` block may not hold: a command a reader would paste.
HIDDEN_COMMAND = re.compile(r"^\s*(\$ |hfpipe |\.venv/bin/|\./scripts/|npx )")
LOCAL_SH = "./scripts/local.sh"


# --- the markers --------------------------------------------------------------------------------------------


def marker_problems(found: list[Block]) -> list[str]:
    """Blocks that do not say what they are, or how they are replayed."""
    problems = []
    for block in found:
        if not block.lang:
            problems.append(
                f"{block.where}: a fence without a language (bash/console for commands, text else)"
            )
        elif block.is_shell and block.marker is None:
            problems.append(
                f"{block.where}: a shell block without a replay marker; accepted: {sorted(MODES)}"
            )
        elif block.marker is not None and block.mode not in MODES:
            problems.append(f"{block.where}: {block.marker}: not a mode; accepted: {sorted(MODES)}")
        elif block.mode in NAMED | {"none"} and not block.argument:
            problems.append(f"{block.where}: {block.marker}: `{block.mode}` needs a name (or reason)")
        elif block.marker is not None and not block.is_shell and block.mode not in NAMED:
            problems.append(
                f"{block.where}: a {block.lang or 'plain'} block is not replayed; remove its marker"
            )
        elif block.lang == "text":
            hidden = [line for line in block.text.splitlines() if HIDDEN_COMMAND.match(line)]
            problems += [f"{block.where}: a text block holds a command: {line!r}" for line in hidden]
    return problems


# --- running a command here ---------------------------------------------------------------------------------


def hfpipe_main(argv: list[str], cwd: Path) -> tuple[int, str, str]:
    """`hfpipe ARGV` in this process, in folder `cwd`: exit status, stdout, stderr."""
    from hfpipe.cli import main

    out, err = io.StringIO(), io.StringIO()
    before = Path.cwd()
    try:
        os.chdir(cwd)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(argv)
    finally:
        os.chdir(before)
    return code, out.getvalue(), err.getvalue()


def bash(script: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """A script pasted into bash (`-e`: the first failing command ends it), with this environment's `hfpipe`
    on PATH, as `source .venv/bin/activate` puts it there."""
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    return subprocess.run(
        ["bash", "-e", "-c", script], cwd=cwd, env=env, capture_output=True, text=True, timeout=600
    )


def last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else "(nothing printed)"


def command_path(argv: list[str]) -> list[str]:
    """The command and action names that lead argv (`models approve`), as the parser's subcommands take them."""
    from hfpipe.cli import build_parser

    parser: argparse.ArgumentParser = build_parser()
    path = []
    for token in argv:
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if token.startswith("-") or not subs or token not in subs[0].choices:
            break
        path.append(token)
        parser = subs[0].choices[token]
    return path


def option(argv: list[str], name: str) -> list[str]:
    """Every value of option `name` in argv."""
    return [argv[i + 1] for i, token in enumerate(argv[:-1]) if token == name]


# --- `local` lines and scripts -----------------------------------------------------------------------------


def local_sh_recipe(argv: list[str]) -> str:
    """The recipe `./scripts/local.sh ARGS` runs: its --recipe, else the script's own default."""
    given = option(argv, "--recipe")
    if given:
        return given[-1]
    [default] = re.findall(r"set -- --recipe (\S+) \"\$@\"", (REPO / "scripts" / "local.sh").read_text())
    return default


def scratch_for(argv: list[str], scratch: Path) -> Path:
    """An empty folder holding what a relative path of argv names: the repository's entry a recipe path
    starts with (linked), and a folder with one record for each `--channel NAME=FOLDER` (an empty one is
    refused)."""
    folder = scratch / f"cwd-{len(list(scratch.iterdir()))}"
    folder.mkdir()
    for recipe in option(argv, "--recipe"):
        top = recipe.split("/")[0]
        if "/" in recipe and (REPO / top).exists() and not (folder / top).exists():
            (folder / top).symlink_to(REPO / top)
    for channel in option(argv, "--channel"):
        data = folder / channel.split("=", 1)[1]
        data.mkdir(parents=True, exist_ok=True)
        (data / "records.jsonl").write_text("{}\n")
    return folder


def full_run_problem(recipe: str) -> str | None:
    """None when FULL_RUNS names a test of the suite that runs `recipe` end to end."""
    named = FULL_RUNS.get(recipe)
    if named is None:
        return f"no full run of recipe {recipe!r} named in FULL_RUNS (a test that runs it end to end)"
    path, function = named.split("::")
    source = (REPO / path).read_text() if (REPO / path).is_file() else ""
    defined = {n.name for n in ast.walk(ast.parse(source)) if isinstance(n, ast.FunctionDef)}
    recipe_named = Path(recipe).stem if "/" in recipe else recipe
    if function not in defined or (recipe_named not in source and recipe.split("/")[-2] not in source):
        return f"FULL_RUNS[{recipe!r}]: {named} is not a test of the suite naming {recipe!r}"
    return None


def local_problems(command: Command, scratch: Path) -> list[str]:
    """A `local` line: as typed plus --dry-run (serving options dropped: --serve serves what a run trained,
    and a dry run trains nothing), and a full run of its recipe in the suite."""
    argv = command.argv
    if argv[0] == LOCAL_SH:
        return script_problems(command)
    args = argv[1:]
    if args[:1] != ["local"] or not option(args, "--recipe"):
        return [f"{command.line}: {command.text!r}: not an `hfpipe local --recipe` line"]
    if "--serve" in args:
        port = option(args, "--port")
        args = [a for a in args if a not in ("--serve", "--port", *port)]
    problems = [f"{command.line}: {p}" for p in dry_run(tuple(args), scratch)]
    full = full_run_problem(option(args, "--recipe")[-1])
    return problems + ([f"{command.line}: {full}"] if full else [])


_DRY_RUNS: dict[tuple[str, ...], list[str]] = {}


def dry_run(args: tuple[str, ...], scratch: Path) -> list[str]:
    """`hfpipe ARGS --dry-run` in an empty folder (once per argv in a session: the docs repeat some)."""
    if args not in _DRY_RUNS:
        code, _, err = hfpipe_main([*args, "--dry-run"], scratch_for(list(args), scratch))
        _DRY_RUNS[args] = (
            [] if code == 0 else [f"hfpipe {shlex.join(args)} --dry-run: exit {code}: {last_line(err)}"]
        )
    return _DRY_RUNS[args]


@functools.cache
def local_sh_dry_run(text: str) -> str | None:
    """`./scripts/local.sh ARGS`, through bash as typed plus --dry-run, from the repository's root."""
    done = bash(f"{text} --dry-run", REPO)
    if done.returncode != 0 or "nothing was started or created" not in done.stdout:
        return f"{text!r} --dry-run: exit {done.returncode}: {last_line(done.stderr)}"
    return None


def ci_runs_bare(script: str) -> str | None:
    """None when .ci/run runs `script` with no arguments, after the suite (a line of its own)."""
    lines = [line.strip() for line in (REPO / ".ci" / "run").read_text().splitlines()]
    if script not in lines or "./scripts/test.sh" not in lines:
        return f".ci/run does not run {script} as typed (a line of its own)"
    if lines.index(script) < lines.index("./scripts/test.sh"):
        return f".ci/run runs {script} before the suite"
    return None


def script_problems(command: Command) -> list[str]:
    """A script of the repository: it exists, is executable and bash parses it; local.sh dry-runs (and its
    recipe has a full run in the suite), test.sh is what .ci/run runs."""
    path = REPO / command.argv[0]
    if not path.is_file() or not os.access(path, os.X_OK):
        return [f"{command.line}: {command.argv[0]}: no executable script there"]
    if subprocess.run(["bash", "-n", str(path)], capture_output=True).returncode != 0:
        return [f"{command.line}: {command.argv[0]}: bash cannot parse it"]
    if command.argv[0] == LOCAL_SH:
        problems = [local_sh_dry_run(command.text), full_run_problem(local_sh_recipe(command.argv[1:]))]
        if not command.argv[1:]:  # the README's first command: CI runs it in full, as typed
            problems.append(ci_runs_bare(LOCAL_SH))
        return [f"{command.line}: {p}" for p in problems if p]
    if command.argv[0] == "./scripts/test.sh" and "scripts/test.sh" not in (REPO / ".ci" / "run").read_text():
        return [f"{command.line}: .ci/run does not run ./scripts/test.sh"]
    return []


# --- commands that need an AWS account ---------------------------------------------------------------------


@functools.cache
def environments() -> frozenset[str]:
    """The environments of cdk.json (read as data: importing the app would start the CDK's jsii runtime)."""
    return frozenset(json.loads((REPO / "cdk.json").read_text())["context"]["hfpipe:environments"])


@functools.cache
def app_parts() -> tuple[str, ...]:
    """The stacks the app makes per environment (app.PARTS, read from app.py for the same reason)."""
    for node in ast.parse((REPO / "app.py").read_text()).body:
        if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["PARTS"]:
            return tuple(ast.literal_eval(node.value))
    raise AssertionError("app.py defines no PARTS")


@functools.cache
def bundled_recipes() -> frozenset[str]:
    from hfpipe.core.recipe.recipes import available_recipes

    return frozenset(available_recipes())


def parse_error(args: list[str]) -> str | None:
    """None when the command's own parser takes args, else what it said. The docs write `<account>` where a
    reader puts their account ID (no account ID is committed: tests/layout/test_no_account_ids.py); a
    synthetic one stands in for it here, as the reader's would."""
    from accounts import ACCOUNT

    from hfpipe.cli import build_parser

    args = [a.replace("<account>", ACCOUNT) for a in args]
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            build_parser().parse_args(args)
    except SystemExit as exit_:
        if exit_.code not in (0, None):
            return last_line(err.getvalue())
    return None


def aws_problems(command: Command, scratch: Path) -> list[str]:
    """A command for an AWS account, checked as far as this machine allows (see the module docstring)."""
    if command.argv[0] == "npx":
        return [f"{command.line}: {p}" for p in cdk_problems(command)]
    if not command.is_hfpipe:
        return [f"{command.line}: {command.text!r}: not an `hfpipe` or `npx cdk` command"]
    args = command.argv[1:]
    error = parse_error(args)
    if error:
        return [f"{command.line}: {command.text!r}: {error}"]
    path = command_path(args)
    problems = []
    code, out, _ = hfpipe_main([*path, "--help"], scratch)
    if code != 0 or not out.startswith(f"usage: hfpipe {' '.join(path)}"):
        problems.append(f"hfpipe {' '.join(path)} --help: exit {code}")
    problems += [
        f"--env {env}: not an environment of cdk.json"
        for env in option(args, "--env")
        if env not in environments()
    ]
    versions = [m.group(1) for m in map(re.compile(r"([a-z0-9][a-z0-9-]*)/\d+").fullmatch, args) if m]
    problems += [f"{v}/N: no bundled recipe {v!r}" for v in versions if v not in bundled_recipes()]
    if tuple(path) in OFFLINE:
        code, _, err = hfpipe_main(args, scratch)
        problems += [f"exit {code}: {last_line(err)}"] if code else []
    elif path == ["start"]:
        shown = ["recipes", "show", *option(args, "--recipe")]
        shown += [a for s in option(args, "--set") for a in ("--set", s)]
        code, _, err = hfpipe_main([*shown, "--json"], scratch)
        problems += [f"hfpipe {shlex.join(shown)}: exit {code}: {last_line(err)}"] if code else []
    return [f"{command.line}: {command.text!r}: {p}" for p in problems]


#: `npx cdk` verbs the docs may show.
CDK_VERBS = {"bootstrap", "deploy", "synth", "diff", "destroy", "ls"}


def cdk_problems(command: Command) -> list[str]:
    """`npx cdk VERB [-c env=ENV] [STACK ...] [--all]  # STACKS`: a verb of the CDK command-line tool, each
    environment one of cdk.json, each stack named (also in the comment) one the app makes for it, and a
    comment that names the stacks `--all` deploys names all of them."""
    from hfpipe.contract import stack_name

    argv = command.argv
    if argv[:2] != ["npx", "cdk"] or len(argv) < 3 or argv[2] not in CDK_VERBS:
        return [f"{command.text!r}: not `npx cdk VERB` with a verb of {sorted(CDK_VERBS)}"]
    chosen = [value.split("=", 1)[1] for value in option(argv, "-c") if value.startswith("env=")]
    unknown = [env for env in chosen if env not in environments()]
    if unknown:
        return [
            f"{command.text!r}: env {unknown}: not an environment of cdk.json; accepted: {sorted(environments())}"
        ]
    made = {stack_name(env, part) for env in chosen or environments() for part in app_parts()}
    named = [a for a in argv[3:] if a.startswith("Hfpipe-")]
    in_comment = re.findall(r"\bHfpipe-[A-Za-z0-9]+-[A-Za-z]+\b", command.comment)
    problems = [f"{command.text!r}: no stack {s} in the app" for s in named + in_comment if s not in made]
    if argv[2] == "deploy" and "--all" in argv and in_comment and set(in_comment) != made:
        problems.append(f"{command.text!r}: --all deploys {sorted(made)}; the comment says {in_comment}")
    return problems


# --- commands of the suite and its benchmarks ---------------------------------------------------------------

#: pytest options the docs may pass (syrupy's --snapshot-update among them).
PYTEST_OPTIONS = {"-m", "-k", "-x", "-q", "-s", "--snapshot-update"}


@functools.cache
def registered_markers() -> frozenset[str]:
    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    return frozenset(m.split(":")[0] for m in config["tool"]["pytest"]["ini_options"]["markers"])


def suite_problems(command: Command) -> list[str]:
    """`.venv/bin/python -m pytest PATHS [OPTIONS]`, `... -m benchmarks.MODULE [--only A,B]` or `python
    benchmarks/SCRIPT.py`: what they name exists."""
    argv = command.argv
    if argv[0] not in (".venv/bin/python", "python"):
        return [f"{command.line}: {command.text!r}: not a python command of the suite or its benchmarks"]
    rest, problems = argv[1:], []
    if rest[:2] == ["-m", "pytest"]:
        for i, token in enumerate(rest[2:], start=2):
            if rest[i - 1] == "-m" and i > 2:
                words = set(re.findall(r"\w+", token)) - {"and", "or", "not"}
                problems += [f"marker {w!r} is not registered" for w in words - registered_markers()]
            elif token.startswith("-"):
                problems += [] if token in PYTEST_OPTIONS else [f"{token}: not a pytest option the docs use"]
            elif not (REPO / token.split("::")[0]).exists():
                problems.append(f"{token}: no such test path")
    elif rest[:1] == ["-m"]:
        modules = [rest[1], *(f"benchmarks.{m}" for v in option(rest, "--only") for m in v.split(","))]
        problems += [
            f"{m}: no such module" for m in modules if not (REPO / f"{m.replace('.', '/')}.py").is_file()
        ]
    elif not (REPO / rest[0]).is_file():
        problems.append(f"{rest[0]}: no such script")
    return [f"{command.line}: {command.text!r}: {p}" for p in problems]


# --- named blocks: the tests that replay them ---------------------------------------------------------------

#: The functions by which a test reads a named block (tests/doc_blocks.py).
READERS = ("doc_block", "block_commands")


def block_readers(tests: Path = REPO / "tests") -> dict[str, list[str]]:
    """{block name: the test modules that read it by name}, from each call `doc_block("NAME")` or
    `block_commands("NAME")` in tests/."""
    found: dict[str, list[str]] = {}
    for path in sorted(tests.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.Call) and getattr(node.func, "id", None) in READERS and node.args):
                continue
            if isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
                found.setdefault(node.args[0].value, []).append(str(path.relative_to(REPO)))
    return found


def named_problems(found: list[Block], readers: dict[str, list[str]]) -> list[str]:
    """A world or walk-through block no test reads by its name (a world block: no test that runs a local
    world), and a name a test reads that no block has."""
    problems = []
    names = {b.argument for b in found if b.mode in NAMED}
    for block in (b for b in found if b.mode in NAMED):
        modules = readers.get(block.argument, [])
        if not modules:
            problems.append(
                f"{block.where}: no test reads block {block.argument!r} (doc_block or block_commands)"
            )
        elif block.mode == "world" and not any(uses_a_world(REPO / m) for m in modules):
            problems.append(f"{block.where}: {modules} replay {block.argument!r} in no local world")
    problems += [f"{readers[n]}: no block is named {n!r}" for n in sorted(set(readers) - names)]
    return problems


def uses_a_world(module: Path) -> bool:
    """A test module that runs commands in a local world: it starts one (`worlds_up`) or takes the `world`
    fixture (tests/cli/world_helpers.py)."""
    text = module.read_text()
    return "worlds_up(" in text or re.search(r"def test_\w+\(world: World", text) is not None


# --- by mode ------------------------------------------------------------------------------------------------


def run_block_problems(block: Block, scratch: Path) -> list[str]:
    """A `run` block pasted into bash in an empty folder."""
    folder = scratch / f"run-{block.line}"
    folder.mkdir()
    done = bash(block.text, folder)
    if done.returncode != 0:
        return [f"{block.where}: exit {done.returncode}: {last_line(done.stderr or done.stdout)}"]
    return []


def block_problems(block: Block, scratch: Path) -> list[str]:
    """What is wrong with a marked shell block's commands, replayed here as its mode says (the named modes:
    named_problems; their commands also parse, as every `hfpipe` line of the docs must)."""
    if block.mode == "run":
        return run_block_problems(block, scratch)
    per_command = {
        "local": lambda c: local_problems(c, scratch),
        "aws": lambda c: aws_problems(c, scratch),
        "sample": lambda c: aws_problems(c, scratch),
        "script": script_problems,
        "suite": suite_problems,
        "world": lambda c: parse_problems(c),
        "walkthrough": lambda c: parse_problems(c),
    }.get(block.mode or "")
    if per_command is None:
        return []
    return [f"{block.doc.name}:{p}" for c in block.commands() for p in per_command(c)]


def parse_problems(command: Command) -> list[str]:
    error = parse_error(command.argv[1:]) if command.is_hfpipe else None
    return [f"{command.line}: {command.text!r}: {error}"] if error else []


def how(block: Block, command: Command) -> str:
    """How the suite replays one command of the docs (the counts' categories)."""
    if block.mode in ("aws", "sample"):
        offline = command.is_hfpipe and tuple(command_path(command.argv[1:])) in OFFLINE
        return (
            "run in full here (needs no account)"
            if offline
            else "checked offline: parse, --help, recipe, env"
        )
    if block.mode in ("local", "script") and command.argv[0] in (LOCAL_SH, "hfpipe", ".venv/bin/hfpipe"):
        return "dry run here; full run in the suite (FULL_RUNS)"
    return {
        "run": "run here as typed",
        "world": "replayed in a local world by its test",
        "walkthrough": "replayed by its walk-through test",
        "script": "script checked; .ci/run runs ./scripts/test.sh"
        if "test.sh" in command.text
        else "script checked",
        "suite": "suite paths checked (the suite runs those tests)",
    }.get(block.mode or "", "not a command")


def replay_counts(found: list[Block]) -> dict[str, Counter[str]]:
    """{how: Counter(commands=..., hfpipe=...)} over every command of every shell block."""
    counts: dict[str, Counter[str]] = {}
    for block in (b for b in found if b.is_shell):
        for command in block.commands():
            counter = counts.setdefault(how(block, command), Counter())
            counter["commands"] += 1
            counter["hfpipe"] += command.is_hfpipe
    return counts


# --- the tests ----------------------------------------------------------------------------------------------


def of_mode(*modes: str) -> list[Block]:
    return [b for b in blocks() if b.mode in modes]


def test_every_block_says_what_it_is_and_how_it_is_replayed() -> None:
    assert marker_problems(blocks()) == []


def test_run_blocks_run_as_pasted(tmp_path: Path) -> None:
    found = of_mode("run")
    assert found, "no run block: the docs should show at least one command that runs here"
    assert [p for b in found for p in block_problems(b, tmp_path)] == []


def test_local_lines_dry_run_and_each_recipe_has_a_full_run(tmp_path: Path) -> None:
    assert [p for b in of_mode("local") for p in block_problems(b, tmp_path)] == []


def test_aws_lines_as_far_as_offline_allows(tmp_path: Path) -> None:
    assert [p for b in of_mode("aws", "sample") for p in block_problems(b, tmp_path)] == []


def test_scripts_and_suite_commands(tmp_path: Path) -> None:
    assert [p for b in of_mode("script", "suite") for p in block_problems(b, tmp_path)] == []


def test_world_and_walkthrough_blocks_are_replayed_by_their_tests(tmp_path: Path) -> None:
    found = blocks()
    assert named_problems(found, block_readers()) == []
    assert [p for b in found if b.mode in NAMED for p in block_problems(b, tmp_path)] == []


def test_the_replay_counts() -> None:
    """How many of the docs' commands are replayed how; every command of every shell block is counted once,
    none as "not a command"."""
    found = blocks()
    counts = replay_counts(found)
    width = max(map(len, counts))
    for name, counter in sorted(counts.items(), key=lambda item: -item[1]["commands"]):
        print(f"{name:<{width}}  {counter['commands']:>3} commands ({counter['hfpipe']} hfpipe)")
    shell = [b for b in found if b.is_shell]
    print(f"{len(shell)} shell blocks in {len({b.doc for b in shell})} documents")
    for block in (
        b for b in found if b.mode in ("local", "script")
    ):  # which runs are dry here, and full where
        for command in block.commands():
            recipe = local_sh_recipe(command.argv[1:]) if command.argv[0] == LOCAL_SH else None
            recipe = recipe or (option(command.argv, "--recipe") or [None])[-1]
            if recipe:
                print(
                    f"{block.doc.name}:{command.line} {command.text}: dry run here, full run {FULL_RUNS.get(recipe)}"
                )
    assert sum(c["commands"] for c in counts.values()) == sum(len(b.commands()) for b in shell)
    assert "not a command" not in counts


MADE_UP = """# A page that drifted

```
hfpipe recipes
```

<!-- replay: frobnicate -->
```bash
hfpipe recipes
```

```bash
hfpipe recipes
```

```text
$ hfpipe list --env dev
```

<!-- replay: aws -->
```bash
hfpipe start --env dev --recipe tiny-lora --max-steps 8
hfpipe start --env stage --recipe tiny-lora --watch
hfpipe models approve tiny-nope/1 --env dev
hfpipe start --env dev --recipe tiny-lora --set training.hyperparameters.num_train_epoch=1
npx cdk deploy -c env=stage --all
npx cdk deploy -c env=dev --all   # Hfpipe-dev-Data, Hfpipe-dev-Pipeline
```

<!-- replay: run -->
```bash
hfpipe recipes shwo tiny-qa
```

<!-- replay: local -->
```bash
hfpipe local --recipe tiny-mnli --outt runs
hfpipe local --recipe tiny-mnli
```

<!-- replay: world nowhere -->
```bash
hfpipe local up --env dev
```

<!-- replay: script -->
```bash
./scripts/no-such.sh
```

<!-- replay: suite -->
```bash
.venv/bin/python -m pytest tests/no_such_test.py -m "not sloww"
```
"""


def test_the_checks_can_fail(tmp_path: Path) -> None:
    """A made-up page with every kind of drift: each is caught, in a line that says what and where."""
    page = tmp_path / "drifted.md"
    page.write_text(MADE_UP)
    found = blocks([page])
    markers = marker_problems(found)
    assert [p.split(": ", 1)[1][:30] for p in markers] == [
        "a fence without a language (ba",
        "<!-- replay: frobnicate -->: n",
        "a shell block without a replay",
        "a text block holds a command: ",
    ], markers
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    problems = [p for b in found if b.mode for p in block_problems(b, scratch)]
    expected = [
        "unrecognized arguments: --max-steps",  # a drifted option
        "--env stage: not an environment of cdk.json",
        "tiny-nope/N: no bundled recipe 'tiny-nope'",
        "hfpipe recipes show tiny-lora --set training.hyperparameters.num_train_epoch=1: exit 1",
        "env ['stage']: not an environment of cdk.json",
        "--all deploys ['Hfpipe-dev-Data', 'Hfpipe-dev-Pipeline', 'Hfpipe-dev-Quota']; the comment says",
        "drifted.md:31: exit 2: hfpipe recipes: error: argument ACTION: invalid choice: 'shwo'",  # as pasted
        "unrecognized arguments: --outt",
        "no full run of recipe 'tiny-mnli' named in FULL_RUNS",
        "./scripts/no-such.sh: no executable script there",
        "tests/no_such_test.py: no such test path",
        "marker 'sloww' is not registered",
    ]
    for fragment in expected:
        assert any(fragment in p for p in problems), (fragment, problems)
    # a world block no test reads (the suite's tests read names this page lacks: they follow it)
    assert named_problems(found, block_readers())[0] == (
        "drifted.md:42: no test reads block 'nowhere' (doc_block or block_commands)"
    )
    # and a test reading a block no page has
    assert named_problems([], {"gone": ["tests/cli/x.py"]}) == [
        "['tests/cli/x.py']: no block is named 'gone'"
    ]


def test_ci_runs_the_readmes_first_command_as_typed_after_the_suite(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The suite passed while `./scripts/local.sh` crashed: CI runs it bare, after the suite."""
    assert ci_runs_bare(LOCAL_SH) is None
    fake = tmp_path / ".ci"
    fake.mkdir()
    monkeypatch.setattr(sys.modules[__name__], "REPO", tmp_path)
    for text, said in (
        (
            "./scripts/test.sh\n./scripts/local.sh --recipe tiny-qa\n",
            "does not run ./scripts/local.sh as typed",
        ),
        ("./scripts/local.sh\n./scripts/test.sh\n", "before the suite"),
        ("./scripts/test.sh\n", "does not run"),
    ):
        (fake / "run").write_text(text)
        assert said in (ci_runs_bare(LOCAL_SH) or ""), text


def test_cis_check_of_the_first_run_runs_and_can_fail(tmp_path: Path) -> None:
    """.ci/run pipes the first run's report into .ci/first_run.py (once an inline script that Python could not
    parse, so CI failed on the check itself): it passes a run that answered and fails one that did not."""
    pipe = (REPO / ".ci" / "run").read_text()
    assert "| .venv/bin/python .ci/first_run.py" in pipe
    answered = {"execution_status": "SUCCEEDED", "smoke_test": {"ok": True, "response": [{"summary": "hi"}]}}
    cases = (
        (answered, 0),
        ({**answered, "execution_status": "FAILED"}, 1),
        ({**answered, "smoke_test": {"ok": True, "response": []}}, 1),
        ({"execution_status": "SUCCEEDED"}, 1),
    )
    for report, status in cases:
        done = subprocess.run(
            [sys.executable, str(REPO / ".ci" / "first_run.py")],
            input=json.dumps(report),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == status, (report, done.stdout, done.stderr)
        assert "ci: ./scripts/local.sh:" in done.stdout
