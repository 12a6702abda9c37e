"""Bad input to `report --local`, `logs --local`, `invoke`, `recipes` and the other commands that read a
user's files: each case a line, each answered with one line on stderr (no traceback), and nothing read from
outside the folder it names. No AWS: every case fails (or succeeds) before an account is looked at."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from hfpipe.cli import main
from hfpipe.local.outputs import INTERRUPTED, REPORT, TRAINING_LOG

OLD = "tiny-qa-20261201-000000"
NEW = "tiny-qa-20261201-010000"
LONG = "a" * 300
DEEP = "[" * 3000 + "]" * 3000
LATIN1 = '{"inputs": "caf\xe9"}'.encode("latin-1")


def _run_dir(
    root: Path, name: str, *, log: bool = True, report: Any = None, interrupted: bool = False
) -> Path:
    folder = root / "out" / name
    folder.mkdir(parents=True)
    if log:
        (folder / TRAINING_LOG).write_text(f"log of {name}\n")
    if report is not None:
        (folder / REPORT).write_text(report if isinstance(report, str) else json.dumps(report))
    if interrupted:
        (folder / INTERRUPTED).write_text("interrupted (Ctrl-C)\n")
    return folder


def finished_then_interrupted(root: Path) -> None:
    old = _run_dir(root, OLD, report={"execution_name": OLD, "training_job_status": "Completed"})
    _run_dir(root, NEW, interrupted=True)
    for path in old.iterdir():  # the finished run is the older one
        os.utime(path, (1, 1))


def truncated_report(root: Path) -> None:
    _run_dir(root, OLD, report='{"execution_name": "tiny-qa-20261201-000000", "cost_u')


def report_without_log(root: Path) -> None:
    _run_dir(root, OLD, log=False, report={"execution_name": OLD, "training_job_status": "Completed"})


def victim_next_to_out(root: Path) -> None:
    _run_dir(root, OLD)
    victim = root / "victim"
    victim.mkdir()
    (victim / TRAINING_LOG).write_text("SECRET\n")
    (victim / REPORT).write_text(json.dumps({"execution_name": "SECRET"}))


def files(root: Path) -> None:
    (root / "latin1.json").write_bytes(LATIN1)
    (root / "latin1.txt").write_bytes("Amanda: caf\xe9\n".encode("latin-1"))
    (root / "folder").mkdir()
    (root / "folder.json").mkdir()
    (root / "deep.json").write_text('{"name": "tiny-qa", "x": ' + "[" * 3000 + "]" * 3000 + "}")
    (root / "deep-900.json").write_text('{"name": "tiny-qa", "x": ' + '{"a": ' * 900 + "1" + "}" * 900 + "}")
    (root / "deep.jsonl").write_text(DEEP + "\n")


Setup = Callable[[Path], None]
OUT = ("--local", "--out", "out")
# (what the folder holds, argv, exit status, fragments of the one line on stderr; for status 0 of stdout)
# fmt: off
CASES: list[tuple[Setup, tuple[str, ...], int, list[str]]] = [
    # report --local: one interrupted run does not hide a finished one; a report is read whatever else is there
    (finished_then_interrupted, ("report", *OUT), 0, [f"report: {OLD}"]),
    (finished_then_interrupted, ("report", NEW, *OUT), 1, [f"local run {NEW} was interrupted", f"the newest finished one: {OLD} (`hfpipe report {OLD} --local`)"]),
    (truncated_report, ("report", *OUT), 1, [f"local run {OLD}: its report.json is not valid JSON", "run the recipe again"]),
    (truncated_report, ("logs", *OUT, "--follow", "--interval", "0.01"), 1, ["report.json is not valid JSON"]),
    (report_without_log, ("report", OLD, *OUT), 0, [f"report: {OLD}"]),
    (report_without_log, ("logs", OLD, *OUT), 1, [f"local run {OLD} has no training.log"]),
    (report_without_log, ("report", OLD, *OUT, "--plot", "loss.png"), 1, [f"local run {OLD}: nothing to plot", "the run recorded no training_job.json"]),
    # a run's name is one folder name in --out: never a path out of it
    (victim_next_to_out, ("logs", "../victim", *OUT), 1, ["local run '../victim' is not a local run's name", f"local runs in out: {OLD}"]),
    (victim_next_to_out, ("report", "../victim", *OUT), 1, ["local run '../victim' is not a local run's name"]),
    (victim_next_to_out, ("logs", "..", *OUT), 1, ["local run '..' is not a local run's name"]),
    (victim_next_to_out, ("logs", LONG, *OUT), 1, ["is not a local run's name", "(300 characters)"]),
    (victim_next_to_out, ("logs", "--local", "--out", LONG), 1, ["--out 'aaaa", "at most 255 bytes"]),
    # --interval: a number of seconds, not NaN or infinity
    (victim_next_to_out, ("logs", *OUT, "--follow", "--interval", "nan"), 2, ["--interval: nan is not accepted", "at most 3600"]),
    (victim_next_to_out, ("logs", *OUT, "--follow", "--interval", "inf"), 2, ["--interval: inf is not accepted"]),
    # files: latin-1, a folder, a name longer than a file name can be
    (files, ("invoke", "--local", "--file", "latin1.json"), 1, ["--file 'latin1.json' is not UTF-8 text (byte 15 is 0xe9)", "iconv"]),
    (files, ("invoke", "--local", "--dialogue", "latin1.txt"), 1, ["--dialogue 'latin1.txt' is not UTF-8 text (byte 11 is 0xe9)"]),
    (files, ("invoke", "--local", "--data", os.fsdecode(LATIN1)), 1, ["--data is not UTF-8 text (character 15 is the byte 0xe9)"]),
    (files, ("invoke", "--local", "--file", "folder"), 1, ["--file 'folder' is a folder; accepted: a file"]),
    (files, ("invoke", "--local", "--dialogue", "folder"), 1, ["--dialogue 'folder' is a folder"]),
    (files, ("invoke", "--local", "--file", LONG), 1, ["--file 'aaaa", "(300 characters)", "at most 255 bytes"]),
    (files, ("invoke", "--local", "--dialogue", LONG), 1, ["--dialogue 'aaaa", "at most 255 bytes"]),
    (files, ("recipes", "show", LONG + ".json"), 1, ["recipe file 'aaaa", "at most 255 bytes"]),
    (files, ("recipes", "show", "folder.json"), 1, ["recipe file 'folder.json' is a folder"]),
    (files, ("report", *OUT, "--plot", LONG + ".png"), 1, ["--plot 'aaaa", "at most 255 bytes"]),
    (files, ("data", "upload", LONG, "--env", "dev"), 1, ["PATH 'aaaa", "at most 255 bytes"]),
    # JSON nested thousands deep: a recipe file, a --set value, a request
    (files, ("recipes", "show", "deep.json"), 1, ["recipe 'deep.json'", "at most 100 levels"]),
    (files, ("recipes", "show", "deep-900.json"), 1, ["recipe 'deep-900.json'", "more than 100 levels"]),
    (files, ("recipes", "show", "tiny-qa", "--set", f"training.hyperparameters.x={DEEP}"), 1, ["override training.hyperparameters.x", "at most 100 levels"]),
    (files, ("invoke", "--local", "--data", DEEP), 1, ["--data is nested deeper than can be read"]),
    (files, ("invoke", "--local", "--file", "deep.jsonl"), 1, ["--file deep.jsonl is nested deeper than can be read"]),
    (files, ("invoke", "--local", "--data", "{}", "--parameters", DEEP), 1, ["--parameters is nested deeper"]),
    # an adapter's name matched whole, and its component's name within InferenceComponentName's 63 characters
    (files, ("deploy", "--env", "dev", "--adapter", "support\n", "--delete"), 2, ["argument --adapter: 'support\\n' is not accepted"]),
    (files, ("deploy", "--env", "abcdefghijklmnop", "--adapter", "a" * 32, "--model", "tiny/1"), 2, ["--adapter: 'aaaa", "of 64 characters", "an adapter name of at most 31 characters in environment 'abcdefghijklmnop'"]),
]
# fmt: on


@pytest.mark.parametrize(
    ("setup", "argv", "status", "fragments"),
    CASES,
    ids=[f"{i}-{' '.join(a)[:60]}" for i, (_, a, _, _) in enumerate(CASES)],
)
def test_bad_input_gets_one_line(
    setup: Setup,
    argv: tuple[str, ...],
    status: int,
    fragments: list[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    setup(tmp_path)
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert "SECRET" not in out + err
    if status == 0:
        assert code == 0, err
        assert all(f in out for f in fragments), out
        return
    assert code == status, (out, err)
    if status == 2 and err.startswith("usage: "):  # argparse's: its usage, then one error line
        err = err.splitlines()[-1].split(": ", 1)[1] + "\n"
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert all(f in err for f in fragments), err


def test_report_local_says_which_newer_runs_it_passed_over(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    finished_then_interrupted(tmp_path)
    assert main(["report", *OUT, "--json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["execution_name"] == OLD
    assert err == (
        f"note: showing {OLD}, the newest finished local run; newer, unfinished or interrupted: {NEW}\n"
    )


def test_json_output_is_strict_json_a_non_finite_metric_is_null(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A diverged run's metrics are NaN or infinite (Python writes them as NaN/Infinity, which JSON has not):
    --json prints null for them (docs/cli.md), and strict parsers (jq, JSON.parse) read the output."""
    monkeypatch.chdir(tmp_path)
    metrics = {"eval_loss": float("nan"), "train_loss": float("inf"), "epoch": 1.0}
    _run_dir(
        tmp_path, OLD, report={"execution_name": OLD, "final_metrics": metrics, "curve": [float("-inf")]}
    )
    assert main(["report", *OUT, "--json"]) == 0
    out = capsys.readouterr().out
    strict = json.loads(out, parse_constant=lambda name: pytest.fail(f"{name} in --json output"))
    assert strict["final_metrics"] == {"eval_loss": None, "train_loss": None, "epoch": 1.0}
    assert strict["curve"] == [None]
