"""The fenced blocks of the documentation, each with the replay marker that says how the suite replays it.

A shell block (```bash, ```sh, ```shell or ```console) carries an HTML comment on the line right before its
fence, invisible on GitHub:

    <!-- replay: MODE [ARGUMENT] -->

MODES names each mode and what tests/layout/test_doc_commands.py does with the block's commands; a block
without a marker, with an unknown mode or without a language fails there. A walk-through's test finds its
block by the marker's name (`doc_block("lifecycle")`), wherever the block lives, so a block can move from
page to page without its test reading the wrong one.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DOCS = sorted([REPO / "README.md", *(REPO / "docs").glob("*.md"), REPO / "benchmarks" / "README.md"])
SHELL = frozenset({"bash", "sh", "shell", "console"})
#: What the suite does with a block's commands, by its marker's mode.
MODES = {
    "run": "each command runs here as typed (bash, offline, in a scratch folder); exit status 0",
    "local": "`hfpipe local --recipe` runs: each as typed plus --dry-run (the recipe, the local environment's "
    "rules, the plan); the full run of each recipe is a named test's (FULL_RUNS)",
    "world": "replayed command by command in a local world by the test that reads the block by its name",
    "walkthrough": "replayed command by command (against moto, or a local server) by the test that reads the "
    "block by its name",
    "aws": "needs an AWS account: each command parses, its command's --help works, its recipe and --set are "
    "checked as `start` reads them, its environments and versions' recipes exist; offline commands run",
    "sample": "an output sample: its `$` commands are checked as `aws` ones are",
    "script": "a script of the repository: it exists, is executable and bash parses it; ./scripts/local.sh "
    "runs as typed plus --dry-run; ./scripts/test.sh is what .ci/run runs",
    "suite": "runs tests of this suite or its benchmarks: every path and module it names exists, every "
    "marker it selects is registered",
    "none": "not commands (the reason follows the mode)",
}
#: The modes whose marker names the block (the test that replays it reads it by that name).
NAMED = frozenset({"world", "walkthrough"})
MARKER = re.compile(r"^<!-- replay: (?P<mode>[a-z-]+)(?: (?P<argument>.+?))? -->$")
FENCE = re.compile(r"^```(?P<lang>[a-z]*)\n(?P<text>.*?)^```$", flags=re.S | re.M)


@dataclass(frozen=True)
class Command:
    """One command of a block as typed: its text (a heredoc's body included, a trailing comment not), the
    comment after it, and its line in the document."""

    line: int
    text: str
    comment: str

    @property
    def argv(self) -> list[str]:
        return shlex.split(self.text.split("\n", 1)[0])

    @property
    def is_hfpipe(self) -> bool:
        return bool(self.argv) and self.argv[0] in ("hfpipe", ".venv/bin/hfpipe")


@dataclass(frozen=True)
class Block:
    """A fenced block: where it is, its language, its text and its replay marker (None: it has none)."""

    doc: Path
    line: int
    lang: str
    text: str
    marker: str | None

    @property
    def where(self) -> str:
        doc = self.doc.relative_to(REPO) if self.doc.is_relative_to(REPO) else self.doc.name
        return f"{doc}:{self.line}"

    @property
    def mode(self) -> str | None:
        match = MARKER.match(self.marker or "")
        return match.group("mode") if match else None

    @property
    def argument(self) -> str:
        match = MARKER.match(self.marker or "")
        return (match.group("argument") or "") if match else ""

    @property
    def is_shell(self) -> bool:
        return self.lang in SHELL

    def commands(self) -> list[Command]:
        """The commands of a shell block: a console block's `$ ` lines, every other line of a bash one
        (continuations joined, a heredoc kept with its command); comment lines and blank lines skipped."""
        if self.lang == "console":
            return [
                Command(self.line + 1 + i, *_split_comment(line[2:]))
                for i, line in enumerate(self.text.splitlines())
                if line.startswith("$ ")
            ]
        return _bash_commands(self.text, self.line + 1)


def _split_comment(line: str) -> tuple[str, str]:
    """A command and its comment, as bash reads them: a `#` after whitespace, outside quotes, starts it."""
    quote = None
    for i, char in enumerate(line):
        if quote:
            quote = None if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].strip(), line[i + 1 :].strip()
    return line.strip(), ""


def _bash_commands(text: str, first_line: int) -> list[Command]:
    lines = text.splitlines()
    found: list[Command] = []
    i = 0
    while i < len(lines):
        start, line = i, lines[i]
        while line.endswith("\\") and i + 1 < len(lines):  # a continued line
            i += 1
            line = line[:-1] + " " + lines[i].strip()
        i += 1
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        command, comment = _split_comment(line)
        heredoc = re.search(r"<<-?'?(\w+)'?", command)
        if heredoc:  # the body up to its terminator belongs to the command
            body = []
            while i < len(lines) and lines[i].strip() != heredoc.group(1):
                body.append(lines[i])
                i += 1
            i += 1
            command = "\n".join([command, *body, heredoc.group(1)])
        found.append(Command(first_line + start, command, comment))
    return found


def blocks(docs: list[Path] | None = None) -> list[Block]:
    """Every fenced block of the documents (default DOCS), in order, each with the marker on the line
    before its fence (a line `<!-- replay: ... -->`), or None."""
    found = []
    for doc in DOCS if docs is None else docs:
        text = doc.read_text()
        for match in FENCE.finditer(text):
            line = text[: match.start()].count("\n") + 1
            before = text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1]
            marker = before if before.startswith("<!-- replay:") else None
            found.append(Block(doc, line, match.group("lang"), match.group("text"), marker))
    return found


def doc_block(name: str, docs: list[Path] | None = None) -> Block:
    """The one block whose marker names it `name` (`<!-- replay: world NAME -->` or `walkthrough NAME`)."""
    named = [b for b in blocks(docs) if b.mode in NAMED and b.argument == name]
    assert len(named) == 1, f"blocks named {name!r}: {[b.where for b in named]}"
    return named[0]


def block_commands(name: str) -> list[tuple[list[str], str]]:
    """The `hfpipe` commands of block `name`, each as its arguments after `hfpipe` and its comment, in
    order: what a walk-through's test runs as typed."""
    return [(c.argv[1:], c.comment) for c in doc_block(name).commands() if c.is_hfpipe]
