"""`hfpipe cleanup` and `hfpipe data upload` under hostile input: cleanup deletes only what the pipeline
tagged for this environment, after asking; an upload is all or nothing and its records fit the recipe.
Each test checks the moto account afterwards: what must survive still exists."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from cli_moto import ACCOUNT, Environment, tagged_model

from hfpipe.cli.aws import HfpipeError
from hfpipe.cli.recipe import data

Run = Callable[..., tuple[int, str, str]]


model = tagged_model


def models(environment: Environment) -> list[str]:
    return sorted(m["ModelName"] for m in environment.sagemaker.list_models()["Models"])


# --- cleanup -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("age", ["", " ", "0h", "x", "=7d"])
def test_cleanup_with_a_bad_age_deletes_nothing(environment: Environment, cli: Run, age: str) -> None:
    model(environment, "a-model", "dev", "a")
    code, _, err = cli("cleanup", "--env", "dev", f"--older-than={age}", "--yes")
    assert code == 2 and f"--older-than {age!r}" in err  # a usage error, before any AWS call
    assert models(environment) == ["a-model"]


def test_cleanup_without_yes_in_a_script_deletes_nothing(environment: Environment, cli: Run) -> None:
    model(environment, "a-model", "dev", "a")
    code, _, err = cli("cleanup", "--env", "dev")
    assert code == 1 and "pass --yes to confirm" in err
    assert models(environment) == ["a-model"]


def test_cleanup_never_touches_another_environment_or_untagged(environment: Environment, cli: Run) -> None:
    model(environment, "dev-model", "dev", "a")
    model(environment, "prod-model", "prod", "a")
    environment.sagemaker.create_model(
        ModelName="users-model",
        ExecutionRoleArn=f"arn:aws:iam::{ACCOUNT}:role/r",
        PrimaryContainer={"Image": "example.invalid/i"},
        Tags=[{"Key": "hfpipe:env", "Value": "dev"}],  # env tag alone: not managed by hfpipe
    )
    code, _, _ = cli("cleanup", "--env", "dev", "--yes")
    assert code == 0
    assert models(environment) == ["prod-model", "users-model"]


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


def keys(environment: Environment) -> list[str]:
    return sorted(
        o["Key"] for o in environment.s3.list_objects_v2(Bucket=environment.data_bucket).get("Contents", [])
    )


def failed_upload(environment: Environment, flaky: Any, folder: Path) -> str:
    """``data.upload`` of ``folder`` to set/ through ``flaky``, which fails: the error's line."""
    with pytest.raises(HfpipeError) as err:
        data.upload(flaky, environment.data_bucket, folder, "set")
    return str(err.value)


def test_failed_upload_removes_what_it_wrote(environment: Environment, tmp_path: Path) -> None:
    flaky = Flaky(environment.s3, fail_on=2)
    error = failed_upload(environment, flaky, dataset_folder(tmp_path))
    assert f"uploading to s3://{environment.data_bucket}/set/ failed" in error
    assert f"nothing was left in s3://{environment.data_bucket}/set/" in error
    assert flaky.uploaded == ["set/data-00000-of-00001.arrow"]  # the data first, the loader's files last
    assert keys(environment) == []


def test_interrupted_upload_is_completed_by_a_retry_and_then_refused(
    environment: Environment, tmp_path: Path
) -> None:
    folder = dataset_folder(tmp_path)
    error = failed_upload(environment, Flaky(environment.s3, fail_on=3, deletes_fail=True), folder)
    assert f"2 of 3 files are in s3://{environment.data_bucket}/set/: run the same command again" in error
    assert "set/state.json" not in keys(environment) or "set/dataset_info.json" not in keys(environment)
    uri, count = data.upload(environment.s3, environment.data_bucket, folder, "set")  # the retry completes it
    assert (uri, count) == (f"s3://{environment.data_bucket}/set/", 3)
    assert keys(environment) == ["set/data-00000-of-00001.arrow", "set/dataset_info.json", "set/state.json"]
    with pytest.raises(HfpipeError, match="already holds data"):
        data.upload(environment.s3, environment.data_bucket, folder, "set")


def test_upload_never_completes_into_a_prefix_with_other_data(
    environment: Environment, tmp_path: Path
) -> None:
    folder = dataset_folder(tmp_path)
    environment.s3.put_object(Bucket=environment.data_bucket, Key="set/users-file.csv", Body=b"a,b\n")
    with pytest.raises(HfpipeError, match="already holds data; choose another --name"):
        data.upload(environment.s3, environment.data_bucket, folder, "set")
    assert keys(environment) == ["set/users-file.csv"]
    assert (
        environment.s3.get_object(Bucket=environment.data_bucket, Key="set/users-file.csv")["Body"].read()
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
]
# fmt: on


@pytest.mark.parametrize(
    ("recipe", "filename", "content", "fragments"),
    RECORD_CASES,
    ids=[f"d{i}" for i in range(len(RECORD_CASES))],
)
def test_upload_checks_records_against_the_recipe(
    environment: Environment,
    cli: Run,
    tmp_path: Path,
    recipe: str,
    filename: str,
    content: str,
    fragments: Any,
) -> None:
    path = tmp_path / filename
    path.write_text(content)
    code, _, err = cli("data", "upload", str(path), "--env", "dev", "--name", "set", "--recipe", recipe)
    if fragments is None:
        assert (code, err) == (0, ""), err
        assert keys(environment) == [f"set/{filename}"]
        return
    assert code == 1 and f"does not fit recipe {recipe!r}" in err
    for fragment in fragments:
        assert fragment in err, (fragment, err)
    assert keys(environment) == []


# --- data upload: every error path is all or nothing, nothing is overwritten, nothing leaves the folder ----


class TransferFails(Flaky):
    """boto3's managed transfer fails the way it does for real: S3UploadFailedError wrapping S3's error."""

    def upload_file(self, local: str, bucket: str, key: str) -> None:
        import boto3.exceptions

        self.calls += 1
        if self.calls == self.fail_on:
            raise boto3.exceptions.S3UploadFailedError(
                f"Failed to upload {local} to {bucket}/{key}: An error occurred (SlowDown) when calling the "
                "PutObject operation (reached max retries: 4): Please reduce your request rate."
            )
        self.real.upload_file(local, bucket, key)
        self.uploaded.append(key)


def test_a_transfer_error_rolls_the_upload_back(environment: Environment, tmp_path: Path) -> None:
    error = failed_upload(environment, TransferFails(environment.s3, fail_on=2), dataset_folder(tmp_path))
    assert f"uploading to s3://{environment.data_bucket}/set/" in error
    assert "SlowDown" in error and "nothing was left" in error
    assert keys(environment) == []


def test_a_file_of_another_size_under_the_prefix_is_never_overwritten(
    environment: Environment, tmp_path: Path
) -> None:
    folder = dataset_folder(tmp_path)
    # Someone else's state.json (the folder's is "{}"): S3 writes objects whole, so it is not a cut-short upload.
    theirs = b'{"_fingerprint": "theirs"}'
    environment.s3.put_object(Bucket=environment.data_bucket, Key="set/state.json", Body=theirs)
    with pytest.raises(HfpipeError, match="already holds data; choose another --name"):
        data.upload(environment.s3, environment.data_bucket, folder, "set")
    assert keys(environment) == ["set/state.json"]
    body = environment.s3.get_object(Bucket=environment.data_bucket, Key="set/state.json")["Body"].read()
    assert body == theirs


def test_a_symlink_out_of_the_folder_is_refused(environment: Environment, tmp_path: Path) -> None:
    folder = dataset_folder(tmp_path)
    secret = tmp_path / "secret.txt"
    secret.write_text("not data")
    (folder / "link.txt").symlink_to(secret)
    with pytest.raises(HfpipeError, match=r"link.txt is a symbolic link; upload a folder of plain files"):
        data.upload(environment.s3, environment.data_bucket, folder, "set")
    assert keys(environment) == []


@pytest.mark.parametrize(
    ("filename", "content", "message"),
    [
        ("magic.parquet", b"PAR1PAR1", "not a parquet file (no PAR1 magic bytes)"),
        ("footer.parquet", b"PAR1" + b"\0" * 8 + (999).to_bytes(4, "little") + b"PAR1", "footer length 999"),
        ("none.json", b"[]", "the data set holds no records"),
        # An array of numbers is JSON, but no records (objects): the loader would make no rows of them.
        ("numbers.json", b"[1, 2, 3]", "the data set holds no records: its 3 item(s) are not JSON objects"),
        ("mixed.json", b'[{"text": "a"}, 7]', "item 2 (7) is not a record (a JSON object)"),
        (
            "lists.json",
            b'[["p", "h", 0]]',
            'no records: its 1 item(s) are not JSON objects (item 1 is ["p", "h", 0])',
        ),
        ("blank.jsonl", b"\n\n", "the data set holds no records"),
        ("latin.jsonl", '{"text": "caf\u00e9"}\n'.encode("latin-1"), "not UTF-8 text (byte 13)"),
    ],
)
def test_files_that_only_look_like_data_are_refused(
    environment: Environment, tmp_path: Path, filename: str, content: bytes, message: str
) -> None:
    path = tmp_path / filename
    path.write_bytes(content)
    with pytest.raises(HfpipeError) as err:
        data.upload(environment.s3, environment.data_bucket, path, "set")
    assert message in str(err.value) and str(path) in str(err.value)
    assert keys(environment) == []


@pytest.mark.parametrize("name", ["deep.json", "deep.jsonl"])
def test_json_nested_too_deep_is_one_line_naming_the_file(
    environment: Environment, tmp_path: Path, name: str
) -> None:
    path = tmp_path / name
    path.write_text("[" * 100_000 + "]" * 100_000 + "\n")
    with pytest.raises(HfpipeError, match="nested deeper than can be read"):
        data.upload(environment.s3, environment.data_bucket, path, "set")
    assert keys(environment) == []
