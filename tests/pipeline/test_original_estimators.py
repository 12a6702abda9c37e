"""The original material's four estimators, as their authors wrote them, against the SageMaker SDK's own
CreateTrainingJob request, field by field (4 of 4).

The originals are Hugging Face's SageMaker notebooks (huggingface/notebooks): 03_distributed_training_data_
parallelism and 04_distributed_training_model_parallelism (their transformers v4.6.1 versions, commit 2c9da03:
git_config with `branch: v4.6.1`, a tag, and `source_dir='./examples/...'`), 05_spot_instances (the same
commit: `source_dir='./scripts'`) and 24_train_bloom_peft_lora (`source_dir='scripts'`). Their estimator
arguments are written below as the notebooks pass them.

The SDK side: its `HuggingFace(**as_written).fit(inputs)` under moto, its git handling run as it is (its
clone's transport pointed at a local repository standing in for github.com: nothing is downloaded), its
archive uploaded to moto's bucket. The hfpipe side: the recipe a team writes from the same arguments (the
mapping docs/own-code.md gives), through what `hfpipe start --dry-run` runs: the one packing
(hfpipe.cli.recipe.sources.pack_source), the script's parser check, and the Plan reading the archive from memory
(sources.Staged). What still differs is docs/own-code.md's table, which this test reads: every other field is
the SDK's, and every row of the table differs for a reason the test sees.
"""

from __future__ import annotations

import copy
import io
import os
import re
import subprocess
import tarfile
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from accounts import ACCOUNT
from notebooks import METRICS, MNLI_HYPERPARAMETERS, SMP_DISTRIBUTION, SQUAD_HYPERPARAMETERS
from own_sources import TRANSFORMERS, transformers_at_v461

from hfpipe.cli.recipe import sources as cli_sources
from hfpipe.core.recipe.recipes import load_recipe
from hfpipe.core.run.plan import PlanConfig, accept, build_plan
from hfpipe.local.engine.quotas import QuotaTable, default_quotas

pytestmark = pytest.mark.slow
REGION = "us-east-1"
ROLE = f"arn:aws:iam::{ACCOUNT}:role/hfpipe-execution"
BUCKET = "artifacts-bucket"  # the SDK session's default bucket and the environment's artifacts bucket
DATA = "data-bucket"
DOC = Path(__file__).resolve().parents[2] / "docs" / "own-code.md"

GIT_V461 = {"repo": TRANSFORMERS, "branch": "v4.6.1"}

#: name: (the estimator's arguments as written, fit's inputs, the task kind its recipe says)
ORIGINALS: dict[str, tuple[dict[str, Any], dict[str, str] | None, str]] = {
    "03-squad-smddp": (
        {
            "entry_point": "run_qa.py",
            "source_dir": "./examples/pytorch/question-answering",
            "git_config": GIT_V461,
            "metric_definitions": METRICS,
            "instance_type": "ml.p3.16xlarge",
            "instance_count": 2,
            "volume_size": 200,
            "transformers_version": "4.6",
            "pytorch_version": "1.7",
            "py_version": "py36",
            "distribution": {"smdistributed": {"dataparallel": {"enabled": True}}},
            "hyperparameters": SQUAD_HYPERPARAMETERS,
        },
        None,
        "question-answering",
    ),
    "04-mnli-smp": (
        {
            "entry_point": "run_glue.py",
            "source_dir": "./examples/pytorch/text-classification",
            "git_config": GIT_V461,
            "metrics_definition": METRICS,  # sic: the notebook's keyword, which the SDK's **kwargs swallow
            "instance_type": "ml.p3.16xlarge",
            "instance_count": 1,
            "volume_size": 200,
            "transformers_version": "4.6",
            "pytorch_version": "1.7",
            "py_version": "py36",
            "distribution": SMP_DISTRIBUTION,
            "hyperparameters": MNLI_HYPERPARAMETERS,
            "debugger_hook_config": False,
        },
        None,
        "text-classification",
    ),
    "05-spot": (
        {
            "entry_point": "train.py",
            "source_dir": "./scripts",
            "instance_type": "ml.p3.2xlarge",
            "instance_count": 1,
            "base_job_name": "using-spot",
            "checkpoint_s3_uri": f"s3://{BUCKET}/using-spot/checkpoints",
            "use_spot_instances": True,
            "max_wait": 3600,
            "max_run": 1000,
            "transformers_version": "4.12",
            "pytorch_version": "1.9",
            "py_version": "py38",
            "hyperparameters": {
                "epochs": 1,
                "train_batch_size": 32,
                "model_name": "distilbert-base-uncased",
                "output_dir": "/opt/ml/checkpoints",
            },
        },
        {"train": f"s3://{DATA}/imdb/train", "test": f"s3://{DATA}/imdb/test"},
        "text-classification",
    ),
    "24-bloomz-lora": (
        {
            "entry_point": "run_clm.py",
            "source_dir": "scripts",
            "instance_type": "ml.g5.2xlarge",
            "instance_count": 1,
            "base_job_name": "huggingface-peft-2023-05-01-00-00-00",
            "volume_size": 300,
            "transformers_version": "4.26",
            "pytorch_version": "1.13",
            "py_version": "py39",
            "hyperparameters": {
                "model_id": "bigscience/bloomz-7b1",
                "dataset_path": "/opt/ml/input/data/training",
                "epochs": 3,
                "per_device_train_batch_size": 1,
                "lr": 2e-4,
            },
        },
        {"training": f"s3://{DATA}/samsum/train"},
        "causal-lm-summarization",
    ),
}

#: The spot notebook's scripts/train.py and the LoRA notebook's scripts/run_clm.py, cut to their parsers (the
#: arguments the estimators give them; both parse with parse_known_args, as the originals do).
SPOT_TRAIN = """import argparse, os
parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=3)
parser.add_argument("--train_batch_size", type=int, default=32)
parser.add_argument("--eval_batch_size", type=int, default=64)
parser.add_argument("--warmup_steps", type=int, default=500)
parser.add_argument("--model_name", type=str)
parser.add_argument("--learning_rate", type=str, default=5e-5)
parser.add_argument("--output_dir", type=str)
args, _ = parser.parse_known_args()
"""
LORA_RUN_CLM = """import argparse
parser = argparse.ArgumentParser()
parser.add_argument("--model_id", type=str)
parser.add_argument("--dataset_path", type=str)
parser.add_argument("--epochs", type=int, default=3)
parser.add_argument("--per_device_train_batch_size", type=int, default=1)
parser.add_argument("--lr", type=float, default=5e-5)
parser.add_argument("--seed", type=int, default=42)
args, _ = parser.parse_known_args()
"""


def team_folder(root: Path, name: str) -> Path:
    """The folder the notebook runs in: scripts/ for the own-folder originals (an executable file among them,
    whose mode both archives keep)."""
    root.mkdir(parents=True)
    if name in {"05-spot", "24-bloomz-lora"}:
        scripts = root / "scripts"
        scripts.mkdir()
        entry = "train.py" if name == "05-spot" else "run_clm.py"
        (scripts / entry).write_text(SPOT_TRAIN if name == "05-spot" else LORA_RUN_CLM)
        (scripts / "requirements.txt").write_text("transformers\n")
        (scripts / "launch.sh").write_text('#!/bin/sh\nexec python train.py "$@"\n')
        (scripts / "launch.sh").chmod(0o755)
    return root


def recipe_for(name: str, folder: Path, repository: Path) -> dict[str, Any]:
    """The recipe a team writes for the estimator (docs/own-code.md, "From an estimator to a recipe"): each
    argument to its field; the git repository's URL (and nothing else) pointed at the local stand-in."""
    kwargs, inputs, task = ORIGINALS[name]
    base = {"question-answering": "tiny-qa", "text-classification": "tiny-mnli"}.get(task, "tiny-lora")
    recipe = copy.deepcopy(load_recipe(base))
    recipe.update(name=f"original-{name}", deploy=False)
    recipe.pop("evaluation_gate", None)  # the tiny recipe's gate reads metrics the original does not define
    recipe.pop("evaluation", None)  # and its evaluation a channel the original may not have
    recipe["container"]["training"] = {
        k: kwargs[k] for k in ("transformers_version", "pytorch_version", "py_version")
    }
    if "git_config" in kwargs:
        git = {**kwargs["git_config"], "repo": str(repository), "path": kwargs["source_dir"]}
        source: dict[str, Any] = {"git": git}
    else:
        source = {"dir": kwargs["source_dir"]}
    recipe["training"] = {
        "source": source,
        "entry_point": kwargs["entry_point"],
        "instance_type": kwargs["instance_type"],
        "instance_count": kwargs["instance_count"],
        "volume_size_gb": kwargs.get("volume_size", 30),
        "max_run_seconds": kwargs.get("max_run", 86400),
        "hyperparameters": kwargs["hyperparameters"],
        "distribution": kwargs.get("distribution"),
        "metric_definitions": kwargs.get("metric_definitions", []),
        "channels": dict(inputs or {}),
    }
    if kwargs.get("use_spot_instances"):
        recipe["training"]["spot"] = {"enabled": True, "max_wait_seconds": kwargs["max_wait"]}
        recipe["training"]["checkpoint_s3_uri"] = "auto"
    (folder / "recipe.json").write_text("{}")  # where the recipe file lies: its folder holds scripts/
    return recipe


def sdk_request(name: str, folder: Path, repository: Path) -> tuple[dict[str, Any], bytes]:
    """The SDK's CreateTrainingJob request for the estimator as written, and the archive it uploaded."""
    import boto3
    import sagemaker
    from sagemaker import git_utils
    from sagemaker.huggingface import HuggingFace

    kwargs, inputs, _ = ORIGINALS[name]
    kwargs = copy.deepcopy(kwargs)

    def clone(url: str, dest: str) -> None:  # the transport only; the SDK's checkouts run as they are
        assert url == TRANSFORMERS, url
        subprocess.run(["git", "clone", "--quiet", str(repository), dest], check=True)

    session = sagemaker.Session(boto_session=boto3.Session(region_name=REGION), default_bucket=BUCKET)
    captured: dict[str, Any] = {}
    with (
        mock.patch.object(git_utils, "_run_clone_command", clone),
        mock.patch.object(
            session.sagemaker_client,
            "create_training_job",
            side_effect=lambda **kw: captured.update(kw) or {},
        ),
    ):
        cwd = os.getcwd()
        os.chdir(folder)  # the notebook's folder: source_dir='./scripts' is relative to it
        try:
            estimator = HuggingFace(role=ROLE, sagemaker_session=session, **kwargs)
            estimator.fit(inputs, wait=False, logs=False)
        finally:
            os.chdir(cwd)
    uri = captured["HyperParameters"]["sagemaker_submit_directory"].strip('"')
    bucket, key = uri.removeprefix("s3://").split("/", 1)
    body = boto3.client("s3", region_name=REGION).get_object(Bucket=bucket, Key=key)["Body"].read()
    return captured, body


def hfpipe_request(recipe: dict[str, Any], folder: Path, s3: Any) -> tuple[dict[str, Any], bytes]:
    """What `hfpipe start --dry-run` plans for the recipe: packed, checked, planned; nothing uploaded."""
    from stacks.image_catalog import build_catalog

    packed = cli_sources.pack_source(
        str(folder / "recipe.json"), recipe, say=lambda _: None, cache=folder / "c"
    )
    assert packed is not None
    accepted = cli_sources.check_source(accept({"recipe": recipe}), packed)
    config = PlanConfig(
        env="dev",
        region=REGION,
        role_arn=ROLE,
        sourcedir_uri=f"s3://{BUCKET}/code/sourcedir.tar.gz",
        data_bucket=DATA,
        artifacts_bucket=BUCKET,
        image_catalog=build_catalog(REGION, [recipe]),
    )
    accepted = accepted.with_source(cli_sources.source_uri(BUCKET, packed), packed.sha256)
    quotas = QuotaTable(default_quotas()).client(REGION)
    staged = cli_sources.Staged(s3, BUCKET, packed)
    plan = build_plan(accepted, f"{recipe['name']}-1", config, quotas, s3=staged)
    return plan.training_job_request, packed.data


def differences_table() -> dict[str, str]:
    """docs/own-code.md's table of what differs from the SDK's request: {field: why}."""
    text = DOC.read_text()
    section = text.split("### What differs from the SDK's request", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    return {re.match(r"\| `([^`]+)`", row).group(1): row.split("|")[-2].strip() for row in rows}  # type: ignore[union-attr]


def flat(request: dict[str, Any]) -> dict[str, Any]:
    """The request's fields, HyperParameters one by one (`HyperParameters.NAME`)."""
    out = {k: v for k, v in request.items() if k != "HyperParameters"}
    out.update({f"HyperParameters.{k}": v for k, v in request.get("HyperParameters", {}).items()})
    return out


def files(archive: bytes) -> dict[str, tuple[bool, bytes]]:
    """An archive's regular files: executable or not, and their bytes."""
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
        return {
            m.name.removeprefix("./"): (bool(m.mode & 0o100), tar.extractfile(m).read())  # type: ignore[union-attr]
            for m in tar.getmembers()
            if m.isfile()
        }


@pytest.fixture
def s3(monkeypatch: pytest.MonkeyPatch) -> Any:
    from moto import mock_aws

    for var, value in (
        ("AWS_ACCESS_KEY_ID", "x"),
        ("AWS_SECRET_ACCESS_KEY", "x"),
        ("AWS_DEFAULT_REGION", REGION),
    ):
        monkeypatch.setenv(var, value)
    with mock_aws():
        import boto3

        client = boto3.client("s3", region_name=REGION)
        client.create_bucket(Bucket=BUCKET)
        yield client


@pytest.mark.parametrize("name", sorted(ORIGINALS))
def test_an_original_estimator_as_written_gives_the_sdks_request(name: str, tmp_path: Path, s3: Any) -> None:
    repository = transformers_at_v461(tmp_path / "transformers")
    folder = team_folder(tmp_path / "notebook", name)
    sdk, sdk_archive = sdk_request(name, folder, repository)
    ours, our_archive = hfpipe_request(recipe_for(name, folder, repository), folder, s3)
    table = differences_table()
    mine, theirs = flat(ours), flat(sdk)
    differing = {k for k in set(mine) | set(theirs) if mine.get(k) != theirs.get(k)}
    assert differing - set(table) == set(), {k: (mine.get(k), theirs.get(k)) for k in differing - set(table)}
    # The same files, each executable or not as in the SDK's archive, with the same bytes.
    assert files(our_archive) == files(sdk_archive)
    assert any(executable for executable, _ in files(our_archive).values()) or name.startswith("03")
    # Spelled out, the fields the issue names.
    assert mine["HyperParameters.sagemaker_program"] == theirs["HyperParameters.sagemaker_program"]
    assert ours["AlgorithmSpecification"] == sdk["AlgorithmSpecification"]


def test_the_differences_table_has_no_row_without_a_difference(tmp_path: Path, s3: Any) -> None:
    """Every row of docs/own-code.md's table differs for at least one original (no stale row)."""
    repository = transformers_at_v461(tmp_path / "transformers")
    seen: set[str] = set()
    for name in sorted(ORIGINALS):
        folder = team_folder(tmp_path / name, name)
        sdk, _ = sdk_request(name, folder, repository)
        ours, _ = hfpipe_request(recipe_for(name, folder, repository), folder, s3)
        mine, theirs = flat(ours), flat(sdk)
        seen |= {k for k in set(mine) | set(theirs) if mine.get(k) != theirs.get(k)}
    assert set(differences_table()) <= seen
