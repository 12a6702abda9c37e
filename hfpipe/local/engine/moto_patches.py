"""The one adapter to moto's internals: every read and every change local mode makes to them, for the one moto
version they were written against (``MOTO_VERSION``, the pin in requirements-local.txt, requirements-dev.txt and
constraints.txt; a test keeps them equal). ``check_moto_version`` refuses any other version at once: these
targets are private to moto and move between its releases.

It patches what the engine needs that moto's supported surface (``mock_aws`` and its config, the backends'
public methods, boto3 calls) does not offer: each target and its reason in docs/pipeline.md ("Local engine",
moto_patches.py). It reads, for the other modules of local mode (none imports moto beyond ``mock_aws``): the
default account, EventBridge's pattern matching, moto's HTTP server, SageMaker's backend and its training
job and endpoint records.

``TARGETS`` names each moto module and attribute touched, by its place in moto: ``PATCHED`` (in the order
of ``patches``), ``USED`` (read or built with, unpatched) and ``FIELDS`` (attributes of the objects moto
makes, checked on each record handed out); ``ADDED`` names the attributes local mode adds to them.
tests/layout/test_moto_adapter.py keeps the list equal to what this module imports and to the attributes
local mode's modules touch on the records, and checks that the pinned moto has each. Over 400 lines: keeping
every target in one adapter (with the list the version error names) is worth more than a split by size.
"""

from __future__ import annotations

import contextlib
import json
import math
import threading
import time
import uuid
from collections.abc import Callable
from importlib import metadata
from typing import Any, Protocol
from unittest import mock

from hfpipe.local.checkout import LocalModeError

#: The moto release these patches were written against: the pin of requirements-local.txt,
#: requirements-dev.txt and constraints.txt.
MOTO_VERSION = "5.2.5"
#: The interpreter's modules that build a boto3 client per task (moto.stepfunctions.parser.asl.utils.boto_client),
#: for the integrations the project's state machines use: Lambda, the AWS SDK (SageMaker, SSM, ...), SNS, events.
_CLIENT_MODULES = tuple(
    f"moto.stepfunctions.parser.asl.component.state.exec.state_task.{name}"
    for name in (
        "lambda_eval_utils",
        "service.state_task_service_aws_sdk",
        "service.state_task_service_sns",
        "service.state_task_service_events",
        "service.state_task_service_unsupported",
    )
)
#: The patched targets, by their place in moto: module, object, attribute (the version error names them).
PATCHED = (
    "moto.sagemaker.models.FakeEndpointConfig.validate_instance_type",
    "moto.sagemaker.models.SageMakerModelBackend.validate_production_variants",
    "moto.sagemaker.responses.SageMakerResponse.create_model_package",
    "moto.sagemaker.models.SageMakerModelBackend.update_model_package",
    "moto.sagemaker.responses.SageMakerResponse.call_action",
    f"{_CLIENT_MODULES[1]}._SERVICE_ERROR_NAMES",
    f"{_CLIENT_MODULES[4]}.StateTaskServiceUnsupported._from_error",
    f"{_CLIENT_MODULES[1]}.StateTaskServiceAwsSdk._eval_service_task",
    f"{_CLIENT_MODULES[4]}._SUPPORTED_INTEGRATION_PATTERNS",
    f"{_CLIENT_MODULES[4]}.StateTaskServiceUnsupported._build_sync_resolver",
    "moto.stepfunctions.responses.StepFunctionResponse.send_task_failure",
    "moto.stepfunctions.responses.StepFunctionResponse.get_execution_history",
    "moto.stepfunctions.parser.backend.execution_worker.ExecutionWorker.stop",
    "moto.stepfunctions.parser.backend.execution_worker.ExecutionWorker.start",
    "moto.stepfunctions.parser.backend.execution.BaseExecutionWorkerCommunication.terminated",
    "moto.stepfunctions.parser.models.StepFunctionsParserBackend.start_execution",
    *(f"{module}.boto_client_for" for module in _CLIENT_MODULES),
    "moto.stepfunctions.parser.asl.parse.asl_parser.AmazonStateLanguageParser.parse",
    "moto.stepfunctions.parser.asl.component.common.timeouts.timeout.TimeoutSecondsPath._eval_seconds",
    "moto.stepfunctions.parser.asl.component.common.timeouts.timeout.TimeoutSeconds._eval_seconds",
    "moto.stepfunctions.parser.asl.component.state.wait.wait_function.wait_function.WaitFunction._wait_interval",
    "moto.stepfunctions.parser.asl.component.common.retry.retrier_decl.time",
    "moto.sagemakerruntime.responses.SageMakerRuntimeResponse.invoke_endpoint",
    "moto.sagemakerruntime.urls.url_paths",
    "moto.sagemaker.urls.url_paths",
    "moto.sagemakerruntime.responses.SageMakerRuntimeResponse.call_action",
    "moto.s3.models.S3Backend.get_object",
    "moto.servicequotas.responses.ServiceQuotasResponse.call_action",
    "moto.applicationautoscaling.responses.ApplicationAutoScalingResponse.call_action",
)
#: What the adapter reads or builds with, unpatched: the patches' helpers (moto's error and result types, the
#: interpreter's event types, S3's key and bucket index) and the reads local mode's other modules make through
#: the functions below (the default account, EventBridge patterns, the server, SageMaker's backend, the
#: interpreter's threads).
USED = (
    "moto.core.DEFAULT_ACCOUNT_ID",
    "moto.core.responses.EmptyResult",
    "moto.core.responses.ActionResult",
    "moto.stepfunctions.exceptions.InvalidToken",
    "moto.backends.get_backend",
    "moto.events.models.EventPattern.load",
    "moto.events.models.EventPattern.matches_event",
    "moto.server.ThreadedMotoServer",
    "moto.sagemaker.exceptions.ValidationError",
    "moto.s3.models.FakeKey.set_metadata",
    "moto.s3.models.s3_backends.bucket_accounts",
    "moto.sagemakerruntime.urls.response",
    "moto.stepfunctions.parser.api.HistoryEventType.TaskFailed",
    "moto.stepfunctions.parser.api.TaskFailedEventDetails",
    "moto.stepfunctions.parser.asl.component.common.error_name.custom_error_name.CustomErrorName",
    "moto.stepfunctions.parser.asl.component.common.error_name.failure_event.FailureEvent",
    "moto.stepfunctions.parser.asl.component.common.error_name.failure_event.FailureEventException",
    "moto.stepfunctions.parser.asl.component.common.error_name.states_error_name.StatesErrorName",
    "moto.stepfunctions.parser.asl.component.common.error_name.states_error_name_type.StatesErrorNameType.StatesTaskFailed",
    "moto.stepfunctions.parser.asl.component.state.exec.state_task.service.resource.ResourceCondition",
    "moto.stepfunctions.parser.asl.eval.callback.callback.CallbackOutcomeSuccess",
    "moto.stepfunctions.parser.asl.eval.event.event_detail.EventDetails",
    "moto.stepfunctions.parser.asl.parse.preprocessor.Preprocessor",
    "moto.stepfunctions.parser.asl.utils.boto_client.boto_client_for",
    "moto.stepfunctions.parser.utils.TMP_THREADS",
)
#: Attributes of the objects moto makes that local mode reads or sets: the backend's (its records and the
#: describe methods the inference-component emulation reads), and those of
#: the training job and endpoint objects ``training_job_record`` and ``endpoint_record`` hand out (the
#: engine's plug-ins, hfpipe.local.runtime and hfpipe.local.engine.guardrails set them; DescribeTrainingJob and
#: DescribeEndpoint answer them). Each record is checked for each of its class's fields when it is handed
#: out, so a moto that renamed one fails there, by name.
FIELDS = (
    "moto.sagemaker.models.SageMakerModelBackend.training_jobs",
    "moto.sagemaker.models.SageMakerModelBackend.endpoints",
    # What the inference-component emulation reads (``_MotoHosting``).
    "moto.sagemaker.models.SageMakerModelBackend.describe_endpoint",
    "moto.sagemaker.models.SageMakerModelBackend.describe_endpoint_config",
    "moto.sagemaker.models.SageMakerModelBackend.describe_model",
    *(
        f"moto.sagemaker.models.FakeTrainingJob.{name}"
        for name in (
            "training_job_name",
            "algorithm_specification",
            "model_artifacts",
            "training_job_status",
            "secondary_status",
            "secondary_status_transitions",
            "training_start_time",
            "training_end_time",
            "final_metric_data_list",
        )
    ),
    *(
        f"moto.sagemaker.models.FakeEndpoint.{name}"
        for name in (
            "endpoint_name",
            "arn",
            "endpoint_config_name",
            "endpoint_status",
            "failure_reason",
            "last_modified_time",
            "production_variants",
        )
    ),
    # The processing job moto records and calls Completed at once; local mode runs it (hfpipe.local.runtime).
    "moto.sagemaker.models.SageMakerModelBackend.processing_jobs",
    *(
        f"moto.sagemaker.models.FakeProcessingJob.{name}"
        for name in ("processing_job_status", "processing_end_time", "last_modified_time")
    ),
)
#: Attributes local mode adds to moto's objects, which DescribeTrainingJob and DescribeEndpoint then answer
#: as moto answers every attribute its object holds (not moto's: not checked against it).
ADDED = (
    "FakeTrainingJob.training_time_in_seconds",
    "FakeTrainingJob.billable_time_in_seconds",
    "FakeTrainingJob.failure_reason",
    "FakeEndpoint.pending_deployment_summary",
    "FakeEndpoint.last_deployment_config",
    "FakeScalableTarget.hfpipe_tags",
    # The request's fields moto's CreateProcessingJob drops, and what the run sets (DescribeProcessingJob).
    "FakeProcessingJob.processing_resources",
    "FakeProcessingJob.environment",
    "FakeProcessingJob.processing_start_time",
    "FakeProcessingJob.failure_reason",
    "FakeProcessingJob.exit_message",
)
#: Every moto module and attribute local mode touches, reads and writes alike; nothing outside this module
#: imports moto beyond ``mock_aws`` (tests/layout/test_moto_adapter.py keeps both true).
TARGETS = PATCHED + USED + FIELDS

#: SageMaker's modeled exceptions: the optimized integration names these ``SageMaker.<Code>Exception``
#: (the SDK's exception classes); anything else is the SDK's base class, AmazonSageMakerException
#: (https://docs.aws.amazon.com/step-functions/latest/dg/connect-sagemaker.html retries exactly
#: SageMaker.AmazonSageMakerException and SageMaker.ResourceLimitExceededException).
SAGEMAKER_MODELED = ("ResourceLimitExceeded", "ResourceInUse", "ResourceNotFound", "Conflict")


class MotoVersionError(LocalModeError):
    """The installed moto is not the release local mode's patches were written for."""


def installed_moto_version() -> str:
    return metadata.version("moto")


def check_moto_version() -> None:
    """Raise MotoVersionError unless the installed moto is ``MOTO_VERSION``."""
    found = installed_moto_version()
    if found != MOTO_VERSION:
        raise MotoVersionError(
            f"local mode patches moto {MOTO_VERSION} internals ({', '.join(TARGETS)}); found moto {found}: "
            "install the pinned moto from requirements-local.txt (scripts/bootstrap.sh, or pip install "
            "-r requirements-local.txt -c constraints.txt)"
        )


# -- reads: what local mode's other modules take from moto, each through one function -----------------------
def default_account_id() -> str:
    """moto's default account, which every local resource and ARN belongs to."""
    from moto.core import DEFAULT_ACCOUNT_ID

    return str(DEFAULT_ACCOUNT_ID)


def event_pattern_matches(pattern: dict[str, Any], event: dict[str, Any]) -> bool:
    """Whether ``event`` matches the EventBridge ``pattern``, as moto's EventBridge decides it."""
    from moto.events.models import EventPattern

    return bool(EventPattern.load(json.dumps(pattern)).matches_event(event))


def threaded_server(host: str, port: int) -> Any:
    """moto's HTTP server (not started) in front of this process's moto accounts."""
    from moto.server import ThreadedMotoServer

    return ThreadedMotoServer(ip_address=host, port=port, verbose=False)


def interpreter_threads() -> list[threading.Thread]:
    """Every thread moto's Step Functions interpreter has started in this process, ended or not: an
    execution's, its program's, a Parallel branch's or Map iteration's, a wait for a task token's (moto
    keeps them all in one list, ``TMP_THREADS``)."""
    from moto.stepfunctions.parser.utils import TMP_THREADS

    return list(TMP_THREADS)


def stop_execution(worker: Any, error: str, cause: str, deadline: float) -> None:
    """Stop the execution ``worker`` runs (moto's ExecutionWorker, as ``Engine.execution_started`` got it) as
    StopExecution does, where its state machine may be gone; nothing changes for one that has ended, but a task
    its program still waits on is released (moto leaves a timed-out execution's program running its current
    state). Its thread makes its environment: until ``deadline`` (``time.monotonic()``), wait for that."""
    import datetime

    while getattr(worker, "env", None) is None:
        if time.monotonic() > deadline:
            return
        time.sleep(0.01)
    worker.stop(stop_date=datetime.datetime.now(tz=datetime.UTC), error=error, cause=cause)


def sagemaker_backend(account: str, region: str) -> Any:
    """moto's SageMaker backend of ``account`` in ``region`` (its jobs, endpoints...)."""
    from moto.backends import get_backend

    backend = get_backend("sagemaker")[account][region]
    _check_fields(backend, FIELDS)
    return backend


def training_job_record(account: str, region: str, name: str) -> Any:
    """moto's object for the training job ``name`` (KeyError: none), whose attributes DescribeTrainingJob
    answers (the engine's ``training`` plug-in sets them, hfpipe.local.engine.engine)."""
    job = sagemaker_backend(account, region).training_jobs[name]
    _check_fields(job, FIELDS)
    return job


def processing_job_record(account: str, region: str, name: str) -> Any:
    """moto's object for the processing job ``name`` (KeyError: none), whose attributes DescribeProcessingJob
    answers (the engine's ``processing`` plug-in sets them, hfpipe.local.engine.engine)."""
    job = sagemaker_backend(account, region).processing_jobs[name]
    _check_fields(job, FIELDS)
    return job


def endpoint_record(account: str, region: str, name: str) -> Any:
    """moto's object for the endpoint ``name``, whose attributes DescribeEndpoint answers; None: none."""
    endpoint = sagemaker_backend(account, region).endpoints.get(name)
    if endpoint is not None:
        _check_fields(endpoint, FIELDS)
    return endpoint


def _check_fields(obj: Any, fields: tuple[str, ...]) -> None:
    """Raise MotoVersionError unless ``obj`` has each of the FIELDS entries of its class."""
    kind = type(obj).__name__
    for target in fields:
        owner, name = target.rsplit(".", 2)[-2:]
        if owner == kind and not hasattr(obj, name):
            raise MotoVersionError(f"moto's {kind} has no {name} ({target}); moto {installed_moto_version()}")


def sagemaker_optimized_error_name(code: str) -> str:
    """The Step Functions error name of a SageMaker error code in the optimized integration."""
    base = code.removesuffix("Exception")
    return f"SageMaker.{base}Exception" if base in SAGEMAKER_MODELED else "SageMaker.AmazonSageMakerException"


class World(Protocol):
    """What the local world adds (hfpipe.local.world.LocalWorld)."""

    def foreign_object(
        self, bucket: str, key: str, version_id: str | None
    ) -> tuple[bytes, dict[str, str]] | None:
        """The body and user metadata of an object of another world environment's bucket; None: none has it."""


class Engine(Protocol):
    """What the patches call back into (hfpipe.local.engine.engine.LocalEngine)."""

    time_scale: float
    timeout_scale: float
    world: World | None  # None outside the local world
    quotas: Any  # hfpipe.local.engine.quotas.QuotaTable: the account's SageMaker quotas
    inference_components: Any  # hfpipe.local.engine.inference_components.InferenceComponents

    fleets: Any  # hfpipe.local.runtime.LocalRuntime in the local world: serves inference components

    @property
    def traffic(self) -> Any: ...  # hfpipe.local.engine.traffic.Traffic

    def execution_started(self, worker: Any) -> None: ...

    def execution_ending(self, arn: str) -> None: ...

    def execution_ended(self, execution: Any) -> None: ...


#: (label in TARGETS, object, attribute or None for a dict's items, replacement)
Patch = tuple[str, Any, "str | None", Any]


def patches(engine: Engine) -> list[Patch]:
    """Every patch, in the order of PATCHED (a test keeps the two equal), labelled by its PATCHED entry."""
    check_moto_version()
    made = _sagemaker(engine) + _interpreter(engine) + _time(engine) + _world(engine) + _quotas(engine)
    return [(_qualified(label), *rest) for label, *rest in made + _scaling_tags(engine)]


def _qualified(label: str) -> str:
    """The PATCHED entry of a patch's short label (``Class.attribute``, ``module.attribute``)."""
    (found,) = [target for target in PATCHED if target.endswith(f".{label}")]
    return found


def install(stack: contextlib.ExitStack, engine: Engine) -> None:
    """Apply every patch until ``stack`` closes (after moto has started, before the first execution)."""
    for _, target, name, value in patches(engine):
        patch = mock.patch.dict(target, value) if name is None else mock.patch.object(target, name, value)
        stack.enter_context(patch)


def _sagemaker(engine: Engine) -> list[Patch]:
    from moto.sagemaker.exceptions import ValidationError
    from moto.sagemaker.models import FakeEndpointConfig, SageMakerModelBackend
    from moto.sagemaker.responses import SageMakerResponse

    def validate_instance_type(config: Any, instance_type: str) -> None:
        if not str(instance_type).startswith("ml."):
            raise ValidationError(message=f"Value '{instance_type}' at 'instanceType' is not an ml.* type")

    original_variants = SageMakerModelBackend.validate_production_variants

    def validate_production_variants(backend: Any, variants: list[dict[str, Any]]) -> None:
        original_variants(backend, [v for v in variants if "ModelName" in v])

    original_create_model_package = SageMakerResponse.create_model_package

    def create_model_package(response: Any) -> Any:
        if response._get_param("ModelPackageGroupName") and response._get_param("Tags"):
            raise ValidationError(
                message="Tags cannot be supplied for a versioned model package (ModelPackageGroupName): it uses "
                "the tags of its model package group"
            )
        return original_create_model_package(response)

    update_model_package = _update_model_package(SageMakerModelBackend.update_model_package)

    return [
        (
            "FakeEndpointConfig.validate_instance_type",
            FakeEndpointConfig,
            "validate_instance_type",
            validate_instance_type,
        ),
        (
            "SageMakerModelBackend.validate_production_variants",
            SageMakerModelBackend,
            "validate_production_variants",
            validate_production_variants,
        ),
        (
            "SageMakerResponse.create_model_package",
            SageMakerResponse,
            "create_model_package",
            create_model_package,
        ),
        (
            "SageMakerModelBackend.update_model_package",
            SageMakerModelBackend,
            "update_model_package",
            update_model_package,
        ),
        _inference_components(engine, SageMakerResponse),
    ]


def _update_model_package(original: Any) -> Any:
    """UpdateModelPackage changing only what the call gives: moto sets a member the call omits to None (an
    approval wiped the version's metadata); AWS's changes what it is given, every member but the ARN optional
    (botocore's model of SageMaker, UpdateModelPackageInput; docs/pipeline.md, "Local engine")."""

    def update_model_package(backend: Any, **request: Any) -> str:
        arn = request["model_package_arn"]
        package = backend.model_packages.get(backend.model_package_name_mapping.get(arn, arn))
        if package is not None:
            given = request.get("customer_metadata_properties") or {}
            kept = dict(package.customer_metadata_properties or {})
            request["customer_metadata_properties"] = {**kept, **given} or None
            for key, kept_value in (
                ("approval_description", package.approval_description),
                ("model_approval_status", package.model_approval_status),
            ):
                if request.get(key) is None:
                    request[key] = kept_value
        return str(original(backend, **request))

    return update_model_package


def _inference_components(engine: Engine, response_class: Any) -> Patch:
    """SageMaker's handler answers the inference-component operations from the engine's store."""
    from hfpipe.local.engine.deployment import ApiError
    from hfpipe.local.engine.inference_components import OPERATIONS

    original = response_class.call_action

    def call_action(response: Any) -> Any:
        operation = response._get_action()
        if operation == "DescribeEndpoint":  # its instances follow a base's copies scaled to zero and back
            engine.inference_components.components(response.current_account, response.region)
        if operation not in OPERATIONS:
            return original(response)
        account, region = response.current_account, response.region
        try:
            answer = engine.inference_components.answer(
                operation, account, region, json.loads(response.body or "{}"), _MotoHosting(account, region)
            )
        except ApiError as err:
            headers = {"status": 400, "x-amzn-ErrorType": err.code}
            return 400, headers, json.dumps({"__type": err.code, "message": err.message})
        return 200, {}, json.dumps(answer)

    return ("SageMakerResponse.call_action", response_class, "call_action", call_action)


def moto_hosting(account: str, region: str) -> Any:
    """hfpipe.local.engine.inference_components.Hosting over moto's SageMaker backend of one account and region."""
    return _MotoHosting(account, region)


class _MotoHosting:
    """hfpipe.local.engine.inference_components.Hosting over moto's SageMaker backend of one account and region,
    through its describe methods (moto's ValidationError: none)."""

    def __init__(self, account: str, region: str) -> None:
        self.backend = sagemaker_backend(account, region)

    def _described(self, method: str, name: str) -> Any:
        from moto.sagemaker.exceptions import ValidationError

        try:
            return getattr(self.backend, method)(name)
        except ValidationError:
            return None

    def endpoint(self, name: str) -> dict[str, Any] | None:
        found = self._described("describe_endpoint", name)
        return None if found is None else dict(found)

    def endpoint_config(self, name: str) -> dict[str, Any] | None:
        found = self._described("describe_endpoint_config", name)
        return None if found is None else dict(found)

    def has_model(self, name: str) -> bool:
        return self._described("describe_model", name) is not None

    def set_instances(self, endpoint: str, variant: str, count: int) -> None:
        """The variant's CurrentInstanceCount and DesiredInstanceCount, which DescribeEndpoint answers."""
        record = self.backend.endpoints.get(endpoint)
        for found in getattr(record, "production_variants", None) or []:
            if found.get("VariantName") == variant:
                found["CurrentInstanceCount"] = found["DesiredInstanceCount"] = count


def _interpreter(engine: Engine) -> list[Patch]:
    """The Step Functions interpreter's patches: SageMaker's errors and results as AWS's, task callbacks
    and stops, the end of an execution, and one client per service."""
    return [
        *_task_results(),
        *_task_callbacks(),
        *_execution_end(engine),
        *_shared_clients(),
        *_parsed_definitions(),
    ]


def _task_results() -> list[Patch]:
    """A SageMaker task's error named as AWS names it (`_sagemaker_failure`), an SDK task's result as plain JSON."""
    from moto.stepfunctions.parser.asl.component.state.exec.state_task.service import (
        state_task_service_aws_sdk as aws_sdk,
    )
    from moto.stepfunctions.parser.asl.component.state.exec.state_task.service import (
        state_task_service_unsupported as unsupported,
    )

    original_from_error = unsupported.StateTaskServiceUnsupported._from_error
    original_eval = aws_sdk.StateTaskServiceAwsSdk._eval_service_task

    def from_error(task: Any, env: Any, ex: Exception) -> Any:
        from botocore.exceptions import ClientError

        if not isinstance(ex, ClientError) or task._get_boto_service_name() != "sagemaker":
            return original_from_error(task, env, ex)
        return _sagemaker_failure(task, env, ex)

    def eval_aws_sdk(task: Any, env: Any, *args: Any, **kwargs: Any) -> None:
        original_eval(task, env, *args, **kwargs)
        env.stack.append(json.loads(json.dumps(env.stack.pop(), default=str)))

    return [
        (
            "state_task_service_aws_sdk._SERVICE_ERROR_NAMES",
            aws_sdk._SERVICE_ERROR_NAMES,
            None,
            {"sagemaker": "SageMaker"},
        ),
        (
            "StateTaskServiceUnsupported._from_error",
            unsupported.StateTaskServiceUnsupported,
            "_from_error",
            from_error,
        ),
        (
            "StateTaskServiceAwsSdk._eval_service_task",
            aws_sdk.StateTaskServiceAwsSdk,
            "_eval_service_task",
            eval_aws_sdk,
        ),
        *_processing_sync(unsupported),
    ]


#: The `.sync` SageMaker calls AWS waits on that local mode plays: CreateProcessingJob (the evaluation): the
#: call that describes its job, the job's name, its status and the call that stops it.
_SYNC_DESCRIBE = {
    "create_processing_job": (
        "describe_processing_job",
        "ProcessingJobName",
        "ProcessingJobStatus",
        "stop_processing_job",
    )
}
#: The `.sync` jobs each execution (its ARN) waits on now: how to stop each, should the execution be stopped.
_SYNC_IN_FLIGHT: dict[str, dict[str, Callable[[], Any]]] = {}
_SYNC_LOCK = threading.Lock()


def _execution_arn(env: Any) -> str:
    return str(env.states.context_object.context_object_data["Execution"]["Id"])


def stop_sync_jobs(env: Any) -> list[str]:
    """Stop the `.sync` jobs the execution of ``env`` waits on, as Step Functions does when an execution is
    stopped while a "Run a Job (.sync)" task runs: it stops the job it started (the call the state machine's
    role is granted for it, sagemaker:StopProcessingJob: stacks/constructs/state_machine_role.py;
    https://docs.aws.amazon.com/step-functions/latest/dg/connect-to-resource.html, "Run a Job (.sync)").
    Best effort, as there: a job that has ended or cannot be stopped stays as it is. The jobs' names."""
    import botocore.exceptions

    with _SYNC_LOCK:
        jobs = _SYNC_IN_FLIGHT.pop(_execution_arn(env), {})
    for stop in jobs.values():
        with contextlib.suppress(botocore.exceptions.ClientError):
            stop()
    return list(jobs)


def _processing_sync(unsupported: Any) -> list[Patch]:
    """``sagemaker:createProcessingJob.sync``, which moto's interpreter refuses (it runs SageMaker's optimized
    integrations request-response only): the task polls DescribeProcessingJob, as Step Functions does, and ends
    with its answer once the job has ended; a Failed or Stopped job fails the task with States.TaskFailed and the
    description as the cause (https://docs.aws.amazon.com/step-functions/latest/dg/connect-to-resource.html,
    "Run a Job (.sync)")."""
    from moto.stepfunctions.parser.asl.component.state.exec.state_task.service.resource import (
        ResourceCondition,
    )

    original = unsupported.StateTaskServiceUnsupported._build_sync_resolver

    def build_sync_resolver(
        task: Any, env: Any, resource_runtime_part: Any, normalised_parameters: dict, state_credentials: Any
    ) -> Any:
        action = task._get_boto_service_action()
        if task._get_boto_service_name() != "sagemaker" or action not in _SYNC_DESCRIBE:
            return original(task, env, resource_runtime_part, normalised_parameters, state_credentials)
        from moto.stepfunctions.parser.asl.utils.boto_client import boto_client_for

        describe, key, status_key, stop = _SYNC_DESCRIBE[action]
        client = boto_client_for(
            service="sagemaker", region=resource_runtime_part.region, state_credentials=state_credentials
        )
        name, execution = normalised_parameters[key], _execution_arn(env)
        with _SYNC_LOCK:  # stopped with the execution (stop_sync_jobs) until it has ended
            _SYNC_IN_FLIGHT.setdefault(execution, {})[name] = lambda: getattr(client, stop)(**{key: name})
        if not env.is_running():  # stopped since the job was created, before it was in flight
            stop_sync_jobs(env)

        def resolve() -> Any:
            answer = getattr(client, describe)(**{key: name})
            answer.pop("ResponseMetadata", None)
            status = answer.get(status_key)
            if status in ("InProgress", "Stopping"):
                return None
            with _SYNC_LOCK:
                _SYNC_IN_FLIGHT.get(execution, {}).pop(name, None)
            output = json.loads(json.dumps(answer, default=str))
            if status == "Completed":
                return output
            raise _sync_failure(task, env, json.dumps(output, sort_keys=True))

        return resolve

    patterns = {*unsupported._SUPPORTED_INTEGRATION_PATTERNS, ResourceCondition.Sync}
    return [
        (
            "state_task_service_unsupported._SUPPORTED_INTEGRATION_PATTERNS",
            unsupported,
            "_SUPPORTED_INTEGRATION_PATTERNS",
            patterns,
        ),
        (
            "StateTaskServiceUnsupported._build_sync_resolver",
            unsupported.StateTaskServiceUnsupported,
            "_build_sync_resolver",
            build_sync_resolver,
        ),
    ]


def _sync_failure(task: Any, env: Any, cause: str) -> Exception:
    """States.TaskFailed of a `.sync` task whose job ended Failed or Stopped, its description the cause."""
    from moto.stepfunctions.parser.api import HistoryEventType, TaskFailedEventDetails
    from moto.stepfunctions.parser.asl.component.common.error_name.failure_event import (
        FailureEvent,
        FailureEventException,
    )
    from moto.stepfunctions.parser.asl.component.common.error_name.states_error_name import StatesErrorName
    from moto.stepfunctions.parser.asl.component.common.error_name.states_error_name_type import (
        StatesErrorNameType,
    )
    from moto.stepfunctions.parser.asl.eval.event.event_detail import EventDetails

    details = TaskFailedEventDetails(
        error="States.TaskFailed",
        cause=cause,
        resource=task._get_sfn_resource(),
        resourceType=task._get_sfn_resource_type(),
    )
    return FailureEventException(
        FailureEvent(
            env=env,
            error_name=StatesErrorName(typ=StatesErrorNameType.StatesTaskFailed),
            event_type=HistoryEventType.TaskFailed,
            event_details=EventDetails(taskFailedEventDetails=details),
        )
    )


def _task_callbacks() -> list[Patch]:
    """SendTaskFailure with its error and cause, and a stopped execution releasing its waiting task."""
    from moto.core.responses import EmptyResult
    from moto.stepfunctions.parser.asl.eval.callback.callback import CallbackOutcomeSuccess
    from moto.stepfunctions.parser.backend.execution_worker import ExecutionWorker
    from moto.stepfunctions.responses import StepFunctionResponse

    original_stop = ExecutionWorker.stop

    def send_task_failure(response: Any) -> Any:
        response.stepfunction_backend.send_task_failure(
            response._get_param("taskToken"),
            error=response._get_param("error"),
            cause=response._get_param("cause"),
        )
        return EmptyResult()

    def stop(worker: Any, stop_date: Any, error: Any, cause: Any) -> None:
        original_stop(worker, stop_date, error, cause)
        # Release the waiting task without an error (an error would run its Catch): the program loop then
        # sees the execution stopped and ends it ABORTED before any further state.
        for callback_id, endpoint in list(worker.env.callback_pool_manager._pool.items()):
            if endpoint.get_outcome() is None:
                endpoint.notify(CallbackOutcomeSuccess(callback_id=callback_id, output="{}"))
        stop_sync_jobs(worker.env)  # its `.sync` task's job is stopped with it, as on AWS

    return [
        (
            "StepFunctionResponse.send_task_failure",
            StepFunctionResponse,
            "send_task_failure",
            send_task_failure,
        ),
        (
            "StepFunctionResponse.get_execution_history",
            StepFunctionResponse,
            "get_execution_history",
            _paged_history,
        ),
        ("ExecutionWorker.stop", ExecutionWorker, "stop", stop),
    ]


def _paged_history(response: Any) -> Any:
    """GetExecutionHistory paged as AWS pages it, where moto answers every event in one page, oldest first,
    whatever maxResults, reverseOrder and nextToken say (its handler reads executionArn only). botocore's
    stepfunctions service-2.json: maxResults "The default is 100 and the maximum allowed page size is 1000. A
    value of 0 uses the default"; reverseOrder "Lists events in descending order of their timeStamp";
    nextToken "Make the call again using the returned token ... Keep all other arguments unchanged", a bad
    one answered InvalidToken (the operation's errors)."""
    from moto.core.responses import ActionResult
    from moto.stepfunctions.exceptions import InvalidToken

    history = response.stepfunction_backend.get_execution_history(response._get_param("executionArn"))
    events = list(history["events"])
    if response._get_param("reverseOrder"):
        events.reverse()
    size = int(response._get_param("maxResults") or 100)
    token = response._get_param("nextToken")
    if token is not None and not (str(token).isdigit() and 0 < int(token) < len(events)):
        raise InvalidToken(f"nextToken {token!r} is not one this history returned")
    start = int(token or 0)
    page = {**history, "events": events[start : start + size]}
    if start + size < len(events):
        page["nextToken"] = str(start + size)
    return ActionResult(page)


def _execution_end(engine: Engine) -> list[Patch]:
    """The engine told when an execution starts (its worker) and when it ends (before and after its end event
    is delivered); a StartExecution without a name named as AWS names it."""
    from moto.stepfunctions.parser.backend import execution as parser_execution
    from moto.stepfunctions.parser.backend.execution_worker import ExecutionWorker
    from moto.stepfunctions.parser.models import StepFunctionsParserBackend

    original_start = ExecutionWorker.start
    original_terminated = parser_execution.BaseExecutionWorkerCommunication.terminated
    original_start_execution = StepFunctionsParserBackend.start_execution

    def start_execution(backend: Any, state_machine_arn: str, name: Any = None, *args: Any, **kw: Any) -> Any:
        # StartExecution's API reference, `name`: "If you don't provide a name for the execution, Step Functions
        # automatically generates a universally unique identifier (UUID) as the execution name"
        # (https://docs.aws.amazon.com/step-functions/latest/apireference/API_StartExecution.html); moto's
        # parser backend names it None (moto/stepfunctions/parser/models.py, start_execution: exec_name = name).
        return original_start_execution(backend, state_machine_arn, name or str(uuid.uuid4()), *args, **kw)

    def start(worker: Any) -> None:
        engine.execution_started(worker)
        original_start(worker)

    def terminated(comm: Any) -> None:
        # Marked first, so that a caller waiting for the end also waits for the event's delivery.
        engine.execution_ending(comm.execution.exec_arn)
        original_terminated(comm)
        engine.execution_ended(comm.execution)

    return [
        ("ExecutionWorker.start", ExecutionWorker, "start", start),
        (
            "BaseExecutionWorkerCommunication.terminated",
            parser_execution.BaseExecutionWorkerCommunication,
            "terminated",
            terminated,
        ),
        (
            "StepFunctionsParserBackend.start_execution",
            StepFunctionsParserBackend,
            "start_execution",
            start_execution,
        ),
    ]


def _shared_clients() -> list[Patch]:
    """One boto3 client per (region, service, credentials) for every task of the engine, not one per task.

    A client copies its session's event handlers when it is built, so a handler registered on the session
    later (a test's stand-in) would not reach a shared client: each client is kept with the session and the
    registrations it was built under, and built again once either changed. botocore's emitter replaces its
    lookup cache at every register and unregister, which marks them; without that mark, nothing is shared.
    """
    import importlib

    import boto3
    from moto.stepfunctions.parser.asl.utils import boto_client

    original, lock = boto_client.boto_client_for, threading.Lock()
    clients: dict[tuple[str, str, str], tuple[Any, Any, Any]] = {}

    def client_for(region: str, service: str, state_credentials: Any = None) -> Any:
        key = (region, service, json.dumps(state_credentials, sort_keys=True, default=str))
        with lock:
            kept = clients.get(key)
            if kept and kept[0] is boto3.DEFAULT_SESSION and kept[1] is _registrations():
                return kept[2]
            client = original(region, service, state_credentials)  # sets up boto3's default session if none
            if _registrations() is not None:
                clients[key] = (boto3.DEFAULT_SESSION, _registrations(), client)
            return client

    def _registrations() -> Any:
        events = getattr(boto3.DEFAULT_SESSION, "events", None)
        return getattr(getattr(events, "_emitter", None), "_lookup_cache", None)

    return [
        (
            f"{module.rsplit('.', 1)[1]}.boto_client_for",
            importlib.import_module(module),
            "boto_client_for",
            client_for,
        )
        for module in _CLIENT_MODULES
    ]


def _parsed_definitions() -> list[Patch]:
    """A definition's ANTLR parse tree built once for the engine, its evaluation components afresh each time.

    moto parses a definition's text with its ANTLR grammar, then builds the components an execution evaluates
    from the tree (its Preprocessor), at CreateStateMachine (to validate it, the result thrown away) and again
    at every StartExecution (moto.stepfunctions.parser.asl.parse.asl_parser.AmazonStateLanguageParser.parse,
    called by models.StepFunctionsParserBackend._validate_definition and
    backend.execution_worker.ExecutionWorker._get_evaluation_entrypoint). The grammar's pass is ~80% of that
    and a pure function of the text; the tree is only read afterwards (the Preprocessor visits it, nothing
    keeps a node of it). So a text parsed once keeps its tree, and each later call runs moto's own
    Preprocessor on it: the same components as a fresh parse, new objects each call. A text the grammar
    refuses is kept by nothing and refused again, with moto's own error, every time.
    """
    from moto.stepfunctions.parser.asl.parse import asl_parser
    from moto.stepfunctions.parser.asl.parse.preprocessor import Preprocessor

    original, lock = asl_parser.AmazonStateLanguageParser.parse, threading.Lock()
    trees: dict[str, Any] = {}

    def parse(definition: str) -> tuple[Any, Any]:
        with lock:
            tree = trees.get(definition)
        if tree is None:
            program, tree = original(definition)  # a refused text raises here: nothing kept
            with lock:
                trees[definition] = tree
            return program, tree
        return Preprocessor().visit(tree), tree

    return [
        (
            "AmazonStateLanguageParser.parse",
            asl_parser.AmazonStateLanguageParser,
            "parse",
            staticmethod(parse),
        )
    ]


def _sagemaker_failure(task: Any, env: Any, ex: Any) -> Any:
    """The TaskFailed event of an optimized SageMaker task, named as AWS names it."""
    from moto.stepfunctions.parser.api import HistoryEventType, TaskFailedEventDetails
    from moto.stepfunctions.parser.asl.component.common.error_name.custom_error_name import CustomErrorName
    from moto.stepfunctions.parser.asl.component.common.error_name.failure_event import FailureEvent
    from moto.stepfunctions.parser.asl.eval.event.event_detail import EventDetails

    code = ex.response["Error"]["Code"]
    error = sagemaker_optimized_error_name(code)
    cause = f"{ex.response['Error'].get('Message', '')} (Service: AmazonSageMaker; Error Code: {code})"
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


def _time(engine: Engine) -> list[Patch]:
    from moto.stepfunctions.parser.asl.component.common.retry import retrier_decl
    from moto.stepfunctions.parser.asl.component.common.timeouts.timeout import (
        TimeoutSeconds,
        TimeoutSecondsPath,
    )
    from moto.stepfunctions.parser.asl.component.state.wait.wait_function.wait_function import WaitFunction

    original_seconds = TimeoutSecondsPath._eval_seconds
    original_literal_seconds = TimeoutSeconds._eval_seconds
    original_wait = WaitFunction._wait_interval

    def timeout_seconds(timeout: Any, env: Any) -> int:
        return max(1, math.ceil(original_seconds(timeout, env) * engine.timeout_scale))

    def literal_timeout_seconds(timeout: Any, env: Any) -> int:
        # A state's own TimeoutSeconds (the execution's is read elsewhere, unscaled).
        return max(1, math.ceil(original_literal_seconds(timeout, env) * engine.timeout_scale))

    def wait_interval(function: Any, env: Any, wait_seconds: int) -> None:
        scaled = wait_seconds * engine.time_scale
        if scaled == int(scaled):
            original_wait(function, env=env, wait_seconds=int(scaled))
        else:  # moto's loop would wait its whole seconds again and again; StopExecution still ends it
            env.program_state_event.wait(scaled)

    return [
        ("TimeoutSecondsPath._eval_seconds", TimeoutSecondsPath, "_eval_seconds", timeout_seconds),
        ("TimeoutSeconds._eval_seconds", TimeoutSeconds, "_eval_seconds", literal_timeout_seconds),
        ("WaitFunction._wait_interval", WaitFunction, "_wait_interval", wait_interval),
        ("retrier_decl.time", retrier_decl, "time", _ScaledSleep(engine)),
    ]


class _ScaledSleep:
    """Stands in for the ``time`` module of moto's retrier: ``sleep`` scaled, the rest unchanged."""

    def __init__(self, engine: Engine):
        self.engine = engine

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds * self.engine.time_scale)

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)


def _world(engine: Engine) -> list[Patch]:
    from urllib.parse import unquote

    from moto.s3.models import FakeKey, S3Backend, s3_backends
    from moto.sagemakerruntime.responses import SageMakerRuntimeResponse

    original = SageMakerRuntimeResponse.invoke_endpoint

    def invoke_endpoint(response: Any) -> Any:
        name = unquote(response.path.split("/")[2])  # /endpoints/<name>/invocations
        to_component = _component_invocation(engine, response, name)
        if to_component is not None:
            return original(response) if to_component == () else to_component
        if engine.world is None:
            return original(response)
        if endpoint_record(response.current_account, response.region, name) is None:
            message = f"Endpoint {name} of account {response.current_account} not found."
            return (
                400,
                {"status": 400, "x-amzn-ErrorType": "ValidationError"},
                json.dumps({"message": message}),
            )
        try:
            answer = engine.traffic.invoke_raw(name, response.body)
        except engine.traffic.InvocationError as err:  # the toolkit's 400, a dead worker's 500
            return _model_error(err.status, err.message)
        return 200, {"Content-Type": "application/json"}, json.dumps(answer)

    original_get_object = S3Backend.get_object

    def get_object(backend: Any, bucket_name: str, key_name: str, *args: Any, **kw: Any) -> Any:
        if engine.world is None or bucket_name in s3_backends.bucket_accounts:  # every bucket of this moto
            return original_get_object(backend, bucket_name, key_name, *args, **kw)
        found = engine.world.foreign_object(bucket_name, key_name, args[0] if args else kw.get("version_id"))
        if found is None:  # moto's own answer: NoSuchBucket
            return original_get_object(backend, bucket_name, key_name, *args, **kw)
        key = FakeKey(key_name, found[0], backend.account_id, "us-east-1", bucket_name=bucket_name)
        key.set_metadata(found[1])
        return key

    return [
        (
            "SageMakerRuntimeResponse.invoke_endpoint",
            SageMakerRuntimeResponse,
            "invoke_endpoint",
            invoke_endpoint,
        ),
        *_response_stream(engine),
        ("S3Backend.get_object", S3Backend, "get_object", get_object),
    ]


def _model_error(status: int, message: str) -> tuple[int, dict[str, Any], str]:
    """InvokeEndpoint's ModelError (424) for a container that answered ``status`` with ``message``."""
    side = "client" if status < 500 else "server"
    error = {
        "ErrorCode": f"{side.upper()}_ERROR_FROM_MODEL",
        "OriginalStatusCode": status,
        "OriginalMessage": message,
        "Message": f'Received {side} error ({status}) from primary with message "{message}".',
    }
    return 424, {"status": 424, "x-amzn-ErrorType": "ModelError"}, json.dumps(error)


def _response_stream(engine: Engine) -> list[Patch]:
    """InvokeEndpointWithResponseStream: its route, and its answer for an inference component."""
    from urllib.parse import unquote

    from moto.sagemaker import urls as api_urls
    from moto.sagemakerruntime import urls
    from moto.sagemakerruntime.responses import SageMakerRuntimeResponse

    original = SageMakerRuntimeResponse.call_action
    path = "{0}/endpoints/(?P<name>[^/]+)/invocations-response-stream$"

    def call_action(response: Any) -> Any:
        if response._get_action() != "InvokeEndpointWithResponseStream":
            return original(response)
        name = unquote(response.path.split("/")[2])  # /endpoints/<name>/invocations-response-stream
        answered = _component_invocation(engine, response, name, stream=True)
        if answered is None:
            why = f"endpoint {name} was called without an inference component it serves"
        elif answered == ():
            why = "outside the local world moto has no answer to stream"
        else:
            return answered
        message = f"local mode streams the answers of inference components in the local world only: {why}"
        return 400, {"status": 400, "x-amzn-ErrorType": "ValidationError"}, json.dumps({"message": message})

    return [
        ("sagemakerruntime.urls.url_paths", urls.url_paths, None, {path: urls.response.dispatch}),
        # moto's server hands a request signed for "sagemaker" to the runtime's routes only when its path ends
        # in "invocations" (werkzeug_app.infer_service_region_host); the stream's reaches the API's.
        ("sagemaker.urls.url_paths", api_urls.url_paths, None, {path: urls.response.dispatch}),
        ("SageMakerRuntimeResponse.call_action", SageMakerRuntimeResponse, "call_action", call_action),
    ]


def _component_invocation(engine: Engine, response: Any, name: str, *, stream: bool = False) -> Any:
    """None for a call to an endpoint that serves a model (or to no endpoint); for a call to an
    inference-component endpoint or naming a component, AWS's refusal (ValidationError), else () outside the
    local world (moto's canned answer) and, in it, the vLLM stand-in's answer (``stream``: as the stream's
    events)."""
    from hfpipe.local.engine.deployment import ApiError

    account, region = response.current_account, response.region
    component = response.headers.get("X-Amzn-SageMaker-Inference-Component")
    try:
        route = engine.inference_components.route(
            account, region, name, component, _MotoHosting(account, region)
        )
    except ApiError as err:
        return 400, {"status": 400, "x-amzn-ErrorType": err.code}, json.dumps({"message": err.message})
    if route is None:
        return None
    if engine.world is None:
        return ()
    try:
        answer = engine.fleets.invoke_component(
            route, response.body, response.headers.get("Content-Type"), stream=stream
        )
    except ApiError as err:  # a component local mode cannot serve
        return 400, {"status": 400, "x-amzn-ErrorType": err.code}, json.dumps({"message": err.message})
    except engine.traffic.InvocationError as err:  # vLLM's error answer: the component's error metrics
        engine.inference_components.record_answer(account, region, route.component, err.status)
        return _model_error(err.status, err.message)
    engine.inference_components.record_answer(account, region, route.component, 200)
    if not stream:
        return 200, {"Content-Type": "application/json"}, answer
    events = b"".join(event_stream_message({":event-type": "PayloadPart"}, part) for part in answer)
    headers = {
        "Content-Type": "application/vnd.amazon.eventstream",
        "X-Amzn-SageMaker-Content-Type": EVENT_STREAM,
    }
    return 200, headers, events


#: The media type of vLLM's streamed answers, which InvokeEndpointWithResponseStream reports as ContentType.
EVENT_STREAM = "text/event-stream"


def event_stream_message(headers: dict[str, str], payload: bytes) -> bytes:
    """One message of AWS's event-stream encoding (the framing botocore.eventstream decodes): the prelude
    (total and headers length, its CRC32), string headers (``:message-type`` event, ``:content-type``
    octets by default), the payload, the message's CRC32; big-endian throughout."""
    import struct
    import zlib

    fields = {":message-type": "event", ":content-type": "application/octet-stream", **headers}
    encoded = b"".join(
        struct.pack("!B", len(k)) + k.encode() + struct.pack("!BH", 7, len(v.encode())) + v.encode()
        for k, v in fields.items()
    )
    prelude = struct.pack("!II", 16 + len(encoded) + len(payload), len(encoded))
    message = prelude + struct.pack("!I", zlib.crc32(prelude)) + encoded + payload
    return message + struct.pack("!I", zlib.crc32(message))


def _quotas(engine: Engine) -> list[Patch]:
    from moto.servicequotas.responses import ServiceQuotasResponse

    from hfpipe.local.engine.quotas import OPERATIONS

    original = ServiceQuotasResponse.call_action

    def call_action(response: Any) -> Any:
        operation = response._get_action()
        params = json.loads(response.body or "{}") if operation in OPERATIONS else {}
        if params.get("ServiceCode") != "sagemaker":  # moto's own answer (its vpc defaults)
            return original(response)
        return 200, {}, json.dumps(engine.quotas.answer(operation, params))

    return [("ServiceQuotasResponse.call_action", ServiceQuotasResponse, "call_action", call_action)]


def _scaling_tags(engine: Engine) -> list[Patch]:
    """Application Auto Scaling's tags, and its calls on inference components' copies, which moto refuses
    (``sagemaker:inference-component:DesiredCopyCount``), answered by the engine's store
    (hfpipe.local.engine.scale_to_zero)."""
    from moto.applicationautoscaling.responses import ApplicationAutoScalingResponse

    from hfpipe.local.engine import scale_to_zero
    from hfpipe.local.engine.deployment import ApiError

    original = ApplicationAutoScalingResponse.call_action
    operations = ("RegisterScalableTarget", "TagResource", "ListTagsForResource")

    def call_action(response: Any) -> Any:
        operation = response._get_action()
        params = json.loads(response.body or "{}")
        if operation == "DescribeScalingActivities" and not scale_to_zero.is_ours(params):
            # moto 5.2.5 has no DescribeScalingActivities; local mode plays no variant's scaling: none.
            return 200, {}, json.dumps({"ScalingActivities": []})
        if operation in scale_to_zero.OPERATIONS and scale_to_zero.is_ours(params):
            try:
                account, region = response.current_account, response.region
                answer = engine.inference_components.scaling(
                    operation, account, region, params, _MotoHosting(account, region)
                )
            except ApiError as err:
                headers = {"status": 400, "x-amzn-ErrorType": err.code}
                return 400, headers, json.dumps({"__type": err.code, "Message": err.message})
            return 200, {}, json.dumps(answer)
        if operation not in operations:
            return original(response)
        targets = response.applicationautoscaling_backend.targets
        if operation == "RegisterScalableTarget":
            existed = params.get("ResourceId") in targets.get(params.get("ScalableDimension"), {})
            answer = original(response)
            target = targets.get(params.get("ScalableDimension"), {}).get(params.get("ResourceId"))
            if target is not None and not existed:
                target.hfpipe_tags = dict(params.get("Tags") or {})
            return answer
        arn = params.get("ResourceARN")
        found = [t for by_id in targets.values() for t in by_id.values() if t.arn == arn]
        if not found:
            error = {"__type": "ResourceNotFoundException", "Message": f"No scalable target found for {arn}"}
            headers = {"status": 400, "x-amzn-ErrorType": "ResourceNotFoundException"}
            return 400, headers, json.dumps({**error, "ResourceName": arn})
        tags = found[0].__dict__.setdefault("hfpipe_tags", {})
        if operation == "TagResource":
            tags.update(params.get("Tags") or {})
            return 200, {}, "{}"
        return 200, {}, json.dumps({"Tags": dict(tags)})

    return [
        (
            "ApplicationAutoScalingResponse.call_action",
            ApplicationAutoScalingResponse,
            "call_action",
            call_action,
        )
    ]
