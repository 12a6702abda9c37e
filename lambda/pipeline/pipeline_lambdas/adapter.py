"""The adapter state machine's steps (stacks/constructs/adapter_state_machine.py): put an approved adapter
version on the environment's shared base, roll an adapter back, delete one (docs/adapters.md).

Input of the execution: ``{"action": "deploy", "adapter": NAME, "version": "RECIPE/N" | ARN}``,
``{"action": "rollback", "adapter": NAME}`` or ``{"action": "delete", "adapter": NAME}``. The event of each
step: ``{"step": ..., "input": <that input>, "execution_name": ..., "state_machine": <its ARN>}``, and for the
steps after ``apply`` its result as ``applied``.

- ``apply``: the request checked (AdapterRefused, nothing created: a bad input, another execution for the
  same adapter still running, a version ARN of another region or account, a base the endpoint-usage quota
  cannot hold beside the named endpoints (``check_base_quota``), and hfpipe.core.adapters.adapter_deploy's
  refusals), then the version chosen (a
  rollback's: ``adapter_deploy.rollback_target``, read from the adapter's component) and put on the base
  (``adapter_deploy.apply_adapter``: the base made when absent). While the base's endpoint or component is
  not InService yet it raises AdapterNotReady, which the state machine retries; every step it repeats looks
  first, so a retry creates nothing twice. Returns what it did and the smoke test of the version's recipe,
  aimed at the adapter's component.
- ``wait``: AdapterNotReady until the adapter's component is InService; AdapterFailed when it failed.
- ``bake``: one round of the bake, after a probe of the adapter (the SmokeTest function's call of its
  component, ``BAKE_PROBES`` of them spread over ``BAKE_SECONDS``): the probe must have answered, and the
  component's Invocation5XXErrors and InvocationModelErrors since it was applied (CloudWatch, AWS/SageMaker,
  dimension InferenceComponentName) must be none; AdapterBakeFailed otherwise. No answer is never healthy:
  the bake passes on ``BAKE_PROBES`` answers, not on metrics that may hold no datapoint (``bake``).
- ``way_back``: the adapter as it was: a component this deploy created is deleted, an updated one is updated
  back to the artifact it served before; ``unchanged`` touches nothing. ``settled`` waits (AdapterNotReady)
  until that is done.
- ``delete``: the adapter's component deleted (``adapter_deploy.delete_adapter``); ``gone`` waits
  (AdapterNotReady) until it is.
Every step acts on its own adapter's component only.
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta
from typing import Any

from hfpipe.core.adapters import adapter_deploy
from hfpipe.core.adapters.adapter_deploy import AdapterRefused, BaseNames
from hfpipe.core.adapters.shared_base import SharedBase
from hfpipe.core.deploy import deploy_requests
from hfpipe.core.promotion import registry
from hfpipe.core.recipe.recipes import resolve_recipe
from hfpipe.core.run import cleanup, quotas
from pipeline_lambdas import aws
from pipeline_lambdas.deploy_common import describe_endpoint
from pipeline_lambdas.deploy_guards import other_deploy
from pipeline_lambdas.deploy_prepare import running_of_type, version_arn

LOG = aws.logger(__name__)
ACTIONS = ("deploy", "rollback", "delete")
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
    """The adapter's component (or the base) failed; its FailureReason is the message."""


class AdapterBakeFailed(Exception):
    """The adapter's component answered with errors during the bake."""


def _request(event_input: Any) -> dict[str, str]:
    accepted = (
        '{"action": "deploy", "adapter": NAME, "version": "RECIPE/N"}, {"action": "rollback", "adapter": '
        'NAME} or {"action": "delete", "adapter": NAME}'
    )
    if not isinstance(event_input, dict) or event_input.get("action") not in ACTIONS:
        raise AdapterRefused(f"input {event_input!r}: not accepted; accepted: {accepted}")
    wanted = ("action", "adapter", "version") if event_input["action"] == "deploy" else ("action", "adapter")
    if set(event_input) != set(wanted) or not all(isinstance(event_input[k], str) for k in wanted):
        raise AdapterRefused(f"input {event_input!r}: not accepted; accepted: {accepted}")
    adapter_deploy.check_adapter_name(event_input["adapter"])
    return dict(event_input)


def _wait(sagemaker: Any) -> adapter_deploy.Wait:
    """``wait`` for hfpipe.core.adapters.adapter_deploy: returns when InService, else AdapterNotReady (retried)."""

    def wait(kind: str, name: str) -> None:
        if kind == "endpoint":
            described = sagemaker.describe_endpoint(EndpointName=name)
            status = described["EndpointStatus"]
        else:
            described = sagemaker.describe_inference_component(InferenceComponentName=name)
            status = described["InferenceComponentStatus"]
        if status == "Failed":
            raise AdapterFailed(f"{kind} {name} failed: {described.get('FailureReason', 'no reason given')}")
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
        tags=adapter_deploy.tags(env),
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
    first = other_deploy(
        stepfunctions, event["state_machine"], event["execution_name"], request["adapter"], "adapter"
    )
    if first:
        raise AdapterRefused(
            f"adapter {request['adapter']!r}: execution {first} is still running; accepted: one change at a "
            "time per adapter: wait for it to end, then run the command again"
        )
    return request


def apply(event: dict[str, Any], env: str, clients: dict[str, Any]) -> dict[str, Any]:
    """The ``apply`` step (the module docstring)."""
    request, sagemaker = _first_change(event, clients["stepfunctions"]), clients["sagemaker"]
    base, serving = base_of_environment(), None
    if request["action"] == "rollback":
        version, serving = adapter_deploy.rollback_target(sagemaker, env, request["adapter"])
    else:
        version = _version(sagemaker, request["version"], env)
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
    applied = adapter_deploy.apply_adapter(
        sagemaker,
        env,
        base,
        request["adapter"],
        version,
        base_requests=base_requests(env, base),
        wait=_wait(sagemaker),
        tags=adapter_deploy.tags(env),
        expect_serving=serving,
    )
    aws.log_json(LOG, "adapter applied", **{k: v for k, v in applied.items() if k != "base_created"})
    return {
        **applied,
        "adapter": request["adapter"],
        "version_ref": info.ref,
        "smoke": smoke.to_json(),
        "applied_at": datetime.now(UTC).isoformat(),
    }


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


def way_back(applied: dict[str, Any], sagemaker: Any, env: str) -> dict[str, Any]:
    """The ``way_back`` step: the adapter as it was before this deploy."""
    name = applied["component"]
    if applied["action"] == "created":
        sagemaker.delete_inference_component(InferenceComponentName=name)
        return {"way_back": "deleted", "component": name}
    if applied["action"] == "updated" and applied.get("previous_artifact"):
        spec = adapter_deploy.adapter_specification(env, applied["previous_artifact"])
        sagemaker.update_inference_component(InferenceComponentName=name, Specification=spec)
        return {"way_back": "updated back", "component": name, "artifact": applied["previous_artifact"]}
    return {"way_back": "nothing changed", "component": name}


def gone(sagemaker: Any, name: str) -> dict[str, Any]:
    """The ``gone`` step: AdapterNotReady while the component still exists."""
    try:
        described = sagemaker.describe_inference_component(InferenceComponentName=name)
    except Exception as err:
        if adapter_deploy.is_absent(err):
            return {"deleted": name}
        raise
    raise AdapterNotReady(f"inference component {name} is {described['InferenceComponentStatus']}")


def settled(applied: dict[str, Any], way_back_done: dict[str, Any], sagemaker: Any) -> dict[str, Any]:
    """The ``settled`` step: the way back done (the component gone, or InService again)."""
    if way_back_done.get("way_back") == "deleted":
        return gone(sagemaker, applied["component"])
    _wait(sagemaker)("inference-component", applied["component"])
    return {"component": applied["component"], "status": "InService"}


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """One step of the adapter state machine (the module docstring)."""
    aws.bind(event)
    env, step = os.environ["HFPIPE_ENV"], event["step"]
    sagemaker = aws.client("sagemaker")
    applied = event.get("applied") or {}
    if step == "apply":
        clients = {
            "stepfunctions": aws.client("stepfunctions"),
            "service-quotas": aws.client("service-quotas"),
        }
        return apply(event, env, {"sagemaker": sagemaker, **clients})
    if step == "wait":
        _wait(sagemaker)("inference-component", applied["component"])
        return {"component": applied["component"], "status": "InService"}
    if step == "bake":
        return bake_step(event, aws.client("cloudwatch"))
    if step == "way_back":
        return way_back(applied, sagemaker, env)
    if step == "delete":
        request = _first_change(event, aws.client("stepfunctions"))
        return {"component": adapter_deploy.delete_adapter(sagemaker, env, request["adapter"])}
    if step == "settled":
        return settled(applied, event.get("way_back") or {}, sagemaker)
    if step == "gone":
        return gone(sagemaker, str(event["component"]))
    raise ValueError(
        f"step {step!r}: not accepted; accepted: apply, wait, bake, way_back, settled, delete, gone"
    )
