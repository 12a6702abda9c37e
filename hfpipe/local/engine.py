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

Over 400 lines on purpose: the template resolution, the moto hooks and the handler invocation are one
stand-in for AWS's control plane, and each hook is a few lines next to the reason it exists.

Example::

    with LocalEngine(template, training=my_training, endpoint=my_endpoint) as engine:
        result = engine.run({"recipe_name": "tiny-qa", "poll_seconds": 1}, name="demo-1")
        print(result.status, result.output["report"])
"""

from __future__ import annotations

import contextlib
import copy
import importlib
import importlib.util
import io
import json
import math
import os
import re
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from unittest import mock

LAMBDA_PACKAGE = "pipeline_lambdas"
ACCOUNT = "123456789012"

TrainingPlugin = Callable[[dict[str, Any], Any], None]
EndpointPlugin = Callable[[str, Any], Any]


def default_quotas(value: float = 100.0) -> Callable[[str], float]:
    """Every quota has ``value`` (enough for any recipe)."""
    return lambda _name: value


class FakeQuotas:
    """Service Quotas as the Plan function sees it, in AWS's shape: ``ListServiceQuotas`` returns only
    the quotas with an applied value (``value_for(name)`` not None), ``ListAWSDefaultServiceQuotas``
    every quota with its default (``default``), both paginated with ``NextToken`` (``page_size`` per page).
    """

    def __init__(
        self,
        value_for: Callable[[str], float | None],
        names: list[str] | None = None,
        *,
        default: float = 0.0,
        page_size: int = 50,
    ):
        self.value_for = value_for
        self.names = names
        self.default = default
        self.page_size = page_size

    def _names(self) -> list[str]:
        from hfpipe.core.prices import PRICES_USD_PER_HOUR

        return self.names or [
            f"{t} for {use}"
            for t in PRICES_USD_PER_HOUR
            for use in ("training job usage", "spot training job usage", "endpoint usage")
        ]

    def _page(self, quotas: list[dict[str, Any]], token: str | None) -> dict[str, Any]:
        start = int(token or 0)
        page: dict[str, Any] = {"Quotas": quotas[start : start + self.page_size]}
        if start + self.page_size < len(quotas):
            page["NextToken"] = str(start + self.page_size)
        return page

    def _quota(self, index: int, name: str, value: float) -> dict[str, Any]:
        return {"ServiceCode": "sagemaker", "QuotaName": name, "QuotaCode": f"L-{index:08X}", "Value": value}

    def list_service_quotas(self, ServiceCode: str, NextToken: str | None = None, **_: Any) -> dict[str, Any]:
        applied = [(i, n, self.value_for(n)) for i, n in enumerate(self._names())]
        return self._page([self._quota(i, n, v) for i, n, v in applied if v is not None], NextToken)

    def list_aws_default_service_quotas(
        self, ServiceCode: str, NextToken: str | None = None, **_: Any
    ) -> dict[str, Any]:
        quotas = [self._quota(i, n, self.default) for i, n in enumerate(self._names())]
        return self._page(quotas, NextToken)

    def get_paginator(self, operation_name: str) -> Any:
        return _FakePaginator(getattr(self, operation_name))


class _FakePaginator:
    """botocore's paginate() over a NextToken operation."""

    def __init__(self, operation: Callable[..., dict[str, Any]]):
        self.operation = operation

    def paginate(self, **kwargs: Any) -> Iterator[dict[str, Any]]:
        token = None
        while True:
            page = self.operation(**kwargs, **({"NextToken": token} if token else {}))
            yield page
            token = page.get("NextToken")
            if not token:
                return


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
    history: list[dict[str, Any]] = field(default_factory=list)


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
        sagemaker_errors: dict[str, list[str]] | None = None,
        after_handler_errors: dict[str, list[str]] | None = None,
        imports: dict[str, str] | None = None,
        region: str = "us-east-1",
        time_scale: float = 1.0,
        lambda_dir: Path | None = None,
    ) -> None:
        self.template = template
        self.resources: dict[str, Any] = template["Resources"]
        self.training = training
        self.endpoint = endpoint or (lambda name, body: [{"echo": body}])
        self.on_endpoint = on_endpoint
        self.quotas = FakeQuotas(quotas or default_quotas())
        self.create_errors = list(create_training_job_errors or [])
        self.sagemaker_errors = {k: list(v) for k, v in (sagemaker_errors or {}).items()}
        #: Task timeouts (TimeoutSeconds/TimeoutSecondsPath) take this many times their seconds.
        self.timeout_scale = 1.0
        #: Training-job state-change events are not delivered (a lost event: the Launch task times out).
        self.drop_training_events = False
        #: Execution status-change events reach their rule's target this long after the status changed.
        self.event_delay_s = 0.2
        #: Every event put on the local event bus, and the Lambda answers of the rules it matched.
        self.events: list[dict[str, Any]] = []
        self.deliveries: list[tuple[str, str, Any]] = []
        self._machine_alias: dict[str, str] = {}
        self._delivering: set[str] = set()
        self._lock = threading.Lock()
        self.after_errors = {k: list(v) for k, v in (after_handler_errors or {}).items()}
        self.imports = imports or {}
        self.region = region
        if time_scale < 0:
            raise ValueError(f"time_scale: {time_scale!r}; accepted: a number >= 0 (0 skips waits)")
        self.time_scale = time_scale
        self.lambda_dir = lambda_dir
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
        existing = {b["Name"] for b in s3.list_buckets().get("Buckets", [])}
        for export, value in self.imports.items():
            # The DataStack's buckets exist in AWS before this stack; make the imported ones here.
            if export.endswith("BucketName") and value not in existing:
                where = {} if self.region == "us-east-1" else {"LocationConstraint": self.region}
                s3.create_bucket(Bucket=value, **({"CreateBucketConfiguration": where} if where else {}))
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
            # The template's fixed name, so the ARN the functions are given (built from it) is this one.
            name=props.get("StateMachineName") or "hfpipe-local",
            definition=definition,
            roleArn=f"arn:aws:iam::{ACCOUNT}:role/sfn",
        )["stateMachineArn"]
        self.physical[machines[0]] = self.state_machine_arn
        # EventBridge rules of the template: (pattern, target function logical IDs), resolved.
        self.rules = [
            (
                self.resolve(res["Properties"]["EventPattern"]),
                [t["Arn"]["Fn::GetAtt"][0] for t in res["Properties"].get("Targets", [])],
            )
            for res in self.resources.values()
            if res["Type"] == "AWS::Events::Rule"
        ]

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
            engine._inject("create_endpoint")
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
        for api in ("create_model", "create_endpoint_config", "describe_endpoint"):
            self._stack.enter_context(
                mock.patch.object(
                    SageMakerModelBackend, api, self._injecting(api, getattr(SageMakerModelBackend, api))
                )
            )
        self._install_aws_behaviours()
        _load_lambda_package(self.lambda_dir)
        aws = importlib.import_module(f"{LAMBDA_PACKAGE}.aws")
        self._stack.enter_context(
            mock.patch.dict(
                aws.OVERRIDES,
                {
                    "service-quotas": self.quotas,
                    "sagemaker-runtime": _Runtime(self._serve),
                    # One client per service for every handler call (they are thread-safe): making a
                    # boto3 client costs more than the call it makes against moto.
                    **{
                        service: self.client(service)
                        for service in ("sagemaker", "sns", "s3", "stepfunctions")
                    },
                },
            )
        )

    def _inject(self, api: str) -> None:
        pending = self.sagemaker_errors.get(api)
        if pending:
            from moto.core.exceptions import JsonRESTError

            code = pending.pop(0)
            raise JsonRESTError(code, f"{code} injected by the local engine")

    def _injecting(self, api: str, original: Callable[..., Any]) -> Callable[..., Any]:
        engine = self

        def call(backend: Any, *args: Any, **kwargs: Any) -> Any:
            engine._inject(api)
            return original(backend, *args, **kwargs)

        return call

    def _install_aws_behaviours(self) -> None:
        """Where moto's interpreter and AWS differ, play AWS's part (see docs/pipeline.md):

        - the optimized SageMaker integration's errors are named as AWS names them
          (``SageMaker.<Exception>`` for modeled exceptions, else ``SageMaker.AmazonSageMakerException``);
          moto reports every one as ``States.Runtime``;
        - ``SendTaskFailure`` keeps its ``cause`` (moto's response handler drops it);
        - task timeouts scale with ``timeout_scale``;
        - StopExecution also ends a task waiting for its token;
        - an execution that ends puts a "Step Functions Execution Status Change" event on the bus.
        """
        from moto.stepfunctions.parser.asl.component.common.timeouts.timeout import (
            TimeoutSeconds,
            TimeoutSecondsPath,
        )
        from moto.stepfunctions.parser.asl.component.state.exec.state_task.service import (
            state_task_service_unsupported as unsupported,
        )
        from moto.stepfunctions.parser.backend import execution as parser_execution
        from moto.stepfunctions.responses import StepFunctionResponse

        engine = self
        original_from_error = unsupported.StateTaskServiceUnsupported._from_error

        def from_error(task: Any, env: Any, ex: Exception) -> Any:
            from botocore.exceptions import ClientError

            if not isinstance(ex, ClientError) or task._get_boto_service_name() != "sagemaker":
                return original_from_error(task, env, ex)
            from moto.stepfunctions.parser.api import HistoryEventType, TaskFailedEventDetails
            from moto.stepfunctions.parser.asl.component.common.error_name.custom_error_name import (
                CustomErrorName,
            )
            from moto.stepfunctions.parser.asl.component.common.error_name.failure_event import FailureEvent
            from moto.stepfunctions.parser.asl.eval.event.event_detail import EventDetails

            error = sagemaker_optimized_error_name(ex.response["Error"]["Code"])
            cause = f"{ex.response['Error'].get('Message', '')} (Service: AmazonSageMaker; Error Code: {ex.response['Error']['Code']})"
            return FailureEvent(
                env=env,
                error_name=CustomErrorName(error),
                event_type=HistoryEventType.TaskFailed,
                event_details=EventDetails(
                    taskFailedEventDetails=TaskFailedEventDetails(
                        error=error,
                        cause=cause,
                        resource=task._get_sfn_resource(),
                        resourceType=task._get_sfn_resource_type(),
                    )
                ),
            )

        def send_task_failure(response: Any) -> Any:
            from moto.core.responses import EmptyResult

            response.stepfunction_backend.send_task_failure(
                response._get_param("taskToken"),
                error=response._get_param("error"),
                cause=response._get_param("cause"),
            )
            return EmptyResult()

        original_seconds = TimeoutSecondsPath._eval_seconds
        original_literal_seconds = TimeoutSeconds._eval_seconds

        def timeout_seconds(timeout: Any, env: Any) -> int:
            return max(1, math.ceil(original_seconds(timeout, env) * engine.timeout_scale))

        def literal_timeout_seconds(timeout: Any, env: Any) -> int:
            # A literal TimeoutSeconds (the Launch task's re-check interval) scales the same way.
            return max(1, math.ceil(original_literal_seconds(timeout, env) * engine.timeout_scale))

        from moto.stepfunctions.parser.backend.execution_worker import ExecutionWorker

        original_stop = ExecutionWorker.stop

        def stop(worker: Any, stop_date: Any, error: Any, cause: Any) -> None:
            # StopExecution ends an execution at once, a task waiting for its token included; moto's
            # waiting task would otherwise sit out its whole timeout before the execution ends.
            from moto.stepfunctions.parser.asl.eval.callback.callback import CallbackOutcomeSuccess

            original_stop(worker, stop_date, error, cause)
            # Release the waiting task without an error (an error would run its Catch): the program
            # loop then sees the execution stopped and ends it ABORTED before any further state.
            for callback_id, endpoint in list(worker.env.callback_pool_manager._pool.items()):
                if endpoint.get_outcome() is None:
                    endpoint.notify(CallbackOutcomeSuccess(callback_id=callback_id, output="{}"))

        original_terminated = parser_execution.BaseExecutionWorkerCommunication.terminated

        def terminated(comm: Any) -> None:
            arn = comm.execution.exec_arn
            with engine._lock:
                engine._delivering.add(arn)
            original_terminated(comm)

            def deliver() -> None:
                # EventBridge delivers asynchronously, a moment after the status changed.
                time.sleep(engine.event_delay_s)
                try:
                    engine._execution_ended(comm.execution)
                finally:
                    with engine._lock:
                        engine._delivering.discard(arn)

            threading.Thread(target=deliver, daemon=True).start()

        from moto.stepfunctions.parser.asl.component.state.exec.state_task.service import (
            state_task_service_aws_sdk as aws_sdk,
        )

        # The AWS SDK integration names SageMaker's errors "SageMaker.<Exception>" (moto: "sagemaker.").
        self._stack.enter_context(mock.patch.dict(aws_sdk._SERVICE_ERROR_NAMES, {"sagemaker": "SageMaker"}))
        for target, name, value in (
            (unsupported.StateTaskServiceUnsupported, "_from_error", from_error),
            (StepFunctionResponse, "send_task_failure", send_task_failure),
            (TimeoutSecondsPath, "_eval_seconds", timeout_seconds),
            (TimeoutSeconds, "_eval_seconds", literal_timeout_seconds),
            (parser_execution.BaseExecutionWorkerCommunication, "terminated", terminated),
            (ExecutionWorker, "stop", stop),
        ):
            self._stack.enter_context(mock.patch.object(target, name, value))

    # -- the event bus ----------------------------------------------------------------------------------
    def put_event(self, source: str, detail_type: str, detail: dict[str, Any], resources: list[str]) -> None:
        """Put one event on the local bus: every rule of the template it matches invokes its targets."""
        event = {
            "version": "0",
            "id": str(uuid.uuid4()),
            "detail-type": detail_type,
            "source": source,
            "account": ACCOUNT,
            "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "region": self.region,
            "resources": resources,
            "detail": json.loads(json.dumps(detail, default=str)),
        }
        self.events.append(event)
        for pattern, targets in self.rules:
            if event_matches(pattern, event):
                for logical in targets:
                    headers: dict[str, str] = {}
                    answer = json.loads(self._invoke(logical, json.dumps(event).encode(), headers))
                    self.deliveries.append((detail_type, logical, answer))

    def training_job_ended(self, name: str) -> None:
        """SageMaker's "SageMaker Training Job State Change" event for a job that has ended locally."""
        if self.drop_training_events:
            return
        job = self.client("sagemaker").describe_training_job(TrainingJobName=name)
        if job["TrainingJobStatus"] in ("Completed", "Failed", "Stopped"):
            job.pop("ResponseMetadata", None)
            self.put_event(
                "aws.sagemaker", "SageMaker Training Job State Change", job, [job["TrainingJobArn"]]
            )

    def _execution_ended(self, execution: Any) -> None:
        """Step Functions' "Step Functions Execution Status Change" event for an execution that ended."""
        detail = {
            "executionArn": execution.exec_arn,
            "stateMachineArn": self._machine_alias.get(
                execution.state_machine_arn, execution.state_machine_arn
            ),
            "name": execution.name,
            "status": execution.exec_status.value,
            "startDate": int(execution.start_date.timestamp() * 1000),
            "stopDate": int(execution.stop_date.timestamp() * 1000) if execution.stop_date else None,
            "input": json.dumps(execution.input_data) if execution.input_data is not None else None,
            "output": json.dumps(execution.output)
            if getattr(execution, "output", None) is not None
            else None,
            "error": getattr(execution, "error", None),
            "cause": getattr(execution, "cause", None),
        }
        self.put_event("aws.states", "Step Functions Execution Status Change", detail, [execution.exec_arn])

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
            if key == "launch" and isinstance(result, dict) and result.get("created"):
                # The job ran to its end inside CreateTrainingJob (the training plug-in); SageMaker would
                # now send its state-change event.
                self.training_job_ended(result["training_job_name"])
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
    def state_machine_with_timeout(self, seconds: int) -> str:
        """The same definition with the execution timeout (TimeoutSeconds) set to ``seconds``; its events
        name the template's state machine, as the rule expects."""
        definition = {**self.definition, "TimeoutSeconds": seconds}
        arn = self.client("stepfunctions").create_state_machine(
            name=f"hfpipe-local-timeout-{seconds}-{uuid.uuid4().hex[:6]}",
            definition=json.dumps(definition),
            roleArn=f"arn:aws:iam::{ACCOUNT}:role/sfn",
        )["stateMachineArn"]
        self._machine_alias[arn] = self.state_machine_arn
        return str(arn)

    def start(
        self, execution_input: dict[str, Any], *, name: str, state_machine_arn: str | None = None
    ) -> str:
        """Start an execution; returns its ARN."""
        return str(
            self.client("stepfunctions").start_execution(
                stateMachineArn=state_machine_arn or self.state_machine_arn,
                name=name,
                input=json.dumps(execution_input),
            )["executionArn"]
        )

    def wait(self, arn: str, *, timeout_s: float = 120.0) -> Execution:
        """Wait for an execution to end (and its status-change event to be handled); its end state."""
        sfn = self.client("stepfunctions")
        deadline = time.monotonic() + timeout_s
        while True:
            desc = sfn.describe_execution(executionArn=arn)
            with self._lock:
                delivering = arn in self._delivering
            if desc["status"] != "RUNNING" and not delivering:
                break
            if time.monotonic() > deadline:
                raise TimeoutError(f"execution {arn} still RUNNING after {timeout_s} s")
            time.sleep(0.05)
        history = self.history(arn)
        states = [e["stateEnteredEventDetails"]["name"] for e in history if "stateEnteredEventDetails" in e]
        output = json.loads(desc["output"]) if desc.get("output") else None
        return Execution(arn, desc["status"], output, desc.get("error"), desc.get("cause"), states, history)

    def history(self, arn: str) -> list[dict[str, Any]]:
        """Every history event of an execution, all pages."""
        sfn = self.client("stepfunctions")
        events: list[dict[str, Any]] = []
        kwargs: dict[str, Any] = {"executionArn": arn, "maxResults": 1000}
        while True:
            page = sfn.get_execution_history(**kwargs)
            events.extend(page["events"])
            if not page.get("nextToken"):
                return events
            kwargs["nextToken"] = page["nextToken"]

    def run(
        self,
        execution_input: dict[str, Any],
        *,
        name: str,
        timeout_s: float = 120.0,
        state_machine_arn: str | None = None,
    ) -> Execution:
        """Start an execution and wait for it to end; returns its status, output, error and states."""
        arn = self.start(execution_input, name=name, state_machine_arn=state_machine_arn)
        return self.wait(arn, timeout_s=timeout_s)

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


#: SageMaker's modeled exceptions: the optimized integration names these ``SageMaker.<Code>Exception``
#: (the SDK's exception classes); anything else is the SDK's base class, AmazonSageMakerException
#: (https://docs.aws.amazon.com/step-functions/latest/dg/connect-sagemaker.html retries exactly
#: SageMaker.AmazonSageMakerException and SageMaker.ResourceLimitExceededException).
SAGEMAKER_MODELED = ("ResourceLimitExceeded", "ResourceInUse", "ResourceNotFound", "Conflict")


def sagemaker_optimized_error_name(code: str) -> str:
    """The Step Functions error name of a SageMaker error code in the optimized integration."""
    base = code.removesuffix("Exception")
    return f"SageMaker.{base}Exception" if base in SAGEMAKER_MODELED else "SageMaker.AmazonSageMakerException"


def event_matches(pattern: Any, event: Any) -> bool:
    """EventBridge pattern matching, the parts the templates use: lists of values, ``prefix``, nesting
    (https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-event-patterns.html)."""
    if isinstance(pattern, dict):
        return isinstance(event, dict) and all(
            key in event and event_matches(value, event[key]) for key, value in pattern.items()
        )
    for candidate in pattern:
        if isinstance(candidate, dict) and "prefix" in candidate:
            if isinstance(event, str) and event.startswith(candidate["prefix"]):
                return True
        elif candidate == event:
            return True
    return False


def _load_lambda_package(lambda_dir: Path | None) -> None:
    """Make the handlers' package (lambda/pipeline/pipeline_lambdas) importable by its name, as the Lambda
    runtime does from its task root, without touching sys.path: the package is loaded from its folder once
    (a test that already imported it from the same folder keeps its module)."""
    if LAMBDA_PACKAGE in sys.modules:
        return
    from hfpipe.local.checkout import checkout_root

    folder = (lambda_dir or checkout_root() / "lambda" / "pipeline") / LAMBDA_PACKAGE
    spec = importlib.util.spec_from_file_location(
        LAMBDA_PACKAGE, folder / "__init__.py", submodule_search_locations=[str(folder)]
    )
    if spec is None or spec.loader is None:
        raise TemplateError(f"{folder}: not the pipeline Lambdas' package")
    module = importlib.util.module_from_spec(spec)
    sys.modules[LAMBDA_PACKAGE] = module
    spec.loader.exec_module(module)


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
