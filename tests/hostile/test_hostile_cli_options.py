"""Hostile command-line options, one case a line: each gets a one-line error naming the option, the value and
what is accepted, and none has a side effect: no execution started, nothing deleted, nothing uploaded
(the moto account is checked after each)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from cli_moto import ACCOUNT, Environment, tags_for

Run = Callable[..., tuple[int, str, str]]
START = ("start", "--env", "dev", "--recipe", "tiny-qa")
WATCH = ("start", "--env", "dev", "--recipe", "tiny-qa", "--watch")

# (argv, exit status, fragments of stderr); FILE in an argument is replaced by a path to a plain file.
# fmt: off
CASES: list[tuple[tuple[str, ...], int, list[str]]] = [
    # start: everything checked before the execution starts (a retry must not start a second run)
    ((*WATCH, "--interval", "0"), 2, ["--interval: 0.0 is not accepted", "a finite number > 0"]),
    ((*WATCH, "--interval", "-5"), 2, ["--interval: -5.0", "> 0"]),
    ((*WATCH, "--interval", "nan"), 2, ["--interval: nan", "a finite number"]),
    ((*WATCH, "--interval", "inf"), 2, ["--interval: inf", "a finite number"]),
    ((*WATCH, "--interval", "1e9"), 2, ["--interval: 1000000000.0", "<= 3600"]),
    ((*WATCH, "--interval", "soon"), 2, ["--interval", "invalid float value: 'soon'"]),
    ((*START, "--name", ""), 1, ["--name ''", "1 to 80 letters"]),
    ((*START, "--name", "a b"), 1, ["--name 'a b'", "1 to 80 letters"]),
    ((*START, "--name", "x" * 81), 1, ["--name", "1 to 80"]),
    ((*START, "--name", "../x"), 1, ["--name '../x'", "letters, digits"]),
    (("start", "--env", "", "--recipe", "tiny-qa"), 2, ["argument --env: ''", "then lower-case letters or digits"]),
    (("start", "--env", "../prod", "--recipe", "tiny-qa"), 2, ["argument --env: '../prod'", "then lower-case letters or digits"]),
    (("start", "--env", "dev", "--recipe", "/etc/passwd"), 1, ["unknown recipe '/etc/passwd'", "known recipes"]),
    (("start", "--env", "dev", "--recipe", "missing.json"), 1, ["recipe file 'missing.json' not found"]),
    ((*START, "--set", "serving.max_latency_ms=NaN"), 1, ["serving.max_latency_ms", "'NaN'", "finite JSON number"]),
    ((*START, "--set", "evaluation_gate.threshold=Infinity"), 1, ["evaluation_gate.threshold", "'Infinity'"]),
    ((*START, "--set", 'training.channels={"../x": "a/"}'), 1, ["recipe.training.channels", "'../x'", "1 to 64"]),
    ((*START, "--set", "training.entry_point=../../x.py"), 1, ["recipe.training.entry_point", "'../../x.py'", "no '..'"]),
    ((*START, "--set", "training.entry_point=/abs/x.py"), 1, ["recipe.training.entry_point", "'/abs/x.py'"]),
    ((*START, "--set", "training.hyperparameters.=1"), 1, ["--set 'training.hyperparameters.=1' is invalid", "no empty part"]),
    ((*START, "--set", 'training.hyperparameters={"": 1}'), 1, ["recipe.training.hyperparameters", "''", "non-empty"]),
    ((*START, "--set", 'training.environment={"X": null}'), 1, ["recipe.training.environment.X", "None"]),
    ((*START, "--set", 'training.metric_definitions=[{"Name": "f", "Regex": "("}]'), 1, ["metric_definitions[0].Regex", "does not compile"]),
    ((*START, "--set", "training.channels.training=5"), 1, ["recipe.training.channels.training", "5"]),
    ((*START, "--set", "training.distribution=true"), 1, ["recipe.training.distribution", "True", "type object"]),
    ((*START, "--set", 'training.distribution={"mpi": true}'), 1, ["recipe.training.distribution.mpi", "True"]),
    ((*START, "--set", "serving.instance_count=1.5"), 1, ["recipe.serving.instance_count", "1.5", "SageMaker types this field as an integer"]),
    ((*START, "--set", "noequals"), 2, ["--set 'noequals' is not KEY=VALUE"]),
    # watch / report / list
    (("watch", "x", "--env", "dev", "--interval", "0"), 2, ["--interval: 0.0", "> 0"]),
    (("watch", "x", "--env", "dev", "--interval", "nan"), 2, ["--interval: nan"]),
    (("report", "x", "--env", "dev", "--plot", "loss.jpg"), 1, ["--plot 'loss.jpg' must name a .png file"]),
    (("report", "x", "--env", "dev", "--plot", "/no/such/folder/loss.png"), 1, ["--plot '/no/such/folder/loss.png'", "does not exist"]),
    (("list", "--env", "dev", "--max", "0"), 2, ["--max 0 must be at least 1"]),
    (("list", "--env", "dev", "--max", "x"), 2, ["--max", "invalid int value: 'x'"]),
    (("list", "--env", "dev", "--status", "DONE"), 2, ["--status", "invalid choice: 'DONE'"]),
    # cleanup: an empty or odd age never means "everything"
    (("cleanup", "--env", "dev", "--older-than", "", "--yes"), 2, ["--older-than ''", "a positive number followed by m, h, d or w"]),
    (("cleanup", "--env", "dev", "--older-than", " ", "--yes"), 2, ["--older-than ' '", "is not a duration"]),
    (("cleanup", "--env", "dev", "--older-than", "0d", "--yes"), 2, ["--older-than '0d'", "positive number"]),
    (("cleanup", "--env", "dev", "--older-than=-1d", "--yes"), 2, ["--older-than '-1d'", "positive number"]),
    (("cleanup", "--env", "dev", "--older-than", "7", "--yes"), 2, ["--older-than '7'", "m, h, d or w"]),
    (("cleanup", "--env", "dev", "--older-than", "7y", "--yes"), 2, ["--older-than '7y'", "m, h, d or w"]),
    (("cleanup", "--env", "dev", "--older-than", "1.5d", "--yes"), 2, ["--older-than '1.5d'"]),
    (("cleanup", "--env", "dev", "--older-than", "99999999999999w", "--yes"), 2, ["--older-than '99999999999999w'", "at most 5200w"]),
    (("cleanup", "--env", "dev", "--older-than", "6000w", "--yes"), 2, ["--older-than '6000w' is too long"]),
    (("cleanup", "--env", "", "--yes"), 2, ["argument --env: ''", "then lower-case letters or digits"]),
    (("cleanup", "--env", "prod;rm", "--yes"), 2, ["argument --env: 'prod;rm'"]),
    # stop
    (("stop", "x", "--env", "bad env", "--yes"), 2, ["argument --env: 'bad env'", "then lower-case letters or digits"]),
    (("stop", f"arn:aws:states:eu-west-1:{ACCOUNT}:stateMachine:hfpipe-dev", "--yes"), 1, ["is not an execution ARN"]),
    # data upload
    (("data", "upload", "no-such.jsonl", "--env", "dev"), 1, ["no-such.jsonl: no such file or folder"]),
    (("data", "upload", "FILE", "--env", "dev", "--name", ""), 1, ["--name ''", "is not a valid data set name"]),
    (("data", "upload", "FILE", "--env", "dev", "--name", "../other"), 1, ["--name '../other'", "lower-case letters"]),
    (("data", "upload", "FILE", "--env", "dev", "--name", "a/b"), 1, ["--name 'a/b'"]),
    (("data", "upload", "FILE", "--env", "dev", "--name", "UPPER"), 1, ["--name 'UPPER'"]),
    (("data", "upload", "FILE", "--env", "dev", "--recipe", "tiny-qa"), 1, ["record 1 does not fit recipe 'tiny-qa'", "column 'question'", "a non-empty string"]),
    (("data", "upload", "FILE", "--env", "dev", "--recipe", "tiny-mnli"), 1, ["record 1 does not fit recipe 'tiny-mnli'", "column 'premise'"]),
    (("data", "upload", "FILE", "--env", "dev", "--recipe", "../x"), 1, ["unknown recipe '../x'"]),
    # local
    (("local", "--recipe", "tiny-qa", "--out", "FILE"), 2, ["--out", "is a file; accepted: a folder path"]),
    (("local", "--recipe", "tiny-qa", "--out", ""), 2, ["--out: '' is not accepted; accepted: a folder path"]),
    (("local", "--recipe", "tiny-qa", "--set", 'training.channels={"..": "x/"}'), 1, ["recipe.training.channels", "'..'"]),
    (("local", "--recipe", "tiny-qa", "--set", "serving.max_latency_ms=NaN"), 1, ["serving.max_latency_ms", "'NaN'"]),
]
# fmt: on


@pytest.fixture
def kept(environment: Environment) -> Environment:
    """A model and a data object another run left: no refused command may touch them."""
    environment.sagemaker.create_model(
        ModelName="kept-model",
        ExecutionRoleArn=f"arn:aws:iam::{ACCOUNT}:role/r",
        PrimaryContainer={"Image": "example.invalid/i"},
        Tags=tags_for({"env": "dev", "execution_name": "old", "recipe_name": "tiny-qa"}),
    )
    environment.s3.put_object(Bucket=environment.data_bucket, Key="kept/train.jsonl", Body=b'{"text": "x"}\n')
    return environment


@pytest.mark.parametrize(("argv", "status", "fragments"), CASES, ids=[f"c{i}" for i in range(len(CASES))])
def test_option_refused_without_side_effects(
    kept: Environment, cli: Any, tmp_path: Path, argv: tuple[str, ...], status: int, fragments: list[str]
) -> None:
    plain = tmp_path / "samsum.jsonl"
    plain.write_text(json.dumps({"dialogue": "A: hi", "summary": "hello"}) + "\n")
    argv = tuple(str(plain) if a == "FILE" else a for a in argv)
    code, out, err = cli(*argv)
    assert code == status, (code, out, err)
    if status == 1 or not err.startswith("usage:"):  # argparse's own usage errors print the usage first
        assert err.startswith("error: ") and err.count("\n") == 1, err
    for fragment in fragments:
        assert fragment in err, (fragment, err)
    assert "Traceback" not in err + out
    # nothing started, deleted or uploaded
    assert kept.sfn.list_executions(stateMachineArn=kept.state_machine_arn)["executions"] == []
    assert [m["ModelName"] for m in kept.sagemaker.list_models()["Models"]] == ["kept-model"]
    keys = [o["Key"] for o in kept.s3.list_objects_v2(Bucket=kept.data_bucket).get("Contents", [])]
    assert keys == ["kept/train.jsonl"]
    assert plain.read_text().startswith('{"dialogue"')  # an --out pointing at it did not overwrite it


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["logs", "x", "--env", "dev", "--since", "99999999999d"], "--since '99999999999d' is too long"),
        (["recipes", "show", "LATIN1"], "is not UTF-8 text (byte 13); accepted: a JSON file saved as UTF-8"),
        (["recipes", "show", "DEEP"], "nested deeper than can be read"),
    ],
)
def test_inputs_that_crashed_are_one_line_naming_the_field(
    argv: list[str], message: str, tmp_path: Any, capsys: Any, monkeypatch: Any
) -> None:
    from hfpipe.cli import main

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    latin, deep = tmp_path / "latin.json", tmp_path / "deep.json"
    latin.write_bytes('{"name": "caf\u00e9"}'.encode("latin-1"))
    deep.write_text("[" * 100_000 + "]" * 100_000)
    argv = [{"LATIN1": str(latin), "DEEP": str(deep)}.get(a, a) for a in argv]
    assert main(argv) == (2 if argv[0] == "logs" else 1)  # a malformed option's value is a usage error
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and err.count("\n") == 1
