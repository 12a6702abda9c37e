"""Service-quota increase requests as custom resources: CDK's `custom_resources.Provider` framework
around one Lambda (lambda/quota), which returns its result; the framework answers CloudFormation."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from aws_cdk import (
    AssetHashType,
    BundlingOptions,
    CustomResource,
    DockerImage,
    Duration,
    RemovalPolicy,
    Stack,
)
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import custom_resources as cr
from constructs import Construct

from stacks.config import QuotaTarget
from stacks.functions.common import LocalBundling, bundle_core
from stacks.nag import acknowledge, rendered_value
from stacks.template_hygiene import function_depends_on_policy_only

ROOT = Path(__file__).resolve().parent.parent.parent
HANDLER_DIR = ROOT / "lambda" / "quota"
_IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc")
RESOURCE_TYPE = "Custom::ServiceQuotaRequest"


def bundle_into(output_dir: str | Path) -> None:
    """The quota handler plus what hfpipe.core needs (its quota look-up is the one Plan uses; the core imports
    the kinds: a bundle of the core alone failed to import)."""
    out = Path(output_dir)
    shutil.copytree(HANDLER_DIR, out, dirs_exist_ok=True, ignore=_IGNORE)
    bundle_core(out)


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
        self.role = self._make_role(service_codes)
        self.function = self._make_function()
        # CDK's Provider framework answers CloudFormation (the pre-signed URL), retries and times out.
        self.provider = cr.Provider(
            self,
            "Provider",
            on_event_handler=self.function,
            log_group=logs.LogGroup(
                self, "FrameworkLogGroup", retention=log_retention, removal_policy=removal_policy
            ),
        )
        self.service_token = self.provider.service_token
        self._acknowledge_framework(stack)

    def _make_role(self, service_codes: list[str]) -> iam.Role:
        """The handler's role: its logs, and Service Quotas limited to ``service_codes`` where it can be."""
        role = iam.Role(
            self,
            "Role",
            description="hfpipe: service quota increase requests",
            # No aws:SourceAccount condition: Lambda does not document confused-deputy keys for execution roles.
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
        )
        self.log_group.grant_write(role)
        # The look-up (hfpipe.core.run.quotas) reads the two lists, which support no resource-level
        # permissions; requesting an increase and reading a quota's request history are limited to the
        # configured services by servicequotas:service, the condition key the Service Authorization
        # Reference lists for them (https://docs.aws.amazon.com/service-authorization/latest/reference/
        # list_servicequotas.html). GetServiceQuota is not needed: ListServiceQuotas has every applied value.
        role.add_to_policy(
            iam.PolicyStatement(
                sid="RaiseQuotas",
                actions=[
                    "servicequotas:RequestServiceQuotaIncrease",
                    "servicequotas:ListRequestedServiceQuotaChangeHistoryByQuota",
                ],
                resources=["*"],
                conditions={"StringEquals": {"servicequotas:service": service_codes}},
            )
        )
        role.add_to_policy(
            iam.PolicyStatement(
                sid="ListQuotas",
                actions=["servicequotas:ListServiceQuotas", "servicequotas:ListAWSDefaultServiceQuotas"],
                resources=["*"],
            )
        )
        acknowledge(
            role,
            "AwsSolutions-IAM5[Resource::*]",
            "ListServiceQuotas and ListAWSDefaultServiceQuotas support no resource-level permissions; "
            "RequestServiceQuotaIncrease and ListRequestedServiceQuotaChangeHistoryByQuota are limited by "
            "the servicequotas:service condition to the configured services (Service Authorization "
            "Reference, Service Quotas).",
        )
        return role

    def _make_function(self) -> lambda_.Function:
        """The handler (lambda/quota, bundled with hfpipe/core), with the role and log group made first."""
        function = lambda_.Function(
            self,
            "Function",
            description="hfpipe: request service quota increases up to the configured targets",
            runtime=lambda_.Runtime.PYTHON_3_14,
            architecture=lambda_.Architecture.ARM_64,
            handler="quota_request.handler",
            code=lambda_.Code.from_asset(
                str(HANDLER_DIR),
                asset_hash_type=AssetHashType.OUTPUT,
                bundling=BundlingOptions(
                    image=DockerImage.from_registry("unused"), local=LocalBundling(bundle_into)
                ),
            ),
            role=self.role,
            log_group=self.log_group,
            logging_format=lambda_.LoggingFormat.JSON,
            timeout=Duration.minutes(2),
            # No reserved concurrency: Lambda keeps at least 10 unreserved executions per account, so a
            # reservation fails to deploy in accounts whose concurrency limit is 10, as new ones often have
            # (https://docs.aws.amazon.com/lambda/latest/dg/configuration-concurrency.html).
        )
        function_depends_on_policy_only(function, self.role)
        return function

    def _acknowledge_framework(self, stack: Stack) -> None:
        framework = self.provider.node.find_child("framework-onEvent")
        assert isinstance(framework, lambda_.Function) and isinstance(framework.role, iam.Role)
        function_depends_on_policy_only(framework, framework.role)
        acknowledge(
            framework,
            "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole]",
            "CDK's custom_resources.Provider framework function: the AWS managed basic execution policy "
            "(CloudWatch Logs only) is how the framework's role is built.",
        )
        acknowledge(
            framework,
            f"AwsSolutions-IAM5[Resource::{rendered_value(stack, self.function.function_arn)}:*]",
            "CDK's Provider framework grant: lambda:InvokeFunction on the quota handler's versions and "
            "aliases only.",
        )
        acknowledge(
            framework,
            "AwsSolutions-L1",
            "The Provider framework function's Node.js runtime is chosen by the CDK version pinned here.",
        )


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
            service_token=provider.service_token,
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
