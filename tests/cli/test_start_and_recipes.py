"""`hfpipe recipes` and `hfpipe start`: local validation with hfpipe.core, then the execution in moto."""

from __future__ import annotations

import json
from typing import Any

import pytest
from cli_moto import REGION, Deployed, image_catalog
from cli_run import run, start_tiny_lora

from hfpipe import contract
from hfpipe.cli import main
from hfpipe.core.names import default_execution_name
from hfpipe.core.recipe.recipes import available_recipes, load_recipe

KNOWN = ", ".join(available_recipes())


def test_recipes_lists_every_recipe(capsys: Any) -> None:
    code, out, err = run(capsys, "recipes")
    assert (code, err) == (0, "")
    for name in available_recipes():
        assert name in out
    assert "tiny-lora" in out and "summarization" in out


def test_recipes_show_resolves_defaults_and_overrides(capsys: Any) -> None:
    code, out, err = run(
        capsys, "recipes", "show", "tiny-lora", "--set", "training.hyperparameters.max_steps=2"
    )
    assert (code, err) == (0, "")
    assert out.splitlines()[0] == "recipe tiny-lora with training.hyperparameters.max_steps=2"
    assert '"max_steps": 2,' in out
    assert '"volume_size_gb": 30' in out  # a default the file does not set
    assert "training.spot.max_wait_seconds" in out  # documented fields
    assert "StoppingCondition.MaxWaitTimeInSeconds" in out


def test_recipes_show_errors(capsys: Any) -> None:
    code, out, err = run(capsys, "recipes", "show")
    assert (code, out) == (2, "")  # a usage error (docs/cli.md), argparse's: show's usage and the problem
    assert err.startswith("usage: hfpipe recipes show") and err.endswith("required: NAME\n"), err
    assert run(capsys, "recipes", "show", "nope") == (
        1,
        "",
        f"error: unknown recipe 'nope': known recipes are {KNOWN}; or pass the path of a .json file\n",
    )


# --- start: bad input fails before AWS is asked anything (no credentials, no moto here) ----------------


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--recipe", "nope"],
            f"unknown recipe 'nope': known recipes are {KNOWN}; or pass the path of a .json file",
        ),
        (
            ["--recipe", "tiny-lora", "--set", "max_steps"],
            "--set 'max_steps' is not KEY=VALUE: use a dotted recipe field, e.g. "
            "--set training.hyperparameters.max_steps=10 (the value is read as JSON when it is JSON)",
        ),
        (
            ["--recipe", "tiny-lora", "--set", "training.instance_count=0"],
            "recipe 'tiny-lora' with the --set overrides is invalid: recipe.training.instance_count: 0 is below "
            "the minimum 1",
        ),
        (
            ["--recipe", "tiny-lora", "--set", "training.instnce_type=ml.m5.large"],
            "recipe 'tiny-lora' with the --set overrides is invalid: recipe.training: unknown field(s) "
            "['instnce_type']; accepted: ['channels', 'checkpoint_local_path', 'checkpoint_s3_uri', "
            "'distribution', 'entry_point', 'environment', 'expected_hours', 'hyperparameters', 'instance_count', "
            "'instance_type', 'max_run_seconds', 'metric_definitions', 'source', 'spot', 'volume_size_gb']",
        ),
        (
            ["--recipe", "tiny-lora", "--set", "training.spot.enabled=true"],
            "recipe 'tiny-lora' with the --set overrides is invalid: recipe.training.spot.max_wait_seconds: "
            "required when spot.enabled is true",
        ),
        (["--recipe", "missing.json"], "recipe file 'missing.json' not found"),
        (
            ["--recipe", "tiny-lora", "--name", "has space"],
            "--name 'has space' is not a valid execution name: use 1 to 80 letters, digits, '-' or '_'",
        ),
    ],
)
def test_start_bad_input(capsys: Any, argv: list[str], message: str) -> None:
    code, out, err = run(capsys, "start", "--env", "dev", *argv)
    assert (code, out) == (2 if "is not KEY=VALUE" in message else 1, "")  # malformed: a usage error
    assert err == f"error: {message}\n"


def test_start_no_credentials(aws_credentials: None, monkeypatch: pytest.MonkeyPatch, capsys: Any) -> None:
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    code, _, err = start_tiny_lora(capsys)
    assert code == 1
    assert err.startswith("error: no AWS credentials found: ")


def test_start_unknown_environment(deployed: Deployed, capsys: Any) -> None:
    code, _, err = run(capsys, "start", "--env", "prod", "--recipe", "tiny-lora")
    assert code == 1
    assert err.startswith("error: unknown environment 'prod': no SSM parameters under /hfpipe/prod/")


# --- start against the environment -----------------------------------------------------------------


def test_start_sends_recipe_and_overrides_and_prints_the_console_link(
    deployed: Deployed, capsys: Any
) -> None:
    code, out, err = start_tiny_lora(
        capsys,
        "--set",
        "training.hyperparameters.max_steps=2",
        "--name",
        "first-run",
    )
    assert (code, err) == (0, "")
    arn = deployed.state_machine_arn.replace(":stateMachine:", ":execution:") + ":first-run"
    assert out.splitlines() == [
        "started first-run (recipe tiny-lora)",
        f"execution: {arn}",
        f"console:   https://{REGION}.console.aws.amazon.com/states/home?region={REGION}"
        f"#/v2/executions/details/{arn}",
        "follow it with: hfpipe watch first-run --env dev",
    ]
    sent = json.loads(deployed.sfn.describe_execution(executionArn=arn)["input"])
    assert sent == {
        "recipe": load_recipe("tiny-lora"),
        "overrides": {"training.hyperparameters.max_steps": 2},
    }


def test_start_derives_the_name(deployed: Deployed, capsys: Any) -> None:
    code, out, _ = run(capsys, "start", "--env", "dev", "--recipe", "tiny-qa")
    assert code == 0
    name = out.splitlines()[0].split()[1]
    assert name.startswith("tiny-qa-") and len(name) == len(default_execution_name("tiny-qa"))
    assert [
        e["name"]
        for e in deployed.sfn.list_executions(stateMachineArn=deployed.state_machine_arn)["executions"]
    ] == [name]


def test_start_same_name_twice(deployed: Deployed, capsys: Any) -> None:
    assert start_tiny_lora(capsys, "--name", "twice")[0] == 0
    # While it runs, the same name and input start nothing new and succeed (StartExecution is idempotent
    # then); once it has ended, the name is taken.
    deployed.wait(deployed.state_machine_arn.replace(":stateMachine:", ":execution:") + ":twice")
    code, _, err = start_tiny_lora(capsys, "--name", "twice")
    assert code == 1
    assert (
        err == "error: an execution named 'twice' already exists in environment 'dev'; pass another --name\n"
    )


def test_start_checks_the_environments_image_catalog(deployed: Deployed, capsys: Any) -> None:
    catalog = {"training": {"4.49.0/2.6.0/py312": {"gpu": "example.invalid/training:gpu"}}, "inference": {}}
    deployed.ssm.put_parameter(
        Name=contract.ssm_parameter_name("dev", contract.SSM_IMAGE_CATALOG),
        Value=json.dumps(catalog),
        Overwrite=True,
        Type="String",
    )
    code, _, err = start_tiny_lora(capsys)
    assert code == 1
    assert err == (
        "error: recipe 'tiny-lora' cannot run in this environment: recipe.container.training: versions "
        "4.56.2/2.8.0/py312 are not in the image catalog; available: ['4.49.0/2.6.0/py312'] "
        "(or set container.training.image_uri)\n"
    )


def test_start_watch_follows_to_the_report(deployed: Deployed, capsys: Any) -> None:
    code, out, err = start_tiny_lora(
        capsys,
        "--name",
        "watched",
        "--watch",
        "--interval",
        "0.2",
    )
    assert (code, err) == (0, "")
    assert "started watched (recipe tiny-lora)" in out
    assert "report: watched" in out
    assert "SUCCEEDED" in out
    assert "eval_loss" in out and "1.5" in out  # the final metrics the training job reported


@pytest.mark.parametrize(
    ("argv", "usage"),
    [
        (["start", "--env", "dev", "--recipe", "tiny-qa", "--bogus"], "usage: hfpipe start"),
        (["data", "upload", "x.jsonl", "--env", "dev", "--bogus"], "usage: hfpipe data upload"),
        (["recipes", "--bogus"], "usage: hfpipe recipes"),
    ],
)
def test_an_unknown_option_gets_the_subcommands_usage(argv: list[str], usage: str, capsys: Any) -> None:

    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(usage) and "error: unrecognized arguments: --bogus" in err


def test_recipes_print_json_a_tool_can_read(capsys: Any) -> None:

    assert main(["recipes", "show", "tiny-qa", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["task"] == "question-answering"
    assert main(["recipes", "--json"]) == 0
    listed = {r["name"]: r for r in json.loads(capsys.readouterr().out)}
    assert listed["tiny-qa"]["training"]["instance_type"] == "ml.g4dn.xlarge"
    assert listed["distilbert-spot"]["training"]["spot"] is True


def test_bash_completion_completes_commands_and_options(tmp_path: Any, capsys: Any) -> None:
    """The script shtab generates from the parser, loaded into a real bash, completes `hfpipe sta` and
    `hfpipe start --rec`."""
    import shutil
    import subprocess

    assert main(["completion", "bash"]) == 0
    script = tmp_path / "hfpipe.bash"
    script.write_text(capsys.readouterr().out)
    bash = shutil.which("bash")
    assert bash, "bash is needed to check the completion script"

    def complete(*words: str) -> list[str]:
        line = " ".join(words)
        probe = (
            f"source {script}; COMP_WORDS=({line}); COMP_CWORD={len(words) - 1}; COMP_LINE='{line}'; "
            f"COMP_POINT={len(line)}; _shtab_hfpipe; printf '%s\\n' \"${{COMPREPLY[@]}}\""
        )
        return subprocess.run([bash, "-c", probe], capture_output=True, text=True, check=True).stdout.split()

    assert "start" in complete("hfpipe", "sta")
    assert "--recipe" in complete("hfpipe", "start", "--rec")


# --- start --dry-run --------------------------------------------------------------------------------------


class Quotas:
    """Service Quotas as AWS answers it (applied values only in ListServiceQuotas), for the CLI's client."""

    def __init__(self, values: dict[str, float]) -> None:
        self.values = values

    def get_paginator(self, operation: str) -> Any:
        quotas = [
            {"QuotaName": n, "QuotaCode": f"L-{i:08d}", "Value": v}
            for i, (n, v) in enumerate(self.values.items())
        ]

        class Pages:
            def paginate(self, **_: Any) -> list[dict[str, Any]]:
                return [{"Quotas": quotas}]

        return Pages()


def test_start_dry_run_shows_the_plan_and_request_and_starts_nothing(
    deployed: Deployed, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from hfpipe.cli import aws

    real = aws.Clients.client
    quotas = Quotas(
        {
            "ml.g4dn.xlarge for training job usage": 1,
            "ml.m5.large for endpoint usage": 1,
            # The evaluation job's (tiny recipes name an evaluation: docs/evaluation.md).
            "ml.g4dn.xlarge for processing job usage": 1,
        }
    )
    monkeypatch.setattr(
        aws.Clients, "client", lambda self, s: quotas if s == "service-quotas" else real(self, s)
    )
    from stacks.image_catalog import build_catalog

    # The environment's catalog as the Pipeline stack writes it (the shared fixture keeps "{}").
    deployed.ssm.put_parameter(
        Name=contract.ssm_parameter_name("dev", contract.SSM_IMAGE_CATALOG),
        Value=json.dumps(build_catalog(REGION)),
        Type="String",
        Overwrite=True,
    )
    argv = ["start", "--env", "dev", "--recipe", "tiny-qa", "--name", "dry-1", "--dry-run"]
    code, out, err = run(capsys, *argv)
    assert (code, err) == (0, ""), err
    assert (
        "nothing was started or created" in out and "dev-dry-1" in out and "CreateTrainingJob request" in out
    )
    assert '"TrainingJobName": "dev-dry-1"' in out
    code, out, _ = run(capsys, *argv, "--json")
    plan = json.loads(out)
    assert plan["training_job_request"]["TrainingJobName"] == "dev-dry-1" and plan["estimated_cost_usd"] > 0
    assert all(
        e["name"] != "dry-1"
        for e in deployed.sfn.list_executions(stateMachineArn=deployed.state_machine_arn)["executions"]
    )
    # A quota too low stops the dry run with Plan's own message, as it would stop the execution.
    quotas.values["ml.g4dn.xlarge for training job usage"] = 0
    code, _, err = run(capsys, *argv)
    assert code == 1 and "ml.g4dn.xlarge for training job usage" in err
    deployed.ssm.put_parameter(
        Name=contract.ssm_parameter_name("dev", contract.SSM_IMAGE_CATALOG),
        Value="{}",
        Type="String",
        Overwrite=True,
    )


#: What the packing of `own_folder_recipe`'s folder leaves out, as every command that packs says it.
LEFT_OUT = [
    "not packed: .env (looks like a secret; list it in training.source.include)",
    "not packed: __pycache__/ (Python's bytecode cache)",
]


def own_folder_recipe(folder: Any, **training: Any) -> Any:
    """A recipe (tiny-lora's, deploy false) whose own source is scripts/ next to it: a train.py, a .env and
    a bytecode cache, as a team's folder has them after running its script once."""
    scripts = folder / "scripts"
    (scripts / "__pycache__").mkdir(parents=True)
    (scripts / "__pycache__" / "train.cpython-312.pyc").write_bytes(b"\x00")
    # The folder's name in it: each test's archive is its own (the module's tests share one moto account).
    (scripts / "train.py").write_text(f"print('own code')  # {folder.name}\n")
    (scripts / ".env").write_text("HF_TOKEN=secret\n")
    recipe = load_recipe("tiny-lora")
    recipe["training"].update(source={"dir": "scripts"}, entry_point="train.py", **training)
    recipe["deploy"] = False
    path = folder / "own.json"
    path.write_text(json.dumps(recipe))
    return path


def _sources(deployed: Deployed) -> set[str]:
    from app_synth import ARTIFACTS_BUCKET

    listed = deployed.s3.list_objects_v2(Bucket=ARTIFACTS_BUCKET, Prefix=contract.ARTIFACTS_SOURCES_PREFIX)
    return {o["Key"] for o in listed.get("Contents", [])}


def test_start_dry_run_shows_what_it_packs_and_uploads_nothing(
    deployed: Deployed, tmp_path: Any, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The dry run packs as `start` does, through the same function, so it names the same files and folders
    left out and what it packs (on stderr; stdout is the plan); the plan reads the archive from memory as the
    Plan will read it from the bucket, and nothing leaves this machine."""
    from hfpipe.cli import aws

    real = aws.Clients.client
    quotas = Quotas(
        {"ml.g4dn.xlarge for training job usage": 1, "ml.g4dn.xlarge for processing job usage": 1}
    )
    monkeypatch.setattr(
        aws.Clients, "client", lambda self, s: quotas if s == "service-quotas" else real(self, s)
    )
    path = own_folder_recipe(tmp_path)
    before = _sources(deployed)
    for json_out in ([], ["--json"]):
        argv = ["start", "--env", "dev", "--recipe", str(path), "--name", "own-dry", "--dry-run", *json_out]
        code, out, err = run(capsys, *argv)
        assert code == 0, err
        assert [line for line in err.splitlines() if line.startswith("not packed: ")] == LEFT_OUT
        size = len((tmp_path / "scripts" / "train.py").read_bytes())
        assert f"training source: 1 file, {size} B (" in err and f"largest: train.py ({size} B)" in err
        assert "(not uploaded: a dry run uploads nothing)" in err and "(uploaded)" not in err
        assert "not packed" not in out
    assert _sources(deployed) == before


def test_start_refuses_what_the_environment_refuses_before_the_upload(
    deployed: Deployed, tmp_path: Any, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A quota the plan finds too low ends `start` before its own source is uploaded."""
    from hfpipe.cli import aws

    real = aws.Clients.client
    quotas = Quotas({"ml.g4dn.xlarge for training job usage": 0})
    monkeypatch.setattr(
        aws.Clients, "client", lambda self, s: quotas if s == "service-quotas" else real(self, s)
    )
    before = _sources(deployed)
    code, _, err = run(
        capsys, "start", "--env", "dev", "--recipe", str(own_folder_recipe(tmp_path)), "--name", "q0"
    )
    assert code == 1 and "ml.g4dn.xlarge for training job usage" in err, err
    assert _sources(deployed) == before


@pytest.mark.parametrize("dry_run", [[], ["--dry-run"]], ids=["start", "dry-run"])
@pytest.mark.parametrize("source", ["dir", "git"])
def test_start_refuses_an_instance_its_image_lacks_before_packing(
    deployed: Deployed,
    tmp_path: Any,
    capsys: Any,
    monkeypatch: pytest.MonkeyPatch,
    source: str,
    dry_run: list[str],
) -> None:
    """A training instance the environment's training image has no image for (ml.m5.xlarge: the Hugging Face
    training images are GPU ones) is refused in the Plan's own line before the source is cloned, packed or
    uploaded: the git repository here does not exist, and packing fails the test."""
    from plan_config import dev_config

    from hfpipe.core.recipe import sourcedir
    from hfpipe.core.recipe.schema import RecipeError
    from hfpipe.core.run import plan as core_plan

    path = own_folder_recipe(tmp_path, instance_type="ml.m5.xlarge")
    if source == "git":
        recipe = json.loads(path.read_text())
        recipe["training"]["source"] = {"git": {"repo": str(tmp_path / "no-such-repository")}}
        path.write_text(json.dumps(recipe))
    monkeypatch.setattr(sourcedir, "pack", lambda *a, **k: pytest.fail("packed before the refusal"))
    code, out, err = run(capsys, "start", "--env", "dev", "--recipe", str(path), "--name", "cpu", *dry_run)
    # The line the Plan gives for the same instance and container, with the environment's catalog.
    on_cpu = load_recipe("tiny-lora")
    on_cpu["training"]["instance_type"] = "ml.m5.xlarge"
    with pytest.raises(RecipeError) as plan_refusal:
        core_plan.accept({"recipe": on_cpu}, dev_config(image_catalog=json.loads(image_catalog())))
    assert (code, out) == (1, "")
    assert err == f"error: recipe 'tiny-lora' cannot run in this environment: {plan_refusal.value}\n"
    assert "has no cpu image for ml.m5.xlarge; accepted: an instance type of its images' processors" in err


def test_start_packs_a_recipes_own_folder_uploads_it_once_and_the_plan_runs_it(
    deployed: Deployed, tmp_path: Any, capsys: Any
) -> None:
    from app_synth import ARTIFACTS_BUCKET

    from hfpipe.cli.aws import stored_plan
    from hfpipe.core.recipe import sourcedir

    def sources() -> set[str]:
        listed = deployed.s3.list_objects_v2(
            Bucket=ARTIFACTS_BUCKET, Prefix=contract.ARTIFACTS_SOURCES_PREFIX
        )
        return {o["Key"] for o in listed.get("Contents", [])}

    path = own_folder_recipe(tmp_path)
    packed = sourcedir.pack(tmp_path / "scripts")
    uri = f"s3://{ARTIFACTS_BUCKET}/{contract.source_key(packed.sha256)}"
    before = sources()  # the module's other tests' archives
    for name, said in (("own-1", "uploaded"), ("own-2", "already there")):
        code, _, err = run(capsys, "start", "--env", "dev", "--recipe", str(path), "--name", name)
        assert code == 0, err
        assert f"training source: {uri} ({said})" in err
        assert [line for line in err.splitlines() if line.startswith("not packed: ")] == LEFT_OUT
        # print('own code') has no parser: said, with the reason.
        assert "were not checked against train.py's parser: no argparse.ArgumentParser" in err
        arn = deployed.state_machine_arn.replace(":stateMachine:", ":execution:") + f":{name}"
        sent = json.loads(deployed.sfn.describe_execution(executionArn=arn)["input"])
        assert sent["recipe"]["training"]["source"] == {"s3": uri, "sha256": packed.sha256}
        assert deployed.wait(arn) == "SUCCEEDED"
        events = deployed.sfn.get_execution_history(executionArn=arn, maxResults=1000)["events"]
        plan = stored_plan(events)
        assert plan is not None
        assert plan.training_job_request["HyperParameters"]["sagemaker_submit_directory"] == json.dumps(uri)
    assert sources() - before == {contract.source_key(packed.sha256)}
