"""Loss curves: the recipes' metric definitions match the Trainer's per-step log line (SageMaker applies each
regex to each log line), a local run logs often enough to draw one, and `report --plot` puts the training
step of the Trainer's own log history on the x axis, or says what to change when there is nothing to plot.

A MetricDefinition's Regex "searches the output of a training job and gets the value of the metric" (its first
group), SageMaker publishing each value to CloudWatch (SageMaker API reference, MetricDefinition; "Defining
metrics and environment variables", https://docs.aws.amazon.com/sagemaker/latest/dg/
automatic-model-tuning-define-metrics-variables.html): a regex that matches only the end-of-training summary
gives one point per series, so each definition here is checked against single log lines."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from hfpipe.cli import main
from hfpipe.core.recipes import available_recipes, resolve_recipe
from hfpipe.local import outputs
from hfpipe.local.substitute import LOCAL_LOG_POINTS, for_this_machine

#: Their metric definitions are the originals' (the seed notebooks'), stated in their descriptions.
SEED_FAITHFUL = {"bert-large-squad-smddp", "roberta-large-mnli-smp"}
RECIPES = sorted(set(available_recipes()) - SEED_FAITHFUL)


def trainer_lines() -> dict[str, str]:
    """The lines the Trainer prints, as transformers' ProgressCallback.on_log writes them: str() of the
    logged dict (a training step, an evaluation), and the end-of-training summary (Trainer.log_metrics)."""
    return {
        "step": str({"loss": 0.5123, "grad_norm": 1.25, "learning_rate": 4e-05, "epoch": 0.5}),
        "eval": str(
            {"eval_loss": 0.75, "eval_accuracy": 0.5, "eval_f1": 12.5, "eval_runtime": 0.2, "epoch": 1.0}
        ),
        "summary": "  train_loss               =     0.6011",
    }


def scraped(definitions: list[dict[str, str]], line: str) -> dict[str, float]:
    """What SageMaker takes from one log line: each definition's first group."""
    found = {}
    for definition in definitions:
        match = re.search(definition["Regex"], line)
        if match:
            found[definition["Name"]] = float(match.group(1))
    return found


@pytest.mark.parametrize("name", RECIPES)
def test_each_recipe_scrapes_the_loss_of_every_logged_step(name: str) -> None:
    definitions = resolve_recipe(recipe_name=name)["training"]["metric_definitions"]
    lines = trainer_lines()
    # the per-step line gives the loss, and nothing the summary's train_loss or an eval_loss would claim
    assert scraped(definitions, lines["step"]) == {"loss": 0.5123}
    assert scraped(definitions, lines["summary"]) == {"train_loss": 0.6011}
    # an evaluation's dict gives its eval_* metrics per evaluation, not only in the final summary
    evals = {d["Name"] for d in definitions if d["Name"] in {"eval_loss", "eval_accuracy", "eval_f1"}}
    assert set(scraped(definitions, lines["eval"])) == evals


@pytest.mark.parametrize("name", ["tiny-lora", "tiny-qa", "bloomz-7b1-lora-samsum", "distilbert-spot"])
def test_a_local_run_logs_its_loss_several_times(name: str) -> None:
    recipe = resolve_recipe(recipe_name=name)
    subs = for_this_machine(recipe, gpu=False)
    hps = subs.recipe["training"]["hyperparameters"]
    assert int(hps["max_steps"]) // int(hps["logging_steps"]) >= LOCAL_LOG_POINTS
    # The full-size recipes log every 10 or 500 steps: local mode says it logs more often. The tiny ones
    # already log every step (and so run as written, as the local world requires).
    changed = hps["logging_steps"] != recipe["training"]["hyperparameters"].get("logging_steps")
    assert changed is not name.startswith("tiny-")
    assert any(line.startswith("logging_steps: ") for line in subs.lines()) is changed


def test_a_recipe_that_logs_often_enough_keeps_its_logging_steps() -> None:
    recipe = resolve_recipe(recipe_name="tiny-qa", overrides={"training.hyperparameters.logging_steps": 0.25})
    subs = for_this_machine(recipe, gpu=False)
    assert subs.recipe["training"]["hyperparameters"]["logging_steps"] == 0.25  # a fraction of the run
    assert not any(line.startswith("logging_steps") for line in subs.lines())


def _finished_run(root: Path, log: str, history: list[dict[str, Any]] | None) -> Path:
    run_dir = root / "tiny-qa-20261201-000000"
    run_dir.mkdir()
    (run_dir / outputs.REPORT).write_text(json.dumps({"execution_name": run_dir.name}))
    (run_dir / outputs.TRAINING_LOG).write_text(log)
    if history is not None:
        state = run_dir / "jobs" / "local-tiny-qa-20261201-000000" / "run" / "opt_ml" / "checkpoints"
        state.mkdir(parents=True)
        (state / "trainer_state.json").write_text(json.dumps({"global_step": 8, "log_history": history}))
    return run_dir


@pytest.fixture
def plotted(monkeypatch: pytest.MonkeyPatch) -> list[tuple[dict[str, Any], str | None]]:
    """What `report --plot` hands the plot: its series and the x axis's label."""
    from hfpipe.cli import report

    calls: list[tuple[dict[str, Any], str | None]] = []
    real = report.plot_losses

    def record(series: dict[str, Any], path: Path, title: str, xlabel: str | None = None) -> Path:
        calls.append((series, xlabel))
        return real(series, path, title, xlabel=xlabel)

    monkeypatch.setattr(report, "plot_losses", record)
    return calls


def test_the_plot_x_axis_is_the_trainers_step(tmp_path: Path, plotted: list[Any], capsys: Any) -> None:
    history = [
        {"loss": 2.0, "grad_norm": 1.0, "learning_rate": 1e-3, "epoch": 0.5, "step": 2},
        {"loss": 1.5, "epoch": 1.0, "step": 4},
        {"eval_loss": 1.7, "epoch": 1.0, "step": 4},
        {"loss": 1.25, "epoch": 1.5, "step": 6},
        {"train_runtime": 1.0, "train_loss": 1.6, "epoch": 2.0, "step": 8},
    ]
    # the log's lines in another order and with a line more: the plot follows the Trainer's history
    _finished_run(tmp_path, "{'loss': 9.0, 'epoch': 0.1}\n{'loss': 2.0, 'epoch': 0.5}\n", history)
    png = tmp_path / "loss.png"
    assert main(["report", "--local", "--out", str(tmp_path), "--plot", str(png)]) == 0
    assert plotted == [({"loss": [(2, 2.0), (4, 1.5), (6, 1.25)], "eval_loss": [(4, 1.7)]}, "training step")]
    assert png.read_bytes().startswith(b"\x89PNG")


def test_without_the_trainers_state_the_log_gives_the_epoch(tmp_path: Path, plotted: list[Any]) -> None:
    _finished_run(tmp_path, "{'loss': 2.0, 'epoch': 0.25}\n[rank0] {'loss': 1.5, 'epoch': 0.5}\n", None)
    assert main(["report", "--local", "--out", str(tmp_path), "--plot", str(tmp_path / "l.png")]) == 0
    assert plotted == [({"loss": [(0.25, 2.0), (0.5, 1.5)]}, "epoch")]


def test_nothing_to_plot_says_what_to_change(tmp_path: Path, capsys: Any) -> None:
    run_dir = _finished_run(
        tmp_path, "***** Running training *****\n100%|##| 4/4 [00:01<00:00, 4.0it/s]\n", None
    )
    assert main(["report", "--local", "--out", str(tmp_path), "--plot", str(tmp_path / "l.png")]) == 1
    err = capsys.readouterr().err
    assert err == (
        f"error: local run {run_dir.name}: nothing to plot, its training log has no loss lines (the Trainer "
        "logs the loss every `logging_steps` steps, more than this run trained); run it again with "
        "--set training.hyperparameters.logging_steps=1\n"
    )
