"""`hfpipe local` with a team's own source and its refusals. The project's recipes run end to end where a
test needs their run anyway (tests/local_runs.py says where), each checked by `check_finished_run`."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path
from typing import Any

import pytest

from hfpipe.cli import main

pytestmark = pytest.mark.slow


def test_local_bad_set(tmp_path: Path, capsys: Any) -> None:
    code = main(["local", "--recipe", "tiny-qa", "--out", str(tmp_path), "--set", "nope"])
    _, err = capsys.readouterr()
    assert code == 2  # a usage error (docs/cli.md)
    assert err.startswith("error: --set 'nope' is not KEY=VALUE")


@pytest.fixture(scope="module")
def local_out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An --out folder with the app synthesized in its cache, as every local run has it after its first: the
    module's runs share it (synthesis takes seconds)."""
    from hfpipe.local.stacks import synth_stacks

    out = tmp_path_factory.mktemp("local-out")
    synth_stacks(out / ".cache")
    return out


@pytest.mark.parametrize("source", [None, "dir", "git"], ids=["project-scripts", "own-folder", "own-git"])
def test_local_refuses_what_start_refuses_before_building_anything(
    local_out: Path, tmp_path: Path, capsys: Any, monkeypatch: pytest.MonkeyPatch, source: str | None
) -> None:
    """A recipe the environment's rules refuse (a GPU-only training container on a CPU instance) is refused by
    `hfpipe local` in the line `hfpipe start` gives, through the same entry (hfpipe.core.run.plan.accept) with the
    local environment's settings, before the engine, a fixture or a run folder is made, and before a recipe's
    own source is cloned or packed (the git repository does not exist; packing fails the test): within
    seconds of the app's synthesis (cached, as every local run has it), where the Plan state refused it after
    ~44 s, or after packing and uploading an own source."""
    import time

    from hfpipe.core.recipe import sourcedir
    from hfpipe.core.recipe.recipes import load_recipe

    container = load_recipe("tiny-qa")["container"]["training"]
    versions = "/".join(container[k] for k in ("transformers_version", "pytorch_version", "py_version"))
    recipe, name = "tiny-qa", "tiny-qa"
    if source is not None:
        (tmp_path / "team" / "scripts").mkdir(parents=True)
        (tmp_path / "team" / "scripts" / "train.py").write_text(OWN_TRAIN)
        repository = {"git": {"repo": str(tmp_path / "no-such-repository")}}
        recipe, name = (
            str(own_recipe(tmp_path / "team", {"dir": "scripts"} if source == "dir" else repository)),
            "own-code",
        )
    monkeypatch.setattr(sourcedir, "pack", lambda *a, **k: pytest.fail("packed before the refusal"))
    before = set(local_out.iterdir())
    args = [
        "local",
        "--recipe",
        recipe,
        "--set",
        "training.instance_type=ml.m5.xlarge",
        "--out",
        str(local_out),
    ]
    started = time.monotonic()
    code = main(args)
    seconds = time.monotonic() - started
    out, err = capsys.readouterr()
    assert code == 1 and out == ""
    assert err == (
        f"error: recipe {name!r} cannot run in this environment: recipe.container.training: {versions} has no "
        "cpu image for ml.m5.xlarge; accepted: an instance type of its images' processors ['gpu'], other "
        "versions, or container.training.image_uri\n"
    )
    assert seconds < 5, f"refused after {seconds:.1f} s"
    assert set(local_out.iterdir()) == before  # no run folder


def test_local_names_what_packing_left_out(local_out: Path, tmp_path: Path, capsys: Any) -> None:
    """`hfpipe local` packs a recipe's own folder through the function `hfpipe start` packs with, so it names
    each file or folder left out and why, as start does (docs/own-code.md), before its training source line."""
    scripts = tmp_path / "team" / "scripts"
    (scripts / "__pycache__").mkdir(parents=True)
    (scripts / "__pycache__" / "train.cpython-312.pyc").write_bytes(b"\x00")
    (scripts / "train.py").write_text(OWN_TRAIN)
    (scripts / ".env").write_text("HF_TOKEN=secret\n")
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "rows.txt").write_text("a b\n")
    recipe = own_recipe(tmp_path / "team", {"dir": "scripts"})
    argv = [
        "local",
        "--recipe",
        str(recipe),
        "--out",
        str(local_out),
        "--channel",
        f"training={tmp_path / 'data'}",
    ]
    code = main(argv)
    out, err = capsys.readouterr()
    assert code == 0, out + err
    lines = [line for line in out.splitlines() if line.startswith(("not packed: ", "training source: "))]
    assert lines[:2] == [
        "not packed: .env (looks like a secret; list it in training.source.include)",
        "not packed: __pycache__/ (Python's bytecode cache)",
    ]
    # what is packed, then where it went
    assert lines[2].startswith("training source: 1 file, ") and "largest: train.py" in lines[2], lines
    assert lines[3].startswith("training source: s3://") and lines[3].endswith("(1 file)"), lines


def test_the_local_environments_settings_are_the_plan_functions_in_the_engine(tmp_path: Path) -> None:
    """What the up-front check reads (hfpipe.local.stacks.plan_config, from the synthesized templates alone) is
    what the local Plan function gets from the engine once it runs: the same PlanConfig."""
    import os

    from hfpipe.core.run.plan import PlanConfig
    from hfpipe.local.engine.engine import LocalEngine
    from hfpipe.local.stacks import REGION, local_data, plan_config, synth_stacks

    stacks = synth_stacks(tmp_path / ".cache")
    with LocalEngine(stacks["Pipeline"], imports=local_data(stacks["Data"]).imports, region=REGION) as engine:
        (plan,) = [k for k, p in engine.functions.items() if p["Handler"] == "pipeline_lambdas.plan.handler"]
        in_engine = PlanConfig.from_environment({**os.environ, **engine._own_env[plan]})
    assert plan_config(stacks) == in_engine
    assert (in_engine.env, in_engine.region, sorted(in_engine.image_catalog)[:1]) == (
        "local",
        REGION,
        ["distribution"],
    )


OWN_TRAIN = """import argparse, json, os, sys
parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, required=True)
args, _ = parser.parse_known_args()  # not read without running it: its hyperparameters are not checked
rows = open(os.path.join(os.environ["SM_CHANNEL_TRAINING"], "rows.txt")).read().split()
if "boom" in rows:
    raise RuntimeError("the team's own error")
json.dump({"rows": len(rows), "epochs": args.epochs}, open(os.path.join(os.environ["SM_MODEL_DIR"], "m.json"), "w"))
print(f"loss = {1 / len(rows)}")
"""


def own_recipe(folder: Path, source: dict[str, Any]) -> Path:
    """A team's recipe next to its own code: no project script, no hub model, deploy false."""
    from hfpipe.core.recipe.recipes import load_recipe

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
    recipe.pop("evaluation")  # its held-out channel is the fixture's; a team's own data has none here
    path = folder / "my-recipe.json"
    path.write_text(json.dumps(recipe))
    return path


def _spot_channels(root: Path) -> list[str]:
    """The spot estimator's inputs as its notebook made them, built here: `train` and `test` channels of
    tokenized data sets saved with save_to_disk, and a local model for its --model_name (a tiny DistilBERT)."""
    from datasets import Dataset
    from transformers import AutoTokenizer

    from hfpipe.fixtures.encoders import build_encoder

    model = build_encoder("distilbert", root / "tiny-distilbert")
    tokenizer = AutoTokenizer.from_pretrained(model)
    texts = [
        "The film was great and the acting was wonderful.",
        "The service was terrible and the food was awful.",
    ]
    encoded = tokenizer(texts * 4, padding="max_length", max_length=16, truncation=True)
    for split in ("train", "test"):
        Dataset.from_dict({**encoded, "labels": [1, 0] * 4}).save_to_disk(str(root / split))
    return [f"train={root / 'train'}", f"test={root / 'test'}", f"model={model}"]


def _check_own_run(out_dir: Path, recipe: str, out: str, architecture: str) -> tuple[Path, dict[str, Any]]:
    """What both originals' runs must show: their parser read, a finished run (deploy false) with a model of
    the architecture its script trains."""
    from local_runs import check_finished_run

    assert "were not checked" not in out  # its parser was read: every hyperparameter checked
    assert "training source: s3://" in out and "/sources/" in out
    run_dir, report = check_finished_run(out_dir, recipe, out, handler=False, deployed=False)
    with tarfile.open(run_dir / "model.tar.gz") as tar:
        member = tar.extractfile("config.json")
        assert member is not None and json.loads(member.read())["architectures"] == [architecture]
    return run_dir, report


def test_local_runs_the_original_estimators_from_their_git_source_and_own_folder(
    tmp_path: Path, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The original material's two estimators, their recipes as written (recipes/own-code/), through the
    real state machine on the local engine: the SQuAD data-parallel one from its git source at tag v4.6.1 (a
    local repository whose run_qa.py takes v4.6.1's arguments stands in for github.com; nothing else of the
    recipe changes), the spot one from its own scripts/ folder with local folders as its channels. Then a
    team's failing script shows its own traceback, once."""
    from own_sources import SPOT_RECIPE, squad_recipe_from, transformers_at_v461

    from hfpipe.cli.recipe.sources import CACHE_ENV

    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))  # the git clone goes here, not in ~/.cache
    squad = squad_recipe_from(transformers_at_v461(tmp_path / "transformers"), tmp_path / "squad.json")
    code = main(["local", "--recipe", str(squad), "--out", str(tmp_path / "out-squad")])
    out, err = capsys.readouterr()
    assert code == 0, out + err
    for line in (
        # v4.6.1 requires model_name_or_path and reads data files by name: both point into the channels.
        "model_name_or_path: bert-large-uncased-whole-word-masking -> tiny random-weight BERT (model channel; the "
        "question-answering stand-in, "
        "model_name_or_path /opt/ml/input/data/model)",
        "dataset_name: squad -> SQuAD v1.1 JSON fixture in channels training, validation (train_file "
        "/opt/ml/input/data/training/train.json, validation_file /opt/ml/input/data/validation/validation.json)",
        "distribution: smdistributed dataparallel (SMDDP) -> torch_distributed, 2 gloo processes",
        "fp16: true -> false (half precision needs a GPU)",
        "use_cpu: not set -> true (gloo data parallelism across processes on a CPU needs it)",
    ):
        assert line in out, line
    # Its hub model and data set became stand-ins, and it sets no max_steps: its own steps, not capped.
    assert "steps: the script's own -> the script's own (the recipe sets no max_steps: not capped)" in out
    run_dir, report = _check_own_run(
        tmp_path / "out-squad", "squad-smddp-run-qa-v4-6-1", out, "BertForQuestionAnswering"
    )
    # One data-parallel run of two processes: only process 0 of 2 saved the model and printed its metrics.
    log = (run_dir / "training.log").read_text()
    assert log.count("world_size = ") == 1 and "world_size = 2" in log
    metrics = report["final_metrics"]
    assert set(metrics) == {"epoch", "train_runtime", "train_samples_per_second"}, metrics
    assert metrics["epoch"] == 2.0 and metrics["train_samples_per_second"] > 0  # 96 questions read

    channels = _spot_channels(tmp_path)
    argv = ["local", "--recipe", str(SPOT_RECIPE), "--out", str(tmp_path / "out-spot")]
    argv += [a for c in channels for a in ("--channel", c)]
    # Its --model_name downloads from the hub: here the model channel's folder (/opt/ml paths are the run's).
    argv += ["--set", "training.hyperparameters.model_name=/opt/ml/input/data/model"]
    code = main(argv)
    out, err = capsys.readouterr()
    assert code == 0, out + err
    for channel in ("train", "test"):
        assert f"channels.{channel}: imdb/{channel}/ -> {tmp_path / channel} (a local folder given" in out
    # Its model and data are the folders given: nothing stood in, nothing capped.
    assert "  - steps: " not in out
    _, report = _check_own_run(
        tmp_path / "out-spot", "spot-own-train-py", out, "DistilBertForSequenceClassification"
    )
    assert set(report["final_metrics"]) == {"eval_accuracy", "eval_loss"}, report["final_metrics"]
    assert 0 <= report["final_metrics"]["eval_accuracy"] <= 1
    assert report["spot"] is True and "/checkpoints/" in report["checkpoint_s3_uri"]

    # A team's own script that fails: its own traceback, once (the failure reason and the report quote its
    # last line); its parser cannot be read without running it, which the note, report.json and the printed
    # report say.
    code_dir = tmp_path / "team" / "scripts"
    code_dir.mkdir(parents=True)
    (code_dir / "train.py").write_text(OWN_TRAIN)
    data = tmp_path / "data"
    data.mkdir()
    (data / "rows.txt").write_text("boom\n")
    recipe = own_recipe(tmp_path / "team", {"dir": "scripts"})
    code = main(
        ["local", "--recipe", str(recipe), "--out", str(tmp_path / "fails"), "--channel", f"training={data}"]
    )
    out, err = capsys.readouterr()
    assert code == 1
    assert (out + err).count("Traceback (most recent call last)") == 1, out + err
    assert 'raise RuntimeError("the team\'s own error")' in out + err
    unchecked = (
        "training.hyperparameters were not checked against train.py's parser: it parses with parse_known_args, "
        "which takes arguments it does not declare; they are passed as the SDK passes them (--name value)"
    )
    assert f"note: {unchecked}" in out
    [run_dir] = list((tmp_path / "fails").glob("own-code-*"))
    assert json.loads((run_dir / "report.json").read_text())["hyperparameters_not_checked"] == unchecked
    printed_report = out.split("report: own-code-", 1)[1]
    assert unchecked in " ".join(printed_report.replace("│", " ").split())  # its row (wrapped in the table)


def test_local_serves_what_a_teams_own_folder_trains_with_its_own_handler(
    tmp_path: Path, capsys: Any
) -> None:
    """A team's fork of the QA script in its own folder (its handler shipped as code/inference.py by the
    script): trained, deployed and smoke-tested from the uploaded source, not from training_code/."""
    import shutil

    from hfpipe.core.recipe.recipes import load_recipe
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


def test_the_own_code_block_runs_as_pasted(tmp_path: Path, capsys: Any) -> None:
    """docs/own-code.md's "The whole thing, on this machine" block (`own-code`), pasted into bash in an empty
    folder: a team's script and recipe trained in local mode, then its report and loss curve."""
    import os
    import subprocess
    import sys

    from doc_blocks import doc_block

    block = doc_block("own-code").text
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(["bash", "-e", "-c", block], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    [run_dir] = list((tmp_path / "my-team" / "runs").glob("my-team-*"))
    report = json.loads((run_dir / "report.json").read_text())
    assert report["execution_status"] == "SUCCEEDED" and report["final_metrics"] == {"loss": 0.2}
    # The block's `report --plot`: its script's loss lines (one per epoch), by the recipe's definition.
    assert (tmp_path / "my-team" / "loss.png").read_bytes().startswith(b"\x89PNG")
    assert "from its training log read with its metric definitions: loss 2 values" in done.stdout
    _advice_without_loss_lines(run_dir, tmp_path / "no-loss", capsys)


def _advice_without_loss_lines(run_dir: Path, out: Path, capsys: Any) -> None:
    """The same run with its loss lines and final metrics taken out: nothing to plot, and the advice is for
    its own train.py, whose parser (read from the run's copy of its source) takes --epochs only: no
    logging_steps, which train.py would refuse."""
    import shutil

    from hfpipe.cli import main
    from hfpipe.local import outputs

    copy = out / run_dir.name
    shutil.copytree(run_dir, copy)
    log = copy / outputs.TRAINING_LOG
    log.write_text("".join(line for line in log.read_text().splitlines(True) if "loss = " not in line))
    for name, key in ((outputs.REPORT, "final_metrics"), (outputs.TRAINING_JOB, "FinalMetricDataList")):
        document = json.loads((copy / name).read_text())
        document[key] = type(document[key])()
        (copy / name).write_text(json.dumps(document))
    capsys.readouterr()
    assert main(["report", "--local", "--out", str(out), "--plot", str(out / "loss.png")]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"error: local run {run_dir.name}: nothing to plot, no loss value in "), err
    assert (
        "its loss metric definitions (loss) matched no line of its training log, and train.py takes no "
        "logging_steps (its parser's arguments: epochs): have it print its loss on lines they match (loss: "
        "loss = ([0-9.]+))\n"
    ) in err
    assert "--set" not in err and not (out / "loss.png").exists()


def test_an_empty_model_folder_is_warned_in_the_report(tmp_path: Path) -> None:
    """A job whose script wrote nothing to SM_MODEL_DIR succeeds with an empty model.tar.gz, as on SageMaker;
    the local run's report says so, and its printed report has the row."""
    import io
    import tarfile

    from rich.console import Console, Group

    from hfpipe.cli.run.report import render_report
    from hfpipe.local.run import model_warning
    from hfpipe.local.training.container import pack_dir

    (tmp_path / "model").mkdir()
    empty = pack_dir(tmp_path / "model", tmp_path / "empty.tar.gz")
    assert model_warning(empty) is not None and "SM_MODEL_DIR" in str(model_warning(empty))
    (tmp_path / "model" / "config.json").write_text("{}")
    assert model_warning(pack_dir(tmp_path / "model", tmp_path / "full.tar.gz")) is None
    with tarfile.open(empty) as tar:
        assert not tar.getmembers() or not any(m.isfile() for m in tar.getmembers())
    report = {
        "execution_name": "e",
        "recipe_name": "r",
        "outcome": "succeeded",
        "model_warning": model_warning(empty),
    }
    console = Console(file=io.StringIO(), width=300, record=True, color_system=None)
    console.print(Group(*render_report(report)))
    assert "the model artifact (model.tar.gz) is empty" in console.export_text()
