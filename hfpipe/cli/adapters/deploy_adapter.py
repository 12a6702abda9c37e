"""`hfpipe deploy --adapter NAME`: put an approved adapter version on the environment's shared base, roll an
adapter back, or delete one, through the environment's adapter state machine (docs/adapters.md).

    hfpipe deploy --env dev --adapter support --model qwen2.5-7b-lora-samsum-adapter/2
    hfpipe deploy --env dev --adapter support --rollback
    hfpipe deploy --env dev --adapter support --delete
    hfpipe deploy --env dev --retire-base

The command starts the execution, shows the adapter's inference component (for --retire-base: the base
component) as its status changes, and ends with what the adapter serves now, read from its component (its
ArtifactUrl, and the version that holds it), never from the execution's output alone: exit 0 when the
execution succeeded and the component serves what it says (or, for --delete, is gone), 1 otherwise (the error
and its cause printed, the way back's own error among them, and what serves then, on the last line). A
delete that leaves the base with no adapter says what still bills and the command that retires the base.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from typing import Any

from hfpipe import contract
from hfpipe.cli import aws, faults
from hfpipe.cli.aws import HfpipeError, UsageError
from hfpipe.cli.promotion import gate
from hfpipe.cli.promotion.models import resolve
from hfpipe.core.adapters import adapter_deploy, adapter_rules
from hfpipe.core.adapters.adapter_deploy import AdapterRefused, BaseNames
from hfpipe.core.adapters.adapter_plan import AdapterDeleted, AdapterPlan, BaseBilling, BaseRetired
from hfpipe.core.promotion import registry
from hfpipe.core.promotion.evaluation_gate import Decision

DEFAULT_INTERVAL_S = 15.0


def request_of(args: argparse.Namespace) -> dict[str, str]:
    """The execution input for --adapter with exactly one of --model, --rollback and --delete, or for
    --retire-base with none of them."""
    if getattr(args, "retire_base", False):
        given = [
            f
            for f, on in (("--model", args.model), ("--rollback", args.rollback), ("--delete", args.delete))
            if on
        ]
        if given:
            raise UsageError(f"--retire-base: {' and '.join(given)} given; accepted: --retire-base alone")
        return {"action": "retire"}
    chosen = [
        flag
        for flag, on in (("--model", args.model), ("--rollback", args.rollback), ("--delete", args.delete))
        if on
    ]
    if len(chosen) != 1:  # a command line that cannot run: exit 2
        raise UsageError(
            f"--adapter: {' and '.join(chosen) or 'nothing'} given; accepted: exactly one of --model VERSION "
            "(deploy it), --rollback (back to the previous approved version) and --delete"
        )
    try:
        adapter_deploy.component_name(args.env, args.adapter)  # the name, and its component's length
    except AdapterRefused as err:
        raise UsageError(str(err)) from None  # no AWS call needed to know: exit 2
    if args.model:
        try:
            registry.parse_ref(args.model, args.env)
        except registry.RegistryRefError as exc:
            raise HfpipeError(f"--model: {exc}") from None
        return {"action": "deploy", "adapter": args.adapter, "version": args.model}
    return {"action": "rollback" if args.rollback else "delete", "adapter": args.adapter}


def _check_location(request: dict[str, str], env: str, machine: str) -> None:
    """A version ARN of another region or account than the environment's says so (SageMaker would answer
    "not found"); the adapter state machine's ARN says where the environment is
    (arn:aws:states:REGION:ACCOUNT:stateMachine:...)."""
    if "version" not in request:
        return
    located = machine.split(":")
    try:
        registry.check_location(request["version"], env, region=located[3], account=located[4])
    except registry.RegistryRefError as exc:
        raise HfpipeError(f"--model: {exc}") from None


def _gate(
    clients: aws.Clients,
    environment: aws.Environment,
    args: argparse.Namespace,
    request: dict[str, str],
    console: Any,
    name: str,
) -> Decision | None:
    """The evaluation gate before an adapter's deploy (hfpipe.cli.promotion.gate): the version's evaluation
    and what the adapter serves, read now; the override goes into the execution's input, whose Apply step
    applies the same rule again and, once it has passed with it, records it on the version (execution
    ``name``'s note: adapter.apply). A rollback's target is gated by Apply (it is known there:
    adapter.check_rollback)."""
    override = getattr(args, "override_evaluation", None)
    if request["action"] != "deploy":
        if override is not None:
            raise UsageError("--override-evaluation: accepted with --model VERSION only")
        return None
    arn = resolve(clients.sagemaker, request["version"], args.env)
    _an_adapter_version(clients, environment, args.adapter, arn)
    decision = gate.check(
        clients, environment, arn, target={"adapter": args.adapter}, override=override, execution=name
    )
    if override is not None:
        request["override_evaluation"] = override
    console.print(f"evaluation gate: {decision.message}", soft_wrap=True)
    if decision.note is not None:  # the act records it (Apply): this command may stop at any point now
        console.print(OVERRIDE_RECORDED, soft_wrap=True)
    return decision


#: What the command says of an override it passed on: the execution records it, not the command.
OVERRIDE_RECORDED = (
    "the override is recorded in the version's approval description by the execution, when its Apply step "
    "passes the gate with it, whether or not this command still follows it"
)


def _an_adapter_version(clients: aws.Clients, environment: aws.Environment, adapter: str, arn: str) -> None:
    """A version of a merged model (its metadata names no adapter base: registry.adapter_base) is refused here,
    before the gate's line and before anything starts; the state machine keeps its own refusal (Prepare's
    adapter_deploy.version_problem), which also checks the base it was trained on."""
    desc = aws.call(
        f"reading model package {arn}", clients.sagemaker.describe_model_package, ModelPackageName=arn
    )
    if registry.adapter_base(desc) is not None:
        return
    base = "the shared base's base_model"
    with contextlib.suppress(
        ValueError, AttributeError
    ):  # the base as deployed (SSM shared-base), for the line
        base = json.loads(environment.values.get(contract.SSM_SHARED_BASE) or "{}").get("base_model") or base
    problem = adapter_rules.base_model_problem(adapter, None, base)
    raise HfpipeError(f"--model: {problem}; nothing started")


def serving(sagemaker: Any, component: str) -> tuple[str, str | None] | None:
    """The component's status and the artifact it serves, read from it; None when it does not exist."""
    return adapter_deploy.serving_state(sagemaker, component)


def _describe(state: tuple[str, str | None] | None) -> str:
    return "absent" if state is None else f"{state[0]} (serving {state[1] or 'nothing'})"


def cmd_deploy_adapter(args: argparse.Namespace, console: Any) -> int:
    """Start the adapter execution and follow it to its end (see the module docstring)."""
    aws.validate_env_name(args.env)
    request = request_of(args)
    clients = aws.clients_for(args)
    interval = aws.poll_interval(args.interval, clients, DEFAULT_INTERVAL_S)
    faults.state("nothing started; run the same command again")
    environment = aws.resolve_environment(clients, args.env)
    if not environment.values.get(contract.SSM_ADAPTER_STATE_MACHINE_ARN):
        raise HfpipeError(
            f"{'--retire-base' if args.retire_base else '--adapter'}: environment {args.env!r} has no shared "
            "base; accepted: an environment whose cdk.json "
            "entry declares shared_base, deployed (docs/adapters.md)"
        )
    machine = environment.require(contract.SSM_ADAPTER_STATE_MACHINE_ARN)
    _check_location(request, args.env, machine)
    what = request.get("version") or request["action"]
    name = aws.unique_execution_name(
        f"adapter-{args.adapter or contract.SHARED_BASE}-{what.replace('/', '-')[:40]}"
    )
    _gate(clients, environment, args, request, console, name)
    retiring = request["action"] == "retire"
    component = (
        BaseNames.of(args.env).component
        if retiring
        else adapter_deploy.component_name(args.env, args.adapter)
    )
    subject = "the shared base" if retiring else f"adapter {args.adapter}"
    before = aws.call(
        f"reading inference component {component}", serving, sagemaker=clients.sagemaker, component=component
    )
    if _nothing_to_change(clients, args.env, request, before, console):
        return 0
    unsure = (
        f"the change {name} did not start, or (an answer of 5xx) may have: see `hfpipe endpoints --env "
        f"{args.env}`, then run the same command again"
    )
    arn = faults.start_execution(clients, machine, name, request, unsure)
    console.print(f"{request['action']} {subject} ({component}) in {args.env}: execution {name}")
    console.print(f"  {'base' if retiring else 'adapter'} now: {_describe(before)}")
    if not aws.is_local_world(clients):
        console.print(f"  console: {aws.console_url(arn, clients.region)}")
    if args.no_wait:
        return 0
    faults.state(
        f"the change {name} still runs without this command; `hfpipe endpoints --env {args.env}` shows the adapters"
    )
    return _follow(clients, arn, args.env, component, before, interval, console)


def _nothing_to_change(clients: Any, env: str, request: dict[str, str], before: Any, console: Any) -> bool:
    """A delete of an adapter not on the base, or a retirement with nothing of the base left: done already
    (a rerun after an interruption, or after its last step failed once AWS had done it), said with what still
    bills, and no execution started (exit 0). A name that was never deployed reads the same; the line names
    the adapters on the base."""
    sagemaker = clients.sagemaker
    if request["action"] == "retire":
        parts = aws.call("reading the shared base", adapter_deploy.base_parts, sagemaker=sagemaker, env=env)
        if parts:
            return False
        console.print(f"the shared base of {env}: nothing of it is left (deleted already); nothing to retire")
        return True
    if request["action"] != "delete" or before is not None:
        return False
    staying = aws.call(
        "reading the shared base", adapter_deploy.adapters_staying, sagemaker=sagemaker, env=env
    )
    held = adapter_deploy.adapter_names(env, staying)
    console.print(
        f"adapter {request['adapter']}: not on {env}'s shared base (deleted already, or never deployed; "
        f"adapters on it: {', '.join(held) or 'none'}); nothing to delete"
    )
    if not held:
        _billing_line(clients, env, console)
    return True


def _billing_line(clients: Any, env: str, console: Any) -> None:
    """What keeps billing when no adapter stays on the base (nothing, when nothing of the base is left)."""
    parts = aws.call(
        "reading the shared base", adapter_deploy.base_parts, sagemaker=clients.sagemaker, env=env
    )
    if "endpoint" not in parts:
        return
    from hfpipe.cli.adapters.adapter_report import environment_shared_base

    deployed = environment_shared_base(clients.ssm, env).base
    billing = adapter_deploy.billing(env, deployed) if deployed else None
    _keeps_billing(console, env, billing, deployed)


def _keeps_billing(console: Any, env: str, billing: BaseBilling | None, deployed: Any) -> None:
    """The line a delete ends with when no adapter stays: what the base bills, until when, and the command
    that retires it; a base that scales to zero (``deployed``: the environment's shared base, as deployed)
    bills until its idle window has passed, then nothing until a call wakes it."""
    endpoint, command = BaseNames.of(env).endpoint, adapter_deploy.retire_command(env)
    cost = f" ({_money(billing)})" if billing else ""
    scaling = getattr(deployed, "scale_to_zero", None)
    until = (
        f"until {scaling.idle_minutes} idle minutes have passed (it scales to zero; a call wakes it) or it is "
        "retired"
        if scaling is not None and scaling.enabled
        else "until it is retired"
    )
    console.print(
        f"  no adapter is left on the shared base {endpoint}; it keeps billing{cost} {until}: {command}"
    )


def _follow(
    clients: Any, arn: str, env: str, component: str, last: Any, interval: float, console: Any
) -> int:
    label = "base" if component == BaseNames.of(env).component else "adapter"
    looks = (
        f"reading inference component {component}",
        serving,
        {"sagemaker": clients.sagemaker, "component": component},
    )
    desc, state = faults.follow(
        clients.sfn,
        arn,
        "adapter",
        looks,
        lambda now: console.print(f"  {label}: {_describe(now)}"),
        last,
        interval,
    )
    if desc["status"] != "SUCCEEDED":
        error, cause = desc.get("error") or desc["status"], aws.cause_message(desc.get("cause"))
        print(f"error: adapter change {desc['status'].lower()}: {error}: {cause}", file=sys.stderr)
        console.print(f"{component} now: {_serves(env, state, clients)}")
        return 1
    output = json.loads(desc.get("output") or "{}")
    if "gone" in output:
        return _retired(BaseRetired.from_json(output), state, component, console)
    if "remaining" in output:
        return _deleted(AdapterDeleted.from_json(output), state, component, console, clients, env)
    plan = AdapterPlan.from_json(output)
    if state is None or state[1] != plan.artifact:
        print(
            f"error: the change succeeded but {component} is {_describe(state)}, read from it; the execution "
            f"says {plan.artifact}",
            file=sys.stderr,
        )
        console.print(f"{component} now: {_serves(env, state, clients)}")
        return 1
    if plan.previous_artifact and plan.action == "updated":
        console.print(f"  it served {plan.previous_artifact} before")
    note = {"unchanged": " (it served this version already)", "created": "", "updated": ""}[plan.action]
    version = registry.ref_of_arn(plan.version_arn, env)
    console.print(f"deployed: adapter {component} serves {version} ({state[1]}){note}")
    return 0


def _serves(env: str, state: tuple[str, str | None] | None, clients: Any) -> str:
    """What a component serves, read from it: its status, artifact and the version of this environment that
    holds the artifact (when one is found)."""
    if state is None:
        return "absent: it serves nothing"
    if not state[1]:  # the base component: it serves the base model, and its adapters beside it
        return f"{state[0]} (the shared base's component)"
    version = None
    if state[1]:
        version = aws.call(
            "finding the version that holds the artifact",
            adapter_deploy.version_of_artifact,
            sagemaker=clients.sagemaker,
            env=env,
            artifact=state[1],
        )
    held = f"{version} " if version else ""
    return f"{state[0]}, serving {held}({state[1] or 'nothing'})"


def _money(billing: BaseBilling) -> str:
    usd = "an unknown price" if billing.usd_per_hour is None else f"{billing.usd_per_hour:g} USD/h"
    return f"{billing.instances} x {billing.instance_type}, {usd}"


def _deleted(
    deleted: AdapterDeleted, state: Any, component: str, console: Any, clients: Any, env: str
) -> int:
    """The delete's end: what stays on the base, read now (another delete may have ended meanwhile: the
    execution's own ``remaining`` was read before it did)."""
    if state is not None:
        print(f"error: the delete succeeded but {component} is {_describe(state)}", file=sys.stderr)
        return 1
    console.print(f"deleted: {component}; no other adapter was touched")
    staying = aws.call(
        "reading the shared base", adapter_deploy.adapters_staying, sagemaker=clients.sagemaker, env=env
    )
    if staying:
        names = adapter_deploy.adapter_names(env, staying)
        console.print(f"  still on the shared base {deleted.base.endpoint}: {', '.join(names)}")
        return 0
    from hfpipe.cli.adapters.adapter_report import environment_shared_base

    deployed = aws.call("reading the shared base", environment_shared_base, ssm=clients.ssm, env=env).base
    _keeps_billing(console, env, deleted.base, deployed)
    return 0


def _retired(retired: BaseRetired, state: Any, component: str, console: Any) -> int:
    if state is not None:
        print(f"error: the retirement succeeded but {component} is {_describe(state)}", file=sys.stderr)
        return 1
    console.print(
        f"retired: the shared base {retired.base.endpoint} ({_money(retired.base)}) no longer bills"
    )
    console.print(f"  none left of: {', '.join(retired.gone)}")
    return 0
