"""The pipeline's Lambda functions (Plan, Launch, Gate, SmokeTest, Report, Cleanup) and their asset.

One asset, bundled locally (no Docker): lambda/pipeline/ plus a copy of hfpipe/core, hfpipe/contract.py
and recipes/, so the Plan Lambda validates with the same schema and recipes as the CLI. Each function
gets only the permissions its handler uses.
"""

from __future__ import annotations

import shutil
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


class PipelineLambdas(Construct):
    """The six handler functions of the pipeline state machine, least privilege each."""

    HANDLERS = {
        "plan": "pipeline_lambdas.plan.handler",
        "launch": "pipeline_lambdas.launch.handler",
        "gate": "pipeline_lambdas.gate.handler",
        "smoke_test": "pipeline_lambdas.smoke_test.handler",
        "report": "pipeline_lambdas.report.handler",
        "cleanup": "pipeline_lambdas.cleanup.handler",
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
        default_poll_seconds: int = 60,
        log_retention: logs.RetentionDays = logs.RetentionDays.ONE_MONTH,
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
        }
        self.functions: dict[str, lambda_.Function] = {}
        for key, handler in self.HANDLERS.items():
            cid = "".join(p.capitalize() for p in key.split("_")) + "Function"
            log_group = logs.LogGroup(self, cid + "Logs", retention=log_retention)
            self.functions[key] = lambda_.Function(
                self,
                cid,
                runtime=lambda_.Runtime.PYTHON_3_12,
                architecture=lambda_.Architecture.ARM_64,
                handler=handler,
                code=code,
                timeout=cdk.Duration.seconds(60),
                memory_size=256,
                log_group=log_group,
                environment={**common_env, **env.get(key, {})},
                description=f"hfpipe {env_name} pipeline: {key}",
            )
        arn = stack.format_arn
        job_arn = arn(service="sagemaker", resource="training-job", resource_name="*")
        managed_tag = {f"aws:RequestTag/{contract.TAG_MANAGED_BY}": contract.PROJECT}
        owned = {f"aws:ResourceTag/{contract.TAG_MANAGED_BY}": contract.PROJECT}

        self.plan.add_to_role_policy(
            # ListServiceQuotas has no resource-level permissions.
            iam.PolicyStatement(actions=["servicequotas:ListServiceQuotas"], resources=["*"])
        )
        self.launch.add_to_role_policy(
            iam.PolicyStatement(
                actions=["sagemaker:CreateTrainingJob", "sagemaker:AddTags"],
                resources=[job_arn],
                conditions={"StringEquals": managed_tag},
            )
        )
        self.launch.add_to_role_policy(iam.PolicyStatement(actions=["sagemaker:DescribeTrainingJob"], resources=[job_arn]))
        self.launch.add_to_role_policy(
            iam.PolicyStatement(
                actions=["iam:PassRole"],
                resources=[execution_role.role_arn],
                conditions={"StringEquals": {"iam:PassedToService": "sagemaker.amazonaws.com"}},
            )
        )
        self.smoke_test.add_to_role_policy(
            iam.PolicyStatement(
                actions=["sagemaker:InvokeEndpoint"],
                resources=[arn(service="sagemaker", resource="endpoint", resource_name="*")],
                conditions={"StringEquals": owned},
            )
        )
        topic.grant_publish(self.report)
        hosting = [arn(service="sagemaker", resource=r, resource_name="*") for r in ("endpoint", "endpoint-config", "model")]
        self.cleanup.add_to_role_policy(
            iam.PolicyStatement(
                actions=["sagemaker:DescribeEndpoint", "sagemaker:DescribeEndpointConfig", "sagemaker:DescribeModel", "sagemaker:ListTags"],
                resources=hosting,
            )
        )
        self.cleanup.add_to_role_policy(
            iam.PolicyStatement(
                actions=["sagemaker:DeleteEndpoint", "sagemaker:DeleteEndpointConfig", "sagemaker:DeleteModel"],
                resources=hosting,
                conditions={"StringEquals": owned},
            )
        )
        self.cleanup.add_to_role_policy(
            iam.PolicyStatement(actions=["sagemaker:DescribeTrainingJob"], resources=[job_arn])
        )
        self.cleanup.add_to_role_policy(
            iam.PolicyStatement(actions=["sagemaker:StopTrainingJob"], resources=[job_arn], conditions={"StringEquals": owned})
        )

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
    def cleanup(self) -> lambda_.Function:
        """Cleanup function."""
        return self.functions["cleanup"]
