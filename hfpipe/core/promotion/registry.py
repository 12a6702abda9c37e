"""The model registry's rules: what the Register step sends to SageMaker, and how `hfpipe models` reads it back.

A run whose model passed the smoke test becomes one version of the environment's model package group for its
recipe (``contract.model_package_group_name``: hfpipe-<env>-<recipe>). The version carries the inference
specification the run's endpoint used, a statistics document of the job's final metrics (ModelMetrics ->
ModelQuality.Statistics, written to the artifacts bucket at ``metrics_key``), the run's lineage and cost as
CustomerMetadataProperties, the environment's approval status and the pipeline's tags.

A rerun of the step (a Lambda retried after it registered, a Catch that went round) finds the version it
made by its description (``description``, one per execution) before registering again, so an execution
registers at most one version; the request's ClientToken (``client_token``) makes SageMaker itself answer a
repeated in-flight request with the same version.

Stdlib only: the Register Lambda runs it, the command reads with it.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

from hfpipe import contract
from hfpipe.core.run.plan_model import Plan

#: What an environment may register new versions as (cdk.json ``model_approval``); the first is the default.
APPROVAL_STATUSES = ("PendingManualApproval", "Approved")
DEFAULT_APPROVAL = APPROVAL_STATUSES[0]
#: `hfpipe models approve|reject` -> ModelApprovalStatus (UpdateModelPackage).
DECISIONS = {"approve": "Approved", "reject": "Rejected"}
#: Every registered model answers JSON (the serving kinds' request contracts).
CONTENT_TYPES = ["application/json"]
#: The statistics document's own format version (``statistics``).
STATISTICS_VERSION = 1
#: The CustomerMetadataProperties key of the base an adapter version needs (``adapter_base``).
ADAPTER_BASE_KEY = "adapter_base_model"
#: SageMaker's model package ARN: arn:<partition>:sagemaker:<region>:<account>:model-package/<group>/<version>.
_VERSION_ARN = re.compile(r"^arn:aws[a-z-]*:sagemaker:[a-z0-9-]+:\d{12}:model-package/([^/]+)/(\d+)$")
_SHORT_REF = re.compile(r"^([A-Za-z0-9-]+)/(\d+)$")


class RegistryRefError(ValueError):
    """A version reference the command cannot use; the message names it and what is accepted."""


def group_prefix(env: str) -> str:
    """The start of every model package group name of ``env`` (env names have no '-', so it is unique)."""
    return contract.model_package_group_name(env, "")


def metrics_key(execution_name: str) -> str:
    """The artifacts bucket key of an execution's statistics document."""
    return f"{contract.ARTIFACTS_MODEL_METRICS_PREFIX}{execution_name}/metrics.json"


def description(execution_name: str) -> str:
    """The version's ModelPackageDescription: names the execution, which the rerun check looks for."""
    return f"hfpipe execution {execution_name}"


def client_token(env: str, execution_name: str) -> str:
    """CreateModelPackage's ClientToken (at most 36 of [a-zA-Z0-9-]): one per environment and execution."""
    return hashlib.sha256(f"{env}/{execution_name}".encode()).hexdigest()[:36]


def _money(value: float | None) -> str | None:
    return None if value is None else f"{value:.4f}"


def metadata(plan: Plan, *, cost_usd: float | None, model_data_url: str) -> dict[str, str]:
    """CustomerMetadataProperties: the run's lineage and cost, as strings (values may not be empty)."""
    hyperparameters = plan.training_job_request.get("HyperParameters") or {}
    source = str(hyperparameters.get("sagemaker_submit_directory", "")).strip('"')
    values = {
        "execution": plan.execution_name,
        "recipe": plan.recipe_name,
        "training_job": plan.training_job_name,
        "task": plan.task,
        "serving_kind": plan.serving_kind,
        "estimated_cost_usd": _money(plan.estimated_cost_usd),
        "cost_usd": _money(cost_usd),
        "source_asset": source or None,
        "model_data": model_data_url,
        ADAPTER_BASE_KEY: plan.adapter_base_model,
    }
    return {key: value for key, value in values.items() if value}


def adapter_base(package: dict[str, Any]) -> str | None:
    """The base model a version's unmerged adapter needs, as the version records it (a
    DescribeModelPackage answer's CustomerMetadataProperties); None for a version of a merged model."""
    value = (package.get("CustomerMetadataProperties") or {}).get(ADAPTER_BASE_KEY)
    return str(value) if value else None


def statistics(plan: Plan, final_metrics: dict[str, float], properties: dict[str, str]) -> dict[str, Any]:
    """The statistics document ModelMetrics.ModelQuality.Statistics points at: the training job's final
    metrics ({name: {"value": v}}, the shape of SageMaker Model Monitor's statistics entries) and the
    version's metadata, which `hfpipe models` reads from here (it survives UpdateModelPackage unchanged)."""
    return {
        "version": STATISTICS_VERSION,
        "model_package_group": contract.model_package_group_name(plan.env, plan.recipe_name),
        "metadata": properties,
        "metrics": {name: {"value": value} for name, value in sorted(final_metrics.items())},
    }


def group_request(env: str, recipe: str) -> dict[str, Any]:
    """CreateModelPackageGroup: one group per environment and recipe, tagged for the environment (not for
    an execution: the group outlives the run that made it)."""
    return {
        "ModelPackageGroupName": contract.model_package_group_name(env, recipe),
        "ModelPackageGroupDescription": f"hfpipe {env} models of recipe {recipe}",
        "Tags": [
            {"Key": contract.TAG_ENV, "Value": env},
            {"Key": contract.TAG_RECIPE, "Value": recipe},
            {"Key": contract.TAG_MANAGED_BY, "Value": contract.PROJECT},
        ],
    }


def package_request(
    plan: Plan,
    *,
    model_data_url: str,
    metrics_uri: str,
    approval: str,
    properties: dict[str, str],
) -> dict[str, Any]:
    """CreateModelPackage: one version in the recipe's group, deployable as the run's endpoint was."""
    if approval not in APPROVAL_STATUSES:
        raise ValueError(f"approval: {approval!r} is not accepted; accepted: {', '.join(APPROVAL_STATUSES)}")
    container: dict[str, Any] = {"Image": plan.inference_image_uri, "ModelDataUrl": model_data_url}
    if plan.serving_environment:
        container["Environment"] = plan.serving_environment
    return {
        "ModelPackageGroupName": contract.model_package_group_name(plan.env, plan.recipe_name),
        "ModelPackageDescription": description(plan.execution_name),
        "InferenceSpecification": {
            "Containers": [container],
            "SupportedContentTypes": CONTENT_TYPES,
            "SupportedResponseMIMETypes": CONTENT_TYPES,
            "SupportedRealtimeInferenceInstanceTypes": [plan.serving_instance_type],
        },
        "ModelMetrics": {
            "ModelQuality": {"Statistics": {"ContentType": "application/json", "S3Uri": metrics_uri}}
        },
        "CustomerMetadataProperties": properties,
        "ModelApprovalStatus": approval,
        "ClientToken": client_token(plan.env, plan.execution_name),
        # No Tags: a version takes its group's (api_shapes._RULES); the execution is in its metadata.
    }


def parse_ref(ref: str, env: str) -> tuple[str, int]:
    """(group name, version number) of a version ARN or ``<recipe>/<n>``, which must be ``env``'s: a
    version of another environment's group is refused (RegistryRefError)."""
    arn = _VERSION_ARN.fullmatch(ref)
    short = _SHORT_REF.fullmatch(ref)
    if arn:
        group, number = arn.group(1), int(arn.group(2))
    elif short:
        group, number = contract.model_package_group_name(env, short.group(1)), int(short.group(2))
    else:
        raise RegistryRefError(
            f"version {ref!r}: not accepted; accepted: a model package version ARN "
            f"(arn:aws:sagemaker:REGION:ACCOUNT:model-package/{group_prefix(env)}RECIPE/N) or RECIPE/N"
        )
    # SageMaker writes the group name in a version's ARN in lower case.
    if not group.lower().startswith(group_prefix(env).lower()):
        raise RegistryRefError(
            f"version {ref!r}: group {group!r} is not environment {env!r}'s; accepted: versions of the "
            f"groups {group_prefix(env)}<recipe> (pass that group's environment with --env)"
        )
    if number < 1:
        raise RegistryRefError(f"version {ref!r}: version numbers start at 1")
    return group, number


def check_ref_form(ref: str) -> str:
    """``ref`` when it has the form of a version reference (RECIPE/N with N >= 1, or a model package version
    ARN), whichever environment it names; RegistryRefError otherwise: what a command checks of VERSION as it
    parses its arguments, before any credentials or AWS call (``parse_ref`` checks the environment later)."""
    found = _VERSION_ARN.fullmatch(ref) or _SHORT_REF.fullmatch(ref)
    number = int(found.group(2)) if found else 0
    if number < 1:
        raise RegistryRefError(
            f"{ref!r} is not accepted; accepted: RECIPE/N (N from 1) or a model package version ARN "
            "(arn:aws:sagemaker:REGION:ACCOUNT:model-package/GROUP/N)"
        )
    return ref


def check_location(ref: str, env: str, *, region: str, account: str) -> None:
    """Refuse a version ARN of another region or account than the environment's (``region``, ``account``:
    where its state machine runs) before anything looks it up: SageMaker would answer "does not exist",
    which names neither. RECIPE/N is always the environment's own."""
    found = re.match(r"^arn:aws[a-z-]*:sagemaker:([a-z0-9-]+):(\d{12}):model-package/", ref)
    if found and (found.group(1), found.group(2)) != (region, account):
        raise RegistryRefError(
            f"version {ref!r}: a version in region {found.group(1)}, account {found.group(2)}; environment "
            f"{env!r} is in region {region}, account {account}; accepted: a version of its own registry "
            f"(RECIPE/N, or its ARN in that region and account; a version elsewhere: promote it first with "
            f"`hfpipe promote`, or pass --region/--profile of the environment it belongs to)"
        )


def ref_of_arn(arn: str, env: str) -> str:
    """RECIPE/N of a version ARN of ``env``'s groups (the way the commands name versions), else the ARN."""
    match = _VERSION_ARN.fullmatch(arn)
    if not match or not match.group(1).lower().startswith(group_prefix(env).lower()):
        return arn
    return f"{match.group(1)[len(group_prefix(env)) :]}/{match.group(2)}"


def metric_differences(
    a: dict[str, float], b: dict[str, float]
) -> list[tuple[str, float | None, float | None, float | None]]:
    """(metric, value in a, value in b, b - a) for every metric either reports, by name."""
    rows = []
    for name in sorted(set(a) | set(b)):
        va, vb = a.get(name), b.get(name)
        rows.append((name, va, vb, None if va is None or vb is None else vb - va))
    return rows
