"""The adapter state machine's Apply applies the evaluation gate (pipeline_lambdas.adapter.check_evaluation, the
rule of hfpipe.core.promotion.evaluation_gate): a version evaluated worse than what the adapter serves is refused
with the figures, a stale evaluation too, an unevaluated one where the environment's gate is mandatory; the
override in the execution's input passes. The reads are SageMaker's and S3's answers in their real shape."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from accounts import ACCOUNT
from evaluations import wrapper
from pipeline_lambdas import adapter

from hfpipe.core.adapters.adapter_deploy import AdapterRefused

GROUP = "hfpipe-dev-tiny-adapter"
CHAMPION = f"arn:aws:sagemaker:eu-west-1:{ACCOUNT}:model-package/{GROUP}/1"
CHALLENGER = f"arn:aws:sagemaker:eu-west-1:{ACCOUNT}:model-package/{GROUP}/2"
ARTIFACTS = {
    CHAMPION: "s3://artifacts/run-1/output/model.tar.gz",
    CHALLENGER: "s3://artifacts/run-2/output/model.tar.gz",
}
STATS = "s3://artifacts/model-metrics/run-2/metrics.json"


def package(arn: str, stats: str | None = STATS) -> dict[str, Any]:
    desc: dict[str, Any] = {
        "ModelPackageArn": arn,
        "ModelApprovalStatus": "Approved",
        "InferenceSpecification": {"Containers": [{"Image": "img", "ModelDataUrl": ARTIFACTS[arn]}]},
    }
    if stats:
        desc["ModelMetrics"] = {
            "ModelQuality": {"Statistics": {"ContentType": "application/json", "S3Uri": stats}}
        }
    return desc


class SageMaker:
    """DescribeInferenceComponent of the adapter (serving ``serving``) and DescribeModelPackage."""

    def __init__(self, serving: str | None) -> None:
        self.serving = serving

    def describe_inference_component(self, InferenceComponentName: str) -> dict[str, Any]:
        if self.serving is None:
            error = Exception(f"Could not find inference component {InferenceComponentName}")
            error.response = {"Error": {"Code": "ValidationException", "Message": str(error)}}  # type: ignore[attr-defined]
            raise error
        return {
            "InferenceComponentName": InferenceComponentName,
            "Specification": {"Container": {"ArtifactUrl": self.serving}},
        }

    def describe_model_package(self, ModelPackageName: str) -> dict[str, Any]:
        return package(ModelPackageName)


class S3:
    def __init__(self, document: dict[str, Any]) -> None:
        self.document = document

    def get_object(self, Bucket: str, Key: str) -> dict[str, Any]:
        assert f"s3://{Bucket}/{Key}" == STATS
        return {"Body": io.BytesIO(json.dumps(self.document).encode())}


def stored(verdict: str, **figures: float) -> dict[str, Any]:
    evaluation = wrapper(verdict, champion=CHAMPION, target={"adapter": "support"}, **figures)
    evaluation["champion"]["model_data"] = ARTIFACTS[CHAMPION]
    return {"version": 1, "metrics": {}, "evaluation": evaluation}


def check(
    serving: str | None, document: dict[str, Any], override: str | None = None, stats: str | None = STATS
) -> None:
    request = {"action": "deploy", "adapter": "support", "version": "tiny-adapter/2"}
    if override is not None:
        request["override_evaluation"] = override
    adapter.check_evaluation(SageMaker(serving), S3(document), "dev", request, package(CHALLENGER, stats))


def test_a_worse_adapter_version_is_refused_with_its_figures():
    with pytest.raises(AdapterRefused) as refused:
        check(ARTIFACTS[CHAMPION], stored("worse"))
    message = str(refused.value)
    assert message.startswith(
        f"refused by the evaluation gate: version tiny-adapter/2 is worse than the champion {CHAMPION}"
    )
    assert "f1 difference -3.1 (-5 to -1.2) at 95% confidence" in message


def test_the_override_in_the_input_passes():
    check(ARTIFACTS[CHAMPION], stored("worse"), override="a known regression, fixed in /3")


def test_a_better_version_passes_and_so_does_an_adapter_not_yet_on_the_base():
    check(ARTIFACTS[CHAMPION], stored("better", low=0.5, high=3.0, value=1.0))
    check(None, stored("worse"))


def test_another_version_on_the_adapter_since_the_job_makes_it_stale():
    with pytest.raises(AdapterRefused, match="is stale: it was scored against"):
        check("s3://artifacts/run-7/output/model.tar.gz", stored("better", low=0.5, high=3.0, value=1.0))


def test_a_mandatory_gate_refuses_an_unevaluated_version(monkeypatch):
    check(ARTIFACTS[CHAMPION], {}, stats=None)  # advisory (the default)
    monkeypatch.setenv("EVALUATION_GATE", "mandatory")
    with pytest.raises(AdapterRefused, match=r"has no evaluation .* evaluation_gate is mandatory"):
        check(ARTIFACTS[CHAMPION], {}, stats=None)


def test_the_input_takes_the_override_only_with_a_deploy():
    assert adapter._request(
        {"action": "deploy", "adapter": "a", "version": "x/1", "override_evaluation": "why"}
    )
    with pytest.raises(AdapterRefused, match="not accepted"):
        adapter._request({"action": "delete", "adapter": "a", "override_evaluation": "why"})


def rollback(monkeypatch: pytest.MonkeyPatch, document: dict[str, Any], stats: str | None = STATS) -> None:
    """Apply with a rollback whose target (rollback_target's answer) is version 2."""
    monkeypatch.setattr(adapter, "other_deploy", lambda *a: None)
    monkeypatch.setattr(adapter, "base_of_environment", lambda: None)
    target = (package(CHALLENGER, stats), "s3://artifacts/run-3/output/model.tar.gz")
    monkeypatch.setattr(adapter.adapter_deploy, "rollback_target", lambda *a: target)
    monkeypatch.setattr(adapter.deploy_requests, "version_info", lambda *a: pytest.fail("went past the gate"))
    event = {
        "input": {"action": "rollback", "adapter": "support"},
        "state_machine": "sm",
        "execution_name": "x",
    }
    adapter.apply(event, "dev", {"stepfunctions": None, "sagemaker": SageMaker(None), "s3": S3(document)})


def test_a_rollback_to_a_version_the_gate_refuses_is_refused_and_a_passing_one_goes_on(monkeypatch):
    with pytest.raises(
        AdapterRefused, match=r"refused by the evaluation gate: version tiny-adapter/2 is worse"
    ):
        rollback(monkeypatch, stored("worse"))
    monkeypatch.setenv("EVALUATION_GATE", "mandatory")
    with pytest.raises(AdapterRefused, match=r"has no evaluation .* evaluation_gate is mandatory"):
        rollback(monkeypatch, {}, stats=None)
    # Judged against its own champion, not the version it leaves (/3 serves; /2 was better than /1): passes.
    with pytest.raises(pytest.fail.Exception, match="went past the gate"):
        rollback(monkeypatch, stored("better", low=0.5, high=3.0, value=1.0))


def test_a_version_the_adapter_serves_already_passes_as_its_own_champion():
    """Newcomer finding 7 (h-nc-eval2): a version serving on its target was told 'nothing serves' there."""
    request = {"action": "deploy", "adapter": "support", "version": "tiny-adapter/2"}
    decision = adapter.check_evaluation(
        SageMaker(ARTIFACTS[CHALLENGER]), S3(stored("worse")), "dev", request, package(CHALLENGER)
    )
    assert "it serves on adapter support itself (it is its own champion" in decision.message, decision.message
    assert "nothing serves" not in decision.message
