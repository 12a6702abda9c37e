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
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from accounts import ACCOUNT
from doc_blocks import block_commands
from documents import assert_same_plan
from world_helpers import ENVIRONMENTS, World, out, world_lines

from hfpipe import contract
from hfpipe.cli import aws
from hfpipe.cli.aws import HfpipeError
from hfpipe.local import world_file

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
    arn = f"arn:aws:states:eu-west-1:{ACCOUNT}:execution:hfpipe-dev-pipeline:run-1"
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


def world_block_commands() -> list[tuple[list[str], str]]:
    """docs/local.md's local-world block between its `local up` lines (the `world` fixture runs them) and its
    `local down` lines (the fixture's teardown runs them)."""
    return [
        (argv, c)
        for argv, c in block_commands("local-world")
        if argv[:2] not in (["local", "up"], ["local", "down"])
    ]


def test_the_world_block_trains_approves_and_promotes() -> None:
    argvs = [argv for argv, _ in world_block_commands()]
    assert [a[0] for a in argvs] == [
        "local",
        "start",
        "models",
        "models",
        "promote",
        "models",
        "endpoints",
    ], argvs
    assert sorted(world_lines("up")) == sorted(world_lines("down")) == sorted(ENVIRONMENTS)


@pytest.mark.slow
def test_the_local_world_block_by_hand(world: World) -> None:
    """docs/local.md's local-world block, every command as typed, in order: train in dev, approve, promote to
    prod (another account, its own process), what each environment holds and serves."""
    for env in ENVIRONMENTS:
        assert f"local environment {env} (" in world.log(env) and "time scale 0.01" in world.log(env)
    assert "fixture data of tiny-adapter, tiny-lora, tiny-mnli, tiny-qa, tiny-spot" in world.log("dev")
    # The world is the module's: its other tests train other recipes there, in any order; tiny-lora only here.
    lora = ("--json", "--recipe", "tiny-lora")
    assert json.loads(out(world["prod"]("models", *lora))) == []
    execution = None
    for argv, _comment in world_block_commands():
        started = time.monotonic()
        proc = world.hfpipe(*argv)
        assert proc.returncode == 0, (argv, proc.stdout, proc.stderr, world.log("dev")[-3000:])
        if argv[:2] == ["local", "status"]:
            assert all(f"{env}: http" in proc.stdout for env in ENVIRONMENTS), proc.stdout
        elif argv[0] == "start":
            print(
                f"start-up: {world.started_s}; tiny-lora run: {time.monotonic() - started:.1f} s"
            )  # with -s
            assert "SUCCEEDED" in proc.stdout and re.search(
                r"model version\s+.*hfpipe-dev-tiny-lora/1", proc.stdout
            )
            match = re.search(r"\b(tiny-lora-\d{8}-\d{6})\b", proc.stdout)
            assert match, proc.stdout
            execution = match.group(1)
            assert f"training job dev-{execution} (recipe tiny-lora): training on this machine" in world.log(
                "dev"
            )
        elif argv[:2] == ["models", "approve"]:
            assert "PendingManualApproval -> Approved" in proc.stdout
        elif argv[0] == "promote":
            # prod's Promote Lambda reads dev's registry and copies dev's model.tar.gz from dev's process
            # (aws.REGION_OVERRIDES, moto_patches).
            assert "tiny-lora/1 (dev) -> tiny-lora/1 (prod)" in proc.stdout
        elif argv[0] == "endpoints":
            assert execution and f"dev-{execution}" not in proc.stdout  # the run deleted its endpoint
    [version] = json.loads(out(world["dev"]("models", *lora)))
    assert (version["ref"], version["status"]) == ("tiny-lora/1", "Approved"), version
    [promoted] = json.loads(out(world["prod"]("models", *lora)))
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
        # Neither is an environment of cdk.json: `local up` would refuse it, so that is not the advice.
        assert proc.stderr == (
            f"error: no local environment {env!r} is up: --env {env!r}: not an environment of cdk.json; "
            "accepted: dev, prod\n"
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


def in_process(world: World, monkeypatch: pytest.MonkeyPatch, capsys: Any, *argv: str) -> str:
    """One `hfpipe` command called in this process, routed to the world as a typed one is (HFPIPE_LOCAL=1);
    its output, after checking it succeeded and wrote nothing to stderr."""
    from hfpipe.cli import main

    monkeypatch.setenv(world_file.HOME_ENV, str(world.home))
    monkeypatch.setenv(world_file.ROUTE_ENV, "1")
    capsys.readouterr()
    code = main(list(argv))
    output, err = capsys.readouterr()
    assert (code, err) == (0, ""), (argv, output, err)
    return output


@pytest.mark.slow
def test_the_dry_run_plans_every_recipe_in_the_local_world_as_start_does(
    world: World, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    import boto3

    from hfpipe.core.recipe.recipes import available_recipes

    dev = world["dev"]
    planned = {}
    for recipe in available_recipes():  # the world's Service Quotas answer as its Plan Lambda's do
        argv = ("start", "--recipe", recipe, "--name", f"dry-{recipe}", "--dry-run", "--json")
        if recipe == "distilbert-spot":  # the one sent below: planned by the command's own process, as typed
            planned[recipe] = json.loads(out(dev(*argv)))
        else:  # the others in this process: the same command and routing, without an interpreter each
            planned[recipe] = json.loads(in_process(world, monkeypatch, capsys, *argv, "--env", "dev"))
        assert planned[recipe]["training_job_request"]["TrainingJobName"] == f"dev-dry-{recipe}"
    # One of them sent (its job refused at once here: a hub model): its Plan state stored the same plan.
    sent = dev(
        "start", "--recipe", "distilbert-spot", "--name", "dry-distilbert-spot", "--watch", "--interval", "1"
    )
    assert sent.returncode == 1, sent.stdout + sent.stderr
    found = world.live("dev")
    assert found is not None
    sfn = boto3.client(
        "stepfunctions", region_name=found.region, endpoint_url=found.url, **world_file.CREDENTIALS
    )
    [machine] = [
        m
        for m in sfn.list_state_machines()["stateMachines"]
        if m["name"] == contract.state_machine_name("dev")
    ]
    arn = aws.execution_arn_for(machine["stateMachineArn"], "dry-distilbert-spot")
    stored = aws.stored_plan(list(aws.execution_history(sfn, arn)))
    assert stored is not None
    assert_same_plan(stored.to_json(), planned["distilbert-spot"])  # but for the expiry's seconds


# --- docs/deploy.md's lifecycle walk-through, command by command ----------------------------------------------


def lifecycle_commands() -> list[tuple[list[str], str]]:
    """The `hfpipe` commands of docs/deploy.md's lifecycle block ("From dev to prod"), with their comments; its
    `hfpipe local up` lines are the `world` fixture's (docs/local.md's block has the same)."""
    return block_commands("lifecycle")


def test_the_lifecycle_block_has_the_steps_the_issue_asks() -> None:
    steps = [(argv[0], argv[1] if len(argv) > 1 else "") for argv, _ in lifecycle_commands()]
    assert steps[:2] == [("local", "up"), ("local", "up")]
    ups = {argv[argv.index("--env") + 1]: argv for argv, _ in lifecycle_commands()[:2]}
    assert ups == world_lines("up")  # the environments the `world` fixture starts, as this block starts them
    kinds = [argv[0] for argv, _ in lifecycle_commands()[2:]]
    # train, approve, deploy in dev, promote, deploy in prod, a worse update rolled back, a better one.
    assert kinds.count("start") == 3 and kinds.count("promote") == 3 and kinds.count("deploy") == 4
    assert [c for argv, c in lifecycle_commands() if argv[0] == "deploy"][2].startswith("the 4xx alarm fires")
    # Issue 47: the later runs are each scored against what dev's classifier serves (its /1).
    starts = [argv for argv, _ in lifecycle_commands() if argv[0] == "start"]
    assert [a[a.index("--champion") + 1] if "--champion" in a else None for a in starts] == [
        None,
        "endpoint:classifier",
        "endpoint:classifier",
    ]


def refused_promoted_commands() -> list[tuple[list[str], str]]:
    """The README's block "A worse fine-tune refused, a better one promoted", replayed in the lifecycle's world
    after its last command."""
    return block_commands("refused-promoted")


def test_the_readme_block_refuses_a_worse_version_at_approve_and_promote() -> None:
    argvs = [argv for argv, _ in refused_promoted_commands()]
    assert [a[:2] if a[0] == "models" else a[:1] for a in argvs] == [
        ["deploy"],
        ["start"],
        ["models", "compare"],
        ["models", "approve"],
        ["models", "approve"],
        ["promote"],
        ["models", "compare"],
    ]
    assert [c.split(":")[0] for _, c in refused_promoted_commands() if "exit 1" in c] == [
        "refused by the evaluation gate, with the figures",
        "refused in prod with the figures",
    ]
    assert "--override-evaluation" in argvs[4] and "--champion" in argvs[1]


@pytest.mark.slow
def test_the_lifecycle_by_hand(world: World) -> None:
    """Train in dev, approve, deploy in dev, promote, deploy in prod, a worse version rolled back by its
    alarm, a better one deployed blue/green: every command of docs/deploy.md's block, run as typed, in
    order."""
    assert json.loads(out(world["dev"]("models", "--json", "--recipe", "tiny-mnli"))) == []
    rolled_back_at = None
    for argv, comment in lifecycle_commands()[2:]:
        # No wait of the test's own: the deploy after the rollback waits for its alarm itself if it must.
        deploy_after_rollback = argv[0] == "deploy" and rolled_back_at is not None
        started = time.monotonic()
        proc = world.hfpipe(*argv)
        expected = 1 if comment.startswith("the 4xx alarm fires") else 0
        assert proc.returncode == expected, (argv, proc.stdout, proc.stderr, world.log("prod")[-3000:])
        if expected == 1:
            rolled_back_at = time.monotonic()
            assert (
                "error: deploy failed: DeploymentRolledBack: endpoint hfpipe-prod-classifier" in proc.stderr
            )
            assert "hfpipe-prod-classifier-4xx-errors in ALARM" in proc.stderr
            assert "serving tiny-mnli/1)" in proc.stdout
        elif argv[0] == "endpoints" and len(argv) > 1 and argv[1] == "--env":
            assert re.search(r"hfpipe-prod-classifier .*InService .*tiny-mnli/1 ", proc.stdout), proc.stdout
        elif deploy_after_rollback:
            assert rolled_back_at is not None
            # -s shows whether the 4xx alarm was still in ALARM when it began (the deploy then waited).
            print(f"last deploy began {started - rolled_back_at:.0f} s after the rollback:\n{proc.stdout}")
            assert "deployed: hfpipe-prod-classifier serves InService" in proc.stdout
            assert "serving tiny-mnli/3)" in proc.stdout and "previous version: tiny-mnli/1" in proc.stdout
        elif argv[:2] == ["models", "compare"]:
            # The better version is measurably better: the same seed, 200 steps instead of the recipe's 4.
            compared = json.loads(out(world.hfpipe(*argv, "--json")))
            metrics = {row["metric"]: row for row in compared["metrics"]}
            print({name: (row["a"], row["b"]) for name, row in metrics.items()})
            for name in ("eval_accuracy", "eval_accuracy_mm"):
                assert metrics[name]["b"] - metrics[name]["a"] >= 0.2, metrics[name]
            assert re.search(r"eval_accuracy .*\+0\.[2-9]", proc.stdout), proc.stdout
        elif argv[0] == "invoke":
            assert re.search(r'"label": "(entailment|neutral|contradiction)"', proc.stdout), proc.stdout
        check_lifecycle_gate(argv, proc.stdout)
    prod_versions = json.loads(out(world["prod"]("models", "--json", "--recipe", "tiny-mnli")))
    assert [(v["ref"], v["promoted_from_env"]) for v in prod_versions] == [
        (f"tiny-mnli/{n}", "dev") for n in (1, 2, 3)
    ]
    for env in ENVIRONMENTS:  # the block's last commands deleted both named endpoints
        assert "classifier" not in out(world[env]("endpoints"))
    # Then the README's block in the same world: a worse version refused, the better one promoted.
    replay_refused_promoted(world)


#: The evaluations' figures (accuracy in percent on the 24 held-out pairs, 95% paired bootstrap), measured on
#: this machine (docs/deploy.md, README.md): each a whole number of pairs, so another CPU could move one only
#: by a prediction at a tie; held within one pair (4.17 points), the verdicts exactly.
LIFECYCLE_FIGURES = {
    "tiny-mnli/2": ("not_worse", (0.0, 0.0, 0.0)),  # against /1
    "tiny-mnli/3": ("better", (37.5, 20.83, 58.33)),  # against /1
    "tiny-mnli/4": ("worse", (-37.5, -58.33, -20.83)),  # against /3
}


def assert_gate_figures(text: str, ref: str) -> None:
    """The gate's line (or the run's evaluation row) names the version's verdict and figures."""
    verdict, expected = LIFECYCLE_FIGURES[ref]
    flat = " ".join(text.split())
    found = re.search(
        r"accuracy difference ([-+][\d.]+) \(([-+][\d.]+) to ([-+][\d.]+)\) at 95% confidence, margin 0; "
        r"challenger accuracy [\d.]+ \[[\d.]+, [\d.]+\] on 24, champion [\d.]+ \[[\d.]+, [\d.]+\] on 24",
        flat,
    )
    assert found, text
    assert all(abs(float(f) - e) < 4.2 for f, e in zip(found.groups(), expected, strict=True)), (flat, ref)
    assert (verdict == "worse") == ("is worse than the champion" in flat), flat


def check_lifecycle_gate(argv: list[str], stdout: str) -> None:
    """Issue 47 in the lifecycle: each later run's verdict against dev's classifier (/1), and the gate's
    figures where it passes them: approve, promote, deploy in prod (prod's gate mandatory)."""
    flat = " ".join(stdout.split())
    if argv[0] == "start" and "--champion" in argv:
        ref = "tiny-mnli/3" if "training.hyperparameters.max_steps=200" in argv else "tiny-mnli/2"
        verdict, expected = LIFECYCLE_FIGURES[ref]
        # The report's line (a table cell, wrapped at the console's width: its borders taken out): each model's
        # score [interval] on n, then the difference, labelled (newcomer finding 8).
        cell = " ".join(re.sub(r"[│┃]", " ", stdout).split())
        found = re.search(
            rf"evaluation {verdict}: accuracy [\d.]+ \[[^\]]*\] on \d+ against [\d.]+ \[[^\]]*\] on \d+ "
            r"\([^)]*\); difference ([-+\d.]+) \(([-+\d.]+) to ([-+\d.]+)\)",
            cell,
        )
        assert found, stdout  # the run's report: its verdict and figures against dev's classifier
        assert all(abs(float(f) - e) < 4.2 for f, e in zip(found.groups(), expected, strict=True)), stdout
    ref = next((a for a in argv if a.startswith("tiny-mnli/")), "")
    # Approve in each environment (prod's reads prod's classifier: /1, promoted from dev's /1, the champion
    # evaluated), promote, and the deploy in prod, where the gate is mandatory.
    gated = (
        argv[:2] == ["models", "approve"] or argv[0] == "promote" or (argv[0] == "deploy" and "prod" in argv)
    )
    if ref in ("tiny-mnli/2", "tiny-mnli/3") and gated:
        verdict = LIFECYCLE_FIGURES[ref][0]
        assert f"evaluation gate: evaluation {verdict} against arn:aws:sagemaker:eu-west-1:" in flat, stdout
        assert_gate_figures(stdout, ref)


def replay_refused_promoted(world: World) -> None:
    """The README's "A worse fine-tune refused, a better one promoted", as typed, after the lifecycle: /4 (the
    recipe's 4 steps) scored against /3 on dev's classifier, refused at approve and at promote with the figures,
    approved in dev only with an override; the better /3 is what prod holds, evaluated better than /1."""
    for argv, comment in refused_promoted_commands():
        proc = world.hfpipe(*argv)
        expected = 1 if "exit 1" in comment else 0
        assert proc.returncode == expected, (argv, proc.stdout, proc.stderr, world.log("dev")[-3000:])
        if expected == 1:
            flat = " ".join(proc.stderr.split())
            assert "refused by the evaluation gate: version tiny-mnli/4" in flat, proc.stderr
            assert f"is worse than the champion arn:aws:sagemaker:eu-west-1:{ACCOUNT}:model-package/" in flat
            assert "hfpipe-dev-tiny-mnli/3 on validation" in flat and '--override-evaluation "REASON"' in flat
            assert_gate_figures(proc.stderr, "tiny-mnli/4")
        elif argv[0] == "start":
            assert re.search(
                r"evaluation\W+worse: accuracy [\d.]+ \[[\d., ]+\] on 24 against [\d.]+ \[[\d., ]+\] on 24 "
                r"\(tiny-mnli/3\); difference -",
                proc.stdout,
            ), proc.stdout
        elif argv[:2] == ["models", "approve"]:
            flat = " ".join(proc.stdout.split())
            assert (
                "PendingManualApproval -> Approved" in flat
                and "overridden: kept in dev for an A/B test" in flat
            )
            assert_gate_figures(proc.stdout, "tiny-mnli/4")
        elif argv[:2] == ["models", "compare"]:
            compared = json.loads(out(world.hfpipe(*argv, "--json")))
            a, b = (compared[k]["evaluation"]["document"] for k in ("a", "b"))
            if argv[2:4] == ["tiny-mnli/3", "tiny-mnli/4"]:
                assert (a["verdict"], b["verdict"]) == ("better", "worse"), (a, b)
            else:  # in prod: /3 promoted, with the evaluation that let it through
                assert (a["verdict"], b["verdict"]) == ("no_champion", "better"), (a, b)
            assert "better" in proc.stdout, proc.stdout
    prod = json.loads(out(world["prod"]("models", "--json", "--recipe", "tiny-mnli")))
    assert [v["ref"] for v in prod] == ["tiny-mnli/1", "tiny-mnli/2", "tiny-mnli/3"]  # no /4 in prod
    [fourth] = [
        v
        for v in json.loads(out(world["dev"]("models", "--json", "--recipe", "tiny-mnli")))
        if v["ref"] == "tiny-mnli/4"
    ]
    assert fourth["status"] == "Approved", fourth
