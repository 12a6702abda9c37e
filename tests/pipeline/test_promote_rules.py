"""Promotion's rules without a state machine (hfpipe.core.promotion.promotion), and the source's Register step sharing its
groups with Promote roles in other accounts (botocore's Stubber, AWS's answer shapes)."""

from __future__ import annotations

import json

import botocore.session
import pytest
from accounts import ACCOUNT as OWN_ACCOUNT
from accounts import ACCOUNT_A, ACCOUNT_B, ACCOUNT_C, ACCOUNT_D
from botocore.stub import Stubber
from pipeline_lambdas import promote, register

from hfpipe.core import api_shapes
from hfpipe.core.promotion import promotion, promotion_access
from hfpipe.core.promotion.promotion import PromotionRefused
from stacks.image_catalog import build_catalog

ACCOUNT = ACCOUNT_A  # the source environment's account
SOURCE = f"arn:aws:sagemaker:eu-west-1:{ACCOUNT}:model-package/hfpipe-dev-tiny-lora/3"


def _sagemaker() -> object:
    return botocore.session.get_session().create_client(
        "sagemaker", region_name="eu-west-1", aws_access_key_id="x", aws_secret_access_key="x"
    )


def test_the_register_step_shares_the_group_with_promote_roles_of_other_accounts():
    client = _sagemaker()
    group_arn = f"arn:aws:sagemaker:eu-west-1:{ACCOUNT}:model-package-group/hfpipe-dev-tiny-lora"
    roles = [
        f"arn:aws:iam::{ACCOUNT_B}:role/hfpipe-prod-promote",
        f"arn:aws:iam::{ACCOUNT_C}:role/hfpipe-qa-promote",
    ]
    with Stubber(client) as stub:
        stub.add_response(
            "describe_model_package_group",
            {
                "ModelPackageGroupName": "hfpipe-dev-tiny-lora",
                "ModelPackageGroupArn": group_arn,
                "CreationTime": "2025-01-01T00:00:00Z",
                "CreatedBy": {},
                "ModelPackageGroupStatus": "Completed",
            },
            {"ModelPackageGroupName": "hfpipe-dev-tiny-lora"},
        )
        policy = json.dumps(promotion.group_policy(group_arn, roles), sort_keys=True)
        stub.add_response(
            "put_model_package_group_policy",
            {"ModelPackageGroupArn": group_arn},
            {"ModelPackageGroupName": "hfpipe-dev-tiny-lora", "ResourcePolicy": policy},
        )
        register.share_group(client, "hfpipe-dev-tiny-lora", roles)
    (statement,) = json.loads(policy)["Statement"]
    assert statement["Principal"] == {
        "AWS": [f"arn:aws:iam::{ACCOUNT_B}:root", f"arn:aws:iam::{ACCOUNT_C}:root"]
    }
    assert statement["Action"] == "sagemaker:DescribeModelPackage"
    assert statement["Condition"] == {"ArnEquals": {"aws:PrincipalArn": roles}}
    with pytest.raises(ValueError, match="role_arns: empty"):
        promotion.group_policy(group_arn, [])


def test_the_version_reference_is_the_source_environments():
    where = {"partition": "aws", "region": "eu-west-1", "account": ACCOUNT}
    assert promotion.source_version("tiny-lora/3", "dev", **where) == SOURCE
    assert promotion.source_version(SOURCE, "dev", **where) == SOURCE
    for ref, fragment in (
        (SOURCE.replace("hfpipe-dev-", "hfpipe-prod-"), "not a version of environment 'dev'"),
        (SOURCE.replace(ACCOUNT, ACCOUNT_D), f"a version in region eu-west-1, account {ACCOUNT_D}"),
        ("tiny-lora/0", "not a version of environment 'dev'"),
        ("tiny-lora", "not a version of environment 'dev'"),
    ):
        with pytest.raises(PromotionRefused, match=r"^input\.version") as refused:
            promotion.source_version(ref, "dev", **where)
        assert fragment in str(refused.value)
    assert promotion.check_input({"version": "tiny-lora/3"}) == "tiny-lora/3"
    for bad in ({}, {"version": 3}, {"version": "x", "env": "dev"}, ["tiny-lora/3"]):
        with pytest.raises(PromotionRefused, match=r"^input"):
            promotion.check_input(bad)


def test_images_map_onto_the_target_regions_catalog():
    source, target = build_catalog("eu-west-1"), build_catalog("us-east-1")
    for scope in ("inference", "vllm"):
        targets = {uri for by_processor in target[scope].values() for uri in by_processor.values()}
        for by_processor in source[scope].values():
            for uri in by_processor.values():
                mapped = promotion.target_image(uri, target)
                assert mapped in targets and ".us-east-1." in mapped
                assert mapped.split("/", 1)[1] == uri.split("/", 1)[1]  # repository:tag
    own = f"{OWN_ACCOUNT}.dkr.ecr.eu-west-1.amazonaws.com/my-server:1"
    assert promotion.target_image(own, target, [f"{OWN_ACCOUNT}.dkr.ecr.eu-west-1.amazonaws.com"]) == own
    with pytest.raises(PromotionRefused) as refused:
        promotion.target_image(own, target)
    assert str(refused.value).startswith("InferenceSpecification.Containers[0].Image '" + own + "'")
    assert "allowed_image_registries" in str(refused.value)


def test_metadata_records_the_source_and_keeps_within_sagemakers_limits():
    source = {
        "execution": "reg-1",
        "model_data": "s3://dev-bucket/models/j/output/model.tar.gz",
        "promoted_from": "x",
    }
    source.update({f"k{i}": "v" for i in range(60)})
    source["long"] = "x" * 257
    meta = promotion.metadata(
        source, source_arn=SOURCE, source_env="dev", model_data_url="s3://prod/promoted/m"
    )
    assert list(meta)[:3] == ["promoted_from", "promoted_from_env", "model_data"]
    assert (meta["promoted_from"], meta["model_data"]) == (SOURCE, "s3://prod/promoted/m")
    assert meta["source_model_data"] == source["model_data"] and meta["execution"] == "reg-1"
    assert len(meta) == 50 and "long" not in meta


def test_the_promoted_versions_request_is_what_botocore_accepts():
    desc = {
        "ModelPackageArn": SOURCE,
        "InferenceSpecification": {
            "Containers": [
                {
                    "Image": "a/b:c",
                    "ImageDigest": "sha256:0",
                    "ModelDataUrl": "s3://x/m",
                    "Environment": {"A": "1"},
                }
            ],
            "SupportedContentTypes": ["application/json"],
            "SupportedResponseMIMETypes": ["application/json"],
            "SupportedRealtimeInferenceInstanceTypes": ["ml.m5.large"],
        },
    }
    props = promotion.metadata({}, source_arn=SOURCE, source_env="dev", model_data_url="s3://p/m")
    request = promotion.package_request(
        desc,
        env="prod",
        recipe="tiny-lora",
        image="d/b:c",
        model_data_url="s3://p/m",
        metrics_uri="s3://p/metrics.json",
        approval="PendingManualApproval",
        properties=props,
    )
    assert api_shapes.problems("CreateModelPackage", request) == []
    assert request["InferenceSpecification"]["Containers"] == [
        {"Image": "d/b:c", "ModelDataUrl": "s3://p/m", "Environment": {"A": "1"}}
    ]
    assert (
        request["ClientToken"] == promotion.client_token("prod", SOURCE) and len(request["ClientToken"]) == 36
    )
    client = _sagemaker()
    with Stubber(client) as stub:  # botocore's own parameter validation
        stub.add_response("create_model_package", {"ModelPackageArn": "arn:x"}, request)
        client.create_model_package(**request)
    with pytest.raises(ValueError, match="approval: 'Rejected' is not accepted"):
        promotion.package_request(desc, **{**_kwargs(props), "approval": "Rejected"})


def _kwargs(props: dict[str, str]) -> dict[str, object]:
    return {
        "env": "prod",
        "recipe": "tiny-lora",
        "image": "d/b:c",
        "model_data_url": "s3://p/m",
        "metrics_uri": "s3://p/x",
        "approval": "Approved",
        "properties": props,
    }


def test_settings_come_from_the_functions_environment():
    settings = promote.Settings.from_env(
        {
            "HFPIPE_ENV": "prod",
            "SOURCE_ENV": "dev",
            "SOURCE_REGION": "eu-west-1",
            "SOURCE_ACCOUNT": ACCOUNT,
            "ARTIFACTS_BUCKET": "b",
            "IMAGE_CATALOG": '{"inference": {}}',
            "ALLOWED_IMAGE_REGISTRIES": "r1,r2",
        }
    )
    assert (settings.partition, settings.approval, settings.allowed_registries) == (
        "aws",
        "PendingManualApproval",
        ("r1", "r2"),
    )


@pytest.mark.parametrize(
    ("account", "names", "not_named"),
    [
        (ACCOUNT_B, ["source ", f"arn:aws:iam::{ACCOUNT_B}:role/hfpipe-prod-promote"], ["own policy"]),
        (ACCOUNT, ["own policy", "npx cdk deploy -c env=prod --all"], ["the source "]),
        (None, ["in one account", "own policy", "across accounts", "the source "], []),
    ],
    ids=["two-accounts", "one-account", "account-unknown"],
)
def test_a_denied_source_read_names_the_policy_of_its_case(account, names, not_named):
    peers = promotion_access.Peers("aws", account, ACCOUNT, "dev", "prod")
    group = promotion_access.group_denied(SOURCE, "AccessDeniedException", peers)
    bucket = promotion_access.bucket_denied(
        "GetObject", "hfpipe-dev-data-x", "models/j/output/model.tar.gz", "AccessDenied", peers
    )
    assert group.startswith(f"DescribeModelPackage {SOURCE}: access denied (AccessDeniedException)")
    assert bucket.startswith("GetObject s3://hfpipe-dev-data-x/models/j/output/model.tar.gz: access denied")
    for message in (group, bucket):
        assert "\n" not in message and message.endswith("nothing written")
        for fragment in names:
            assert fragment in message, (fragment, message)
        for fragment in not_named:
            assert fragment not in message, (fragment, message)
    assert ("the source group hfpipe-dev-tiny-lora's resource policy" in group) == (account != ACCOUNT)
    assert ("put-model-package-group-policy" in group) == (account != ACCOUNT)
    assert ("PromoteToProd" in bucket) == (account != ACCOUNT)


@pytest.mark.parametrize(
    "url",
    [
        "s3://elsewhere/models/j/output/model.tar.gz",  # not the source's artifacts bucket
        "s3://hfpipe-dev-data-x/training/model.tar.gz",  # a key the Promote role may not read
        "s3://hfpipe-dev-data-x/",
        "https://hfpipe-dev-data-x/models/m",
    ],
)
def test_a_source_url_outside_the_promote_roles_grant_is_refused_before_any_call(url):
    with pytest.raises(
        PromotionRefused, match="not readable by the Promote role; accepted: s3://hfpipe-dev-data-"
    ):
        promotion_access.readable_source("InferenceSpecification.Containers[0].ModelDataUrl", url, "dev")
    assert promotion_access.readable_source("f", "s3://hfpipe-dev-data-x/models/j/m.tar.gz", "dev") == (
        "hfpipe-dev-data-x",
        "models/j/m.tar.gz",
    )
