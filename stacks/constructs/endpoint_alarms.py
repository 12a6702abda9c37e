"""The CloudWatch alarms of an environment's named endpoints: what a deploy's automatic rollback watches.

For each endpoint cdk.json declares, three alarms (hfpipe.core.deploy.deployments.alarm_specs), named by
``contract.endpoint_alarm_name`` so a deploy's UpdateEndpoint can name them in its AutoRollbackConfiguration:
Invocation5XXErrors (Sum) and ModelLatency (Average, microseconds) of AWS/SageMaker, per minute, on the
endpoint's AllTraffic variant; missing data (no traffic, or no endpoint yet) is not breaching. They have no
actions: SageMaker reads their state during a deployment and rolls back when one is in ALARM
("Auto-Rollback Configuration and Monitoring",
https://docs.aws.amazon.com/sagemaker/latest/dg/deployment-guardrails-configuration.html).

The same page asks that the role deploying have ``cloudwatch:DescribeAlarms`` on them; ``grant_describe``
grants it on these alarms only.
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_iam as iam
from constructs import Construct

from hfpipe.core.deploy import deployments, fleets
from stacks.functions.common import colon_arn


class EndpointAlarms(Construct):
    """``alarms``: {endpoint name: (5xx-errors, 4xx-errors and model-latency alarms)}."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        env_name: str,
        endpoints: tuple[deployments.EndpointSettings, ...],
    ) -> None:
        super().__init__(scope, construct_id)
        self.alarms: dict[str, tuple[cloudwatch.Alarm, ...]] = {}
        #: The alarms' fixed names, which a deploy's AutoRollbackConfiguration names.
        self.alarm_names: list[str] = []
        for settings in endpoints:
            made = []
            for spec in deployments.alarm_specs(env_name, settings):
                self.alarm_names.append(spec.name)
                metric = cloudwatch.Metric(
                    namespace="AWS/SageMaker",
                    metric_name=spec.metric_name,
                    dimensions_map={
                        "EndpointName": settings.endpoint_name(env_name),
                        "VariantName": fleets.VARIANT,
                    },
                    statistic=spec.statistic,
                    period=cdk.Duration.seconds(deployments.ALARM_PERIOD_SECONDS),
                )
                made.append(
                    cloudwatch.Alarm(
                        self,
                        _construct_id(settings.name, spec.metric_name),
                        alarm_name=spec.name,
                        alarm_description=spec.description,
                        metric=metric,
                        threshold=spec.threshold,
                        evaluation_periods=1,
                        datapoints_to_alarm=1,
                        comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
                        treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
                    )
                )
            self.alarms[settings.name] = tuple(made)

    @property
    def alarm_arns(self) -> list[str]:
        """The alarms' ARNs, built from their fixed names (as a deploy names them)."""
        stack = cdk.Stack.of(self)
        return [colon_arn(stack, "cloudwatch", "alarm", name) for name in self.alarm_names]

    def grant_describe(self, grantee: iam.IGrantable) -> None:
        """cloudwatch:DescribeAlarms on these alarms only (none declared: nothing)."""
        if self.alarm_arns:
            iam.Grant.add_to_principal(
                grantee=grantee, actions=["cloudwatch:DescribeAlarms"], resource_arns=self.alarm_arns
            )


def _construct_id(name: str, metric_name: str) -> str:
    return "".join(part.capitalize() for part in name.split("-")) + metric_name
