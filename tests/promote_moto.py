"""Promotion on moto: a source environment's registered version, and a target's Promote state machine.

The source (cdk.json's dev, eu-west-1) is what its Register step would have left: a version of
hfpipe-dev-<recipe> with its model.tar.gz and statistics document in dev's artifacts bucket, registered
through boto3 in the source's region. The target's Promote state machine runs on a LocalEngine whose template
is the target's Pipeline stack (cdk.json's prod, us-east-1, which promotes from dev); moto's accounts and
regions are global within the engine's mock, so the Promote Lambda reads the source's region as in AWS.
"""

from __future__ import annotations

import json
from typing import Any

from app_synth import data_imports

from hfpipe import contract
from hfpipe.core.promotion import registry
from hfpipe.local.engine.engine import LocalEngine
from stacks.image_catalog import build_catalog

SOURCE, TARGET = "dev", "prod"
SOURCE_REGION, TARGET_REGION = "eu-west-1", "us-east-1"
# A name as CloudFormation gives dev's artifacts bucket (the Promote role reads hfpipe-dev-data-*).
SOURCE_BUCKET = "hfpipe-dev-data-bucketsartifactsbucket-0a1b2c3d4e5f"
RECIPE = "tiny-lora"
JOB = "dev-reg-1-train"


def catalog_image(region: str, processor: str = "cpu") -> str:
    """The inference image the recipes name, as the region's image catalog resolves it."""
    (by_processor,) = build_catalog(region)["inference"].values()
    return str(by_processor[processor])


def _client(service: str, region: str) -> Any:
    import boto3

    return boto3.client(service, region_name=region)


def register_source_version(
    *,
    approval: str = "Approved",
    image: str | None = None,
    body: bytes = b"model bytes",
    recipe: str = RECIPE,
    execution: str = "reg-1",
    evaluation: dict[str, Any] | None = None,
) -> str:
    """Register one version in the source's group for ``recipe`` as dev's Register step would; its ARN."""
    s3, sagemaker = _client("s3", SOURCE_REGION), _client("sagemaker", SOURCE_REGION)
    if SOURCE_BUCKET not in {b["Name"] for b in s3.list_buckets()["Buckets"]}:
        s3.create_bucket(
            Bucket=SOURCE_BUCKET, CreateBucketConfiguration={"LocationConstraint": SOURCE_REGION}
        )
    model_key = f"{contract.ARTIFACTS_OUTPUT_PREFIX}{JOB}-{execution}/output/model.tar.gz"
    s3.put_object(Bucket=SOURCE_BUCKET, Key=model_key, Body=body)
    group = contract.model_package_group_name(SOURCE, recipe)
    try:
        sagemaker.describe_model_package_group(ModelPackageGroupName=group)
    except sagemaker.exceptions.ClientError:
        sagemaker.create_model_package_group(**registry.group_request(SOURCE, recipe))
    properties = {
        "execution": execution,
        "recipe": recipe,
        "training_job": f"{JOB}-{execution}",
        "task": "summarization",
        "serving_kind": "hf-inference",
        "cost_usd": "0.0123",
        "model_data": f"s3://{SOURCE_BUCKET}/{model_key}",
    }
    metrics_key = registry.metrics_key(execution)
    document = {
        "version": registry.STATISTICS_VERSION,
        "model_package_group": group,
        "metadata": properties,
        "metrics": {"eval_loss": {"value": 1.5}, "train_loss": {"value": 1.25}},
    }
    if evaluation is not None:  # the wrapper the pipeline's evaluation step stores (tests/evaluations.py)
        document["evaluation"] = evaluation
    s3.put_object(Bucket=SOURCE_BUCKET, Key=metrics_key, Body=json.dumps(document).encode())
    arn = sagemaker.create_model_package(
        ModelPackageGroupName=group,
        ModelPackageDescription=registry.description(execution),
        InferenceSpecification={
            "Containers": [
                {
                    "Image": image or catalog_image(SOURCE_REGION),
                    "ModelDataUrl": f"s3://{SOURCE_BUCKET}/{model_key}",
                    "Environment": {"HF_TASK": "text2text-generation"},
                }
            ],
            "SupportedContentTypes": ["application/json"],
            "SupportedResponseMIMETypes": ["application/json"],
            "SupportedRealtimeInferenceInstanceTypes": ["ml.m5.large"],
        },
        ModelMetrics={
            "ModelQuality": {
                "Statistics": {
                    "ContentType": "application/json",
                    "S3Uri": f"s3://{SOURCE_BUCKET}/{metrics_key}",
                }
            }
        },
        CustomerMetadataProperties=properties,
        ModelApprovalStatus=approval,
    )["ModelPackageArn"]
    return str(arn)


def target_engine(template: dict[str, Any], target: str = TARGET, region: str = TARGET_REGION) -> LocalEngine:
    """The target's Pipeline stack (with its Promote state machine) on a local engine in the target's region."""
    return LocalEngine(template, imports=data_imports(target), region=region, time_scale=0.0)


def promote_arn(engine: LocalEngine, target: str = TARGET) -> str:
    """The Promote state machine the engine created from the target's template."""
    return engine.state_machine_arns[contract.promote_state_machine_name(target)]


def target_objects(engine: LocalEngine, bucket: str) -> list[str]:
    """The keys under promoted/ in the target's artifacts bucket."""
    listed = engine.client("s3").list_objects_v2(Bucket=bucket, Prefix=contract.ARTIFACTS_PROMOTED_PREFIX)
    return sorted(o["Key"] for o in listed.get("Contents", []))
