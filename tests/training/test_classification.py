"""run_classification.py: MNLI pairs through the toolkit and served, spot interruption and resume, sharding."""

from __future__ import annotations

import json
import shutil
import sys
import tarfile
import time
from pathlib import Path

import pytest

from hfpipe.fixtures.encoders import build_encoder
from hfpipe.fixtures.mnli import MNLI_LABELS, make_mnli, write_classification
from hfpipe.local.serving import endpoint as le
from hfpipe.local.training import container as lc

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "training_code"))

import run_classification as rc
from encoder_utils import last_complete_checkpoint


def test_sharding_defaults_to_fsdp_only_for_multi_process_runs(monkeypatch):
    assert rc.default_sharding("", "auto", "", world_size=1) == ""
    assert rc.default_sharding("", "auto", "", world_size=2) == "full_shard auto_wrap"
    assert rc.default_sharding("shard_grad_op", "auto", "", world_size=2) == "shard_grad_op"
    assert rc.default_sharding("", "none", "", world_size=2) == ""
    # Accelerate has no FSDP without GPUs: CPU-only hosts stay plain data parallel.
    assert rc.default_sharding("", "auto", "", world_size=2, accelerator=False) == ""


def test_default_sharding_is_applied_by_the_arguments_from_flags_and_from_a_file(
    tmp_path, monkeypatch, in_process_training
):
    monkeypatch.setattr(rc, "default_sharding", lambda fsdp, *a, **k: fsdp or "shard_grad_op")
    monkeypatch.setenv("SAGEMAKER_BASE_DIR", str(tmp_path))
    config = tmp_path / "args.json"
    config.write_text(json.dumps({"do_train": True, "use_cpu": True}))
    for argv in (["--do_train", "True", "--use_cpu", "True"], [str(config)]):
        training = rc.parse_args(argv)[2]
        assert [o.value for o in training.fsdp] == ["shard_grad_op"], argv


def test_legacy_smdistributed_settings_are_accepted(monkeypatch):
    legacy = json.dumps({"partitions": 4, "microbatches": 4, "ddp": True})
    monkeypatch.setattr(rc, "smdistributed_available", lambda: True)
    assert rc.default_sharding("", "auto", legacy, world_size=8) == ""  # the Trainer's own smp path
    monkeypatch.setattr(rc, "smdistributed_available", lambda: False)
    assert rc.default_sharding("", "auto", legacy, world_size=8) == "full_shard auto_wrap"
    with pytest.raises(ValueError, match="mp_parameters"):
        rc.default_sharding("", "smdistributed", "", world_size=2)
    with pytest.raises(ValueError, match="model_parallel='pipeline'"):
        rc.ClassificationTrainingArguments(output_dir="/tmp/x", model_parallel="pipeline")


def test_bad_columns_and_tasks_are_named():
    with pytest.raises(ValueError, match="text_column_names: 'hypo'"):
        rc.resolve_columns(rc.DataTrainingArguments(text_column_names="premise,hypo"), ["premise", "label"])
    with pytest.raises(ValueError, match="task_name='qnli'"):
        rc.DataTrainingArguments(task_name="qnli")
    assert rc.resolve_columns(
        rc.DataTrainingArguments(task_name="MNLI"), ["premise", "hypothesis", "label"]
    ) == (
        "premise",
        "hypothesis",
    )


def test_a_start_checkpoint_with_a_head_keeps_its_label_order():
    from transformers import PretrainedConfig

    # roberta-large-mnli's head: CONTRADICTION, NEUTRAL, ENTAILMENT; the GLUE data: entailment 0 ... 2.
    head = PretrainedConfig(
        num_labels=3,
        id2label={0: "CONTRADICTION", 1: "NEUTRAL", 2: "ENTAILMENT"},
        label2id={"CONTRADICTION": 0, "NEUTRAL": 1, "ENTAILMENT": 2},
    )
    assert rc.head_label_order(head, list(MNLI_LABELS)) == {0: 2, 1: 1, 2: 0}
    assert rc.head_label_order(PretrainedConfig(num_labels=3), list(MNLI_LABELS)) is None
    other = PretrainedConfig(num_labels=2, id2label={0: "neg", 1: "pos"}, label2id={"neg": 0, "pos": 1})
    assert rc.head_label_order(other, list(MNLI_LABELS)) is None


def test_mnli_fixture_is_deterministic_and_balanced():
    rows = make_mnli(30, seed=1)
    assert rows == make_mnli(30, seed=1)
    assert sorted({r["label"] for r in rows}) == [0, 1, 2]
    assert {"premise", "hypothesis", "label", "idx"} <= set(rows[0])


@pytest.fixture(scope="module")
def source_dir(tmp_path_factory, training_code_dir):
    """training_code without requirements.txt: its packages are in this venv already, and the toolkit's
    offline pip run costs ~20 s per run (test_local_container covers that step)."""
    src = tmp_path_factory.mktemp("src") / "training_code"
    shutil.copytree(training_code_dir, src, ignore=shutil.ignore_patterns("__pycache__", "requirements.txt"))
    return src


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("encoders")
    return {kind: build_encoder(kind, root / kind) for kind in ("roberta", "distilbert")}


HEAD_ORDER = ("CONTRADICTION", "NEUTRAL", "ENTAILMENT")  # roberta-large-mnli's label order


@pytest.mark.slow
def test_mnli_trains_through_the_toolkit_evaluates_both_sets_and_serves_pairs(tmp_path, source_dir):
    from hfpipe.fixtures.serving import build_served_model

    data = write_classification(tmp_path / "mnli", "mnli", n_train=48, n_validation=12)
    # A start checkpoint that already has an MNLI head, in another label order than the data's ids.
    start = build_served_model("run_classification.py", tmp_path / "start", labels=HEAD_ORDER)
    job = lc.run_training(
        tmp_path / "job",
        entry_point="run_classification.py",
        source_dir=source_dir,
        hyperparameters={
            "task_name": "mnli",
            "text_column_names": "premise,hypothesis",
            "label_column_name": "label",
            "do_train": True,
            "do_eval": True,
            "max_seq_length": 48,
            "max_steps": 6,
            "per_device_train_batch_size": 8,
            "save_strategy": "no",
            "disable_tqdm": True,
        },
        channels={**{k: v.parent for k, v in data.items()}, "model": start},
    )
    assert job.status == "Completed", job.logs()[-3000:]
    metrics = json.loads((job.model_dir / "metrics.json").read_text())
    assert metrics["global_step"] == 6
    assert 0.0 <= metrics["eval_accuracy"] <= 1.0 and 0.0 <= metrics["eval_accuracy_mm"] <= 1.0
    assert metrics["eval_samples"] == metrics["eval_samples_mm"] == 12
    assert "keeping the start checkpoint's label order" in job.logs()
    config = json.loads((job.model_dir / "config.json").read_text())
    assert [config["id2label"][str(i)] for i in range(3)] == list(HEAD_ORDER)

    with le.LocalEndpoint(job.model_artifacts, workdir=tmp_path / "endpoint") as endpoint:
        out = endpoint.predict(
            {"premise": "Ada visited the museum of Oslo.", "hypothesis": "Ada visited Oslo."}
        )
        assert out["label"] in HEAD_ORDER
        assert set(out["scores"]) == set(HEAD_ORDER)
        assert sum(out["scores"].values()) == pytest.approx(1.0, abs=1e-5)
        assert out["label"] == max(out["scores"], key=out["scores"].get)
        batch = endpoint.predict(
            [{"premise": "A b.", "hypothesis": "A."}, {"premise": "C d.", "hypothesis": "C."}]
        )
        assert len(batch) == 2
        with pytest.raises(ValueError, match="'hypothesis'"):
            endpoint.predict({"premise": "Ada visited Oslo."})
        # A single text sent to the pair model is refused, not answered as if it fit.
        assert config["hfpipe_text_pair"] is True
        with pytest.raises(ValueError, match="this model classifies text pairs"):
            endpoint.predict({"inputs": "Ada visited Oslo."})


def test_labels_are_remapped_to_the_heads_order(tmp_path, monkeypatch, in_process_training):
    """The data's ids become the head's ids in the tokenized features (run_glue.py's label_to_id)."""
    data = write_classification(tmp_path / "mnli", "mnli", n_train=6, n_validation=3)
    start = build_served_model_cached(tmp_path)
    captured = {}
    monkeypatch.setattr(
        rc.encoder_utils,
        "train_resumable",
        lambda trainer, *a: captured.update(labels=list(trainer.train_dataset["labels"])) or {},
    )
    monkeypatch.setattr(rc.encoder_utils, "save_outputs", lambda *a: None)
    rows = [json.loads(line) for line in data["train"].read_text().splitlines()]
    rc.main([
        "--model_name_or_path", str(start), "--task_name", "mnli", "--train_file", str(data["train"]),
        "--do_train", "True", "--output_dir", str(tmp_path / "out"), "--model_dir", str(tmp_path / "model"),
    ])  # fmt: skip
    assert captured["labels"] == [{0: 2, 1: 1, 2: 0}[r["label"]] for r in rows]


def build_served_model_cached(tmp_path):
    from hfpipe.fixtures.serving import build_served_model

    return build_served_model("run_classification.py", tmp_path / "start", labels=HEAD_ORDER)


SPOT = {
    "class_names": "negative,positive",
    "do_train": True,
    "max_seq_length": 32,
    "max_steps": 20,
    "per_device_train_batch_size": 4,
    "learning_rate": 5e-4,
    "save_strategy": "steps",
    "save_steps": 4,
    "logging_steps": 4,
    "seed": 11,
    "output_dir": "/opt/ml/checkpoints",
    "report_to": "none",
    "disable_tqdm": True,
}


def _final_state(job: lc.LocalTrainingJob) -> tuple[int, float]:
    state = json.loads((job.checkpoint_dir / "trainer_state.json").read_text())
    losses = [e for e in state["log_history"] if "loss" in e]
    return state["global_step"], losses[-1]["loss"]


@pytest.mark.slow
def test_spot_interruption_resumes_to_the_same_step_and_loss(tmp_path, models, source_dir):
    data = write_classification(tmp_path / "textcls", "textcls", n_train=64, n_validation=8)
    run = {
        "entry_point": "run_classification.py",
        "source_dir": source_dir,
        "hyperparameters": SPOT,
        "channels": {"training": data["train"].parent, "model": models["distilbert"]},
    }
    reference = lc.run_training(tmp_path / "uninterrupted", **run)
    assert reference.status == "Completed", reference.logs()[-3000:]

    # Stop the container as soon as the first checkpoint is complete; as in SageMaker, no signal reaches the
    # script, so the resume starts from that periodic checkpoint.
    proc = lc.start_training(tmp_path / "spot", **run)
    checkpoints = proc.base_dir / "checkpoints"
    deadline = time.monotonic() + 240
    while last_complete_checkpoint(str(checkpoints)) is None:
        assert proc.poll() is None, "the run ended before writing a checkpoint"
        assert time.monotonic() < deadline, "no checkpoint within 240 s"
        time.sleep(0.05)
    proc.stop(grace_seconds=0)
    stopped = proc.wait()
    assert stopped.status == "Stopped"
    assert stopped.model_artifacts is None
    interrupted_at = int(Path(last_complete_checkpoint(str(checkpoints))).name.split("-")[1])
    assert 0 < interrupted_at < SPOT["max_steps"], "the run was not interrupted before its end"

    resumed = lc.run_training(tmp_path / "spot", **run)
    assert resumed.status == "Completed", resumed.logs()[-3000:]
    assert "resuming from checkpoint" in resumed.logs()
    assert f"checkpoint-{interrupted_at}" in resumed.logs()
    step, loss = _final_state(resumed)
    ref_step, ref_loss = _final_state(reference)
    assert step == ref_step == SPOT["max_steps"]
    assert loss == pytest.approx(ref_loss, rel=1e-6)

    with tarfile.open(resumed.model_artifacts) as tar:
        assert {"model.safetensors", "code/inference.py"} <= set(tar.getnames())
    with le.LocalEndpoint(resumed.model_artifacts, workdir=tmp_path / "endpoint") as endpoint:
        out = endpoint.predict({"text": "The museum in Oslo was wonderful."})
        assert set(out["scores"]) == {"negative", "positive"}
        assert out["label"] in ("negative", "positive")


def test_config_file_is_read_by_hfargumentparser_with_the_same_defaults(
    tmp_path, monkeypatch, in_process_training
):
    monkeypatch.setenv("SAGEMAKER_BASE_DIR", str(tmp_path / "opt_ml"))
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    config = tmp_path / "args.yaml"
    config.write_text(
        "task_name: mnli\nmax_seq_length: 64\ndo_train: true\nmp_parameters: '{\"partitions\": 2}'\n"
    )
    _, data_args, training_args, _ = rc.parse_args([str(config)])
    from_flags = rc.parse_args(["--task_name", "mnli", "--max_seq_length", "64", "--do_train", "True"])[2]
    assert data_args.task_name == "mnli" and data_args.max_seq_length == 64
    assert training_args.do_train is True
    assert json.loads(training_args.mp_parameters) == {"partitions": 2}
    assert training_args.output_dir == from_flags.output_dir == str(tmp_path / "opt_ml" / "checkpoints")
    assert training_args.report_to == from_flags.report_to == []
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"no_such_argument": 1}))
    with pytest.raises(ValueError, match="no_such_argument"):
        rc.parse_args([str(bad)])
