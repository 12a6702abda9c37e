"""`hfpipe local --dry-run`: what `hfpipe start --dry-run` shows, for the run `hfpipe local` would make here
(the local environment's settings and quotas, the substitutions), with nothing built, trained or written;
and a local run refused after its folder was made leaves no folder behind."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from cli_run import run


def stages_only(err: str) -> bool:
    """Whether stderr holds only the stage lines a run says what it is doing with (a synthesis when the
    shared cache is cold: it depends on what ran before)."""
    return all(re.match(r"\[ *\d+ s\] ", line) for line in err.splitlines())


def test_the_dry_run_shows_the_plan_and_the_request_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "runs"
    code, stdout, err = run(capsys, "local", "--recipe", "tiny-qa", "--dry-run", "--out", str(out))
    assert code == 0 and stages_only(err), err
    assert "substituted for this machine" in stdout
    assert "nothing was started or created" in stdout and "CreateTrainingJob request:" in stdout
    assert '"TrainingJobName": "local-tiny-qa-' in stdout
    # The synthesized stacks' cache aside, no run folder: nothing ran.
    left = sorted(p.name for p in out.iterdir()) if out.exists() else []
    assert left in ([], [".cache"]), left


def test_the_dry_runs_json_is_the_plan_the_local_plan_state_makes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from hfpipe.core.run.plan_model import Plan

    code, stdout, err = run(
        capsys,
        "local",
        "--recipe",
        "tiny-lora",
        "--set",
        "training.hyperparameters.max_steps=2",
        "--dry-run",
        "--json",
        "--out",
        str(tmp_path),
    )
    assert code == 0 and stages_only(err), err
    plan = Plan.from_json(json.loads(stdout))  # stdout is the JSON alone
    assert plan.env == "local" and plan.recipe_name == "tiny-lora"
    assert plan.training_job_request["HyperParameters"]["max_steps"] == "2"


def test_the_dry_run_refuses_what_the_run_refuses_and_serving_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(capsys, "local", "--recipe", "tiny-qa", "--dry-run", "--serve", "--out", str(tmp_path))
    assert code == 2 and err.startswith("error: --serve") and err.count("\n") == 1, err
    code, _, err = run(
        capsys,
        "local",
        "--recipe",
        "tiny-qa",
        "--set",
        "training.instance_count=3",
        "--dry-run",
        "--out",
        str(tmp_path),
    )
    assert code == 1 and "instance_count" in err and err.count("\n") == 1, err


def test_a_run_refused_after_its_folder_was_made_leaves_none(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Refused runs left empty folders, which `report --local` and `prune` then had to step around."""
    from hfpipe.local import run as local_run
    from hfpipe.local.checkout import LocalModeError

    def refused(self: Any) -> Any:
        (self.out / "fixtures").mkdir()  # what a run writes before it gets going
        raise LocalModeError("the fixtures cannot be built here")

    monkeypatch.setattr(local_run.LocalRun, "__enter__", refused)
    out = tmp_path / "runs"
    code, _, err = run(capsys, "local", "--recipe", "tiny-qa", "--out", str(out))
    assert code == 1 and err.endswith("\nerror: the fixtures cannot be built here\n"), err
    assert [p.name for p in out.iterdir() if p.name != ".cache"] == []


def test_fixtures_built_beside_the_synthesis_are_the_runs(tmp_path: Path) -> None:
    """On a first run the fixtures are built on a second thread while the stacks are synthesized, then moved
    into the run's folder: the same channels as a build there, and none for a recipe that changed since."""
    import argparse

    from hfpipe.cli import local
    from hfpipe.cli.recipe import recipes
    from hfpipe.local.run import LocalRun

    args = argparse.Namespace(channels=[], sets=[])
    loaded = recipes.load("tiny-qa", [])
    warming = local._Warming(local._as_run_here(args, loaded, False, None))
    warming.start()
    late = local._as_run_here(args, loaded, True, None)
    built = warming.join(late)
    assert built is not None
    folder, channels = built
    assert set(channels) == {"model", "training", "validation"}
    run = LocalRun(late, tmp_path / "run", tmp_path / "cache", built=built)
    (tmp_path / "run").mkdir()
    moved = run._fixtures(tmp_path / "run" / "fixtures")
    assert not folder.exists()
    assert {name: path.relative_to(tmp_path / "run" / "fixtures") for name, path in moved.items()} == {
        name: path.relative_to(folder) for name, path in channels.items()
    }
    assert (moved["model"] / "config.json").is_file() and any(moved["training"].iterdir())
    # Another channel given since (a --channel folder): the early build is not the run's.
    given = tmp_path / "mine"
    given.mkdir()
    (given / "train.jsonl").write_text("{}\n")
    other = local._as_run_here(
        argparse.Namespace(channels=[f"training={given}"], sets=[]), loaded, True, None
    )
    assert warming.join(other) is None
