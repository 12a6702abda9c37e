"""Plan: validate the execution input, fill defaults, derive names, check quotas, estimate cost.

Returns the plan as JSON (``Plan.to_json``, with its ``schema_version``); the state machine keeps it at
``$.plan`` and the other Lambdas and the command read it back with ``Plan.from_json``.
"""

from __future__ import annotations

import os
from typing import Any

from hfpipe.core.run.plan import PlanConfig, build_plan
from pipeline_lambdas import aws

LOG = aws.logger(__name__)


def config_from_env(env: dict[str, str] | None = None) -> PlanConfig:
    """The environment's settings, from the Lambda's environment variables (set by the stack)."""
    return PlanConfig.from_environment(os.environ if env is None else env)


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Event: {"input": <execution input>, "execution_name": <$$.Execution.Name>}."""
    aws.bind(event)
    plan = build_plan(
        event.get("input") or {},
        event["execution_name"],
        config_from_env(),
        aws.client("service-quotas"),
        # Reads a recipe's own training source back (sources/* of the artifacts bucket only: its IAM policy).
        s3=aws.client("s3"),
    )
    aws.log_json(
        LOG,
        "planned",
        execution_name=plan.execution_name,
        recipe_name=plan.recipe_name,
        training_job_name=plan.training_job_name,
    )
    return plan.to_json()
