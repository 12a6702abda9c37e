"""ReaperFunction: lambda/pipeline/pipeline_lambdas/reaper.py, run by an EventBridge schedule once an hour in each
environment; it deletes the environment's expired endpoints that had no calls in the idle window (docs/deploy.md,
"Time to live").

Its role may (Service Authorization Reference, Amazon SageMaker, Amazon CloudWatch,
https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazonsagemaker.html,
https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazoncloudwatch.html):
- list endpoints, endpoint configs, models and inference components, and read CloudWatch's metric statistics:
  ``*``, since ListEndpoints, ListEndpointConfigs, ListModels, ListInferenceComponents and GetMetricStatistics
  have no resource types;
- describe and read the tags of the endpoints, configs and models whose names this environment's runs
  (``<env>-``) and deploys (``hfpipe-<env>-``) give;
- delete them (DeleteEndpoint, DeleteEndpointConfig, DeleteModel) only where they carry this environment's tags
  (``aws:ResourceTag``; ``grant_hosting_deletes``);
- where the environment has a shared base: describe its inference components (the adapters on it) and start
  the adapter state machine (its retirement, which that state machine's own roles carry out);
- publish its report to the environment's notification topic.
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from hfpipe import contract
from stacks.constructs.pipeline_events import MAX_EVENT_AGE
from stacks.functions.common import (
    FunctionSettings,
    PipelineFunction,
    deploy_arn,
    grant_hosting_deletes,
    grant_publish,
    handler_of,
    run_arn,
)
from stacks.functions.deploy_prepare import state_machine_arns
from stacks.nag import acknowledge, rendered

#: How often the reaper runs: an expired endpoint bills at most this long past its idle window.
SCHEDULE = events.Schedule.rate(cdk.Duration.hours(1))
HOSTING = ("endpoint", "endpoint-config", "model")


class ReaperFunction(PipelineFunction):
    """The Reaper function (``function``), its role (``role``) and its schedule (``rule``)."""

    RUNTIME_MODULE = "reaper"
    #: Runtime module -> its Handler (hfpipe.local.engine.engine finds the function by it).
    HANDLERS = {RUNTIME_MODULE: handler_of(RUNTIME_MODULE)}

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        settings: FunctionSettings,
        topic: sns.ITopic,
        idle_minutes: int,
        failed_events: sqs.IQueue,
        shared_base: bool = False,
    ) -> None:
        env = settings.env_name
        environment = {"TOPIC_ARN": topic.topic_arn, "IDLE_MINUTES": str(idle_minutes)}
        machine, _ = state_machine_arns(scope, contract.adapter_state_machine_name(env))
        if shared_base:
            environment["ADAPTER_STATE_MACHINE_ARN"] = machine
        super().__init__(
            scope,
            construct_id,
            settings,
            environment=environment,
            dead_letter_queue=failed_events,
        )
        grant_publish(self.role, topic)
        self._grant(env)
        if shared_base:
            self._grant_retirement(env, machine)
        # EventBridge invokes it asynchronously: what it and Lambda could not deliver goes to the queue.
        self.rule = events.Rule(
            self,
            "Schedule",
            description=f"hfpipe {env}: the reaper of expired, idle endpoints, every hour",
            schedule=SCHEDULE,
            targets=[
                targets.LambdaFunction(
                    self.function,
                    retry_attempts=8,
                    max_event_age=MAX_EVENT_AGE,
                    dead_letter_queue=failed_events,
                )
            ],
        )

    def _grant(self, env: str) -> None:
        """Reads of the environment's hosting and tags, deletes only with its tags, and the unscoped lists."""
        hosting = [arn(self, r, env) for arn in (run_arn, deploy_arn) for r in HOSTING]
        self.allow(
            [
                "sagemaker:DescribeEndpoint",
                "sagemaker:DescribeEndpointConfig",
                "sagemaker:DescribeModel",
                "sagemaker:ListTags",
            ],
            hosting,
        )
        grant_hosting_deletes(self.role, env, hosting)
        # What uses a config or model before one of ours goes: every endpoint's config and every config's
        # models in the account and region, whoever made them (DeleteEndpointConfig and DeleteModel do not
        # refuse one in use); read-only, on the two resource types (Service Authorization Reference).
        stack = cdk.Stack.of(self)
        everyone = [stack.format_arn(service="sagemaker", resource=r, resource_name="*") for r in HOSTING[:2]]
        self.allow(["sagemaker:DescribeEndpoint", "sagemaker:DescribeEndpointConfig"], everyone)
        for resource in everyone:
            acknowledge(
                self.role,
                f"AwsSolutions-IAM5[Resource::{rendered(stack, resource)}]",
                "Read-only: before an expired config or model of this environment is deleted, the reaper reads "
                "every endpoint's config and every config's models in the account, so that one a user's own "
                "endpoint or config still uses is never deleted.",
            )
        unscoped = [
            "sagemaker:ListEndpoints",
            "sagemaker:ListEndpointConfigs",
            "sagemaker:ListModels",
            "sagemaker:ListInferenceComponents",
            "cloudwatch:GetMetricStatistics",
        ]
        self.allow(unscoped, ["*"])
        self._acknowledge(hosting)
        self._acknowledge_lists()

    def _grant_retirement(self, env: str, machine: str) -> None:
        """The shared base's adapters read at the act (its components), and its retirement started: the adapter
        state machine's StartExecution (Service Authorization Reference, Step Functions: on stateMachine)."""
        component = deploy_arn(self, "inference-component", env)
        self.allow(["sagemaker:DescribeInferenceComponent"], [component])
        self.allow(["states:StartExecution"], [machine])
        self._acknowledge([component])

    def _acknowledge(self, resources: list[str]) -> None:
        stack = cdk.Stack.of(self)
        for resource in resources:
            acknowledge(
                self.role,
                f"AwsSolutions-IAM5[Resource::{rendered(stack, resource)}]",
                "Endpoints, configs, models and the shared base's component are named at run time under this "
                "environment's prefixes; read-only (Describe*, ListTags), or deleted only with this "
                "environment's hfpipe:managed-by and hfpipe:env resource tags.",
            )

    def _acknowledge_lists(self) -> None:
        acknowledge(
            self.role,
            "AwsSolutions-IAM5[Resource::*]",
            "SageMaker's ListEndpoints, ListEndpointConfigs, ListModels, ListInferenceComponents and CloudWatch's "
            "GetMetricStatistics have no resource types (Service Authorization Reference); what they list is "
            "read and deleted only as the other statements allow.",
        )
