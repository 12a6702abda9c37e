"""Reaper (an EventBridge schedule, one per environment): deletes the environment's expired, idle endpoints.

An endpoint is deleted only when all of these hold (hfpipe.core.deploy.expiry, docs/deploy.md "Time to live"):
it carries this environment's tags (``hfpipe:managed-by``, ``hfpipe:env``), its ``hfpipe:expires-at`` has passed
(none: never, a kept endpoint included), it is InService or Failed, CloudWatch counts no ``Invocations`` of it
over the idle window, and it is not the environment's shared base while adapters are on it (the components are
read at the act). Tags, status and components are read again just before the delete. Then the endpoint config
and the model behind it go, each only when it carries this environment's tags (as `hfpipe endpoints delete`
decides: a model someone else made stays). A shared base with no adapter left is retired by the environment's
adapter state machine (an execution of ``{"action": "retire"}``, as `hfpipe deploy --retire-base` starts it: its
scaling taken off, then its component, endpoint, config and model in AWS's order; docs/adapters.md).

Every run works from what exists: a fault at any call (throttling past botocore's retries, a delete refused,
the endpoint gone meanwhile) is reported for that endpoint and the run goes on with the next; the next run
finds what is left. A config or model of this environment whose expiry has passed and that no endpoint uses
(the delete of an endpoint whose config or model delete failed) is deleted by a later run, so nothing is
deleted twice and nothing is left. The run's result is one structured log line and, when it deleted something
or met a fault, a message on the environment's notification topic: each endpoint deleted and what it billed
per day (hfpipe.core.cost's hourly price x instances x 24), what was left and why, the faults.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from hfpipe import contract
from hfpipe.core import names
from hfpipe.core.adapters import adapter_deploy
from hfpipe.core.deploy import expiry
from hfpipe.core.run import cleanup
from pipeline_lambdas import aws

LOG = aws.logger(__name__)
CLIENTS = ("sagemaker", "cloudwatch", "sns", "stepfunctions")
#: The idle window when the function's environment does not say (cdk.json endpoint_idle_minutes' default).
DEFAULT_IDLE_MINUTES = 60


@dataclass
class Run:
    """What one run did: endpoints deleted (or, a shared base, a retirement step taken), left (and why), faults."""

    env: str
    deleted: list[expiry.Reaped] = field(default_factory=list)
    retiring: dict[str, str] = field(default_factory=dict)
    left: dict[str, str] = field(default_factory=dict)
    faults: dict[str, str] = field(default_factory=dict)
    leftovers_deleted: list[str] = field(default_factory=list)
    #: What uses each config and model of the account (``in_use``), read once a run when first needed.
    users: dict[str, str] | None = None

    def gone(self, user: str) -> None:
        """``user`` (e.g. "endpoint NAME") was deleted: what it used is free (``in_use``)."""
        if self.users is not None:
            self.users = {k: v for k, v in self.users.items() if v != user}

    def to_json(self) -> dict[str, Any]:
        saved = [r.usd_per_day for r in self.deleted if r.usd_per_day is not None]
        return {
            "env": self.env,
            "deleted": [r.to_json() for r in self.deleted],
            "usd_per_day_saved": round(sum(saved), 4),
            "retiring": self.retiring,
            "left": self.left,
            "faults": self.faults,
            "leftovers_deleted": self.leftovers_deleted,
        }


def _fault(err: Exception) -> str:
    code = str(((getattr(err, "response", None) or {}).get("Error") or {}).get("Code", ""))
    return f"{code or type(err).__name__}: {err}"


def own_endpoints(sagemaker: Any, env: str) -> list[str]:
    """The names of the endpoints whose names this environment's runs and deploys give (`<env>-`,
    `hfpipe-<env>-`); their tags decide the rest."""
    prefixes = (names.run_prefix(env), contract.deployed_endpoint_name(env, ""))
    found: list[str] = []
    for prefix in prefixes:
        for page in sagemaker.get_paginator("list_endpoints").paginate(NameContains=prefix):
            found += [e["EndpointName"] for e in page["Endpoints"] if e["EndpointName"].startswith(prefix)]
    return sorted(set(found))


def _look(sagemaker: Any, env: str, name: str, now: datetime) -> tuple[dict[str, Any] | None, str | None]:
    """The endpoint now (None: gone) and why it stays (None: a candidate): its tags and status, and, the
    shared base, the adapters on it."""
    endpoint = _described(lambda: sagemaker.describe_endpoint(EndpointName=name))
    if endpoint is None:
        return None, "gone"
    tags = cleanup.tags_of(sagemaker, endpoint["EndpointArn"])
    reason = expiry.refusal(tags, endpoint.get("EndpointStatus"), env, now)
    if reason is None and name == adapter_deploy.BaseNames.of(env).endpoint:
        held = adapter_deploy.adapters_left(sagemaker, env)
        if held:
            reason = f"shared base with {len(held)} adapter(s) on it: {', '.join(held)}"
    return endpoint, reason


def _described(call: Callable[[], Any]) -> Any:
    try:
        return call()
    except Exception as err:
        if cleanup.is_not_found(err):
            return None
        raise


def _components(sagemaker: Any, name: str) -> list[str]:
    return [
        str(c["InferenceComponentName"])
        for page in sagemaker.get_paginator("list_inference_components").paginate(EndpointNameEquals=name)
        for c in page.get("InferenceComponents", [])
    ]


def _fleet(sagemaker: Any, endpoint: dict[str, Any]) -> tuple[str | None, int, list[str]]:
    """The endpoint's instance type and live instance count, and the models of its config (read before the
    endpoint goes: its config is found through it)."""
    config = _described(
        lambda: sagemaker.describe_endpoint_config(EndpointConfigName=endpoint["EndpointConfigName"])
    )
    variants = (config or {}).get("ProductionVariants") or [{}]
    live = endpoint.get("ProductionVariants") or [{}]
    count = live[0].get("CurrentInstanceCount", variants[0].get("InitialInstanceCount", 0))
    models = [str(v["ModelName"]) for v in variants if v.get("ModelName")]
    return variants[0].get("InstanceType"), int(count or 0), models


def retire_base(stepfunctions: Any, machine: str | None, now: datetime) -> str:
    """Start the adapter state machine's retirement of the shared base; its name is the hour's, so a second run
    within the hour starts none (StartExecution: ExecutionAlreadyExists for a name used, unless the running
    execution has the same input, when it answers that execution)."""
    if not machine:
        return "not retired: the environment has no adapter state machine (cdk.json shared_base)"
    name = f"reaper-retire-{now:%Y%m%dT%H}"
    try:
        stepfunctions.start_execution(
            stateMachineArn=machine, name=name, input=json.dumps({"action": "retire"})
        )
    except Exception as err:
        if "ExecutionAlreadyExists" not in _fault(err):
            raise
        return f"retirement {name} started already"
    return f"retirement started: execution {name}"


def consider(
    clients: dict[str, Any],
    env: str,
    name: str,
    now: datetime,
    idle: timedelta,
    run: Run,
    machine: str | None,
) -> None:
    """Delete endpoint ``name`` (and what was made for it) if the rule allows it; else say why it stays."""
    sagemaker, cloudwatch = clients["sagemaker"], clients["cloudwatch"]
    endpoint, reason = _look(sagemaker, env, name, now)
    if endpoint is None or reason:
        run.left[name] = str(reason)
        return
    young = expiry.up_for_less_than(endpoint, now, idle)
    if young:
        run.left[name] = young
        return
    components = _components(sagemaker, name)
    calls = expiry.calls_in(cloudwatch, expiry.metric_dimensions(endpoint, components), now, idle)
    if calls:
        run.left[name] = f"{calls:g} call(s) in the last {idle}"
        return
    # Just before the delete: tags, status and the base's adapters once more (a deploy, a keep or an adapter
    # may have come meanwhile).
    endpoint, reason = _look(sagemaker, env, name, now)
    if endpoint is None or reason:
        run.left[name] = str(reason)
        return
    if name == adapter_deploy.BaseNames.of(env).endpoint:
        run.retiring[name] = retire_base(clients.get("stepfunctions"), machine, now)
        return
    instance_type, count, models = _fleet(sagemaker, endpoint)
    cleanup.delete(sagemaker, cleanup.KINDS[0], name)
    run.gone(f"endpoint {name}")
    run.deleted.append(expiry.Reaped(name, instance_type, count, expiry.usd_per_day(instance_type, count)))
    _delete_own(sagemaker, env, cleanup.KINDS[1], str(endpoint["EndpointConfigName"]), run)
    for model in models:
        _delete_own(sagemaker, env, cleanup.KINDS[2], model, run)


def _delete_own(sagemaker: Any, env: str, kind: cleanup.Kind, name: str, run: Run) -> None:
    """Delete one config or model when it is this environment's (its tags) and nothing in the account uses it
    (``in_use``); gone already counts as done."""
    found = _described(lambda: getattr(sagemaker, kind.describe)(**{kind.name_key: name}))
    if found is None:
        return
    if not cleanup.is_ours(cleanup.tags_of(sagemaker, found[kind.arn_key]), env):
        return
    user = in_use(sagemaker, run).get(name)
    if user:
        run.left[name] = f"{kind.name} still used by {user}"
        return
    cleanup.delete(sagemaker, kind, name)
    run.leftovers_deleted.append(f"{kind.name} {name}")
    run.gone(f"{kind.name} {name}")


def in_use(sagemaker: Any, run: Run) -> dict[str, str]:
    """What uses each endpoint config and model of the account, whoever made it: config name -> the endpoint
    that runs on it (or is being updated to it), model name -> the config that names it. SageMaker deletes a
    config an endpoint runs on, and a model a config names, without a word (DeleteEndpointConfig,
    DeleteModel in the API reference), so a user's own endpoint on a run's config, or their own config naming a
    run's model, is read here before anything of ours goes. Read once a run, when the first leftover is
    considered (the schedule is hourly)."""
    if run.users is None:
        users: dict[str, str] = {}
        for page in sagemaker.get_paginator("list_endpoints").paginate():
            for item in page["Endpoints"]:
                endpoint = _described(
                    functools.partial(sagemaker.describe_endpoint, EndpointName=item["EndpointName"])
                )
                pending = ((endpoint or {}).get("PendingDeploymentSummary") or {}).get("EndpointConfigName")
                for config in {(endpoint or {}).get("EndpointConfigName"), pending} - {None}:
                    users[str(config)] = f"endpoint {item['EndpointName']}"
        for page in sagemaker.get_paginator("list_endpoint_configs").paginate():
            for item in page["EndpointConfigs"]:
                name = item["EndpointConfigName"]
                config = _described(
                    functools.partial(sagemaker.describe_endpoint_config, EndpointConfigName=name)
                )
                variants = [
                    *((config or {}).get("ProductionVariants") or []),
                    *((config or {}).get("ShadowProductionVariants") or []),
                ]
                for variant in variants:
                    if variant.get("ModelName"):
                        users[str(variant["ModelName"])] = f"endpoint config {name}"
        run.users = users
    return run.users


def expired_leftovers(sagemaker: Any, env: str, now: datetime, run: Run) -> None:
    """Configs, then models, of this environment past their expiry that nothing in the account uses (``in_use``)
    and whose named endpoint (or shared base) is gone (its earlier configs stay while it lives: its record names
    them, hfpipe.core.run.cleanup.deploy_leftovers): what a run whose config or model delete failed left."""
    prefixes = (names.run_prefix(env), contract.deployed_endpoint_name(env, ""))
    endpoints = own_endpoints(sagemaker, env)

    def left(arn: str) -> bool:
        tags = cleanup.tags_of(sagemaker, arn)
        deployment = tags.get(contract.TAG_DEPLOYMENT)
        serving = deployment and contract.deployed_endpoint_name(env, deployment) in endpoints
        return expiry.is_expired(tags, env, now) and not serving

    for kind in cleanup.KINDS[1:]:  # configs first: a model is free once the configs naming it are gone
        for name, arn in _listed(sagemaker, kind, prefixes).items():
            if left(arn):
                _delete_own(sagemaker, env, kind, name, run)


def _listed(sagemaker: Any, kind: cleanup.Kind, prefixes: tuple[str, ...]) -> dict[str, str]:
    """Configs or models whose names start with one of ``prefixes``: name -> ARN."""
    found: dict[str, str] = {}
    for prefix in prefixes:
        for page in sagemaker.get_paginator(kind.list).paginate(NameContains=prefix):
            for item in page[kind.list_key]:
                if str(item[kind.name_key]).startswith(prefix):
                    found[str(item[kind.name_key])] = str(item[kind.arn_key])
    return found


def reap(
    clients: dict[str, Any], env: str, now: datetime, idle: timedelta, adapter_machine: str | None = None
) -> Run:
    """One run of the reaper over environment ``env``; a fault is reported for what it hit, never raised.
    ``adapter_machine``: the ARN of the adapter state machine that retires the shared base (None: none)."""
    sagemaker = clients["sagemaker"]
    run = Run(env)
    try:
        listed = own_endpoints(sagemaker, env)
    except Exception as err:
        run.faults["listing endpoints"] = _fault(err)
        return run
    for name in listed:
        try:
            consider(clients, env, name, now, idle, run, adapter_machine)
        except Exception as err:  # one endpoint's fault: the next run finds what is left
            run.faults[name] = _fault(err)
    try:
        expired_leftovers(sagemaker, env, now, run)
    except Exception as err:
        run.faults["expired configs and models"] = _fault(err)
    return run


def report(sns: Any, topic_arn: str | None, run: Run) -> dict[str, Any]:
    """The run as one structured log line, and on the notification topic when it deleted or met anything."""
    result = run.to_json()
    aws.log_json(LOG, "endpoints reaped", **result)
    if topic_arn and (run.deleted or run.retiring or run.faults or run.leftovers_deleted):
        subject = (
            f"hfpipe {run.env} reaper: {len(run.deleted)} endpoint(s) deleted, "
            f"{result['usd_per_day_saved']:g} USD/day saved"
        )
        try:
            sns.publish(TopicArn=topic_arn, Subject=subject[:100], Message=json.dumps(result, indent=2))
        except Exception as err:  # what was deleted is in the log line either way
            LOG.warning(json.dumps({"message": "reaper report not published", "error": _fault(err)}))
    return result


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Event: EventBridge's scheduled event (its content is not read)."""
    aws.bind(event, "reaper")
    clients = {s: aws.client(s) for s in CLIENTS}
    idle = timedelta(minutes=float(os.environ.get("IDLE_MINUTES", DEFAULT_IDLE_MINUTES)))
    machine = os.environ.get("ADAPTER_STATE_MACHINE_ARN")
    run = reap(clients, os.environ["HFPIPE_ENV"], datetime.now(UTC), idle, machine)
    return report(clients["sns"], os.environ.get("TOPIC_ARN"), run)
