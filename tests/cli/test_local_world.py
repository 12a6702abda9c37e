"""The local world: `hfpipe local up --env ENV` serves an environment of cdk.json in its own process, and every
command reaches it with HFPIPE_LOCAL=1, as it reaches AWS without (hfpipe.local.world, hfpipe.cli.local_world).

The fast tests check the world file and the routing alone. The slow ones start dev and prod as subprocesses
(free ports, a temporary world folder) and run the model lifecycle through the command in subprocesses, as a
user does by hand; `world` yields one `run(*argv)` per environment (it adds `--env ENV`), so a later test can
walk further (deploy, promote, invoke in prod) with the same two processes.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import pytest

from hfpipe.cli import aws
from hfpipe.cli.aws import HfpipeError
from hfpipe.local import world_file

ROOT = Path(__file__).resolve().parents[2]
#: The environments the walk-through uses, as in cdk.json.
ENVIRONMENTS = ("dev", "prod")
#: Start-up here: synthesis (cached after the first), moto, the fixture models; two at once on two cores.
UP_TIMEOUT_S = 240


# --- the world file and the routing, without a world ------------------------------------------------------


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(world_file.HOME_ENV, str(tmp_path))
    monkeypatch.delenv(world_file.ROUTE_ENV, raising=False)
    return tmp_path


@pytest.fixture
def listening() -> Iterator[str]:
    """A port that accepts connections, standing in for a world environment's server."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        yield f"http://127.0.0.1:{server.getsockname()[1]}"


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def entry(env: str, url: str, pid: int | None = None, region: str = "eu-west-1") -> world_file.Entry:
    return world_file.Entry(
        env, url, region, os.getpid() if pid is None else pid, "2026-01-01T00:00:00+00:00"
    )


def test_a_live_record_is_found_and_a_stale_one_ignored(home: Path, listening: str) -> None:
    world_file.write(entry("dev", listening))
    world_file.write(entry("prod", listening, pid=dead_pid()))
    world_file.write(entry("qa", "http://127.0.0.1:9"))  # a live pid, a port nobody listens on
    assert world_file.live("dev") == entry("dev", listening)
    assert world_file.live("prod") is None and world_file.read("prod") is not None  # stale: kept, ignored
    assert world_file.live("qa") is None
    assert [e.env for e in world_file.live_entries()] == ["dev"]
    world_file.remove("dev", pid=os.getpid() + 1)  # another process's record stays
    assert world_file.read("dev") is not None
    world_file.remove("dev", pid=os.getpid())
    assert world_file.read("dev") is None and sorted(p.name for p in home.iterdir()) == [
        "prod.json",
        "qa.json",
    ]


def test_without_hfpipe_local_nothing_is_routed(home: Path, listening: str, monkeypatch: Any) -> None:
    world_file.write(entry("dev", listening))
    calls: list[tuple[Any, Any]] = []
    monkeypatch.setattr(aws, "clients_factory", lambda profile, region: calls.append((profile, region)))
    for value in (None, "", "0"):
        if value is None:
            monkeypatch.delenv(world_file.ROUTE_ENV, raising=False)
        else:
            monkeypatch.setenv(world_file.ROUTE_ENV, value)
        aws.clients_for(argparse.Namespace(env="dev", profile="p", region=None))
    assert calls == [("p", None)] * 3


def test_hfpipe_local_routes_by_env_or_execution_arn(home: Path, listening: str, monkeypatch: Any) -> None:
    monkeypatch.setenv(world_file.ROUTE_ENV, "1")
    world_file.write(entry("dev", listening))
    clients = aws.clients_for(argparse.Namespace(env="dev", profile=None, region=None))
    assert clients.region == "eu-west-1"
    assert clients.sagemaker.meta.endpoint_url == listening
    assert clients.session.get_credentials().access_key == "testing"
    arn = "arn:aws:states:eu-west-1:123456789012:execution:hfpipe-dev-pipeline:run-1"
    by_arn = aws.clients_for(argparse.Namespace(env=None, execution=arn, profile=None, region=None))
    assert by_arn.sfn.meta.endpoint_url == listening
    assert aws.clients_for(argparse.Namespace(env="prod"), env="dev").s3.meta.endpoint_url == listening


@pytest.mark.parametrize(
    ("setting", "args", "message"),
    [
        ("1", {"env": "prod"}, "no local environment 'prod' is up: start it with hfpipe local up --env prod"),
        ("1", {"env": None}, "with HFPIPE_LOCAL=1, name the local environment with --env ENV"),
        (
            "1",
            {"env": "dev", "region": "us-west-2"},
            "--region us-west-2: local environment 'dev' runs in eu-west-1",
        ),
        ("yes", {"env": "dev"}, "HFPIPE_LOCAL='yes' is not accepted; accepted: 1"),
    ],
)
def test_routing_errors_are_one_line(
    home: Path, listening: str, monkeypatch: Any, setting: str, args: dict[str, Any], message: str
) -> None:
    world_file.write(entry("dev", listening))
    world_file.write(entry("prod", listening, pid=dead_pid(), region="us-east-1"))
    monkeypatch.setenv(world_file.ROUTE_ENV, setting)
    with pytest.raises(HfpipeError) as raised:
        aws.clients_for(argparse.Namespace(**{"profile": None, "region": None, **args}))
    assert message in str(raised.value) and "\n" not in str(raised.value)


def test_a_handler_reaches_another_region_through_its_override(monkeypatch: Any) -> None:
    from hfpipe.local.checkout import load_lambda_package

    load_lambda_package(None)
    lambda_aws = importlib.import_module("pipeline_lambdas.aws")
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    monkeypatch.setattr(lambda_aws, "OVERRIDES", {"s3": "own s3"})
    monkeypatch.setattr(
        lambda_aws, "REGION_OVERRIDES", {"eu-west-1": lambda service, config: f"dev's {service}"}
    )
    assert lambda_aws.client("s3") == lambda_aws.client("s3", region="us-east-1") == "own s3"
    assert lambda_aws.client("s3", region="eu-west-1") == "dev's s3"
    assert lambda_aws.client("sagemaker", region="eu-west-2").meta.region_name == "eu-west-2"  # no override


# --- a world of two environments, by hand ----------------------------------------------------------------


def _environ(home: Path, route: bool = True) -> dict[str, str]:
    environ = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "PYTHONUNBUFFERED": "1",
        "COLUMNS": "200",
        world_file.HOME_ENV: str(home),
    }
    environ.pop(world_file.ROUTE_ENV, None)
    if route:
        environ[world_file.ROUTE_ENV] = "1"
    return environ


def hfpipe(
    home: Path, *argv: str, route: bool = True, **environ: str | None
) -> subprocess.CompletedProcess[str]:
    """One `hfpipe` command in a subprocess, as typed in a terminal (with HFPIPE_LOCAL=1 unless told;
    `environ` sets variables, None unsets one)."""
    merged = {**_environ(home, route), **environ}
    return subprocess.run(
        [sys.executable, "-m", "hfpipe.cli", *argv],
        cwd=ROOT,
        env={key: value for key, value in merged.items() if value is not None},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


class World:
    """The environments up, each a `run(*argv)` that adds `--env ENV`; `hfpipe(*argv)` runs any command."""

    def __init__(self, home: Path, logs: dict[str, Path]) -> None:
        self.home = home
        self.logs = logs
        self.started_s: dict[str, float] = {}

    def __getitem__(self, env: str) -> Callable[..., subprocess.CompletedProcess[str]]:
        return lambda *argv, **kw: hfpipe(self.home, *argv, "--env", env, **kw)

    def hfpipe(self, *argv: str, **kw: Any) -> subprocess.CompletedProcess[str]:
        return hfpipe(self.home, *argv, **kw)

    def log(self, env: str) -> str:
        return self.logs[env].read_text()

    def live(self, env: str) -> world_file.Entry | None:
        with mock.patch.dict(os.environ, {world_file.HOME_ENV: str(self.home)}):
            return world_file.live(env)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    home = tmp_path_factory.mktemp("world")
    logs = {env: home / f"{env}.log" for env in ENVIRONMENTS}
    started = time.monotonic()
    procs = {
        env: subprocess.Popen(
            [sys.executable, "-m", "hfpipe.cli", "local", "up", "--env", env],
            cwd=ROOT,
            env=_environ(home, route=False),
            stdout=logs[env].open("w"),
            stderr=subprocess.STDOUT,
            start_new_session=True,  # a Ctrl-C in the test's terminal is the test's, not theirs
        )
        for env in ENVIRONMENTS
    }
    world = World(home, logs)
    try:
        pending = set(ENVIRONMENTS)
        while pending:
            for env in sorted(pending):
                assert procs[env].poll() is None, (
                    f"hfpipe local up --env {env} ended:\n{logs[env].read_text()}"
                )
                if world.live(env) is not None:
                    pending.discard(env)
                    world.started_s[env] = time.monotonic() - started
            assert time.monotonic() - started < UP_TIMEOUT_S, {e: logs[e].read_text() for e in pending}
            time.sleep(0.5)
        yield world
    finally:
        for proc in procs.values():  # as `hfpipe local down` does
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for env, proc in procs.items():
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                pytest.fail(f"hfpipe local up --env {env} did not stop on SIGTERM:\n{logs[env].read_text()}")


def out(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


@pytest.mark.slow
def test_train_approve_in_dev_and_promote_to_prod_by_hand(world: World) -> None:
    dev, prod = world["dev"], world["prod"]
    for env in ENVIRONMENTS:
        assert f"local environment {env} (" in world.log(env) and "time scale 0.01" in world.log(env)
    assert "fixture data of tiny-lora, tiny-mnli, tiny-qa, tiny-spot" in world.log("dev")
    assert "no local environment is up" not in out(world.hfpipe("local", "status"))

    started = time.monotonic()
    run = dev("start", "--recipe", "tiny-lora", "--name", "lora-1", "--watch", "--interval", "1")
    seconds = time.monotonic() - started
    assert run.returncode == 0, run.stdout + run.stderr + world.log("dev")
    assert "SUCCEEDED" in run.stdout and re.search(r"model version\s+.*hfpipe-dev-tiny-lora/1", run.stdout)
    assert "training job dev-lora-1 (recipe tiny-lora): training on this machine" in world.log("dev")
    print(f"start-up: {world.started_s}; tiny-lora run: {seconds:.1f} s")  # shown with -s

    listed = out(dev("models", "--json"))
    [version] = json.loads(listed)
    assert (version["ref"], version["status"]) == ("tiny-lora/1", "PendingManualApproval"), version
    assert "PendingManualApproval -> Approved" in out(dev("models", "approve", "tiny-lora/1"))
    assert json.loads(out(dev("models", "--json")))[0]["status"] == "Approved"
    assert "no endpoints up in environment 'dev'" in out(dev("endpoints"))
    # prod is another account: it has none of dev's versions until one is promoted. Its Promote Lambda reads
    # dev's registry and copies dev's model.tar.gz from dev's process (aws.REGION_OVERRIDES, moto_patches).
    assert json.loads(out(prod("models", "--json"))) == []
    assert "tiny-lora/1 (dev) -> tiny-lora/1 (prod)" in out(
        prod("promote", "tiny-lora/1", "--watch", "--interval", "1")
    )
    [promoted] = json.loads(out(prod("models", "--json")))
    assert (promoted["ref"], promoted["promoted_from_env"]) == ("tiny-lora/1", "dev")
    assert promoted["promoted_from"] == version["arn"]


@pytest.mark.slow
def test_an_endpoint_answers_over_http_and_errors_are_sagemakers(world: World) -> None:
    dev = world["dev"]
    run = dev(
        "start", "--recipe", "tiny-qa", "--name", "qa-1", "--keep-endpoint", "--watch", "--interval", "1"
    )
    assert run.returncode == 0, run.stdout + run.stderr + world.log("dev")
    request = {"inputs": {"question": "Who baked?", "context": "Amanda baked cookies."}}
    answer = json.loads(out(dev("invoke", "dev-qa-1-ep", "--data", json.dumps(request), "--json")))
    assert set(answer["response"]) == {"answer", "score", "start", "end"}

    import boto3
    import botocore.exceptions

    found = world.live("dev")
    assert found is not None
    runtime = boto3.client(
        "sagemaker-runtime", region_name=found.region, endpoint_url=found.url, **world_file.CREDENTIALS
    )
    for name, body, code in (("nope", b"{}", "ValidationError"), ("dev-qa-1-ep", b"not json", "ModelError")):
        with pytest.raises(botocore.exceptions.ClientError) as raised:
            runtime.invoke_endpoint(EndpointName=name, Body=body, ContentType="application/json")
        assert raised.value.response["Error"]["Code"] == code


@pytest.mark.slow
def test_a_missing_or_dead_environment_is_one_line(world: World) -> None:
    (world.home / "qa.json").write_text(
        json.dumps(
            {
                "env": "qa",
                "url": "http://127.0.0.1:9",
                "region": "eu-west-1",
                "pid": dead_pid(),
                "started": "",
            }
        )
    )
    for env in ("qa", "stage"):  # a dead process's record, and none at all
        proc = world[env]("models")
        assert (proc.returncode, proc.stdout) == (1, "")
        assert (
            proc.stderr
            == f"error: no local environment {env!r} is up: start it with hfpipe local up --env {env}\n"
        )
    again = world.hfpipe("local", "up", "--env", "dev")
    assert again.returncode == 1 and "local environment 'dev' is already up" in again.stderr


@pytest.mark.slow
def test_without_hfpipe_local_a_command_goes_to_aws(world: World) -> None:
    proc = world["dev"](
        "models",
        route=False,
        AWS_ACCESS_KEY_ID=None,
        AWS_SECRET_ACCESS_KEY=None,
        AWS_SESSION_TOKEN=None,
        AWS_PROFILE=None,
        AWS_CONFIG_FILE=str(world.home / "no-config"),
        AWS_SHARED_CREDENTIALS_FILE=str(world.home / "no-credentials"),
        AWS_EC2_METADATA_DISABLED="true",
        AWS_REGION="eu-west-1",
    )
    assert proc.returncode == 1 and proc.stderr.startswith("error: no AWS credentials found"), proc.stderr


@pytest.mark.slow
def test_a_recipe_local_mode_would_change_fails_its_job_with_the_reason(world: World) -> None:
    hub = "training.hyperparameters.model_name_or_path=bert-base-uncased"
    run = world["dev"](
        "start", "--recipe", "tiny-qa", "--set", hub, "--name", "hub-1", "--watch", "--interval", "1"
    )
    assert run.returncode == 1, run.stdout + run.stderr
    report = json.loads(out(world["dev"]("report", "hub-1", "--json")))
    assert report["training_job_status"] == "Failed"
    assert (
        "training job dev-hub-1: refused: recipe 'tiny-qa' cannot train in the local world as written "
        in world.log("dev")
    )
    assert "model_name_or_path: bert-base-uncased -> tiny random-weight BERT" in world.log("dev")
