"""`hfpipe deploy --adapter` / `--retire-base` as the command ends (hfpipe.cli.adapters.deploy_adapter): a failed
change prints the execution's error with the way back's own error in its cause, and its last line names what
the component serves, read from it (its artifact and the version that holds it); a delete that leaves no
adapter says what still bills and names the command that retires the base (issue 44)."""

from __future__ import annotations

import io
import json
from types import SimpleNamespace
from typing import Any

from accounts import ACCOUNT
from rich.console import Console

from hfpipe.cli.adapters import deploy_adapter
from hfpipe.core.adapters.adapter_plan import AdapterDeleted, BaseBilling

ARTIFACT = "s3://artifacts/run-3/output/model.tar.gz"
GROUP = "hfpipe-dev-tiny-adapter"
VERSION = f"arn:aws:sagemaker:eu-west-1:{ACCOUNT}:model-package/{GROUP}/3"


class Pages:
    def __init__(self, pages: list[dict[str, Any]]) -> None:
        self.pages = pages

    def paginate(self, **_: Any) -> list[dict[str, Any]]:
        return self.pages


class SageMaker:
    """What the command reads at its end: the component (InService, serving version 3's artifact) and the
    environment's model package groups."""

    def __init__(self, exists: bool = True) -> None:
        self.exists = exists

    def describe_inference_component(self, **_: Any) -> dict[str, Any]:
        if not self.exists:
            error = Exception("Could not find inference component")
            error.response = {"Error": {"Code": "ValidationException"}}  # type: ignore[attr-defined]
            raise error
        return {
            "InferenceComponentStatus": "InService",
            "Specification": {"Container": {"ArtifactUrl": ARTIFACT}},
        }

    def get_paginator(self, operation: str) -> Pages:
        if operation == "list_model_package_groups":
            return Pages([{"ModelPackageGroupSummaryList": [{"ModelPackageGroupName": GROUP}]}])
        return Pages([{"ModelPackageSummaryList": [{"ModelPackageArn": VERSION}]}])

    def describe_model_package(self, **_: Any) -> dict[str, Any]:
        return {
            "ModelPackageArn": VERSION,
            "ModelPackageVersion": 3,
            "InferenceSpecification": {"Containers": [{"ModelDataUrl": ARTIFACT}]},
        }


def follow(execution: dict[str, Any], sagemaker: SageMaker, capsys: Any) -> tuple[int, list[str], str]:
    clients = SimpleNamespace(
        sfn=SimpleNamespace(describe_execution=lambda **_: execution), sagemaker=sagemaker
    )
    out = io.StringIO()
    console = Console(file=out, width=400)
    code = deploy_adapter._follow(clients, "arn", "dev", "hfpipe-dev-adapter-support", None, 0.0, console)
    return code, out.getvalue().strip().splitlines(), capsys.readouterr().err


def test_a_failed_change_shows_the_way_backs_error_and_ends_naming_what_serves(capsys):
    cause = (
        '{"errorType": "SmokeTestFailed", "errorMessage": "smoke test: not a chat.completion"}; the way back '
        'failed too: ClientError: {"errorMessage": "An error occurred (ValidationException) when calling the '
        'UpdateInferenceComponent operation"}'
    )
    code, lines, err = follow(
        {"status": "FAILED", "error": "SmokeTestFailed", "cause": cause}, SageMaker(), capsys
    )
    assert code == 1
    assert "the way back failed too: ClientError" in err and "UpdateInferenceComponent" in err, err
    assert lines[-1] == f"hfpipe-dev-adapter-support now: InService, serving tiny-adapter/3 ({ARTIFACT})", (
        lines
    )


def test_deleting_the_last_adapter_says_what_bills_and_how_to_retire_the_base(capsys):
    deleted = AdapterDeleted(
        component="hfpipe-dev-adapter-support",
        remaining=[],
        base=BaseBilling(
            endpoint="hfpipe-dev-shared-base",
            instance_type="ml.g5.4xlarge",
            instances=1,
            usd_per_hour=2.03,
            retire_command="hfpipe deploy --env dev --retire-base",
        ),
    )
    execution = {"status": "SUCCEEDED", "output": json.dumps(deleted.to_json())}
    code, lines, _ = follow(execution, SageMaker(exists=False), capsys)
    assert code == 0
    assert lines[-2:] == [
        "deleted: hfpipe-dev-adapter-support; no other adapter was touched",
        "  no adapter is left on the shared base hfpipe-dev-shared-base; it keeps billing (1 x ml.g5.4xlarge, "
        "2.03 USD/h) until it is retired: hfpipe deploy --env dev --retire-base",
    ], lines
