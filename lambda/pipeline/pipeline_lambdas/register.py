"""Register: a run whose endpoint passed the smoke test becomes a model package version (hfpipe.core.promotion.registry).

Idempotent: the group is made only when DescribeModelPackageGroup says it does not exist (and a concurrent
creation's "already exists" is fine); the version is made only when none in the group carries this
execution's description, so a retried or rerun step registers once.
"""

from __future__ import annotations

import json
import os
from typing import Any

from hfpipe.core import api_shapes
from hfpipe.core import cost as costs
from hfpipe.core.promotion import evaluation_gate, promotion, registry
from hfpipe.core.run.plan_model import Plan
from pipeline_lambdas import aws
from pipeline_lambdas.gate import final_metrics

LOG = aws.logger(__name__)


class RegistrationRefused(Exception):
    """A request SageMaker's API would refuse (botocore's model, hfpipe.core.api_shapes); nothing was sent."""


def _error(err: Exception) -> tuple[str, str]:
    response = getattr(err, "response", None) or {}
    error = response.get("Error") or {}
    return str(error.get("Code", "")), str(error.get("Message", ""))


def _checked(operation: str, request: dict[str, Any]) -> dict[str, Any]:
    found = api_shapes.problems(operation, request)
    if found:
        raise RegistrationRefused(f"{found[0]}: SageMaker's {operation} would refuse this request")
    return request


def ensure_group(sagemaker: Any, env: str, recipe: str) -> bool:
    """Create the recipe's group unless it exists; True when this call created it.

    CreateModelPackageGroup is not idempotent: for an existing name SageMaker answers ValidationException
    ("Model Package Group already exists"), and DescribeModelPackageGroup answers ValidationException
    ("... does not exist") for a missing one
    (https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_CreateModelPackageGroup.html,
    CommonErrors: ValidationException is the code SageMaker uses for both)."""
    request = _checked("CreateModelPackageGroup", registry.group_request(env, recipe))
    name = request["ModelPackageGroupName"]
    try:
        sagemaker.describe_model_package_group(ModelPackageGroupName=name)
        return False
    except Exception as err:
        code, message = _error(err)
        if code != "ValidationException" or "does not exist" not in message:
            raise
    try:
        sagemaker.create_model_package_group(**request)
    except Exception as err:
        code, message = _error(err)
        if code in ("ValidationException", "ResourceInUse") and "already exists" in message.lower():
            return False  # made by a concurrent run of this recipe in the meantime
        raise
    return True


def existing_version(sagemaker: Any, group: str, execution_name: str) -> dict[str, Any] | None:
    """The version of ``group`` this execution registered already, if any (by its description)."""
    return described_version(sagemaker, group, registry.description(execution_name))


def described_version(sagemaker: Any, group: str, wanted: str) -> dict[str, Any] | None:
    """The version summary of ``group`` whose description is ``wanted``, if any."""
    for page in sagemaker.get_paginator("list_model_packages").paginate(ModelPackageGroupName=group):
        for summary in page.get("ModelPackageSummaryList", []):
            if summary.get("ModelPackageDescription") == wanted:
                return dict(summary)
    return None


def share_group(sagemaker: Any, group: str, promote_roles: list[str]) -> None:
    """Put the group's resource policy letting the Promote roles of environments in other accounts read its
    versions (hfpipe.core.promotion.promotion.group_policy). Put at every registration, so a group made before an
    environment started promoting from this one is shared at its next registration; the policy is the
    Register step's own (a hand-made one is replaced)."""
    arn = sagemaker.describe_model_package_group(ModelPackageGroupName=group)["ModelPackageGroupArn"]
    policy = json.dumps(promotion.group_policy(arn, promote_roles), sort_keys=True)
    sagemaker.put_model_package_group_policy(ModelPackageGroupName=group, ResourcePolicy=policy)


def register(
    plan: Plan,
    training: dict[str, Any],
    sagemaker: Any,
    s3: Any,
    bucket: str,
    approval: str,
    promote_roles: list[str] | None = None,
    evaluation: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Register the run's model once; returns a small result for the state ($.registered).

    ``promote_roles``: the Promote role ARNs of environments in other accounts that promote from this one
    (``share_group``); none where every such environment shares this one's account. ``evaluation``: the
    StoreEvaluation step's wrapper (hfpipe.core.promotion.evaluation_gate.Evaluated), stored with the version:
    in its statistics document, and its verdict and headline figures in its CustomerMetadataProperties; or
    RecordEvaluationFailure's record of a failed job, stored the same way (verdict ``failed``, its cause)."""
    group = registry.group_request(plan.env, plan.recipe_name)["ModelPackageGroupName"]
    model_data_url = (training.get("ModelArtifacts") or {}).get("S3ModelArtifacts")
    if not model_data_url:
        raise RegistrationRefused("training.ModelArtifacts.S3ModelArtifacts: missing; nothing to register")
    created_group = ensure_group(sagemaker, plan.env, plan.recipe_name)
    if promote_roles:
        share_group(sagemaker, group, promote_roles)
    found = existing_version(sagemaker, group, plan.execution_name)
    if found is not None:
        return _result(group, found["ModelPackageArn"], found.get("ModelApprovalStatus"), created=False)
    training_s = float(training.get("TrainingTimeInSeconds") or 0)
    billable_s = float(training.get("BillableTimeInSeconds") or training_s)
    cost_usd = costs.estimate_cost(plan.instance_type, plan.instance_count, billable_s)
    properties = registry.metadata(plan, cost_usd=cost_usd, model_data_url=model_data_url)
    stored, headline = _evaluation(evaluation)
    properties.update(headline)
    key = registry.metrics_key(plan.execution_name)
    request = _checked(
        "CreateModelPackage",
        registry.package_request(
            plan,
            model_data_url=model_data_url,
            metrics_uri=f"s3://{bucket}/{key}",
            approval=approval,
            properties=properties,
        ),
    )
    document = registry.statistics(plan, final_metrics(training), properties)
    if stored is not None:
        document[evaluation_gate.STATISTICS_KEY] = stored
    # Written first, so the version never points at a missing document; a rerun writes the same key again.
    s3.put_object(
        Bucket=bucket, Key=key, Body=json.dumps(document, indent=2).encode(), ContentType="application/json"
    )
    arn = sagemaker.create_model_package(**request)["ModelPackageArn"]
    result = _result(group, arn, approval, created=True)
    aws.log_json(LOG, "registered", created_group=created_group, **result)
    return result


def _evaluation(evaluation: dict[str, Any] | None) -> tuple[dict[str, Any] | None, dict[str, str]]:
    """What the version stores of its evaluation (its statistics document's, None: none) and its
    CustomerMetadataProperties: the wrapper and its headline, or a failed job's record (``evaluation: failed``
    with its cause, which the gate reads as no evaluation: evaluation_gate.failure_of)."""
    if not evaluation:
        return None, {}
    if evaluation_gate.failure_of({evaluation_gate.STATISTICS_KEY: evaluation}) is not None:
        return evaluation, evaluation_gate.failure_headline(evaluation)
    evaluated = evaluation_gate.Evaluated.from_json(evaluation)
    return evaluated.to_json(), evaluation_gate.headline(evaluated)


def _result(group: str, arn: str, status: Any, *, created: bool) -> dict[str, Any]:
    return {
        "model_package_group": group,
        "model_package_arn": arn,
        "version": int(arn.rsplit("/", 1)[-1]),
        "approval_status": status,
        "created": created,
    }


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Event: {"plan": <plan>, "training": <DescribeTrainingJob>, "evaluation": <the wrapper> | {} | absent}."""
    plan = Plan.from_json(event["plan"])
    aws.bind(event, plan.execution_name)
    return register(
        plan,
        event.get("training") or {},
        aws.client("sagemaker"),
        aws.client("s3"),
        os.environ["ARTIFACTS_BUCKET"],
        os.environ.get("MODEL_APPROVAL_STATUS", registry.DEFAULT_APPROVAL),
        [r for r in os.environ.get("PROMOTE_ROLE_ARNS", "").split(",") if r],
        event.get("evaluation") or None,
    )
