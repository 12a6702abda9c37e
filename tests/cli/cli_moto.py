"""Helpers for the hfpipe command tests: one deployed environment in a moto account.

The environment runs the app's real state machine and Lambda handlers (the dev PipelineStack synthesized
once per session, on `hfpipe.local.engine.engine`), so the command is tested against what the pipeline really
writes: the Plan output, the history, the Report Lambda's report, the resource names and tags.
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from app_synth import ARTIFACTS_BUCKET, DATA_BUCKET, data_imports
from evaluations import StandInEvaluation
from moto.backends import get_backend

import app as cdk_app
from hfpipe import contract
from hfpipe.cli.aws import make_clients, stored_plan
from hfpipe.core.names import derive_names
from hfpipe.core.run import request
from hfpipe.local.engine.engine import ACCOUNT, LocalEngine

REGION = "eu-west-1"  # cdk.json's dev region, which the synthesized template is for
ROLE = f"arn:aws:iam::{ACCOUNT}:role/hfpipe-test"


def plan_for(name: str, env: str = "dev") -> dict[str, Any]:
    """The names and tags part of the plan the Plan Lambda makes for execution `name`."""
    return {"execution_name": name, "recipe_name": "tiny-lora", "env": env, **derive_names(name, env)}


def tags_for(plan: dict[str, Any]) -> list[dict[str, str]]:
    """The tags an execution puts on what it creates (the pipeline's own rule)."""
    return request.resource_tags(plan["env"], plan["execution_name"], plan["recipe_name"])


def tagged_model(where: Any, name: str, env: str, execution: str, recipe: str = "tiny-qa") -> None:
    """A model in ``where``'s SageMaker (an Environment or a Deployed), tagged as execution ``execution`` of
    environment ``env`` tags what it creates."""
    where.sagemaker.create_model(
        ModelName=name,
        ExecutionRoleArn=f"arn:aws:iam::{ACCOUNT}:role/r",
        PrimaryContainer={"Image": "example.invalid/i"},
        Tags=tags_for({"env": env, "execution_name": execution, "recipe_name": recipe}),
    )


@functools.cache
def image_catalog() -> str:
    """The image catalog the Pipeline stack writes for REGION (stacks/image_catalog.py), as JSON."""
    from stacks.image_catalog import build_catalog

    return json.dumps(build_catalog(REGION), sort_keys=True)


class Environment:
    """An environment's SSM parameters and buckets in the current moto account: what `cdk deploy` leaves for
    the command to read (clean-up and data upload need nothing more)."""

    def __init__(self, env: str = "dev", state_machine_arn: str | None = None) -> None:
        self.env = env
        clients = make_clients(region=REGION)  # shares the command's parsed service models: faster tests
        self.sfn = clients.sfn
        self.sagemaker = clients.sagemaker
        self.s3 = clients.s3
        self.ssm = clients.ssm
        self.cloudwatch = clients.cloudwatch
        self.logs = clients.logs
        self.data_bucket = DATA_BUCKET
        for bucket in (DATA_BUCKET, ARTIFACTS_BUCKET):
            if bucket not in {b["Name"] for b in self.s3.list_buckets()["Buckets"]}:
                self.s3.create_bucket(Bucket=bucket, CreateBucketConfiguration={"LocationConstraint": REGION})
        self.state_machine_arn = (
            state_machine_arn
            or f"arn:aws:states:{REGION}:{ACCOUNT}:stateMachine:{contract.state_machine_name(env)}"
        )
        values = {
            contract.SSM_DATA_BUCKET: DATA_BUCKET,
            contract.SSM_ARTIFACTS_BUCKET: ARTIFACTS_BUCKET,
            contract.SSM_EXECUTION_ROLE_ARN: ROLE,
            contract.SSM_SOURCEDIR_URI: f"s3://{ARTIFACTS_BUCKET}/code/sourcedir.tar.gz",
            contract.SSM_STATE_MACHINE_ARN: self.state_machine_arn,
            contract.SSM_NOTIFICATION_TOPIC_ARN: f"arn:aws:sns:{REGION}:{ACCOUNT}:hfpipe-{env}",
            # What the Pipeline stack writes: `start` plans with it before it starts (as its dry run does).
            contract.SSM_IMAGE_CATALOG: image_catalog(),
            **_ttl_parameter(env),
        }
        for key, value in values.items():
            self.ssm.put_parameter(
                Name=contract.ssm_parameter_name(env, key), Value=value, Type="String", Overwrite=True
            )


def _ttl_parameter(env: str) -> dict[str, str]:
    """What the Pipeline stack writes of cdk.json's endpoint_ttl_hours for ``env`` (dev's: a day), if anything."""
    hours = cdk_app.cdk_json_context()["hfpipe:environments"].get(env, {}).get("endpoint_ttl_hours")
    return {} if hours is None else {contract.SSM_ENDPOINT_TTL_SECONDS: str(hours * 3600)}


def pipeline_engine(template: dict[str, Any]) -> LocalEngine:
    """The app's real state machine and handlers on moto (one per test module: starting it takes seconds)."""
    return LocalEngine(
        template,
        imports=data_imports(),
        region=REGION,
        # Poll waits of a second take 1/50 s: a live execution loops, a finished one ends at once.
        time_scale=0.02,
    )


class Deployed(Environment):
    """The environment deployed: a fresh copy of the app's real state machine (the dev PipelineStack
    synthesized once per session) on the module's local engine, so each test sees only its executions.

    What cannot run here is the engine's plug-ins: training (`start(..., fail=True)` fails the job as
    SageMaker would; `running=True` leaves it InProgress until `finish_training`) and the endpoint, which
    answers in the shape the recipe's smoke test expects.

    The engine's moto account lives as long as the module; its SageMaker resources, CloudWatch logs and
    the answers queued for InvokeEndpoint are emptied for each environment deployed, so a test sees only
    the jobs, endpoints and log lines of its own executions.
    """

    _count = 0

    def __init__(self, engine: LocalEngine, env: str = "dev") -> None:
        Deployed._count += 1
        sfn = engine.client("stepfunctions")
        # The pipeline's own name (the command knows an execution ARN's environment by it); a module that
        # deployed before this one in the same moto account leaves one of that name, replaced here.
        name = contract.state_machine_name(env)
        for machine in sfn.list_state_machines()["stateMachines"]:
            if machine["name"] == name:
                sfn.delete_state_machine(stateMachineArn=machine["stateMachineArn"])
        arn = sfn.create_state_machine(name=name, definition=json.dumps(engine.definition), roleArn=ROLE)[
            "stateMachineArn"
        ]
        super().__init__(env, arn)
        self._engine = engine
        self._running: set[str] = set()
        self._failing: dict[str, str] = {}
        engine.training = self._training
        # The recipes' evaluation job writes a contract document (evaluate.py itself: tests/training).
        engine.processing = StandInEvaluation()
        engine.endpoint = _answer
        engine.create_errors.clear()
        for service in ("sagemaker", "sagemaker-runtime", "logs"):
            get_backend(service)[ACCOUNT][REGION].reset()

    def _training(self, request: dict[str, Any], job: Any) -> None:
        name = request["TrainingJobName"]
        if name in self._failing:
            job.training_job_status, job.secondary_status = "Failed", "Failed"
            job.failure_reason = self._failing[name]
        elif name in self._running:
            job.training_job_status, job.secondary_status = "InProgress", "Training"
            job.final_metric_data_list, job.billable_time_in_seconds = [], None
        else:
            job.final_metric_data_list = [
                {"MetricName": "train_loss", "Value": 1.25, "Timestamp": job.creation_time},
                {"MetricName": "eval_loss", "Value": 1.5, "Timestamp": job.creation_time},
            ]

    def start(
        self,
        name: str,
        recipe: str = "tiny-lora",
        fail: bool = False,
        running: bool = False,
        wait: bool = True,
        **execution_input: Any,
    ) -> tuple[str, dict[str, Any]]:
        """Start an execution of `recipe`; returns its ARN and the plan the Plan Lambda made (as the JSON the
        pipeline stored, read back through the type)."""
        job_name = derive_names(name, self.env)["training_job_name"]
        if fail:
            self._failing[job_name] = "AlgorithmError: CUDA out of memory"
        if running:
            self._running.add(job_name)
        arn = self.sfn.start_execution(
            stateMachineArn=self.state_machine_arn,
            name=name,
            input=json.dumps({"recipe_name": recipe, "poll_seconds": 1, **execution_input}),
        )["executionArn"]
        if wait:
            self.wait(arn)
        else:
            self.wait_for_state(arn, "Launch")
        events = self.sfn.get_execution_history(executionArn=arn, maxResults=1000)["events"]
        plan = stored_plan(events)
        assert plan is not None, f"execution {name} has no plan"
        return arn, plan.to_json()

    def throttle_create_training_job(self, times: int) -> None:
        """The next `times` CreateTrainingJob calls fail with ThrottlingException (Launch retries them)."""
        self._engine.create_errors.extend(["ThrottlingException"] * times)

    def job(self, name: str) -> Any:
        """moto's training job (to set what its API cannot: status, times)."""
        return sagemaker_backend().training_jobs[name]

    def finish_training(self, name: str, status: str = "Completed") -> None:
        """End a running training job as SageMaker would."""
        job = self.job(name)
        job.training_job_status = job.secondary_status = status
        # SageMaker's state-change event, which completes the Launch task waiting on the job.
        self._engine.training_job_ended(name)

    def wait(self, arn: str, timeout: float = 30.0) -> str:
        """The status the execution ended with, once its status-change event has been handled too: the
        abnormal-end rule's Lambda runs a moment after the end (as EventBridge delivers it), and must not
        run on into the test's next steps or the next test."""
        try:
            return self._engine.wait(arn, timeout_s=timeout).status
        except TimeoutError:
            raise AssertionError(f"execution {arn} still running after {timeout} s") from None

    def wait_for_state(self, arn: str, state: str, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            events = self.sfn.get_execution_history(executionArn=arn, maxResults=1000)["events"]
            if any(e.get("stateEnteredEventDetails", {}).get("name") == state for e in events):
                return
            time.sleep(0.05)
        raise AssertionError(f"execution {arn} never entered {state}")


def _answer(endpoint: str, body: Any) -> Any:
    """What the endpoint of the recipe that sent `body` answers (the shape its smoke test expects)."""
    if isinstance(body.get("inputs"), dict):  # question answering
        return {"answer": "a SageMaker endpoint", "score": 0.71, "start": 32, "end": 52}
    if "messages" in body:  # the vllm serving kind: an OpenAI chat completion, as vLLM answers it
        return {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 1,
            "model": endpoint,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": "Amanda bakes cookies."},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 30, "completion_tokens": 5, "total_tokens": 35},
        }
    return [{"generated_text": "Amanda bakes cookies."}]


def sagemaker_backend() -> Any:
    """moto's SageMaker state, for what its API cannot set (job status, times)."""
    return get_backend("sagemaker")[ACCOUNT][REGION]


def running_training_job(sm: Any, name: str, tags: list[dict[str, str]], output: str) -> None:
    """A training job `name` tagged `tags`, writing under `output`, InProgress (moto's API cannot set it)."""
    sm.create_training_job(
        TrainingJobName=name,
        AlgorithmSpecification={"TrainingImage": "example.invalid/t:1", "TrainingInputMode": "File"},
        RoleArn=ROLE,
        OutputDataConfig={"S3OutputPath": output},
        ResourceConfig={"InstanceType": "ml.g5.2xlarge", "InstanceCount": 1, "VolumeSizeInGB": 30},
        StoppingCondition={"MaxRuntimeInSeconds": 3600},
        Tags=tags,
    )
    sagemaker_backend().training_jobs[name].training_job_status = "InProgress"


class StopRecordingSageMaker:
    """moto's SageMaker, plus StopTrainingJob (which moto does not implement): records and applies it."""

    def __init__(self, real: Any) -> None:
        self._real = real
        self.stopped: list[str] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)

    def stop_training_job(self, TrainingJobName: str) -> dict[str, Any]:
        self.stopped.append(TrainingJobName)
        sagemaker_backend().training_jobs[TrainingJobName].training_job_status = "Stopping"
        return {}


# --- fixtures shared by tests/cli and tests/hostile (imported by their conftest.py) -------------------


@pytest.fixture
def aws_credentials(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    """Fake credentials and a region; no real config files, no instance metadata lookups."""
    for var in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_REGION", REGION)
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


@pytest.fixture(scope="module")
def engine(pipeline_template: dict[str, Any]) -> Iterator[LocalEngine]:
    with pipeline_engine(pipeline_template) as running:
        yield running


@pytest.fixture
def deployed(aws_credentials: None, engine: LocalEngine) -> Deployed:
    """The dev environment deployed: the real PipelineStack's state machine and handlers on moto."""
    return Deployed(engine, "dev")
