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


#: An environment whose SSM parameters say nothing of its shared base (the checkout's cdk.json is read then).
NO_PARAMETERS = SimpleNamespace(get_parameters=lambda **_: {"Parameters": [], "InvalidParameters": []})


class Pages:
    def __init__(self, pages: list[dict[str, Any]]) -> None:
        self.pages = pages

    def paginate(self, **_: Any) -> list[dict[str, Any]]:
        return self.pages


def absent(what: str) -> Exception:
    error = Exception(f"Could not find {what}")
    error.response = {"Error": {"Code": "ValidationException"}}  # type: ignore[attr-defined]
    return error


class SageMaker:
    """What the command reads at its end: the component (InService, serving version 3's artifact), the
    environment's model package groups, and the other adapters on the base (``others``: name -> status)."""

    def __init__(self, exists: bool = True, others: dict[str, str] | None = None, base: bool = True) -> None:
        self.exists, self.others, self.base = exists, others or {}, base

    def describe_inference_component(self, InferenceComponentName: str, **_: Any) -> dict[str, Any]:
        if InferenceComponentName in self.others:
            return {
                "InferenceComponentName": InferenceComponentName,
                "EndpointName": "hfpipe-dev-shared-base",
                "InferenceComponentStatus": self.others[InferenceComponentName],
                "Specification": {"BaseInferenceComponentName": "hfpipe-dev-shared-base"},
            }
        if not self.exists or (InferenceComponentName == "hfpipe-dev-shared-base" and not self.base):
            raise absent("inference component")
        return {
            "InferenceComponentStatus": "InService",
            "Specification": {"Container": {"ArtifactUrl": ARTIFACT}},
        }

    def describe_endpoint(self, **_: Any) -> dict[str, Any]:
        if not self.base:
            raise absent("endpoint")
        return {"EndpointStatus": "InService"}

    describe_endpoint_config = describe_model = describe_endpoint

    def get_paginator(self, operation: str) -> Pages:
        if operation == "list_inference_components":
            return Pages([{"InferenceComponents": [{"InferenceComponentName": n} for n in self.others]}])
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
        sfn=SimpleNamespace(describe_execution=lambda **_: execution), sagemaker=sagemaker, ssm=NO_PARAMETERS
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
    code, lines, _ = follow(_deleted_execution([]), SageMaker(exists=False), capsys)
    assert code == 0
    assert lines[-2:] == [
        "deleted: hfpipe-dev-adapter-support; no other adapter was touched",
        # The environment's SSM says nothing of its base here, so the checkout's cdk.json is read: dev's base
        # scales to zero.
        "  no adapter is left on the shared base hfpipe-dev-shared-base; it keeps billing (1 x ml.g5.4xlarge, "
        "2.03 USD/h) until 15 idle minutes have passed (it scales to zero; a call wakes it) or it is retired: "
        "hfpipe deploy --env dev --retire-base",
    ], lines


def _deleted_execution(remaining: list[str]) -> dict[str, Any]:
    deleted = AdapterDeleted(
        component="hfpipe-dev-adapter-support",
        remaining=remaining,
        base=BaseBilling(
            endpoint="hfpipe-dev-shared-base",
            instance_type="ml.g5.4xlarge",
            instances=1,
            usd_per_hour=2.03,
            retire_command="hfpipe deploy --env dev --retire-base",
        ),
    )
    return {"status": "SUCCEEDED", "output": json.dumps(deleted.to_json())}


def test_the_last_two_deletes_at_once_each_say_what_bills(capsys):
    """Two deletes at once: each step saw the other adapter still there ("remaining"); by the end the other
    is Deleting, so no adapter stays, and the line says what keeps billing (read at the end, not taken from
    the step)."""
    others = {"hfpipe-dev-adapter-sales": "Deleting"}
    code, lines, _ = follow(
        _deleted_execution(["hfpipe-dev-adapter-sales"]), SageMaker(False, others), capsys
    )
    assert code == 0 and "it keeps billing (1 x ml.g5.4xlarge, 2.03 USD/h)" in lines[-1], lines
    others = {"hfpipe-dev-adapter-sales": "InService"}
    code, lines, _ = follow(_deleted_execution([]), SageMaker(False, others), capsys)
    assert lines[-1] == "  still on the shared base hfpipe-dev-shared-base: sales", lines  # --adapter's name


def _nothing(sagemaker: SageMaker, request: dict[str, str]) -> tuple[bool, list[str]]:
    clients = SimpleNamespace(sagemaker=sagemaker, ssm=NO_PARAMETERS)
    out = io.StringIO()
    done = deploy_adapter._nothing_to_change(clients, "dev", request, None, Console(file=out, width=400))
    return done, out.getvalue().strip().splitlines()


def test_a_finished_delete_or_retirement_run_again_is_done_and_says_what_bills():
    """A rerun after Ctrl-C (the delete went on without the command), or after its last step failed once AWS
    had done it: no execution starts, exit 0, and what still bills is said."""
    done, lines = _nothing(SageMaker(exists=False), {"action": "delete", "adapter": "support"})
    assert done and "adapter support: not on dev's shared base (deleted already" in lines[0], lines
    assert "adapters on it: none" in lines[0] and "it keeps billing" in lines[1], lines
    done, lines = _nothing(
        SageMaker(False, {"hfpipe-dev-adapter-sales": "InService"}),
        {"action": "delete", "adapter": "support"},
    )
    assert done and "adapters on it: sales" in lines[0] and len(lines) == 1, lines
    done, lines = _nothing(SageMaker(exists=False, base=False), {"action": "retire"})
    assert done and lines == [
        "the shared base of dev: nothing of it is left (deleted already); nothing to retire"
    ]
    assert _nothing(SageMaker(), {"action": "retire"}) == (False, [])
    assert _nothing(SageMaker(), {"action": "deploy", "adapter": "support"}) == (False, [])


def test_a_base_that_scales_to_zero_bills_until_its_idle_window_has_passed():
    """The last adapter's delete says what the base bills and until when: with scale_to_zero, until its idle
    window has passed (then nothing until a call wakes it), not until it is retired."""
    from hfpipe.core.adapters.scale_to_zero import ScaleToZero

    out = io.StringIO()
    deployed = SimpleNamespace(scale_to_zero=ScaleToZero(enabled=True, idle_minutes=15))
    billing = json.loads(_deleted_execution([])["output"])["base"]
    deploy_adapter._keeps_billing(Console(file=out, width=400), "dev", BaseBilling(**billing), deployed)
    assert out.getvalue().strip() == (
        "no adapter is left on the shared base hfpipe-dev-shared-base; it keeps billing (1 x ml.g5.4xlarge, "
        "2.03 USD/h) until 15 idle minutes have passed (it scales to zero; a call wakes it) or it is retired: "
        "hfpipe deploy --env dev --retire-base"
    )
