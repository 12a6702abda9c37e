"""QuotaStack: one service-quota increase request per quota an environment's recipes need."""

from __future__ import annotations

from typing import Any

from aws_cdk import CfnOutput, RemovalPolicy, Stack
from constructs import Construct

from stacks.config import EnvironmentConfig
from stacks.constructs.quota_request import QuotaRequest, QuotaRequestProvider, quota_construct_id
from stacks.pipeline_stack import retention_days


class QuotaStack(Stack):
    """A `QuotaRequest` per entry of the environment's `quotas`, each quota's status as a stack output.

    Deploying never waits for AWS to grant an increase; the outputs show SATISFIED, REQUESTED,
    REQUEST_OPEN, UNVERIFIED or REFUSED per quota (an AWS refusal is a status, never a failed deploy).
    """

    def __init__(
        self, scope: Construct, construct_id: str, *, config: EnvironmentConfig, **kwargs: Any
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
        self.requests: list[QuotaRequest] = []
        for quota in config.quotas:
            construct_id = quota_construct_id(quota)
            request = QuotaRequest(self, construct_id, quota=quota, provider=self.provider)
            self.requests.append(request)
            CfnOutput(
                self,
                f"{construct_id}Status",
                value=request.status,
                description=f"{quota.name} (target {quota.value}, used by {', '.join(quota.used_by) or '-'})",
            )
