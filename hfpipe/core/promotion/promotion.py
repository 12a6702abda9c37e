"""Promotion's rules: which version of a source environment may be promoted, and what the Promote step writes.

An environment that names ``promote_from`` in cdk.json takes approved versions of that environment's model
package groups: the Promote Lambda copies the version's model.tar.gz into its own artifacts bucket
(``artifact_prefix``), writes a statistics document of its own next to it (the source's metrics, this
version's metadata), maps the inference image onto its own region's image catalog (``target_image``: ECR
images are regional) and registers a version in its own group for the recipe, recording the source version
(``metadata``: ``promoted_from``) and the source's lineage. Afterwards the target reads nothing of the
source: not its bucket, not its lifecycle rules.

A rerun finds the version it made by its description (``description``: one per source version), so a
source version is promoted into an environment at most once; CreateModelPackage's ClientToken
(``client_token``) makes SageMaker answer a repeated in-flight request with the same version.

Cross-account, the source grants the target's Promote role by name (``role_name``): a bucket policy
statement (``bucket_statement``) and the model package group's resource policy (``group_policy``, put by the
source's Register step). What the role may read of the source, and how a refusal of it is named:
hfpipe.core.promotion.promotion_access.

Stdlib only: the Promote and Register Lambdas run it, the stacks and the command read it.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping
from typing import Any

from hfpipe import contract
from hfpipe.core.promotion import evaluation_gate, registry
from hfpipe.core.validate import image_registry

#: The version's metadata key naming the source version's ARN (and the source environment's name).
PROMOTED_FROM = "promoted_from"
PROMOTED_FROM_ENV = "promoted_from_env"
#: Source metadata kept under another key: the target's own value replaces the original.
SOURCE_KEYS = {"model_data": "source_model_data"}
#: The one key of the Promote state machine's input, and the optional one (`hfpipe promote --override-evaluation`).
INPUT_KEYS = ("version",)
OVERRIDE_KEY = "override_evaluation"
#: CustomerMetadataProperties: at most 50 entries, values of 1 to 256 characters (CreateModelPackage).
_MAX_PROPERTIES = 50
_MAX_VALUE = 256
_IMAGE = re.compile(r"^(?P<host>[^/]+)/(?P<repository>[^:@]+):(?P<tag>[^:@/]+)$")
_REGION = re.compile(r"^arn:aws[a-z-]*:sagemaker:([a-z0-9-]+):(\d{12}):model-package/")


class PromotionRefused(ValueError):
    """A version this environment will not promote, or an input it cannot use; nothing was written."""


def role_name(env: str) -> str:
    """The Promote role's fixed name where the source is in another account: the source's bucket policy and
    group policy name it (aws:PrincipalArn) before the role exists; IAM names are unique per account."""
    return f"{contract.PROJECT}-{env}-promote"


def role_arn(partition: str, account: str, env: str) -> str:
    """The ARN the target environment's Promote role has in ``account``."""
    return f"arn:{partition}:iam::{account}:role/{role_name(env)}"


def artifact_prefix(source_env: str, recipe: str, version: int) -> str:
    """Where one promoted version's files go in the target's artifacts bucket: promoted/<env>/<recipe>/<n>/."""
    return f"{contract.ARTIFACTS_PROMOTED_PREFIX}{source_env}/{recipe}/{version}/"


def description(source_arn: str) -> str:
    """The promoted version's ModelPackageDescription: names the source version, which the rerun check finds."""
    return f"hfpipe promotion of {source_arn}"


def client_token(env: str, source_arn: str) -> str:
    """CreateModelPackage's ClientToken (at most 36 of [a-zA-Z0-9-]): one per target environment and source."""
    return hashlib.sha256(f"promote/{env}/{source_arn}".encode()).hexdigest()[:36]


def version_arn(partition: str, region: str, account: str, group: str, number: int) -> str:
    """A version's ARN as SageMaker writes it (the group name in lower case)."""
    return f"arn:{partition}:sagemaker:{region}:{account}:model-package/{group.lower()}/{number}"


def check_input(event_input: Any) -> str:
    """The ``version`` of the execution input ({"version": "<recipe>/<n>" or a version ARN})."""
    if not isinstance(event_input, Mapping) or set(event_input) - {OVERRIDE_KEY} != set(INPUT_KEYS):
        keys = sorted(event_input) if isinstance(event_input, Mapping) else type(event_input).__name__
        raise PromotionRefused(
            f"input: {keys!r} is not accepted; accepted: an object with one key, version "
            '(e.g. {"version": "tiny-lora/3"} or a version ARN of the source environment), and optionally '
            f"{OVERRIDE_KEY} (a reason)"
        )
    override = event_input.get(OVERRIDE_KEY, "")
    if not isinstance(override, str):
        raise PromotionRefused(
            f"input.{OVERRIDE_KEY}: {override!r} is not accepted; accepted: a reason, in words"
        )
    version = event_input["version"]
    if not isinstance(version, str) or not version:
        raise PromotionRefused(
            f"input.version: {version!r} is not accepted; accepted: RECIPE/N or a model package version ARN"
        )
    return version


def override_of(event_input: Any) -> str | None:
    """The evaluation gate's override reason of a checked input (``check_input``), if any."""
    value = event_input.get(OVERRIDE_KEY) if isinstance(event_input, Mapping) else None
    return str(value) if value is not None else None


def evaluation_decision(
    source_document: Mapping[str, Any],
    ref: str,
    *,
    source_env: str,
    env: str,
    mode: str,
    override: str | None,
) -> evaluation_gate.Decision:
    """The evaluation gate at promotion (hfpipe.core.promotion.evaluation_gate): the source version's stored
    evaluation decides, its champion as recorded (the source's target is read by the source's own commands;
    the target's `hfpipe deploy` reads what serves there before traffic moves); the target's
    ``evaluation_gate`` decides on a version with none. PromotionRefused when it refuses."""
    try:
        evaluated = evaluation_gate.of_statistics(dict(source_document))
    except evaluation_gate.EvaluationFormatError as err:
        raise PromotionRefused(f"version {ref} ({source_env}): {err}; the gate cannot decide on it") from None
    try:
        decision = evaluation_gate.decide(
            evaluated,
            version=f"{ref} ({source_env})",
            champion_now=evaluated.champion if evaluated else None,
            mode=mode,
            where=f"environment {env}",
            override=override,
            recorded=evaluation_gate.PROMOTE_RECORDED_IN,
            failed=evaluation_gate.failure_of(dict(source_document)),
        )
    except ValueError as err:
        raise PromotionRefused(str(err)) from None
    if not decision.allowed:
        raise PromotionRefused(f"refused by the evaluation gate: {decision.message}")
    return decision


def source_version(ref: str, source_env: str, *, partition: str, region: str, account: str) -> str:
    """The ARN of the source version ``ref`` names (``registry.parse_ref`` with the source environment, and an
    ARN only of the source's region and account)."""
    accepted = (
        f"accepted: RECIPE/N, or the ARN of a version of the groups {registry.group_prefix(source_env)}<recipe> "
        f"of environment {source_env!r} (region {region}, account {account}), the environment promoted from"
    )
    try:
        group, number = registry.parse_ref(ref, source_env)
    except registry.RegistryRefError:
        raise PromotionRefused(
            f"input.version {ref!r}: not a version of environment {source_env!r}; {accepted}"
        ) from None
    where = _REGION.match(ref)
    if where and (where.group(1), where.group(2)) != (region, account):
        raise PromotionRefused(
            f"input.version {ref!r}: a version in region {where.group(1)}, account {where.group(2)}; {accepted}"
        )
    return version_arn(partition, region, account, group, number)


def promotable(desc: Mapping[str, Any], source_env: str) -> tuple[str, int]:
    """(recipe, version number) of a described source version that may be promoted; else PromotionRefused."""
    arn = str(desc.get("ModelPackageArn", ""))
    try:
        group, number = registry.parse_ref(arn, source_env)
    except registry.RegistryRefError:
        raise PromotionRefused(
            f"input.version {arn}: not a version of the groups {registry.group_prefix(source_env)}<recipe>"
        ) from None
    status = desc.get("ModelApprovalStatus")
    if status != "Approved":
        raise PromotionRefused(
            f"input.version {arn}: ModelApprovalStatus is {status!r}; accepted: an Approved version (approve it "
            f"with `hfpipe models approve RECIPE/N --env {source_env}`)"
        )
    containers = (desc.get("InferenceSpecification") or {}).get("Containers") or []
    if len(containers) != 1 or not str(containers[0].get("ModelDataUrl", "")).startswith("s3://"):
        raise PromotionRefused(
            f"input.version {arn}: InferenceSpecification.Containers has {len(containers)} container(s); "
            "accepted: one container with an s3:// ModelDataUrl (what the Register step makes)"
        )
    return group.lower().removeprefix(registry.group_prefix(source_env).lower()), number


def _images(catalog: Mapping[str, Any]) -> list[str]:
    """Every image URI of an image catalog ({scope: {key: {processor: uri}}}; other entries are skipped)."""
    return sorted(
        uri
        for scope in catalog.values()
        if isinstance(scope, Mapping)
        for by_processor in scope.values()
        if isinstance(by_processor, Mapping)
        for uri in by_processor.values()
        if isinstance(uri, str) and _IMAGE.fullmatch(uri)
    )


def target_image(
    source_image: str, catalog: Mapping[str, Any], allowed_registries: Iterable[str] = ()
) -> str:
    """The target region's image for the source version's image: the catalog's image of the same repository
    and tag (ECR images are regional; the registry host names the region), or the image itself when its
    registry is one the target environment allows (cdk.json ``allowed_image_registries``)."""
    if image_registry(source_image) in set(allowed_registries):
        return source_image
    found = _IMAGE.fullmatch(source_image)
    images = _images(catalog)
    if found:
        wanted = (found.group("repository"), found.group("tag"))
        for uri in images:
            match = _IMAGE.fullmatch(uri)
            if match and (match.group("repository"), match.group("tag")) == wanted:
                return uri
    repositories = sorted({u.split("/", 1)[1] for u in images})
    raise PromotionRefused(
        f"InferenceSpecification.Containers[0].Image {source_image!r}: its repository:tag is not in the target "
        f"environment's image catalog; accepted: {', '.join(repositories) or 'none'} (add the recipe's "
        "container to the target's catalog by synthesizing it with that recipe, or allow its registry with "
        "allowed_image_registries)"
    )


def metadata(
    source: Mapping[str, str], *, source_arn: str, source_env: str, model_data_url: str
) -> dict[str, str]:
    """CustomerMetadataProperties of the promoted version: the source's lineage (its own metadata; its
    model_data as source_model_data), the source version and environment, and the copy's model_data."""
    values = {
        SOURCE_KEYS.get(k, k): v for k, v in source.items() if k not in (PROMOTED_FROM, PROMOTED_FROM_ENV)
    }
    values.update({PROMOTED_FROM: source_arn, PROMOTED_FROM_ENV: source_env, "model_data": model_data_url})
    kept = {k: str(v) for k, v in values.items() if v and len(str(v)) <= _MAX_VALUE}
    # The three promotion keys first: they are never the ones dropped past the limit.
    ordered = {k: kept[k] for k in (PROMOTED_FROM, PROMOTED_FROM_ENV, "model_data")} | kept
    return dict(list(ordered.items())[:_MAX_PROPERTIES])


def statistics(source_document: Mapping[str, Any], group: str, properties: dict[str, str]) -> dict[str, Any]:
    """The promoted version's statistics document: the source's metrics unchanged, this version's group and
    metadata (what `hfpipe models` reads back)."""
    metrics = source_document.get("metrics")
    document = {
        "version": registry.STATISTICS_VERSION,
        "model_package_group": group,
        "metadata": properties,
        "metrics": dict(metrics) if isinstance(metrics, Mapping) else {},
    }
    # The source's evaluation goes with it: the target's gate compares its champion with what serves there
    # (a promoted champion is its source: hfpipe.core.promotion.evaluation_gate.Champion).
    if source_document.get(evaluation_gate.STATISTICS_KEY) is not None:
        document[evaluation_gate.STATISTICS_KEY] = source_document[evaluation_gate.STATISTICS_KEY]
    return document


def package_request(
    source: Mapping[str, Any],
    *,
    env: str,
    recipe: str,
    image: str,
    model_data_url: str,
    metrics_uri: str,
    approval: str,
    properties: dict[str, str],
) -> dict[str, Any]:
    """CreateModelPackage of the promoted version: the source's inference specification with the target's
    image and model copy, the target's approval status (its tags are its group's)."""
    if approval not in registry.APPROVAL_STATUSES:
        raise ValueError(
            f"approval: {approval!r} is not accepted; accepted: {', '.join(registry.APPROVAL_STATUSES)}"
        )
    spec = source.get("InferenceSpecification") or {}
    (source_container,) = spec.get("Containers") or [{}]
    container: dict[str, Any] = {"Image": image, "ModelDataUrl": model_data_url}
    if source_container.get("Environment"):
        container["Environment"] = dict(source_container["Environment"])
    inference: dict[str, Any] = {"Containers": [container]}
    for key in (
        "SupportedContentTypes",
        "SupportedResponseMIMETypes",
        "SupportedRealtimeInferenceInstanceTypes",
        "SupportedTransformInstanceTypes",
    ):
        if spec.get(key):
            inference[key] = list(spec[key])
    source_arn = str(source["ModelPackageArn"])
    return {
        "ModelPackageGroupName": contract.model_package_group_name(env, recipe),
        "ModelPackageDescription": description(source_arn),
        "InferenceSpecification": inference,
        "ModelMetrics": {
            "ModelQuality": {"Statistics": {"ContentType": "application/json", "S3Uri": metrics_uri}}
        },
        "CustomerMetadataProperties": properties,
        "ModelApprovalStatus": approval,
        "ClientToken": client_token(env, source_arn),
        # No Tags: a version takes its group's (api_shapes._RULES).
    }


def group_policy(group_arn: str, role_arns: Iterable[str]) -> dict[str, Any]:
    """The resource policy of a source group read by Promote roles of other accounts (PutModelPackageGroupPolicy,
    as AWS documents for cross-account model registry access): DescribeModelPackage on the group's versions
    only, to each role's account, conditioned on the role's ARN (aws:PrincipalArn), since a policy naming a
    role that does not exist yet would be refused."""
    roles = sorted(set(role_arns))
    if not roles:
        raise ValueError(
            "role_arns: empty; accepted: the Promote role ARNs of the environments in other accounts"
        )
    # arn:<p>:sagemaker:<region>:<account>:model-package-group/<name> -> ...:model-package/<name>/*
    versions = group_arn.replace(":model-package-group/", ":model-package/", 1).lower() + "/*"
    accounts = sorted({arn.split(":")[4] for arn in roles})
    partition = roles[0].split(":")[1]
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "HfpipePromoteReadsVersions",
                "Effect": "Allow",
                "Principal": {"AWS": [f"arn:{partition}:iam::{a}:root" for a in accounts]},
                "Action": "sagemaker:DescribeModelPackage",
                "Resource": versions,
                "Condition": {"ArnEquals": {"aws:PrincipalArn": roles}},
            }
        ],
    }
