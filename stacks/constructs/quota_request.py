"""Service-quota increase requests as custom resources, backed by one Lambda (lambda/quota)."""

from __future__ import annotations

import re
from pathlib import Path

from aws_cdk import CustomResource, Duration, RemovalPolicy, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from stacks.config import QuotaTarget
from stacks.nag import acknowledge, rendered
from stacks.template_hygiene import function_depends_on_policy_only

HANDLER_DIR = Path(__file__).resolve().parent.parent.parent / "lambda" / "quota"
RESOURCE_TYPE = "Custom::ServiceQuotaRequest"


def quota_construct_id(quota: QuotaTarget) -> str:
    """PascalCase construct ID from the quota name, e.g. `MlG52xlargeForTrainingJobUsage`."""
    words = re.split(r"[^A-Za-z0-9]+", f"{quota.service_code} {quota.name}")
    return "".join(word[:1].upper() + word[1:] for word in words if word)


class QuotaRequestProvider(Construct):
    """The Lambda that answers `Custom::ServiceQuotaRequest` events, with a role limited to Service Quotas.

    `service_codes` limits GetServiceQuota/RequestServiceQuotaIncrease to those services' quotas.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        service_codes: list[str],
        log_retention: logs.RetentionDays,
        removal_policy: RemovalPolicy,
    ) -> None:
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        self.log_group = logs.LogGroup(
            self, "LogGroup", retention=log_retention, removal_policy=removal_policy
        )
        self.role = iam.Role(
            self,
            "Role",
            description="hfpipe: service quota increase requests",
            # No aws:SourceAccount condition: Lambda does not document confused-deputy keys for execution roles.
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
        )
        self.log_group.grant_write(self.role)
        quota_arns = [
            f"arn:{stack.partition}:servicequotas:{stack.region}:{stack.account}:{code}/*"
            for code in service_codes
        ]
        self.role.add_to_policy(
            iam.PolicyStatement(
                sid="ReadAndRaiseQuotas",
                actions=["servicequotas:GetServiceQuota", "servicequotas:RequestServiceQuotaIncrease"],
                resources=quota_arns,
            )
        )
        self.role.add_to_policy(
            iam.PolicyStatement(
                sid="ListQuotas",
                actions=[
                    "servicequotas:ListAWSDefaultServiceQuotas",
                    "servicequotas:ListRequestedServiceQuotaChangeHistoryByQuota",
                ],
                resources=["*"],
            )
        )
        for arn in quota_arns:
            acknowledge(
                self.role,
                f"AwsSolutions-IAM5[Resource::{rendered(stack, arn)}]",
                "Quota codes (L-...) are resolved from the quota names at deploy time, so the resource is "
                "limited to the configured services' quotas in this account and region, not to single codes.",
            )
        acknowledge(
            self.role,
            "AwsSolutions-IAM5[Resource::*]",
            "servicequotas:ListAWSDefaultServiceQuotas and ListRequestedServiceQuotaChangeHistoryByQuota "
            "support no resource-level permissions (Service Authorization Reference, Service Quotas).",
        )
        self.function = lambda_.Function(
            self,
            "Function",
            description="hfpipe: request service quota increases up to the configured targets",
            runtime=lambda_.Runtime.PYTHON_3_14,
            architecture=lambda_.Architecture.ARM_64,
            handler="quota_request.handler",
            code=lambda_.Code.from_asset(str(HANDLER_DIR), exclude=["**/__pycache__", "**/*.pyc"]),
            role=self.role,
            log_group=self.log_group,
            timeout=Duration.minutes(2),
            # One deploy raises a handful of quotas; more concurrency only adds throttling.
            reserved_concurrent_executions=2,
        )
        function_depends_on_policy_only(self.function, self.role)


class QuotaRequest(Construct):
    """One quota target: `Custom::ServiceQuotaRequest` with its state as attributes (see lambda/quota)."""

    def __init__(
        self, scope: Construct, construct_id: str, *, quota: QuotaTarget, provider: QuotaRequestProvider
    ) -> None:
        super().__init__(scope, construct_id)
        self.quota = quota
        self.resource = CustomResource(
            self,
            "Resource",
            service_token=provider.function.function_arn,
            resource_type=RESOURCE_TYPE,
            properties={
                "ServiceCode": quota.service_code,
                "QuotaName": quota.name,
                "DesiredValue": quota.value,
            },
        )
        self.status = self.resource.get_att_string("Status")
        self.applied_value = self.resource.get_att_string("AppliedValue")
        self.request_id = self.resource.get_att_string("RequestId")
