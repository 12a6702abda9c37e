"""Run the synthesized pipeline state machine on moto, with the real Lambda handlers in-process.

The definition comes from a synthesized CloudFormation template (its Fn::Join / GetAtt / Ref tokens
resolved to moto resources), runs on moto's Step Functions interpreter
(``execute_state_machine``), and every Lambda task calls the handler named in the template, in this
process, against the same moto account. Two plug-ins let the caller decide what happens outside
AWS's control plane; that is the whole interface:

``training(request, job)``
    called after moto has created a training job (``request`` is a copy of the CreateTrainingJob
    request as sent, ``job`` moto's job object, whose AlgorithmSpecification is the request's). Tests set ``job.training_job_status = "Failed"``; ``hfpipe local``
    runs the real training here (hfpipe.local.container) and uploads model.tar.gz to
    ``job.model_artifacts["S3ModelArtifacts"]``.
``endpoint(endpoint_name, body) -> answer``
    serves an InvokeEndpoint call (``body`` is the decoded JSON request; return the JSON answer).
    ``hfpipe local`` serves through hfpipe.local.endpoint.LocalEndpoint.

Optional: ``on_endpoint(endpoint)`` after CreateEndpoint (set ``endpoint.endpoint_status``),
``create_training_job_errors`` (error codes CreateTrainingJob raises first, e.g. ThrottlingException),
``after_handler_errors`` ({function key: [error types]}: the handler runs, then the invocation fails,
as when a Lambda times out after doing its work), ``quotas`` (Service Quotas values; moto has none
for SageMaker), ``imports`` (values for the template's ``Fn::ImportValue``, e.g. the DataStack's
bucket exports) and ``time_scale`` (Wait states and Retry intervals take that many times their
seconds: 0 in the tests, so the real stack's 5 s / 60 s retries and poll waits cost nothing).

Example::

    with LocalEngine(template, training=my_training, endpoint=my_endpoint) as engine:
        result = engine.run({"recipe_name": "tiny-qa", "poll_seconds": 1}, name="demo-1")
        print(result.status, result.output["report"])
"""

from __future__ import annotations

import contextlib
import copy
import importlib
import io
import json
import os
import re
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from unittest import mock

ROOT = Path(__file__).resolve().parents[2]
LAMBDA_DIR = ROOT / "lambda" / "pipeline"
ACCOUNT = "123456789012"

TrainingPlugin = Callable[[dict[str, Any], Any], None]
EndpointPlugin = Callable[[str, Any], Any]


def default_quotas(value: float = 100.0) -> Callable[[str], float]:
    """Every quota has ``value`` (enough for any recipe)."""
    return lambda _name: value


class FakeQuotas:
    """The Service Quotas calls the Plan function makes, answered from a function of the quota name."""

    def __init__(self, value_for: Callable[[str], float | None], names: list[str] | None = None):
        self.value_for = value_for
        self.names = names

    def list_service_quotas(self, **kwargs: Any) -> dict[str, Any]:
        """One page: every quota name asked about so far, plus the standard ones for known types."""
        from hfpipe.core.prices import PRICES_USD_PER_HOUR

        names = self.names or [
            f"{t} for {use}"
            for t in PRICES_USD_PER_HOUR
            for use in ("training job usage", "spot training job usage", "endpoint usage")
        ]
        quotas = []
        for n in names:
            v = self.value_for(n)
            if v is not None:
                quotas.append({"QuotaName": n, "Value": v, "ServiceCode": "sagemaker"})
        return {"Quotas": quotas}


class _Runtime:
    """sagemaker-runtime stand-in that routes InvokeEndpoint to the endpoint plug-in."""

    def __init__(self, plugin: EndpointPlugin):
        self.plugin = plugin

    def invoke_endpoint(self, EndpointName: str, Body: bytes, **_: Any) -> dict[str, Any]:
        answer = self.plugin(EndpointName, json.loads(Body))
        return {"Body": io.BytesIO(json.dumps(answer).encode()), "ContentType": "application/json"}


@dataclass
class Execution:
    """What an execution ended as: status, output (dict) or error/cause, and the visited states."""

    arn: str
    status: str
    output: dict[str, Any] | None
    error: str | None
    cause: str | None
    states: list[str] = field(default_factory=list)


class TemplateError(ValueError):
    """The template holds a token the engine cannot resolve."""


class LocalEngine:
    """A context manager: moto started, resources created, state machine ready to ``run``."""

    def __init__(
        self,
        template: dict[str, Any],
        *,
        training: TrainingPlugin | None = None,
        endpoint: EndpointPlugin | None = None,
        on_endpoint: Callable[[Any], None] | None = None,
        quotas: Callable[[str], float | None] | None = None,
        create_training_job_errors: list[str] | None = None,
        after_handler_errors: dict[str, list[str]] | None = None,
        imports: dict[str, str] | None = None,
        region: str = "us-east-1",
        time_scale: float = 1.0,
    ) -> None:
        self.template = template
        self.resources: dict[str, Any] = template["Resources"]
        self.training = training
        self.endpoint = endpoint or (lambda name, body: [{"echo": body}])
        self.on_endpoint = on_endpoint
        self.quotas = FakeQuotas(quotas or default_quotas())
        self.create_errors = list(create_training_job_errors or [])
        self.after_errors = {k: list(v) for k, v in (after_handler_errors or {}).items()}
        self.imports = imports or {}
        self.region = region
        if time_scale < 0:
            raise ValueError(f"time_scale: {time_scale!r}; accepted: a number >= 0 (0 skips waits)")
        self.time_scale = time_scale
        self.physical: dict[str, str] = {}
        self.invocations: list[tuple[str, str]] = []
        self._stack = contextlib.ExitStack()

    # -- token resolution ---------------------------------------------------------------------------
    def resolve(self, value: Any) -> Any:
        """Replace CloudFormation intrinsics with the moto values they stand for."""
        if isinstance(value, list):
            return [self.resolve(v) for v in value]
        if not isinstance(value, dict):
            return value
        if len(value) == 1:
            ((key, arg),) = value.items()
            pseudo = {
                "AWS::Partition": "aws",
                "AWS::Region": self.region,
                "AWS::AccountId": ACCOUNT,
                "AWS::URLSuffix": "amazonaws.com",
                "AWS::StackName": "local",
            }
            if key == "Ref":
                if arg in pseudo:
                    return pseudo[arg]
                if arg in self.physical:
                    return self.physical[arg]
                raise TemplateError(f"Ref {arg}: no local resource for it")
            if key == "Fn::GetAtt":
                logical, attr = arg if isinstance(arg, list) else arg.split(".", 1)
                if logical in self.physical and attr in ("Arn", "TopicArn"):
                    return self._arn(logical)
                raise TemplateError(f"Fn::GetAtt {logical}.{attr}: not supported locally")
            if key == "Fn::Join":
                sep, parts = arg
                return sep.join(str(self.resolve(p)) for p in parts)
            if key == "Fn::Sub" and isinstance(arg, str):
                return re.sub(r"\$\{([^}!]+)\}", lambda m: str(self.resolve({"Ref": m.group(1)})), arg)
            if key == "Fn::ImportValue":
                name = self.resolve(arg)
                if name not in self.imports:
                    raise TemplateError(f"Fn::ImportValue {name}: pass it in imports=")
                return self.imports[name]
        return {k: self.resolve(v) for k, v in value.items()}

    def _arn(self, logical: str) -> str:
        rtype = self.resources[logical]["Type"]
        name = self.physical[logical]
        return {
            "AWS::Lambda::Function": f"arn:aws:lambda:{self.region}:{ACCOUNT}:function:{name}",
            "AWS::IAM::Role": f"arn:aws:iam::{ACCOUNT}:role/{name}",
            "AWS::S3::Bucket": f"arn:aws:s3:::{name}",
            "AWS::SNS::Topic": name,
            "AWS::StepFunctions::StateMachine": name,
        }.get(rtype, name)

    # -- set-up ---------------------------------------------------------------------------------------
    def __enter__(self) -> LocalEngine:
        from moto import mock_aws

        for k, v in {
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_DEFAULT_REGION": self.region,
            "AWS_REGION": self.region,
        }.items():
            self._stack.enter_context(mock.patch.dict(os.environ, {k: v}))
        self._stack.enter_context(
            mock_aws(
                config={"stepfunctions": {"execute_state_machine": True}, "lambda": {"use_docker": False}}
            )
        )
        self._install_hooks()
        self._create_resources()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stack.close()

    def client(self, service: str) -> Any:
        """A boto3 client on the engine's moto account."""
        import boto3

        return boto3.client(service, region_name=self.region)

    def _create_resources(self) -> None:
        iam, s3, sns = self.client("iam"), self.client("s3"), self.client("sns")
        trust = json.dumps({"Version": "2012-10-17", "Statement": []})
        for logical, res in self.resources.items():
            if res["Type"] == "AWS::IAM::Role":
                iam.create_role(RoleName=logical, AssumeRolePolicyDocument=trust)
                self.physical[logical] = logical
            elif res["Type"] == "AWS::S3::Bucket":
                name = res.get("Properties", {}).get("BucketName") or f"local-{logical.lower()}"
                s3.create_bucket(Bucket=name)
                self.physical[logical] = name
            elif res["Type"] == "AWS::SNS::Topic":
                self.physical[logical] = sns.create_topic(Name=logical)["TopicArn"]
            elif res["Type"] in ("AWS::Lambda::Function", "AWS::Logs::LogGroup"):
                self.physical[logical] = logical
        self.functions = {
            logical: res["Properties"]
            for logical, res in self.resources.items()
            if res["Type"] == "AWS::Lambda::Function"
            and "pipeline_lambdas." in res["Properties"].get("Handler", "")
        }
        machines = [k for k, r in self.resources.items() if r["Type"] == "AWS::StepFunctions::StateMachine"]
        if len(machines) != 1:
            raise TemplateError(f"expected one state machine in the template, found {machines}")
        props = self.resources[machines[0]]["Properties"]
        definition = self.resolve(props["DefinitionString"])
        self.definition = json.loads(definition)
        sfn = self.client("stepfunctions")
        self.state_machine_arn = sfn.create_state_machine(
            name="hfpipe-local", definition=definition, roleArn=f"arn:aws:iam::{ACCOUNT}:role/sfn"
        )["stateMachineArn"]

    # -- hooks into moto ------------------------------------------------------------------------------
    def _install_hooks(self) -> None:
        from moto.awslambda_simple.models import LambdaSimpleBackend
        from moto.sagemaker.models import SageMakerModelBackend

        engine = self

        def invoke(
            backend: Any, function_name: str, qualifier: Any, body: Any, headers: Any, response_headers: Any
        ) -> bytes:
            return engine._invoke(function_name.split(":function:")[-1].split(":")[0], body, response_headers)

        original_create_job = SageMakerModelBackend.create_training_job
        original_create_endpoint = SageMakerModelBackend.create_endpoint

        def create_training_job(backend: Any, **kwargs: Any) -> Any:
            if engine.create_errors:
                from moto.core.exceptions import JsonRESTError

                code = engine.create_errors.pop(0)
                raise JsonRESTError(code, f"{code} injected by the local engine")
            # moto rewrites parts of the request in place (MetricDefinitions becomes a canned one), so
            # the plug-in gets a copy made before moto sees it, and the job describes what was sent.
            request = _request_of(copy.deepcopy(kwargs))
            job = original_create_job(backend, **kwargs)
            if "AlgorithmSpecification" in request:
                job.algorithm_specification = copy.deepcopy(request["AlgorithmSpecification"])
            if engine.training:
                engine.training(copy.deepcopy(request), job)
            return job

        def create_endpoint(backend: Any, *args: Any, **kwargs: Any) -> Any:
            ep = original_create_endpoint(backend, *args, **kwargs)
            if engine.on_endpoint:
                engine.on_endpoint(ep)
            return ep

        from moto.stepfunctions.parser.asl.component.state.exec.state_task.service import (
            state_task_service_aws_sdk as aws_sdk,
        )

        original_eval = aws_sdk.StateTaskServiceAwsSdk._eval_service_task

        def eval_aws_sdk(task: Any, env: Any, *args: Any, **kwargs: Any) -> None:
            # AWS serializes SDK responses to JSON (timestamps become strings); moto keeps datetimes.
            original_eval(task, env, *args, **kwargs)
            env.stack.append(json.loads(json.dumps(env.stack.pop(), default=str)))

        self._stack.enter_context(
            mock.patch.object(aws_sdk.StateTaskServiceAwsSdk, "_eval_service_task", eval_aws_sdk)
        )
        self._stack.enter_context(mock.patch.object(LambdaSimpleBackend, "invoke", invoke))
        self._scale_time()
        from moto.sagemaker.models import FakeEndpointConfig

        # moto's list of endpoint instance types predates g5; AWS validates the type itself.
        self._stack.enter_context(
            mock.patch.object(FakeEndpointConfig, "validate_instance_type", _check_ml_type)
        )
        self._stack.enter_context(
            mock.patch.object(SageMakerModelBackend, "create_training_job", create_training_job)
        )
        self._stack.enter_context(
            mock.patch.object(SageMakerModelBackend, "create_endpoint", create_endpoint)
        )
        if str(LAMBDA_DIR) not in sys.path:
            sys.path.insert(0, str(LAMBDA_DIR))
        aws = importlib.import_module("pipeline_lambdas.aws")
        self._stack.enter_context(
            mock.patch.dict(
                aws.OVERRIDES,
                {
                    "service-quotas": self.quotas,
                    "sagemaker-runtime": _Runtime(self._serve),
                    # One client per service for every handler call (they are thread-safe): making a
                    # boto3 client costs more than the call it makes against moto.
                    **{service: self.client(service) for service in ("sagemaker", "sns")},
                },
            )
        )

    def _scale_time(self) -> None:
        """Wait states and Retry intervals take ``time_scale`` times as long (tests: 0, no waiting)."""
        if self.time_scale == 1.0:
            return
        from moto.stepfunctions.parser.asl.component.common.retry import retrier_decl
        from moto.stepfunctions.parser.asl.component.state.wait.wait_function.wait_function import (
            WaitFunction,
        )

        scale = self.time_scale
        original_wait = WaitFunction._wait_interval

        def wait_interval(function: Any, env: Any, wait_seconds: int) -> None:
            original_wait(function, env=env, wait_seconds=int(wait_seconds * scale))

        self._stack.enter_context(mock.patch.object(WaitFunction, "_wait_interval", wait_interval))
        self._stack.enter_context(mock.patch.object(retrier_decl, "time", _ScaledSleep(scale)))

    def _serve(self, name: str, body: Any) -> Any:
        return self.endpoint(name, body)

    def _invoke(self, logical: str, body: Any, response_headers: dict[str, str]) -> bytes:
        props = self.functions.get(logical)
        if props is None:
            raise TemplateError(f"Lambda {logical}: not an hfpipe pipeline function in the template")
        module_name, func_name = props["Handler"].rsplit(".", 1)
        key = module_name.rsplit(".", 1)[-1]
        self.invocations.append((key, logical))
        env = {k: str(self.resolve(v)) for k, v in props.get("Environment", {}).get("Variables", {}).items()}
        event = json.loads(body) if body else {}
        try:
            with mock.patch.dict(os.environ, env):
                handler = getattr(importlib.import_module(module_name), func_name)
                result = handler(event, None)
            pending = self.after_errors.get(key)
            if pending:
                error = pending.pop(0)
                raise _Injected(error, f"{error} injected after the {key} handler ran")
        except Exception as err:  # every handler error becomes a Lambda function error, as in AWS
            response_headers["x-amz-function-error"] = "Unhandled"
            error_type = err.error_type if isinstance(err, _Injected) else type(err).__name__
            return json.dumps({"errorType": error_type, "errorMessage": str(err)}).encode()
        return json.dumps(result, default=str).encode()

    # -- running --------------------------------------------------------------------------------------
    def run(self, execution_input: dict[str, Any], *, name: str, timeout_s: float = 120.0) -> Execution:
        """Start an execution and wait for it to end; returns its status, output, error and states."""
        sfn = self.client("stepfunctions")
        arn = sfn.start_execution(
            stateMachineArn=self.state_machine_arn, name=name, input=json.dumps(execution_input)
        )["executionArn"]
        deadline = time.monotonic() + timeout_s
        while True:
            desc = sfn.describe_execution(executionArn=arn)
            if desc["status"] != "RUNNING":
                break
            if time.monotonic() > deadline:
                raise TimeoutError(f"execution {name} still RUNNING after {timeout_s} s")
            time.sleep(0.05)
        history = sfn.get_execution_history(executionArn=arn, maxResults=1000)["events"]
        states = [e["stateEnteredEventDetails"]["name"] for e in history if "stateEnteredEventDetails" in e]
        output = json.loads(desc["output"]) if desc.get("output") else None
        return Execution(arn, desc["status"], output, desc.get("error"), desc.get("cause"), states)

    def sagemaker_resources(self) -> dict[str, list[str]]:
        """Names of the training jobs, models, endpoint configs and endpoints in moto now."""
        sm = self.client("sagemaker")
        return {
            "training_jobs": [j["TrainingJobName"] for j in sm.list_training_jobs()["TrainingJobSummaries"]],
            "models": [m["ModelName"] for m in sm.list_models()["Models"]],
            "endpoint_configs": [
                c["EndpointConfigName"] for c in sm.list_endpoint_configs()["EndpointConfigs"]
            ],
            "endpoints": [e["EndpointName"] for e in sm.list_endpoints()["Endpoints"]],
        }

    def training_job(self, name: str) -> Any:
        """moto's job object (to set states or read what was sent)."""
        from moto.sagemaker.models import sagemaker_backends

        return sagemaker_backends[ACCOUNT][self.region].training_jobs[name]


def _check_ml_type(self: Any, instance_type: str) -> None:
    from moto.sagemaker.exceptions import ValidationError

    if not str(instance_type).startswith("ml."):
        raise ValidationError(message=f"Value '{instance_type}' at 'instanceType' is not an ml.* type")


class _ScaledSleep:
    """Stands in for the ``time`` module of moto's retrier: ``sleep`` scaled, the rest unchanged."""

    def __init__(self, scale: float):
        self.scale = scale

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds * self.scale)

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)


class _Injected(Exception):
    def __init__(self, error_type: str, message: str):
        super().__init__(message)
        self.error_type = error_type


def _request_of(kwargs: dict[str, Any]) -> dict[str, Any]:
    """moto's snake_case create_training_job arguments back to the API's field names."""
    return {"".join(p.capitalize() for p in k.split("_")): v for k, v in kwargs.items() if v is not None}


@contextlib.contextmanager
def engine_for(template: dict[str, Any], **kwargs: Any) -> Iterator[LocalEngine]:
    """``with engine_for(template, ...) as engine`` (same as ``LocalEngine``)."""
    with LocalEngine(template, **kwargs) as engine:
        yield engine
