"""Local mode under hostile input: the script's own error is the job's FailureReason, Ctrl-C ends the whole
process tree and marks the output folder, channel names and S3 keys never leave their folders."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest

from hfpipe.local.training import container
from hfpipe.local.training.container import LocalContainerError, run_training, script_error, start_training

TOOLKIT = "2026-01-01 00:00:00,000 sagemaker-training-toolkit"
HEAD = f"{TOOLKIT} INFO     Invoking user script\n\nInvoking script with the following command:\n\n/py -- run.py --x 1\n\n\n"
TAIL = f'{TOOLKIT} ERROR    Reporting training FAILURE\n{TOOLKIT} ERROR    ExecuteUserScriptError:\nExitCode 1\nErrorMessage ""\n'

# (what the script printed between the toolkit's lines, the cause found)
# fmt: off
LOG_CASES: list[tuple[str, str]] = [
    ("usage: run.py [-h] --lr LR\nrun.py: error: the following arguments are required: --lr\n", "run.py: error: the following arguments are required: --lr"),
    ('Traceback (most recent call last):\n  File "run.py", line 3, in <module>\n    f()\nValueError: learning_rate=nan is not finite\n', "ValueError: learning_rate=nan is not finite"),
    ("Traceback (most recent call last):\n  File \"run.py\", line 9\nKeyError: 'dialogue'\nsome cleanup output\n", "KeyError: 'dialogue'"),
    ("Traceback (most recent call last):\ntorch.OutOfMemoryError: CUDA out of memory\n", "torch.OutOfMemoryError: CUDA out of memory"),
    ("loading data\nno data: set dataset_name or a training channel\n", "no data: set dataset_name or a training channel"),
    ("Traceback (most recent call last):\nAssertionError\n", "AssertionError"),
]
# fmt: on


@pytest.mark.parametrize(("printed", "cause"), LOG_CASES, ids=[f"l{i}" for i in range(len(LOG_CASES))])
def test_script_error_is_read_from_the_log(printed: str, cause: str) -> None:
    assert script_error(HEAD + printed + TAIL) == cause


def test_no_script_output_gives_no_cause() -> None:
    assert script_error(HEAD + TAIL) is None


# (the script, the line FailureReason must carry)
# fmt: off
SCRIPTS: list[tuple[str, str]] = [
    ("import argparse\np = argparse.ArgumentParser()\np.add_argument('--lr', type=float, required=True)\np.parse_args()\n", 'ErrorMessage "bad.py: error: the following arguments are required: --lr"'),
    ("raise ValueError('max_seq_length=8 is too small; use at least 16')\n", 'max_seq_length=8 is too small; use at least 16'),
]
# fmt: on


@pytest.mark.slow
@pytest.mark.parametrize(("script", "reason"), SCRIPTS, ids=["argparse", "raise"])
def test_failure_reason_carries_the_scripts_error(tmp_path: Path, script: str, reason: str) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "bad.py").write_text(script)
    job = run_training(tmp_path / "job", entry_point="bad.py", source_dir=tmp_path / "src")
    assert job.status == "Failed"
    assert reason in (job.failure_reason or "")
    assert 'ErrorMessage ""' not in (job.failure_reason or "")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie still answers kill(0); it has ended all the same
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.slow
def test_interrupt_ends_the_whole_process_tree_and_marks_the_folder(tmp_path: Path) -> None:
    from hfpipe.local.run import INTERRUPTED, LocalRun

    (tmp_path / "src").mkdir()
    pid_file = tmp_path / "child.pid"
    (tmp_path / "src" / "spawn.py").write_text(
        "import subprocess, sys, time\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
        f"open({str(pid_file)!r}, 'w').write(str(child.pid))\n"
        "time.sleep(600)\n"
    )
    proc = start_training(tmp_path / "job", entry_point="spawn.py", source_dir=tmp_path / "src")
    deadline = time.monotonic() + 60
    while not pid_file.exists() or not pid_file.read_text():
        assert time.monotonic() < deadline, "the script never started its child"
        time.sleep(0.1)
    child = int(pid_file.read_text())
    assert _alive(child) and proc in container.RUNNING

    class Engine:
        def __exit__(self, *exc: Any) -> None:
            pass

    out = tmp_path / "out"
    out.mkdir()
    from hfpipe.core.recipe.recipes import load_recipe
    from hfpipe.local.training.substitute import for_this_machine

    run = LocalRun(for_this_machine(load_recipe("tiny-qa"), gpu=False), out, tmp_path / "cache")
    run.engine = Engine()  # type: ignore[assignment]
    run.__exit__(KeyboardInterrupt, KeyboardInterrupt(), None)
    assert "interrupted (Ctrl-C); 1 training process group(s) stopped" in (out / INTERRUPTED).read_text()
    deadline = time.monotonic() + 30
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(child) and proc.poll() is not None
    assert proc.wait().status == "Stopped"
    assert not container.RUNNING


@pytest.mark.slow
def test_a_process_the_script_started_in_a_new_session_ends_with_the_run(tmp_path: Path) -> None:
    """A container's end ends every process in it; here a process that left the run's process group and
    session (setsid, as a daemon does) is found by the mark the run's processes inherit and ended too."""
    (tmp_path / "src").mkdir()
    pid_file = tmp_path / "daemon.pids"
    (tmp_path / "src" / "daemonize.py").write_text(
        "import subprocess, sys\n"
        "sleep = [sys.executable, '-c', 'import time; time.sleep(120)']\n"
        "quiet = subprocess.Popen(sleep, start_new_session=True, stdin=subprocess.DEVNULL,\n"
        "                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
        f"open({str(pid_file)!r}, 'w').write(str(quiet.pid))\n"
    )
    # (One that kept the script's output open would keep the toolkit waiting for it, in the container too.)
    job = run_training(tmp_path / "job", entry_point="daemonize.py", source_dir=tmp_path / "src")
    assert job.status == "Completed", job.failure_reason
    daemons = [int(pid) for pid in pid_file.read_text().split()]
    deadline = time.monotonic() + 10
    while any(_alive(d) for d in daemons) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(_alive(d) for d in daemons), "a process the script started outlived the run"


@pytest.mark.parametrize("name", ["../kept", "..", ".", "a/b", "", "x" * 65])
def test_channel_names_cannot_leave_the_input_folder(tmp_path: Path, name: str) -> None:
    kept = tmp_path / "job" / "opt_ml" / "input" / "kept"
    kept.mkdir(parents=True)
    (kept / "users-file.txt").write_text("keep me")
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "ok.py").write_text("")
    (tmp_path / "data").mkdir()
    with pytest.raises(LocalContainerError, match=r"InputDataConfig\.ChannelName"):
        run_training(
            tmp_path / "job",
            entry_point="ok.py",
            source_dir=tmp_path / "src",
            channels={name: tmp_path / "data"},
        )
    assert (kept / "users-file.txt").read_text() == "keep me"


@pytest.mark.parametrize("key", ["train/../../escape.txt", "train/../x", "train/a/../../b"])
def test_s3_keys_cannot_leave_the_channel_folder(tmp_path: Path, key: str) -> None:
    from hfpipe.local.runtime import download_prefix

    class S3:
        def get_paginator(self, name: str) -> Any:
            class Pages:
                def paginate(self, **kwargs: Any) -> Any:
                    return [{"Contents": [{"Key": key}]}]

            return Pages()

        def download_file(self, bucket: str, key: str, target: str) -> None:
            raise AssertionError(f"downloaded {key} to {target}")

    with pytest.raises(ValueError, match="would leave the channel folder"):
        download_prefix(S3(), "s3://bucket/train", tmp_path / "channel")
    assert not (tmp_path / "escape.txt").exists()


def _processes_of(folder: Path) -> list[int]:
    """Processes whose environment names `folder` (the training container's SM_* paths point into it)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                environ = (entry / "environ").read_bytes()
            except OSError:
                continue
            if str(folder).encode() in environ and _alive(int(entry.name)):
                found.append(int(entry.name))
    return found


@pytest.mark.slow
def test_ctrl_c_during_hfpipe_local_ends_training_and_marks_the_output(tmp_path: Path) -> None:
    """The whole command, interrupted as a terminal would (SIGINT to the command) while the script trains;
    started with SIGINT ignored, as a shell starts a background job and as a test runner's worker may pass it
    on (a child inherits an ignored signal, and Python then installs no KeyboardInterrupt for it): the command
    takes Ctrl-C itself (two clean-clone runs of the suite saw it go on watching for 120 s)."""
    import signal
    import subprocess
    import sys

    out = tmp_path / "out"
    command = subprocess.Popen(
        # long and quiet: a script that writes nothing would not notice its parent is gone (no broken pipe)
        [sys.executable, "-m", "hfpipe.cli", "local", "--recipe", "tiny-qa", "--out", str(out)]
        + [f"--set=training.hyperparameters.{k}" for k in ("max_steps=100000", "logging_steps=100000")]
        + ["--set=training.hyperparameters.disable_tqdm=true"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        # A command that does not end is made to say where each of its threads is (SIGABRT, below).
        env={**os.environ, "PYTHONFAULTHANDLER": "1"},
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
    )
    try:
        deadline = time.monotonic() + 240
        while not any("Invoking script" in p.read_text(errors="replace") for p in out.glob("*/training.log")):
            assert command.poll() is None and time.monotonic() < deadline, "training never started"
            time.sleep(0.2)
        assert _processes_of(out), "no training process found"
        command.send_signal(signal.SIGINT)
        try:
            code = command.wait(timeout=120)
        except subprocess.TimeoutExpired:
            command.send_signal(signal.SIGABRT)  # faulthandler writes every thread's stack to stderr
            _, stderr = command.communicate(timeout=60)
            pytest.fail(f"hfpipe local did not end within 120 s of Ctrl-C; its threads:\n{stderr[-20000:]}")
        assert code == 130
    finally:
        if command.poll() is None:
            command.kill()
    assert command.stderr is not None and command.stderr.read().strip().endswith("interrupted")
    deadline = time.monotonic() + 10
    while _processes_of(out) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _processes_of(out) == []
    [marker] = out.glob("*/INTERRUPTED")
    assert "training process group(s) stopped" in marker.read_text()
