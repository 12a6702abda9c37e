"""Clean-up selection: which SageMaker resources an execution, `hfpipe stop` or `hfpipe cleanup` may delete.

One rule, used by the Cleanup Lambda, `hfpipe stop` and `hfpipe cleanup`: a resource is the pipeline's to
delete only when its tags say it was created by hfpipe (`hfpipe:managed-by`) for this environment
(`hfpipe:env`) and, when an execution is named, by that execution (`hfpipe:execution`). Only endpoints,
endpoint configs and models are ever deleted; S3 objects (data, artifacts, checkpoints) never are, and a
training job is at most stopped (its record and artifacts stay).

Stdlib only; the SageMaker client is passed in.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from hfpipe import contract
from hfpipe.core.names import PlannedNames


@dataclass(frozen=True)
class Kind:
    """One kind of SageMaker resource the pipeline creates, with the API names to find and delete it."""

    name: str  # as shown to the user: endpoint, endpoint config, model
    plan_key: str  # its PlannedNames (and Plan) field: endpoint_name, endpoint_config_name, model_name
    describe: str
    list: str
    list_key: str
    name_key: str  # the request/response field naming it, also the delete call's argument
    arn_key: str
    delete: str


# Deleted in this order, so nothing is removed while something else still uses it.
KINDS: tuple[Kind, ...] = (
    Kind(
        "endpoint",
        "endpoint_name",
        "describe_endpoint",
        "list_endpoints",
        "Endpoints",
        "EndpointName",
        "EndpointArn",
        "delete_endpoint",
    ),
    Kind(
        "endpoint config",
        "endpoint_config_name",
        "describe_endpoint_config",
        "list_endpoint_configs",
        "EndpointConfigs",
        "EndpointConfigName",
        "EndpointConfigArn",
        "delete_endpoint_config",
    ),
    Kind(
        "model",
        "model_name",
        "describe_model",
        "list_models",
        "Models",
        "ModelName",
        "ModelArn",
        "delete_model",
    ),
)


def may_delete(tags: Mapping[str, str], env: str, execution: str | None = None) -> bool:
    """The clean-up rule: hfpipe created it, for environment ``env`` (and execution ``execution`` if given)."""
    return (
        tags.get(contract.TAG_MANAGED_BY) == contract.PROJECT
        and tags.get(contract.TAG_ENV) == env
        and (execution is None or tags.get(contract.TAG_EXECUTION) == execution)
    )


def tags_of(sagemaker: Any, arn: str) -> dict[str, str]:
    """All tags of one resource (ListTags pages at 50 tags by default)."""
    tags: dict[str, str] = {}
    for page in sagemaker.get_paginator("list_tags").paginate(ResourceArn=arn):
        tags.update({t["Key"]: t["Value"] for t in page.get("Tags", [])})
    return tags


def is_not_found(err: Exception) -> bool:
    """A Describe*/Delete* error that means the resource does not exist.

    SageMaker answers both with ValidationException "Could not find endpoint ..." (model, endpoint
    configuration); there is no ResourceNotFound code for these three kinds.
    """
    response = getattr(err, "response", None)
    message = str(response.get("Error", {}).get("Message", "")) if isinstance(response, dict) else str(err)
    return "Could not find" in message or "does not exist" in message


@dataclass(frozen=True)
class Resource:
    """One SageMaker resource the pipeline created."""

    kind: Kind
    name: str
    execution: str
    created: datetime | None


def find_resources(
    sagemaker: Any,
    env: str,
    older_than: timedelta | None = None,
    execution: str | None = None,
    now: datetime | None = None,
) -> list[Resource]:
    """Every endpoint, config and model clean-up may delete in ``env`` (optionally one execution's), by listing."""
    now = now or datetime.now(UTC)
    found: list[Resource] = []
    for kind in KINDS:
        for page in sagemaker.get_paginator(kind.list).paginate():
            for item in page[kind.list_key]:
                created = item.get("CreationTime")
                if isinstance(created, datetime) and created.tzinfo is None:
                    created = created.replace(tzinfo=UTC)
                if older_than is not None and isinstance(created, datetime) and now - created < older_than:
                    continue
                tags = tags_of(sagemaker, item[kind.arn_key])
                if not may_delete(tags, env, execution):
                    continue
                found.append(
                    Resource(kind, item[kind.name_key], tags.get(contract.TAG_EXECUTION, "-"), created)
                )
    return found


def planned_resources(sagemaker: Any, target: PlannedNames) -> Iterator[tuple[Kind, str, bool]]:
    """(kind, name, deletable) for each resource ``target`` names that exists; by name, without listing.

    ``target`` is a plan's names (``Plan.names``) or, where there is no plan, the names the environment's
    rule gives the execution (``PlannedNames.derive``)."""
    for kind in KINDS:
        name = str(getattr(target, kind.plan_key))
        try:
            found = getattr(sagemaker, kind.describe)(**{kind.name_key: name})
        except Exception as err:
            if is_not_found(err):
                continue
            raise
        tags = tags_of(sagemaker, found[kind.arn_key])
        yield kind, name, may_delete(tags, target.env, target.execution_name)


def delete(sagemaker: Any, kind: Kind, name: str) -> None:
    """Delete one resource; one that is already gone counts as deleted."""
    try:
        getattr(sagemaker, kind.delete)(**{kind.name_key: name})
    except Exception as err:
        if not is_not_found(err):
            raise
