"""The evaluation job in local mode: a CreateProcessingJob runs training_code/evaluate.py on this machine under
SageMaker Processing's contract (hfpipe.local.training.processing, the engine's processing plug-in) and leaves
evaluation.json in S3, valid against the contract (hfpipe.core.recipe.evaluation).

No training run: the tiny served classification model (hfpipe.fixtures.serving, what run_classification.py
leaves in model.tar.gz) with its head's weights set so that it answers one class, entailment (right on 27 of
the 30 held-out pairs) or contradiction (right on none): a better and a worse version of the same model.
"""

from __future__ import annotations

import json
import shutil
import sys
import tarfile
from pathlib import Path
from typing import Any

import pytest

from hfpipe.core.recipe.evaluation import INPUT_PATHS, OUTPUT_PATH, check_document
from hfpipe.core.validate import RecipeError
from hfpipe.local.engine.template import ACCOUNT

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "training_code"))
BUCKET = "artifacts"
#: The smallest template the engine takes: one state machine (the processing job needs none).
TEMPLATE = {
    "Resources": {
        "Pipeline": {
            "Type": "AWS::StepFunctions::StateMachine",
            "Properties": {
                "DefinitionString": json.dumps({"StartAt": "End", "States": {"End": {"Type": "Succeed"}}})
            },
        }
    }
}


def _pack(folder: Path, archive: Path) -> None:
    archive.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(archive, "w:gz") as tar:
        for path in sorted(folder.rglob("*")):
            tar.add(path, arcname=str(path.relative_to(folder)), recursive=False)


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """inputs/{better,worse}/model.tar.gz and inputs/data/validation.jsonl (30 MNLI pairs, 27 entailment)."""
    import torch
    from transformers import AutoModelForSequenceClassification

    from hfpipe.fixtures.mnli import make_mnli
    from hfpipe.fixtures.serving import build_served_model

    root = tmp_path_factory.mktemp("evaluation")
    served = build_served_model("run_classification.py", root / "served")
    for name, label in (("better", 0), ("worse", 2)):
        model = AutoModelForSequenceClassification.from_pretrained(served)
        head = model.classifier.out_proj  # RoBERTa's classification head
        with torch.no_grad():
            head.weight.zero_()
            head.bias.copy_(torch.tensor([-10.0, -10.0, -10.0]))
            head.bias[label] = 10.0
        folder = root / "models" / name
        shutil.copytree(served, folder)
        model.save_pretrained(folder)
        _pack(folder, root / "inputs" / name / "model.tar.gz")
    rows = make_mnli(30)
    for i, row in enumerate(rows):
        row["label"] = 0 if i < 27 else 1
    (root / "inputs" / "data").mkdir()
    (root / "inputs" / "data" / "validation.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return root / "inputs"


@pytest.fixture(scope="module")
def engine(inputs: Path, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The local engine with the runtime's processing plug-in, the inputs and training_code/ in its S3."""
    from hfpipe.local.engine.engine import LocalEngine
    from hfpipe.local.runtime import LocalProcessing, upload_dir

    with LocalEngine(TEMPLATE, region="us-east-1", time_scale=0.0) as eng:
        s3 = eng.client("s3")
        s3.create_bucket(Bucket=BUCKET)
        for name in ("better", "worse", "data"):
            upload_dir(s3, inputs / name, BUCKET, f"inputs/{name}")
        upload_dir(s3, REPO / "training_code", BUCKET, "code")
        eng.processing = LocalProcessing(s3, tmp_path_factory.mktemp("processing"))
        yield eng


def _request(name: str, challenger: str, champion: str | None, arguments: list[str]) -> dict[str, Any]:
    """A CreateProcessingJob request by the contract: inputs at INPUT_PATHS, the output at OUTPUT_PATH."""
    sources = {"challenger": f"inputs/{challenger}", "data": "inputs/data", "code": "code"}
    if champion:
        sources["champion"] = f"inputs/{champion}"
    return {
        "ProcessingJobName": name,
        "RoleArn": f"arn:aws:iam::{ACCOUNT}:role/evaluation",
        "ProcessingResources": {
            "ClusterConfig": {"InstanceCount": 1, "InstanceType": "ml.m5.xlarge", "VolumeSizeInGB": 30}
        },
        "AppSpecification": {
            "ImageUri": f"{ACCOUNT}.dkr.ecr.us-east-1.amazonaws.com/huggingface-pytorch-training:2.8.0",
            "ContainerEntrypoint": ["python3", f"{INPUT_PATHS['code']}/evaluate.py"],
            "ContainerArguments": arguments,
        },
        "ProcessingInputs": [
            {
                "InputName": input_name,
                "S3Input": {
                    "S3Uri": f"s3://{BUCKET}/{key}",
                    "LocalPath": INPUT_PATHS[input_name],
                    "S3DataType": "S3Prefix",
                    "S3InputMode": "File",
                },
            }
            for input_name, key in sources.items()
        ],
        "ProcessingOutputConfig": {
            "Outputs": [
                {
                    "OutputName": "evaluation",
                    "S3Output": {
                        "S3Uri": f"s3://{BUCKET}/evaluations/{name}",
                        "LocalPath": OUTPUT_PATH,
                        "S3UploadMode": "EndOfJob",
                    },
                }
            ]
        },
        "StoppingCondition": {"MaxRuntimeInSeconds": 600},
    }


RULE = ["--task", "text-classification", "--metric", "accuracy", "--margin", "1.0", "--resamples", "500"]
EXTRA = ["--max-seq-length", "64", "--text-columns", "premise,hypothesis"]


def _run(engine: Any, request: dict[str, Any]) -> dict[str, Any]:
    """Create the job (InProgress at once, as CreateProcessingJob leaves it), wait for its end; its description."""
    sagemaker = engine.client("sagemaker")
    sagemaker.create_processing_job(**request)
    name = request["ProcessingJobName"]
    assert sagemaker.describe_processing_job(ProcessingJobName=name)["ProcessingJobStatus"] in (
        "InProgress",
        "Completed",  # a fast machine: the thread ran to its end already
    )
    engine.processing.wait(name)
    return sagemaker.describe_processing_job(ProcessingJobName=name)


def _document(engine: Any, name: str) -> dict[str, Any]:
    body = engine.client("s3").get_object(Bucket=BUCKET, Key=f"evaluations/{name}/evaluation.json")["Body"]
    return check_document(json.loads(body.read()))


def test_a_worse_challenger_s_job_completes_with_the_verdict_worse_and_the_figures(engine: Any) -> None:
    job = _run(engine, _request("worse-one", "worse", "better", [*RULE, "--champion", *EXTRA]))
    assert job["ProcessingJobStatus"] == "Completed", job.get("FailureReason")
    assert job["ProcessingStartTime"] <= job["ProcessingEndTime"] and "FailureReason" not in job
    doc = _document(engine, "worse-one")
    assert doc["data"] == {"channel": "validation", "examples": 30}
    assert doc["challenger"]["scores"]["accuracy"]["value"] == 0.0
    assert doc["champion"]["scores"]["accuracy"]["value"] == 90.0
    assert doc["verdict"] == "worse" and doc["difference"]["value"] == -90.0
    assert doc["difference"]["high"] < -1.0 and "worse" in doc["reason"]  # below -margin
    ended = [e for e in engine.events if e["detail-type"] == "SageMaker Processing Job State Change"]
    # The module's engine ran other jobs before this one, in whatever order the tests came: this job's events.
    assert [
        e["detail"]["ProcessingJobStatus"] for e in ended if e["detail"]["ProcessingJobName"] == "worse-one"
    ] == ["Completed"]


def test_a_better_challenger_is_better(inputs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The same entry point, in this process (torch is loaded already): the better model as the challenger.
    import evaluate

    folder = tmp_path / "input"
    folder.mkdir()
    for name, source in (("challenger", "better"), ("champion", "worse"), ("data", "data")):
        (folder / name).symlink_to(inputs / source)
    monkeypatch.setenv("HFPIPE_LOCAL_OPT_ML", str(tmp_path))
    doc = evaluate.main(
        [*RULE, "--champion", *EXTRA, "--input-dir", str(folder), "--output-dir", str(tmp_path)]
    )
    assert check_document(json.loads((tmp_path / "evaluation.json").read_text())) == doc
    assert doc["challenger"]["scores"]["accuracy"]["value"] == 90.0
    assert doc["verdict"] == "better" and doc["difference"]["low"] > 0


def _main_ends(
    folder: Path, tmp_path: Path, arguments: list[str], monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> tuple[int, str]:
    """evaluate.main in this process, expected to end: its exit status and its one line (stderr, and the
    ExitMessage file); no evaluation.json written."""
    import evaluate

    monkeypatch.setenv("HFPIPE_LOCAL_OPT_ML", str(tmp_path))
    with pytest.raises(SystemExit) as ended:
        evaluate.main([*arguments, "--input-dir", str(folder), "--output-dir", str(tmp_path / "out")])
    said = capsys.readouterr().err.strip()
    assert len(said.splitlines()) == 1 and (tmp_path / "output" / "message").read_text() == said
    assert not (tmp_path / "out" / "evaluation.json").exists()
    return int(ended.value.code or 0), said


def test_fewer_held_out_examples_than_the_floor_give_no_verdict(
    inputs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    """Newcomer finding 2: 2 examples gave `better` at +100 (+100 to +100). The job fails saying why, so the
    evaluation fails and the gate reads no verdict (docs/evaluation.md, "A failed evaluation")."""
    folder = tmp_path / "input"
    for name, source in (("challenger", "better"), ("champion", "worse")):
        (folder / name).mkdir(parents=True)
        (folder / name / "model.tar.gz").symlink_to(inputs / source / "model.tar.gz")
    (folder / "data").mkdir()
    rows = (inputs / "data" / "validation.jsonl").read_text().splitlines(keepends=True)
    (folder / "data" / "validation.jsonl").write_text("".join(rows[:10]))  # 10 pairs, each one-sided
    status, said = _main_ends(folder, tmp_path, [*RULE, "--champion", *EXTRA], monkeypatch, capsys)
    assert status == 1
    assert said.startswith(
        "evaluate.py: EvaluationError: the held-out data holds 10 examples to score; accepted: at least 11"
    )
    status, said = _main_ends(
        folder, tmp_path, [*RULE, "--champion", "--max-examples", "2", *EXTRA], monkeypatch, capsys
    )
    assert status == 2 and "argument --max-examples: 2; accepted: an integer >= 11" in said


def test_a_champion_with_other_labels_is_not_scored(
    inputs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    """Newcomer finding 3: a sentiment model of the same task was scored on MNLI's labels as if its own. The
    job refuses it naming both label sets (exit status 1: the evaluation fails, the version records why)."""
    models = inputs.parent / "models"
    other = tmp_path / "other"
    shutil.copytree(models / "better", other)
    config = json.loads((other / "config.json").read_text())
    config["id2label"] = {"0": "negative", "1": "positive", "2": "mixed"}
    config["label2id"] = {"negative": 0, "positive": 1, "mixed": 2}
    (other / "config.json").write_text(json.dumps(config))
    folder = tmp_path / "input"
    (folder / "challenger").mkdir(parents=True)
    (folder / "challenger" / "model.tar.gz").symlink_to(inputs / "better" / "model.tar.gz")
    _pack(other, folder / "champion" / "model.tar.gz")
    (folder / "data").symlink_to(inputs / "data")
    status, said = _main_ends(folder, tmp_path, [*RULE, "--champion", *EXTRA], monkeypatch, capsys)
    assert status == 1
    challenger = json.loads((models / "better" / "config.json").read_text())["id2label"]
    assert said.startswith("evaluate.py: EvaluationError: the champion's labels (id2label {0: 'negative'")
    assert str({int(k): v for k, v in challenger.items()}) in said, said  # the challenger's, named too
    # The same labels under other ids are other labels too: label2id named where id2label alone cannot say.
    config["id2label"] = {str(k): v for k, v in challenger.items()}
    config["label2id"] = {v: (int(k) + 1) % 3 for k, v in challenger.items()}
    (other / "config.json").write_text(json.dumps(config))
    _pack(other, folder / "champion" / "model.tar.gz")
    status, said = _main_ends(folder, tmp_path, [*RULE, "--champion", *EXTRA], monkeypatch, capsys)
    assert status == 1 and "the champion's labels (label2id {" in said, said


def test_a_failed_evaluation_fails_its_job_saying_why(engine: Any) -> None:
    # --champion without a champion input: evaluate.py's one line is the job's FailureReason and ExitMessage.
    job = _run(engine, _request("no-champion-input", "better", None, [*RULE, "--champion", *EXTRA]))
    assert job["ProcessingJobStatus"] == "Failed"
    assert job["FailureReason"].startswith("AlgorithmError: evaluate.py: EvaluationError: input/champion")
    assert job["ExitMessage"].startswith("evaluate.py: EvaluationError: input/champion")
    keys = engine.client("s3").list_objects_v2(Bucket=BUCKET, Prefix="evaluations/no-champion-input")
    assert keys["KeyCount"] == 0  # EndOfJob outputs of a failed job are not uploaded


def test_a_request_local_mode_cannot_run_is_refused_before_a_job_exists(engine: Any) -> None:
    from botocore.exceptions import ClientError

    request = _request("elsewhere", "better", None, RULE)
    request["ProcessingInputs"][0]["S3Input"]["LocalPath"] = "/data/challenger"
    with pytest.raises(ClientError) as refused:
        engine.client("sagemaker").create_processing_job(**request)
    assert refused.value.response["Error"]["Code"] == "ValidationException"
    assert "ProcessingInputs[0].S3Input.LocalPath: '/data/challenger'" in str(refused.value)
    with pytest.raises(ClientError):
        engine.client("sagemaker").describe_processing_job(ProcessingJobName="elsewhere")


def test_the_document_s_rules_name_the_field() -> None:
    with pytest.raises(RecipeError, match=r"^evaluation.verdict: 'better' with champion absent"):
        check_document(
            {
                "schema": "hfpipe.evaluation/1",
                "task": "text-classification",
                "data": {"channel": "validation", "examples": 3},
                "rule": {
                    "metric": "accuracy",
                    "margin": 0.0,
                    "confidence": 0.95,
                    "resamples": 100,
                    "higher_is_better": True,
                },
                "challenger": {"scores": {"accuracy": {"value": 1.0, "n": 3, "low": 0.0, "high": 2.0}}},
                "champion": None,
                "difference": None,
                "verdict": "better",
                "reason": "",
                "seconds": 1.0,
            }
        )


def test_stop_processing_job_ends_the_job_s_container_and_an_ended_job_keeps_its_status(engine: Any) -> None:
    """Newcomer finding 6 (h-nc-eval2): a stopped execution's evaluation job ran on to Completed. On
    StopProcessingJob the job is Stopping, its container is ended, then it is Stopped (API reference,
    DescribeProcessingJob's ProcessingJobStatus), its EndOfJob output not uploaded; moto's own answer
    (Stopped at once, whatever the job was) does not overwrite a job that had ended."""
    import time

    sagemaker = engine.client("sagemaker")
    request = _request("held-job", "better", None, ["120"])
    request["AppSpecification"]["ContainerEntrypoint"] = [
        "python3",
        "-c",
        "import sys, time; time.sleep(int(sys.argv[1]))",
    ]
    started = time.monotonic()
    sagemaker.create_processing_job(**request)
    sagemaker.stop_processing_job(ProcessingJobName="held-job")
    assert sagemaker.describe_processing_job(ProcessingJobName="held-job")["ProcessingJobStatus"] in (
        "Stopping",
        "Stopped",
    )
    engine.processing.wait("held-job", timeout_s=60)
    assert time.monotonic() - started < 60  # not the container's 120 s
    job = sagemaker.describe_processing_job(ProcessingJobName="held-job")
    assert job["ProcessingJobStatus"] == "Stopped" and "FailureReason" not in job, job
    assert engine.client("s3").list_objects_v2(Bucket=BUCKET, Prefix="evaluations/held-job")["KeyCount"] == 0
    sagemaker.stop_processing_job(ProcessingJobName="held-job")  # again, and on a job that failed
    assert sagemaker.describe_processing_job(ProcessingJobName="held-job")["ProcessingJobStatus"] == "Stopped"
    failed = _run(engine, _request("failed-then-stopped", "better", None, [*RULE, "--champion", *EXTRA]))
    sagemaker.stop_processing_job(ProcessingJobName="failed-then-stopped")
    assert failed["ProcessingJobStatus"] == "Failed"
    assert (
        sagemaker.describe_processing_job(ProcessingJobName="failed-then-stopped")["ProcessingJobStatus"]
        == "Failed"
    )
