"""`hfpipe deploy`: put an approved model version on a named endpoint, through the environment's deploy state
machine; SageMaker's deployment guardrails do the update (blue/green, the environment's traffic shifting and
bake time, automatic rollback on the endpoint's alarms).

    hfpipe deploy --env prod --model tiny-lora/3 --endpoint summaries [--no-wait] [--interval 15]

The version must be one of the environment's (RECIPE/N or a version ARN; another environment's is refused
before anything is called: promote it first with `hfpipe promote`), and NAME one of the environment's
endpoints in cdk.json (the state machine refuses others, and versions not approved). The command starts the
execution, shows the endpoint's status as it changes, and ends with what serves now, read from the endpoint (its
live config's model's package version: hfpipe.core.deploy.what_serves), never from its tag or record: exit 0 when the
version serves, 1 when the deploy failed or was rolled back (the previous version still serves then), when
what serves is not what the execution recorded (the mismatch is printed), or when the command stopped on an
AWS fault, whose line says whether the deploy started and what to run next (a transient fault of a look while
following is looked at again: hfpipe.cli.faults.poll).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from datetime import datetime
from typing import Any

from hfpipe import contract
from hfpipe.cli import aws, faults
from hfpipe.cli.aws import HfpipeError, UsageError
from hfpipe.cli.parser import Subparsers, aws_options, env_option, option_rules, ttl_option, version_ref
from hfpipe.cli.promotion import gate
from hfpipe.cli.promotion.models import resolve
from hfpipe.cli.terminal import with_console
from hfpipe.core.adapters import adapter_deploy
from hfpipe.core.deploy.deploy_plan import (
    ROOT_PATH,
    AlarmWait,
    DeploymentRecord,
    DeployPlan,
    DeployPlanFormatError,
)
from hfpipe.core.deploy.what_serves import mismatch, what_serves
from hfpipe.core.promotion import registry
from hfpipe.core.promotion.evaluation_gate import Decision

#: The endpoint names cdk.json may declare (they become hfpipe-<env>-NAME in SageMaker).
_NAME = re.compile(r"^[a-z0-9]([a-z0-9-]{0,40}[a-z0-9])?$")
#: Seconds between two looks at the execution and the endpoint (--interval).
DEFAULT_INTERVAL_S = 15.0


def execution_name(endpoint: str, version: str, now: datetime | None = None) -> str:
    """deploy-<endpoint>-<recipe>-<n>-<UTC time>-<6 hex>: what it did, readable in the console, unique even for
    two deploys in one second (a rerun)."""
    recipe, _, number = version.rpartition("/")
    return aws.unique_execution_name(f"deploy-{endpoint}-{recipe[:40]}-{number}", now)


#: What the command shows of the endpoint: (status, live config, what it serves, what an update under way
#: moves to, the version ARN it serves); None when there is no endpoint.
State = tuple[str, str | None, str, str | None, str | None] | None


def _endpoint_state(sagemaker: Any, endpoint: str, env: str) -> State:
    """What the endpoint serves, read from it (hfpipe.core.deploy.what_serves: its live config's model's package
    version), never from its tag or the deployment record."""
    serving = what_serves(sagemaker, endpoint)
    if serving is None:
        return None
    live = serving.live
    if serving.version_arn:
        serves = registry.ref_of_arn(serving.version_arn, env)
    elif live is not None and live.unknown:
        serves = "an unknown version (" + "; ".join(live.unknown) + ")"
    else:
        serves = "no registered version" if live is not None and live.variants else "nothing"
    pending = serving.pending
    moving_to = (
        f"{registry.ref_of_arn(pending.version_arn, env) if pending.version_arn else 'an unknown version'} "
        f"(config {pending.name})"
        if pending is not None
        else None
    )
    return (serving.status, serving.config, serves, moving_to, serving.version_arn)


def _describe(state: State) -> str:
    if state is None:
        return "absent"
    status, config, serves, moving_to, _ = state
    updating = f"; updating to {moving_to}" if moving_to else ""
    return f"{status} (config {config or '-'}, serving {serves}{updating})"


def _checked(args: argparse.Namespace) -> tuple[str, int]:
    """--model's group and number, once --endpoint and --model are what a named endpoint's deploy takes."""
    if not args.model or args.rollback or args.delete:  # a command line that cannot run: exit 2
        raise UsageError(
            "--endpoint: accepted with --model VERSION only (--rollback and --delete are an adapter's: "
            "--adapter NAME; a named endpoint's way back is deploying the previous version)"
        )
    try:
        group, number = registry.parse_ref(args.model, args.env)
    except registry.RegistryRefError as exc:
        raise HfpipeError(f"--model: {exc}") from None
    return group, number


def _ttl_only_on_creation(args: argparse.Namespace, endpoint: str, before: State) -> None:
    """--ttl sets the expiry of the endpoint a deploy creates; an update keeps the endpoint's own (Prepare)."""
    if args.ttl and before is not None:
        raise HfpipeError(
            f"--ttl: endpoint {endpoint} exists ({before[0]}): an update keeps its expiry (its "
            f"{contract.TAG_EXPIRES_AT} tag; `hfpipe endpoints --env {args.env}` shows it); --ttl is accepted "
            "only where the deploy creates the endpoint; nothing started"
        )


def cmd_deploy(args: argparse.Namespace, console: Any) -> int:
    """Start the deploy execution and follow it to its end (see the module docstring)."""
    aws.validate_env_name(args.env)
    group, number = _checked(args)
    clients = aws.clients_for(args)
    interval = aws.poll_interval(args.interval, clients, DEFAULT_INTERVAL_S)  # checked before anything starts
    faults.state("no deploy started; run the same command again")
    environment = aws.resolve_environment(clients, args.env)
    machine = environment.require(contract.SSM_DEPLOY_STATE_MACHINE_ARN)
    # The state machine's ARN says where the environment is (arn:aws:states:REGION:ACCOUNT:stateMachine:...).
    located = machine.split(":")
    try:
        registry.check_location(args.model, args.env, region=located[3], account=located[4])
    except registry.RegistryRefError as exc:
        raise HfpipeError(f"--model: {exc}") from None
    version = f"{group.removeprefix(registry.group_prefix(args.env))}/{number}"
    endpoint = contract.deployed_endpoint_name(args.env, args.endpoint)
    name = execution_name(args.endpoint, version)
    decision = _gate(clients, environment, args, endpoint, name)
    before = aws.call(
        f"reading endpoint {endpoint}",
        _endpoint_state,
        sagemaker=clients.sagemaker,
        endpoint=endpoint,
        env=args.env,
    )
    _ttl_only_on_creation(args, endpoint, before)
    # A 5xx answer to StartExecution may come after the execution started; a rerun then is refused while it
    # runs (DeployInProgress), so running it again is safe either way.
    unsure = (
        f"the deploy {name} did not start, or (an answer of 5xx) may have: see `hfpipe endpoints --env "
        f"{args.env}`, then run the same command again"
    )
    arn = faults.start_execution(clients, machine, name, _execution_input(args), unsure)
    console.print(f"deploying {version} to {args.endpoint} ({endpoint}) in {args.env}: execution {name}")
    console.print(f"  evaluation gate: {decision.message}", soft_wrap=True)
    if decision.note is not None:  # the act records it (Prepare): this command may stop at any point now
        console.print(f"  {OVERRIDE_RECORDED}", soft_wrap=True)
    console.print(f"  endpoint now: {_describe(before)}")
    if not aws.is_local_world(clients):  # a local world environment has no console
        console.print(f"  console: {aws.console_url(arn, clients.region)}")
    if args.no_wait:
        return 0
    where = "" if aws.is_local_world(clients) else f" ({aws.console_url(arn, clients.region)})"
    faults.state(
        f"the deploy {name} still runs without this command{where}: `hfpipe endpoints --env {args.env}` shows "
        f"what {args.endpoint} serves; once it has ended, the same command again says whether {version} serves"
    )
    return _follow(clients, arn, args.env, endpoint, before, interval, console)


def _execution_input(args: argparse.Namespace) -> dict[str, str]:
    """The deploy state machine's input (Prepare's ``DeployInput``): the version, the endpoint, ``--ttl``, and
    ``--override-evaluation``, since Prepare applies the gate again on what serves when it runs."""
    optional = {"ttl": args.ttl, "override_evaluation": args.override_evaluation}
    return {"version": args.model, "endpoint": args.endpoint, **{k: v for k, v in optional.items() if v}}


#: What the command says of an override it passed on: the execution records it, not the command.
OVERRIDE_RECORDED = (
    "the override is recorded in the version's approval description by the execution, when its Prepare step "
    "passes the gate with it, whether or not this command still follows it"
)


def _gate(
    clients: aws.Clients, environment: aws.Environment, args: argparse.Namespace, endpoint: str, name: str
) -> Decision:
    """The evaluation gate (hfpipe.cli.promotion.gate), just before the deploy starts: the version's evaluation
    and what ``endpoint`` serves, both read now; the decision (an override is recorded on the version by
    execution ``name``'s Prepare, once it has passed the gate with it: deploy_prepare.record_override)."""
    arn = resolve(clients.sagemaker, args.model, args.env)
    return gate.check(
        clients,
        environment,
        arn,
        target={"endpoint": endpoint},
        override=args.override_evaluation,
        execution=name,
    )


def _alarm_wait(sfn: Any, arn: str) -> AlarmWait | None:
    """The deploy's wait for rollback alarms in ALARM, when it is what the execution does now: the plan in the
    input of its latest WaitForAlarms state among the last events (the deploy state machine's loop;
    docs/deploy.md), read as a DeployPlan."""
    events = sfn.get_execution_history(executionArn=arn, reverseOrder=True, maxResults=10)["events"]
    # Newest first by id, whatever order the answer has (moto's ignores reverseOrder and maxResults).
    for event in sorted(events, key=lambda e: int(e.get("id", 0)), reverse=True)[:10]:
        details = event.get("stateEnteredEventDetails") or {}
        if details.get("name") == "WaitForAlarms":
            return _plan_of(details.get("input"), arn).alarm_wait
        if details.get("name") not in (None, "PrepareAgain", "Action?"):
            return None  # past the loop
    return None


def _plan_of(state_input: Any, arn: str) -> DeployPlan:
    """The deploy plan in a state's input (kept at ``$.deploy``), read through its one definition."""
    key = ROOT_PATH.removeprefix("$.")
    try:
        return DeployPlan.from_json(json.loads(state_input or "{}").get(key))
    except (ValueError, AttributeError) as err:  # DeployPlanFormatError is a ValueError
        kind = (
            "a deploy plan this hfpipe cannot read" if isinstance(err, DeployPlanFormatError) else "no JSON"
        )
        raise HfpipeError(f"deploy execution {arn}: its state input holds {kind}: {err}") from None


def _follow(clients: Any, arn: str, env: str, endpoint: str, last: Any, interval: float, console: Any) -> int:
    """Print the endpoint's changes until the execution ends; the exit status the command returns. A
    transient fault of a look (throttled, 5xx) is looked at again (hfpipe.cli.faults.poll): the deploy goes on
    without the command."""
    waiting_for: list[str] = []

    def say_alarm_wait() -> None:
        wait = faults.poll(
            "reading the deploy execution", _alarm_wait, time.sleep, interval, sfn=clients.sfn, arn=arn
        )
        if wait and wait.alarms != waiting_for:
            waiting_for[:] = wait.alarms
            console.print(
                f"  waiting: rollback alarm(s) {', '.join(waiting_for)} in ALARM before the update began "
                f"(SageMaker would roll it back at once); looking again every {wait.poll_seconds} s, "
                f"for {wait.wait_seconds} s at most"
            )

    looks = (
        f"reading endpoint {endpoint}",
        _endpoint_state,
        {"sagemaker": clients.sagemaker, "endpoint": endpoint, "env": env},
    )
    desc, state = faults.follow(
        clients.sfn,
        arn,
        "deploy",
        looks,
        lambda now: console.print(f"  endpoint: {_describe(now)}"),
        last,
        interval,
        say_alarm_wait,
    )
    if desc["status"] == "SUCCEEDED":
        return _succeeded(desc, state, env, endpoint, console)
    error, cause = desc.get("error") or desc["status"], aws.cause_message(desc.get("cause"))
    print(f"error: deploy {desc['status'].lower()}: {error}: {cause}", file=sys.stderr)
    console.print(f"endpoint {endpoint} now: {_describe(state)}")
    return 1


def _succeeded(desc: dict[str, Any], state: Any, env: str, endpoint: str, console: Any) -> int:
    """The last lines of a deploy that succeeded: what serves (read from the endpoint), or the mismatch
    between it and the execution's record (exit 1)."""
    try:
        record = DeploymentRecord.from_json(json.loads(desc.get("output") or "{}"))
    except ValueError as err:  # not JSON, or DeployPlanFormatError: another release's record
        print(
            f"error: deploy succeeded but its output is not a deployment record this hfpipe reads: {err}",
            file=sys.stderr,
        )
        console.print(f"endpoint {endpoint} now: {_describe(state)}")
        return 1
    claim = mismatch(state[4] if state else None, record.model_version_arn, "deployment record", env)
    if claim:  # the execution says one version, the endpoint serves another: report it, trust the endpoint
        print(
            f"error: deploy succeeded but endpoint {endpoint} is {_describe(state)}, read from the endpoint; "
            f"{claim}",
            file=sys.stderr,
        )
        return 1
    console.print(f"deployed: {endpoint} serves {_describe(state)}")
    if record.execution != desc.get("name"):
        console.print(f"  it served this version already (deployed by {record.execution}): nothing changed")
    elif record.previous_version:
        console.print(f"  previous version: {registry.ref_of_arn(record.previous_version, env)}")
    return 0


# --- hfpipe deploy ---------------------------------------------------------------------------------------


def _endpoint_name(text: str) -> str:
    """--endpoint NAME in form (``type=``: a usage error, exit 2, before any AWS call otherwise)."""
    if not _NAME.fullmatch(text):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not an endpoint name; accepted: a name declared under the environment's "
            "\"endpoints\" in cdk.json (lower-case letters, digits and '-')"
        )
    return text


def _adapter_name(text: str) -> str:
    """--adapter NAME in form (``type=``; its component's length, which depends on --env, is checked by the
    command before any AWS call: hfpipe.cli.adapters.deploy_adapter.request_of)."""
    try:
        return adapter_deploy.check_adapter_name(text)
    except adapter_deploy.AdapterRefused as err:
        raise argparse.ArgumentTypeError(str(err).removeprefix("--adapter: ")) from None


def add_to(sub: Subparsers) -> None:
    """`hfpipe deploy`'s arguments and help."""
    p = sub.add_parser(
        "deploy",
        help="put an approved model version on a named endpoint (blue/green), or an adapter on the shared base",
    )
    env_option(p)
    p.add_argument("--model", metavar="VERSION", type=version_ref, help="RECIPE/N or a version ARN, approved")
    target = p.add_mutually_exclusive_group(required=True)
    target.add_argument(
        "--endpoint", metavar="NAME", type=_endpoint_name, help="an endpoint of the environment in cdk.json"
    )
    target.add_argument(
        "--adapter",
        metavar="NAME",
        type=_adapter_name,
        help="an adapter on the environment's shared base (docs/adapters.md): with --model, --rollback or --delete",
    )
    target.add_argument(
        "--retire-base",
        action="store_true",
        help="delete the environment's shared base (refused while adapters remain on it; docs/adapters.md)",
    )
    p.add_argument(
        "--rollback", action="store_true", help="with --adapter: back to the previous approved version"
    )
    p.add_argument(
        "--delete", action="store_true", help="with --adapter: take the adapter off the shared base"
    )
    p.add_argument("--no-wait", action="store_true", help="start the deploy and return")
    gate.add_override_option(p)
    p.add_argument(
        "--interval",
        type=float,
        help="seconds between looks at the endpoint (default 15; 1 in a local world)",
    )
    ttl_option(
        p, "with --endpoint: the named endpoint, when this deploy creates it (an update keeps its expiry),"
    )
    aws_options(p)
    option_rules(
        p,
        needs={"--ttl": "--endpoint"},
        excludes={("--interval", "--no-wait"): "--no-wait returns at once, with nothing to look at"},
    )
    p.set_defaults(func=with_console(_deploy), command_parser=p)


def _deploy(args: argparse.Namespace, console: Any) -> int:
    """A named endpoint's deploy, or an adapter's change on the shared base (hfpipe.cli.adapters.deploy_adapter)."""
    if args.adapter is not None or args.retire_base:
        from hfpipe.cli.adapters.deploy_adapter import cmd_deploy_adapter

        return cmd_deploy_adapter(args, console)
    return cmd_deploy(args, console)
