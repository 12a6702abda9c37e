"""Clean-up selection: which SageMaker resources an execution, `hfpipe stop` or `hfpipe cleanup` may delete.

One rule, used by the Cleanup Lambda, `hfpipe stop` and `hfpipe cleanup`: a resource is the pipeline's to
delete only when its tags say it was created by hfpipe (`hfpipe:managed-by`) for this environment
(`hfpipe:env`) and, when an execution is named, by that execution (`hfpipe:execution`), and no user chose
to keep it (`hfpipe:keep`, put there by `hfpipe stop --keep-endpoint`) and no `hfpipe deploy` made it for a
named endpoint (`hfpipe:deployment`); only `hfpipe endpoints delete NAME`, which names it, deletes either.
Only endpoints, endpoint configs and models are ever deleted; S3 objects (data, artifacts, checkpoints) never
are, and a training job is at most stopped (its record and artifacts stay).

Everything here works from what exists and how it is tagged, never from an execution's status, so an
interrupted clean-up (a throttled call) is finished by running it again; every delete counts "already
gone" as done. An endpoint SageMaker will not delete yet (``NOT_DELETABLE_YET``) is waited for
(``wait_until_deletable``) by the commands; the Cleanup Lambda, with minutes at most, reports it instead.

Stdlib only; the SageMaker client is passed in.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from hfpipe import contract
from hfpipe.core.names import PlannedNames
from hfpipe.core.throttling import error_code


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


def is_ours(tags: Mapping[str, str], env: str, execution: str | None = None) -> bool:
    """hfpipe created it, for environment ``env`` (and execution ``execution`` if given)."""
    return (
        tags.get(contract.TAG_MANAGED_BY) == contract.PROJECT
        and tags.get(contract.TAG_ENV) == env
        and (execution is None or tags.get(contract.TAG_EXECUTION) == execution)
    )


def is_kept(tags: Mapping[str, str]) -> bool:
    """A user chose to keep it (`hfpipe stop --keep-endpoint`): clean-up leaves it."""
    return tags.get(contract.TAG_KEEP) == contract.TAG_KEEP_VALUE


def is_deployed(tags: Mapping[str, str]) -> bool:
    """Made by `hfpipe deploy` for a named endpoint (``hfpipe:deployment``): a run's clean-up leaves it; only
    `hfpipe endpoints delete NAME`, which names the endpoint, deletes it."""
    return bool(tags.get(contract.TAG_DEPLOYMENT))


def is_protected(tags: Mapping[str, str]) -> bool:
    """Clean-up leaves it: kept by a user (``is_kept``) or serving a named endpoint (``is_deployed``)."""
    return is_kept(tags) or is_deployed(tags)


def may_delete(tags: Mapping[str, str], env: str, execution: str | None = None) -> bool:
    """The clean-up rule: ours (``is_ours``) and neither kept by a user nor a named endpoint's
    (``is_protected``)."""
    return is_ours(tags, env, execution) and not is_protected(tags)


#: DescribeEndpoint's EndpointStatus values while which SageMaker will not delete the endpoint yet:
#: Creating and Updating (CreateEndpoint/UpdateEndpoint is executing), SystemUpdating ("cannot be updated
#: or deleted or re-scaled until it has completed") and RollingBack (returns to InService once done).
#: https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_DescribeEndpoint.html#sagemaker-DescribeEndpoint-response-EndpointStatus
#: https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_DeleteEndpoint.html
#: Its endpoint config must not be deleted meanwhile either ("You must not delete an EndpointConfig ...
#: while the UpdateEndpoint or CreateEndpoint operations are being performed on the endpoint",
#: https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_DeleteEndpointConfig.html).
NOT_DELETABLE_YET = frozenset({"Creating", "Updating", "SystemUpdating", "RollingBack"})
#: DeleteEndpoint is already executing: nothing to call again (a second DeleteEndpoint would be refused).
DELETING = "Deleting"
#: How long the commands wait for an endpoint to become deletable (creating one takes minutes, rarely 15).
DEFAULT_WAIT_S = 15 * 60
POLL_S = 15.0


class NotDeletableYet(Exception):
    """The endpoint is still in a state SageMaker refuses DeleteEndpoint in (``NOT_DELETABLE_YET``)."""

    def __init__(self, name: str, status: str) -> None:
        super().__init__(f"endpoint {name} is still {status}")
        self.name = name
        self.status = status


def endpoint_status(sagemaker: Any, name: str) -> str | None:
    """DescribeEndpoint's EndpointStatus, or None when there is no such endpoint."""
    try:
        return str(sagemaker.describe_endpoint(EndpointName=name).get("EndpointStatus", ""))
    except Exception as err:
        if is_not_found(err):
            return None
        raise


def wait_until_deletable(
    sagemaker: Any,
    name: str,
    timeout_s: float = DEFAULT_WAIT_S,
    poll_s: float = POLL_S,
    progress: Callable[[str, float], None] | None = None,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> str | None:
    """Poll DescribeEndpoint until the endpoint leaves ``NOT_DELETABLE_YET``; its status then (None: gone).

    ``progress(status, waited_s)`` is called before each wait. Past ``timeout_s`` it raises
    ``NotDeletableYet``: the bound keeps a command (or a script calling it) from hanging on an endpoint
    stuck in SystemUpdating; running the command again carries on."""
    start = clock()
    while True:
        status = endpoint_status(sagemaker, name)
        if status not in NOT_DELETABLE_YET:
            return status
        waited = clock() - start
        if waited >= timeout_s:
            raise NotDeletableYet(name, status or "")
        if progress is not None:
            progress(status or "", waited)
        sleep(max(0.0, min(poll_s, timeout_s - waited)))


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


def describe_or_none(call: Any, **request: str) -> dict[str, Any] | None:
    """A Describe* answer (``call(**request)``), or None when the resource does not exist (``is_not_found``);
    other errors are raised."""
    try:
        return dict(call(**request))
    except Exception as err:
        if is_not_found(err):
            return None
        raise


@dataclass(frozen=True)
class Resource:
    """One SageMaker resource the pipeline created."""

    kind: Kind
    name: str
    execution: str
    created: datetime | None
    status: str | None = None  # an endpoint's EndpointStatus when listed (None for the other kinds)


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
                status = item.get("EndpointStatus")
                found.append(
                    Resource(
                        kind,
                        item[kind.name_key],
                        tags.get(contract.TAG_EXECUTION, "-"),
                        created,
                        str(status) if status is not None else None,
                    )
                )
    return found


@dataclass(frozen=True)
class Planned:
    """One resource an execution's names point at that exists, with what clean-up needs to decide."""

    kind: Kind
    name: str
    ours: bool  # tagged by hfpipe for this environment and execution
    kept: bool  # a user chose to keep it, or it serves a named endpoint (``is_protected``)
    status: str | None  # an endpoint's EndpointStatus (None for the other kinds)

    @property
    def deletable(self) -> bool:
        return self.ours and not self.kept


def planned_resources(sagemaker: Any, target: PlannedNames) -> Iterator[Planned]:
    """Each resource ``target`` names that exists, with its tags' verdict; by name, without listing.

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
        yield Planned(
            kind,
            name,
            is_ours(tags, target.env, target.execution_name),
            is_protected(tags),
            str(found.get("EndpointStatus")) if kind.name == "endpoint" else None,
        )


def delete(sagemaker: Any, kind: Kind, name: str) -> None:
    """Delete one resource; one that is already gone counts as deleted."""
    try:
        getattr(sagemaker, kind.delete)(**{kind.name_key: name})
    except Exception as err:
        if not is_not_found(err):
            raise


# -- a named endpoint's deploys: what a failed clean-up left ------------------------------------------------

#: A deploy execution's status (Step Functions DescribeExecution ``status``) after which nothing it made serves
#: by its design: it ended without recording its version (its DeployCleanup, when it ran, removed what it could;
#: an ABORTED or TIMED_OUT execution never ran it).
DEPLOY_ENDED_UNSUCCESSFULLY = frozenset({"FAILED", "TIMED_OUT", "ABORTED"})


def deploy_leftovers(
    sagemaker: Any,
    execution_status: Callable[[str], str | None],
    recorded: Callable[[str], set[str]],
    env: str,
    name: str | None = None,
) -> list[Resource]:
    """The endpoint configs and models deploys of environment ``env`` made for named endpoint ``name`` (every
    named endpoint when None) that a failed clean-up left: tagged by this environment's deploys for that name
    (``hfpipe:managed-by``, ``hfpipe:env``, ``hfpipe:deployment``), not kept by a user, made by a deploy
    execution that ended unsuccessfully (``execution_status`` of its ``hfpipe:deploy-execution``:
    DEPLOY_ENDED_UNSUCCESSFULLY; None, an execution Step Functions no longer knows, keeps it), and used by
    nothing: neither the endpoint's live config nor the one an update moves to (an endpoint still changing
    keeps them all), nor a config its deployment record names (``recorded``), nor a model of one of those.
    Configs first, then models (the order they are deleted in)."""
    prefix = contract.deployed_endpoint_name(env, name or "") + ("-" if name else "")
    kept: dict[str, set[str] | None] = {}
    statuses: dict[str, str | None] = {}
    found: list[Resource] = []
    for kind in KINDS[1:]:
        for page in sagemaker.get_paginator(kind.list).paginate(NameContains=prefix):
            for item in page[kind.list_key]:
                resource = str(item[kind.name_key])
                if not resource.startswith(prefix):
                    continue
                tags = tags_of(sagemaker, item[kind.arn_key])
                deployment = tags.get(contract.TAG_DEPLOYMENT)
                if not deployment or not is_ours(tags, env) or is_kept(tags) or (name and deployment != name):
                    continue
                if deployment not in kept:
                    kept[deployment] = _in_use(sagemaker, env, deployment, recorded)
                in_use = kept[deployment]
                if in_use is None or resource in in_use:
                    continue
                execution = tags.get(contract.TAG_DEPLOY_EXECUTION, "")
                if execution not in statuses:
                    statuses[execution] = execution_status(execution) if execution else None
                if statuses[execution] in DEPLOY_ENDED_UNSUCCESSFULLY:
                    found.append(Resource(kind, resource, execution, item.get("CreationTime")))
    return found


def _in_use(sagemaker: Any, env: str, name: str, recorded: Callable[[str], set[str]]) -> set[str] | None:
    """The configs (and their models) named endpoint ``name`` uses or its record names; None while the endpoint
    is changing (SageMaker may be moving to any of its configs: NOT_DELETABLE_YET)."""
    try:
        endpoint = sagemaker.describe_endpoint(EndpointName=contract.deployed_endpoint_name(env, name))
    except Exception as err:
        if not is_not_found(err):
            raise
        endpoint = {}
    if endpoint.get("EndpointStatus") in NOT_DELETABLE_YET:
        return None
    pending = (endpoint.get("PendingDeploymentSummary") or {}).get("EndpointConfigName")
    configs = {c for c in (endpoint.get("EndpointConfigName"), pending, *recorded(name)) if c}
    used = set(configs)
    for config in configs:
        try:
            variants = sagemaker.describe_endpoint_config(EndpointConfigName=config).get("ProductionVariants")
        except Exception as err:
            if not is_not_found(err):
                raise
            continue
        used |= {str(v["ModelName"]) for v in variants or [] if v.get("ModelName")}
    return used


def deploy_execution_status(stepfunctions: Any, state_machine_arn: str) -> Callable[[str], str | None]:
    """execution name -> its status (DescribeExecution; None when Step Functions no longer knows it: closed
    executions are kept 90 days). An execution's ARN is its state machine's with ``execution`` for
    ``stateMachine`` and its name appended (arn:aws:states:REGION:ACCOUNT:execution:MACHINE:NAME)."""
    base = state_machine_arn.replace(":stateMachine:", ":execution:", 1)

    def status(name: str) -> str | None:
        try:
            return str(stepfunctions.describe_execution(executionArn=f"{base}:{name}")["status"])
        except Exception as err:
            if error_code(err) == "ExecutionDoesNotExist":
                return None
            raise

    return status


def recorded_configs(ssm: Any, env: str) -> Callable[[str], set[str]]:
    """named endpoint -> the configs its deployment record names (the live one and the one before it)."""

    def configs(name: str) -> set[str]:
        try:
            value = ssm.get_parameter(Name=contract.deployment_parameter_name(env, name))["Parameter"][
                "Value"
            ]
        except Exception as err:
            if error_code(err) == "ParameterNotFound":
                return set()
            raise
        try:
            record = json.loads(value)
        except ValueError:
            return set()
        found = (
            (record.get("endpoint_config"), record.get("previous_endpoint_config"))
            if isinstance(record, dict)
            else ()
        )
        return {str(c) for c in found if c}

    return configs
