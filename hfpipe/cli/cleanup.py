"""Find and delete the endpoints, endpoint configs and models the pipeline created, by their tags.

Only resources carrying all of the pipeline's tags (`hfpipe.contract.TAG_*`, managed-by `hfpipe`) for the
given environment are touched; S3 objects (artifacts, checkpoints, data) never are.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from hfpipe import contract
from hfpipe.cli.aws import HfpipeError

_DURATION = re.compile(r"^(\d+)([mhdw])$")
_UNITS = {"m": "minutes", "h": "hours", "d": "days", "w": "weeks"}

# (kind, list paginator, list key, name key, arn key, delete call, delete argument); deleted in this order so
# nothing is removed while something else still uses it.
_KINDS = (
    (
        "endpoint",
        "list_endpoints",
        "Endpoints",
        "EndpointName",
        "EndpointArn",
        "delete_endpoint",
        "EndpointName",
    ),
    (
        "endpoint config",
        "list_endpoint_configs",
        "EndpointConfigs",
        "EndpointConfigName",
        "EndpointConfigArn",
        "delete_endpoint_config",
        "EndpointConfigName",
    ),
    ("model", "list_models", "Models", "ModelName", "ModelArn", "delete_model", "ModelName"),
)


def parse_duration(text: str) -> timedelta:
    """'30m', '12h', '7d', '2w' -> timedelta, or an error naming the value and the accepted forms."""
    match = _DURATION.match(text.strip())
    if not match or int(match.group(1)) == 0:
        raise HfpipeError(
            f"--older-than {text!r} is not a duration: use a positive number followed by m, h, d or w "
            "(e.g. 12h, 7d)"
        )
    return timedelta(**{_UNITS[match.group(2)]: int(match.group(1))})


@dataclass(frozen=True)
class Resource:
    """One SageMaker resource the pipeline created."""

    kind: str
    name: str
    execution: str
    created: datetime | None
    delete_call: str
    delete_arg: str


def find_resources(
    sagemaker: Any,
    env: str,
    older_than: timedelta | None = None,
    execution: str | None = None,
    now: datetime | None = None,
) -> list[Resource]:
    """The pipeline's endpoints, configs and models of one environment (optionally one execution)."""
    now = now or datetime.now(UTC)
    found: list[Resource] = []
    for kind, list_call, list_key, name_key, arn_key, delete_call, delete_arg in _KINDS:
        for page in sagemaker.get_paginator(list_call).paginate():
            for item in page[list_key]:
                created = item.get("CreationTime")
                if isinstance(created, datetime) and created.tzinfo is None:
                    created = created.replace(tzinfo=UTC)
                if older_than is not None and isinstance(created, datetime) and now - created < older_than:
                    continue
                tags = _tags(sagemaker, item[arn_key])
                if tags.get(contract.TAG_MANAGED_BY) != contract.PROJECT or tags.get(contract.TAG_ENV) != env:
                    continue
                if execution is not None and tags.get(contract.TAG_EXECUTION) != execution:
                    continue
                found.append(
                    Resource(
                        kind,
                        item[name_key],
                        tags.get(contract.TAG_EXECUTION, "-"),
                        created,
                        delete_call,
                        delete_arg,
                    )
                )
    return found


def _tags(sagemaker: Any, arn: str) -> dict[str, str]:
    tags: dict[str, str] = {}
    for page in sagemaker.get_paginator("list_tags").paginate(ResourceArn=arn):
        tags.update({t["Key"]: t["Value"] for t in page.get("Tags", [])})
    return tags


def delete(sagemaker: Any, resource: Resource) -> None:
    """Delete one resource; one that is already gone counts as deleted."""
    import botocore.exceptions

    try:
        getattr(sagemaker, resource.delete_call)(**{resource.delete_arg: resource.name})
    except botocore.exceptions.ClientError as exc:
        message = exc.response.get("Error", {}).get("Message", "")
        if "Could not find" not in message and "does not exist" not in message:
            raise
