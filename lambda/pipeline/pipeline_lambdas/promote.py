"""Promote: an approved version of the source environment becomes a version of this one (hfpipe.core.promotion).

Refuses (PromotionRefused, nothing written) a version that is not the source environment's, not Approved, not
found, or whose image the target's catalog lacks; otherwise copies its model.tar.gz into this environment's
artifacts bucket (promoted/<source env>/<recipe>/<n>/), writes a statistics document there (the source's
metrics, the new version's metadata) and registers the version in this environment's group for the recipe,
made when missing exactly as the Register step makes it (register.ensure_group).

Idempotent: a version whose description names the source version is returned as it is (nothing copied
again), so a retried or repeated promotion registers once.

The copy is boto3's managed copy (CopyObject up to ``COPY_CONFIG.multipart_threshold``, above it a multipart
UploadPartCopy, which handles objects over CopyObject's 5 GB limit, up to S3's 5 TB): S3 copies server-side,
the bytes never pass through the function. It must end within the function's timeout, Lambda's maximum of
15 minutes (stacks/functions/promote.py); a copy still running then fails the step (States.Timeout), and a
rerun copies again from the start.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any

from hfpipe import contract
from hfpipe.core import api_shapes, promotion, registry
from hfpipe.core.promotion import PromotionRefused
from pipeline_lambdas import aws
from pipeline_lambdas.register import described_version, ensure_group

LOG = aws.logger(__name__)
_MIB = 1024 * 1024
#: Parts of 256 MiB, 16 at a time (s3transfer raises the part size itself past 10,000 parts).
COPY_SETTINGS = {"multipart_threshold": 256 * _MIB, "multipart_chunksize": 256 * _MIB, "max_concurrency": 16}
_THROTTLING = {
    "ThrottlingException",
    "Throttling",
    "SlowDown",
    "TooManyRequestsException",
    "RequestLimitExceeded",
}

__all__ = ["PromotionRefused", "Settings", "ThrottlingException", "handler", "promote"]


class ThrottlingException(Exception):
    """An AWS API throttled the step past botocore's own retries; the state machine retries it with backoff."""


@dataclass(frozen=True)
class Settings:
    """The target environment's settings and its source's, from the function's environment (set by the stack)."""

    env: str
    source_env: str
    source_region: str
    source_account: str
    partition: str
    bucket: str
    approval: str
    catalog: dict[str, Any] = field(default_factory=dict)
    allowed_registries: tuple[str, ...] = ()

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> Settings:
        e = os.environ if env is None else env
        return cls(
            env=e["HFPIPE_ENV"],
            source_env=e["SOURCE_ENV"],
            source_region=e["SOURCE_REGION"],
            source_account=e["SOURCE_ACCOUNT"],
            partition=e.get("PARTITION", "aws"),
            bucket=e["ARTIFACTS_BUCKET"],
            approval=e.get("MODEL_APPROVAL_STATUS", registry.DEFAULT_APPROVAL),
            catalog=json.loads(e.get("IMAGE_CATALOG", "{}")),
            allowed_registries=tuple(r for r in e.get("ALLOWED_IMAGE_REGISTRIES", "").split(",") if r),
        )


@dataclass(frozen=True)
class Clients:
    """SageMaker and S3 of the target environment (this function's region) and of the source's region."""

    sagemaker: Any
    s3: Any
    source_sagemaker: Any
    source_s3: Any


def _code(err: Exception) -> str:
    return str((getattr(err, "response", None) or {}).get("Error", {}).get("Code", ""))


def _split(url: str) -> tuple[str, str]:
    bucket, _, key = url.removeprefix("s3://").partition("/")
    return bucket, key


def _describe(clients: Clients, arn: str, ref: str, s: Settings) -> dict[str, Any]:
    try:
        return dict(clients.source_sagemaker.describe_model_package(ModelPackageName=arn))
    except Exception as err:
        message = str(err).lower()
        if _code(err) == "ValidationException" and ("does not exist" in message or "not found" in message):
            raise PromotionRefused(
                f"input.version {ref!r}: no version {arn} in environment {s.source_env!r} ({s.source_region}); "
                f"accepted: a registered version (list them with `hfpipe models --env {s.source_env}`)"
            ) from None
        raise


def _source_metrics(clients: Clients, desc: dict[str, Any]) -> dict[str, Any]:
    """The source's statistics document ({} when the version has none)."""
    stats = ((desc.get("ModelMetrics") or {}).get("ModelQuality") or {}).get("Statistics") or {}
    uri = str(stats.get("S3Uri") or "")
    if not uri.startswith("s3://"):
        return {}
    bucket, key = _split(uri)
    document = json.loads(clients.source_s3.get_object(Bucket=bucket, Key=key)["Body"].read())
    return document if isinstance(document, dict) else {}


def promote(
    ref: str,
    execution_name: str,
    s: Settings,
    clients: Clients,
    copy_settings: dict[str, int] | None = None,
) -> dict[str, Any]:
    """Promote the source version ``ref`` (RECIPE/N or its ARN) once; returns the execution's output."""
    try:
        return _promote(ref, execution_name, s, clients, copy_settings or COPY_SETTINGS)
    except Exception as err:
        if _code(err) in _THROTTLING:
            raise ThrottlingException(str(err)) from err
        raise


def _promote(
    ref: str, execution_name: str, s: Settings, clients: Clients, copy_settings: dict[str, int]
) -> dict[str, Any]:
    arn = promotion.source_version(
        ref, s.source_env, partition=s.partition, region=s.source_region, account=s.source_account
    )
    desc = _describe(clients, arn, ref, s)
    recipe, number = promotion.promotable(desc, s.source_env)
    source_arn = str(desc["ModelPackageArn"])
    (container,) = desc["InferenceSpecification"]["Containers"]
    image = promotion.target_image(str(container.get("Image", "")), s.catalog, s.allowed_registries)
    group = contract.model_package_group_name(s.env, recipe)
    prefix = promotion.artifact_prefix(s.source_env, recipe, number)
    model_url = f"s3://{s.bucket}/{prefix}model.tar.gz"
    metrics_key = f"{prefix}metrics.json"
    # Read before anything is written. The source's lineage: its version's metadata, else (moto drops it on
    # UpdateModelPackage; AWS keeps it) what its statistics document repeats.
    source_document = _source_metrics(clients, desc)
    lineage = {**(source_document.get("metadata") or {}), **(desc.get("CustomerMetadataProperties") or {})}
    properties = promotion.metadata(
        {str(k): str(v) for k, v in lineage.items()},
        source_arn=source_arn,
        source_env=s.source_env,
        model_data_url=model_url,
    )
    request = promotion.package_request(
        desc,
        env=s.env,
        recipe=recipe,
        image=image,
        model_data_url=model_url,
        metrics_uri=f"s3://{s.bucket}/{metrics_key}",
        approval=s.approval,
        properties=properties,
    )
    problems = api_shapes.problems("CreateModelPackage", request)
    if problems:
        raise PromotionRefused(
            f"{problems[0]}: SageMaker's CreateModelPackage would refuse it; nothing written"
        )
    source = {
        "env": s.source_env,
        "region": s.source_region,
        "version_arn": source_arn,
        "ref": f"{recipe}/{number}",
    }

    # Every check has passed: from here on, writes.
    created_group = ensure_group(clients.sagemaker, s.env, recipe)
    found = described_version(clients.sagemaker, group, promotion.description(source_arn))
    if found is not None:
        status = found.get("ModelApprovalStatus")
        return _result(source, s.env, group, found["ModelPackageArn"], status, image, model_url, False)
    from boto3.s3.transfer import TransferConfig

    source_bucket, source_key = _split(str(container["ModelDataUrl"]))
    clients.s3.copy(
        {"Bucket": source_bucket, "Key": source_key},
        s.bucket,
        f"{prefix}model.tar.gz",
        # The source's object tags are not the target's (and copying them needs tagging permissions).
        ExtraArgs={"TaggingDirective": "REPLACE"},
        SourceClient=clients.source_s3,
        Config=TransferConfig(**copy_settings),
    )
    document = promotion.statistics(source_document, group, properties)
    clients.s3.put_object(
        Bucket=s.bucket,
        Key=metrics_key,
        Body=json.dumps(document, indent=2).encode(),
        ContentType="application/json",
    )
    target_arn = clients.sagemaker.create_model_package(**request)["ModelPackageArn"]
    result = _result(source, s.env, group, target_arn, s.approval, image, model_url, True)
    aws.log_json(LOG, "promoted", created_group=created_group, **result)
    return result


def _result(
    source: dict[str, str],
    env: str,
    group: str,
    arn: str,
    status: Any,
    image: str,
    model_url: str,
    created: bool,
) -> dict[str, Any]:
    number = int(arn.rsplit("/", 1)[-1])
    recipe = source["ref"].split("/", 1)[0]
    return {
        "source": source,
        "target": {
            "env": env,
            "model_package_group": group,
            "model_package_arn": arn,
            "version": number,
            "ref": f"{recipe}/{number}",
            "approval_status": status,
        },
        "image": image,
        "model_data_url": model_url,
        "created": created,
    }


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Event: {"input": <execution input: {"version": ...}>, "execution_name": <$$.Execution.Name>}."""
    execution_name = str(event.get("execution_name") or "")
    aws.bind(event, execution_name)
    settings = Settings.from_env()
    clients = Clients(
        sagemaker=aws.client("sagemaker"),
        s3=aws.client("s3"),
        source_sagemaker=aws.client("sagemaker", region=settings.source_region),
        source_s3=aws.client("s3", region=settings.source_region),
    )
    return promote(promotion.check_input(event.get("input")), execution_name, settings, clients)
