"""The pipeline's eight Lambda functions and the deploy's three, composed: one component each from
stacks/functions/.

Each component (``stacks/functions/<name>.py`` for ``lambda/pipeline/pipeline_lambdas/<name>.py``) makes
its function from the one shared code asset and grants its own role what its handler calls; this construct
holds no grants. It only shares the settings, and it keeps the construct path ``PipelineLambdas/<Name>Function``
under which the functions' logical IDs were first named.
"""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from hfpipe.core.deploy import deployments
from hfpipe.core.promotion import registry
from stacks.functions.cleanup import CleanupFunction
from stacks.functions.common import (
    FunctionSettings,
    PassRoleGrant,
    PipelineFunction,
    RoleFactory,
    code_asset,
    handler_of,
)
from stacks.functions.deploy_cleanup import DeployCleanupFunction
from stacks.functions.deploy_prepare import DeployPrepareFunction
from stacks.functions.deploy_record import DeployRecordFunction
from stacks.functions.evaluation import EvaluationFunction
from stacks.functions.gate import GateFunction
from stacks.functions.launch import LaunchFunction
from stacks.functions.on_training_event import OnTrainingEventFunction
from stacks.functions.plan import PlanFunction
from stacks.functions.register import RegisterFunction
from stacks.functions.report import ReportFunction
from stacks.functions.smoke_test import SmokeTestFunction

#: The components in the order they are made (the first binds the shared code asset).
COMPONENTS: tuple[type[PipelineFunction], ...] = (
    PlanFunction,
    LaunchFunction,
    GateFunction,
    SmokeTestFunction,
    ReportFunction,
    CleanupFunction,
    OnTrainingEventFunction,
    RegisterFunction,
    # The evaluation job's two steps (docs/evaluation.md).
    EvaluationFunction,
    # The deploy state machine's (stacks/constructs/deploy_state_machine.py); it also invokes SmokeTest.
    DeployPrepareFunction,
    DeployRecordFunction,
    DeployCleanupFunction,
)


class PipelineLambdas(Construct):
    """The components (``plan``, ``launch``, ...), and ``functions`` and ``roles`` by runtime module name.

    ``role_factory(construct_id, description)`` makes each function's role, empty (PipelineStack's
    ``lambda_role``); ``grant_pass_role(grantee)`` grants iam:PassRole on the execution role only,
    conditioned on iam:PassedToService (PipelineStack's ``grant_pass_execution_role``), to Launch.
    ``endpoints`` are the environment's named endpoints (cdk.json), which Prepare is given.
    ``state_machine_arn`` is the ARN the state machine will have (built from its fixed name), which
    Cleanup checks abnormal-end events against; ``failed_events`` is the dead-letter queue of the two
    functions EventBridge invokes (OnTrainingEvent, Cleanup). ``promote_role_arns``: the Promote roles of
    environments in other accounts that promote from this one (Register shares each group with them).
    """

    #: Runtime module -> the Handler of its function (hfpipe.local.engine.engine finds the functions by it).
    HANDLERS = {c.RUNTIME_MODULE: handler_of(c.RUNTIME_MODULE) for c in COMPONENTS}

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        env_name: str,
        execution_role: iam.IRole,
        sourcedir_uri: str,
        data_bucket_name: str,
        artifacts_bucket_name: str,
        image_catalog: dict[str, Any],
        topic: sns.ITopic,
        state_machine_arn: str,
        failed_events: sqs.IQueue,
        role_factory: RoleFactory,
        grant_pass_role: PassRoleGrant,
        default_poll_seconds: int = 60,
        log_retention: logs.RetentionDays = logs.RetentionDays.ONE_MONTH,
        removal_policy: cdk.RemovalPolicy = cdk.RemovalPolicy.DESTROY,
        allowed_s3_buckets: tuple[str, ...] = (),
        allowed_image_registries: tuple[str, ...] = (),
        model_approval: str = registry.DEFAULT_APPROVAL,
        endpoints: tuple[deployments.EndpointSettings, ...] = (),
        promote_role_arns: tuple[str, ...] = (),
        endpoint_ttl_hours: int | None = None,
        evaluation_gate: str = "advisory",
    ) -> None:
        super().__init__(scope, construct_id)
        self.settings = FunctionSettings(  # what every function shares (the Promote function's too)
            env_name=env_name,
            code=code_asset(),
            role_factory=role_factory,
            artifacts_bucket_name=artifacts_bucket_name,
            log_retention=log_retention,
            removal_policy=removal_policy,
            endpoint_ttl_hours=endpoint_ttl_hours,
        )
        self._add_training_functions(
            execution_role=execution_role,
            sourcedir_uri=sourcedir_uri,
            data_bucket_name=data_bucket_name,
            image_catalog=image_catalog,
            grant_pass_role=grant_pass_role,
            default_poll_seconds=default_poll_seconds,
            allowed_s3_buckets=allowed_s3_buckets,
            allowed_image_registries=allowed_image_registries,
        )
        self._add_closing_functions(topic, state_machine_arn, failed_events)
        self._add_registry_functions(model_approval, promote_role_arns)
        self._add_deploy_functions(execution_role, endpoints, evaluation_gate)
        self._index_components()

    def _add_training_functions(
        self,
        *,
        execution_role: iam.IRole,
        sourcedir_uri: str,
        data_bucket_name: str,
        image_catalog: dict[str, Any],
        grant_pass_role: PassRoleGrant,
        default_poll_seconds: int,
        allowed_s3_buckets: tuple[str, ...],
        allowed_image_registries: tuple[str, ...],
    ) -> None:
        """Plan, Launch, Gate and SmokeTest: the functions from a recipe to a tested endpoint."""
        self.plan = PlanFunction(
            self,
            "PlanFunction",
            settings=self.settings,
            execution_role=execution_role,
            sourcedir_uri=sourcedir_uri,
            data_bucket_name=data_bucket_name,
            image_catalog=image_catalog,
            default_poll_seconds=default_poll_seconds,
            allowed_s3_buckets=allowed_s3_buckets,
            allowed_image_registries=allowed_image_registries,
        )
        self.launch = LaunchFunction(
            self,
            "LaunchFunction",
            settings=self.settings,
            grant_pass_role=grant_pass_role,
        )
        self.gate = GateFunction(self, "GateFunction", settings=self.settings)
        self.smoke_test = SmokeTestFunction(self, "SmokeTestFunction", settings=self.settings)

    def _add_closing_functions(
        self, topic: sns.ITopic, state_machine_arn: str, failed_events: sqs.IQueue
    ) -> None:
        """Report and Cleanup (which notify ``topic``) and OnTrainingEvent: the two EventBridge invokes have
        ``failed_events`` as their dead-letter queue."""
        self.report = ReportFunction(self, "ReportFunction", settings=self.settings, topic=topic)
        self.cleanup = CleanupFunction(
            self,
            "CleanupFunction",
            settings=self.settings,
            topic=topic,
            state_machine_arn=state_machine_arn,
            failed_events=failed_events,
        )
        self.on_training_event = OnTrainingEventFunction(
            self,
            "OnTrainingEventFunction",
            settings=self.settings,
            failed_events=failed_events,
        )

    def _add_registry_functions(self, model_approval: str, promote_role_arns: tuple[str, ...]) -> None:
        """Register, and the evaluation's steps whose result Register stores with the version."""
        self.register = RegisterFunction(
            self,
            "RegisterFunction",
            settings=self.settings,
            model_approval=model_approval,
            promote_role_arns=promote_role_arns,
        )
        self.evaluation = EvaluationFunction(self, "EvaluationFunction", settings=self.settings)

    def _add_deploy_functions(
        self,
        execution_role: iam.IRole,
        endpoints: tuple[deployments.EndpointSettings, ...],
        evaluation_gate: str,
    ) -> None:
        """The deploy state machine's Prepare (with the evaluation gate), Record and Cleanup."""
        self.deploy_prepare = DeployPrepareFunction(
            self,
            "DeployPrepareFunction",
            settings=self.settings,
            execution_role=execution_role,
            endpoints=endpoints,
            evaluation_gate=evaluation_gate,
        )
        self.deploy_record = DeployRecordFunction(self, "DeployRecordFunction", settings=self.settings)
        self.deploy_cleanup = DeployCleanupFunction(self, "DeployCleanupFunction", settings=self.settings)

    def _index_components(self) -> None:
        """``functions`` and ``roles`` by runtime module name, the components made in COMPONENTS' order."""
        components: tuple[PipelineFunction, ...] = (
            self.plan,
            self.launch,
            self.gate,
            self.smoke_test,
            self.report,
            self.cleanup,
            self.on_training_event,
            self.register,
            self.evaluation,
            self.deploy_prepare,
            self.deploy_record,
            self.deploy_cleanup,
        )
        assert [type(c) for c in components] == list(COMPONENTS)
        self.functions: dict[str, lambda_.Function] = {c.RUNTIME_MODULE: c.function for c in components}
        self.roles: dict[str, iam.Role] = {c.RUNTIME_MODULE: c.role for c in components}
