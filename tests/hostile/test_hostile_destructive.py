"""Commands that stop, delete or write: they act only on what the pipeline wrote (the Plan state's output,
resource tags naming this environment and execution), ask before deleting, and leave nothing half done.
Each test checks the moto account afterwards: what must survive still exists."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from cli_moto import ACCOUNT, ROLE, Deployed, plan_for, sagemaker_backend, tags_for

from hfpipe.cli import data
from hfpipe.cli.aws import HfpipeError

Run = Callable[..., tuple[int, str, str]]


def model(deployed: Deployed, name: str, env: str, execution: str) -> None:
    deployed.sagemaker.create_model(
        ModelName=name,
        ExecutionRoleArn=f"arn:aws:iam::{ACCOUNT}:role/r",
        PrimaryContainer={"Image": "example.invalid/i"},
        Tags=tags_for({"env": env, "execution_name": execution, "recipe_name": "tiny-qa"}),
    )


def models(deployed: Deployed) -> list[str]:
    return sorted(m["ModelName"] for m in deployed.sagemaker.list_models()["Models"])


def in_progress(deployed: Deployed, plan: dict[str, Any]) -> None:
    deployed.create_training_job(plan)
    sagemaker_backend().training_jobs[plan["training_job_name"]].training_job_status = "InProgress"


# --- stop ----------------------------------------------------------------------------------------------


def test_stop_ignores_a_plan_forged_in_the_execution_input(deployed: Deployed, cli: Run) -> None:
    """While Plan has not finished, $.plan is whatever the caller sent: it names prod's job and model."""
    prod = plan_for("prod-run", env="prod")
    in_progress(deployed, prod)
    model(deployed, "prod-run-model", "prod", "prod-run")
    slow_plan = {
        "StartAt": "Plan",
        "States": {"Plan": {"Type": "Wait", "Seconds": 30, "End": True}},
    }
    arn_sm = deployed.sfn.create_state_machine(name="slow", definition=json.dumps(slow_plan), roleArn=ROLE)[
        "stateMachineArn"
    ]
    arn = deployed.sfn.start_execution(
        stateMachineArn=arn_sm, name="prod-run", input=json.dumps({"plan": prod})
    )["executionArn"]
    code, out, err = cli("stop", arn, "--yes")
    assert (code, err) == (0, "")
    assert "its Plan had not finished: no training job was launched" in out
    # moto has no StopTrainingJob: a call would have failed the command; the job and model are untouched
    assert sagemaker_backend().training_jobs["prod-run-train"].training_job_status == "InProgress"
    assert models(deployed) == ["prod-run-model"]


def test_stop_leaves_a_job_of_the_same_name_in_another_environment(deployed: Deployed, cli: Run) -> None:
    arn, plan = deployed.start("clash", train_seconds=30, wait=False)
    in_progress(deployed, {**plan, "env": "prod"})  # same name, created by prod's pipeline
    model(deployed, "clash-model", "prod", "clash")
    deployed.wait_for_state(arn, "Train")
    code, out, err = cli("stop", "clash", "--env", "dev", "--yes")
    assert (code, err) == (0, "")
    assert "not stopping training job clash-train: its tags do not name environment 'dev'" in out
    assert sagemaker_backend().training_jobs["clash-train"].training_job_status == "InProgress"
    assert models(deployed) == ["clash-model"]


def test_stop_refuses_an_execution_of_another_environment(deployed: Deployed, cli: Run) -> None:
    prod = Deployed("prod")
    arn, plan = prod.start("their-run", train_seconds=30, wait=False)
    prod.wait_for_state(arn, "Train")
    model(deployed, "their-run-model", "prod", "their-run")
    code, _, err = cli("stop", arn, "--env", "dev", "--yes")
    assert code == 1
    assert err == (
        "error: execution 'their-run' belongs to environment 'prod', not --env 'dev'; nothing stopped\n"
    )
    assert deployed.sfn.describe_execution(executionArn=arn)["status"] == "RUNNING"
    assert models(deployed) == ["their-run-model"]
    assert plan["env"] == "prod"


def test_stop_asks_before_deleting_and_a_script_without_yes_deletes_nothing(
    deployed: Deployed, cli: Run
) -> None:
    arn, _ = deployed.start("mine", train_seconds=30, wait=False)
    deployed.wait_for_state(arn, "Train")
    model(deployed, "mine-model", "dev", "mine")
    code, out, err = cli("stop", "mine", "--env", "dev")  # stdin is not a terminal under pytest
    assert (code, err) == (0, "")
    assert "left 1 resources of execution mine; delete them with `hfpipe cleanup --env dev`" in out
    assert models(deployed) == ["mine-model"]
    assert deployed.sfn.describe_execution(executionArn=arn)["status"] == "ABORTED"


def test_stop_with_yes_deletes_only_its_own_tagged_resources(deployed: Deployed, cli: Run) -> None:
    arn, _ = deployed.start("own", train_seconds=30, wait=False)
    deployed.wait_for_state(arn, "Train")
    model(deployed, "own-model", "dev", "own")
    model(deployed, "own-prod-model", "prod", "own")  # same execution name, other environment
    model(deployed, "other-model", "dev", "other")
    deployed.sagemaker.create_model(  # no tags: a user's own model
        ModelName="users-model",
        ExecutionRoleArn=f"arn:aws:iam::{ACCOUNT}:role/r",
        PrimaryContainer={"Image": "example.invalid/i"},
    )
    code, out, _ = cli("stop", "own", "--env", "dev", "--yes")
    assert code == 0 and "deleted model own-model" in out
    assert models(deployed) == ["other-model", "own-prod-model", "users-model"]


# --- cleanup -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("age", ["", " ", "0h", "x", "=7d"])
def test_cleanup_with_a_bad_age_deletes_nothing(deployed: Deployed, cli: Run, age: str) -> None:
    model(deployed, "a-model", "dev", "a")
    code, _, err = cli("cleanup", "--env", "dev", f"--older-than={age}", "--yes")
    assert code == 1 and f"--older-than {age!r}" in err
    assert models(deployed) == ["a-model"]


def test_cleanup_without_yes_in_a_script_deletes_nothing(deployed: Deployed, cli: Run) -> None:
    model(deployed, "a-model", "dev", "a")
    code, _, err = cli("cleanup", "--env", "dev")
    assert code == 1 and "pass --yes to confirm" in err
    assert models(deployed) == ["a-model"]


def test_cleanup_never_touches_another_environment_or_untagged(deployed: Deployed, cli: Run) -> None:
    model(deployed, "dev-model", "dev", "a")
    model(deployed, "prod-model", "prod", "a")
    deployed.sagemaker.create_model(
        ModelName="users-model",
        ExecutionRoleArn=f"arn:aws:iam::{ACCOUNT}:role/r",
        PrimaryContainer={"Image": "example.invalid/i"},
        Tags=[{"Key": "hfpipe:env", "Value": "dev"}],  # env tag alone: not managed by hfpipe
    )
    code, _, _ = cli("cleanup", "--env", "dev", "--yes")
    assert code == 0
    assert models(deployed) == ["prod-model", "users-model"]


# --- data upload: all or nothing -----------------------------------------------------------------------


def dataset_folder(root: Path) -> Path:
    """A `save_to_disk` folder: three files; state.json and dataset_info.json make it loadable."""
    folder = root / "ds"
    folder.mkdir()
    (folder / "data-00000-of-00001.arrow").write_bytes(b"arrow bytes")
    (folder / "state.json").write_text("{}")
    (folder / "dataset_info.json").write_text('{"features": {"text": {}}}')
    return folder


class Flaky:
    """An S3 client whose upload_file fails on the n-th call (and delete_object too, if asked)."""

    def __init__(self, real: Any, fail_on: int, deletes_fail: bool = False) -> None:
        self.real, self.fail_on, self.deletes_fail, self.calls = real, fail_on, deletes_fail, 0
        self.uploaded: list[str] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)

    def upload_file(self, local: str, bucket: str, key: str) -> None:
        import botocore.exceptions

        self.calls += 1
        if self.calls == self.fail_on:
            raise botocore.exceptions.EndpointConnectionError(endpoint_url="https://s3.example.invalid")
        self.real.upload_file(local, bucket, key)
        self.uploaded.append(key)

    def delete_object(self, **kwargs: Any) -> Any:
        import botocore.exceptions

        if self.deletes_fail:
            raise botocore.exceptions.EndpointConnectionError(endpoint_url="https://s3.example.invalid")
        return self.real.delete_object(**kwargs)


def keys(deployed: Deployed) -> list[str]:
    return sorted(
        o["Key"] for o in deployed.s3.list_objects_v2(Bucket=deployed.data_bucket).get("Contents", [])
    )


def test_failed_upload_removes_what_it_wrote(deployed: Deployed, tmp_path: Path) -> None:
    folder = dataset_folder(tmp_path)
    flaky = Flaky(deployed.s3, fail_on=2)
    with pytest.raises(HfpipeError) as err:
        data.upload(flaky, deployed.data_bucket, folder, "set")
    assert "uploading to s3://hfpipe-dev-data/set/ failed" in str(err.value)
    assert "nothing was left in s3://hfpipe-dev-data/set/" in str(err.value)
    assert flaky.uploaded == ["set/data-00000-of-00001.arrow"]  # the data first, the loader's files last
    assert keys(deployed) == []


def test_interrupted_upload_is_completed_by_a_retry_and_then_refused(
    deployed: Deployed, tmp_path: Path
) -> None:
    folder = dataset_folder(tmp_path)
    flaky = Flaky(deployed.s3, fail_on=3, deletes_fail=True)
    with pytest.raises(HfpipeError) as err:
        data.upload(flaky, deployed.data_bucket, folder, "set")
    assert "2 of 3 files are in s3://hfpipe-dev-data/set/: run the same command again" in str(err.value)
    assert "set/state.json" not in keys(deployed) or "set/dataset_info.json" not in keys(deployed)
    uri, count = data.upload(deployed.s3, deployed.data_bucket, folder, "set")  # the retry completes it
    assert (uri, count) == ("s3://hfpipe-dev-data/set/", 3)
    assert keys(deployed) == ["set/data-00000-of-00001.arrow", "set/dataset_info.json", "set/state.json"]
    with pytest.raises(HfpipeError, match="already holds data"):
        data.upload(deployed.s3, deployed.data_bucket, folder, "set")


def test_upload_never_completes_into_a_prefix_with_other_data(deployed: Deployed, tmp_path: Path) -> None:
    folder = dataset_folder(tmp_path)
    deployed.s3.put_object(Bucket=deployed.data_bucket, Key="set/users-file.csv", Body=b"a,b\n")
    with pytest.raises(HfpipeError, match="already holds data; choose another --name"):
        data.upload(deployed.s3, deployed.data_bucket, folder, "set")
    assert keys(deployed) == ["set/users-file.csv"]
    assert (
        deployed.s3.get_object(Bucket=deployed.data_bucket, Key="set/users-file.csv")["Body"].read()
        == b"a,b\n"
    )


# --- data upload: records in the recipe's format ---------------------------------------------------------

SQUAD = {
    "data": [
        {
            "title": "t",
            "paragraphs": [
                {
                    "context": "Ann lives in Rome.",
                    "qas": [
                        {"id": "1", "question": "Where?", "answers": [{"text": "Rome", "answer_start": 13}]}
                    ],
                }
            ],
        }
    ]
}

# (recipe, file name, content, fragments of the error; None: accepted)
# fmt: off
RECORD_CASES: list[tuple[str, str, str, list[str] | None]] = [
    ("tiny-qa", "squad.json", json.dumps(SQUAD), None),
    ("tiny-qa", "flat.jsonl", json.dumps({"question": "q", "context": "c", "answers": {"text": ["c"], "answer_start": [0]}}) + "\n", None),
    ("tiny-qa", "noanswer.jsonl", json.dumps({"question": "q", "context": "c", "answers": {"text": [], "answer_start": []}}) + "\n", ["record 1", "column 'answers'", "same non-zero length"]),
    ("tiny-qa", "strstart.jsonl", json.dumps({"question": "q", "context": "c", "answers": {"text": ["c"], "answer_start": ["0"]}}) + "\n", ["column 'answers'"]),
    ("tiny-qa", "noquestion.json", json.dumps({"data": [{"paragraphs": [{"context": "c", "qas": [{"answers": []}]}]}]}), ["record 1", "column 'question' is None"]),
    ("tiny-qa", "samsum.jsonl", json.dumps({"dialogue": "A: hi", "summary": "s"}) + "\n", ["column 'question'"]),
    ("tiny-lora", "samsum.jsonl", json.dumps({"dialogue": "A: hi", "summary": "s"}) + "\n", None),
    ("tiny-lora", "nulldialogue.jsonl", json.dumps({"dialogue": None, "summary": "s"}) + "\n", ["record 1", "column 'dialogue' is None", "a non-empty string"]),
    ("tiny-lora", "second.jsonl", json.dumps({"dialogue": "A", "summary": "s"}) + "\n" + json.dumps({"dialogue": "B", "summary": 3}) + "\n", ["record 2", "column 'summary' is 3"]),
    ("tiny-lora", "emptysummary.json", json.dumps([{"dialogue": "A", "summary": " "}]), ["record 1", "column 'summary'"]),
    ("tiny-mnli", "mnli.jsonl", json.dumps({"premise": "p", "hypothesis": "h", "label": 0}) + "\n", None),
    ("tiny-mnli", "strlabel.jsonl", json.dumps({"premise": "p", "hypothesis": "h", "label": "entailment"}) + "\n", ["column 'label' is 'entailment'", "an integer label id"]),
    ("tiny-mnli", "boollabel.jsonl", json.dumps({"premise": "p", "hypothesis": "h", "label": True}) + "\n", ["column 'label' is True"]),
    ("tiny-mnli", "nohyp.jsonl", json.dumps({"premise": "p", "label": 1}) + "\n", ["column 'hypothesis' is None"]),
    ("tiny-mnli", "list.json", json.dumps([["p", "h", 0]]), ["a record is list, not an object"]),
]
# fmt: on


@pytest.mark.parametrize(
    ("recipe", "filename", "content", "fragments"),
    RECORD_CASES,
    ids=[f"d{i}" for i in range(len(RECORD_CASES))],
)
def test_upload_checks_records_against_the_recipe(
    deployed: Deployed, cli: Run, tmp_path: Path, recipe: str, filename: str, content: str, fragments: Any
) -> None:
    path = tmp_path / filename
    path.write_text(content)
    code, _, err = cli("data", "upload", str(path), "--env", "dev", "--name", "set", "--recipe", recipe)
    if fragments is None:
        assert (code, err) == (0, ""), err
        assert keys(deployed) == [f"set/{filename}"]
        return
    assert code == 1 and f"does not fit recipe {recipe!r}" in err
    for fragment in fragments:
        assert fragment in err, (fragment, err)
    assert keys(deployed) == []
