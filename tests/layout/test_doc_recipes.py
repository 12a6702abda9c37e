"""Every recipe the documentation shows is one the command takes, as a user would take it from the page.

A recipe snippet is a fenced JSON or YAML block of README.md or docs/*.md, or a file a bash block of theirs
writes with a heredoc (`cat > my-recipe.json <<'EOF'`), whose object (a `"key": ...` excerpt read inside braces)
has recipe fields as its keys:

- a whole recipe (the schema's required fields) is read as the command reads a recipe file
  (`hfpipe.cli.recipe.recipes.load`: `hfpipe.core.run.plan.accept`) and goes through the environment's rules as `hfpipe
  start` and its dry run apply them before packing (`hfpipe.cli.run.dryrun.in_environment`, with the image catalog
  the Pipeline stack writes), so a container without an image for the instance type fails here;
- an excerpt (top-level fields, or fields of `training`) must be a shipped recipe's fields as written
  (recipes/), and that recipe goes through the same.

docs/own-code.md's recipe is also run end to end with `hfpipe local`, as its "Local mode" block
(`own-code-local`) says.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from doc_blocks import doc_block
from plan_config import dev_config

from hfpipe.core.recipe.schema import RECIPE_SCHEMA

REPO = Path(__file__).resolve().parents[2]
DOCS = sorted([REPO / "README.md", *(REPO / "docs").glob("*.md")])
TOP_LEVEL = set(RECIPE_SCHEMA["properties"])
TRAINING = set(RECIPE_SCHEMA["properties"]["training"]["properties"])
REQUIRED = set(RECIPE_SCHEMA["required"])


@dataclass(frozen=True)
class Snippet:
    where: str  # doc:line
    text: str
    value: dict[str, Any]

    @property
    def whole(self) -> bool:
        return set(self.value) >= REQUIRED


def _parsed(text: str, yaml_block: bool) -> Any:
    """The block's value: JSON (an excerpt `"key": ...` read inside braces), or YAML for a YAML block."""
    for candidate in (text, "{" + text + "}"):
        try:
            return yaml.safe_load(candidate) if yaml_block else json.loads(candidate)
        except (json.JSONDecodeError, yaml.YAMLError):
            continue
    return None


def _blocks(doc: Path) -> list[tuple[int, str, bool]]:
    """(line, text, is YAML) of each fenced JSON/YAML block and each heredoc a bash block writes to a file."""
    text = doc.read_text()
    found = []
    for m in re.finditer(r"```(\w*)\n(.*?)```", text, flags=re.S):
        line = text[: m.start()].count("\n") + 2
        if m.group(1) in ("json", "yaml", "yml"):
            found.append((line, m.group(2), m.group(1) != "json"))
        elif m.group(1) in ("bash", "sh", ""):
            heredoc = r"cat > \S+\.(json|ya?ml) <<'?(\w+)'?\n(.*?)\n\2\n"
            for h in re.finditer(heredoc, m.group(2), flags=re.S):
                start = line + m.group(2)[: h.start()].count("\n") + 1  # the line after `cat > ...`
                found.append((start, h.group(3), h.group(1) != "json"))
    return found


def recipe_snippets(docs: list[Path]) -> list[Snippet]:
    """The snippets whose keys are recipe fields (top-level or training's): see the module docstring."""
    snippets = []
    for doc in docs:
        for line, text, yaml_block in _blocks(doc):
            value = _parsed(text, yaml_block)
            if isinstance(value, dict) and value and (set(value) <= TOP_LEVEL or set(value) <= TRAINING):
                where = f"{doc.relative_to(REPO) if doc.is_relative_to(REPO) else doc.name}:{line}"
                snippets.append(Snippet(where, text, value))
    return snippets


def shipped_recipes() -> dict[str, dict[str, Any]]:
    return {
        str(p.relative_to(REPO)): json.loads(p.read_text())
        for p in sorted((REPO / "recipes").rglob("*.json"))
    }


def refusal(recipe_file: Path, config: Any) -> str | None:
    """None when the command takes the recipe file and the environment's rules take the recipe (as `hfpipe
    start` applies them before packing its source), else the line the command would print."""
    from hfpipe.cli.aws import HfpipeError
    from hfpipe.cli.recipe import recipes
    from hfpipe.cli.run import dryrun

    try:
        loaded = recipes.load(str(recipe_file), [])
        dryrun.in_environment(loaded.accepted, config, source_later=True)
    except HfpipeError as err:
        return str(err)
    return None


def excerpt_of(snippet: Snippet, recipes: dict[str, dict[str, Any]]) -> list[str]:
    """The shipped recipes that hold the excerpt's fields as written (top-level ones, or training's)."""
    part = (lambda r: r) if set(snippet.value) <= TOP_LEVEL else (lambda r: r.get("training", {}))
    return [name for name, r in recipes.items() if all(part(r).get(k) == v for k, v in snippet.value.items())]


def problems(docs: list[Path], tmp_path: Path) -> list[str]:
    """What is wrong with the docs' recipe snippets, one line each."""
    found, recipes, config = [], shipped_recipes(), dev_config()
    for i, snippet in enumerate(recipe_snippets(docs)):
        if snippet.whole:
            path = tmp_path / f"snippet-{i}.json"
            path.write_text(snippet.text)  # as a user saves it
            line = refusal(path, config)
            if line is not None:
                found.append(f"{snippet.where}: {line}")
            continue
        holders = excerpt_of(snippet, recipes)
        if not holders:
            found.append(
                f"{snippet.where}: an excerpt of a recipe that no recipe under recipes/ has as written; accepted: "
                f"a whole recipe ({', '.join(sorted(REQUIRED))}), or a shipped recipe's fields as written"
            )
        for name in holders:
            line = refusal(REPO / name, config)
            if line is not None:
                found.append(f"{snippet.where}: {name}: {line}")
    return found


def test_the_docs_recipe_snippets_are_recipes_the_command_takes(tmp_path: Path) -> None:
    assert problems(DOCS, tmp_path) == []
    # The extraction finds own-code.md's two whole recipes, its JSON block and its walk-through's heredoc:
    # finding none would pass.
    snippets = recipe_snippets(DOCS)
    wheres = [s.where.split(":")[0] for s in snippets if s.whole]
    assert wheres.count("docs/own-code.md") == 2, [s.where for s in snippets]


#: docs/own-code.md's snippet as it once was: an excerpt no shipped recipe has, on an instance type the
#: walk-through's training container has no image for.
OLD_OWN_CODE_SNIPPET = """"training": {
  "source": {"dir": "scripts"},
  "entry_point": "train.py",
  "instance_type": "ml.m5.xlarge",
  "hyperparameters": {"epochs": 2},
  "channels": {"training": "my-data/"}
}"""


def test_the_checks_can_fail(tmp_path: Path) -> None:
    """own-code.md's old snippet (an excerpt), its walk-through's recipe with that snippet's training (a whole
    recipe on ml.m5.xlarge, which its GPU-only training images refuse), the same as YAML (the command reads
    JSON) and a block that is no recipe (ignored)."""
    [heredoc] = [
        s for s in recipe_snippets([REPO / "docs" / "own-code.md"]) if s.whole and _in_walk_through(s)
    ]
    whole = {**heredoc.value, **json.loads("{" + OLD_OWN_CODE_SNIPPET + "}")}
    doc = tmp_path / "doc.md"
    doc.write_text(
        f"```json\n{OLD_OWN_CODE_SNIPPET}\n```\n\n```json\n{json.dumps(whole)}\n```\n\n"
        f"```bash\ncat > r.yaml <<'EOF'\n{yaml.safe_dump(whole)}EOF\n```\n\n"
        '```json\n"stage": {"region": "eu-central-1"}\n```\n'
    )
    found = problems([doc], tmp_path)
    assert len(found) == 3, found
    assert found[0].startswith("doc.md:2: an excerpt of a recipe that no recipe under recipes/ has")
    assert found[1].startswith("doc.md:") and found[1].endswith(
        "cannot run in this environment: recipe.container.training: 4.56.2/2.8.0/py312 has no cpu image for "
        "ml.m5.xlarge; accepted: an instance type of its images' processors ['gpu'], other versions, or "
        "container.training.image_uri"
    )
    assert found[2].startswith("doc.md:") and ": not valid JSON (" in found[2], found[2]


def _in_walk_through(snippet: Snippet) -> bool:
    """Whether the snippet is the heredoc of docs/own-code.md's walk-through block (`own-code`)."""
    block = doc_block("own-code")
    line = int(snippet.where.rsplit(":", 1)[1])
    return block.line < line <= block.line + block.text.count("\n")


def _own_code_recipe() -> Snippet:
    """docs/own-code.md's recipe block (the one "What a team writes" shows, not its walk-through's heredoc)."""
    [snippet] = [
        s for s in recipe_snippets([REPO / "docs" / "own-code.md"]) if s.whole and not _in_walk_through(s)
    ]
    return snippet


#: A team's train.py as docs/own-code.md describes it: reads SM_CHANNEL_TRAINING, writes to SM_MODEL_DIR,
#: takes the recipe's hyperparameters (--epochs) with argparse.
TEAM_TRAIN = """import argparse, json, os
parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=1)
args = parser.parse_args()
rows = open(os.path.join(os.environ["SM_CHANNEL_TRAINING"], "rows.txt")).read().split()
json.dump({"rows": len(rows), "epochs": args.epochs}, open(os.path.join(os.environ["SM_MODEL_DIR"], "m.json"), "w"))
print(f"loss = {1 / len(rows)}")
"""


@pytest.mark.slow
def test_the_own_code_recipe_runs_in_local_mode_as_its_page_says(tmp_path: Path) -> None:
    """docs/own-code.md's recipe saved as my-team/my-recipe.json next to its scripts/train.py, run with the
    page's own `hfpipe local` line (with --out here), offline, through the `hfpipe` command."""
    import os

    [command] = [c.text for c in doc_block("own-code-local").commands()]
    (tmp_path / "my-team" / "scripts").mkdir(parents=True)
    (tmp_path / "my-team" / "my-recipe.json").write_text(_own_code_recipe().text)
    (tmp_path / "my-team" / "scripts" / "train.py").write_text(TEAM_TRAIN)
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "rows.txt").write_text("a b c d\n")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    argv = [*shlex.split(command), "--out", str(tmp_path / "runs")]
    done = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    [run_dir] = list((tmp_path / "runs").glob("my-team-*"))
    report = json.loads((run_dir / "report.json").read_text())
    assert report["execution_status"] == "SUCCEEDED" and report["final_metrics"] == {"loss": 0.25}
