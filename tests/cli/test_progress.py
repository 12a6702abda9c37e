"""Progress and ETA come from the Trainer's training bar only (not an evaluation bar, "Loading checkpoint
shards" or a data set's map), never run backwards and never pass 100%; `logs --follow` ends when the
execution ends, also when it failed before its training job was created."""

from __future__ import annotations

import time
from typing import Any

import pytest
from cli_moto import Deployed, sagemaker_backend

from hfpipe.cli import main
from hfpipe.core.run.logs import Progress, progress

# What a tiny run's training.log holds (hfpipe local --recipe tiny-lora, trimmed): the map bars of the data
# set, the training bar of 4 steps, then the evaluation bar of 3 batches.
TINY_RUN = [
    "Rendering the prompt template and tokenizing: 100%|##########| 64/64 [00:00<00:00, 2637.75 examples/s]",
    "  0%|          | 0/4 [00:00<?, ?it/s]\r 25%|##5       | 1/4 [00:00<00:01,  2.00it/s]",
    "{'loss': 5.8422, 'grad_norm': 0.58, 'learning_rate': 0.00075, 'epoch': 0.25}",
    " 75%|#######5  | 3/4 [00:00<00:00,  3.74it/s]\r100%|##########| 4/4 [00:00<00:00,  3.74it/s]",
    "{'train_runtime': 1.2, 'train_samples_per_second': 6.5, 'train_loss': 5.85, 'epoch': 1.0}",
    "  0%|          | 0/3 [00:00<?, ?it/s]\r 67%|######6   | 2/3 [00:00<00:00, 10.40it/s]",
]


def at(step: int, total: int) -> Progress:
    return Progress(step, total, "00:10", 1.0)


# (the log lines, the previous view's progress, (step, total) shown or None)
# fmt: off
CASES: list[tuple[list[str], Progress | None, tuple[int, int] | None]] = [
    (TINY_RUN, None, (4, 4)),  # the evaluation bar after 100% is not the training's 67%
    (TINY_RUN[-1:], at(4, 4), (4, 4)),  # the next view sees only the evaluation bar: still 4/4
    (["Loading checkpoint shards:  50%|#####     | 1/2 [00:03<00:03,  3.10s/it]"], None, None),
    (["[algo-1] Loading checkpoint shards:  50%|#####     | 1/2 [00:03<00:03,  3.10s/it]"], None, None),
    (["Map: 100%|##########| 8/8 [00:00<00:00, 100.00 examples/s]"], None, None),
    (["  Total optimization steps = 1,000", " 99%|#########9| 990/1000 [10:00<00:06,  1.65it/s]"], None, (990, 1000)),
    (["  6%|6         | 1/16 [00:00<00:02,  6.0it/s]"], at(990, 1000), (990, 1000)),  # an eval bar: not 6%
    ([" 40%|####      | 400/1000 [04:00<06:00,  1.65it/s]"], at(990, 1000), (990, 1000)),  # never backwards
    (["100%|##########| 120/100 [00:10<00:00,  1.0it/s]"], None, (100, 100)),  # never past 100%
    (["[rank0]:  45%|####5     | 9/20 [00:10<00:12,  1.10it/s]"], None, (9, 20)),  # torchrun's prefix
    (["  Total optimization steps = 20", "  5%|5         | 1/20 [00:04<01:16,  4.00s/it]"], at(3, 4), (1, 20)),  # a new run
]
# fmt: on


@pytest.mark.parametrize(("lines", "previous", "shown"), CASES)
def test_progress_is_the_training_bar_only(
    lines: list[str], previous: Progress | None, shown: tuple[int, int] | None
) -> None:
    found = progress(lines, previous)
    assert (None if found is None else (found.step, found.total)) == shown
    if found is not None:
        assert 0.0 <= found.fraction <= 1.0


def test_the_live_view_keeps_the_last_progress(deployed: Deployed, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two views of one running job: the second log tail shows only the evaluation bar."""
    from hfpipe.cli import aws
    from hfpipe.cli.run import execution

    arn, plan = deployed.start("prog-1", running=True, wait=False)
    deadline = time.monotonic() + 30
    while plan["training_job_name"] not in sagemaker_backend().training_jobs:  # Launch is creating it
        assert time.monotonic() < deadline, "the training job was never created"
        time.sleep(0.05)
    tails = iter([TINY_RUN[:4], TINY_RUN[-1:]])
    monkeypatch.setattr(execution, "training_log_tail", lambda clients, job: next(tails))
    clients = aws.make_clients(region=deployed.sagemaker.meta.region_name)
    first = execution.snapshot(clients, arn)
    second = execution.snapshot(clients, arn, previous=first)
    assert first.progress is not None and (first.progress.step, first.progress.total) == (4, 4)
    assert second.progress is not None and (second.progress.step, second.progress.total) == (4, 4)
    deployed.finish_training(plan["training_job_name"])
    deployed.wait(arn)


def test_logs_follow_ends_when_the_execution_failed_before_its_job(
    deployed: Deployed, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    from hfpipe.cli.run import logs

    deployed.throttle_create_training_job(times=1000)  # Launch retries, gives up: the job never exists
    arn, plan = deployed.start("nojob-1")
    assert deployed.sfn.describe_execution(executionArn=arn)["status"] == "FAILED"
    polls = 0
    job_status = logs._job_status

    def counted(clients: Any, name: str) -> str | None:
        nonlocal polls
        polls += 1
        assert polls < 20, "logs --follow is still polling a job that will never exist"
        return job_status(clients, name)

    monkeypatch.setattr(logs, "_job_status", counted)
    code = main(["logs", "nojob-1", "--env", "dev", "--follow", "--interval", "0.01"])
    out, err = capsys.readouterr()
    assert (code, out) == (1, "")
    assert err == (
        f"execution nojob-1 ended FAILED before its training job {plan['training_job_name']} was created: "
        "there is no training log (`hfpipe report` says why)\n"
    )
    deployed._engine.create_errors.clear()


# --- one progress model: 100 % once the job is Completed; a heartbeat in a log ---------------------------


def test_a_completed_job_shows_all_its_steps_whatever_the_last_redraw() -> None:
    """tqdm redraws at most ten times a second: the log's last bar of a finished job can be a step behind."""
    behind = progress(
        ["  Total optimization steps = 200", " 99%|#########9| 198/200 [01:40<00:01,  2.0it/s]"]
    )
    assert behind is not None and (behind.step, behind.total) == (198, 200)
    assert behind.of_job("InProgress") == behind
    done = behind.of_job("Completed")
    assert (done.step, done.total, done.fraction, done.eta) == (200, 200, 1.0, "00:00")
    assert behind.of_job("Failed") == behind  # a failed job's steps are what it reached


def test_the_live_view_of_a_finished_job_says_100_percent(
    deployed: Deployed, monkeypatch: pytest.MonkeyPatch
) -> None:
    from rich.console import Console

    from hfpipe.cli import aws
    from hfpipe.cli.run import execution
    from hfpipe.cli.run.watch import render

    arn, plan = deployed.start("prog-2", running=True, wait=False)
    deadline = time.monotonic() + 30
    while plan["training_job_name"] not in sagemaker_backend().training_jobs:
        assert time.monotonic() < deadline, "the training job was never created"
        time.sleep(0.05)
    redraw = ["  Total optimization steps = 200", " 99%|#########9| 198/200 [01:40<00:01,  2.0it/s]"]
    monkeypatch.setattr(execution, "training_log_tail", lambda clients, job: redraw)
    clients = aws.make_clients(region=deployed.sagemaker.meta.region_name)
    running = execution.snapshot(clients, arn)
    deployed.finish_training(plan["training_job_name"])
    deployed.wait(arn)
    finished = execution.snapshot(clients, arn, previous=running)
    console = Console(width=200, record=True)
    console.print(render(running))
    assert "198/200 steps (99%)" in console.export_text()
    console.print(render(finished))
    assert "200/200 steps (100%)" in console.export_text()


def _quiet_view(seconds: float, interval: float) -> list[str]:
    """The lines `watch` prints to a pipe while a run stays in one state for `seconds`."""
    import io
    from datetime import UTC, datetime
    from unittest import mock

    from rich.console import Console

    from hfpipe.cli.run import watch
    from hfpipe.cli.run.execution import Snapshot

    polls = int(seconds / interval)
    views = [
        Snapshot("arn:x", "run-1", "RUNNING", datetime.now(UTC), None, state="Launch") for _ in range(polls)
    ]
    views.append(Snapshot("arn:x", "run-1", "SUCCEEDED", datetime.now(UTC), datetime.now(UTC), state="Done"))
    answers = iter(views)
    out = io.StringIO()
    console = Console(file=out, width=200, force_terminal=False)
    with (
        mock.patch.object(watch, "snapshot", lambda *a, **k: next(answers)),
        mock.patch.object(watch, "build_report", lambda clients, snap: {}),
        mock.patch.object(watch, "render_report", lambda report, env: []),
    ):
        watch.watch(None, "arn:x", console, interval=interval, sleep=lambda s: None)  # type: ignore[arg-type]
    return [line for line in out.getvalue().splitlines() if line.startswith(("0m", "1m", "2m", "3m", "4m"))]


def test_a_piped_watch_says_the_run_is_alive_at_least_every_minute() -> None:
    """Hours of training in one state printed nothing to a log or a pipe."""
    from hfpipe.cli.run.watch import HEARTBEAT_S

    assert HEARTBEAT_S <= 60
    lines = _quiet_view(seconds=300, interval=10)
    assert len(lines) >= 300 // HEARTBEAT_S - 1, lines
    assert all("run-1: RUNNING, Launch" in line for line in lines), lines
    assert _quiet_view(seconds=50, interval=10) == []  # nothing changed for less than a minute: no line
