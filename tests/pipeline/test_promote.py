"""The Promote state machine on moto: a two-environment app (dev in eu-west-1; prod in us-east-1 and stage in
us-west-2, both promoting from dev) synthesized with the app_synth helpers; the target's Pipeline stack runs
on a local engine, the source's version is registered through boto3 in dev's region of the same moto.

An approved version is copied (bytes equal, multipart above the threshold) and registered in the target's
group with its source recorded and the target's approval status; an unapproved, another environment's or an
unknown version, a bad input and an image the target's catalog lacks are refused with nothing written; a
second promotion, or a retried step, returns the same version.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from typing import Any

import pytest
from app_synth import ARTIFACTS_BUCKET, synthesize_environments
from evaluations import CHAMPION_ARN, wrapper
from faults import Faults
from pipeline_lambdas import aws, promote
from promote_moto import (
    SOURCE_REGION,
    TARGET_REGION,
    catalog_image,
    promote_arn,
    register_source_version,
    target_engine,
    target_objects,
)

from hfpipe import contract
from hfpipe.core.promotion import promotion
from hfpipe.local.engine.engine import ACCOUNT

pytestmark = pytest.mark.slow
ENVIRONMENTS = {
    "dev": {"region": SOURCE_REGION, "removal_policy": "destroy"},
    "prod": {"region": TARGET_REGION, "promote_from": "dev"},
    "stage": {"region": "us-west-2", "promote_from": "dev", "model_approval": "Approved"},
}
_names = itertools.count()


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Any:
    return synthesize_environments(tmp_path_factory.mktemp("promote"), ENVIRONMENTS, nag=False)


@pytest.fixture(scope="module")
def target(request: pytest.FixtureRequest, app: Any) -> Iterator[Any]:
    """The target's engine: prod's, or (indirectly parametrized) another target's.

    moto and boto3's default session belong to the process, so two engines cannot run at once: the session's
    dev engine (conftest.py) steps aside while this module runs, and starts again for the modules after it."""
    shared = request.getfixturevalue("engine")
    shared.__exit__(None, None, None)
    try:
        name = getattr(request, "param", "prod")
        with target_engine(app.pipeline(name), name, ENVIRONMENTS[name]["region"]) as eng:
            eng.target = name
            yield eng
    finally:
        shared.__enter__()


@pytest.fixture
def promoting(target: Any) -> Iterator[Any]:
    """The target's engine with no errors queued, before the test and after it."""
    target.sagemaker_errors.clear()
    target.after_errors.clear()
    yield target
    target.sagemaker_errors.clear()
    target.after_errors.clear()


def run(engine: Any, execution_input: Any) -> Any:
    return engine.run(
        execution_input, name=f"promote-{next(_names)}", state_machine_arn=promote_arn(engine, engine.target)
    )


def group_versions(engine: Any, recipe: str) -> list[dict[str, Any]] | None:
    """The target group's version summaries (None: the group does not exist)."""
    sm = engine.client("sagemaker")
    group = contract.model_package_group_name(engine.target, recipe)
    try:
        sm.describe_model_package_group(ModelPackageGroupName=group)
    except sm.exceptions.ClientError:
        return None
    return sm.list_model_packages(ModelPackageGroupName=group)["ModelPackageSummaryList"]


def refused(r: Any, *fragments: str) -> str:
    assert (r.status, r.error) == ("FAILED", "PromotionRefused"), (r.status, r.error, r.cause)
    message = json.loads(r.cause)["errorMessage"]
    for fragment in fragments:
        assert fragment in message, message
    return str(message)


def test_an_approved_version_is_copied_and_registered_with_its_source(promoting, monkeypatch):
    # Above the threshold boto3's managed copy goes multipart (UploadPartCopy), as for any model over 5 GB.
    mib = 1024 * 1024
    monkeypatch.setattr(
        promote,
        "COPY_SETTINGS",
        {"multipart_threshold": 5 * mib, "multipart_chunksize": 5 * mib, "max_concurrency": 2},
    )
    body = bytes(range(256)) * (11 * 4096)  # 11 MiB: three parts
    source_arn = register_source_version(body=body, recipe="tiny-lora")
    parts: list[int] = []
    s3_client = aws.OVERRIDES["s3"]  # the target's, which the handler copies with
    count = lambda params, **_: parts.append(params["PartNumber"])  # noqa: E731
    s3_client.meta.events.register("before-parameter-build.s3.UploadPartCopy", count)
    try:
        r = run(promoting, {"version": "tiny-lora/1"})
    finally:
        s3_client.meta.events.unregister("before-parameter-build.s3.UploadPartCopy", count)
    assert r.status == "SUCCEEDED", r.cause
    assert sorted(parts) == [1, 2, 3]
    out = r.output
    # The output is the Promote step's typed answer (hfpipe.core.promotion.promote_plan), as `hfpipe promote` reads it.
    from hfpipe.core.promotion.promote_plan import Promoted

    assert Promoted.from_json(out).to_json() == out and out["created"] is True
    assert out["source"] == {
        "env": "dev",
        "region": SOURCE_REGION,
        "version_arn": source_arn,
        "ref": "tiny-lora/1",
    }
    prefix = "promoted/dev/tiny-lora/1/"
    assert out["model_data_url"] == f"s3://{ARTIFACTS_BUCKET}/{prefix}model.tar.gz"
    s3 = promoting.client("s3")
    assert s3.get_object(Bucket=ARTIFACTS_BUCKET, Key=f"{prefix}model.tar.gz")["Body"].read() == body
    target = out["target"]
    assert (target["env"], target["model_package_group"], target["ref"]) == (
        "prod",
        "hfpipe-prod-tiny-lora",
        "tiny-lora/1",
    )
    desc = promoting.client("sagemaker").describe_model_package(ModelPackageName=target["model_package_arn"])
    assert (
        desc["ModelApprovalStatus"] == target["approval_status"] == "PendingManualApproval"
    )  # prod's default
    assert desc["ModelPackageDescription"] == promotion.description(source_arn)
    meta = desc["CustomerMetadataProperties"]
    assert (meta["promoted_from"], meta["promoted_from_env"]) == (source_arn, "dev")
    assert meta["model_data"] == out["model_data_url"]
    assert meta["source_model_data"].startswith("s3://hfpipe-dev-data-") and meta["execution"] == "reg-1"
    (container,) = desc["InferenceSpecification"]["Containers"]
    assert container["ModelDataUrl"] == out["model_data_url"]
    assert container["Environment"] == {"HF_TASK": "text2text-generation"}
    # ECR images are regional: the same repository and tag, from the target region's catalog.
    assert container["Image"] == out["image"] == catalog_image(TARGET_REGION)
    assert catalog_image(SOURCE_REGION).split("/", 1)[1] == container["Image"].split("/", 1)[1]
    stats = desc["ModelMetrics"]["ModelQuality"]["Statistics"]["S3Uri"]
    assert stats == f"s3://{ARTIFACTS_BUCKET}/{prefix}metrics.json"
    doc = json.loads(s3.get_object(Bucket=ARTIFACTS_BUCKET, Key=f"{prefix}metrics.json")["Body"].read())
    assert doc["metrics"] == {"eval_loss": {"value": 1.5}, "train_loss": {"value": 1.25}}
    assert doc["model_package_group"] == "hfpipe-prod-tiny-lora" and doc["metadata"] == meta


def test_promoting_twice_or_a_retried_step_returns_the_same_version(promoting):
    source_arn = register_source_version(recipe="tiny-spot")
    first = run(promoting, {"version": source_arn})
    assert first.status == "SUCCEEDED" and first.output["created"] is True, first.cause
    again = run(promoting, {"version": "tiny-spot/1"})
    assert again.status == "SUCCEEDED" and again.output["created"] is False
    assert again.output["target"] == first.output["target"]
    # The handler registered, then the invocation failed as a Lambda service error: the Retry finds it.
    register_source_version(recipe="tiny-spot", execution="reg-2")
    promoting.after_errors["promote"] = ["Lambda.ServiceException"]
    retried = run(promoting, {"version": "tiny-spot/2"})
    assert retried.status == "SUCCEEDED" and retried.output["created"] is False, retried.cause
    assert [v["ModelPackageDescription"] for v in group_versions(promoting, "tiny-spot") or []] == [
        promotion.description(first.output["source"]["version_arn"]),
        promotion.description(retried.output["source"]["version_arn"]),
    ]


def test_throttling_is_retried_by_the_state_machine(promoting):
    register_source_version(recipe="tiny-mnli", execution="reg-t")
    promoting.sagemaker_errors["create_model_package"] = ["ThrottlingException"]
    r = run(promoting, {"version": "tiny-mnli/1"})
    assert r.status == "SUCCEEDED", r.cause
    failed = [e for e in r.history if e["type"] == "LambdaFunctionFailed"]
    assert [e["lambdaFunctionFailedEventDetails"]["error"] for e in failed] == ["ThrottlingException"]
    assert len(group_versions(promoting, "tiny-mnli") or []) == 1


@pytest.mark.parametrize(
    ("execution_input", "fragments"),
    [
        (
            {"version": "tiny-qa/1"},
            ["ModelApprovalStatus is 'PendingManualApproval'", "hfpipe models approve"],
        ),
        ({"version": "tiny-qa/9"}, ["no version", "hfpipe-dev-tiny-qa/9", "environment 'dev'"]),
        (
            {"version": f"arn:aws:sagemaker:{TARGET_REGION}:{ACCOUNT}:model-package/hfpipe-prod-tiny-qa/1"},
            ["not a version of environment 'dev'", "hfpipe-dev-<recipe>"],
        ),
        (
            {"version": f"arn:aws:sagemaker:us-west-2:{ACCOUNT}:model-package/hfpipe-dev-tiny-qa/1"},
            ["a version in region us-west-2", f"region {SOURCE_REGION}"],
        ),
        ({"version": "tiny qa"}, ["input.version 'tiny qa'", "RECIPE/N"]),
        ({"versions": "tiny-qa/1"}, ["input: ['versions'] is not accepted", "one key, version"]),
    ],
    ids=["unapproved", "unknown", "another-env", "another-region", "malformed", "bad-input"],
)
def test_refused_with_nothing_written(promoting, execution_input, fragments):
    register_source_version(approval="PendingManualApproval", recipe="tiny-qa", execution="pending")
    before = target_objects(promoting, ARTIFACTS_BUCKET)
    refused(run(promoting, execution_input), *fragments)
    assert target_objects(promoting, ARTIFACTS_BUCKET) == before
    assert group_versions(promoting, "tiny-qa") is None  # not even the group


def test_an_image_the_target_catalog_lacks_is_refused(promoting):
    # The source region's own registry (from the SDK's image tables), a tag no catalog has.
    registry = catalog_image(SOURCE_REGION).split("/", 1)[0]
    missing = f"{registry}/huggingface-pytorch-inference:0.0.1-gone"
    register_source_version(recipe="tiny-gone", image=missing)
    before = target_objects(promoting, ARTIFACTS_BUCKET)
    message = refused(run(promoting, {"version": "tiny-gone/1"}), "Image", "0.0.1-gone", "image catalog")
    assert "huggingface-pytorch-inference:2.6.0" in message  # what the catalog has
    assert (
        target_objects(promoting, ARTIFACTS_BUCKET) == before
        and group_versions(promoting, "tiny-gone") is None
    )


@pytest.mark.parametrize("target", ["stage"], indirect=True)
def test_the_target_registers_with_its_own_approval_status(promoting):
    register_source_version(recipe="tiny-lora")
    r = run(promoting, {"version": "tiny-lora/1"})
    assert r.status == "SUCCEEDED", r.cause
    assert r.output["target"]["approval_status"] == "Approved"  # stage's model_approval
    desc = promoting.client("sagemaker").describe_model_package(
        ModelPackageName=r.output["target"]["model_package_arn"]
    )
    assert desc["ModelApprovalStatus"] == "Approved" and ":us-west-2:" in desc["ModelPackageArn"]
    assert r.output["image"] == catalog_image("us-west-2")


def test_a_version_approved_after_registration_keeps_its_lineage(promoting):
    # Registered pending, then approved (UpdateModelPackage) as `hfpipe models approve` does; moto drops the
    # version's CustomerMetadataProperties there (AWS keeps them), the statistics document still has them.
    arn = register_source_version(recipe="tiny-late", approval="PendingManualApproval", execution="reg-late")
    import boto3

    boto3.client("sagemaker", region_name=SOURCE_REGION).update_model_package(
        ModelPackageArn=arn, ModelApprovalStatus="Approved"
    )
    r = run(promoting, {"version": "tiny-late/1"})
    assert r.status == "SUCCEEDED", r.cause
    desc = promoting.client("sagemaker").describe_model_package(
        ModelPackageName=r.output["target"]["model_package_arn"]
    )
    meta = desc["CustomerMetadataProperties"]
    assert (meta["execution"], meta["promoted_from"]) == ("reg-late", arn)


WRITES = {
    "sagemaker.CreateModelPackageGroup",
    "sagemaker.CreateModelPackage",
    "s3.CopyObject",
    "s3.CreateMultipartUpload",
    "s3.UploadPartCopy",
    "s3.PutObject",
}


def source_faults() -> Faults:
    """Every SageMaker and S3 call the Promote handler makes: the target's clients (the engine's, made
    once) and the source region's (made per call from boto3's default session)."""
    import boto3

    return Faults(
        boto3._get_default_session().events,
        *(aws.OVERRIDES[service].meta.events for service in ("sagemaker", "s3")),
        when=lambda service, op, params: service in ("sagemaker", "s3"),
    )


def test_every_read_and_check_comes_before_the_first_write(promoting):
    register_source_version(recipe="tiny-order", execution="reg-order")
    with source_faults() as faults:
        r = run(promoting, {"version": "tiny-order/1"})
    assert r.status == "SUCCEEDED", r.cause
    ops = faults.operations()
    first_write = min(i for i, op in enumerate(ops) if op in WRITES)
    reads = ops[:first_write]
    # The source version, its statistics document, the target's group (none yet: no versions to list), the
    # source's model.
    for read in (
        "sagemaker.DescribeModelPackage",
        "s3.GetObject",
        "sagemaker.DescribeModelPackageGroup",
        "s3.HeadObject",
    ):
        assert read in reads, (read, ops)
    (head,) = [p for _, op, p in faults.calls[:first_write] if op == "HeadObject"]
    assert head["Key"].endswith("/output/model.tar.gz") and head["Bucket"].startswith("hfpipe-dev-data-")


def _delete_source(key_part: str, recipe: str) -> str:
    import boto3

    s3 = boto3.client("s3", region_name=SOURCE_REGION)
    bucket = "hfpipe-dev-data-bucketsartifactsbucket-0a1b2c3d4e5f"
    (key,) = [
        o["Key"]
        for o in s3.list_objects_v2(Bucket=bucket)["Contents"]
        if key_part in o["Key"] and f"reg-{recipe}" in o["Key"]
    ]
    s3.delete_object(Bucket=bucket, Key=key)
    return key


@pytest.mark.parametrize(
    ("recipe", "key_part", "field"),
    [
        ("tiny-nomodel", "model.tar.gz", "InferenceSpecification.Containers[0].ModelDataUrl"),
        ("tiny-nostats", "metrics.json", "ModelMetrics.ModelQuality.Statistics.S3Uri"),
    ],
    ids=["model", "statistics"],
)
def test_a_missing_source_object_is_refused_naming_its_key_with_nothing_written(
    promoting, recipe, key_part, field
):
    register_source_version(recipe=recipe, execution=f"reg-{recipe}")
    key = _delete_source(key_part, recipe)
    before = target_objects(promoting, ARTIFACTS_BUCKET)
    message = refused(run(promoting, {"version": f"{recipe}/1"}), field, f"key {key!r}", "nothing written")
    assert "404" not in message
    assert target_objects(promoting, ARTIFACTS_BUCKET) == before
    assert group_versions(promoting, recipe) is None  # not even the group


@pytest.mark.parametrize(
    ("operation", "fragments"),
    [
        (
            "DescribeModelPackage",
            [
                "DescribeModelPackage arn:aws:sagemaker:eu-west-1:",
                "access denied (AccessDeniedException)",
                "the source group hfpipe-dev-tiny-deny-describemodelpackage's resource policy",
                "put-model-package-group-policy",
            ],
        ),
        (
            "GetObject",
            [
                "GetObject s3://hfpipe-dev-data-",
                "access denied (AccessDenied)",
                "'s policy does not allow",
                "s3:GetObject on key 'model-metrics/",
                "PromoteToProd",
            ],
        ),
        (
            "HeadObject",
            [
                "HeadObject s3://hfpipe-dev-data-",
                "access denied (403)",
                "on key 'models/",
                "S3 answers 403 for a missing key",
            ],
        ),
    ],
)
def test_a_refused_source_read_names_the_policy_and_how_to_add_it(promoting, operation, fragments):
    recipe = f"tiny-deny-{operation.lower()}"
    register_source_version(recipe=recipe, execution=f"reg-{recipe}")
    faults = source_faults()
    faults.when = lambda service, op, params: op == operation
    faults.code = {"DescribeModelPackage": "AccessDeniedException", "GetObject": "AccessDenied"}.get(
        operation, "403"
    )
    faults.fail_at = 0
    before = target_objects(promoting, ARTIFACTS_BUCKET)
    with faults:
        r = run(promoting, {"version": f"{recipe}/1"})
    message = refused(r, *fragments, "nothing written")
    assert len(message.splitlines()) == 1
    assert target_objects(promoting, ARTIFACTS_BUCKET) == before and group_versions(promoting, recipe) is None
    # Granted again (the fault was once): the rerun promotes.
    again = run(promoting, {"version": f"{recipe}/1"})
    assert again.status == "SUCCEEDED" and again.output["created"] is True, again.cause


def test_a_fault_at_every_call_of_the_promote_step_is_retried_or_fails_and_a_rerun_promotes(promoting):
    """Each AWS call of the Promote step fails once in turn: throttling is retried by the state machine; a 5xx
    fails the execution with AWS's error, and a rerun promotes the version once."""
    register_source_version(recipe="tiny-count", execution="reg-count")
    with source_faults() as faults:
        assert run(promoting, {"version": "tiny-count/1"}).status == "SUCCEEDED"
    count = len(faults.calls)
    assert count >= 8, faults.operations()
    for n in range(count):
        recipe = f"tiny-fault-{n}"
        register_source_version(recipe=recipe, execution=f"reg-{recipe}")
        faults = source_faults()
        faults.fail_at, faults.code = n, ("ThrottlingException", "InternalFailure")[n % 2]
        with faults:
            r = run(promoting, {"version": f"{recipe}/1"})
        assert faults.failed is not None, n
        if faults.code == "ThrottlingException":
            assert r.status == "SUCCEEDED", (n, faults.failed[1], r.cause)
        else:
            assert r.status == "FAILED" and "InternalFailure" in json.loads(r.cause)["errorMessage"], (
                n,
                r.cause,
            )
            again = run(promoting, {"version": f"{recipe}/1"})
            assert again.status == "SUCCEEDED", (n, faults.failed[1], again.cause)
        assert len(group_versions(promoting, recipe) or []) == 1, (n, faults.failed[1])


def test_the_gate_refuses_a_worse_version_and_an_override_passes_with_its_reason(promoting):
    worse = wrapper("worse", champion=CHAMPION_ARN)
    register_source_version(recipe="tiny-eval", execution="eval-1", evaluation=worse)
    before = target_objects(promoting, ARTIFACTS_BUCKET)
    refused(
        run(promoting, {"version": "tiny-eval/1"}),
        "refused by the evaluation gate: version tiny-eval/1 (dev) is worse than the champion",
        "f1 difference -3.1 (-5 to -1.2) at 95% confidence",
        "--override-evaluation",
    )
    assert target_objects(promoting, ARTIFACTS_BUCKET) == before
    r = run(promoting, {"version": "tiny-eval/1", "override_evaluation": "relabelled data"})
    assert r.status == "SUCCEEDED", r.cause
    desc = promoting.client("sagemaker").describe_model_package(
        ModelPackageName=r.output["target"]["model_package_arn"]
    )
    # Newcomer finding 4 (h-nc-eval2): the reason whole, as typed; the gate's short refusal beside it.
    assert desc["CustomerMetadataProperties"]["evaluation_override"] == "relabelled data"
    assert (
        desc["CustomerMetadataProperties"]["evaluation_override_refused"]
        == "tiny-eval/1 dev worse vs hfpipe-dev-tiny-qa/1 f1 -3.1 -5 to -1.2"
    ), desc["CustomerMetadataProperties"]
    # The evaluation goes with the version: the target's deploy compares its champion with what serves there.
    key = "promoted/dev/tiny-eval/1/metrics.json"
    doc = json.loads(promoting.client("s3").get_object(Bucket=ARTIFACTS_BUCKET, Key=key)["Body"].read())
    assert doc["evaluation"] == worse
