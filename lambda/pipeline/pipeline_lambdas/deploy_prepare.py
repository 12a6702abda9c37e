"""Prepare: decide what a deploy of a registered version to a named endpoint does, and build its requests.

Input ``{"version": "<recipe>/<n>" | <version ARN>, "endpoint": "<NAME>"}``, and optionally ``"ttl"`` (``hfpipe
deploy --ttl``: when an endpoint it creates expires; hfpipe.core.deploy.expiry) and ``"override_evaluation"``
(``hfpipe deploy --override-evaluation REASON``). Refused, with nothing created, unless the version is of this
environment's groups, exists, is Approved and declares a real-time instance type; the evaluation gate passes
it (``check_evaluation``: hfpipe.core.promotion.evaluation_gate's one rule on the version's stored evaluation
and what serves on the endpoint, both read now, so a deploy started without the command is gated as the
command gates it); NAME is declared in the environment's cdk.json ``endpoints`` (``DEPLOY_ENDPOINTS``); and
the endpoint, if it exists, was made by a deploy of this environment for NAME (never adopt another endpoint), is not busy
and has not failed. Each refusal is an exception class whose name is the execution's error. A look that passed
the gate with the input's override appends its reason to the version's approval description (UpdateModelPackage,
once per execution: ``record_override``): the record is the act's, whether or not a command still follows it.

The result is a ``DeployPlan`` (hfpipe/core/deploy/deploy_plan.py; its JSON is ``$.deploy``), whose ``action`` is: ``create`` (no endpoint yet), ``update`` (blue/green to the new
config), ``none`` (the endpoint's live config already serves this version and its record says so: the record
is the output), ``record`` (it serves this version but its record or tags were not written: smoke test and
Record again) or ``wait`` (an update whose rollback alarms are in ALARM now: the state machine waits and runs
Prepare again with ``alarm_wait``, until they are OK or the wait's bound refuses the deploy,
deploy_guards.alarm_wait). Every request is built by hfpipe.core.deploy.deploy_requests and checked against
botocore's shapes.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, replace
from datetime import UTC, datetime
from typing import Any

from hfpipe import contract
from hfpipe.core import api_shapes
from hfpipe.core.deploy import deploy_requests as requests
from hfpipe.core.deploy import deployments, expiry, fleets
from hfpipe.core.deploy.deploy_plan import (
    AlarmWait,
    DeployInput,
    DeploymentRecord,
    DeployPlan,
    DeployRequests,
    PreviousDeploy,
    alarm_wait_from_json,
)
from hfpipe.core.deploy.deployments import EndpointSettings
from hfpipe.core.deploy.what_serves import read_config
from hfpipe.core.promotion import evaluation_gate, evaluation_reads, override_record, registry
from hfpipe.core.recipe.recipes import resolve_recipe
from hfpipe.core.run import cleanup as rule
from hfpipe.core.run import quotas
from pipeline_lambdas import aws
from pipeline_lambdas.deploy_common import (
    describe_config,
    describe_endpoint,
    is_deploy_made,
    remove_scaling,
    scalable_target,
)
from pipeline_lambdas.deploy_guards import alarm_wait, other_deploy, recheck_approval, way_back_failed

LOG = aws.logger(__name__)
#: The clients Prepare is given (``prepare``'s ``clients``).
CLIENTS = (
    "sagemaker",
    "ssm",
    "application-autoscaling",
    "service-quotas",
    "stepfunctions",
    "cloudwatch",
    "s3",
)
#: Statuses in which SageMaker is still changing the endpoint: a deploy now would be refused or race it.
BUSY = frozenset({"Creating", "Updating", "SystemUpdating", "RollingBack", "Deleting"})


class DeployRefused(Exception):
    """Base of every refusal; nothing was created."""


class InvalidDeployInput(DeployRefused):
    """The execution input lacks "version" or "endpoint", or names one in a shape not accepted."""


class UnknownEndpoint(DeployRefused):
    """NAME is not declared in the environment's cdk.json ``endpoints``."""


class VersionOfAnotherEnvironment(DeployRefused):
    """The version belongs to another environment's model package group."""


class VersionNotFound(DeployRefused):
    """No such version in the group."""


class VersionNotApproved(DeployRefused):
    """The version's ModelApprovalStatus is not Approved."""


class VersionNotDeployable(DeployRefused):
    """The version names no real-time instance type, or its recipe has no smoke test here."""


class EndpointNotManagedByDeploy(DeployRefused):
    """An endpoint of that name exists but no deploy of this environment made it for NAME."""


class EndpointBusy(DeployRefused):
    """The endpoint is being created, updated, rolled back or deleted."""


class EndpointFailedMustBeDeleted(DeployRefused):
    """The endpoint is Failed: SageMaker allows only DeleteEndpoint on it."""


class DeployRequestRefused(DeployRefused):
    """A request SageMaker's API would refuse (botocore's shapes, the traffic shifting the fleet can take);
    nothing was sent."""


class EndpointQuotaTooLow(DeployRefused):
    """The account's endpoint-usage quota for the instance type cannot hold the fleets the deploy runs."""


class EndpointTaskMismatch(DeployRefused):
    """The version's task kind is not the one the named endpoint is bound to (its ``hfpipe:task`` tag, put
    there when a deploy created it; for an endpoint created before that tag, the task of the version it
    serves)."""


class EvaluationGateRefused(DeployRefused):
    """The evaluation gate refused the version (hfpipe.core.promotion.evaluation_gate): evaluated worse than what
    serves on the endpoint, a stale evaluation, none where the environment's evaluation_gate is mandatory, or an
    evaluation the gate cannot read."""


class DeployInProgress(DeployRefused):
    """Another execution of this deploy state machine for the same endpoint started first and still runs."""


def _checked(operation: str, request: dict[str, Any]) -> dict[str, Any]:
    found = api_shapes.problems(operation, request)
    if found:
        raise DeployRequestRefused(f"{found[0]}: SageMaker's {operation} would refuse this request")
    return request


def version_arn(ref: str, env: str, role_arn: str, region: str) -> str:
    """The version's ARN: as given, or built for <recipe>/<n> in this account (the execution role's) and
    region (DescribeModelPackage needs the ARN of a versioned package)."""
    try:
        group, number = registry.parse_ref(ref, env)
    except registry.RegistryRefError as err:
        kind = VersionOfAnotherEnvironment if "is not environment" in str(err) else InvalidDeployInput
        raise kind(str(err)) from None
    if ref.startswith("arn:"):
        return ref
    partition, account = role_arn.split(":")[1], role_arn.split(":")[4]
    return f"arn:{partition}:sagemaker:{region}:{account}:model-package/{group.lower()}/{number}"


def _stored_record(ssm: Any, env: str, name: str) -> DeploymentRecord | None:
    """The endpoint's deployment record; None when there is none, or it is not one this release reads (then
    the deploy smoke-tests and records again)."""
    try:
        value = ssm.get_parameter(Name=contract.deployment_parameter_name(env, name))["Parameter"]["Value"]
    except Exception as err:
        if "ParameterNotFound" in type(err).__name__ or "ParameterNotFound" in str(err):
            return None
        raise
    try:
        return DeploymentRecord.from_json(json.loads(value))
    except ValueError:  # not JSON, or DeployPlanFormatError
        return None


def _check_endpoint(endpoint: dict[str, Any], tags: dict[str, str], env: str, name: str) -> None:
    endpoint_name, status = endpoint["EndpointName"], endpoint.get("EndpointStatus", "")
    if not is_deploy_made(tags, env, name):
        raise EndpointNotManagedByDeploy(
            f"endpoint {endpoint_name} exists but is not tagged {contract.TAG_DEPLOYMENT}={name}, "
            f"{contract.TAG_ENV}={env}, {contract.TAG_MANAGED_BY}={contract.PROJECT}: a deploy never takes over "
            "an endpoint it did not make; accepted: delete it, or declare another endpoint name in cdk.json"
        )
    if status == "Failed":
        raise EndpointFailedMustBeDeleted(
            f"endpoint {endpoint_name} is Failed ({endpoint.get('FailureReason', 'no reason given')}); SageMaker "
            f"only deletes a failed endpoint: run `hfpipe endpoints delete {endpoint_name} --env {env}`, then "
            "deploy again (it creates the endpoint anew)"
        )
    if status != "InService":
        hint = (
            "wait until SageMaker is done, then deploy again"
            if status in BUSY
            else "bring it back to one InService config by hand (or delete it), then deploy again"
        )
        raise EndpointBusy(f"endpoint {endpoint_name} is {status}; accepted: an InService endpoint ({hint})")


def task_of(recipe_name: str) -> str | None:
    """The task kind of a bundled recipe (its ``task``); None when this release has no such recipe."""
    try:
        return str(resolve_recipe(recipe_name=recipe_name)["task"])
    except Exception:  # RecipeError: a recipe this release does not bundle (an older version's)
        return None


def _check_task(
    sagemaker: Any,
    endpoint_name: str,
    endpoint_tags: dict[str, str],
    served_arn: str | None,
    info: requests.VersionInfo,
    env: str,
) -> None:
    """The version's task is the one the endpoint is bound to: its ``hfpipe:task`` tag, recorded when a deploy
    created it; for an endpoint created before that tag, the task of the version it serves (read from it).
    Unknown either way (no tag, and what serves is unknown or of a recipe not bundled here): nothing to
    compare."""
    wanted = task_of(info.recipe)
    bound, why = (
        endpoint_tags.get(contract.TAG_TASK),
        f"its {contract.TAG_TASK} tag, recorded at its creation",
    )
    if not bound and served_arn:
        served = requests.version_info(env, sagemaker.describe_model_package(ModelPackageName=served_arn))
        bound, why = task_of(served.recipe), f"the task of {served.ref}, which it serves"
    if bound and wanted and bound != wanted:
        raise EndpointTaskMismatch(
            f"endpoint {endpoint_name} serves task {bound} ({why}); version {info.ref} is task {wanted} "
            f"(recipe {info.recipe}): a named endpoint keeps its task, since its callers send that task's "
            f"requests; accepted: a version of a {bound} recipe, or another endpoint name declared in cdk.json "
            f"for {wanted}"
        )


def _live_count(endpoint: dict[str, Any]) -> int:
    """Instances the endpoint's fleet runs now (DescribeEndpoint's ProductionVariants)."""
    return sum(int(v.get("CurrentInstanceCount") or 0) for v in endpoint.get("ProductionVariants") or [])


def neighbours(env: str, endpoints: dict[str, EndpointSettings], name: str) -> tuple[str, ...]:
    """The environment's other endpoints that count against the same account quotas: its other named
    endpoints and its shared base (hfpipe-<env>-shared-base; the role reads hfpipe-<env>-* only)."""
    others = [settings.endpoint_name(env) for key, settings in sorted(endpoints.items()) if key != name]
    return (*others, contract.deployed_endpoint_name(env, contract.SHARED_BASE))


def running_of_type(sagemaker: Any, names: tuple[str, ...], instance_type: str) -> dict[str, int]:
    """Instances of ``instance_type`` each of the endpoints ``names`` holds now, read from SageMaker
    (hfpipe.core.deploy.fleets.instances_of_type); absent endpoints and other types are left out."""
    held = {}
    for name in names:
        endpoint = describe_endpoint(sagemaker, name)
        if endpoint is None:
            continue
        config = describe_config(sagemaker, endpoint["EndpointConfigName"])
        count = fleets.instances_of_type(endpoint, config, instance_type)
        if count:
            held[name] = count
    return held


def _check_fleet(
    settings: EndpointSettings,
    endpoint: dict[str, Any] | None,
    previous: PreviousDeploy | None,
    instance_type: str,
    count: int,
    clients: dict[str, Any],
    others: tuple[str, ...],
) -> None:
    """The new fleet of ``count`` can shift traffic as declared, and the account's endpoint-usage quota for
    its instance type holds it beside the old fleet (a blue/green update runs both until the bake ends) and
    beside what the environment's ``others`` (its other named endpoints, its shared base) run of that type
    now, read from SageMaker. Endpoints outside the environment are SageMaker's to count
    (ResourceLimitExceeded)."""
    if endpoint is not None:
        problem = fleets.shifting_problem(settings.traffic.type, count)
        if problem:
            raise DeployRequestRefused(
                f"endpoint {endpoint['EndpointName']}: the new fleet resolves to {count} instance(s) "
                f"(cdk.json instance_count {settings.instance_count}); {problem}"
            )
    same_type = endpoint is not None and previous is not None and previous.instance_type == instance_type
    running = running_of_type(clients["sagemaker"], others, instance_type)
    needed = count + (_live_count(endpoint) if same_type and endpoint is not None else 0)
    name = quotas.endpoint_quota_name(instance_type)
    try:
        quotas.check_quotas(clients["service-quotas"], {name: needed + sum(running.values())})
    except quotas.QuotaTooLowError as err:
        held = "the new fleet beside the old one" if same_type else "the new fleet"
        beside = "".join(f", {n} {c} beside it" for n, c in running.items())
        raise EndpointQuotaTooLow(
            f"{err}: {held} ({needed} instance(s) of {instance_type}){beside} must fit before the deploy "
            "starts; raise the quota (cdk.json quotas, the QuotaStack) or lower instance_count"
        ) from None


def _accepted(event_input: Any) -> DeployInput:
    if (
        not isinstance(event_input, dict)
        or not all(
            isinstance(event_input.get(k), str) and event_input.get(k) for k in ("version", "endpoint")
        )
        or set(event_input) - {"version", "endpoint", "ttl", "override_evaluation"}
        or not isinstance(event_input.get("override_evaluation") or "", str)
    ):
        raise InvalidDeployInput(
            f"input {event_input!r}: not accepted; accepted: "
            '{"version": "RECIPE/N" or a model package version ARN, "endpoint": "NAME", "ttl": "8h" (optional), '
            '"override_evaluation": "REASON" (optional)}'
        )
    ttl, override = event_input.get("ttl"), event_input.get("override_evaluation")
    if ttl is not None:
        try:
            expiry.parse_ttl(ttl, "input.ttl")
        except expiry.TtlError as err:
            raise InvalidDeployInput(str(err)) from None
    if override is not None:
        try:
            evaluation_gate.check_override(override)
        except ValueError as err:
            raise InvalidDeployInput(f"input.override_evaluation: {err}") from None
    return DeployInput(
        version=event_input["version"],
        endpoint=event_input["endpoint"],
        ttl=ttl,
        override_evaluation=override,
    )


def check_evaluation(
    sagemaker: Any,
    s3: Any,
    env: str,
    info: requests.VersionInfo,
    endpoint_name: str,
    wanted: DeployInput,
    mode: str,
    execution_name: str = "",
) -> evaluation_gate.Decision:
    """The evaluation gate (hfpipe.core.promotion.evaluation_gate.decide), as `hfpipe deploy` applies it before
    it starts this state machine: the version's stored evaluation (its statistics document) and what serves on
    the endpoint, both read now (hfpipe.core.promotion.evaluation_reads); the input's ``override_evaluation``
    passes a refusal (``prepare`` records it, naming ``execution_name``, once this step has passed with it:
    record_override). The decision; EvaluationGateRefused with the figures when it refuses, InvalidDeployInput
    when the override's note would not fit the version's approval description."""
    package = sagemaker.describe_model_package(ModelPackageName=info.arn)
    try:
        statistics = evaluation_reads.statistics_of(package, lambda u: evaluation_reads.read_json(s3, u))
        evaluated = evaluation_gate.of_statistics(statistics)
    except evaluation_gate.EvaluationFormatError as err:
        raise EvaluationGateRefused(f"version {info.ref}: {err}; the gate cannot decide on it") from None
    except (
        Exception
    ) as err:  # not readable (AccessDenied, NoSuchKey, not JSON): a gate that cannot read refuses
        uri = evaluation_reads.statistics_uri(package)
        raise EvaluationGateRefused(
            f"version {info.ref}: its statistics document {uri} could not be read ({err}); the gate cannot decide"
        ) from None
    target = {"endpoint": endpoint_name}
    champion, itself = evaluation_reads.replaced(sagemaker, env, target, info.arn)
    try:
        decision = evaluation_gate.decide(
            evaluated,
            version=info.ref,
            champion_now=champion,
            mode=mode,
            where=f"endpoint {endpoint_name}",
            override=wanted.override_evaluation,
            failed=evaluation_gate.failure_of(statistics),
            description=package.get("ApprovalDescription"),
            execution=execution_name or None,
            serves_itself=itself,
        )
    except evaluation_gate.OverrideError as err:  # its note would not fit what the description holds now
        raise InvalidDeployInput(f"input.override_evaluation: {err}") from None
    if not decision.allowed:
        raise EvaluationGateRefused(f"refused by the evaluation gate: {decision.message}")
    aws.log_json(LOG, "evaluation gate passed", version=info.arn, decision=decision.message)
    return decision


def record_override(
    sagemaker: Any, arn: str, decision: evaluation_gate.Decision, execution_name: str
) -> None:
    """The override this execution used, appended to the version's approval description by this step, once
    it has passed the gate with it (hfpipe.core.promotion.override_record: once per execution, its status as it
    is); nothing where the gate passed without one."""
    if decision.note is None:
        return
    if override_record.record(sagemaker, arn, decision.note, execution_name):
        aws.log_json(LOG, "evaluation gate override recorded", version=arn)


def expires(wanted: DeployInput, env_ttl: int | None, now: datetime | None) -> list[dict[str, str]]:
    """The expiry tag of an endpoint this deploy creates: ``--ttl`` (the input's), else the environment's."""
    ttl = env_ttl if wanted.ttl is None else expiry.parse_ttl(wanted.ttl, "input.ttl")
    return expiry.expiry_tags(ttl, now or datetime.now(UTC))


def _declared(name: str, endpoints: dict[str, EndpointSettings], env: str) -> EndpointSettings:
    settings = endpoints.get(name)
    if settings is None:
        raise UnknownEndpoint(
            f"endpoint {name!r}: not declared for environment {env}; accepted: "
            f"{', '.join(sorted(endpoints)) or 'none declared'} (the keys of its cdk.json endpoints)"
        )
    return settings


def _first_of_its_endpoint(
    stepfunctions: Any, state_machine_arn: str, execution_name: str, name: str
) -> None:
    first = other_deploy(stepfunctions, state_machine_arn, execution_name, name)
    if first:
        raise DeployInProgress(
            f"endpoint {name!r}: deploy execution {first} is still running; accepted: one deploy at a time "
            f"per endpoint: wait for it to end (`hfpipe deploy` follows it), then deploy again"
        )


def _approved_version(sagemaker: Any, ref: str, env: str, role_arn: str) -> requests.VersionInfo:
    """The version ``ref`` names: of this environment's groups, existing, Approved, with an instance type."""
    arn = version_arn(ref, env, role_arn, sagemaker.meta.region_name)
    try:
        described = sagemaker.describe_model_package(ModelPackageName=arn)
    except Exception as err:
        if rule.is_not_found(err) or "not found" in str(err):
            raise VersionNotFound(f"version {ref!r} ({arn}): not found") from None
        raise
    info = requests.version_info(env, described)
    if not info.group.lower().startswith(registry.group_prefix(env)):
        raise VersionOfAnotherEnvironment(
            f"version {info.arn}: group {info.group} is not environment {env}'s"
        )
    if info.status != "Approved":
        raise VersionNotApproved(
            f"version {info.ref} ({info.arn}) is {info.status or 'without a status'}; accepted: an Approved "
            f"version (`hfpipe models approve {info.ref} --env {env}`)"
        )
    if not info.instance_type:
        raise VersionNotDeployable(
            f"version {info.ref}: no SupportedRealtimeInferenceInstanceTypes to deploy on"
        )
    trained_on = registry.adapter_base(described)
    if trained_on:
        # An unmerged LoRA adapter (docs/adapters.md): no model of its own to serve; it goes on the shared base.
        raise VersionNotDeployable(
            f"version {info.ref} is a LoRA adapter of {trained_on} (its registry metadata adapter_base_model): "
            f"it has no endpoint of its own; accepted: `hfpipe deploy --env {env} --adapter NAME --model "
            f"{info.ref}` (the environment's shared base), or a version of a recipe that merges its adapter"
        )
    return info


def _first_plan(
    wanted: DeployInput,
    settings: EndpointSettings,
    info: requests.VersionInfo,
    env: str,
    execution_name: str,
) -> DeployPlan:
    """What every action shares (``DeployPlan.first``), once the version's recipe gives the endpoint its smoke
    test."""
    endpoint_name = settings.endpoint_name(env)
    try:
        smoke = requests.smoke_spec(resolve_recipe(recipe_name=info.recipe), endpoint_name, execution_name)
    except Exception as err:
        raise VersionNotDeployable(
            f"version {info.ref}: recipe {info.recipe!r} has no smoke test here: {err}"
        ) from None
    return DeployPlan.first(wanted, settings, env, info, smoke)


def prepare(
    event_input: Any,
    execution_name: str,
    env: str,
    endpoints: dict[str, EndpointSettings],
    role_arn: str,
    clients: dict[str, Any],
    state_machine_arn: str | None = None,
    waiting: AlarmWait | None = None,
    now: datetime | None = None,
    ttl_seconds: int | None = None,
    gate_mode: str = evaluation_gate.DEFAULT_GATE_MODE,
) -> DeployPlan:
    """What this deploy does; ``clients`` has "sagemaker", "ssm", "application-autoscaling",
    "service-quotas", "cloudwatch", "s3" and (with ``state_machine_arn``, the deploy state machine's)
    "stepfunctions". ``waiting``: the ``alarm_wait`` of the previous look when this one follows a wait.
    ``ttl_seconds``: the environment's time to live of an endpoint it creates (None: no expiry).
    ``gate_mode``: the environment's cdk.json evaluation_gate (``EVALUATION_GATE``)."""
    sagemaker = clients["sagemaker"]
    wanted = _accepted(event_input)
    settings = _declared(wanted.endpoint, endpoints, env)
    if state_machine_arn:
        _first_of_its_endpoint(clients["stepfunctions"], state_machine_arn, execution_name, wanted.endpoint)
    info = _approved_version(sagemaker, wanted.version, env, role_arn)
    # Every look (a look after a wait for alarms too) reads what serves just then.
    decision = check_evaluation(
        sagemaker, clients["s3"], env, info, settings.endpoint_name(env), wanted, gate_mode, execution_name
    )
    plan = _first_plan(wanted, settings, info, env, execution_name)
    endpoint = describe_endpoint(sagemaker, plan.endpoint_name)
    others = neighbours(env, endpoints, wanted.endpoint)
    if endpoint is None:
        _check_fleet(settings, None, None, str(info.instance_type), settings.instance_count, clients, others)
        made = expires(wanted, ttl_seconds, now)
        plan = _with_requests(plan, info, role_arn, execution_name, env, settings.instance_count, None, made)
    else:
        plan = _update(plan, endpoint, info, role_arn, execution_name, env, clients, waiting, now, others)
    if plan.action in ("create", "update"):
        aws.log_json(
            LOG, "deploy prepared", action=plan.action, version=info.arn, endpoint=plan.endpoint_name
        )
    # Recorded by the act: this step passed the gate with the override (docs/evaluation.md).
    record_override(sagemaker, info.arn, decision, execution_name)
    return plan


def _update(
    plan: DeployPlan,
    endpoint: dict[str, Any],
    info: requests.VersionInfo,
    role_arn: str,
    execution_name: str,
    env: str,
    clients: dict[str, Any],
    waiting: AlarmWait | None,
    now: datetime | None,
    others: tuple[str, ...] = (),
) -> DeployPlan:
    """The endpoint exists: check it is this environment's deploy's and settled, then update it blue/green
    (or find the version serving already, or wait for its rollback alarms)."""
    sagemaker, autoscaling = clients["sagemaker"], clients["application-autoscaling"]
    endpoint_tags = rule.tags_of(sagemaker, endpoint["EndpointArn"])
    _check_endpoint(endpoint, endpoint_tags, env, plan.name)
    served_arn = read_config(sagemaker, endpoint["EndpointConfigName"]).version_arn
    _check_task(sagemaker, endpoint["EndpointName"], endpoint_tags, served_arn, info, env)
    live = describe_config(sagemaker, endpoint["EndpointConfigName"]) or {}
    live_tags = rule.tags_of(sagemaker, live["EndpointConfigArn"]) if live else {}
    variant = (live.get("ProductionVariants") or [{}])[0]
    # The version that serves is the live config's model's package (never a tag: hfpipe.core.deploy.what_serves).
    previous = PreviousDeploy(
        endpoint_config_name=endpoint["EndpointConfigName"],
        model_version_arn=served_arn,
        model_name=variant.get("ModelName"),
        instance_type=variant.get("InstanceType"),
    )
    if previous.model_version_arn == info.arn:
        return _already_serving(plan, endpoint, endpoint_tags, live, live_tags, clients["ssm"], env)
    count = plan.settings.instance_count
    target = scalable_target(autoscaling, plan.endpoint_name)
    if target is not None:
        # The new fleet starts as large as the old one is now: auto scaling waits while the update runs.
        count = min(max(count, _live_count(endpoint)), int(target.get("MaxCapacity") or count))
    instance_type = str(info.instance_type)
    _check_fleet(plan.settings, endpoint, previous, instance_type, count, clients, others)
    plan = replace(plan, previous=previous)
    # The new config and model expire with the endpoint they serve (an update keeps the endpoint's expiry).
    kept = endpoint_tags.get(contract.TAG_EXPIRES_AT)
    made = [{"Key": contract.TAG_EXPIRES_AT, "Value": kept}] if kept else []
    plan = _with_requests(plan, info, role_arn, execution_name, env, count, target, made)
    # Before anything is written: an update started while a rollback alarm is in ALARM is rolled back.
    wait = alarm_wait(clients["cloudwatch"], plan.requests.UpdateEndpoint or {}, waiting, now)
    if wait is not None:
        aws.log_json(LOG, "waiting for rollback alarms", endpoint=plan.endpoint_name, **asdict(wait))
        return replace(plan, action="wait", alarm_wait=wait, requests=DeployRequests())  # nothing sent yet
    plan = replace(plan, waited_for_alarms=waiting)
    # Last, once nothing can refuse any more: an instance type change needs the target deregistered first.
    if previous.instance_type not in (None, instance_type):
        plan = replace(plan, scaling_deregistered=remove_scaling(autoscaling, plan.endpoint_name, env))
    return plan


def _with_requests(
    plan: DeployPlan,
    info: requests.VersionInfo,
    role_arn: str,
    execution_name: str,
    env: str,
    count: int,
    target: dict[str, Any] | None,
    expiry_tags: tuple[dict[str, str], ...] | list[dict[str, str]] = (),
) -> DeployPlan:
    """The plan with the model and config it makes and its requests: create, or (``plan.previous`` naming
    what serves) update with the way back; each checked against botocore's shapes. ``expiry_tags``: the
    expiry of what it makes (hfpipe.core.deploy.expiry)."""
    instance_type = str(info.instance_type)
    model_name = requests.resource_name(plan.endpoint_name, info.number, execution_name)
    tags = requests.deploy_tags(env, plan.name, info.recipe, info.arn, execution_name, task_of(info.recipe))
    tags = tags + list(expiry_tags)
    config = requests.endpoint_config_request(
        model_name, model_name, instance_type, count, tags, plan.smoke.serving_kind
    )
    built = {
        "CreateModel": _checked("CreateModel", requests.model_request(model_name, role_arn, info.arn, tags)),
        "CreateEndpointConfig": _checked("CreateEndpointConfig", config),
    }
    if plan.previous is None:
        built["CreateEndpoint"] = _checked(
            "CreateEndpoint", requests.endpoint_request(plan.endpoint_name, model_name, tags)
        )
    else:
        built["UpdateEndpoint"] = _checked(
            "UpdateEndpoint", requests.update_request(env, plan.settings, model_name)
        )
        back = requests.rollback_request(
            plan.endpoint_name, str(plan.previous.endpoint_config_name), autoscaled=target is not None
        )
        built["Rollback"] = _checked("UpdateEndpoint", back)
    return replace(
        plan,
        action="create" if plan.previous is None else "update",
        model_name=model_name,
        endpoint_config_name=model_name,
        instance_type=instance_type,
        instance_count=count,
        requests=DeployRequests(**built),
    )


def _already_serving(
    plan: DeployPlan,
    endpoint: dict[str, Any],
    endpoint_tags: dict[str, str],
    live: dict[str, Any],
    live_tags: dict[str, str],
    ssm: Any,
    env: str,
) -> DeployPlan:
    """The live config serves this version: the stored record is the answer when it and the endpoint's tag
    say so; otherwise an earlier deploy stopped before its Record, which this one repeats (after a smoke test)."""
    variant = (live.get("ProductionVariants") or [{}])[0]
    plan = replace(
        plan,
        model_name=variant.get("ModelName"),
        endpoint_config_name=endpoint["EndpointConfigName"],
        instance_type=variant.get("InstanceType"),
        instance_count=variant.get("InitialInstanceCount"),
        deployed_by=live_tags.get(contract.TAG_DEPLOY_EXECUTION),
        requests=DeployRequests(),
    )
    stored = _stored_record(ssm, env, plan.name)
    version = plan.model_version_arn
    recorded = stored.model_version_arn if stored else None
    if recorded == version == endpoint_tags.get(contract.TAG_MODEL_VERSION):
        aws.log_json(LOG, "already serving", version=version, endpoint=endpoint["EndpointName"])
        return replace(plan, action="none", record=stored)
    if stored is not None:
        # The stored record is this version's (its endpoint tag was not written) or the one before it.
        same = stored.model_version_arn == version
        previous = PreviousDeploy(
            endpoint_config_name=stored.previous_endpoint_config if same else stored.endpoint_config,
            model_version_arn=stored.previous_version if same else stored.model_version_arn,
            model_name=None,
            instance_type=None,
        )
        plan = replace(plan, previous=previous)
    return replace(plan, action="record")


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Event: {"input": <the execution input>, "execution_name": <name>, "state_machine": <its ARN>} (and,
    after a wait for the rollback alarms, "alarm_wait": the previous result's); or {"recheck": <Prepare's
    result>, "before": "traffic moves" | "the record is written"}; or {"way_back_failed": <Prepare's result>,
    "error": ..., "rollback_error": ...} (raises WayBackFailed)."""
    aws.bind(event)
    if "recheck" in event:
        plan = DeployPlan.from_json(event["recheck"])
        return recheck_approval(aws.client("sagemaker"), plan, str(event["before"]))
    if "way_back_failed" in event:
        way_back_failed(
            aws.client("sagemaker"),
            DeployPlan.from_json(event["way_back_failed"]),
            os.environ["HFPIPE_ENV"],
            event.get("error"),
            event.get("rollback_error"),
        )
    return prepare(
        event.get("input"),
        str(event["execution_name"]),
        os.environ["HFPIPE_ENV"],
        deployments.settings_from_json(os.environ.get("DEPLOY_ENDPOINTS", "{}")),
        os.environ["EXECUTION_ROLE_ARN"],
        {s: aws.client(s) for s in CLIENTS},
        event.get("state_machine"),
        alarm_wait_from_json(event.get("alarm_wait")),
        ttl_seconds=expiry.ttl_of_variables(os.environ),
        gate_mode=os.environ.get("EVALUATION_GATE", evaluation_gate.DEFAULT_GATE_MODE),
    ).to_json()
