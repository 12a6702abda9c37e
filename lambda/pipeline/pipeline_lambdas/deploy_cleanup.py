"""DeployCleanup: after a deploy failed, remove what it made that nothing serves from; never the live version.

- The model and endpoint config named for this execution go when they exist, carry this environment's tags and
  this deploy execution's (``TAG_DEPLOY_EXECUTION``), and the endpoint does not use the config (neither as its
  config nor as the one an update is moving to; while the endpoint is Creating, Updating or RollingBack its
  configs are left, and a rerun of the clean-up removes them).
- The endpoint goes only when this deploy created it (``action`` create, and its tags name this execution): it
  never served. An endpoint being updated is never deleted: the old version keeps serving, whether SageMaker
  rolled the update back or the deploy put the old config back after a failed smoke test.
- When Prepare deregistered the endpoint's autoscaling (an instance type change) and the old fleet serves
  again, the declared autoscaling is put back (deploy_common.apply_scaling).

- What earlier deploys of the same endpoint left when their own clean-up failed (or never ran: an aborted or
  timed-out execution) goes too: configs and models tagged for this environment's deploys of the endpoint,
  whose deploy execution ended unsuccessfully, that neither the endpoint nor its deployment record uses
  (hfpipe.core.run.cleanup.deploy_leftovers; `hfpipe cleanup` applies the same rule to every named endpoint).
  A deploy that succeeds does the same after its Record (``sweep``: SweepLeftovers), so a rerun that succeeds
  removes them too.

Everything is decided from what exists and its tags, so a retried or repeated invocation finishes what an
interrupted one left; every step is tried, and ``DeployCleanupIncomplete`` names the ones that failed.
"""

from __future__ import annotations

import os
from typing import Any

from hfpipe import contract
from hfpipe.core.deploy.deploy_plan import DeployPlan
from hfpipe.core.run import cleanup as rule
from pipeline_lambdas import aws
from pipeline_lambdas.deploy_common import (
    apply_scaling,
    describe_endpoint,
    is_deploy_made,
    remove_scaling,
)
from pipeline_lambdas.deploy_way_back import put_back

LOG = aws.logger(__name__)
MODEL, CONFIG = rule.KINDS[2], rule.KINDS[1]


class DeployCleanupIncomplete(Exception):
    """Some step failed; running the clean-up again finishes it."""


def _made_here(tags: dict[str, str], env: str, name: str, execution_name: str) -> bool:
    return is_deploy_made(tags, env, name) and tags.get(contract.TAG_DEPLOY_EXECUTION) == execution_name


def _in_use(endpoint: dict[str, Any] | None, config_name: str) -> bool:
    if endpoint is None:
        return False
    if endpoint.get("EndpointStatus") in rule.NOT_DELETABLE_YET:
        return True  # SageMaker may be moving to (or back from) any config now: leave them until it is done
    pending = (endpoint.get("PendingDeploymentSummary") or {}).get("EndpointConfigName")
    return config_name in (endpoint.get("EndpointConfigName"), pending)


def cleanup(
    plan: DeployPlan,
    execution_name: str,
    env: str,
    clients: dict[str, Any],
    state_machine_arn: str | None = None,
) -> dict[str, Any]:
    """Delete what this deploy made and nothing serves from, and (with ``state_machine_arn``, the deploy state
    machine's) what earlier deploys of the endpoint left when their clean-up failed (``_sweep``); returns what
    was deleted and kept (and why)."""
    sagemaker, autoscaling = clients["sagemaker"], clients["application-autoscaling"]
    name, endpoint_name = plan.name, plan.endpoint_name
    deleted: list[str] = []
    kept: list[str] = []
    failed: list[str] = []
    endpoint: dict[str, Any] | None = None
    try:
        endpoint = describe_endpoint(sagemaker, endpoint_name)
        if endpoint is not None and plan.action == "create":
            endpoint = _delete_new_endpoint(
                sagemaker, autoscaling, endpoint, env, name, execution_name, deleted, kept
            )
        elif endpoint is not None:
            kept.append(
                f"endpoint {endpoint_name}: it serves the previous version ({endpoint.get('EndpointStatus')})"
            )
    except Exception as err:
        failed.append(f"endpoint {endpoint_name}: {err}")
        endpoint = {"EndpointStatus": "unknown"}  # keep its config and model: it may still use them
    if plan.action not in ("none", "record"):  # else Prepare found the version serving: it made nothing
        _delete_own(sagemaker, plan, endpoint, env, execution_name, deleted, kept, failed)
    restored = None
    if plan.scaling_deregistered and endpoint is not None and endpoint.get("EndpointStatus") == "InService":
        try:
            restored = apply_scaling(autoscaling, endpoint_name, plan.settings.autoscaling, env)
        except Exception as err:
            failed.append(f"autoscaling of {endpoint_name}: {err}")
    if state_machine_arn:
        _sweep(clients, state_machine_arn, env, name, deleted, failed)
    result = {"deleted": deleted, "kept": kept, "autoscaling_restored": restored}
    if failed:
        aws.log_json(LOG, "deploy cleanup incomplete", failed=failed, **result)
        raise DeployCleanupIncomplete(
            "; ".join(failed) + f" (done so far: {result}); rerunning the clean-up finishes it"
        )
    aws.log_json(LOG, "deploy cleanup", **result)
    return result


def sweep(plan: DeployPlan, env: str, clients: dict[str, Any], state_machine_arn: str) -> dict[str, Any]:
    """After a successful Record: what earlier deploys of the endpoint left when their clean-up failed
    (``_sweep``); raises DeployCleanupIncomplete naming what could not be removed (the state machine still
    ends Deployed, the error kept beside the record)."""
    deleted: list[str] = []
    failed: list[str] = []
    _sweep(clients, state_machine_arn, env, plan.name, deleted, failed)
    if failed:
        aws.log_json(LOG, "leftovers not all removed", failed=failed, deleted=deleted)
        raise DeployCleanupIncomplete(
            "; ".join(failed) + f" (removed: {deleted}); the next deploy or `hfpipe cleanup` finishes it"
        )
    aws.log_json(LOG, "leftovers removed", deleted=deleted)
    return {"deleted": deleted}


def _delete_own(
    sagemaker: Any,
    plan: DeployPlan,
    endpoint: dict[str, Any] | None,
    env: str,
    execution_name: str,
    deleted: list[str],
    kept: list[str],
    failed: list[str],
) -> None:
    """The config and model this execution made, when they carry its tags and the endpoint does not use them."""
    name, endpoint_name = plan.name, plan.endpoint_name
    config_kept = False
    for kind, resource in ((CONFIG, plan.endpoint_config_name), (MODEL, plan.model_name)):
        if not resource:
            continue
        label = f"{kind.name} {resource}"
        try:
            found = getattr(sagemaker, kind.describe)(**{kind.name_key: resource})
        except Exception as err:
            if not rule.is_not_found(err):
                failed.append(f"{label}: {err}")
            continue
        try:
            if not _made_here(rule.tags_of(sagemaker, found[kind.arn_key]), env, name, execution_name):
                kept.append(f"{label}: not tagged for this deploy execution")
            elif kind is CONFIG and _in_use(endpoint, resource):
                config_kept = True
                kept.append(f"{label}: in use by endpoint {endpoint_name}")
            elif kind is MODEL and config_kept:
                kept.append(f"{label}: its endpoint config is in use")
            else:
                rule.delete(sagemaker, kind, resource)
                deleted.append(label)
        except Exception as err:
            failed.append(f"{label}: {err}")


def _sweep(
    clients: dict[str, Any],
    state_machine_arn: str,
    env: str,
    name: str,
    deleted: list[str],
    failed: list[str],
) -> None:
    """What earlier deploys of endpoint ``name`` left when their clean-up failed (or never ran: an aborted or
    timed-out execution), found by their tags and their execution's end (hfpipe.core.run.cleanup.
    deploy_leftovers): deleted, configs before models."""
    sagemaker = clients["sagemaker"]
    try:
        found = rule.deploy_leftovers(
            sagemaker,
            rule.deploy_execution_status(clients["stepfunctions"], state_machine_arn),
            rule.recorded_configs(clients["ssm"], env),
            env,
            name,
        )
    except Exception as err:
        failed.append(f"finding what earlier deploys of {name} left: {err}")
        return
    for resource in found:
        label = f"{resource.kind.name} {resource.name}"
        try:
            rule.delete(sagemaker, resource.kind, resource.name)
            deleted.append(f"{label} (left by {resource.execution})")
        except Exception as err:
            failed.append(f"{label} (left by {resource.execution}): {err}")


def _delete_new_endpoint(
    sagemaker: Any,
    autoscaling: Any,
    endpoint: dict[str, Any],
    env: str,
    name: str,
    execution_name: str,
    deleted: list[str],
    kept: list[str],
) -> dict[str, Any] | None:
    """Delete the endpoint this deploy created (it never served); the endpoint as it is now (None: gone)."""
    label = f"endpoint {endpoint['EndpointName']}"
    status = endpoint.get("EndpointStatus")
    if not _made_here(rule.tags_of(sagemaker, endpoint["EndpointArn"]), env, name, execution_name):
        kept.append(f"{label}: not created by this deploy execution")
        return endpoint
    if status in rule.NOT_DELETABLE_YET:
        kept.append(
            f"{label}: not deletable yet ({status}); `hfpipe endpoints delete {endpoint['EndpointName']} --env "
            f"{env}` waits until SageMaker allows it"
        )
        return endpoint
    if status != rule.DELETING:
        remove_scaling(autoscaling, endpoint["EndpointName"], env)
        rule.delete(sagemaker, rule.KINDS[0], endpoint["EndpointName"])
    deleted.append(label)
    return None


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Event: {"deploy": <Prepare's result>, "execution_name": <name>, "error": <the caught error>,
    "state_machine": <its ARN>}; or {"sweep": <Prepare's result>, "execution_name": ..., "state_machine": ...}
    (after a successful Record: ``sweep``); or
    {"way_back": <Prepare's result>} (PutPreviousConfigBack: deploy_way_back.put_back)."""
    aws.bind(event)
    if "way_back" in event:
        return put_back(aws.client("sagemaker"), DeployPlan.from_json(event["way_back"]))
    if "sweep" in event:
        return sweep(
            DeployPlan.from_json(event["sweep"]),
            os.environ["HFPIPE_ENV"],
            {s: aws.client(s) for s in ("sagemaker", "stepfunctions", "ssm")},
            str(event["state_machine"]),
        )
    return cleanup(
        DeployPlan.from_json(event["deploy"]),
        str(event["execution_name"]),
        os.environ["HFPIPE_ENV"],
        {s: aws.client(s) for s in ("sagemaker", "application-autoscaling", "stepfunctions", "ssm")},
        event.get("state_machine"),
    )
