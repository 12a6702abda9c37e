"""The engine's plug-ins on the AWS APIs, through botocore's event system rather than moto's internals.

Registered on boto3's default session while the engine runs, so they see every call made in this process
through ``boto3.client`` (the Lambda handlers' and the state machine's service integrations); unregistered
when it stops. A ``before-call`` hook that returns an answer is how botocore.stub.Stubber answers calls too:

- ``before-call.lambda.Invoke``: the function runs in this process; moto never sees the call;
- ``before-call.sagemaker.<Operation>``: a queued error is the call's answer (HTTP 400, final: botocore's own
  retries do not see it, so one queued error is one failed call); else UpdateEndpoint, which moto lacks, is
  answered by ``plugins.guardrails``;
- ``after-call.sagemaker.CreateTrainingJob`` / ``CreateEndpoint`` / ``CreateProcessingJob``: the plug-ins get
  moto's object once moto has made it (a processing job that cannot run here is refused before);
  ``StopProcessingJob``: the ``processing`` plug-in ends the job it runs (a job that had ended keeps its status);
- ``before-call.cloudwatch.DescribeAlarms``: CloudWatch evaluates alarms all the time, moto never does, so
  the alarms named are evaluated first (hfpipe.local.engine.cloudwatch.evaluate).

``runtime_client`` is the sagemaker-runtime client the handlers get: InvokeEndpoint is answered by the
``endpoint`` plug-in through ``serve`` (hfpipe.local.engine.traffic); a container's error answer is
InvokeEndpoint's ModelError (HTTP 424), as AWS answers it.
"""

from __future__ import annotations

import copy
import io
import json
import threading
import uuid
from collections.abc import Callable
from typing import Any

from botocore import xform_name

from hfpipe.local.engine import moto_patches
from hfpipe.local.engine.template import ACCOUNT

_REQUEST = "hfpipe.local.engine.hooks.request"
#: A StopProcessingJob's job's status before the call (moto's answer overwrites it).
_STATUS_BEFORE = "hfpipe.local.engine.hooks.status_before"
#: Set while this thread evaluates alarms: the evaluation's own DescribeAlarms is answered as it is.
_EVALUATING = threading.local()
_OK = {"HTTPStatusCode": 200, "HTTPHeaders": {}, "RetryAttempts": 0}


class SessionHooks:
    """The hooks of one engine: ``errors(method)`` is the list of error codes the next calls of a SageMaker
    client method (``create_model``) answer, consumed from the front; ``invoke``, ``training`` and
    ``on_endpoint`` are looked up on ``plugins`` at each call, so the caller may swap them while the engine
    runs."""

    def __init__(self, plugins: Any, errors: Callable[[str], list[str] | None], region: str) -> None:
        self.plugins = plugins
        self.errors = errors
        self.region = region
        self._registered: list[tuple[Any, str, Callable[..., Any]]] = []
        self._cloudwatch: dict[str, Any] = {}

    def register(self, events: Any) -> None:
        """Register on an event emitter (a boto3 session's ``events``) until ``unregister``."""
        for name, handler in (
            ("before-parameter-build.lambda.Invoke", _keep_request),
            ("before-call.lambda.Invoke", self._invoke),
            ("before-parameter-build.sagemaker", _keep_request),
            ("before-call.sagemaker", self._inject),
            ("after-call.sagemaker.CreateTrainingJob", self._training_job_created),
            ("after-call.sagemaker.CreateEndpoint", self._endpoint_created),
            ("after-call.sagemaker.CreateProcessingJob", self._processing_job_created),
            ("after-call.sagemaker.StopProcessingJob", self._processing_job_stopped),
            ("before-parameter-build.cloudwatch.DescribeAlarms", _keep_request),
            ("before-call.cloudwatch.DescribeAlarms", self._evaluate_alarms),
        ):
            events.register(name, handler)
            self._registered.append((events, name, handler))

    def _evaluate_alarms(self, context: dict[str, Any], **_: Any) -> None:
        """Evaluate the alarms a DescribeAlarms names, in the caller's region, before moto answers it."""
        import boto3

        from hfpipe.local.engine import cloudwatch

        if getattr(_EVALUATING, "on", False):
            return
        region = str(context.get("client_region") or self.region)
        _EVALUATING.on = True
        try:
            client = self._cloudwatch.get(region)
            if client is None:
                client = self._cloudwatch[region] = boto3.client("cloudwatch", region_name=region)
            names = (context.get(_REQUEST) or {}).get("AlarmNames") or [
                a["AlarmName"]
                for page in client.get_paginator("describe_alarms").paginate()
                for a in page["MetricAlarms"]
            ]
            for name in names:
                try:
                    cloudwatch.evaluate(client, name)
                except LookupError:
                    continue  # no such alarm: moto's answer leaves it out, as CloudWatch's does
        finally:
            _EVALUATING.on = False

    def unregister(self) -> None:
        for events, name, handler in self._registered:
            events.unregister(name, handler)
        self._registered.clear()

    def _invoke(self, context: dict[str, Any], **_: Any) -> tuple[Any, dict[str, Any]]:
        from botocore.awsrequest import AWSResponse
        from botocore.response import StreamingBody

        request = context[_REQUEST]
        headers: dict[str, str] = {}
        payload = self.plugins.invoke(request["FunctionName"], request.get("Payload"), headers)
        answer: dict[str, Any] = {
            "StatusCode": 200,
            "ExecutedVersion": "$LATEST",
            "ResponseMetadata": {**_OK},
        }
        if "x-amz-function-error" in headers:
            answer["FunctionError"] = headers["x-amz-function-error"]
        answer["Payload"] = StreamingBody(io.BytesIO(payload), len(payload))
        return AWSResponse(None, 200, {}, None), answer

    def _inject(self, model: Any, context: dict[str, Any], **_: Any) -> tuple[Any, dict[str, Any]] | None:
        from botocore.awsrequest import AWSResponse

        from hfpipe.local.engine.deployment import ApiError

        pending = self.errors(xform_name(model.name))
        if model.name == "StopProcessingJob" and self.plugins.processing:
            context[_STATUS_BEFORE] = _processing_status(self.region, context[_REQUEST])
        if not pending and model.name == "CreateProcessingJob" and self.plugins.processing:
            refused = self.plugins.processing.check(context[_REQUEST])
            if refused:
                return _error("ValidationException", refused)
        if not pending:
            if model.name != "UpdateEndpoint":
                return None
            try:
                answer = self.plugins.guardrails.update_endpoint(copy.deepcopy(context[_REQUEST]))
            except ApiError as err:
                return _error(err.code, err.message)
            return AWSResponse(None, 200, {}, None), {**answer, "ResponseMetadata": {**_OK}}
        code = pending.pop(0)
        return _error(code, f"{code} injected by the local engine")

    def _training_job_created(self, http_response: Any, context: dict[str, Any], **_: Any) -> None:
        if http_response.status_code >= 300:
            return
        # moto rewrites parts of the job in place (MetricDefinitions becomes a canned one); the job
        # describes the request as sent, and the plug-in gets that request.
        request = context[_REQUEST]
        job = moto_patches.training_job_record(ACCOUNT, self.region, request["TrainingJobName"])
        if "AlgorithmSpecification" in request:
            job.algorithm_specification = copy.deepcopy(request["AlgorithmSpecification"])
        if self.plugins.training:
            self.plugins.training(copy.deepcopy(request), job)

    def _processing_job_created(self, http_response: Any, context: dict[str, Any], **_: Any) -> None:
        """moto records the job Completed at once; the ``processing`` plug-in runs it (InProgress until it
        ends) and calls back when it has, for the state-change event."""
        if http_response.status_code >= 300 or not self.plugins.processing:
            return
        request = context[_REQUEST]
        name = request["ProcessingJobName"]
        processing_job = moto_patches.processing_job_record(ACCOUNT, self.region, name)
        # What moto's CreateProcessingJob drops, as DescribeProcessingJob answers it (botocore's model); the
        # attributes the run sets later exist from now on, None (left out of the answer) until then, so that
        # setting them never resizes the object's __dict__ while another thread's Describe encodes it.
        processing_job.processing_resources = copy.deepcopy(request["ProcessingResources"])
        processing_job.environment = copy.deepcopy(request.get("Environment"))
        processing_job.processing_start_time = processing_job.processing_end_time = None
        processing_job.failure_reason = processing_job.exit_message = None
        processing_job.processing_job_status = "InProgress"
        self.plugins.processing.start(
            copy.deepcopy(request), processing_job, lambda: self.plugins.processing_job_ended(name)
        )

    def _processing_job_stopped(self, http_response: Any, context: dict[str, Any], **_: Any) -> None:
        """moto marks the job Stopped at once, whatever it was; the ``processing`` plug-in ends a job it runs
        (Stopping until its container has ended, then Stopped: API reference, StopProcessingJob and
        DescribeProcessingJob's ProcessingJobStatus), and a job that had ended keeps its status."""
        if http_response.status_code >= 300 or not self.plugins.processing:
            return
        name = context[_REQUEST]["ProcessingJobName"]
        processing_job = moto_patches.processing_job_record(ACCOUNT, self.region, name)
        before = context.get(_STATUS_BEFORE)
        stop = getattr(self.plugins.processing, "stop", None)  # a plug-in without it: moto's Stopped stands
        if stop is not None and not stop(name, processing_job) and before is not None:
            processing_job.processing_job_status = before

    def _endpoint_created(self, http_response: Any, context: dict[str, Any], **_: Any) -> None:
        if http_response.status_code >= 300:
            return
        endpoint = moto_patches.endpoint_record(ACCOUNT, self.region, context[_REQUEST]["EndpointName"])
        # DescribeEndpoint fields moto lacks (hfpipe.local.engine.guardrails sets them), absent until an update
        # (moto leaves out None); made now, so that setting them later never resizes the object's __dict__
        # while another thread's DescribeEndpoint encodes it.
        endpoint.pending_deployment_summary = endpoint.last_deployment_config = None
        if self.plugins.on_endpoint:
            self.plugins.on_endpoint(endpoint)


def _error(code: str, message: str) -> tuple[Any, dict[str, Any]]:
    """An AWS error answer: HTTP 400 with this code and message."""
    from botocore.awsrequest import AWSResponse

    return AWSResponse(None, 400, {}, None), {
        "Error": {"Code": code, "Message": message},
        # The AWS SDK integration quotes the request ID in the task's cause.
        "ResponseMetadata": {**_OK, "HTTPStatusCode": 400, "RequestId": str(uuid.uuid4())},
    }


def _keep_request(params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
    """The request as the caller sent it (a copy: later hooks must not see moto's changes)."""
    context[_REQUEST] = copy.deepcopy(params)


def runtime_client(
    region: str, serve: Callable[[str, Any], Any], serve_component: Callable[[str, str, Any], Any]
) -> Any:
    """A sagemaker-runtime client whose InvokeEndpoint is answered by ``serve(name, body as sent)``
    (hfpipe.local.engine.traffic.Traffic.invoke_raw), or, naming an inference component, by
    ``serve_component(name, component, body)`` (Traffic.invoke_component); an InvocationError either raises
    is the ModelError AWS answers, an ApiError (AWS's refusal of the call) its ValidationError."""
    import boto3
    from botocore.awsrequest import AWSResponse
    from botocore.response import StreamingBody

    from hfpipe.local.engine.deployment import ApiError
    from hfpipe.local.engine.traffic import InvocationError

    def answer(context: dict[str, Any], **_: Any) -> tuple[Any, dict[str, Any]]:
        request = context[_REQUEST]
        name, component = request["EndpointName"], request.get("InferenceComponentName")
        try:
            served = (
                serve(name, request["Body"])
                if component is None
                else serve_component(name, component, request["Body"])
            )
            data = json.dumps(served).encode()
        except InvocationError as err:
            return _model_error(region, name, err.status, err.message)
        except ApiError as err:
            return AWSResponse(None, 400, {}, None), {
                "Error": {"Code": err.code, "Message": err.message},
                "ResponseMetadata": {**_OK, "HTTPStatusCode": 400},
            }
        return AWSResponse(None, 200, {}, None), {
            "Body": StreamingBody(io.BytesIO(data), len(data)),
            "ContentType": "application/json",
            "ResponseMetadata": {**_OK},
        }

    client = boto3.client("sagemaker-runtime", region_name=region)
    client.meta.events.register("before-parameter-build.sagemaker-runtime.InvokeEndpoint", _keep_request)
    client.meta.events.register("before-call.sagemaker-runtime.InvokeEndpoint", answer)
    return client


def _model_error(region: str, endpoint: str, status: int, message: str) -> tuple[Any, dict[str, Any]]:
    """InvokeEndpoint's ModelError (HTTP 424) for a container that answered ``status``, in AWS's words."""
    from botocore.awsrequest import AWSResponse

    side = "client" if status < 500 else "server"
    group = f"/aws/sagemaker/Endpoints/{endpoint}"
    text = (
        f'Received {side} error ({status}) from primary with message "{message}". See '
        f"https://{region}.console.aws.amazon.com/cloudwatch/home?region={region}#logEventViewer:group={group} "
        f"in account {ACCOUNT} for more information."
    )
    return AWSResponse(None, 424, {}, None), {
        "Error": {"Code": "ModelError", "Message": text},
        "OriginalStatusCode": status,
        "OriginalMessage": message,
        "LogStreamArn": f"arn:aws:logs:{region}:{ACCOUNT}:log-group:{group}",
        "ResponseMetadata": {**_OK, "HTTPStatusCode": 424, "RequestId": str(uuid.uuid4())},
    }


def _processing_status(region: str, request: dict[str, Any]) -> str | None:
    try:
        processing_job = moto_patches.processing_job_record(
            ACCOUNT, region, str(request.get("ProcessingJobName"))
        )
    except KeyError:
        return None
    return str(processing_job.processing_job_status)
