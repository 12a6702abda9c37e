"""A training job's loss curves, for `hfpipe report --plot` and `hfpipe report --local --plot`: one rule for where
they are read, and what to change where there are none.

The places, in this order (a local run's folder stands for what it would have on AWS):

1. the Trainer's own log history, trainer_state.json (the job's checkpoint folder, synced to S3 by
   CheckpointConfig; a local run's checkpoints folder): x is the training step;
2. CloudWatch's metrics, which SageMaker publishes from the job's MetricDefinitions (namespace
   /aws/sagemaker/TrainingJobs, host algo-1, one-minute averages): x is the time; a local run's account ended
   with it;
3. the training log (CloudWatch Logs, host algo-1; a local run's training.log): the dicts the Trainer prints
   (``{'loss': 2.1, ..., 'epoch': 0.5}``), x the epoch they print;
4. the same log read with the job's MetricDefinitions, as SageMaker reads it: every value, x its place among
   that metric's values (a script of the team's own prints what it likes);
5. the job's final metrics (FinalMetricDataList, or a local report's): one point each.

The plot is the first place with a curve (two values or more of one loss); failing that, the first with any
loss value, so there is a plot wherever the report shows a loss. A place that cannot be read is passed over and
named when nothing is found.
"""

from __future__ import annotations

import ast
import functools
import json
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hfpipe.cli.run.job_script import Script

Series = dict[str, list[tuple[Any, float]]]

#: The loss series the Trainer logs: its per-step training loss and its evaluation loss.
LOSS_NAMES = ("loss", "eval_loss")
#: The shipped recipes' definition of the Trainer's per-step loss line.
LOSS_DEFINITION = {"Name": "loss", "Regex": "'loss': ([0-9.eE+-]+)"}
#: The x axis of a metric definition's values read from the log.
LOGGED_ORDER = "value's place in the log"


@dataclass(frozen=True)
class Place:
    """One place a job's loss values may be read: its name in messages, its x axis, its reader."""

    name: str
    xlabel: str
    read: Callable[[], Series]


@dataclass(frozen=True)
class Curves:
    """The loss series found, their x axis, and the place they were read from."""

    series: Series
    xlabel: str
    place: str

    def describe(self) -> str:
        counts = ", ".join(
            f"{name} {len(points)} value{'' if len(points) == 1 else 's'}"
            for name, points in sorted(self.series.items())
        )
        return f"from {self.place}: {counts} (x: {self.xlabel})"


def losses(series: Series) -> Series:
    """The loss series of ``series`` (every name with "loss" in it) that have values."""
    return {name: points for name, points in series.items() if "loss" in name.lower() and points}


def _read_errors() -> tuple[type[Exception], ...]:
    import botocore.exceptions

    return (
        OSError,
        ValueError,
        RecursionError,
        botocore.exceptions.ClientError,
        botocore.exceptions.BotoCoreError,
    )


def _why(exc: Exception) -> str:
    """One line for a read that failed: AWS's code and message, else the error's text."""
    error = (
        getattr(exc, "response", {}).get("Error", {})
        if isinstance(getattr(exc, "response", None), dict)
        else {}
    )
    text = f"{error.get('Code')}: {error.get('Message', '')}" if error.get("Code") else str(exc)
    return " ".join(text.split())


def find(places: Iterable[Place]) -> tuple[Curves | None, list[str]]:
    """The rule (see the module docstring): the curves to plot, or None; and each place looked at, with why
    where it could not be read."""
    first: Curves | None = None
    looked: list[str] = []
    for place in places:
        try:
            series = losses(place.read())
        except _read_errors() as exc:
            looked.append(f"{place.name} (not read: {_why(exc)})")
            continue
        looked.append(place.name)
        found = Curves(series, place.xlabel, place.name)
        if any(len(points) >= 2 for points in series.values()):
            return found, looked
        if series and first is None:
            first = found
    return first, looked


def _number(value: Any) -> float | None:
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    return float(value) if ok else None


def _add_losses(series: Series, x: Any, logged: dict[str, Any]) -> None:
    """Append each loss `logged` carries as a number to its curve, at `x`."""
    for name in LOSS_NAMES:
        value = _number(logged.get(name))
        if value is not None:
            series.setdefault(name, []).append((x, value))


def history_series(state: Any) -> Series:
    """Loss curves from the Trainer's own log history (trainer_state.json, written by `save_state`): each
    entry carries the global step it was logged at, the x value."""
    series: Series = {}
    history = state.get("log_history") if isinstance(state, dict) else None
    for entry in history if isinstance(history, list) else []:
        step = entry.get("step") if isinstance(entry, dict) else None
        if not isinstance(step, int) or isinstance(step, bool):
            continue
        _add_losses(series, step, entry)
    return series


def trainer_line_series(log: str) -> Series:
    """Loss curves from the dicts the Trainer prints in a training log (`{'loss': 2.1, ..., 'epoch': 0.5}`,
    `{'eval_loss': ...}`), which carry the epoch, not the step: the x value is the epoch."""
    series: Series = {}
    for line in log.splitlines():
        text = line.split("] ", 1)[-1].strip()  # a multi-process log prefixes lines with [rankN]
        if not (text.startswith("{") and text.endswith("}") and "loss" in text):
            continue
        try:
            logged = ast.literal_eval(text)
        except (ValueError, SyntaxError, RecursionError):
            continue
        epoch = _number(logged.get("epoch")) if isinstance(logged, dict) else None
        if epoch is None:
            continue
        _add_losses(series, epoch, logged)
    return series


def defined_series(log: str, definitions: list[dict[str, str]]) -> Series:
    """Every value the job's loss metric definitions find in the log, as SageMaker scrapes them
    (hfpipe.core.run.logs.metric_values); x: the value's place among that metric's values (1, 2, ...)."""
    from hfpipe.core.run.logs import metric_values

    series: Series = {}
    loss_definitions = [d for d in definitions if "loss" in str(d.get("Name", "")).lower()]
    for name, value in metric_values(log.splitlines(), loss_definitions):
        if math.isfinite(value):
            points = series.setdefault(name, [])
            points.append((len(points) + 1, value))
    return series


def log_places(text: Callable[[], str], definitions: list[dict[str, str]]) -> list[Place]:
    """Places 3 and 4: the training log (``text`` reads it once, when first needed)."""
    once = functools.cache(text)
    return [
        Place("the Trainer's lines in its training log", "epoch", lambda: trainer_line_series(once())),
        Place(
            "its training log read with its metric definitions",
            LOGGED_ORDER,
            lambda: defined_series(once(), definitions),
        ),
    ]


def final_place(final: dict[str, Any]) -> Place:
    """Place 5: the final metrics, one point each (x: the end of training)."""
    return Place(
        "its final metrics",
        "end of training (the final metrics)",
        lambda: {n: [("end", float(v))] for n, v in final.items() if _number(v) is not None},
    )


def state_of(text: str | bytes) -> Series:
    """Place 1's reader over trainer_state.json's text."""
    return history_series(json.loads(text))


def job_definitions(job: dict[str, Any]) -> list[dict[str, str]]:
    """The job's MetricDefinitions (DescribeTrainingJob's AlgorithmSpecification)."""
    definitions = (job.get("AlgorithmSpecification") or {}).get("MetricDefinitions") or []
    return [d for d in definitions if isinstance(d, dict) and d.get("Name") and d.get("Regex")]


def job_final_metrics(job: dict[str, Any]) -> dict[str, Any]:
    """The job's final metrics by name (FinalMetricDataList)."""
    return {
        m["MetricName"]: m.get("Value") for m in job.get("FinalMetricDataList") or [] if "MetricName" in m
    }


def advice(definitions: list[dict[str, str]], script: Script) -> str:
    """What to change so the run has a loss to plot, valid for this run: a hyperparameter only where its script
    takes it (``script``: hfpipe.cli.run.job_script), else what the recipe or the script itself can change."""
    entry = script.entry_point or "its script"
    defined = {d["Name"]: d["Regex"] for d in definitions if "loss" in d["Name"].lower()}
    if not defined:
        # The Trainer's line is an example only for a script with the Trainer's arguments.
        example = (
            f", e.g. the Trainer's per-step line {json.dumps(LOSS_DEFINITION)} as the shipped recipes have"
            if script.accepts("logging_steps")
            else ""
        )
        return (
            "the job defines no loss metric: give the recipe's training.metric_definitions one for the line "
            f"{entry} prints its loss on{example}"
        )
    matched = f"its loss metric definitions ({', '.join(defined)}) matched no line of its training log"
    print_it = "have it print its loss on lines they match (" + "; ".join(
        f"{n}: {r}" for n, r in defined.items()
    )
    taken = script.accepts("logging_steps")
    if taken:
        return (
            f"{matched} (the Trainer logs the loss every `logging_steps` steps, more than this run trained); "
            "run it again with --set training.hyperparameters.logging_steps=1"
        )
    if taken is False:
        return f"{matched}, and {entry} takes no logging_steps ({script.described_arguments()}): {print_it})"
    return f"{matched}; which arguments {entry} takes is not known ({script.unknown}), so none is suggested: {print_it})"


def nothing_to_plot(
    subject: str, looked: list[str], definitions: list[dict[str, str]], script: Script
) -> str:
    """The one line when no place has a loss value: what was looked at, and what to change."""
    return f"{subject}: nothing to plot, no loss value in {', '.join(looked)}; {advice(definitions, script)}"


def job_places(clients: Any, job: dict[str, Any]) -> list[Place]:
    """The places of a job on AWS (or in a local world, whose clients reach it): its checkpoint folder's
    trainer_state.json, CloudWatch's metrics, its CloudWatch log (host algo-1), its final metrics."""
    from hfpipe.cli.run.execution import metric_series
    from hfpipe.core.run import logs

    def checkpoint_state() -> Series:
        uri = str((job.get("CheckpointConfig") or {}).get("S3Uri") or "")
        if not uri.startswith("s3://"):
            return {}
        bucket, _, prefix = uri.removeprefix("s3://").partition("/")
        key = f"{prefix.rstrip('/')}/trainer_state.json".lstrip("/")
        try:
            body = clients.s3.get_object(Bucket=bucket, Key=key)["Body"].read()
        except clients.s3.exceptions.NoSuchKey:  # the script saved no state there: not an error
            return {}
        return state_of(body)

    def log_text() -> str:
        lines = logs.read_events(clients.logs, job["TrainingJobName"])
        return "\n".join(line.message for line in lines if line.host == "algo-1")

    return [
        Place("its checkpoint folder's trainer_state.json", "training step", checkpoint_state),
        Place(
            "CloudWatch's metrics (namespace /aws/sagemaker/TrainingJobs)",
            "time",
            lambda: metric_series(clients, job),
        ),
        *log_places(log_text, job_definitions(job)),
        final_place(job_final_metrics(job)),
    ]


def plot(curves: Curves, path: Path, title: str) -> str:
    """Write ``curves`` to the PNG ``path`` (hfpipe.cli.run.report.plot_losses); the line saying where and from what."""
    from hfpipe.cli.clients import HfpipeError
    from hfpipe.cli.run import report

    try:
        written = report.plot_losses(curves.series, path, title=title, xlabel=curves.xlabel)
    except OSError as err:  # a folder it may not write to, a file system that refuses the name
        raise HfpipeError(
            f"--plot {str(path)!r}: cannot write the file ({err.strerror or err}); accepted: a .png path in a "
            "folder you can write to"
        ) from None
    return f"loss plot: {written}, {curves.describe()}"


def plot_job(clients: Any, job: dict[str, Any], path: Path, title: str) -> str:
    """`report --plot`: the job's loss curves by the rule, written to ``path``; an HfpipeError saying what to
    change where it has none."""
    from hfpipe.cli.aws import HfpipeError
    from hfpipe.cli.run.job_script import job_script

    curves, looked = find(job_places(clients, job))
    if curves is None:

        def archive(uri: str) -> bytes:
            bucket, _, key = uri.removeprefix("s3://").partition("/")
            return bytes(clients.s3.get_object(Bucket=bucket, Key=key)["Body"].read())

        subject = f"training job {job['TrainingJobName']} ({job.get('TrainingJobStatus', 'status unknown')})"
        script = job_script(job, archive)
        raise HfpipeError(nothing_to_plot(subject, looked, job_definitions(job), script))
    return plot(curves, path, title)
