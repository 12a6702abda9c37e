"""Promote: an approved version of the source environment becomes a version of this one (hfpipe.core.promotion.promotion).

Every read and check comes before the first write: the source version (DescribeModelPackage: the environment's,
Approved, one container), its image in the target's catalog, its statistics document (GetObject), the
request SageMaker would take (botocore's model), the target's group and an earlier promotion of the version
(DescribeModelPackageGroup, ListModelPackages), and the source's model object (HeadObject). Any of these
refusing ends the step with PromotionRefused and nothing written: a missing object names its key; an
AccessDenied names the policy that lacks the grant (the source group's resource policy, the source bucket's
policy, or the Promote role's own) and how to add it (hfpipe.core.promotion.promotion_access.group_denied, bucket_denied).
Only then it writes: the target's group when missing, exactly as the Register step makes it
(register.ensure_group), the copy of model.tar.gz into this environment's artifacts bucket
(promoted/<source env>/<recipe>/<n>/), a statistics document there (the source's metrics, the new version's
metadata) and the version.

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
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from hfpipe import contract
from hfpipe.core import api_shapes, throttling
from hfpipe.core.promotion import evaluation_gate, promotion, promotion_access, registry
from hfpipe.core.promotion.promote_plan import (
    Promoted,
    PromotePlan,
    S3Object,
    SourceVersion,
    TargetVersion,
    promoted,
)
from hfpipe.core.promotion.promotion import PromotionRefused
from hfpipe.core.throttling import error_code
from pipeline_lambdas import aws
from pipeline_lambdas.register import described_version, ensure_group

LOG = aws.logger(__name__)
_MIB = 1024 * 1024
#: Parts of 256 MiB, 16 at a time (s3transfer raises the part size itself past 10,000 parts).
COPY_SETTINGS = {"multipart_threshold": 256 * _MIB, "multipart_chunksize": 256 * _MIB, "max_concurrency": 16}

__all__ = [
    "PromotionRefused",
    "Settings",
    "ThrottlingException",
    "carry_out",
    "handler",
    "plan_promotion",
    "promote",
]


#: The promoted version's CustomerMetadataProperties key of an evaluation gate override's reason.
EVALUATION_OVERRIDE_KEY = "evaluation_override"
EVALUATION_OVERRIDE_REFUSED_KEY = "evaluation_override_refused"


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
    #: cdk.json evaluation_gate of this (the target) environment (hfpipe.core.promotion.evaluation_gate).
    evaluation_gate: str = "advisory"
    #: This (the target's) account, from the invocation's function ARN; None when not known (a refusal then
    #: names the policies of both cases, one account and two).
    account: str | None = None

    def peers(self) -> promotion_access.Peers:
        """The target and its source, as hfpipe.core.promotion.promotion_access's refusals name them."""
        return promotion_access.Peers(
            self.partition, self.account, self.source_account, self.source_env, self.env
        )

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None, account: str | None = None) -> Settings:
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
            evaluation_gate=e.get("EVALUATION_GATE", "advisory"),
            account=account,
        )


@dataclass(frozen=True)
class Clients:
    """SageMaker and S3 of the target environment (this function's region) and of the source's region."""

    sagemaker: Any
    s3: Any
    source_sagemaker: Any
    source_s3: Any


def _denied(err: Exception) -> bool:
    return error_code(err) in promotion_access.DENIED_CODES


def _missing(err: Exception) -> bool:
    return error_code(err) in {"NoSuchKey", "404", "NotFound"}


def _describe(clients: Clients, arn: str, ref: str, s: Settings) -> dict[str, Any]:
    try:
        return dict(clients.source_sagemaker.describe_model_package(ModelPackageName=arn))
    except Exception as err:
        message = str(err).lower()
        if error_code(err) == "ValidationException" and (
            "does not exist" in message or "not found" in message
        ):
            raise PromotionRefused(
                f"input.version {ref!r}: no version {arn} in environment {s.source_env!r} ({s.source_region}); "
                f"accepted: a registered version (list them with `hfpipe models --env {s.source_env}`)"
            ) from None
        if _denied(err):
            raise PromotionRefused(promotion_access.group_denied(arn, error_code(err), s.peers())) from None
        raise


def _source_read(
    field: str, operation: str, bucket: str, key: str, s: Settings, call: Callable[[], Any]
) -> Any:
    """One read of the source's bucket; a missing object or a refusal becomes PromotionRefused naming it."""
    try:
        return call()
    except Exception as err:
        if _missing(err):
            raise PromotionRefused(
                promotion_access.missing_object(field, bucket, key, s.source_env)
            ) from None
        if _denied(err):
            raise PromotionRefused(
                promotion_access.bucket_denied(operation, bucket, key, error_code(err), s.peers())
            ) from None
        raise


def _source_metrics(clients: Clients, desc: dict[str, Any], s: Settings) -> dict[str, Any]:
    """The source's statistics document ({} when the version has none)."""
    stats = ((desc.get("ModelMetrics") or {}).get("ModelQuality") or {}).get("Statistics") or {}
    uri = str(stats.get("S3Uri") or "")
    if not uri:
        return {}
    field = "ModelMetrics.ModelQuality.Statistics.S3Uri"
    bucket, key = promotion_access.readable_source(field, uri, s.source_env)
    body = _source_read(
        field,
        "GetObject",
        bucket,
        key,
        s,
        lambda: clients.source_s3.get_object(Bucket=bucket, Key=key)["Body"].read(),
    )
    try:
        document = json.loads(body)
    except ValueError:
        raise PromotionRefused(
            f"{field} s3://{bucket}/{key}: not a JSON document; accepted: the statistics document the "
            "Register step writes; nothing written"
        ) from None
    return document if isinstance(document, dict) else {}


def _target_version(clients: Clients, group: str, source_arn: str) -> dict[str, Any] | None:
    """The version an earlier promotion of ``source_arn`` registered in the target's ``group``, if any; a
    read only (the group may not exist yet)."""
    try:
        clients.sagemaker.describe_model_package_group(ModelPackageGroupName=group)
    except Exception as err:
        if error_code(err) == "ValidationException" and "does not exist" in str(err):
            return None
        raise
    return described_version(clients.sagemaker, group, promotion.description(source_arn))


def promote(
    ref: str,
    execution_name: str,
    s: Settings,
    clients: Clients,
    copy_settings: dict[str, int] | None = None,
    override: str | None = None,
) -> dict[str, Any]:
    """Promote the source version ``ref`` (RECIPE/N or its ARN) once; returns the execution's output.
    ``override``: the evaluation gate's override reason (``hfpipe promote --override-evaluation``)."""
    try:
        return _promote(ref, execution_name, s, clients, copy_settings or COPY_SETTINGS, override)
    except Exception as err:
        if throttling.is_throttled(err):
            raise ThrottlingException(str(err)) from err
        raise


def _promote(
    ref: str,
    execution_name: str,
    s: Settings,
    clients: Clients,
    copy_settings: dict[str, int],
    override: str | None,
) -> dict[str, Any]:
    plan = plan_promotion(ref, s, clients, override)
    if (
        plan.promoted_before is not None
    ):  # promoted before: nothing to read of the source's model, nothing to write
        before = plan.promoted_before
        return promoted(plan, before.model_package_arn, before.approval_status, False).to_json()
    return carry_out(plan, s, clients, copy_settings).to_json()


def plan_promotion(ref: str, s: Settings, clients: Clients, override: str | None = None) -> PromotePlan:
    """Every read and check, before anything is written: the source version, its image in this environment's
    catalog, its statistics document, the request SageMaker would take, an earlier promotion of the version,
    and (unless there was one) the source's model object."""
    arn = promotion.source_version(
        ref, s.source_env, partition=s.partition, region=s.source_region, account=s.source_account
    )
    desc = _describe(clients, arn, ref, s)
    recipe, number = promotion.promotable(desc, s.source_env)
    source = SourceVersion(
        env=s.source_env,
        region=s.source_region,
        version_arn=str(desc["ModelPackageArn"]),
        ref=f"{recipe}/{number}",
    )
    (container,) = desc["InferenceSpecification"]["Containers"]
    image = promotion.target_image(str(container.get("Image", "")), s.catalog, s.allowed_registries)
    group = contract.model_package_group_name(s.env, recipe)
    prefix = promotion.artifact_prefix(s.source_env, recipe, number)
    model, metrics = (
        S3Object(bucket=s.bucket, key=f"{prefix}model.tar.gz"),
        S3Object(bucket=s.bucket, key=f"{prefix}metrics.json"),
    )
    # Read before anything is written. The source's lineage: its version's metadata, else (moto drops it on
    # UpdateModelPackage; AWS keeps it) what its statistics document repeats.
    source_document = _source_metrics(clients, desc, s)
    gate = promotion.evaluation_decision(
        source_document,
        source.ref,
        source_env=s.source_env,
        env=s.env,
        mode=s.evaluation_gate,
        override=override,
    )
    lineage = {**(source_document.get("metadata") or {}), **(desc.get("CustomerMetadataProperties") or {})}
    properties = promotion.metadata(
        {str(k): str(v) for k, v in lineage.items()},
        source_arn=source.version_arn,
        source_env=s.source_env,
        model_data_url=model.uri,
    )
    properties.update(_override_properties(gate))
    request = _checked_request(desc, s, recipe, image, model, metrics, properties)
    before = _target_version(clients, group, source.version_arn)
    return PromotePlan(
        source=source,
        env=s.env,
        recipe=recipe,
        model_package_group=group,
        image=image,
        model=model,
        metrics=metrics,
        source_model=None if before is not None else _source_model(clients, container, s),
        statistics=promotion.statistics(source_document, group, properties),
        request=request,
        promoted_before=None if before is None else _earlier(before, s.env, group, recipe),
    )


def _override_properties(gate: evaluation_gate.Decision) -> dict[str, str]:
    r"""The promoted version's metadata of an override: its reason whole (evaluation_gate.check_override with
    ``metadata=True`` held it to CustomerMetadataValue, 256 characters of [\p{L}\p{Z}\p{N}_.:/=+-@], before
    anything was written), and the gate's short refusal (its own words) in the characters a value takes."""
    if gate.reason is None:
        return {}
    return {
        EVALUATION_OVERRIDE_KEY: gate.reason,
        EVALUATION_OVERRIDE_REFUSED_KEY: evaluation_gate.metadata_value(gate.refused or "-"),
    }


def _checked_request(
    desc: dict[str, Any],
    s: Settings,
    recipe: str,
    image: str,
    model: S3Object,
    metrics: S3Object,
    properties: dict[str, str],
) -> dict[str, Any]:
    """CreateModelPackage for the target, or PromotionRefused when SageMaker's model says it would refuse it."""
    request = promotion.package_request(
        desc,
        env=s.env,
        recipe=recipe,
        image=image,
        model_data_url=model.uri,
        metrics_uri=metrics.uri,
        approval=s.approval,
        properties=properties,
    )
    problems = api_shapes.problems("CreateModelPackage", request)
    if problems:
        raise PromotionRefused(
            f"{problems[0]}: SageMaker's CreateModelPackage would refuse it; nothing written"
        )
    return request


def _earlier(found: dict[str, Any], env: str, group: str, recipe: str) -> TargetVersion:
    arn = str(found["ModelPackageArn"])
    number = int(arn.rsplit("/", 1)[-1])
    status = found.get("ModelApprovalStatus")
    return TargetVersion(
        env=env,
        model_package_group=group,
        model_package_arn=arn,
        version=number,
        ref=f"{recipe}/{number}",
        approval_status=None if status is None else str(status),
    )


_MODEL_FIELD = "InferenceSpecification.Containers[0].ModelDataUrl"


def _source_model(clients: Clients, container: dict[str, Any], s: Settings) -> S3Object:
    """The source's model.tar.gz, once its HeadObject answered (a missing or refused object is named)."""
    bucket, key = promotion_access.readable_source(_MODEL_FIELD, str(container["ModelDataUrl"]), s.source_env)
    _source_read(
        _MODEL_FIELD,
        "HeadObject",
        bucket,
        key,
        s,
        lambda: clients.source_s3.head_object(Bucket=bucket, Key=key),
    )
    return S3Object(bucket=bucket, key=key)


def carry_out(plan: PromotePlan, s: Settings, clients: Clients, copy_settings: dict[str, int]) -> Promoted:
    """The writes of ``plan``: the target's group when missing, the copy of the model, the statistics
    document, the version."""
    assert plan.source_model is not None  # planned with the source's model read
    source = plan.source_model
    created_group = ensure_group(clients.sagemaker, plan.env, plan.recipe)
    from boto3.s3.transfer import TransferConfig

    # The copy reads the source again (its own HeadObject, then GetObject or UploadPartCopy): the object
    # deleted or its grant removed since the check above is named the same way, with what was written.
    try:
        _source_read(
            _MODEL_FIELD,
            "CopyObject",
            source.bucket,
            source.key,
            s,
            lambda: clients.s3.copy(
                {"Bucket": source.bucket, "Key": source.key},
                plan.model.bucket,
                plan.model.key,
                # The source's object tags are not the target's (and copying them needs tagging permissions).
                ExtraArgs={"TaggingDirective": "REPLACE"},
                SourceClient=clients.source_s3,
                Config=TransferConfig(**copy_settings),
            ),
        )
    except PromotionRefused as err:
        made = f"the group {plan.model_package_group} only (a rerun uses it)" if created_group else "nothing"
        raise PromotionRefused(str(err).replace("nothing written", f"written: {made}")) from None
    clients.s3.put_object(
        Bucket=plan.metrics.bucket,
        Key=plan.metrics.key,
        Body=json.dumps(plan.statistics, indent=2).encode(),
        ContentType="application/json",
    )
    target_arn = clients.sagemaker.create_model_package(**plan.request)["ModelPackageArn"]
    result = promoted(plan, target_arn, s.approval, True)
    aws.log_json(LOG, "promoted", created_group=created_group, **result.to_json())
    return result


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Event: {"input": <execution input: {"version": ...}>, "execution_name": <$$.Execution.Name>}."""
    execution_name = str(event.get("execution_name") or "")
    aws.bind(event, execution_name)
    arn = str(getattr(context, "invoked_function_arn", "") or "")
    settings = Settings.from_env(account=arn.split(":")[4] if arn.count(":") >= 6 else None)
    clients = Clients(
        sagemaker=aws.client("sagemaker"),
        s3=aws.client("s3"),
        source_sagemaker=aws.client("sagemaker", region=settings.source_region),
        source_s3=aws.client("s3", region=settings.source_region),
    )
    event_input = event.get("input")
    version = promotion.check_input(event_input)
    return promote(version, execution_name, settings, clients, override=promotion.override_of(event_input))
