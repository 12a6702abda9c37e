"""A training job that fails in local mode: its traceback reaches the failure cause, report.json and the view,
through the same CloudWatch log stream and Report Lambda code the AWS pipeline uses."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from hfpipe.cli import main
from hfpipe.core.run import logs

pytestmark = pytest.mark.slow

PEFT_ERROR = "ValueError: Target modules {'no_such_module'} not found in the base model"


def test_failed_local_run_reports_the_tail_of_its_log(tmp_path: Path, capsys: Any) -> None:
    code = main(
        [
            "local",
            "--recipe",
            "tiny-lora",
            "--out",
            str(tmp_path),
            "--set",
            "training.hyperparameters.lora_target_modules=no_such_module",
        ]
    )
    out, _ = capsys.readouterr()
    assert code == 1
    [run_dir] = [p for p in tmp_path.iterdir() if p.name.startswith("tiny-lora-")]
    report = json.loads((run_dir / "report.json").read_text())
    assert report["training_job_status"] == "Failed"
    assert len(report["log_tail"]) == logs.TAIL_LINES
    assert _squeezed(PEFT_ERROR) in _squeezed("\n".join(report["log_tail"]))
    # The failure reason names the script's error, as SageMaker's does; the Report Lambda appended the same
    # last lines of the log to the cause the execution failed with.
    cause, appended = report["failure"].split(logs.CAUSE_TAIL_MARKER)
    assert _squeezed("not found in the base model") in _squeezed(cause)
    assert _squeezed("not found in the base model") in _squeezed(appended)
    assert "\n".join(report["log_tail"]).endswith(appended) and len(appended.splitlines()) > 1
    assert "last lines of the training log" in out and _squeezed("not found in the base model") in _squeezed(
        out
    )

    code = main(["logs", "--local", "--out", str(tmp_path)])
    log, _ = capsys.readouterr()
    assert code == 0
    # The view shows the log as the toolkit wrote it, line for line.
    [run_log] = tmp_path.glob("tiny-lora-*/training.log")
    assert log == run_log.read_text(errors="replace")
    assert _squeezed(PEFT_ERROR) in _squeezed(log)


def _squeezed(text: str) -> str:
    """`text` without whitespace. The sagemaker-training toolkit reads the script's output in chunks and
    prints each chunk's pieces as lines (`process.watch`: read(buf_size), strip, split), so where a line of
    the traceback breaks depends on how the script's writes met its reads."""
    return "".join(text.split())
