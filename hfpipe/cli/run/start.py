"""`hfpipe start`: validate a recipe, check it against the environment's rules and start an execution (or,
with --dry-run, show the plan, the cost estimate and the CreateTrainingJob request and start nothing)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from hfpipe import contract
from hfpipe.cli import aws, terminal
from hfpipe.cli.aws import HfpipeError
from hfpipe.cli.clients import UsageError
from hfpipe.cli.parser import (
    Subparsers,
    aws_options,
    dry_run_options,
    env_option,
    option_rules,
    recipe_options,
    ttl_option,
)
from hfpipe.core import json_text
from hfpipe.core.names import default_execution_name
from hfpipe.core.run import evaluation_job
from hfpipe.core.validate import RecipeError

if TYPE_CHECKING:  # annotations only: a command line imports its modules when it runs them
    from hfpipe.cli.recipe.recipes import Loaded
    from hfpipe.core.recipe.sourcedir import Packed
    from hfpipe.core.run.plan import Accepted


def add_to(sub: Subparsers) -> None:
    """`hfpipe start`'s arguments and help."""
    p = sub.add_parser("start", help="validate a recipe and start an execution in an environment")
    env_option(p)
    recipe_options(p, "training.hyperparameters.num_train_epochs=1")
    p.add_argument("--name", help="execution name (default: <recipe>-<UTC time>)")
    p.add_argument("--watch", action="store_true", help="watch the execution until it ends")
    p.add_argument(
        "--keep-endpoint",
        action="store_true",
        help="keep the endpoint after the smoke test (billed per hour until `hfpipe endpoints delete`)",
    )
    ttl_option(p, "the run's endpoint (counted from the start)")
    p.add_argument(
        "--interval",
        type=float,
        help="seconds between refreshes with --watch (default 10; 1 in a local world)",
    )
    dry_run_options(p)
    p.add_argument(
        "--champion",
        type=_champion,
        metavar="endpoint:NAME|adapter:NAME",
        help="where the evaluation reads the version it compares the new one with (a named endpoint of the "
        "environment, or an adapter on its shared base; docs/evaluation.md); without it the new version is "
        "scored alone",
    )
    aws_options(p)
    option_rules(
        p,
        needs={"--json": "--dry-run", "--interval": "--watch"},
        excludes={
            ("--dry-run", "--watch"): "a dry run starts nothing to watch",
            ("--dry-run", "--keep-endpoint"): "a dry run starts nothing, so there is no endpoint to keep",
        },
    )
    p.set_defaults(func=cmd_start, command_parser=p)


def _start_execution(
    clients: Any, state_machine_arn: str, name: str, execution_input: dict[str, Any], env: str
) -> str:
    """StartExecution; its ARN. A name already used is a one-line error naming --name."""
    import botocore.exceptions

    try:
        started = clients.sfn.start_execution(
            stateMachineArn=state_machine_arn, name=name, input=json.dumps(execution_input, allow_nan=False)
        )
    except botocore.exceptions.ClientError as exc:
        if exc.response.get("Error", {}).get("Code") == "ExecutionAlreadyExists":
            raise HfpipeError(
                f"an execution named {name!r} already exists in environment {env!r}; pass another --name"
            ) from None
        raise aws.aws_error(exc, "starting the execution") from None
    return str(started["executionArn"])


def _champion(text: str) -> dict[str, str]:
    """--champion endpoint:NAME or adapter:NAME (``type=``: a usage error before anything is read)."""
    kind, _, name = text.partition(":")
    if kind not in ("endpoint", "adapter") or not name:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not accepted; accepted: endpoint:NAME (a named endpoint of the environment) or "
            "adapter:NAME (an adapter on its shared base)"
        )
    return {kind: name}


def _check_champion(clients: Any, env: str, loaded: Loaded, champion: dict[str, str] | None) -> None:
    """--champion against the Plan's rule (hfpipe.core.run.evaluation_job.target, with the environment's name)
    and what serves there now, read as PrepareEvaluation reads it (hfpipe.core.promotion.evaluation_reads):
    nothing there, or a model of another task than the recipe's, is refused before anything starts (a run
    that named a champion would be scored alone, or fail scoring it, billed)."""
    import botocore.exceptions

    from hfpipe.core.promotion import evaluation_reads

    if champion is None:
        return
    recipe = loaded.resolved
    try:
        endpoint, adapter = evaluation_job.target(
            champion, env, recipe.get("evaluation") is not None, adapter=bool(recipe.get("adapter"))
        )
    except RecipeError as err:
        # A usage error, as the form's (``_champion``, argparse: exit 2): every refusal of the value alike.
        raise UsageError(f"--champion: {str(err).removeprefix('input.champion: ')}") from None
    where = f"endpoint {endpoint}" if endpoint else f"adapter {adapter} on the shared base"
    target = {"endpoint": endpoint} if endpoint else {"adapter": str(adapter)}
    given = ":".join(next(iter(champion.items())))
    try:
        found = evaluation_reads.champion_at(clients.sagemaker, env, target)
        wrong = evaluation_reads.other_task(
            clients.sagemaker,
            found,
            recipe["task"],
            where,
            env,
            lambda uri: evaluation_reads.read_json(clients.s3, uri),
        )
    except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError) as err:
        raise aws.aws_error(err, f"reading what serves on {where}") from None
    if found is None:
        listing = (
            "`hfpipe endpoints --env " + env + "`" + (" lists them" if endpoint else " lists its adapters")
        )
        raise UsageError(
            f"--champion {given}: nothing serves on {where} now; accepted: a champion that serves ({listing}, "
            "by the name cdk.json declares), or no --champion to score the new version alone"
        )
    if wrong:
        raise UsageError(f"--champion {given}: {wrong}")


def _say(line: str) -> None:
    print(line, file=sys.stderr)


def _execution_input(
    bucket: str,
    loaded: Loaded,
    accepted: Accepted,
    ttl: str | None = None,
    champion: dict[str, str] | None = None,
) -> tuple[dict[str, Any], Accepted, Packed | None]:
    """The input `start` sends (with ``ttl``, --ttl, when given), the recipe as accepted (`accepted`: in the
    environment but for an own source) and the packed own source (None without one): a recipe's own `dir` or
    `git` source packed (what is left out named, what is packed summed up), its arguments checked
    (`hfpipe.core.run.plan.accept` with the archive) and named by both at the URI `upload` will put it at, with
    the evaluation's ``champion`` (--champion). Nothing is uploaded here."""
    from hfpipe.cli.recipe import recipes, sources

    execution_input = {**recipes.execution_input(loaded), **({"ttl": ttl} if ttl is not None else {})}
    if champion is not None:  # checked by _check_champion before
        execution_input["champion"] = champion
    packed = sources.pack_source(loaded.ref, loaded.resolved, say=_say)
    if packed is None:  # the project's training code, or an s3 source (the Plan checks it)
        return execution_input, accepted, None
    accepted = sources.check_source(accepted, packed)
    for note in accepted.notes:
        _say(f"note: {note}")
    uri = sources.source_uri(bucket, packed)
    return (
        sources.with_uploaded(execution_input, uri, packed.sha256),
        accepted.with_source(uri, packed.sha256),
        packed,
    )


def _upload(clients: Any, bucket: str, packed: Any, dry_run: bool) -> None:
    """The own source uploaded once per hash, after the plan accepted it; a dry run says it uploads nothing."""
    from hfpipe.cli.recipe import sources

    if packed is None:
        return
    if dry_run:
        _say(
            f"training source: {sources.source_uri(bucket, packed)} (not uploaded: a dry run uploads nothing)"
        )
        return
    uri, uploaded = sources.upload(clients.s3, bucket, packed)
    _say(f"training source: {uri} ({'uploaded' if uploaded else 'already there'})")


def _kept(plan: Any, name: str, env: str) -> str:
    """What a kept run's endpoint costs and until when: its expiry (the plan's hosting tags), then the reaper."""
    tags = {t["Key"]: t["Value"] for t in (plan.hosting_tags if plan is not None else [])}
    expires = tags.get(contract.TAG_EXPIRES_AT)
    until = (
        f"until {expires}, then until the environment's reaper deletes it once it has gone its idle window "
        'without a call (--ttl, cdk.json endpoint_ttl_hours; docs/deploy.md, "Time to live")'
        if expires
        else "until you delete it (no expiry)"
    )
    return (
        f"the endpoint stays up after the smoke test (billed per hour) {until}: `hfpipe invoke {name} "
        f"--env {env} ...`, then `hfpipe endpoints delete NAME --env {env}`"
    )


def cmd_start(args: argparse.Namespace) -> int:
    """Validate the recipe locally, start the execution in the environment, print its console link."""
    from hfpipe.cli.recipe import recipes
    from hfpipe.cli.run import dryrun, watch

    aws.validate_env_name(args.env)
    if args.name is not None:  # `--name ""` (an unset variable) is an error, not the default name
        aws.validate_execution_name(args.name)
    if args.watch:
        watch.interval_option(
            args.interval
        )  # checked before the execution starts: a retry must not start a second run
    # Validation first: a bad recipe or --set fails here, before credentials or AWS are looked at.
    loaded = recipes.load(args.recipe, args.sets, keep_endpoint=args.keep_endpoint)
    if args.keep_endpoint and not loaded.resolved["deploy"]:
        raise HfpipeError(
            f"--keep-endpoint: recipe {loaded.name!r} sets deploy: false, so it creates no endpoint to keep"
        )
    name = args.name or default_execution_name(loaded.name)
    clients = aws.clients_for(args)
    environment = aws.resolve_environment(clients, args.env)
    config, notes = dryrun.environment_config(environment, loaded.resolved, args.ttl)
    _check_champion(clients, args.env, loaded, args.champion)
    # The environment's rules that do not read an own source (its images for the instance types among
    # them) before that source is cloned, packed or uploaded: what the Plan refuses them for, refused first.
    accepted = dryrun.in_environment(loaded.accepted, config, source_later=True)
    bucket = config.artifacts_bucket
    execution_input, accepted, packed = _execution_input(bucket, loaded, accepted, args.ttl, args.champion)
    from hfpipe.cli.recipe import sources

    # The dry run's plan, before anything starts or is uploaded: what it refuses, start refuses. An own source
    # is read from memory as the Plan will read it from the bucket (sources.Staged).
    s3 = None if packed is None else sources.Staged(clients.s3, bucket, packed)
    plan, notes = dryrun.plan_for(clients, config, accepted, name, notes, quotas_readable=args.dry_run, s3=s3)
    _upload(clients, bucket, packed, args.dry_run)
    if args.dry_run:
        assert plan is not None
        if args.json:
            sys.stdout.write(json_text.dumps(plan.to_json(), indent=2, default=str) + "\n")
        else:
            dryrun.show(terminal.console(), plan, notes)
        return 0

    arn = _start_execution(clients, environment.state_machine_arn, name, execution_input, args.env)
    console = terminal.console()
    console.print(f"started {name} (recipe {loaded.name})")
    for note in notes if plan is None else []:  # only what stopped the check: the quota read
        console.print(f"note: {note}", markup=False)
    console.print(f"execution: {arn}")
    if not aws.is_local_world(clients):  # a local world environment has no console
        console.print(f"console:   {aws.console_url(arn, clients.region)}")
    if args.keep_endpoint or loaded.resolved["serving"]["keep_endpoint"]:
        console.print(_kept(plan, name, args.env))
    if args.watch:
        return watch.follow(clients, arn, console, aws.poll_interval(args.interval, clients, 10.0))
    console.print(f"follow it with: hfpipe watch {name} --env {args.env}")
    return 0
