"""The pipeline's Lambda functions (Plan, Launch, Gate, SmokeTest, Report, Cleanup) and their asset.

One asset, bundled locally (no Docker): lambda/pipeline/ plus a copy of hfpipe/core, hfpipe/contract.py
and recipes/, so the Plan Lambda validates with the same schema and recipes as the CLI. Each function
gets only the permissions its handler uses.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import jsii
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sns as sns
from constructs import Construct

from hfpipe import contract
from hfpipe.core import limits
from hfpipe.core.logs import LOG_GROUP as TRAINING_LOG_GROUP
from stacks.nag import acknowledge, rendered, rendered_value
from stacks.template_hygiene import function_depends_on_policy_only

ROOT = Path(__file__).resolve().parents[2]
_IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc")


def bundle_into(output_dir: str | Path) -> None:
    """Write the Lambda code bundle (handlers + hfpipe core + recipes) into ``output_dir``."""
    out = Path(output_dir)
    shutil.copytree(ROOT / "lambda" / "pipeline", out, dirs_exist_ok=True, ignore=_IGNORE)
    (out / "hfpipe").mkdir(exist_ok=True)
    shutil.copy2(ROOT / "hfpipe" / "__init__.py", out / "hfpipe" / "__init__.py")
    shutil.copy2(ROOT / "hfpipe" / "contract.py", out / "hfpipe" / "contract.py")
    shutil.copytree(ROOT / "hfpipe" / "core", out / "hfpipe" / "core", dirs_exist_ok=True, ignore=_IGNORE)
    shutil.copytree(ROOT / "hfpipe" / "kinds", out / "hfpipe" / "kinds", dirs_exist_ok=True, ignore=_IGNORE)
    shutil.copytree(ROOT / "recipes", out / "hfpipe" / "recipes", dirs_exist_ok=True, ignore=_IGNORE)


@jsii.implements(cdk.ILocalBundling)
class _LocalBundling:
    def try_bundle(self, output_dir: str, *, image: Any = None, **_: Any) -> bool:
        bundle_into(output_dir)
        return True


def code_asset() -> lambda_.Code:
    """The bundled code; hashed by output so an edit in hfpipe/core also changes the asset."""
    return lambda_.Code.from_asset(
        str(ROOT / "lambda" / "pipeline"),
        asset_hash_type=cdk.AssetHashType.OUTPUT,
        bundling=cdk.BundlingOptions(image=cdk.DockerImage.from_registry("unused"), local=_LocalBundling()),
    )


RoleFactory = Callable[[str, str], iam.Role]
PassRoleGrant = Callable[[iam.IGrantable], iam.Grant]


def owned_by(env_name: str, condition_key: str) -> dict[str, dict[str, str]]:
    """An IAM condition: the hfpipe managed-by and env tags (``aws:RequestTag`` or ``aws:ResourceTag``).

    Execution names (and so resource names) are chosen when an execution starts, so the resource
    ARNs end in ``*``; the tags are what limits these actions to this environment's own resources.
    """
    return {
        "StringEquals": {
            f"{condition_key}/{contract.TAG_MANAGED_BY}": contract.PROJECT,
            f"{condition_key}/{contract.TAG_ENV}": env_name,
        }
    }


class PipelineLambdas(Construct):
    """The six handler functions of the pipeline state machine, least privilege each.

    ``role_factory(construct_id, description)`` makes each function's role, empty (PipelineStack's
    ``lambda_role``); ``grant_pass_role(grantee)`` grants iam:PassRole on the execution role only,
    conditioned on iam:PassedToService (PipelineStack's ``grant_pass_execution_role``).
    """

    HANDLERS = {
        "plan": "pipeline_lambdas.plan.handler",
        "launch": "pipeline_lambdas.launch.handler",
        "gate": "pipeline_lambdas.gate.handler",
        "smoke_test": "pipeline_lambdas.smoke_test.handler",
        "report": "pipeline_lambdas.report.handler",
        "cleanup": "pipeline_lambdas.cleanup.handler",
        "on_training_event": "pipeline_lambdas.on_training_event.handler",
    }

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
        role_factory: RoleFactory,
        grant_pass_role: PassRoleGrant,
        default_poll_seconds: int = 60,
        log_retention: logs.RetentionDays = logs.RetentionDays.ONE_MONTH,
        removal_policy: cdk.RemovalPolicy = cdk.RemovalPolicy.DESTROY,
        allowed_s3_buckets: tuple[str, ...] = (),
        allowed_image_registries: tuple[str, ...] = (),
    ) -> None:
        super().__init__(scope, construct_id)
        stack = cdk.Stack.of(self)
        code = code_asset()
        common_env = {"HFPIPE_ENV": env_name, "LOG_LEVEL": "INFO"}
        env = {
            "plan": {
                "EXECUTION_ROLE_ARN": execution_role.role_arn,
                "SOURCEDIR_URI": sourcedir_uri,
                "DATA_BUCKET": data_bucket_name,
                "ARTIFACTS_BUCKET": artifacts_bucket_name,
                "IMAGE_CATALOG": cdk.Stack.of(self).to_json_string(image_catalog),
                "DEFAULT_POLL_SECONDS": str(default_poll_seconds),
            },
            "report": {"TOPIC_ARN": topic.topic_arn},
            "cleanup": {"TOPIC_ARN": topic.topic_arn},
            "launch": {"ARTIFACTS_BUCKET": artifacts_bucket_name},
            "on_training_event": {"ARTIFACTS_BUCKET": artifacts_bucket_name},
        }
        # Only when cdk.json allows anything outside the environment (pipeline_lambdas/plan.py reads them).
        if allowed_s3_buckets:
            env["plan"]["ALLOWED_S3_BUCKETS"] = ",".join(allowed_s3_buckets)
        if allowed_image_registries:
            env["plan"]["ALLOWED_IMAGE_REGISTRIES"] = ",".join(allowed_image_registries)
        self.functions: dict[str, lambda_.Function] = {}
        self.roles: dict[str, iam.Role] = {}
        for key, handler in self.HANDLERS.items():
            cid = "".join(p.capitalize() for p in key.split("_")) + "Function"
            log_group = logs.LogGroup(
                self, cid + "Logs", retention=log_retention, removal_policy=removal_policy
            )
            role = role_factory(f"{cid}Role", f"hfpipe {env_name} pipeline {key} Lambda")
            log_group.grant_write(role)
            self.roles[key] = role
            self.functions[key] = lambda_.Function(
                self,
                cid,
                runtime=lambda_.Runtime.PYTHON_3_14,
                architecture=lambda_.Architecture.ARM_64,
                handler=handler,
                code=code,
                role=role,
                # Longer than the smoke test's latency limit (limits.MAX_SMOKE_LATENCY_MS), so a slow
                # endpoint fails the latency check rather than timing the Lambda out.
                timeout=cdk.Duration.seconds(
                    limits.SMOKE_TEST_TIMEOUT_SECONDS
                    if key == "smoke_test"
                    else limits.LAMBDA_TIMEOUT_SECONDS
                ),
                memory_size=256,
                log_group=log_group,
                # Lambda's JSON log format: one JSON object per line, execution_name in each (aws.logger).
                logging_format=lambda_.LoggingFormat.JSON,
                environment={**common_env, **env.get(key, {})},
                description=f"hfpipe {env_name} pipeline: {key}",
            )
        arn = stack.format_arn
        job_arn = arn(service="sagemaker", resource="training-job", resource_name="*")
        hosting = [
            arn(service="sagemaker", resource=r, resource_name="*")
            for r in ("endpoint", "endpoint-config", "model")
        ]
        endpoint_arn = hosting[0]
        created_here = owned_by(env_name, "aws:RequestTag")
        owned = owned_by(env_name, "aws:ResourceTag")

        self.roles["plan"].add_to_policy(
            # Applied values, then the AWS defaults of quotas that have none (core.quotas); neither list
            # action has resource-level permissions.
            iam.PolicyStatement(
                actions=["servicequotas:ListServiceQuotas", "servicequotas:ListAWSDefaultServiceQuotas"],
                resources=["*"],
            )
        )
        acknowledge(
            self.roles["plan"],
            "AwsSolutions-IAM5[Resource::*]",
            "servicequotas:ListServiceQuotas and ListAWSDefaultServiceQuotas support no resource-level "
            "permissions (Service Authorization Reference, Service Quotas); the Plan Lambda only reads quotas.",
        )
        tokens = (
            f"arn:{stack.partition}:s3:::{artifacts_bucket_name}/{contract.ARTIFACTS_TASK_TOKENS_PREFIX}*"
        )
        tokens_rendered = (
            rendered(stack, f"arn:{stack.partition}:s3:::")
            + rendered_value(stack, artifacts_bucket_name)
            + f"/{contract.ARTIFACTS_TASK_TOKENS_PREFIX}*"
        )
        # SendTaskSuccess/SendTaskFailure take the task token, not an ARN: they support no resource-level
        # permissions (Service Authorization Reference, Step Functions).
        complete_task = iam.PolicyStatement(
            actions=["states:SendTaskSuccess", "states:SendTaskFailure"], resources=["*"]
        )
        launch = self.roles["launch"]
        launch.add_to_policy(
            iam.PolicyStatement(
                actions=["sagemaker:CreateTrainingJob", "sagemaker:AddTags"],
                resources=[job_arn],
                conditions=created_here,
            )
        )
        # Launch's idempotency check reads the job and its tags (adopted only when this env and execution's).
        launch.add_to_policy(
            iam.PolicyStatement(
                actions=["sagemaker:DescribeTrainingJob", "sagemaker:ListTags"], resources=[job_arn]
            )
        )
        launch.add_to_policy(iam.PolicyStatement(actions=["s3:PutObject"], resources=[tokens]))
        launch.add_to_policy(complete_task)
        grant_pass_role(launch)
        on_event = self.roles["on_training_event"]
        on_event.add_to_policy(
            iam.PolicyStatement(actions=["s3:GetObject", "s3:DeleteObject"], resources=[tokens])
        )
        # Without s3:ListBucket a missing key reads as AccessDenied, not NoSuchKey
        # (https://docs.aws.amazon.com/AmazonS3/latest/API/API_GetObject.html, Permissions);
        # listing is limited to the token prefix, so a duplicate event finds "no waiting task".
        on_event.add_to_policy(
            iam.PolicyStatement(
                actions=["s3:ListBucket"],
                resources=[f"arn:{stack.partition}:s3:::{artifacts_bucket_name}"],
                conditions={"StringLike": {"s3:prefix": f"{contract.ARTIFACTS_TASK_TOKENS_PREFIX}*"}},
            )
        )
        on_event.add_to_policy(
            iam.PolicyStatement(actions=["sagemaker:DescribeTrainingJob"], resources=[job_arn])
        )
        on_event.add_to_policy(complete_task)
        for key in ("launch", "on_training_event"):
            acknowledge(
                self.roles[key],
                "AwsSolutions-IAM5[Resource::*]",
                "states:SendTaskSuccess and SendTaskFailure support no resource-level permissions (the task "
                "token names the task); Service Authorization Reference, Step Functions.",
            )
            acknowledge(
                self.roles[key],
                f"AwsSolutions-IAM5[Resource::{tokens_rendered}]",
                "Task tokens are kept per training job (named at run time) under the task-tokens/ prefix of "
                "this environment's artifacts bucket only.",
            )
        self.roles["smoke_test"].add_to_policy(
            iam.PolicyStatement(
                actions=["sagemaker:InvokeEndpoint"], resources=[endpoint_arn], conditions=owned
            )
        )
        # sns:Publish only: the topic uses the AWS managed key (alias/aws/sns), whose key policy already
        # lets same-account principals use it through SNS; grant_publish would add kms:* on key/*.
        for key in ("report", "cleanup"):  # Cleanup reports abnormal ends (execution_end.py)
            iam.Grant.add_to_principal(
                grantee=self.roles[key], actions=["sns:Publish"], resource_arns=[topic.topic_arn]
            )
        # A failed job's report carries the last lines of its log (hfpipe.core.logs.log_tail): the streams of
        # SageMaker's training-job log group only. DescribeLogStreams acts on the log group, GetLogEvents on
        # its log streams (Service Authorization Reference, Amazon CloudWatch Logs).
        training_logs = arn(
            service="logs",
            resource="log-group",
            resource_name=TRAINING_LOG_GROUP,
            arn_format=cdk.ArnFormat.COLON_RESOURCE_NAME,
        )
        self.roles["report"].add_to_policy(
            iam.PolicyStatement(actions=["logs:DescribeLogStreams"], resources=[training_logs])
        )
        training_streams = f"{training_logs}:log-stream:*"
        self.roles["report"].add_to_policy(
            iam.PolicyStatement(actions=["logs:GetLogEvents"], resources=[training_streams])
        )
        acknowledge(
            self.roles["report"],
            f"AwsSolutions-IAM5[Resource::{rendered(stack, training_streams)}]",
            "SageMaker names a training job's log streams <job>/algo-<n>-<epoch> at run time; the grant is "
            "read-only (GetLogEvents) and limited to the streams of the /aws/sagemaker/TrainingJobs log group.",
        )
        cleanup = self.roles["cleanup"]
        # Cleanup reads a resource (and its tags) before it decides; the delete itself is tag-conditioned.
        cleanup.add_to_policy(
            iam.PolicyStatement(
                actions=[
                    "sagemaker:DescribeEndpoint",
                    "sagemaker:DescribeEndpointConfig",
                    "sagemaker:DescribeModel",
                    "sagemaker:DescribeTrainingJob",
                    "sagemaker:ListTags",
                ],
                resources=[*hosting, job_arn],
            )
        )
        cleanup.add_to_policy(
            iam.PolicyStatement(
                actions=[
                    "sagemaker:DeleteEndpoint",
                    "sagemaker:DeleteEndpointConfig",
                    "sagemaker:DeleteModel",
                    "sagemaker:StopTrainingJob",
                ],
                resources=[*hosting, job_arn],
                conditions=owned,
            )
        )
        wildcards = {
            "launch": [job_arn],
            "smoke_test": [endpoint_arn],
            "cleanup": [job_arn, *hosting],
            "on_training_event": [job_arn],
        }
        for key, resources in wildcards.items():
            for resource in resources:
                acknowledge(
                    self.roles[key],
                    f"AwsSolutions-IAM5[Resource::{rendered(stack, resource)}]",
                    "SageMaker resource names derive from the Step Functions execution name, chosen at "
                    "start time; creating requires the request tags hfpipe:managed-by=hfpipe and "
                    "hfpipe:env=<env>, deleting/stopping/invoking requires those resource tags; only "
                    "Describe*/ListTags (read-only) are untagged.",
                )
        for key, function in self.functions.items():
            function_depends_on_policy_only(function, self.roles[key])

    @property
    def plan(self) -> lambda_.Function:
        """Plan function."""
        return self.functions["plan"]

    @property
    def launch(self) -> lambda_.Function:
        """Launch function."""
        return self.functions["launch"]

    @property
    def gate(self) -> lambda_.Function:
        """Gate function."""
        return self.functions["gate"]

    @property
    def smoke_test(self) -> lambda_.Function:
        """SmokeTest function."""
        return self.functions["smoke_test"]

    @property
    def report(self) -> lambda_.Function:
        """Report function."""
        return self.functions["report"]

    @property
    def on_training_event(self) -> lambda_.Function:
        """OnTrainingEvent function (EventBridge: SageMaker training-job state changes)."""
        return self.functions["on_training_event"]

    @property
    def cleanup(self) -> lambda_.Function:
        """Cleanup function."""
        return self.functions["cleanup"]
