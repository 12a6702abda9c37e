"""QuotaStack: one service-quota increase request per quota an environment's recipes need."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from aws_cdk import CfnOutput, RemovalPolicy, Stack
from constructs import Construct

from hfpipe.core.recipe.recipes import available_recipes, load_recipe
from hfpipe.core.recipe.schema import validate
from hfpipe.core.run.quotas import quota_users
from stacks.config import EnvironmentConfig
from stacks.constructs.quota_request import QuotaRequest, QuotaRequestProvider, quota_construct_id
from stacks.pipeline_stack import retention_days


def recipe_quota_users() -> dict[str, tuple[str, ...]]:
    """The SageMaker quotas the shipped recipes need, each with the recipes needing it (from the recipes,
    validated as the Plan Lambda validates them: `hfpipe.core.run.quotas.quota_users`)."""
    return quota_users({name: validate(load_recipe(name)) for name in available_recipes()})


class QuotaStack(Stack):
    """A `QuotaRequest` per entry of the environment's `quotas`, each quota's status as a stack output.

    Deploying never waits for AWS to grant an increase; the outputs show SATISFIED, REQUESTED,
    REQUEST_OPEN, UNVERIFIED or REFUSED per quota (an AWS refusal is a status, never a failed deploy).
    Each output's description names the recipes that need the quota (`used_by`: SageMaker quota name ->
    recipe names; by default derived from the shipped recipes, `recipe_quota_users`).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: EnvironmentConfig,
        used_by: Mapping[str, Sequence[str]] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.config = config
        self.provider = QuotaRequestProvider(
            self,
            "QuotaRequestProvider",
            service_codes=sorted({q.service_code for q in config.quotas}) or ["sagemaker"],
            log_retention=retention_days(config.log_retention_days),
            removal_policy=RemovalPolicy.RETAIN if config.retain else RemovalPolicy.DESTROY,
        )
        users = recipe_quota_users() if used_by is None else used_by
        self.requests: list[QuotaRequest] = []
        for quota in config.quotas:
            needed_by = users.get(quota.name, ()) if quota.service_code == "sagemaker" else ()
            construct_id = quota_construct_id(quota)
            request = QuotaRequest(self, construct_id, quota=quota, provider=self.provider)
            self.requests.append(request)
            CfnOutput(
                self,
                f"{construct_id}Status",
                value=request.status,
                description=f"{quota.name} (target {quota.value}, used by {', '.join(needed_by) or '-'})",
            )
