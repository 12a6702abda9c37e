"""The Register step on the real state machine (moto): one model package version per successful deploy, none
when the smoke test fails or the recipe does not deploy, none twice for one execution; its requests are
what botocore's model of SageMaker accepts, and a failed registration fails the run through clean-up."""

from __future__ import annotations

import dataclasses
import itertools
import json
from typing import Any

import botocore.session
import pytest
from accounts import ACCOUNT
from app_synth import ARTIFACTS_BUCKET
from botocore.stub import Stubber
from pipeline_lambdas import register

from hfpipe import contract
from hfpipe.core import api_shapes
from hfpipe.core.promotion import registry
from hfpipe.core.run.plan_model import Plan

pytestmark = pytest.mark.slow
_ids = itertools.count()
GROUP = "hfpipe-dev-tiny-qa"


def run(engine: Any, **inp: Any) -> tuple[str, Any]:
    name = f"reg-{next(_ids)}"
    return name, engine.run({"recipe_name": "tiny-qa", "poll_seconds": 1, **inp}, name=name)


def versions_of(engine: Any, name: str) -> list[dict[str, Any]]:
    """The versions of the tiny-qa group this execution registered (by their description)."""
    sm = engine.client("sagemaker")
    try:
        sm.describe_model_package_group(ModelPackageGroupName=GROUP)
    except sm.exceptions.ClientError:
        return []
    summaries = sm.list_model_packages(ModelPackageGroupName=GROUP, MaxResults=100)["ModelPackageSummaryList"]
    return [s for s in summaries if s.get("ModelPackageDescription") == registry.description(name)]


def test_a_deployed_run_registers_one_version(fresh):
    def metrics(request, job):
        job.final_metric_data_list = [
            {"MetricName": "eval_loss", "Value": 0.5, "Timestamp": job.creation_time}
        ]

    fresh.training = metrics
    name, r = run(fresh)
    assert r.status == "SUCCEEDED", r.cause
    assert r.states.index("SmokeTest") < r.states.index("Register") < r.states.index("KeepEndpoint?")
    (summary,) = versions_of(fresh, name)
    sm = fresh.client("sagemaker")
    desc = sm.describe_model_package(ModelPackageName=summary["ModelPackageArn"])
    plan = Plan.from_json(r.output["plan"])
    assert desc["ModelApprovalStatus"] == "PendingManualApproval"  # dev's cdk.json names none
    spec = desc["InferenceSpecification"]
    assert spec["Containers"][0]["Image"] == plan.inference_image_uri
    assert spec["Containers"][0]["ModelDataUrl"].endswith(f"{plan.training_job_name}/output/model.tar.gz")
    assert spec["SupportedContentTypes"] == spec["SupportedResponseMIMETypes"] == ["application/json"]
    assert spec["SupportedRealtimeInferenceInstanceTypes"] == [plan.serving_instance_type]
    stats = desc["ModelMetrics"]["ModelQuality"]["Statistics"]
    key = f"model-metrics/{name}/metrics.json"
    assert stats == {"ContentType": "application/json", "S3Uri": f"s3://{ARTIFACTS_BUCKET}/{key}"}
    doc = json.loads(fresh.client("s3").get_object(Bucket=ARTIFACTS_BUCKET, Key=key)["Body"].read())
    assert doc["metrics"] == {"eval_loss": {"value": 0.5}} and doc["model_package_group"] == GROUP
    meta = desc["CustomerMetadataProperties"]
    assert meta == doc["metadata"]
    assert {k: meta[k] for k in ("execution", "recipe", "training_job", "task", "serving_kind")} == {
        "execution": name,
        "recipe": "tiny-qa",
        "training_job": plan.training_job_name,
        "task": plan.task,
        "serving_kind": plan.serving_kind,
    }
    assert meta["source_asset"].startswith("s3://") and "cost_usd" in meta
    assert r.output["report"]["model_package_arn"] == summary["ModelPackageArn"]
    assert r.output["registered"]["version"] == summary["ModelPackageVersion"]


def test_no_version_without_deploy_or_when_the_smoke_test_fails(fresh):
    name, r = run(fresh, deploy=False)
    assert r.status == "SUCCEEDED" and "Register" not in r.states
    assert versions_of(fresh, name) == []
    fresh.endpoint = lambda n, body: [{"generated_text": "not a QA answer"}]
    name, r = run(fresh)
    assert (r.status, r.error) == ("FAILED", "SmokeTestFailed")
    assert "Register" not in r.states and versions_of(fresh, name) == []


def test_a_retried_register_step_registers_once(fresh):
    # The handler registers, then the invocation fails as a Lambda service error: the Retry runs it again.
    fresh.after_errors["register"] = ["Lambda.ServiceException"]
    name, r = run(fresh)
    assert r.status == "SUCCEEDED", r.cause
    assert r.states.count("Register") == 1 and len(versions_of(fresh, name)) == 1
    assert r.output["registered"]["created"] is False  # the second attempt found the first one's version


def test_a_failed_registration_fails_the_run_through_cleanup(fresh):
    fresh.after_errors["register"] = ["RegistrationRefused"]
    name, r = run(fresh, keep_endpoint=True)
    assert (r.status, r.error) == ("FAILED", "RegistrationRefused"), r.cause
    assert r.states[-3:] == ["CleanupOnError", "ReportError", "PipelineFailed"]
    # Not kept: the endpoint is tagged only after registration, so clean-up deletes it.
    assert f"dev-{name}-ep" not in fresh.sagemaker_resources()["endpoints"]


# --- the handler's requests and idempotency, without the state machine ----------------------------------


def _plan(engine: Any) -> Plan:
    _, r = run(engine, deploy=True)
    return Plan.from_json(r.output["plan"])


def test_requests_are_what_botocore_accepts(fresh):
    plan = _plan(fresh)
    props = registry.metadata(plan, cost_usd=0.0123, model_data_url="s3://b/models/j/output/model.tar.gz")
    requests = {
        "CreateModelPackageGroup": registry.group_request("dev", "tiny-qa"),
        "CreateModelPackage": registry.package_request(
            plan,
            model_data_url="s3://b/models/j/output/model.tar.gz",
            metrics_uri="s3://b/model-metrics/x/metrics.json",
            approval="Approved",
            properties=props,
        ),
        "UpdateModelPackage": {
            "ModelPackageArn": f"arn:aws:sagemaker:eu-west-1:{ACCOUNT}:model-package/hfpipe-dev-tiny-qa/1",
            "ModelApprovalStatus": "Rejected",
            "ApprovalDescription": "eval_loss regressed",
        },
    }
    client = botocore.session.get_session().create_client("sagemaker", region_name="eu-west-1")
    for operation, request in requests.items():
        assert api_shapes.problems(operation, request) == [], operation
        method = {"CreateModelPackageGroup": "create_model_package_group"}.get(operation)
        with Stubber(client) as stub:  # botocore's own parameter validation
            answer = {"ModelPackageGroupArn": "arn:x"} if method else {"ModelPackageArn": "arn:x"}
            stub.add_response(method or _snake(operation), answer, request)
            getattr(client, method or _snake(operation))(**request)
    assert api_shapes.problems("CreateModelPackage", {**requests["CreateModelPackage"], "ClientToken": "a_b"})
    # A version takes its group's tags: AWS takes no Tags with ModelPackageGroupName (the API reference).
    tagged = {**requests["CreateModelPackage"], "Tags": plan.tags}
    assert api_shapes.problems("CreateModelPackage", tagged) == [
        "CreateModelPackage.Tags: not accepted with ModelPackageGroupName (a versioned model package uses its "
        "group's tags); accepted: no Tags"
    ]
    unversioned = {k: v for k, v in tagged.items() if k != "ModelPackageGroupName"}
    assert api_shapes.problems("CreateModelPackage", {**unversioned, "ModelPackageName": "x"}) == []
    sagemaker = fresh.client("sagemaker")  # the emulation refuses it as AWS does
    with pytest.raises(sagemaker.exceptions.ClientError, match="versioned model package"):
        sagemaker.create_model_package(**tagged)
    with pytest.raises(ValueError, match="approval: 'Rejected' is not accepted"):
        registry.package_request(
            plan, model_data_url="s3://b/m", metrics_uri="s3://b/x", approval="Rejected", properties={}
        )


def _snake(operation: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in operation).lstrip("_")


def test_a_group_made_meanwhile_is_fine_and_other_errors_are_not():
    """AWS's answers (moto overwrites an existing group instead): Describe says missing, Create says exists."""
    client = botocore.session.get_session().create_client("sagemaker", region_name="eu-west-1")
    request = registry.group_request("dev", "tiny-qa")
    missing = (
        f"ModelPackageGroup arn:aws:sagemaker:eu-west-1:{ACCOUNT}:model-package-group/{GROUP} does not exist."
    )
    with Stubber(client) as stub:
        stub.add_client_error("describe_model_package_group", "ValidationException", missing)
        stub.add_client_error(
            "create_model_package_group",
            "ValidationException",
            f"Model Package Group already exists: {GROUP}",
        )
        assert register.ensure_group(client, "dev", "tiny-qa") is False
        stub.add_client_error("describe_model_package_group", "ValidationException", missing)
        stub.add_response("create_model_package_group", {"ModelPackageGroupArn": "arn:x"}, request)
        assert register.ensure_group(client, "dev", "tiny-qa") is True
        stub.add_client_error("describe_model_package_group", "AccessDeniedException", "no")
        with pytest.raises(client.exceptions.ClientError, match="AccessDenied"):
            register.ensure_group(client, "dev", "tiny-qa")
    assert request["Tags"][-1] == {"Key": contract.TAG_MANAGED_BY, "Value": "hfpipe"}


def test_a_rerun_of_the_handler_returns_the_same_version(fresh):
    name, r = run(fresh)
    assert r.status == "SUCCEEDED", r.cause
    plan = Plan.from_json(r.output["plan"])
    training = fresh.client("sagemaker").describe_training_job(TrainingJobName=plan.training_job_name)
    again = register.register(
        plan, training, fresh.client("sagemaker"), fresh.client("s3"), ARTIFACTS_BUCKET, "Approved"
    )
    assert (
        again["created"] is False
        and again["model_package_arn"] == r.output["registered"]["model_package_arn"]
    )
    assert len(versions_of(fresh, name)) == 1


def test_an_auto_approving_environment_registers_approved_versions(fresh):
    name, r = run(fresh)
    assert r.status == "SUCCEEDED", r.cause
    other = dataclasses.replace(Plan.from_json(r.output["plan"]), execution_name=f"{name}-approved")
    training = fresh.client("sagemaker").describe_training_job(TrainingJobName=other.training_job_name)
    result = register.register(
        other, training, fresh.client("sagemaker"), fresh.client("s3"), ARTIFACTS_BUCKET, "Approved"
    )
    assert result["created"] is True and result["version"] > r.output["registered"]["version"]
    desc = fresh.client("sagemaker").describe_model_package(ModelPackageName=result["model_package_arn"])
    assert desc["ModelApprovalStatus"] == "Approved"
    assert desc["CustomerMetadataProperties"]["execution"] == f"{name}-approved"


def test_the_definition_registers_between_smoke_test_and_keep_endpoint(engine):
    states = engine.definition["States"]
    assert states["SmokeTest"]["Next"] == "Register"
    reg = states["Register"]
    assert reg["Next"] == "KeepEndpoint?" and reg["ResultPath"] == "$.registered"
    # Only the plan and the job's description go in; only the small result comes back (history stays small).
    assert reg["Parameters"] == {
        "plan.$": "$.plan",
        "training.$": "$.training",
        "evaluation.$": "$.evaluation",  # the StoreEvaluation step's wrapper ({} without one)
    }
    assert reg["Catch"] == [
        {"ErrorEquals": ["States.ALL"], "ResultPath": "$.error", "Next": "CleanupOnError"}
    ]
    retried = {e for r in reg["Retry"] for e in r["ErrorEquals"]}
    assert "States.ALL" not in retried and "Lambda.TooManyRequestsException" in retried
    # Nothing else leads to Register: a run that does not deploy or fails its smoke test never registers.
    assert [k for k, s in states.items() if s.get("Next") == "Register"] == ["SmokeTest"]


def test_an_update_of_a_version_changes_only_what_it_gives(fresh):
    """UpdateModelPackage as AWS answers it (every member but the ARN optional; CustomerMetadataProperties
    adds or updates keys, CustomerMetadataPropertiesToRemove removes them): an approval keeps the version's
    metadata (its recipe, lineage, the base an adapter needs), and a metadata change keeps its approval.
    moto 5.2.5 replaced both with what the call gave, None when it gave none (hfpipe.local.engine.moto_patches)."""
    sm = fresh.client("sagemaker")
    sm.create_model_package_group(ModelPackageGroupName="hfpipe-dev-updates")
    arn = sm.create_model_package(
        ModelPackageGroupName="hfpipe-dev-updates",
        InferenceSpecification={
            "Containers": [{"Image": "image", "ModelDataUrl": "s3://b/m.tar.gz"}],
            "SupportedContentTypes": ["application/json"],
            "SupportedResponseMIMETypes": ["application/json"],
        },
        ModelApprovalStatus="PendingManualApproval",
        CustomerMetadataProperties={
            "recipe": "tiny-adapter",
            "adapter_base_model": "hfpipe-fixtures/tiny-llama",
        },
    )["ModelPackageArn"]
    sm.update_model_package(ModelPackageArn=arn, ModelApprovalStatus="Approved", ApprovalDescription="good")
    sm.update_model_package(
        ModelPackageArn=arn,
        CustomerMetadataProperties={"note": "x"},
        CustomerMetadataPropertiesToRemove=["recipe"],
    )
    described = sm.describe_model_package(ModelPackageName=arn)
    assert described["ModelApprovalStatus"] == "Approved" and described["ApprovalDescription"] == "good"
    assert described["CustomerMetadataProperties"] == {
        "adapter_base_model": "hfpipe-fixtures/tiny-llama",
        "note": "x",
    }
