"""`hfpipe promote`: an approved version of the environment a target promotes from, into the target.

    hfpipe promote RECIPE/N|VERSION_ARN --env TARGET [--watch] [--interval S] [--json]

The target names its source in cdk.json (``promote_from``); its Pipeline stack then has a Promote state
machine, whose ARN it writes to the SSM parameter /hfpipe/<target>/promote-state-machine-arn. The command starts
an execution of it with {"version": VERSION}: VERSION is one of the SOURCE environment's versions (RECIPE/N
names the source's group for RECIPE). With --watch it waits and prints the target's new version, e.g.

    tiny-lora/3 (dev) -> tiny-lora/1 (prod), PendingManualApproval; approve with hfpipe models approve tiny-lora/1 --env prod

Promoting a version twice gives the version the first promotion made. Run it with the target's region
(--region, AWS_REGION or the profile's) and, across accounts, with the target account's credentials.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

from hfpipe import contract
from hfpipe.cli import aws, faults
from hfpipe.cli.aws import HfpipeError
from hfpipe.cli.clients import UsageError
from hfpipe.cli.parser import Subparsers, aws_options, env_name, option_rules, version_ref
from hfpipe.cli.promotion import gate
from hfpipe.cli.terminal import with_console
from hfpipe.core import json_text
from hfpipe.core.promotion import evaluation_gate, evaluation_reads, promotion, registry
from hfpipe.core.promotion.promote_plan import Promoted
from hfpipe.core.promotion.promotion import OVERRIDE_KEY


def state_machine(environment: aws.Environment) -> str:
    """The target's Promote state machine ARN, or an error saying how to get one."""
    arn = environment.values.get(contract.SSM_PROMOTE_STATE_MACHINE_ARN)
    if not arn:
        parameter = contract.ssm_parameter_name(environment.name, contract.SSM_PROMOTE_STATE_MACHINE_ARN)
        raise HfpipeError(
            f"--env {environment.name!r} promotes from no environment: SSM parameter {parameter} is missing in "
            f'{environment.region}; accepted: an environment with "promote_from" in cdk.json, deployed with '
            f"`cdk deploy -c env={environment.name} --all`"
        )
    return arn


def execution_name(ref: str, now: datetime | None = None, suffix: str | None = None) -> str:
    """promote-<recipe>-<n>-<UTC time>-<random>: readable in the console, and unique per start (two starts in
    one second would otherwise be refused: ExecutionAlreadyExists)."""
    tail = re.sub(r"[^A-Za-z0-9-]+", "-", "/".join(ref.rsplit("/", 2)[-2:])).strip("-")[:48]
    return aws.unique_execution_name(f"promote-{tail}", now, suffix)


def _failure(desc: dict[str, Any]) -> HfpipeError:
    return HfpipeError(
        f"promotion {desc.get('name')} {desc.get('status')} ({desc.get('error') or 'no error name'}): "
        f"{aws.cause_message(desc.get('cause'))}"
    )


def wait(sfn: Any, arn: str, interval: float, sleep: Callable[[float], None] = time.sleep) -> dict[str, Any]:
    """DescribeExecution once the execution has ended (a transient fault of a look is looked at again:
    hfpipe.cli.aws.poll)."""
    while True:
        desc = dict(
            faults.poll(f"reading execution {arn}", sfn.describe_execution, sleep, interval, executionArn=arn)
        )
        if desc.get("status") != "RUNNING":
            return desc
        sleep(interval)


def answer(desc: dict[str, Any]) -> Promoted:
    """What the promotion registered: the execution's output, read through its one definition."""
    try:
        return Promoted.from_json(json.loads(desc.get("output") or "{}"))
    except ValueError as err:  # not JSON, or PromotePlanFormatError (a ValueError): another release's answer
        raise HfpipeError(f"promotion {desc.get('name')}: its output is not accepted: {err}") from None


def cmd_promote(args: argparse.Namespace, console: Any) -> int:
    """Start the target's Promote state machine for one source version; with --watch, wait for the result."""
    aws.validate_env_name(args.env)
    clients = aws.clients_for(args)
    interval = aws.poll_interval(args.interval, clients, 5.0)  # checked before anything starts
    if args.override_evaluation is not None:  # blank: refused here, as deploy does, before anything starts
        try:
            evaluation_gate.check_override(args.override_evaluation, metadata=True)
        except evaluation_gate.OverrideError as err:
            raise UsageError(str(err)) from None
    faults.state("no promotion started; run the same command again")
    environment = aws.resolve_environment(clients, args.env)
    machine = state_machine(environment)
    name = execution_name(args.version)
    # Promoting a version twice gives the version the first promotion made: running it again is safe.
    again = f"hfpipe promote {args.version} --env {args.env} --watch"
    request = {"version": args.version} | (
        {} if args.override_evaluation is None else {OVERRIDE_KEY: args.override_evaluation}
    )
    unsure = f"the promotion {name} did not start, or (an answer of 5xx) may have; run `{again}`"
    arn = faults.start_execution(clients, machine, name, request, unsure)
    if not args.watch:
        console.print(f"promoting {args.version} into {args.env}: execution {name}")
        if not aws.is_local_world(clients):  # a local world environment has no console
            console.print(f"  {aws.console_url(arn, clients.region)}")
        console.print("  add --watch to wait for the new version")
        return 0
    faults.state(
        f"the promotion {name} still runs without this command; `{again}` waits for it and prints the version "
        "it made (a version is promoted once)"
    )
    desc = wait(clients.sfn, arn, interval)
    if desc.get("status") != "SUCCEEDED":
        raise _failure(desc)
    output = answer(desc)
    if args.json:
        sys.stdout.write(json_text.dumps(output.to_json(), indent=2) + "\n")
        return 0
    console.print(output.summary, soft_wrap=True)
    console.print(f"  {output.target.model_package_arn}", soft_wrap=True)
    line = gate_line(clients, environment, output, args.override_evaluation)
    if line:
        console.print(f"  evaluation gate: {line}", soft_wrap=True)
    return 0


def gate_line(
    clients: aws.Clients, environment: aws.Environment, output: Promoted, override: str | None
) -> str | None:
    """What the Promote function's evaluation gate decided, with its figures: the same rule
    (promotion.evaluation_decision) on the evaluation the promoted version carries (the source's, copied with
    it) and the target's evaluation_gate; None when it cannot be read back (the promotion is done either way)."""
    arn = output.target.model_package_arn
    try:
        package = aws.call(
            f"reading model package {arn}", clients.sagemaker.describe_model_package, ModelPackageName=arn
        )
        uri = evaluation_reads.statistics_uri(package)
        document = (
            aws.call(f"reading {uri}", evaluation_reads.read_json, s3=clients.s3, uri=uri) if uri else {}
        )
        decision = promotion.evaluation_decision(
            document,
            output.source.ref,
            source_env=output.source.env,
            env=output.target.env,
            mode=gate.mode(environment),
            override=override,
        )
        evaluated = evaluation_gate.of_statistics(document)
        if evaluated is not None and evaluated.champion is None and decision.note is None:
            serving = aws.call(
                f"reading what serves in {output.target.env}",
                _serving_of_recipe,
                sagemaker=clients.sagemaker,
                env=output.target.env,
                arn=arn,
            )
            return evaluation_gate.scored_alone_promoted(
                evaluated, output.target.env, serving, gate.mode(environment)
            )
    except (promotion.PromotionRefused, HfpipeError, ValueError):  # ValueError: not JSON, not the contract's
        return None
    return decision.message


def _serving_of_recipe(sagemaker: Any, env: str, arn: str) -> list[str]:
    """ "endpoint NAME serves RECIPE/N" for each endpoint of ``env`` (hfpipe-<env>-*: contract's names) that
    serves a version of ``arn``'s model package group, read from the endpoint now (ListEndpoints, then what
    serves on each: evaluation_reads.champion_on_endpoint)."""
    group = arn.rsplit("/", 2)[-2]
    prefix = contract.deployed_endpoint_name(env, "")
    found = []
    for page in sagemaker.get_paginator("list_endpoints").paginate(NameContains=prefix):
        for endpoint in page["Endpoints"]:
            name = endpoint["EndpointName"]
            champion = (
                evaluation_reads.champion_on_endpoint(sagemaker, name) if name.startswith(prefix) else None
            )
            serves = champion.version_arn if champion else None
            if serves and serves.rsplit("/", 2)[-2] == group:
                found.append(f"endpoint {name} serves {registry.ref_of_arn(serves, env)}")
    return sorted(found)


# --- hfpipe promote --------------------------------------------------------------------------------------


def add_to(sub: Subparsers) -> None:
    """`hfpipe promote`'s arguments and help."""
    p = sub.add_parser(
        "promote", help="copy an approved version of the source environment into this one (promote_from)"
    )
    p.add_argument(
        "version",
        metavar="VERSION",
        type=version_ref,
        help="RECIPE/N or a version ARN of the environment --env promotes from",
    )
    p.add_argument(
        "--env",
        type=env_name,
        required=True,
        help="the target environment (its cdk.json entry names promote_from)",
    )
    p.add_argument("--watch", action="store_true", help="wait for the promotion and print the new version")
    p.add_argument(
        "--interval", type=float, help="seconds between checks with --watch (default 5; 1 in a local world)"
    )
    p.add_argument("--json", action="store_true", help="with --watch: print the execution's output as JSON")
    gate.add_override_option(p, evaluation_gate.PROMOTE_RECORDED_IN)
    aws_options(p)
    option_rules(p, needs={"--json": "--watch", "--interval": "--watch"})
    p.set_defaults(func=with_console(cmd_promote), command_parser=p)
