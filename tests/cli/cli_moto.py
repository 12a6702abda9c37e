"""Helpers for the hfpipe command tests: one deployed environment in a moto account.

The "deployed" state machine is a stand-in made of Pass states that produce the Plan output and the
report in the shapes contracts.md fixes, so the command is tested against the contract, not against
the pipeline's implementation (which has its own tests). moto runs it (`execute_state_machine`).
"""

from __future__ import annotations

import json
import time
from typing import Any

from moto.backends import get_backend

from hfpipe import contract
from hfpipe.cli.aws import make_clients

REGION = "eu-west-1"
ACCOUNT = "123456789012"
ROLE = f"arn:aws:iam::{ACCOUNT}:role/hfpipe-test"


def plan_for(name: str, env: str = "dev", **extra: Any) -> dict[str, Any]:
    plan = {
        "execution_name": name,
        "recipe_name": "tiny-lora",
        "env": env,
        "training_job_name": f"{name}-train",
        "model_name": f"{name}-model",
        "endpoint_config_name": f"{name}-config",
        "endpoint_name": f"{name}-endpoint",
        "instance_type": "ml.g5.2xlarge",
        "instance_count": 1,
        "serving_instance_type": "ml.g5.4xlarge",
        "spot": False,
        "price_per_hour_usd": 1.5,
        "estimated_cost_usd": 0.5,
        "deploy": True,
        "keep_endpoint": False,
        "poll_seconds": 1,
        "training_job_request": {},
    }
    plan.update(extra)
    return plan


def report_for(plan: dict[str, Any]) -> dict[str, Any]:
    return {
        "execution_name": plan["execution_name"],
        "recipe_name": plan["recipe_name"],
        "training_job_name": plan["training_job_name"],
        "training_job_status": "Completed",
        "instance_type": plan["instance_type"],
        "instance_count": 1,
        "spot": False,
        "billable_seconds": 1200,
        "training_seconds": 1200,
        "price_per_hour_usd": 1.5,
        "cost_usd": 0.5,
        "spot_savings_percent": None,
        "final_metrics": {"eval_loss": 1.25, "eval_rougeL": 0.31},
        "model_artifacts": f"s3://artifacts/{plan['training_job_name']}/output/model.tar.gz",
        "checkpoint_s3_uri": None,
        "endpoint_name": plan["endpoint_name"],
        "endpoint_deleted": True,
        "smoke_test": {
            "ok": True,
            "latency_ms": 812.5,
            "response": [{"summary_text": "Amanda bakes cookies."}],
        },
    }


# The execution input carries the plan/report the stand-in states return, plus how long to "train". An
# input without them (what `hfpipe start` sends: {"recipe": ..., "overrides": ...}) gets a plan built from
# the execution's name and the recipe's name, as the Plan Lambda would.
DEFINITION = {
    "StartAt": "HasFakePlan",
    "States": {
        "HasFakePlan": {
            "Type": "Choice",
            "Choices": [{"Variable": "$.fake_plan", "IsPresent": True, "Next": "Plan"}],
            "Default": "PlanFromRecipe",
        },
        "PlanFromRecipe": {
            "Type": "Pass",
            "Parameters": {
                "fake_plan": {
                    "execution_name.$": "$$.Execution.Name",
                    "recipe_name.$": "$.recipe.name",
                    "training_job_name.$": "States.Format('{}-train', $$.Execution.Name)",
                    "endpoint_name.$": "States.Format('{}-endpoint', $$.Execution.Name)",
                    "instance_type": "ml.g4dn.xlarge",
                    "instance_count": 1,
                    "price_per_hour_usd": 0.736,
                    "deploy": True,
                },
                "fake_report": {
                    "execution_name.$": "$$.Execution.Name",
                    "recipe_name.$": "$.recipe.name",
                    "cost_usd": 0.01,
                    "final_metrics": {"eval_loss": 4.2},
                },
                "train_seconds": 0,
                "fail": False,
            },
            "Next": "Plan",
        },
        "Plan": {"Type": "Pass", "InputPath": "$.fake_plan", "ResultPath": "$.plan", "Next": "Train"},
        "Train": {"Type": "Wait", "SecondsPath": "$.train_seconds", "Next": "Outcome"},
        "Outcome": {
            "Type": "Choice",
            "Choices": [{"Variable": "$.fail", "BooleanEquals": True, "Next": "ReportFailure"}],
            "Default": "Report",
        },
        "ReportFailure": {
            "Type": "Fail",
            "Error": "TrainingJobFailed",
            "Cause": "AlgorithmError: CUDA out of memory",
        },
        "Report": {"Type": "Pass", "InputPath": "$.fake_report", "ResultPath": "$.report", "End": True},
    },
}


class Deployed:
    """One deployed environment in the moto account, and helpers to run executions on it."""

    def __init__(self, env: str = "dev") -> None:
        self.env = env
        clients = make_clients(region=REGION)  # shares the command's parsed service models: faster tests
        self.sfn = clients.sfn
        self.sagemaker = clients.sagemaker
        self.s3 = clients.s3
        self.ssm = clients.ssm
        self.cloudwatch = clients.cloudwatch
        self.data_bucket = f"hfpipe-{env}-data"
        self.s3.create_bucket(
            Bucket=self.data_bucket, CreateBucketConfiguration={"LocationConstraint": REGION}
        )
        self.state_machine_arn = self.sfn.create_state_machine(
            name=f"hfpipe-{env}", definition=json.dumps(DEFINITION), roleArn=ROLE
        )["stateMachineArn"]
        values = {
            contract.SSM_DATA_BUCKET: self.data_bucket,
            contract.SSM_ARTIFACTS_BUCKET: f"hfpipe-{env}-artifacts",
            contract.SSM_EXECUTION_ROLE_ARN: ROLE,
            contract.SSM_SOURCEDIR_URI: f"s3://hfpipe-{env}-artifacts/code/sourcedir.tar.gz",
            contract.SSM_STATE_MACHINE_ARN: self.state_machine_arn,
            contract.SSM_NOTIFICATION_TOPIC_ARN: f"arn:aws:sns:{REGION}:{ACCOUNT}:hfpipe-{env}",
            contract.SSM_IMAGE_CATALOG: "{}",
        }
        for key, value in values.items():
            self.ssm.put_parameter(Name=contract.ssm_parameter_name(env, key), Value=value, Type="String")

    def create_training_job(
        self, plan: dict[str, Any], metric_names: tuple[str, ...] = ("loss", "eval_loss")
    ) -> None:
        self.sagemaker.create_training_job(
            TrainingJobName=plan["training_job_name"],
            AlgorithmSpecification={
                "TrainingImage": "example.invalid/hf-training:latest",
                "TrainingInputMode": "File",
                "MetricDefinitions": [{"Name": n, "Regex": f"'{n}': ([0-9.]+)"} for n in metric_names],
            },
            RoleArn=ROLE,
            OutputDataConfig={"S3OutputPath": "s3://artifacts/out"},
            ResourceConfig={"InstanceType": plan["instance_type"], "InstanceCount": 1, "VolumeSizeInGB": 30},
            StoppingCondition={"MaxRuntimeInSeconds": 3600},
            Tags=tags_for(plan),
        )
        # moto replaces MetricDefinitions with a canned one; put back what a recipe would define.
        job = sagemaker_backend().training_jobs[plan["training_job_name"]]
        job.algorithm_specification["MetricDefinitions"] = [
            {"Name": n, "Regex": f"'{n}': ([0-9.]+)"} for n in metric_names
        ]

    def start(
        self, name: str, train_seconds: int = 0, fail: bool = False, wait: bool = True, **plan_extra: Any
    ) -> tuple[str, dict[str, Any]]:
        plan = plan_for(name, self.env, **plan_extra)
        body = {
            "fake_plan": plan,
            "fake_report": report_for(plan),
            "train_seconds": train_seconds,
            "fail": fail,
        }
        arn = self.sfn.start_execution(
            stateMachineArn=self.state_machine_arn, name=name, input=json.dumps(body)
        )["executionArn"]
        if wait:
            self.wait(arn)
        return arn, plan

    def wait(self, arn: str, timeout: float = 10.0) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            status = self.sfn.describe_execution(executionArn=arn)["status"]
            if status != "RUNNING":
                return str(status)
            time.sleep(0.05)
        raise AssertionError(f"execution {arn} still running after {timeout} s")

    def wait_for_state(self, arn: str, state: str, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            events = self.sfn.get_execution_history(executionArn=arn)["events"]
            if any(e.get("stateEnteredEventDetails", {}).get("name") == state for e in events):
                return
            time.sleep(0.05)
        raise AssertionError(f"execution {arn} never entered {state}")


def sagemaker_backend() -> Any:
    """moto's SageMaker state, for what its API cannot set (job status, times, metric definitions)."""
    return get_backend("sagemaker")[ACCOUNT][REGION]


def tags_for(plan: dict[str, Any]) -> list[dict[str, str]]:
    return [
        {"Key": contract.TAG_ENV, "Value": plan["env"]},
        {"Key": contract.TAG_EXECUTION, "Value": plan["execution_name"]},
        {"Key": contract.TAG_RECIPE, "Value": plan["recipe_name"]},
        {"Key": contract.TAG_MANAGED_BY, "Value": contract.PROJECT},
    ]
