"""The documentation cites only what exists: every repository file it names, every `hfpipe` command line.

README.md, docs/*.md and benchmarks/README.md are read as a user reads them:

- a path in backticks or a Markdown link whose first part is a top-level entry of the repository
  (`hfpipe/core/run/plan.py`, `docs/cli.md`, `scripts/local.sh`) must exist;
- a bare file name in backticks (`engine.py`, `run_qa.py`) must be the name of a file in the repository;
- every command line of a fenced block that starts with `hfpipe` must parse with the command's own parser
  (subcommand, options and arguments), and every inline `hfpipe SUBCOMMAND ...` must name a subcommand.

Placeholders in capitals (EXECUTION, NAME) are ordinary arguments to the parser. What is named but is not a
repository file (a path inside a container or a bucket) is recognised by its shape: an absolute path, an
S3 key prefix, or one with a <placeholder>.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOCS = sorted([REPO / "README.md", *(REPO / "docs").glob("*.md"), REPO / "benchmarks" / "README.md"])
FILE_SUFFIXES = (".py", ".md", ".sh", ".json", ".txt", ".toml", ".cfg", ".yaml", ".yml")
#: Files the project writes or containers hold, named in the docs but never in the repository.
NOT_IN_REPOSITORY = {
    "credentials.json",  # a name docs/own-code.md lists among the secrets packing leaves out
    "inference.py",  # code/inference.py inside model.tar.gz, copied from the task's handler
    "hyperparameters.json",  # written by SageMaker (and local mode) into /opt/ml/input/config
    "resourceconfig.json",
    "inputdataconfig.json",
    "report.json",  # written by local mode under .hfpipe/local/<execution>/
    "training_job.json",
    "results.json",  # benchmark results, written under benchmarks/results/
    "results.md",
    "metrics.json",
    "all_results.json",  # the Trainer's own output files
    "train_results.json",
    "eval_results.json",
    "trainer_state.json",
    "adapter_config.json",
    "config.json",
    "tokenizer.json",
    "chat.txt",  # the walk-through writes it first
    "policy.json",  # the group policy of docs/promote.md, saved by the reader for put-model-package-group-policy
    "requests.jsonl",
    "loss.png",
    "my-dialogues.jsonl",
    "training.log",
    "sourcedir.tar.gz",
    "hfpipe_prompt.json",  # the prompt template run_clm.py saves next to the model
    "install.json",  # the GPU script's outputs (benchmarks/gpu_run.sh)
    "log.txt",
    "evaluate-v1.1.py",  # the official SQuAD v1.1 evaluation script, which docs/evaluation.md cites
    "run_glue.py",  # transformers' example scripts, whose argument names the training scripts keep
    "start_with_right_hostname.sh",  # the training images' entry point
    "handler.py",  # a generic Lambda module name, in a rule about bundles
    "train.py",  # the spot-instances notebook's script, whose arguments docs/encoders.md maps
    "model.tar.gz",
    "output.tar.gz",
    "instance_gpu_info.json",  # the SageMaker SDK's GPU table, in the installed sagemaker package
}


def _tracked_files() -> list[Path]:
    skip = {".git", ".venv", "node_modules", "cdk.out", "__pycache__", ".hfpipe", ".pytest_cache"}
    return [
        p
        for p in REPO.rglob("*")
        if p.is_file()
        and not (set(p.relative_to(REPO).parts) & skip)
        and not any(part.startswith(".venv") for part in p.relative_to(REPO).parts)
    ]


FILE_NAMES = {p.name for p in _tracked_files()}
TOP_LEVEL = {p.name for p in REPO.iterdir() if not p.name.startswith(".git")} - {".venv", "node_modules"}


def _inline_code(text: str) -> list[str]:
    """Inline `code` spans outside fenced blocks, and Markdown link targets."""
    outside = re.sub(r"```.*?```", "", text, flags=re.S)
    spans = re.findall(r"`([^`\n]+)`", outside)
    links = [t for t in re.findall(r"\]\(([^)\s#]+)(?:#[^)]*)?\)", outside) if "://" not in t]
    return spans + links


def _fenced_lines(text: str) -> list[str]:
    lines = []
    for block in re.findall(r"```[a-z]*\n(.*?)```", text, flags=re.S):
        lines.extend(line.strip() for line in block.splitlines())
    return lines


def cited_paths(doc: Path) -> list[str]:
    """Repository paths a document names (see the module docstring for what counts)."""
    found = []
    for span in _inline_code(doc.read_text()):
        for token in span.split():
            token = token.strip(",;:()'\"").removeprefix("./")
            if not token or "<" in token or "*" in token or "{" in token or token.startswith(("/", "$", "-")):
                continue
            if "=" in token or "://" in token or token.startswith(".") or "results/" in token:
                continue
            in_tree = "/" in token and token.split("/")[0] in TOP_LEVEL
            file_name = "/" not in token and token.endswith(FILE_SUFFIXES)
            if in_tree or (file_name and token not in NOT_IN_REPOSITORY):
                found.append(token)
    return found


def missing_paths(doc: Path) -> list[str]:
    """The cited paths that do not exist (relative to the repository, or to the document for links)."""
    missing = []
    for token in cited_paths(doc):
        if "/" in token:
            target = token.split(":")[0].rstrip("/")
            if not (REPO / target).exists() and not (doc.parent / target).exists():
                missing.append(token)
        elif token not in FILE_NAMES:
            missing.append(token)
    return missing


def hfpipe_lines(doc: Path) -> list[str]:
    """Command lines of fenced blocks that run `hfpipe` (comments and pipes cut off)."""
    out = []
    for line in _fenced_lines(doc.read_text()):
        line = re.sub(r"\s+#.*$", "", line)
        for part in re.split(r"\s*(?:\|\||&&|\||;)\s*", line):
            part = part.removeprefix(".venv/bin/")
            if part.startswith("hfpipe "):
                out.append(part)
    return out


def _parser():
    from hfpipe.cli import build_parser

    return build_parser()


def parse_error(line: str) -> str | None:
    """None when the command's parser accepts the line, else what argparse said."""
    import contextlib
    import io

    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            _parser().parse_args(shlex.split(line)[1:])
    except SystemExit as exit_:
        if exit_.code not in (0, None):
            return err.getvalue().strip().splitlines()[-1] if err.getvalue().strip() else "exit 2"
    return None


def subcommands() -> dict[str, set[str]]:
    """{command: {subcommand choices}} of the parser (empty set: a command without subcommands)."""
    import argparse

    parser = _parser()
    top = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    result: dict[str, set[str]] = {}
    for name, sub in top.choices.items():
        nested: set[str] = set()
        for action in sub._actions:
            # A nested parser (`data upload`) or an `action` positional with choices (`endpoints delete`).
            if isinstance(action, argparse._SubParsersAction) or (action.dest == "action" and action.choices):
                nested |= set(action.choices)
        result[name] = nested
    return result


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(REPO)))
def test_every_cited_file_exists(doc: Path) -> None:
    assert missing_paths(doc) == [], f"{doc.relative_to(REPO)} names files that do not exist"


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(REPO)))
def test_every_command_line_parses(doc: Path) -> None:
    bad = {line: parse_error(line) for line in hfpipe_lines(doc)}
    assert {k: v for k, v in bad.items() if v} == {}, f"{doc.relative_to(REPO)}: lines the parser refuses"


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(REPO)))
def test_every_inline_command_exists(doc: Path) -> None:
    commands = subcommands()
    unknown = []
    for span in _inline_code(doc.read_text()):
        words = span.split()
        if len(words) < 2 or words[0] != "hfpipe" or words[1].startswith("-"):
            continue
        nested = commands.get(words[1])
        known_sub = not (
            nested and len(words) > 2 and words[2].isalpha() and words[2].islower() and words[2] not in nested
        )
        if nested is None or not known_sub:
            unknown.append(span)
    assert unknown == [], f"{doc.relative_to(REPO)} names commands the parser does not have"


def test_the_checks_can_fail(tmp_path: Path) -> None:
    """A made-up file, command and option are each caught."""
    doc = tmp_path / "made-up.md"
    doc.write_text(
        "See `hfpipe/core/no_such_module.py` and `no_such_file.py`.\n\n"
        "```bash\nhfpipe start --env dev --recipe tiny-lora --no-such-option\nhfpipe frobnicate\n```\n"
    )
    assert missing_paths(doc) == ["hfpipe/core/no_such_module.py", "no_such_file.py"]
    lines = hfpipe_lines(doc)
    assert len(lines) == 2 and all(parse_error(line) for line in lines)
    assert parse_error("hfpipe recipes show tiny-lora") is None
