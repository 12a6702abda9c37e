"""What `hfpipe local` prints says what it is: the cost is AWS's for the recipe's instances (0 USD here), Ctrl-C
ends the run, and a failed run's report lists no artifact or endpoint that never existed."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from rich.console import Console, Group

from hfpipe.cli.run.execution import Snapshot
from hfpipe.cli.run.report import _report_from_job, render_report
from hfpipe.cli.run.watch import render


def text(renderable: Any) -> str:
    console = Console(width=200, record=True, color_system=None)
    console.print(renderable)
    return console.export_text()


REPORT = {"execution_name": "x", "cost_usd": 0.0123, "price_per_hour_usd": 0.736, "instance_count": 1}


def test_a_local_report_labels_its_cost_as_the_aws_estimate() -> None:
    local = text(Group(*render_report({**REPORT, "local_mode": True})))
    assert "0 USD here; on AWS: 0.0123 USD at 0.736 USD/h per instance" in local
    on_aws = text(Group(*render_report(REPORT)))
    assert "0.0123 USD at 0.736 USD/h per instance" in on_aws and "here" not in on_aws


def running() -> Snapshot:
    snap = Snapshot("arn:aws:states:eu-west-1:1:execution:m:x", "x", "RUNNING", datetime.now(UTC), None)
    snap.cost_so_far_usd = 0.5
    return snap


def test_the_live_view_says_what_ctrl_c_does_where_it_runs() -> None:
    assert "Ctrl-C stops the local run" in text(render(running(), local=True))
    assert "cost so far on AWS" in text(render(running(), local=True))
    aws = text(render(running()))
    assert "Ctrl-C stops watching, not the execution" in aws and "on AWS" not in aws


def test_a_failed_run_reports_no_artifact_and_no_endpoint_that_never_existed(monkeypatch: Any) -> None:
    from hfpipe.core.run.plan_model import Plan

    plan = Plan.__new__(Plan)  # only the attributes the report reads
    for key, value in {
        "spot": False,
        "price_per_hour_usd": 0.736,
        "instance_count": 1,
        "recipe_name": "tiny-qa",
        "training_job_name": "dev-x",
        "instance_type": "ml.g4dn.xlarge",
        "endpoint_name": "dev-x-ep",
        "deploy": True,
        "hyperparameters_not_checked": None,
    }.items():
        object.__setattr__(plan, key, value)
    snap = Snapshot("arn", "x", "FAILED", datetime.now(UTC), datetime.now(UTC), plan=plan)
    snap.training_job = {
        "TrainingJobStatus": "Failed",
        "ModelArtifacts": {"S3ModelArtifacts": "s3://b/models/dev-x/output/model.tar.gz"},
    }
    report = _report_from_job(snap)
    assert report["model_artifacts"] is None and report["endpoint_name"] is None
    snap.training_job["TrainingJobStatus"] = "Completed"
    snap.endpoint_created = True
    report = _report_from_job(snap)
    assert report["model_artifacts"].endswith("model.tar.gz") and report["endpoint_name"] == "dev-x-ep"


def test_logs_follow_ends_on_an_interrupted_local_run(tmp_path: Any, capsys: Any) -> None:
    from hfpipe.cli import main
    from hfpipe.local.outputs import INTERRUPTED, TRAINING_LOG

    run_dir = tmp_path / "tiny-lora-20261201-000000"
    run_dir.mkdir()
    (run_dir / TRAINING_LOG).write_text("step 1\n")
    (run_dir / INTERRUPTED).write_text("interrupted (Ctrl-C)\n")
    code = main(["logs", "--local", "--out", str(tmp_path), "--follow", "--interval", "0.01"])
    out, err = capsys.readouterr()
    assert (code, out) == (1, "step 1\n")
    assert err == f"local run {run_dir.name} was interrupted before it finished\n"


def test_local_runs_default_to_the_checkouts_folder_from_any_subfolder(
    monkeypatch: Any, tmp_path: Any
) -> None:
    from hfpipe.local.checkout import checkout_root
    from hfpipe.local.outputs import RUNS_FOLDER, runs_folder

    monkeypatch.chdir(checkout_root() / "docs")
    assert runs_folder() == str(checkout_root() / RUNS_FOLDER)
    assert runs_folder(str(tmp_path)) == str(tmp_path)


def test_report_reads_a_local_run_and_plots_its_log(tmp_path: Any, capsys: Any) -> None:
    import json

    from hfpipe.cli import main
    from hfpipe.local.outputs import REPORT, TRAINING_LOG

    run_dir = tmp_path / "tiny-qa-20261201-000000"
    run_dir.mkdir()
    (run_dir / REPORT).write_text(json.dumps({**REPORT_DOC, "execution_name": run_dir.name}))
    (run_dir / TRAINING_LOG).write_text(
        "step\n{'loss': 2.5, 'grad_norm': 1.0, 'epoch': 0.5}\n[rank0] {'loss': 2.0, 'epoch': 1.0}\n"
        "{'eval_loss': 2.2, 'epoch': 1.0}\nnot a dict {'loss': x}\n"
    )
    plot = tmp_path / "loss.png"
    assert main(["report", "--local", "--out", str(tmp_path), "--plot", str(plot)]) == 0
    out = capsys.readouterr().out
    assert "0 USD here; on AWS" in out and f"loss plot: {plot}" in out
    assert plot.read_bytes().startswith(b"\x89PNG")
    assert main(["report", run_dir.name, "--local", "--out", str(tmp_path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["execution_name"] == run_dir.name


def test_local_loss_series_reads_the_trainers_log_lines() -> None:
    from hfpipe.cli.run.loss_curves import trainer_line_series as local_loss_series

    # x is the epoch each dict prints (a line without one has no place on the axis)
    log = (
        "{'loss': 2.5, 'epoch': 0.5}\n[rank1] {'loss': 2.0, 'epoch': 1.0}\n{'eval_loss': 2.2, 'epoch': 1.0}\n"
        "{'loss': 'nan?', 'epoch': 1.5}\n{'loss': 1.0}\n"
    )
    assert local_loss_series(log) == {"loss": [(0.5, 2.5), (1.0, 2.0)], "eval_loss": [(1.0, 2.2)]}


REPORT_DOC = {"cost_usd": 0.01, "price_per_hour_usd": 0.736, "training_job_status": "Completed"}


def test_progress_is_read_from_the_trainers_bar_in_the_log() -> None:
    from hfpipe.core.run.logs import progress

    assert progress(["starting", "{'loss': 2.0}"]) is None
    lines = [
        "[algo-1]  10%|#         | 2/20 [00:02<00:18,  1.00it/s]\r 45%|####5     | 9/20 [00:10<00:12,  1.10it/s]",
        "[algo-1] {'loss': 1.9, 'epoch': 0.4}",
    ]
    p = progress(lines)
    assert p is not None and (p.step, p.total, p.eta) == (9, 20, "00:12")
    assert p.steps_per_second == 1.1 and p.fraction == 0.45
    slow = progress(["  5%|5         | 1/20 [00:04<01:16,  4.00s/it]", "  train_samples_per_second = 12.5"])
    assert slow is not None and slow.steps_per_second == 0.25 and slow.samples_per_second == 12.5


def test_the_live_view_shows_progress_while_training() -> None:
    from hfpipe.core.run.logs import progress

    snap = running()
    snap.progress = progress([" 45%|####5     | 9/20 [00:10<00:12,  1.10it/s]"])
    shown = text(render(snap))
    assert "9/20 steps (45%), ETA 00:12, 1.1 steps/s" in shown
