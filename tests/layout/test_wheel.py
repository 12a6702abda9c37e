"""The wheel built from this repository works outside it: built from a copy of the sources, installed into
a fresh virtual environment, and run from an empty folder.

The fresh environment gets the wheel and nothing else: its third-party packages (boto3, rich, moto) come
from the test's own environment through a .pth file, so nothing is downloaded and the test stays quick.
That environment's editable `hfpipe` is not visible there (a .pth file in a folder added by another .pth
is not read), so the `hfpipe` that runs is the wheel's; the test checks that too.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest

from hfpipe.core.recipe.recipes import available_recipes

pytestmark = pytest.mark.slow

# What a built wheel needs from the checkout (pyproject.toml's packages and package-dir).
SOURCES = ("pyproject.toml", "hfpipe", "recipes", "training_code")


@pytest.fixture(scope="module")
def installed(repo_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """bin/ of a fresh virtual environment with the repository's wheel installed."""
    work = tmp_path_factory.mktemp("wheel")
    src = work / "src"
    src.mkdir()
    for name in SOURCES:
        path = repo_root / name
        if path.is_dir():
            shutil.copytree(path, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(path, src / name)
    dist = work / "dist"
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--no-input"]
    subprocess.run(
        [*pip, "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-w", str(dist), str(src)],
        check=True,
        capture_output=True,
        env=_clean_env(),
    )
    [wheel] = dist.glob("hfpipe-*.whl")
    env_dir = work / "venv"
    venv.create(env_dir, with_pip=False)
    python = env_dir / "bin" / "python"
    subprocess.run(
        [*pip, "--python", str(python), "install", "--no-deps", "--no-index", str(wheel)],
        check=True,
        capture_output=True,
        env=_clean_env(),
    )
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    (Path(purelib) / "shared-test-packages.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return env_dir / "bin"


def _clean_env() -> dict[str, str]:
    """This process's environment without what points at the checkout (the suite runs with PYTHONPATH=.)."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "HFPIPE_CHECKOUT")}


def _run(cwd: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        list(args), cwd=cwd, env={**_clean_env(), **(env or {})}, capture_output=True, text=True, check=False
    )


def test_hfpipe_recipes_from_the_wheel(installed: Path, tmp_path: Path) -> None:
    where = _run(tmp_path, str(installed / "python"), "-c", "import hfpipe; print(hfpipe.__file__)")
    assert where.stdout.startswith(str(installed.parent)), where  # the wheel's package, not the checkout's
    proc = _run(tmp_path, str(installed / "hfpipe"), "recipes")
    assert proc.returncode == 0, proc.stderr
    for name in available_recipes():
        assert name in proc.stdout
    shown = _run(tmp_path, str(installed / "hfpipe"), "recipes", "show", "tiny-qa")
    assert shown.returncode == 0 and "tiny-qa" in shown.stdout, shown.stderr


# Run inside the fresh environment: a deployed environment in a moto account (its SSM parameters and a
# state machine that moto records but does not run), then the installed command's `start`.
START_SCRIPT = """
import contextlib, io, json, sys
import boto3
from moto import mock_aws
from moto.core import DEFAULT_ACCOUNT_ID as ACCOUNT
from hfpipe import contract
from hfpipe.cli import main
from hfpipe.cli.clients import Clients
from hfpipe.local.engine.quotas import QuotaTable, default_quotas

# start plans first, as the dry run does, reading the account's quotas; moto has no ListServiceQuotas, so
# they are answered as local mode answers them.
moto_client = Clients.client
Clients.client = lambda self, service: (
    QuotaTable(default_quotas()).client("eu-west-1") if service == "service-quotas" else moto_client(self, service)
)

with mock_aws():
    region = "eu-west-1"
    sfn = boto3.client("stepfunctions", region_name=region)
    arn = sfn.create_state_machine(
        name="hfpipe-dev", roleArn=f"arn:aws:iam::{ACCOUNT}:role/sfn",
        definition=json.dumps({"StartAt": "P", "States": {"P": {"Type": "Pass", "End": True}}}),
    )["stateMachineArn"]
    ssm = boto3.client("ssm", region_name=region)
    values = {
        contract.SSM_DATA_BUCKET: "data", contract.SSM_ARTIFACTS_BUCKET: "artifacts",
        contract.SSM_EXECUTION_ROLE_ARN: f"arn:aws:iam::{ACCOUNT}:role/x",
        contract.SSM_SOURCEDIR_URI: "s3://assets/sourcedir.tar.gz", contract.SSM_STATE_MACHINE_ARN: arn,
        contract.SSM_NOTIFICATION_TOPIC_ARN: f"arn:aws:sns:eu-west-1:{ACCOUNT}:t",
        contract.SSM_IMAGE_CATALOG: sys.argv[1],
    }
    for key, value in values.items():
        ssm.put_parameter(Name=contract.ssm_parameter_name("dev", key), Value=value, Type="String")
    code = main(["start", "--env", "dev", "--recipe", "tiny-qa", "--name", "from-the-wheel", "--region", region])
    [execution] = sfn.list_executions(stateMachineArn=arn)["executions"]
    described = sfn.describe_execution(executionArn=execution["executionArn"])
    # A team's recipe with its own folder (sys.argv[2]): packed, checked against its script's parser, uploaded
    # to the artifacts bucket and planned from there, as `start` would run it.
    boto3.client("s3", region_name=region).create_bucket(
        Bucket="artifacts", CreateBucketConfiguration={"LocationConstraint": region}
    )
    planned = io.StringIO()
    with contextlib.redirect_stdout(planned):
        own = main(["start", "--env", "dev", "--recipe", sys.argv[2], "--dry-run", "--json", "--region", region])
    # Then started for real: the archive the dry run did not upload, the execution input naming it.
    started = main(["start", "--env", "dev", "--recipe", sys.argv[2], "--name", "own-code", "--region", region])
    own_input = json.loads(sfn.describe_execution(executionArn=next(
        e["executionArn"] for e in sfn.list_executions(stateMachineArn=arn)["executions"] if e["name"] == "own-code"
    ))["input"])
    print(json.dumps({"code": code, "name": execution["name"], "input": json.loads(described["input"]),
                      "own": own, "own_plan": json.loads(planned.getvalue()), "started": started,
                      "own_input": own_input}))
"""


def own_folder_recipe(team: Path) -> Path:
    """A team's recipe next to its own folder (scripts/train.py, an argparse parser), deploy false."""
    from hfpipe.core.recipe.recipes import load_recipe

    (team / "scripts").mkdir(parents=True)
    (team / "scripts" / "train.py").write_text(
        "import argparse\np = argparse.ArgumentParser()\np.add_argument('--epochs', type=int)\np.parse_args()\n"
    )
    recipe = load_recipe("tiny-qa")
    recipe["name"] = "own-code"
    recipe["training"].update(
        source={"dir": "scripts"}, entry_point="train.py", hyperparameters={"epochs": 2}
    )
    recipe.update(deploy=False, evaluation_gate=None)
    path = team / "my-recipe.json"
    path.write_text(json.dumps(recipe))
    return path


def test_hfpipe_start_from_the_wheel_against_moto(installed: Path, tmp_path: Path) -> None:
    from stacks.image_catalog import build_catalog

    catalog = json.dumps(build_catalog("eu-west-1"))
    script = tmp_path / "start.py"
    script.write_text(START_SCRIPT)
    own = own_folder_recipe(tmp_path / "team")
    env = {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "eu-west-1",
    }
    proc = _run(tmp_path, str(installed / "python"), str(script), catalog, str(own), env=env)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert "started from-the-wheel (recipe tiny-qa)" in lines[0]
    result = json.loads(lines[-1])
    assert result["code"] == 0 and result["name"] == "from-the-wheel"
    assert result["input"]["recipe"]["name"] == "tiny-qa"
    # The installed command packed the team's folder outside the checkout and planned the uploaded archive.
    assert result["own"] == 0, proc.stderr
    assert re.search(
        r"training source: s3://artifacts/sources/[0-9a-f]{64}/sourcedir\.tar\.gz \(uploaded\)", proc.stderr
    )
    plan = result["own_plan"]
    hps = plan["training_job_request"]["HyperParameters"]
    assert re.fullmatch(
        r'"s3://artifacts/sources/[0-9a-f]{64}/sourcedir\.tar\.gz"', hps["sagemaker_submit_directory"]
    )
    assert hps["sagemaker_program"] == '"train.py"' and hps["epochs"] == "2"
    assert plan["hyperparameters_not_checked"] is None  # its parser was read from the packed file
    # Started for real from outside the checkout: uploaded by the start, not by its dry run.
    assert result["started"] == 0, proc.stderr
    assert re.search(
        r"training source: s3://artifacts/sources/[0-9a-f]{64}/sourcedir\.tar\.gz \(not uploaded: a dry run",
        proc.stderr,
    )
    assert re.search(
        r"training source: s3://artifacts/sources/[0-9a-f]{64}/sourcedir\.tar\.gz \(uploaded\)", proc.stderr
    )
    source = result["own_input"]["recipe"]["training"]["source"]
    assert f'"{source["s3"]}"' == hps["sagemaker_submit_directory"] and len(source["sha256"]) == 64


def test_hfpipe_local_outside_a_checkout_says_what_it_needs(installed: Path, tmp_path: Path) -> None:
    """`hfpipe local` stands the whole pipeline up (app.py, stacks/, lambda/): outside a checkout it says so in
    one line, for a bundled recipe and for a team's own folder alike, before packing anything."""
    own = own_folder_recipe(tmp_path / "team")
    for recipe in ("tiny-qa", str(own)):
        proc = _run(tmp_path, str(installed / "hfpipe"), "local", "--recipe", recipe, "--out", str(tmp_path))
        assert proc.returncode == 1
        [line] = proc.stderr.splitlines()
        assert line.startswith("error: `hfpipe local` needs a checkout of the hfpipe repository"), line
        assert "HFPIPE_CHECKOUT" in line


def test_hfpipe_invoke_checks_a_request_with_the_wheels_handler(installed: Path, tmp_path: Path) -> None:
    """`hfpipe invoke --recipe` checks requests with the handler the wheel ships (hfpipe/training_code/),
    before it looks for a server: no checkout, nothing listening, and the handler's own message."""
    import socket

    with socket.socket() as sock:  # a port nothing listens on once closed: nothing may be contacted
        sock.bind(("127.0.0.1", 0))
        port = str(sock.getsockname()[1])
    bad = '{"inputs": {"question": "Who?", "context": ""}}'
    proc = _run(
        tmp_path,
        str(installed / "hfpipe"),
        "invoke",
        "--local",
        "--port",
        port,
        "--recipe",
        "tiny-qa",
        "--data",
        bad,
    )
    assert (proc.returncode, proc.stderr) == (
        1,
        "error: --data is not a request the endpoint accepts: request field 'context' must be a non-empty "
        "string; got '' (checked with training_code/inference_qa.py; nothing was sent)\n",
    )
    where = _run(
        tmp_path,
        str(installed / "python"),
        "-c",
        "from hfpipe import kinds; print(kinds.training_code_file('inference_qa.py'))",
    )
    assert where.stdout.startswith(str(installed.parent)), where  # the wheel's copy, not a checkout's
