"""`hfpipe models` against the real state machine on moto: the versions the Register step made, listed,
approved, rejected and compared; another environment's versions and unknown ones are refused."""

from __future__ import annotations

import json
from typing import Any

import pytest
from cli_moto import ACCOUNT, REGION, Deployed, sagemaker_backend
from cli_run import run

GROUP = "hfpipe-dev-tiny-lora"


@pytest.fixture
def two_versions(deployed: Deployed) -> Deployed:
    """Two succeeded tiny-lora runs, so two versions of hfpipe-dev-tiny-lora (eval_loss 1.5, then 1.25)."""
    deployed.start("reg-a")
    training = deployed._engine.training

    def better(request: dict[str, Any], job: Any) -> None:
        training(request, job)
        job.final_metric_data_list = [
            {"MetricName": "eval_loss", "Value": 1.25, "Timestamp": job.creation_time}
        ]

    deployed._engine.training = better
    deployed.start("reg-b")
    deployed._engine.training = training
    return deployed


def test_list_shows_each_registered_version(
    two_versions: Deployed, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, "models", "--env", "dev", "--json")
    assert (code, err) == (0, "")
    versions = json.loads(out)
    assert [(v["ref"], v["status"], v["execution"]) for v in versions] == [
        ("tiny-lora/1", "PendingManualApproval", "reg-a"),
        ("tiny-lora/2", "PendingManualApproval", "reg-b"),
    ]
    assert versions[0]["metrics"] == {"train_loss": 1.25, "eval_loss": 1.5} and versions[0]["group"] == GROUP
    assert versions[1]["metrics"]["eval_loss"] == 1.25
    code, out, _ = run(capsys, "models", "--env", "dev", "--recipe", "tiny-lora")
    assert code == 0 and "tiny-lora/2" in out and "eval_loss=1.5" in out
    assert "2 versions, 2 pending approval" in out
    code, out, _ = run(capsys, "models", "--env", "dev", "--recipe", "tiny-qa")
    assert code == 0 and "no model versions for recipe 'tiny-qa'" in out


def test_approve_and_reject_update_the_version(
    two_versions: Deployed, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(
        capsys, "models", "approve", "tiny-lora/2", "--env", "dev", "--reason", "better eval_loss"
    )
    assert (code, err) == (0, ""), err
    assert "tiny-lora/2 (hfpipe-dev-tiny-lora): PendingManualApproval -> Approved" in out
    sm = two_versions.sagemaker
    arn = f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:model-package/{GROUP}/1"
    code, out, err = run(capsys, "models", "reject", arn, "--env", "dev")
    assert code == 0 and "-> Rejected" in out, err
    approved = sm.describe_model_package(
        ModelPackageName=f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:model-package/{GROUP}/2"
    )
    assert (approved["ModelApprovalStatus"], approved["ApprovalDescription"]) == (
        "Approved",
        "better eval_loss",
    )
    assert sm.describe_model_package(ModelPackageName=arn)["ModelApprovalStatus"] == "Rejected"
    # moto drops CustomerMetadataProperties on UpdateModelPackage (AWS keeps them); the list reads the
    # statistics document, so the row keeps its execution and metrics.
    code, out, _ = run(capsys, "models", "--env", "dev", "--json")
    assert [(v["status"], v["execution"]) for v in json.loads(out)] == [
        ("Rejected", "reg-a"),
        ("Approved", "reg-b"),
    ]


def test_compare_prints_the_metric_differences(
    two_versions: Deployed, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, "models", "compare", "tiny-lora/1", "tiny-lora/2", "--env", "dev", "--json")
    assert (code, err) == (0, "")
    rows = {r["metric"]: r for r in json.loads(out)["metrics"]}
    assert rows["eval_loss"] == {"metric": "eval_loss", "a": 1.5, "b": 1.25, "difference": -0.25}
    code, out, _ = run(capsys, "models", "compare", "tiny-lora/1", "tiny-lora/2", "--env", "dev")
    assert code == 0 and "-0.25" in out and "tiny-lora/1 vs tiny-lora/2" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["approve", "tiny-lora/9"],
            "version 'tiny-lora/9': no version 9 in model package group hfpipe-dev-tiny-lora",
        ),
        (["approve", "nope/1"], "no version 1 in model package group hfpipe-dev-nope"),
        (
            ["reject", f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:model-package/hfpipe-prod-tiny-lora/1"],
            "group 'hfpipe-prod-tiny-lora' is not environment 'dev''s",
        ),
        (
            ["approve", "tiny-lora"],
            "argument VERSION: 'tiny-lora' is not accepted; accepted: RECIPE/N (N from 1) or a model package version ARN",
        ),
        (["approve"], "the following arguments are required: VERSION"),
        (["compare", "tiny-lora/1"], "the following arguments are required: VERSION"),
        (["approve", "tiny-lora/1", "tiny-lora/2"], "unrecognized arguments: tiny-lora/2"),
        (["list", "tiny-lora/1"], "unrecognized arguments: tiny-lora/1"),
    ],
)
def test_refusals_name_the_version_and_change_nothing(
    two_versions: Deployed, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    code, _, err = run(capsys, "models", *argv, "--env", "dev")
    # A version missing or one too many is a usage error (docs/cli.md: exit status 2); a version refused, 1.
    assert code == (2 if "argument" in message else 1) and message in err, err
    statuses = {p.model_approval_status for p in sagemaker_backend().model_packages.values()}
    assert statuses == {"PendingManualApproval"}


def test_another_environments_version_is_refused_even_when_it_exists(
    two_versions: Deployed, capsys: pytest.CaptureFixture[str]
) -> None:
    sm = two_versions.sagemaker
    sm.create_model_package_group(ModelPackageGroupName="hfpipe-prod-tiny-lora")
    sm.create_model_package(
        ModelPackageGroupName="hfpipe-prod-tiny-lora",
        InferenceSpecification={
            "Containers": [{"Image": "example.invalid/x:1"}],
            "SupportedContentTypes": ["application/json"],
            "SupportedResponseMIMETypes": ["application/json"],
        },
        ModelApprovalStatus="PendingManualApproval",
    )
    prod = f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:model-package/hfpipe-prod-tiny-lora/1"
    code, _, err = run(capsys, "models", "approve", prod, "--env", "dev")
    assert code == 1 and "is not environment 'dev''s" in err
    assert sm.describe_model_package(ModelPackageName=prod)["ModelApprovalStatus"] == "PendingManualApproval"
    # And the dev list does not show prod's group.
    code, out, _ = run(capsys, "models", "--env", "dev", "--json")
    assert {v["group"] for v in json.loads(out)} == {GROUP}
