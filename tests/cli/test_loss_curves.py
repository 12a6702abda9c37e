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
from hfpipe.core.recipe.recipes import available_recipes, resolve_recipe
from hfpipe.local import outputs
from hfpipe.local.training.substitute import LOCAL_LOG_POINTS, for_this_machine

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


RUN = "tiny-qa-20261201-000000"
JOB = f"local-{RUN}"
TRAINER_DEFINITIONS = resolve_recipe(recipe_name="tiny-qa")["training"]["metric_definitions"]


def described_job(
    definitions: list[dict[str, str]],
    program: str = "run_qa.py",
    submit: str = "s3://hfpipe-local-artifacts/code/sourcedir.tar.gz",
    final: dict[str, float] | None = None,
) -> dict[str, Any]:
    """A training job as DescribeTrainingJob answers (what a local run keeps as training_job.json): the
    fields the plot and its advice read, its hyperparameters JSON-encoded as the SDK sends them."""
    return {
        "TrainingJobName": JOB,
        "TrainingJobStatus": "Completed",
        "AlgorithmSpecification": {"TrainingInputMode": "File", "MetricDefinitions": definitions},
        "HyperParameters": {
            "sagemaker_program": json.dumps(program),
            "sagemaker_submit_directory": json.dumps(submit),
        },
        "FinalMetricDataList": [
            {"MetricName": name, "Value": value, "Timestamp": "2026-12-01 00:00:10+00:00"}
            for name, value in (final or {}).items()
        ],
    }


def _finished_run(
    root: Path,
    log: str,
    history: list[dict[str, Any]] | None,
    job: dict[str, Any] | None = None,
    final: dict[str, float] | None = None,
) -> Path:
    run_dir = root / RUN
    run_dir.mkdir()
    (run_dir / outputs.REPORT).write_text(json.dumps({"execution_name": RUN, "final_metrics": final or {}}))
    (run_dir / outputs.TRAINING_LOG).write_text(log)
    if job is not None:
        (run_dir / outputs.TRAINING_JOB).write_text(json.dumps(job))
    if history is not None:
        state = run_dir / "jobs" / JOB / "run" / "opt_ml" / "checkpoints"
        state.mkdir(parents=True)
        (state / "trainer_state.json").write_text(json.dumps({"global_step": 8, "log_history": history}))
    return run_dir


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


def report_plot(root: Path, capsys: Any) -> tuple[int, str, str]:
    code = main(["report", "--local", "--out", str(root), "--plot", str(root / "l.png")])
    out, err = capsys.readouterr()
    return code, out, err


NO_LOSS_LOG = "***** Running training *****\n100%|##| 4/4 [00:01<00:00, 4.0it/s]\n"
LOOKED = (
    "no loss value in its trainer_state.json, the Trainer's lines in its training log, its training log read "
    "with its metric definitions, its final metrics"
)


def test_nothing_to_plot_says_what_to_change(tmp_path: Path, capsys: Any) -> None:
    _finished_run(tmp_path, NO_LOSS_LOG, None, described_job(TRAINER_DEFINITIONS))
    assert report_plot(tmp_path, capsys)[::2] == (
        1,
        f"error: local run {RUN}: nothing to plot, {LOOKED}; its loss metric definitions (loss, train_loss) matched "
        "no line of its training log (the Trainer logs the loss every `logging_steps` steps, more than this run "
        "trained); run it again with --set training.hyperparameters.logging_steps=1\n",
    )


def test_a_loss_the_report_shows_is_plotted_whatever_its_source(
    tmp_path: Path, plotted: list[Any], capsys: Any
) -> None:
    """The report's final metrics show a loss, the log has no line the Trainer prints: a plot all the same,
    of the one value (the job's final metrics), saying so."""
    _finished_run(tmp_path, NO_LOSS_LOG, None, described_job([], final={"loss": 2.008}))
    code, out, err = report_plot(tmp_path, capsys)
    assert (code, err) == (0, "")
    assert plotted == [({"loss": [("end", 2.008)]}, "end of training (the final metrics)")]
    assert f"loss plot: {tmp_path / 'l.png'}, from its final metrics: loss 1 value (x: end of training" in out
    # A run of an earlier version recorded no training_job.json: its report's final metrics then.
    (tmp_path / RUN / outputs.TRAINING_JOB).unlink()
    (tmp_path / RUN / outputs.REPORT).write_text(
        json.dumps({"execution_name": RUN, "final_metrics": {"eval_loss": 3}})
    )
    assert report_plot(tmp_path, capsys)[0] == 0
    assert plotted[-1] == ({"eval_loss": [("end", 3.0)]}, "end of training (the final metrics)")


def test_an_own_scripts_loss_lines_are_read_with_its_metric_definitions(
    tmp_path: Path, plotted: list[Any], capsys: Any
) -> None:
    """A team's script prints its loss its own way (`loss = ...`), which its recipe's definition matches, as
    SageMaker's does: every value it printed is a point, in the order printed."""
    definitions = [{"Name": "loss", "Regex": "loss = ([0-9.]+)"}]
    log = "epoch 1\nloss = 2.5\nepoch 2\nloss = 2.1 (lr 0.1) loss = 2.05\nloss = nan\nloss = 2.008\n"
    _finished_run(tmp_path, log, None, described_job(definitions, "train.py", final={"loss": 2.008}))
    code, out, err = report_plot(tmp_path, capsys)
    assert (code, err) == (0, "")
    assert plotted == [({"loss": [(1, 2.5), (2, 2.1), (3, 2.05), (4, 2.008)]}, "value's place in the log")]
    assert "from its training log read with its metric definitions: loss 4 values (x: value's place" in out


def own_source(tmp_path: Path, script: str) -> tuple[str, bytes]:
    """A team's train.py packed as `hfpipe start` packs it, and the URI Plan takes it from (sources/<sha256>/)."""
    from hfpipe import contract
    from hfpipe.core.recipe import sourcedir

    folder = tmp_path / "scripts"
    folder.mkdir()
    (folder / "train.py").write_text(script)
    packed = sourcedir.pack(folder)
    return f"s3://hfpipe-local-artifacts/{contract.source_key(packed.sha256)}", packed.data


ARGPARSE = (
    "import argparse\np = argparse.ArgumentParser()\np.add_argument('--epochs', type=int)\np.parse_args()\n"
)
TRAINER = (
    "from transformers import HfArgumentParser, TrainingArguments\n"
    "(args,) = HfArgumentParser(TrainingArguments).parse_args_into_dataclasses()\n"
)
KNOWN_ARGS = "import argparse\np = argparse.ArgumentParser()\nargs, _ = p.parse_known_args()\n"
MATCHED = "its loss metric definitions (loss) matched no line of its training log"
PRINT_IT = "have it print its loss on lines they match (loss: loss = ([0-9.]+))"


@pytest.mark.parametrize(
    ("script", "advice"),
    [
        (
            ARGPARSE,
            f"{MATCHED}, and train.py takes no logging_steps (its parser's arguments: epochs): {PRINT_IT}",
        ),
        (TRAINER, f"{MATCHED} (the Trainer logs the loss every `logging_steps` steps, more than this run"),
        (
            KNOWN_ARGS,
            f"{MATCHED}; which arguments train.py takes is not known (its parser cannot be read without running "
            "it: it parses with parse_known_args, which takes arguments it does not declare), so none is "
            f"suggested: {PRINT_IT}",
        ),
    ],
)
def test_the_advice_names_only_an_argument_the_runs_script_takes(
    tmp_path: Path, capsys: Any, script: str, advice: str
) -> None:
    """Nothing to plot for a team's own train.py: its parser (read from the run's copy of its source, as `hfpipe
    start` reads it) decides whether logging_steps is advice at all."""
    uri, data = own_source(tmp_path, script)
    definitions = [{"Name": "loss", "Regex": "loss = ([0-9.]+)"}]
    run_dir = _finished_run(tmp_path, NO_LOSS_LOG, None, described_job(definitions, "train.py", uri))
    (run_dir / outputs.SOURCE_ARCHIVE.format(job=JOB)).parent.mkdir(parents=True, exist_ok=True)
    (run_dir / outputs.SOURCE_ARCHIVE.format(job=JOB)).write_bytes(data)
    code, _, err = report_plot(tmp_path, capsys)
    assert (code, err.count("\n")) == (1, 1)
    assert err.startswith(f"error: local run {RUN}: nothing to plot, {LOOKED}; {advice}"), err
    assert ("logging_steps=1" in err) is (script == TRAINER)


def test_the_rule_takes_the_first_curve_else_the_first_value_and_passes_over_what_it_cannot_read() -> None:
    from botocore.exceptions import ClientError

    from hfpipe.cli.run.loss_curves import Place, find

    def denied() -> dict[str, Any]:
        raise ClientError({"Error": {"Code": "AccessDeniedException", "Message": "no\nway"}}, "GetMetricData")

    one = Place("one", "x1", lambda: {"loss": [(1, 2.0)], "accuracy": [(1, 0.5), (2, 0.6)]})
    curve = Place("curve", "x2", lambda: {"eval_loss": [(1, 2.0), (2, 1.5)]})
    unread = Place("unread", "x0", denied)
    curves, looked = find([unread, one, curve, Place("never read", "x3", denied)])
    assert curves is not None and (curves.place, curves.series) == (
        "curve",
        {"eval_loss": [(1, 2.0), (2, 1.5)]},
    )
    assert looked == ["unread (not read: AccessDeniedException: no way)", "one", "curve"]
    # No curve anywhere: the first place with a loss value (not a metric without "loss" in its name).
    curves, _ = find(
        [unread, Place("none", "x", dict), one, Place("later", "x", lambda: {"loss": [(1, 3.0)]})]
    )
    assert curves is not None and (curves.place, curves.series, curves.xlabel) == (
        "one",
        {"loss": [(1, 2.0)]},
        "x1",
    )
    assert find([unread, Place("none", "x", dict)])[0] is None
