"""`hfpipe cleanup` and `hfpipe data upload` against a moto account holding one environment's parameters
and buckets."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from accounts import ACCOUNT
from cli_moto import ROLE, Environment, plan_for, tags_for
from cli_run import run
from moto.backends import get_backend
from sagemaker_resources import serving_resources

from hfpipe.cli.recipe.data import default_name


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def make_endpoint(environment: Environment, execution: str, env: str = "dev", managed: bool = True) -> None:
    plan = plan_for(execution, env)
    tags = tags_for(plan) if managed else [{"Key": "team", "Value": "other"}]
    serving_resources(
        environment.sagemaker,
        model=plan["model_name"],
        config=plan["endpoint_config_name"],
        endpoint=plan["endpoint_name"],
        role=ROLE,
        tags=tags,
        PrimaryContainer={"Image": "example.invalid/inference"},
    )


def names(environment: Environment) -> set[str]:
    sm = environment.sagemaker
    return (
        {e["EndpointName"] for e in sm.list_endpoints()["Endpoints"]}
        | {c["EndpointConfigName"] for c in sm.list_endpoint_configs()["EndpointConfigs"]}
        | {m["ModelName"] for m in sm.list_models()["Models"]}
    )


@pytest.fixture
def leftovers(environment: Environment) -> Environment:
    make_endpoint(environment, "mine")
    make_endpoint(environment, "prod-run", env="prod")  # another environment: never touched
    make_endpoint(environment, "hand-made", managed=False)  # not the pipeline's: never touched
    return environment


# Names carry their environment (hfpipe.core.names): prod's run is prod-prod-run-*, the hand-made one dev-.
KEEP = {f"{x}-{k}" for x in ("prod-prod-run", "dev-hand-made") for k in ("ep", "config", "model")}


def test_cleanup_yes_deletes_only_this_environments_tagged_resources(
    leftovers: Environment, capsys: Any
) -> None:
    s3_before = leftovers.s3.list_buckets()["Buckets"]
    code, out, err = run(capsys, "cleanup", "--env", "dev", "--yes")
    assert (code, err) == (0, "")
    assert "deleted endpoint dev-mine-ep" in out
    assert "deleted endpoint config dev-mine-config" in out
    assert "deleted model dev-mine-model" in out
    assert out.splitlines()[-1] == "deleted 3 resources (S3 data and artifacts are never touched)"
    assert names(leftovers) == KEEP
    assert leftovers.s3.list_buckets()["Buckets"] == s3_before
    assert run(capsys, "cleanup", "--env", "dev", "--yes") == (
        0,
        "nothing to clean up in environment 'dev'\n",
        "",
    )


def test_cleanup_asks_first(leftovers: Environment, capsys: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stdin", Tty("n\n"))
    code, out, _ = run(capsys, "cleanup", "--env", "dev")
    assert code == 1
    assert "Delete these 3 resources? [y/N]" in out
    assert out.splitlines()[-1].endswith("nothing deleted")
    assert "dev-mine-ep" in names(leftovers)

    monkeypatch.setattr("sys.stdin", Tty("y\n"))
    code, out, _ = run(capsys, "cleanup", "--env", "dev")
    assert code == 0
    assert "dev-mine-ep" not in names(leftovers)


def test_cleanup_without_terminal_needs_yes(
    leftovers: Environment, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    code, _, err = run(capsys, "cleanup", "--env", "dev")
    assert code == 1
    assert err == "error: not deleting without confirmation: stdin is not a terminal; pass --yes to confirm\n"
    assert "dev-mine-ep" in names(leftovers)


def test_cleanup_dry_run(leftovers: Environment, capsys: Any) -> None:
    code, out, _ = run(capsys, "cleanup", "--env", "dev", "--dry-run")
    assert code == 0
    assert out.splitlines()[-1] == "dry run: 3 resources would be deleted"
    assert "dev-mine-model" in out and "prod-run" not in out and "hand-made" not in out
    assert "dev-mine-ep" in names(leftovers)


def test_cleanup_older_than(leftovers: Environment, capsys: Any) -> None:
    code, out, _ = run(capsys, "cleanup", "--env", "dev", "--older-than", "2h", "--yes")
    assert (code, out) == (0, "nothing to clean up in environment 'dev' older than 2h\n")
    backend = get_backend("sagemaker")[ACCOUNT]["eu-west-1"]
    backend.endpoints["dev-mine-ep"].creation_time = datetime.now(UTC).replace(tzinfo=None) - timedelta(
        hours=3
    )
    code, out, _ = run(capsys, "cleanup", "--env", "dev", "--older-than", "2h", "--yes")
    assert code == 0
    assert "deleted endpoint dev-mine-ep" in out
    assert "dev-mine-model" in names(leftovers)  # created just now


@pytest.mark.parametrize("age", ["7", "2y", "0d", "-1h", "h"])
def test_cleanup_bad_older_than(environment: Environment, capsys: Any, age: str) -> None:
    code, _, err = run(capsys, "cleanup", "--env", "dev", f"--older-than={age}")
    assert code == 2  # a usage error, before any AWS call
    assert err == (
        f"error: --older-than {age!r} is not a duration: use a positive number followed by m, h, d or w "
        "(e.g. 12h, 7d)\n"
    )


# --- data upload -----------------------------------------------------------------------------------


def keys(environment: Environment) -> list[str]:
    return sorted(
        o["Key"] for o in environment.s3.list_objects_v2(Bucket=environment.data_bucket).get("Contents", [])
    )


def test_upload_jsonl(environment: Environment, capsys: Any, tmp_path: Path) -> None:
    path = tmp_path / "samsum-train.jsonl"
    path.write_text(
        '{"dialogue": "A: hi", "summary": "greeting"}\n{"dialogue": "B: bye", "summary": "farewell"}\n'
    )
    code, out, err = run(capsys, "data", "upload", str(path), "--env", "dev", "--name", "samsum-small")
    assert (code, err) == (0, "")
    assert out.splitlines() == [
        f"uploaded 1 file to s3://{environment.data_bucket}/samsum-small/",
        f'use it in a recipe as a channel: {{"training": "s3://{environment.data_bucket}/samsum-small/"}}',
    ]
    assert keys(environment) == ["samsum-small/samsum-train.jsonl"]
    body = environment.s3.get_object(Bucket=environment.data_bucket, Key="samsum-small/samsum-train.jsonl")[
        "Body"
    ].read()
    assert body == path.read_bytes()


def test_upload_json_array_and_default_name(environment: Environment, capsys: Any, tmp_path: Path) -> None:
    path = tmp_path / "My Data.json"
    path.write_text(json.dumps([{"text": "a", "label": 0}, {"text": "b", "label": 1}]))
    code, _, _ = run(capsys, "data", "upload", str(path), "--env", "dev")
    assert code == 0
    [key] = keys(environment)
    prefix = key.split("/")[0]
    assert key == f"{prefix}/My Data.json"
    assert prefix.startswith("my-data-") and len(prefix) == len("my-data-20260101-000000")
    assert default_name(path, datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)) == "my-data-20260102-030405"


def test_upload_parquet(environment: Environment, capsys: Any, tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "train.parquet"
    pq.write_table(pa.table({"text": ["a", "b"], "label": [0, 1]}), path)
    code, _, _ = run(capsys, "data", "upload", str(path), "--env", "dev", "--name", "pq")
    assert code == 0
    assert keys(environment) == ["pq/train.parquet"]


@pytest.mark.slow
def test_upload_save_to_disk_folder(environment: Environment, capsys: Any, tmp_path: Path) -> None:
    import datasets

    folder = tmp_path / "mnli"
    datasets.DatasetDict(
        {
            "train": datasets.Dataset.from_dict({"premise": ["p"], "hypothesis": ["h"], "label": [0]}),
            "validation": datasets.Dataset.from_dict({"premise": ["q"], "hypothesis": ["i"], "label": [1]}),
        }
    ).save_to_disk(str(folder))
    code, out, _ = run(capsys, "data", "upload", str(folder), "--env", "dev", "--name", "mnli-tiny")
    assert code == 0
    expected = sorted(
        f"mnli-tiny/{p.relative_to(folder).as_posix()}" for p in folder.rglob("*") if p.is_file()
    )
    assert keys(environment) == expected
    assert "mnli-tiny/dataset_dict.json" in expected
    assert f"to s3://{environment.data_bucket}/mnli-tiny/" in out


def test_upload_never_overwrites(environment: Environment, capsys: Any, tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"
    path.write_text('{"text": "x"}\n')
    assert run(capsys, "data", "upload", str(path), "--env", "dev", "--name", "same")[0] == 0
    code, _, err = run(capsys, "data", "upload", str(path), "--env", "dev", "--name", "same")
    assert code == 1
    assert err == (
        f"error: s3://{environment.data_bucket}/same/ already holds data; choose another --name "
        "(data sets are never overwritten)\n"
    )


@pytest.mark.parametrize(
    ("filename", "content", "message"),
    [
        (
            "notes.txt",
            "hello",
            "unsupported data file '.txt'; accepted: .json, .jsonl, .parquet or a `save_to_disk` folder",
        ),
        (
            "bad.jsonl",
            '{"a": 1}\n{oops\n',
            "line 2 is not JSON (Expecting property name enclosed in double quotes); fix it and retry",
        ),
        ("list.jsonl", "[1, 2]\n", "line 1 is not a JSON object (one record per line expected)"),
        ("fake.parquet", "not parquet at all", "not a parquet file (no PAR1 magic bytes)"),
        ("empty.json", "", "the file is empty"),
    ],
)
def test_upload_bad_files(
    environment: Environment, capsys: Any, tmp_path: Path, filename: str, content: str, message: str
) -> None:
    path = tmp_path / filename
    path.write_text(content)
    code, out, err = run(capsys, "data", "upload", str(path), "--env", "dev")
    assert (code, out) == (1, "")
    assert err == f"error: {path}: {message}\n"
    assert keys(environment) == []


def test_upload_plain_folder_and_missing_path(environment: Environment, capsys: Any, tmp_path: Path) -> None:
    (tmp_path / "x.json").write_text("[]")
    code, _, err = run(capsys, "data", "upload", str(tmp_path), "--env", "dev")
    assert code == 1
    assert err == (
        f"error: {tmp_path}: a folder must be written by `datasets` save_to_disk (state.json + dataset_info.json, "
        "or dataset_dict.json); upload single .json/.jsonl/.parquet files by path\n"
    )
    code, _, err = run(capsys, "data", "upload", str(tmp_path / "nope.json"), "--env", "dev")
    assert (code, err) == (1, f"error: {tmp_path / 'nope.json'}: no such file or folder\n")


def test_upload_bad_name(environment: Environment, capsys: Any, tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"
    path.write_text('{"text": "x"}\n')
    code, _, err = run(capsys, "data", "upload", str(path), "--env", "dev", "--name", "../Up")
    assert code == 1
    assert err == (
        "error: --name '../Up' is not a valid data set name: use lower-case letters, digits, '.', '_' or '-' "
        "(at most 100, starting with a letter or digit)\n"
    )


def test_upload_unknown_environment(environment: Environment, capsys: Any, tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"
    path.write_text('{"text": "x"}\n')
    code, _, err = run(capsys, "data", "upload", str(path), "--env", "nope")
    assert code == 1
    assert err.startswith("error: unknown environment 'nope': ")


@pytest.mark.parametrize(
    "argv",
    [
        ("endpoints", "--env", "dve"),
        ("endpoints", "delete", "dve-x-ep", "--env", "dve", "--yes"),
        ("cleanup", "--env", "neverdeployed", "--dry-run"),
        ("cleanup", "--env", "neverdeployed", "--yes"),
    ],
)
def test_a_mistyped_environment_is_unknown_not_empty(
    environment: Environment, capsys: Any, argv: tuple[str, ...]
) -> None:
    code, out, err = run(capsys, *argv)
    assert code == 1
    assert err.startswith(f"error: unknown environment '{argv[argv.index('--env') + 1]}': "), err
    assert "nothing to clean up" not in out and "no endpoints up" not in out


def test_cleanup_finds_what_a_failed_deploy_clean_up_left(environment: Environment, capsys: Any) -> None:
    """A named endpoint's config and model whose deploy execution ended unsuccessfully (here ABORTED, so its
    DeployCleanup never ran) and that nothing uses are cleaned up; the live config and its model stay."""
    from hfpipe import contract

    machine = environment.sfn.create_state_machine(
        name=contract.deploy_state_machine_name("dev"),
        definition=json.dumps(
            {"StartAt": "W", "States": {"W": {"Type": "Wait", "Seconds": 3600, "End": True}}}
        ),
        roleArn=ROLE,
    )["stateMachineArn"]
    environment.ssm.put_parameter(
        Name=contract.ssm_parameter_name("dev", contract.SSM_DEPLOY_STATE_MACHINE_ARN),
        Value=machine,
        Type="String",
    )
    # Both ABORTED: the live config stays because the endpoint uses it, whatever its execution's end.
    for execution in ("deploy-live", "deploy-aborted"):
        arn = environment.sfn.start_execution(stateMachineArn=machine, name=execution)["executionArn"]
        environment.sfn.stop_execution(executionArn=arn)
    endpoint = contract.deployed_endpoint_name("dev", "summaries")
    for execution in ("live", "aborted"):
        tags = [
            {"Key": contract.TAG_ENV, "Value": "dev"},
            {"Key": contract.TAG_MANAGED_BY, "Value": contract.PROJECT},
            {"Key": contract.TAG_DEPLOYMENT, "Value": "summaries"},
            {"Key": contract.TAG_DEPLOY_EXECUTION, "Value": f"deploy-{execution}"},
        ]
        name = f"{endpoint}-{execution}"
        serving_resources(
            environment.sagemaker,
            model=name,
            config=name,
            role=ROLE,
            tags=tags,
            PrimaryContainer={"Image": "example.invalid/i"},
        )
    environment.sagemaker.create_endpoint(EndpointName=endpoint, EndpointConfigName=f"{endpoint}-live")
    code, out, err = run(capsys, "cleanup", "--env", "dev", "--yes")
    assert (code, err) == (0, ""), out
    assert f"deleted endpoint config {endpoint}-aborted" in out and f"deleted model {endpoint}-aborted" in out
    assert names(environment) == {endpoint, f"{endpoint}-live"}
