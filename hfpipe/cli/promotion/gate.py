"""The evaluation gate as the command applies it where traffic moves: `hfpipe models approve`, `hfpipe deploy`
and `hfpipe deploy --adapter` (`hfpipe promote` passes ``--override-evaluation`` to the Promote state machine,
whose function applies the same rule: hfpipe.core.promotion.evaluation_gate).

Just before the act, the command reads the version's evaluation again (its statistics document) and the
champion from the target itself (hfpipe.core.promotion.evaluation_reads), and the rule decides; a refusal is one
line with the figures, before anything is started or changed. An override is recorded in the version's approval
description (UpdateModelPackage, its status unchanged): by `hfpipe models approve` itself, and for a deploy by
its execution, when the step that applies the gate (Prepare, Apply) passes with it
(hfpipe.core.promotion.override_record); the deploy commands only check here that the note would fit.
"""

from __future__ import annotations

import argparse
from typing import Any

from hfpipe import contract
from hfpipe.cli import aws
from hfpipe.cli.aws import HfpipeError
from hfpipe.cli.clients import UsageError
from hfpipe.core.promotion import evaluation_gate, evaluation_reads, registry
from hfpipe.core.promotion.evaluation_gate import Decision


def add_override_option(parser: argparse.ArgumentParser, recorded: str = evaluation_gate.RECORDED_IN) -> None:
    """``--override-evaluation REASON`` on a command that moves traffic; ``recorded``: where it records REASON."""
    parser.add_argument(
        evaluation_gate.OVERRIDE_OPTION,
        dest="override_evaluation",
        metavar="REASON",
        help="pass the evaluation gate (a version evaluated worse than what serves, a stale evaluation, or none "
        "where the environment's evaluation_gate is mandatory); REASON is recorded in " + recorded,
    )


def mode(environment: aws.Environment) -> str:
    """The environment's cdk.json ``evaluation_gate`` (its SSM parameter; absent: a stack deployed before the
    gate, whose default is advisory)."""
    value = environment.values.get(contract.SSM_EVALUATION_GATE) or evaluation_gate.DEFAULT_GATE_MODE
    try:
        return evaluation_gate.check_mode(
            value, contract.ssm_parameter_name(environment.name, "evaluation-gate")
        )
    except ValueError as err:
        raise HfpipeError(str(err)) from None


def _evaluation(
    clients: aws.Clients, package: dict[str, Any]
) -> tuple[evaluation_gate.Evaluated | None, dict[str, Any]]:
    """The evaluation stored with a version and its statistics document ({} when it has none)."""
    uri = evaluation_reads.statistics_uri(package)
    if not uri:
        return None, {}
    try:
        statistics = aws.call(
            f"reading the evaluation of {package.get('ModelPackageArn')} ({uri})",
            evaluation_reads.read_json,
            s3=clients.s3,
            uri=uri,
        )
        return evaluation_gate.of_statistics(statistics), statistics
    except evaluation_gate.EvaluationFormatError as err:
        raise HfpipeError(f"{uri}: {err}; the gate cannot decide on it") from None


def check(
    clients: aws.Clients,
    environment: aws.Environment,
    arn: str,
    *,
    target: dict[str, str] | None,
    override: str | None,
    before_note: str | None = None,
    execution: str | None = None,
) -> Decision:
    """The gate's decision on version ``arn`` where traffic moves to ``target`` ({"endpoint": SageMaker name}
    or {"adapter": NAME}; None: the target the version was evaluated for, as at approval); HfpipeError with
    the refusal's line when it refuses; UsageError (exit 2) when an override's reason would not fit the
    version's approval description after what it holds and ``before_note`` (evaluation_gate.check_override,
    its note naming ``execution`` where the execution records it), before anything is written."""
    env = environment.name
    package = aws.call(
        f"reading model package {arn}", clients.sagemaker.describe_model_package, ModelPackageName=arn
    )
    evaluated, statistics = _evaluation(clients, package)
    where_to = target
    if where_to is None:  # the target it was evaluated for, as this environment names it (a promoted version)
        source_env = evaluation_reads.promoted_from_env(package, statistics)
        where_to = evaluation_reads.target_here(evaluated.target if evaluated else {}, env, source_env)
    champion, itself = aws.call(
        f"reading what serves on {where_to}",
        evaluation_reads.replaced,
        sagemaker=clients.sagemaker,
        env=env,
        target=where_to,
        version_arn=arn,
    )
    where = " ".join(f"{k} {v}" for k, v in where_to.items())  # "": no target (passed says so)
    try:
        decision = evaluation_gate.decide(
            evaluated,
            version=registry.ref_of_arn(arn, env),
            champion_now=champion,
            mode=mode(environment),
            where=where,
            override=override,
            failed=evaluation_gate.failure_of(statistics),
            description=_held(package.get("ApprovalDescription"), before_note),
            execution=execution,
            serves_itself=itself,
        )
    except evaluation_gate.OverrideError as err:
        raise UsageError(str(err)) from None
    except ValueError as err:
        raise HfpipeError(str(err)) from None
    if not decision.allowed:
        raise HfpipeError(f"refused by the evaluation gate: {decision.message}")
    return decision


def _held(description: str | None, before_note: str | None) -> str | None:
    """What the approval description holds before an override's note: what it holds now, then
    ``before_note`` (approve's own reason)."""
    return evaluation_gate.appended(description, before_note) if before_note else description
