"""`hfpipe local` with a team's own source and its refusals. The project's recipes run end to end where a
test needs their run anyway (tests/local_runs.py says where), each checked by `check_finished_run`."""

from __future__ import annotations

import json
import re
import tarfile
from pathlib import Path
from typing import Any

import pytest

from hfpipe.cli import main

pytestmark = pytest.mark.slow


def test_local_bad_set(tmp_path: Path, capsys: Any) -> None:
    code = main(["local", "--recipe", "tiny-qa", "--out", str(tmp_path), "--set", "nope"])
    _, err = capsys.readouterr()
    assert code == 1
    assert err.startswith("error: --set 'nope' is not KEY=VALUE")


OWN_TRAIN = """import argparse, json, os, sys
parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, required=True)
args = parser.parse_args()  # strict: an argument local mode added would fail the run
rows = open(os.path.join(os.environ["SM_CHANNEL_TRAINING"], "rows.txt")).read().split()
if "boom" in rows:
    raise RuntimeError("the team's own error")
json.dump({"rows": len(rows), "epochs": args.epochs}, open(os.path.join(os.environ["SM_MODEL_DIR"], "m.json"), "w"))
print(f"loss = {1 / len(rows)}")
"""


def own_recipe(folder: Path, source: dict[str, Any]) -> Path:
    """A team's recipe next to its own code: no project script, no hub model, deploy false."""
    from hfpipe.core.recipes import load_recipe

    recipe = load_recipe("tiny-qa")
    recipe["name"] = "own-code"
    recipe["training"].update(
        source=source,
        entry_point="train.py",
        hyperparameters={"epochs": 2},
        channels={"training": "data/own/"},
        metric_definitions=[{"Name": "loss", "Regex": "loss = ([0-9.]+)"}],
    )
    recipe.update(deploy=False, evaluation_gate=None)
    path = folder / "my-recipe.json"
    path.write_text(json.dumps(recipe))
    return path


def test_local_runs_a_recipes_own_folder_and_git_source_with_a_local_channel(
    tmp_path: Path, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import subprocess

    from hfpipe.cli.sources import CACHE_ENV

    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))  # the git clone goes here, not in ~/.cache

    code_dir = tmp_path / "team" / "scripts"
    code_dir.mkdir(parents=True)
    (code_dir / "train.py").write_text(OWN_TRAIN)
    (code_dir / "requirements.txt").write_text("")  # the toolkit installs it; empty: nothing to install
    data = tmp_path / "data"
    data.mkdir()
    (data / "rows.txt").write_text("a b c d\n")
    git = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.com", "HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}  # fmt: skip
    for command in (["init", "--quiet"], ["add", "."], ["commit", "--quiet", "-m", "c"], ["tag", "v1"]):
        subprocess.run(["git", *command], cwd=tmp_path / "team", env=git, check=True, capture_output=True)
    sources = {
        "dir": own_recipe(tmp_path / "team", {"dir": "scripts"}),
        "git": own_recipe(
            tmp_path, {"git": {"repo": str(tmp_path / "team"), "tag": "v1", "path": "scripts"}}
        ),
    }
    for kind, recipe in sources.items():
        out_dir = tmp_path / f"out-{kind}"
        argv = ["local", "--recipe", str(recipe), "--out", str(out_dir), "--channel", f"training={data}"]
        code = main(argv)
        out, err = capsys.readouterr()
        assert code == 0, out + err
        assert "were not checked" not in out  # its argparse parser was read: --epochs, an int
        assert f"channels.training: data/own/ -> {data} (a local folder given with --channel)" in out
        assert "steps: the script's own -> the script's own" in out
        [run_dir] = list(out_dir.glob("own-code-*"))
        report = json.loads((run_dir / "report.json").read_text())
        assert report["execution_status"] == "SUCCEEDED" and report["final_metrics"] == {"loss": 0.25}
        with tarfile.open(run_dir / "model.tar.gz") as tar:
            member = tar.extractfile("m.json")
            assert member is not None and json.loads(member.read()) == {"rows": 4, "epochs": 2}
    (data / "rows.txt").write_text("boom\n")
    code = main(
        [
            "local",
            "--recipe",
            str(sources["dir"]),
            "--out",
            str(tmp_path / "fails"),
            "--channel",
            f"training={data}",
        ]
    )
    out, err = capsys.readouterr()
    assert code == 1
    # The script's own traceback, once (the failure reason and the report quote its last line).
    assert (out + err).count("Traceback (most recent call last)") == 1, out + err
    assert 'raise RuntimeError("the team\'s own error")' in out + err


def test_local_serves_what_a_teams_own_folder_trains_with_its_own_handler(
    tmp_path: Path, capsys: Any
) -> None:
    """A team's fork of the QA script in its own folder (its handler shipped as code/inference.py by the
    script): trained, deployed and smoke-tested from the uploaded source, not from training_code/."""
    import shutil

    from hfpipe.core.recipes import load_recipe
    from hfpipe.local.checkout import checkout_root

    scripts = tmp_path / "team" / "scripts"
    shutil.copytree(checkout_root() / "training_code", scripts, ignore=shutil.ignore_patterns("__pycache__"))
    (scripts / "run_qa.py").rename(scripts / "team_qa.py")  # a name the project's scripts do not have
    recipe = load_recipe("tiny-qa")
    recipe["training"].update(source={"dir": "scripts"}, entry_point="team_qa.py")
    path = tmp_path / "team" / "my-recipe.json"
    path.write_text(json.dumps(recipe))
    code = main(
        [
            "local",
            "--recipe",
            str(path),
            "--out",
            str(tmp_path / "out"),
            "--set",
            "training.hyperparameters.max_steps=2",
        ]
    )
    out, _ = capsys.readouterr()
    assert code == 0, out
    assert "training source: s3://" in out and "/sources/" in out
    [run_dir] = list((tmp_path / "out").glob("tiny-qa-*"))
    report = json.loads((run_dir / "report.json").read_text())
    assert report["smoke_test"]["ok"] is True and set(report["smoke_test"]["response"]) >= {"answer", "score"}
    assert "team_qa.py" in (run_dir / "training.log").read_text()


def test_the_readmes_own_code_block_runs_as_pasted(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    from hfpipe.local.checkout import checkout_root

    readme = (checkout_root() / "README.md").read_text()
    section = readme.split("## Your own training code", 1)[1].split("\n## ", 1)[0]
    [block] = re.findall(r"```bash\n(.*?)```", section, flags=re.S)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(["bash", "-e", "-c", block], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    [run_dir] = list((tmp_path / "my-team" / "runs").glob("my-team-*"))
    report = json.loads((run_dir / "report.json").read_text())
    assert report["execution_status"] == "SUCCEEDED" and report["final_metrics"] == {"loss": 0.25}
