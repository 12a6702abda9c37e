"""PipelineStack: the stateless part of an environment: roles, training-code asset, notifications, logs.

The state machine and its Lambdas (the pipeline issue) are added in `_add_state_machine`, the one
marked place for them; `lambda_role` and `grant_pass_execution_role` are the helpers they use so that
every Lambda role starts empty and `iam:PassRole` is granted the same, conditioned way everywhere.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from aws_cdk import CfnOutput, RemovalPolicy, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sns as sns
from aws_cdk import aws_ssm as ssm
from constructs import Construct

from hfpipe import contract
from hfpipe.contract import (
    SSM_DEPLOY_STATE_MACHINE_ARN,
    SSM_EXECUTION_ROLE_ARN,
    SSM_IMAGE_CATALOG,
    SSM_NOTIFICATION_TOPIC_ARN,
    SSM_SOURCEDIR_URI,
    SSM_STATE_MACHINE_ARN,
    ssm_parameter_name,
)
from hfpipe.core.promotion import promotion
from stacks.config import LOG_RETENTION_DAYS, EnvironmentConfig, PromoteOptions
from stacks.constructs import workflow
from stacks.constructs.adapter_state_machine import AdapterStateMachine
from stacks.constructs.deploy_state_machine import DeployStateMachine
from stacks.constructs.endpoint_alarms import EndpointAlarms
from stacks.constructs.execution_role import SageMakerExecutionRole
from stacks.constructs.failed_events import FailedEvents
from stacks.constructs.pipeline_events import PipelineEvents
from stacks.constructs.pipeline_lambdas import PipelineLambdas
from stacks.constructs.pipeline_state_machine import PipelineStateMachine
from stacks.constructs.promotion import Promotion
from stacks.constructs.source_asset import SourcedirAsset
from stacks.constructs.state_machine_name import state_machine_arn
from stacks.functions.adapter import AdapterFunction, grant_invoke_adapters
from stacks.functions.reaper import ReaperFunction
from stacks.image_catalog import build_catalog

REPO_ROOT = Path(__file__).resolve().parent.parent
TRAINING_CODE_DIR = REPO_ROOT / "training_code"
SAGEMAKER_SERVICE = "sagemaker.amazonaws.com"


def retention_days(days: int) -> logs.RetentionDays:
    """The `RetentionDays` member for a validated number of days (see config.LOG_RETENTION_DAYS)."""
    members = [m for m in logs.RetentionDays if m is not logs.RetentionDays.INFINITE]
    return dict(zip(LOG_RETENTION_DAYS, members, strict=True))[days]


class PipelineStack(Stack):
    """Execution role, sourcedir asset, SNS topic and log group of one environment (+ the state machine).

    Public attributes, for the state machine and tests: `execution_role`, `data_bucket`,
    `artifacts_bucket`, `notification_topic`, `log_group`, `sourcedir` (with `sourcedir_uri`).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: EnvironmentConfig,
        data_bucket: s3.IBucket,
        artifacts_bucket: s3.IBucket,
        training_code_dir: Path = TRAINING_CODE_DIR,
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, construct_id, termination_protection=config.retain, **kwargs)
        self.config = config
        self.data_bucket = data_bucket
        self.artifacts_bucket = artifacts_bucket
        self._removal_policy = RemovalPolicy.RETAIN if config.retain else RemovalPolicy.DESTROY

        self.sourcedir = SourcedirAsset(self, "Sourcedir", source=training_code_dir)
        self.sourcedir_uri: str = self.sourcedir.s3_uri

        # Image URIs are resolved here, at synth time, through the SageMaker SDK for this environment's
        # region; the catalog goes to the execution role (what it may pull), the Plan Lambda and SSM.
        self.image_catalog = build_catalog(self.config.region)
        self.execution_role: iam.Role = SageMakerExecutionRole(
            self,
            "SageMakerExecutionRole",
            data_bucket=data_bucket,
            artifacts_bucket=artifacts_bucket,
            image_catalog=self.image_catalog,
        ).role
        self.sourcedir.grant_read(self.execution_role)

        self._add_notifications()
        self.log_group = self._log_group("PipelineLogGroup", contract.state_machine_name(config.name))

        self._add_state_machine()
        self._add_deploy()
        self._add_adapters()
        self._add_reaper()
        self._add_promotion()
        self._add_outputs()

    def _log_group(self, cid: str, name: str) -> logs.LogGroup:
        retention = retention_days(self.config.log_retention_days)
        return workflow.log_group(self, cid, name, retention, self._removal_policy)

    def _add_notifications(self) -> None:
        """The notification topic (success/failure of each run) and its customer managed key."""
        # A customer managed key, not alias/aws/sns: CloudWatch alarms (the failed-events alarm) can publish
        # to an encrypted topic only when the key's policy lets cloudwatch.amazonaws.com use it, and the AWS
        # managed key's policy cannot be changed ("Enable compatibility between event sources from AWS
        # services and encrypted topics", https://docs.aws.amazon.com/sns/latest/dg/sns-key-management.html).
        self.notification_key = kms.Key(
            self,
            "NotificationKey",
            description=f"hfpipe {self.config.name}: server-side encryption of the notification topic",
            enable_key_rotation=True,
            removal_policy=self._removal_policy,
        )
        self.notification_topic = sns.Topic(
            self,
            "NotificationTopic",
            display_name=f"hfpipe {self.config.name} pipeline notifications",
            enforce_ssl=True,
            master_key=self.notification_key,
        )

    def _add_state_machine(self) -> None:
        """The pipeline Lambdas, the state machine and the two event rules, wired together.

        Each Lambda is a component of stacks/functions/ (composed by PipelineLambdas) that starts from its own
        empty `lambda_role` and grants itself what its handler calls; the state machine gets the functions it
        invokes (PipelineStateMachine.INVOKES), the event rules OnTrainingEvent and Cleanup."""
        self.failed_events = FailedEvents(
            self,
            "FailedEvents",
            env_name=self.config.name,
            topic=self.notification_topic,
            topic_key=self.notification_key,
        )
        self.pipeline_lambdas = PipelineLambdas(
            self,
            "PipelineLambdas",
            env_name=self.config.name,
            execution_role=self.execution_role,
            sourcedir_uri=self.sourcedir_uri,
            data_bucket_name=self.data_bucket.bucket_name,
            artifacts_bucket_name=self.artifacts_bucket.bucket_name,
            image_catalog=self.image_catalog,
            topic=self.notification_topic,
            state_machine_arn=state_machine_arn(self, self.config.name),
            failed_events=self.failed_events.queue,
            role_factory=self.lambda_role,
            grant_pass_role=self.grant_pass_execution_role,
            log_retention=retention_days(self.config.log_retention_days),
            removal_policy=self._removal_policy,
            allowed_s3_buckets=self.config.allowed_s3_buckets,
            allowed_image_registries=self.config.allowed_image_registries,
            model_approval=self.config.model_approval,
            endpoints=self.config.endpoints,
            endpoint_ttl_hours=self.config.endpoint_ttl_hours,
            evaluation_gate=self.config.evaluation_gate,
            promote_role_arns=tuple(
                promotion.role_arn(self.partition, str(t.account), t.name)
                for t in self.config.promoted_to
                if self.config.in_other_account(t)
            ),
        )
        self.pipeline = PipelineStateMachine(
            self,
            "Pipeline",
            functions={key: self.pipeline_lambdas.functions[key] for key in PipelineStateMachine.INVOKES},
            env_name=self.config.name,
            grant_pass_role=self.grant_pass_execution_role,
            log_group=self.log_group,
            execution_role_arn=self.execution_role.role_arn,
        )
        self.state_machine = self.pipeline.state_machine
        self.pipeline_events = PipelineEvents(
            self,
            "PipelineEvents",
            env_name=self.config.name,
            on_training_event=self.pipeline_lambdas.on_training_event.function,
            cleanup=self.pipeline_lambdas.cleanup.function,
            state_machine=self.state_machine,
            failed_events=self.failed_events.queue,
        )

    def _add_deploy(self) -> None:
        """The named endpoints' rollback alarms and the deploy state machine (docs/deploy.md), which invokes
        the deploy's three functions and the pipeline's SmokeTest; its ARN goes to SSM and an output."""
        self.endpoint_alarms = EndpointAlarms(
            self, "EndpointAlarms", env_name=self.config.name, endpoints=self.config.endpoints
        )
        # SageMaker asks that the role deploying may describe the rollback alarms; the models' role too, to
        # be safe where the docs say "execution role" (stacks/constructs/endpoint_alarms.py).
        self.endpoint_alarms.grant_describe(self.execution_role)
        # Prepare looks at them before an update writes anything (deploy_guards.alarm_wait).
        self.endpoint_alarms.grant_describe(self.pipeline_lambdas.deploy_prepare.role)
        self.deploy_log_group = self._log_group(
            "DeployLogGroup", contract.deploy_state_machine_name(self.config.name)
        )
        self.deploy = DeployStateMachine(
            self,
            "Deploy",
            functions={key: self.pipeline_lambdas.functions[key] for key in DeployStateMachine.INVOKES},
            env_name=self.config.name,
            grant_pass_role=self.grant_pass_execution_role,
            log_group=self.deploy_log_group,
            alarms=self.endpoint_alarms,
        )
        arn = self.deploy.state_machine.state_machine_arn
        ssm.StringParameter(
            self,
            "DeployStateMachineArnParameter",
            parameter_name=ssm_parameter_name(self.config.name, SSM_DEPLOY_STATE_MACHINE_ARN),
            string_value=arn,
            description=f"hfpipe {self.config.name}: {SSM_DEPLOY_STATE_MACHINE_ARN}",
        )
        CfnOutput(self, "DeployStateMachineArn", value=arn)

    def _add_adapters(self) -> None:
        """The adapter state machine and its function, where cdk.json declares a shared base
        (docs/adapters.md); its ARN goes to SSM and an output."""
        base = self.config.shared_base
        if base is None:
            return
        self.adapter_function = AdapterFunction(
            self,
            "AdapterFunction",
            settings=self.pipeline_lambdas.settings,
            base=base,
            image_catalog=self.image_catalog,
            region=self.config.region,
            execution_role=self.execution_role,
            grant_pass_role=self.grant_pass_execution_role,
            named_endpoints=tuple(e.name for e in self.config.endpoints),
            evaluation_gate=self.config.evaluation_gate,
        )
        grant_invoke_adapters(self.pipeline_lambdas.smoke_test.role, self.config.name)
        name = contract.adapter_state_machine_name(self.config.name)
        log_group = self._log_group("AdapterLogGroup", name)
        self.adapters = AdapterStateMachine(
            self,
            "Adapters",
            functions={
                "adapter": self.adapter_function.function,
                "smoke_test": self.pipeline_lambdas.functions["smoke_test"],
            },
            env_name=self.config.name,
            log_group=log_group,
        )
        arn = self.adapters.state_machine.state_machine_arn
        # The shared base as deployed, for the command (`hfpipe report` of an adapter run): what this stack
        # serves adapters on, which a checkout's cdk.json (or `hfpipe local up --set`) may say otherwise.
        for key, value, construct_id in (
            (contract.SSM_ADAPTER_STATE_MACHINE_ARN, arn, "AdapterStateMachineArnParameter"),
            (contract.SSM_SHARED_BASE, json.dumps(base.entry(), sort_keys=True), "SharedBaseParameter"),
        ):
            ssm.StringParameter(
                self,
                construct_id,
                parameter_name=ssm_parameter_name(self.config.name, key),
                string_value=value,
                description=f"hfpipe {self.config.name}: {key}",
            )
        CfnOutput(self, "AdapterStateMachineArn", value=arn)

    def _add_reaper(self) -> None:
        """The reaper of expired, idle endpoints and its hourly schedule (docs/deploy.md, "Time to live")."""
        self.reaper = ReaperFunction(
            self,
            "ReaperFunction",
            settings=self.pipeline_lambdas.settings,
            topic=self.notification_topic,
            idle_minutes=self.config.endpoint_idle_minutes,
            failed_events=self.failed_events.queue,
            shared_base=self.config.shared_base is not None,
        )
        hours = self.config.endpoint_ttl_hours
        if hours is not None:  # what the command plans a dry run with (the Plan reads its own variable)
            ssm.StringParameter(
                self,
                "EndpointTtlParameter",
                parameter_name=ssm_parameter_name(self.config.name, contract.SSM_ENDPOINT_TTL_SECONDS),
                string_value=str(hours * 3600),
                description=f"hfpipe {self.config.name}: {contract.SSM_ENDPOINT_TTL_SECONDS}",
            )

    def _add_promotion(self) -> None:
        """The Promote state machine, where cdk.json names an environment this one promotes from."""
        source = self.config.promote_source
        if source is None:
            return
        self.promotion = Promotion(
            self,
            "Promotion",
            settings=self.pipeline_lambdas.settings,
            options=PromoteOptions(
                source=source,
                cross_account=self.config.in_other_account(source),
                image_catalog=self.image_catalog,
                model_approval=self.config.model_approval,
                evaluation_gate=self.config.evaluation_gate,
                allowed_image_registries=self.config.allowed_image_registries,
            ),
            log_retention=retention_days(self.config.log_retention_days),
            removal_policy=self._removal_policy,
        )

    def lambda_role(self, construct_id: str, description: str) -> iam.Role:
        """A role for one Lambda function with no permissions yet; grant each one it needs explicitly."""
        return iam.Role(
            self,
            construct_id,
            description=description,
            # No aws:SourceAccount condition: Lambda does not document confused-deputy keys for execution roles.
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
        )

    def grant_pass_execution_role(self, grantee: iam.IGrantable) -> iam.Grant:
        """Allow `grantee` to pass the execution role, to SageMaker only (iam:PassedToService)."""
        return iam.Grant.add_to_principal(
            grantee=grantee,
            actions=["iam:PassRole"],
            resource_arns=[self.execution_role.role_arn],
            conditions={"StringEquals": {"iam:PassedToService": SAGEMAKER_SERVICE}},
        )

    def _add_outputs(self) -> None:
        for key, value, output_id in (
            (SSM_EXECUTION_ROLE_ARN, self.execution_role.role_arn, "ExecutionRoleArn"),
            (SSM_SOURCEDIR_URI, self.sourcedir_uri, "SourcedirUri"),
            (SSM_NOTIFICATION_TOPIC_ARN, self.notification_topic.topic_arn, "NotificationTopicArn"),
            (SSM_STATE_MACHINE_ARN, self.state_machine.state_machine_arn, "StateMachineArn"),
            (SSM_IMAGE_CATALOG, json.dumps(self.image_catalog, sort_keys=True), "ImageCatalog"),
            # What `hfpipe models approve`, `deploy` and `deploy --adapter` do with an unevaluated version.
            (contract.SSM_EVALUATION_GATE, self.config.evaluation_gate, "EvaluationGate"),
        ):
            ssm.StringParameter(
                self,
                f"{output_id}Parameter",
                parameter_name=ssm_parameter_name(self.config.name, key),
                string_value=value,
                description=f"hfpipe {self.config.name}: {key}",
            )
            CfnOutput(self, output_id, value=value)
        CfnOutput(self, "PipelineLogGroupName", value=self.log_group.log_group_name)
