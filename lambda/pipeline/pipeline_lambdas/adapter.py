"""The adapter state machine's steps (stacks/constructs/adapter_state_machine.py): put an approved adapter
version on the environment's shared base, roll an adapter back, delete one, retire the base
(docs/adapters.md).

Input of the execution: ``{"action": "deploy", "adapter": NAME, "version": "RECIPE/N" | ARN}``,
``{"action": "rollback", "adapter": NAME}``, ``{"action": "delete", "adapter": NAME}`` or
``{"action": "retire"}``. The event of each step: ``{"step": ..., "input": <that input>, "execution_name":
..., "state_machine": <its ARN>}`` (``step``: one of adapter_plan.STEPS), and for the steps after ``apply``
its typed plan as ``plan`` (hfpipe.core.adapters.adapter_plan.AdapterPlan, read with ``from_json``).

- ``apply``: the request checked (AdapterRefused, nothing created: a bad input, another execution for the
  same adapter still running, a version ARN of another region or account, a base the endpoint-usage quota
  cannot hold beside the named endpoints, and hfpipe.core.adapters.adapter_deploy's refusals, among them an
  adapter that would not load on the base), then the version chosen (a rollback's:
  ``adapter_deploy.rollback_target``) and put on the base (``adapter_deploy.apply_adapter``: the base made
  when absent, and registered to scale to zero where cdk.json asks). Returns the plan.
- ``abandon``: after an Apply that failed (not refused), what this execution made is taken back: its own
  adapter component deleted and, no adapter remaining, the base it made retired; the execution then fails
  with Apply's error.
- ``wait``, ``bake``, ``confirm``, ``way_back`` and ``settled``, ``delete`` and ``gone``, ``retire``: their
  functions below.
A step waiting on SageMaker raises AdapterNotReady, which the state machine retries; every step it repeats
looks first, so a retry creates nothing twice. Every step acts on its own adapter's component only
(``retire``, on the base with no adapter).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from hfpipe import contract
from hfpipe.core import throttling
from hfpipe.core.adapters import adapter_deploy, scale_to_zero
from hfpipe.core.adapters.adapter_deploy import AdapterRefused, BaseNames
from hfpipe.core.adapters.adapter_plan import STEPS, AdapterDeleted, AdapterPlan, BaseRetired
from hfpipe.core.adapters.shared_base import SharedBase
from hfpipe.core.deploy import deploy_requests, expiry
from hfpipe.core.promotion import evaluation_gate, evaluation_reads, override_record, registry
from hfpipe.core.recipe.recipes import resolve_recipe
from hfpipe.core.run import cleanup, quotas
from pipeline_lambdas import aws
from pipeline_lambdas.deploy_common import describe_endpoint
from pipeline_lambdas.deploy_guards import other_deploy
from pipeline_lambdas.deploy_prepare import running_of_type, version_arn

LOG = aws.logger(__name__)
ACTIONS = ("deploy", "rollback", "delete", "retire")
#: The errors the bake reads, per inference component (AWS/SageMaker; "Invocation5XXErrors" and
#: "InvocationModelErrors": the component's server errors and its model's errors). The Amazon SageMaker AI
#: Developer Guide ("SageMaker AI endpoint invocation metrics", monitoring-cloudwatch.html) lists the
#: dimension InferenceComponentName ("Filters inference component invocation metrics"); no AWS source read
#: says SageMaker publishes them for an adapter component, which runs in its base's container. So they can
#: fail a bake, never pass one: the bake passes on its probes' answers (``bake``).
BAKE_METRICS = ("Invocation5XXErrors", "InvocationModelErrors")
#: What says the component's calls were counted at all (reported, not required: see BAKE_METRICS).
BAKE_COUNT_METRIC = "Invocations"


class AdapterNotReady(Exception):
    """What the step waits for is not InService yet (or not gone yet); the state machine retries it."""


class AdapterFailed(Exception):
    """The adapter's component (or the base) failed; its FailureReason is the message, with the way out."""


class AdapterBakeFailed(Exception):
    """The adapter's component answered with errors during the bake."""


class AdapterNotApproved(Exception):
    """The version's approval was withdrawn while it was deployed (read again before the deploy is done)."""


def _request(event_input: Any) -> dict[str, str]:
    accepted = (
        '{"action": "deploy", "adapter": NAME, "version": "RECIPE/N"} (and "override_evaluation": REASON), '
        '{"action": "rollback", "adapter": NAME}, {"action": "delete", "adapter": NAME} or {"action": "retire"}'
    )
    if not isinstance(event_input, dict) or event_input.get("action") not in ACTIONS:
        raise AdapterRefused(f"input {event_input!r}: not accepted; accepted: {accepted}")
    wanted = {"deploy": ("action", "adapter", "version"), "retire": ("action",)}.get(
        event_input["action"], ("action", "adapter")
    )
    given = set(event_input) - ({"override_evaluation"} if event_input["action"] == "deploy" else set())
    if given != set(wanted) or not all(isinstance(event_input[k], str) for k in event_input):
        raise AdapterRefused(f"input {event_input!r}: not accepted; accepted: {accepted}")
    if "adapter" in wanted:
        adapter_deploy.check_adapter_name(event_input["adapter"])
    return dict(event_input)


def way_out(env: str, kind: str, name: str) -> str:
    """The command that clears a Failed component or endpoint of the shared base."""
    prefix = BaseNames.of(env).component
    if kind == "inference-component" and name != prefix:
        adapter = name.removeprefix(f"{contract.PROJECT}-{env}-adapter-")
        return f"`hfpipe deploy --env {env} --adapter {adapter} --delete`, then deploy it again"
    return (
        f"delete its adapters (`hfpipe deploy --env {env} --adapter NAME --delete`), then "
        f"`{adapter_deploy.retire_command(env)}`; the next deploy makes the base again"
    )


def _wait(sagemaker: Any, env: str) -> adapter_deploy.Wait:
    """``wait`` for hfpipe.core.adapters.adapter_deploy: returns when InService, else AdapterNotReady (retried)."""

    def wait(kind: str, name: str) -> None:
        if kind == "endpoint":
            described = sagemaker.describe_endpoint(EndpointName=name)
            status = described["EndpointStatus"]
        else:
            described = sagemaker.describe_inference_component(InferenceComponentName=name)
            status = described["InferenceComponentStatus"]
        if status == "Failed":
            raise AdapterFailed(
                f"{kind} {name} failed: {described.get('FailureReason', 'no reason given')}; the way out: "
                f"{way_out(env, kind, name)}"
            )
        if status != "InService":
            raise AdapterNotReady(f"{kind} {name} is {status}")

    return wait


def base_of_environment() -> SharedBase:
    return SharedBase.from_json(json.loads(os.environ["SHARED_BASE"]))


def base_requests(env: str, base: SharedBase) -> dict[str, dict[str, Any]]:
    """The shared base's requests from the function's environment (the stack's synth-time choices)."""
    return adapter_deploy.base_requests(
        env,
        base,
        image=os.environ["SHARED_BASE_IMAGE"],
        role_arn=os.environ["EXECUTION_ROLE_ARN"],
        gpus=int(os.environ["SHARED_BASE_GPUS"]),
        memory_mb=int(os.environ["SHARED_BASE_MEMORY_MB"]),
        # A base made now expires with the environment's time to live (hfpipe.core.deploy.expiry); the reaper
        # retires it once expired and idle, never while adapters are on it.
        tags=adapter_deploy.tags(env)
        + expiry.expiry_tags(expiry.ttl_of_variables(os.environ), datetime.now(UTC)),
    )


def _version(sagemaker: Any, ref: str, env: str) -> dict[str, Any]:
    role_arn, region = os.environ["EXECUTION_ROLE_ARN"], sagemaker.meta.region_name
    try:  # an ARN of another region or account says so, rather than "not found"
        registry.check_location(ref, env, region=region, account=role_arn.split(":")[4])
    except registry.RegistryRefError as err:
        raise AdapterRefused(str(err)) from None
    arn = version_arn(ref, env, role_arn, region)
    try:
        return dict(sagemaker.describe_model_package(ModelPackageName=arn))
    except Exception as err:  # the deploy's Prepare reads "not found" the same way (deploy_prepare)
        if cleanup.is_not_found(err) or "not found" in str(err):
            raise AdapterRefused(f"version {ref!r} ({arn}): not found") from None
        raise


def _evaluated(s3: Any, version: dict[str, Any]) -> evaluation_gate.Evaluated | None:
    try:
        return evaluation_reads.evaluation_of(version, lambda uri: evaluation_reads.read_json(s3, uri))
    except evaluation_gate.EvaluationFormatError as err:
        raise AdapterRefused(
            f"version {version['ModelPackageArn']}: {err}; the gate cannot decide on it"
        ) from None


def _decided(
    version: dict[str, Any],
    env: str,
    champion: Any,
    evaluated: Any,
    where: str,
    override: Any,
    execution: str | None = None,
    serves_itself: bool = False,
) -> evaluation_gate.Decision:
    try:
        decision = evaluation_gate.decide(
            evaluated,
            version=registry.ref_of_arn(str(version["ModelPackageArn"]), env),
            champion_now=champion,
            mode=os.environ.get("EVALUATION_GATE", evaluation_gate.DEFAULT_GATE_MODE),
            where=where,
            override=override,
            description=version.get("ApprovalDescription"),
            execution=execution,
            serves_itself=serves_itself,
        )
    except evaluation_gate.OverrideError as err:  # its note would not fit what the description holds now
        raise AdapterRefused(f"input.override_evaluation: {err}") from None
    if not decision.allowed:
        raise AdapterRefused(f"refused by the evaluation gate: {decision.message}")
    aws.log_json(LOG, "evaluation gate passed", decision=decision.message)
    return decision


def check_evaluation(
    sagemaker: Any,
    s3: Any,
    env: str,
    request: dict[str, str],
    version: dict[str, Any],
    execution: str | None = None,
) -> evaluation_gate.Decision:
    """The evaluation gate (hfpipe.core.promotion.evaluation_gate), as the command applies it: the version's
    evaluation and what the adapter serves, both read now; AdapterRefused with the figures when it refuses.
    The decision: ``apply`` records an override's note (naming ``execution``) once it has passed with it."""
    arn = str(version["ModelPackageArn"])
    evaluated = _evaluated(s3, version)
    champion = evaluation_reads.champion_on_adapter(sagemaker, env, request["adapter"])
    itself = champion is not None and champion.same_as(evaluation_reads.champion_of_version(sagemaker, arn))
    where = f"adapter {request['adapter']}"
    return _decided(
        version,
        env,
        None if itself else champion,  # it serves this version already: it replaces nothing
        evaluated,
        where,
        request.get("override_evaluation"),
        execution,
        serves_itself=itself,
    )


def check_rollback(s3: Any, env: str, request: dict[str, str], version: dict[str, Any]) -> None:
    """A rollback's target passes the gate like a deploy (docs/adapters.md, "Rolling back"), judged against the
    champion it was evaluated against: what serves now is the version being left, so the stale rule (another
    version serves since the job) does not apply, and the rest does: a target evaluated ``worse``, or with no
    evaluation (or scored alone) where the gate is mandatory, is refused; nothing records which versions
    served on a component before, so "it served once" cannot stand in for the gate."""
    evaluated = _evaluated(s3, version)
    champion = evaluated.champion if evaluated is not None else None
    _decided(version, env, champion, evaluated, f"adapter {request['adapter']} (rollback)", None)


def check_base_quota(sagemaker: Any, service_quotas: Any, env: str, base: SharedBase) -> None:
    """Before the shared base is made (its endpoint absent): the account's endpoint-usage quota of its instance
    type holds its ``copies`` instances beside what the environment's named endpoints run of that type now
    (read from SageMaker, as a deploy counts them: deploy_prepare.running_of_type); AdapterRefused otherwise,
    with nothing created. Endpoints outside the environment are SageMaker's to count."""
    names = BaseNames.of(env)
    if describe_endpoint(sagemaker, names.endpoint) is not None:
        return
    named = tuple(n for n in os.environ.get("NAMED_ENDPOINTS", "").split(",") if n)
    running = running_of_type(sagemaker, named, base.instance_type)
    quota = quotas.endpoint_quota_name(base.instance_type)
    try:
        quotas.check_quotas(service_quotas, {quota: base.instances + sum(running.values())})
    except quotas.QuotaTooLowError as err:
        beside = "".join(f", {n} {c} beside it" for n, c in running.items())
        raise AdapterRefused(
            f"shared base {names.endpoint}: {err}: its {base.instances} instance(s) of {base.instance_type} "
            f"(shared_base.copies){beside} must fit before the base is made; raise the quota (cdk.json quotas, "
            "the QuotaStack) or lower shared_base.copies"
        ) from None


def _first_change(event: dict[str, Any], stepfunctions: Any) -> dict[str, str]:
    """The execution's request, refused while another execution for the same adapter runs."""
    request = _request(event.get("input"))
    # A retirement waits for another retirement (its input's action); a change, for one of its adapter.
    name, key = (request["adapter"], "adapter") if "adapter" in request else ("retire", "action")
    first = other_deploy(stepfunctions, event["state_machine"], event["execution_name"], name, key)
    if first:
        raise AdapterRefused(
            f"adapter {request.get('adapter', 'shared-base')!r}: execution {first} is still running; "
            "accepted: one change at a time per adapter: wait for it to end, then run the command again"
        )
    return request


def _gated(
    event: dict[str, Any], env: str, request: dict[str, str], clients: dict[str, Any]
) -> tuple[dict[str, Any], Any, evaluation_gate.Decision | None]:
    """The version a deploy or a rollback moves to, what the component serves (a rollback's), and the gate's
    decision on a deploy (None: a rollback, gated by check_rollback); AdapterRefused where the gate refuses."""
    sagemaker = clients["sagemaker"]
    if request["action"] == "rollback":
        version, serving = adapter_deploy.rollback_target(sagemaker, env, request["adapter"])
        check_rollback(clients["s3"], env, request, dict(version))
        return dict(version), serving, None
    if request["action"] == "deploy":
        version = _version(sagemaker, request["version"], env)
        execution = event["execution_name"]
        return version, None, check_evaluation(sagemaker, clients["s3"], env, request, version, execution)
    raise AdapterRefused(f"action {request['action']!r}: not a deploy; accepted: deploy, rollback")


def apply(event: dict[str, Any], env: str, clients: dict[str, Any]) -> dict[str, Any]:
    """The ``apply`` step (the module docstring): the typed plan, as JSON."""
    request, sagemaker = _first_change(event, clients["stepfunctions"]), clients["sagemaker"]
    base = base_of_environment()
    version, serving, decision = _gated(event, env, request, clients)
    info = deploy_requests.version_info(env, version)
    try:
        smoke = deploy_requests.smoke_spec(
            resolve_recipe(recipe_name=info.recipe), BaseNames.of(env).endpoint, event["execution_name"]
        )
    except Exception as err:
        raise AdapterRefused(
            f"version {info.ref}: recipe {info.recipe!r} has no smoke test here: {err}"
        ) from None
    check_base_quota(sagemaker, clients["service-quotas"], env, base)
    wake_base(sagemaker, env, base)
    applied = adapter_deploy.apply_adapter(
        sagemaker,
        env,
        base,
        request["adapter"],
        version,
        base_requests=base_requests(env, base),
        wait=_wait(sagemaker, env),
        tags=adapter_deploy.tags(env),
        expect_serving=serving,
        s3=clients.get("s3"),
    )
    started = event.get("started")
    if (
        applied["action"] == "unchanged"
        and isinstance(started, str)
        and adapter_deploy.created_since(sagemaker, applied["component"], datetime.fromisoformat(started))
    ):
        applied["action"] = "created"  # by an earlier call of this execution (its answer was lost)
    aws.log_json(LOG, "adapter applied", **{k: v for k, v in applied.items() if k != "base_created"})
    base_created = _made_here(sagemaker, env, started, applied["base_created"])
    if base_created:
        scale_base(env, base)
    plan = AdapterPlan(
        request=request["action"],
        adapter=request["adapter"],
        component=applied["component"],
        action=applied["action"],
        version_ref=info.ref,
        version_arn=applied["version_arn"],
        artifact=applied["artifact"],
        previous_artifact=applied["previous_artifact"],
        base_created=base_created,
        smoke=smoke,
        applied_at=datetime.now(UTC).isoformat(),
    )
    _record_override(sagemaker, str(version["ModelPackageArn"]), decision, event["execution_name"])
    return plan.to_json()


def _record_override(
    sagemaker: Any, arn: str, decision: evaluation_gate.Decision | None, execution: str
) -> None:
    """The override this execution used, appended to the version's approval description by the act once
    Apply has passed the gate with it (hfpipe.core.promotion.override_record: once per execution, a retried
    Apply appends nothing); nothing where the gate passed without one, or a rollback (no override)."""
    if decision is None or decision.note is None:
        return
    if override_record.record(sagemaker, arn, decision.note, execution):
        aws.log_json(LOG, "evaluation gate override recorded", version=arn)


def scale_base(env: str, base: SharedBase) -> None:
    """The base this execution made scales to zero when idle and back on a call, where cdk.json turns it on:
    its scalable target, both policies and the alarm (each a create-or-update, so a retried Apply changes
    nothing twice)."""
    if base.scale_to_zero.enabled:
        component = BaseNames.of(env).component
        scale_to_zero.apply_scaling(
            aws.client("application-autoscaling"),
            aws.client("cloudwatch"),
            component,
            base.scale_to_zero,
            base.copies,
        )
        aws.log_json(
            LOG,
            "shared base scales to zero",
            component=component,
            idle_minutes=base.scale_to_zero.idle_minutes,
        )


def wake_base(sagemaker: Any, env: str, base: SharedBase) -> None:
    """A base scaled to zero is brought back before an adapter goes on it (its smoke test would otherwise meet
    SageMaker's no-capacity answer): its copies set back to ``copies``, then AdapterNotReady until they are up
    (Apply is retried every 30 s). A base that is absent, or up, is left as it is."""
    if not base.scale_to_zero.enabled:
        return
    component = BaseNames.of(env).component
    try:
        described = sagemaker.describe_inference_component(InferenceComponentName=component)
    except Exception as err:
        if adapter_deploy.is_absent(err):
            return
        raise
    copies = described.get("RuntimeConfig") or {}
    if scale_to_zero.at_zero(described):
        sagemaker.update_inference_component_runtime_config(
            **scale_to_zero.wake_request(component, base.copies)
        )
        raise AdapterNotReady(f"base component {component} is waking from zero")
    if copies.get("CurrentCopyCount") == 0:
        raise AdapterNotReady(f"base component {component} is waking from zero")


def unscale_base(env: str) -> None:
    """Before a pass of the base's retirement: its alarm and scalable target removed (what is gone already is
    no error), where cdk.json turns scale to zero on."""
    if base_of_environment().scale_to_zero.enabled:
        component = BaseNames.of(env).component
        scale_to_zero.remove_scaling(
            aws.client("application-autoscaling"), aws.client("cloudwatch"), component
        )


def _made_here(sagemaker: Any, env: str, started: Any, this_call: list[str]) -> list[str]:
    """What of the base this execution made (``adapter_deploy.made_since`` its StartTime, which the state
    machine passes as ``started``; without it, what this call of Apply created)."""
    if not isinstance(started, str):
        return list(this_call)
    return adapter_deploy.made_since(sagemaker, env, datetime.fromisoformat(started))


def _component_sums(
    cloudwatch: Any, component: str, start: datetime, end: datetime
) -> dict[str, tuple[float, int]]:
    """metric -> (Sum, datapoints) of the component's BAKE_METRICS and BAKE_COUNT_METRIC from ``start``; the
    window ends a minute ahead: CloudWatch keeps a datapoint at its own time, and the last minute may still
    be arriving."""
    sums = {}
    for metric in (*BAKE_METRICS, BAKE_COUNT_METRIC):
        points = cloudwatch.get_metric_statistics(
            Namespace="AWS/SageMaker",
            MetricName=metric,
            Dimensions=[{"Name": "InferenceComponentName", "Value": component}],
            StartTime=start,
            EndTime=end + timedelta(seconds=60),
            Period=60,
            Statistics=["Sum"],
        ).get("Datapoints", [])
        sums[metric] = (sum(float(p.get("Sum", 0)) for p in points), len(points))
    return sums


def bake(
    applied: dict[str, Any],
    cloudwatch: Any,
    seconds: int,
    *,
    probes: int,
    progress: dict[str, Any] | None,
    probe: Any,
    now: datetime | None = None,
) -> dict[str, Any]:
    """One round of the ``bake`` step, after one probe of the adapter (``probe``: the SmokeTest function's
    answer; ``progress``: the previous round's result, None or ``{"probes": 0}`` before the first). The probe
    must have answered, and the component's errors since it was applied (at most the last ``seconds``; errors
    of the version it served before are not this one's) must be none: AdapterBakeFailed otherwise. Done
    (``done``) after ``probes`` answers. A bake that saw no answer never passes, whatever the metrics hold."""
    name = f"adapter {applied['adapter']!r} ({applied['component']})"
    if probes < 1:
        raise AdapterBakeFailed(f"{name}: a bake of {probes} probes sees nothing; accepted: at least 1")
    answered = int((progress or {}).get("probes", 0))
    if not isinstance(probe, dict) or probe.get("ok") is not True:
        raise AdapterBakeFailed(
            f"{name}: probe {answered + 1} of {probes} during the {seconds} s bake brought no answer "
            f"({str(probe)[:200]}); a bake with no answer is not healthy"
        )
    answered += 1
    end = now or datetime.now(UTC)
    start = max(datetime.fromisoformat(applied["applied_at"]), end - timedelta(seconds=seconds))
    sums = _component_sums(cloudwatch, applied["component"], start, end)
    errors = {metric: sums[metric][0] for metric in BAKE_METRICS}
    if any(errors.values()):
        raise AdapterBakeFailed(
            f"{name} answered with errors during the {seconds} s bake: "
            + ", ".join(f"{k} {v:g}" for k, v in errors.items() if v)
        )
    calls, datapoints = sums[BAKE_COUNT_METRIC]
    return {
        "bake_seconds": seconds,
        "probes": answered,
        "probes_wanted": probes,
        "done": answered >= probes,
        "errors": errors,
        # Whether CloudWatch counted the component's calls at all: no datapoints is not read as healthy.
        "metrics": f"{calls:g} Invocations counted"
        if datapoints
        else "no datapoints (not counted as healthy)",
    }


def bake_step(event: dict[str, Any], cloudwatch: Any) -> dict[str, Any]:
    """``bake`` with the function's settings and the round's state (``bake``: the previous round's result,
    ``probe``: this round's probe)."""
    return bake(
        event.get("applied") or {},
        cloudwatch,
        int(os.environ["BAKE_SECONDS"]),
        probes=int(os.environ["BAKE_PROBES"]),
        progress=event.get("bake"),
        probe=event.get("probe"),
    )


def confirm(plan: AdapterPlan, sagemaker: Any) -> dict[str, Any]:
    """The ``confirm`` step: the version's approval read again before the deploy is reported as done (its
    output is what the command prints and records as serving). AdapterNotApproved when it was withdrawn."""
    described = sagemaker.describe_model_package(ModelPackageName=plan.version_arn)
    status = described.get("ModelApprovalStatus")
    if status != adapter_deploy.APPROVED:
        raise AdapterNotApproved(
            f"version {plan.version_ref} ({plan.version_arn}) is {status} now, no longer "
            f"{adapter_deploy.APPROVED}: its approval was withdrawn while it was deployed; the adapter is put "
            "back as it was"
        )
    return {"version_arn": plan.version_arn, "status": status}


def _retried_if_throttled(what: str, call: Callable[[], Any]) -> Any:
    """``call()``; AdapterNotReady (the state machine retries it) when AWS throttles it."""
    try:
        return call()
    except Exception as err:
        if throttling.is_throttled(err):
            raise AdapterNotReady(f"{what}: throttled ({err}); retried") from None
        raise


def way_back(plan: AdapterPlan, sagemaker: Any, env: str) -> dict[str, Any]:
    """The ``way_back`` step: the adapter as it was before this deploy, once its component can take the
    change (AdapterNotReady while it is Creating or Updating: UpdateInferenceComponent and
    DeleteInferenceComponent are refused then)."""
    name = plan.component
    if plan.action == "unchanged" or (plan.action == "updated" and not plan.previous_artifact):
        return {"way_back": "nothing changed", "component": name}
    now = _retried_if_throttled(f"reading {name}", lambda: adapter_deploy.serving_state(sagemaker, name))
    if now is not None and now[0] in ("Creating", "Updating"):
        raise AdapterNotReady(f"inference component {name} is {now[0]}; the way back waits for it")
    if plan.action == "created":
        if now is not None and now[0] != "Deleting":
            _retried_if_throttled(
                f"deleting {name}", lambda: sagemaker.delete_inference_component(InferenceComponentName=name)
            )
        return {"way_back": "deleted", "component": name}
    previous = str(plan.previous_artifact)
    if now is None:
        raise AdapterFailed(
            f"inference component {name} is gone; it served {previous} before this deploy: deploy that version "
            "again"
        )
    if now[1] != previous:
        spec = adapter_deploy.adapter_specification(env, previous)
        _retried_if_throttled(
            f"updating {name} back",
            lambda: sagemaker.update_inference_component(InferenceComponentName=name, Specification=spec),
        )
    return {"way_back": "updated back", "component": name, "artifact": previous}


def gone(sagemaker: Any, name: str) -> dict[str, Any]:
    """The ``gone`` step: AdapterNotReady while the component still exists."""
    try:
        described = sagemaker.describe_inference_component(InferenceComponentName=name)
    except Exception as err:
        if adapter_deploy.is_absent(err):
            return {"deleted": name}
        raise
    raise AdapterNotReady(f"inference component {name} is {described['InferenceComponentStatus']}")


def settled(plan: AdapterPlan, way_back_done: dict[str, Any], sagemaker: Any, env: str) -> dict[str, Any]:
    """The ``settled`` step: the way back done (the component gone, or InService again); then a base this
    execution made is retired when no adapter remains on it (a failed first deploy leaves nothing billing)."""
    if way_back_done.get("way_back") != "deleted":
        _wait(sagemaker, env)("inference-component", plan.component)
        return {"component": plan.component, "status": "InService"}
    gone(sagemaker, plan.component)
    if not plan.base_created or adapter_deploy.adapters_left(sagemaker, env):
        return {"deleted": plan.component, "base": "kept"}
    unscale_base(env)
    waiting = adapter_deploy.retire_step(sagemaker, env)
    if waiting:
        raise AdapterNotReady(f"retiring the base this deploy made: {waiting}")
    return {"deleted": plan.component, "base": "retired"}


def abandon(event: dict[str, Any], env: str, sagemaker: Any) -> dict[str, Any]:
    """The ``abandon`` step (the module docstring): nothing this execution made is left billing."""
    request, started = _request(event.get("input")), event.get("started")
    if not isinstance(started, str):
        return {"abandoned": []}
    since = datetime.fromisoformat(started)
    component = adapter_deploy.component_name(env, request["adapter"])
    state = adapter_deploy.serving_state(sagemaker, component)
    if state is not None and adapter_deploy.created_since(sagemaker, component, since):
        if state[0] not in ("Creating", "Updating", "Deleting"):
            sagemaker.delete_inference_component(InferenceComponentName=component)
        raise AdapterNotReady(f"taking back {component}: it is {state[0]}")
    made = adapter_deploy.made_since(sagemaker, env, since)
    if not made or adapter_deploy.adapters_left(sagemaker, env):
        return {"abandoned": [], "base": "kept"}
    unscale_base(env)
    waiting = adapter_deploy.retire_step(sagemaker, env)
    if waiting:
        raise AdapterNotReady(f"retiring the base this deploy made: {waiting}")
    return {"abandoned": made, "base": "retired"}


def delete(event: dict[str, Any], env: str, sagemaker: Any, stepfunctions: Any) -> dict[str, Any]:
    """The ``delete`` step: the adapter's component deleted; what remains and what still bills."""
    request = _first_change(event, stepfunctions)
    if request["action"] != "delete":
        raise AdapterRefused(f"action {request['action']!r}: not a delete")
    name = adapter_deploy.delete_adapter(sagemaker, env, request["adapter"])
    remaining = [c for c in adapter_deploy.adapters_staying(sagemaker, env) if c != name]
    deleted = AdapterDeleted(
        component=name, remaining=remaining, base=adapter_deploy.billing(env, base_of_environment())
    )
    return deleted.to_json()


def retire(event: dict[str, Any], env: str, sagemaker: Any, stepfunctions: Any) -> dict[str, Any]:
    """The ``retire`` step: the shared base retired, or AdapterNotReady while a part of it is deleted."""
    request = _first_change(event, stepfunctions)
    if request["action"] != "retire":
        raise AdapterRefused(f"action {request['action']!r}: not a retirement")
    unscale_base(env)
    waiting = adapter_deploy.retire_step(sagemaker, env)
    if waiting:
        raise AdapterNotReady(f"retiring the shared base: {waiting}")
    retired = BaseRetired(
        gone=[f"{kind} {BaseNames.of(env).endpoint}" for kind in adapter_deploy.RETIRE_ORDER],
        base=adapter_deploy.billing(env, base_of_environment()),
    )
    return retired.to_json()


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """One step of the adapter state machine (the module docstring)."""
    aws.bind(event)
    env, step = os.environ["HFPIPE_ENV"], event["step"]
    if step not in STEPS:
        raise ValueError(f"step {step!r}: not accepted; accepted: {', '.join(STEPS)}")
    sagemaker = aws.client("sagemaker")
    if step == "apply":
        clients = {
            "sagemaker": sagemaker,
            "stepfunctions": aws.client("stepfunctions"),
            "s3": aws.client("s3"),
            "service-quotas": aws.client("service-quotas"),
        }
        return apply(event, env, clients)
    if step in ("delete", "retire"):
        act = delete if step == "delete" else retire
        return act(event, env, sagemaker, aws.client("stepfunctions"))
    if step == "gone":
        return gone(sagemaker, str(event["component"]))
    if step == "abandon":
        return abandon(event, env, sagemaker)
    plan = AdapterPlan.from_json(event["plan"])
    steps: dict[str, Callable[[], dict[str, Any]]] = {
        "wait": lambda: _waited(sagemaker, env, plan),
        "bake": lambda: bake_step({**event, "applied": plan.to_json()}, aws.client("cloudwatch")),
        "confirm": lambda: confirm(plan, sagemaker),
        "way_back": lambda: way_back(plan, sagemaker, env),
        "settled": lambda: settled(plan, event.get("way_back") or {}, sagemaker, env),
    }
    return steps[step]()


def _waited(sagemaker: Any, env: str, plan: AdapterPlan) -> dict[str, Any]:
    """The ``wait`` step: AdapterNotReady until the adapter's component is InService; AdapterFailed (naming the
    way out) when it failed."""
    _wait(sagemaker, env)("inference-component", plan.component)
    return {"component": plan.component, "status": "InService"}
