"""Run the synthesized pipeline state machine on moto, with the real Lambda handlers in-process.

The definition comes from a synthesized CloudFormation template (its tokens resolved to moto resources by
hfpipe.local.engine.template), runs on moto's Step Functions interpreter (``execute_state_machine``), and every
Lambda task calls the handler named in the template, in this process, against the same moto account. What
happens outside AWS's control plane is the caller's plug-ins (``LocalEngine``); where local mode cannot play
AWS's part (no training or serving by SageMaker, no IAM, quotas from a table, no EventBridge retries) is
listed in docs/pipeline.md ("Local engine").

Example: ``with LocalEngine(template, training=t, endpoint=e) as engine: engine.run({"recipe_name": "tiny-qa"},
name="demo-1")``. A template may hold several state machines (the pipeline's and the deploy one): all are
created, by their template names (``state_machine_arns``); ``run`` starts the pipeline's unless told another.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import json
import logging
import os
import threading
import time
import uuid
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from unittest import mock

from hfpipe.local.checkout import LAMBDA_PACKAGE, load_lambda_package
from hfpipe.local.engine import moto_patches
from hfpipe.local.engine.bus import LocalBus, execution_status_change
from hfpipe.local.engine.cloudwatch import (
    create_alarms,
    record_component_answer,
    record_component_invocation,
    record_no_capacity,
)
from hfpipe.local.engine.guardrails import Guardrails
from hfpipe.local.engine.hooks import SessionHooks, runtime_client
from hfpipe.local.engine.inference_components import InferenceComponents
from hfpipe.local.engine.quotas import QuotaTable, default_quotas
from hfpipe.local.engine.template import ACCOUNT, Resolver, TemplateError, local_names, split_environments
from hfpipe.local.engine.traffic import Traffic
from hfpipe.local.engine.views import EngineViews

__all__ = ["ACCOUNT", "Execution", "LocalEngine", "TemplateError"]

TrainingPlugin = Callable[[dict[str, Any], Any], None]
EndpointPlugin = Callable[[str, Any], Any]


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


@contextlib.contextmanager
def quieted(*names: str) -> Iterator[None]:
    """Only CRITICAL records from the loggers ``names`` (moto's, which narrate every service integration and
    failure on stderr, where local mode's own view says what matters) while the block runs. Their levels
    belong to the process: they are put back after, so a command run in-process (as the tests run `hfpipe
    local`) leaves them as it found them."""
    loggers = [logging.getLogger(name) for name in names]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)


#: How long leaving a LocalEngine waits, in all, for what it still runs to end (``LocalEngine._end_what_runs``):
#: a stopped execution ends at its next state, a handler that is running when it is stopped ends first.
EXIT_WAIT_S = 60.0
#: The functions' environment variables that are durations the engine plays (the reaper's idle window): on the
#: engine's clock they take ``time_scale`` times their value (not under 0: they are no waits). The endpoints'
#: time to live is not among them: it is the user's (cdk.json, --ttl), and an endpoint of a world up for a
#: quarter of an hour should not expire as after a day.
SCALED_DURATIONS = ("IDLE_MINUTES",)


def scaled_durations(variables: dict[str, str], time_scale: float) -> dict[str, str]:
    """``variables`` with each of SCALED_DURATIONS (a number; empty: none) times ``time_scale``."""
    if time_scale <= 0:
        return variables
    return {
        k: (f"{float(v) * time_scale:g}" if k in SCALED_DURATIONS and v else v) for k, v in variables.items()
    }


class LocalEngine(EngineViews):
    """A context manager: moto started, resources created, state machine ready to ``run``.

    Plug-ins let the caller decide what happens outside AWS's control plane; that is the whole interface:

    ``training(request, job)``
        called after moto has created a training job (``request`` is a copy of the CreateTrainingJob request
        as sent, ``job`` moto's job object, whose AlgorithmSpecification is the request's). Tests set
        ``job.training_job_status = "Failed"``; ``hfpipe local`` runs the real training here
        (hfpipe.local.training.container) and uploads model.tar.gz to ``job.model_artifacts["S3ModelArtifacts"]``.
    ``processing``
        optional: runs processing jobs (``check(request) -> refusal or None`` before CreateProcessingJob,
        ``start(request, job, ended)`` after moto recorded it: returns at once, sets moto's job as
        DescribeProcessingJob should answer, and calls ``ended()`` when the job has ended, which sends the
        job's state-change event; ``stop(name, job) -> bool`` on StopProcessingJob: ends a job it runs, False
        for one that has ended). ``hfpipe local`` sets its LocalRuntime's (hfpipe.local.runtime).
    ``endpoint(endpoint_name, body) -> answer``
        serves an InvokeEndpoint call (``body`` is the decoded JSON request; return the JSON answer).
        ``hfpipe local`` serves through hfpipe.local.serving.endpoint.LocalEndpoint.

    ``fleets``
        optional: serves one fleet of an endpoint while an update shifts traffic (``start_fleet``, ``invoke_fleet``,
        ``stop_fleet``; hfpipe.local.engine.traffic); ``hfpipe local`` sets its LocalRuntime. Without it ``endpoint``
        serves every fleet.

    Optional: ``on_endpoint(endpoint)`` after CreateEndpoint (set ``endpoint.endpoint_status``),
    ``create_training_job_errors`` (error codes CreateTrainingJob answers first, e.g. ThrottlingException),
    ``sagemaker_errors`` ({client method: [error codes]}, e.g. ``create_model``), ``after_handler_errors``
    ({function key: [error types]}: the handler runs, then the invocation fails, as when a Lambda times out
    after doing its work), ``quotas`` (the applied SageMaker quota values, hfpipe.local.engine.quotas), ``imports``
    (values for the template's ``Fn::ImportValue``, e.g. the DataStack's bucket exports) and ``time_scale``
    (Wait states and Retry intervals take that many times their seconds: 0 in the tests, so the real
    stack's 5 s / 60 s retries and poll waits cost nothing).
    """

    #: Runs processing jobs (the class docstring); None: moto's answer stands (Completed at once).
    processing: Any = None

    def __init__(
        self,
        template: dict[str, Any],
        *,
        training: TrainingPlugin | None = None,
        endpoint: EndpointPlugin | None = None,
        on_endpoint: Callable[[Any], None] | None = None,
        fleets: Any = None,
        quotas: Callable[[str], float | None] | None = None,
        create_training_job_errors: list[str] | None = None,
        sagemaker_errors: dict[str, list[str]] | None = None,
        after_handler_errors: dict[str, list[str]] | None = None,
        imports: dict[str, str] | None = None,
        region: str = "us-east-1",
        time_scale: float = 1.0,
        lambda_dir: Path | None = None,
    ) -> None:
        if time_scale < 0:
            raise ValueError(f"time_scale: {time_scale!r}; accepted: a number >= 0 (0 skips waits)")
        self.template = template
        self.resources: dict[str, Any] = template["Resources"]
        self.training = training
        self.endpoint = endpoint or (lambda name, body: [{"echo": body}])
        #: Answers an InvokeEndpoint naming an inference component AWS would route (``component(route,
        #: body)``, route: hfpipe.local.engine.inference_components.Route); the local world serves adapters with it.
        self.component: Callable[[Any, Any], Any] = lambda route, body: [
            {"echo": body, "component": route.component}
        ]
        self.on_endpoint = on_endpoint
        self.fleets = fleets
        #: Service Quotas' answers; set ``quotas.value_for`` to change the applied values.
        self.quotas = QuotaTable(quotas or default_quotas())
        #: SageMaker's inference components (moto lacks them); each routed call's metrics go to CloudWatch.
        self.inference_components = InferenceComponents(
            time_scale=lambda: self.time_scale, count=self.count_invocation, answered=self.count_answer
        )
        self.inference_components.no_capacity = self.no_capacity  # a call to a base at zero: its alarm
        self.create_errors = list(create_training_job_errors or [])
        self.sagemaker_errors = {k: list(v) for k, v in (sagemaker_errors or {}).items()}
        self.after_errors = {k: list(v) for k, v in (after_handler_errors or {}).items()}
        self.time_scale = time_scale
        #: Task timeouts (TimeoutSeconds/TimeoutSecondsPath) take this many times their seconds.
        self.timeout_scale = 1.0
        #: Training-job state-change events are not delivered (a lost event: the Launch task times out).
        self.drop_training_events = False
        #: Execution status-change events reach their rule's target this long after the status changed.
        self.event_delay_s = 0.2
        self.world: Any = None  # the local world's part in moto_patches (hfpipe.local.world.LocalWorld)
        self.region = region
        self.lambda_dir = lambda_dir
        self.resolver = Resolver(self.resources, region, imports or {})
        self.physical = self.resolver.physical
        self.invocations: list[tuple[str, str]] = []
        self._machine_alias: dict[str, str] = {}
        self._delivering: dict[str, threading.Thread | None] = {}  # ARN -> the thread delivering its end
        self._workers: list[Any] = []  # moto's, of every execution started (execution_started)
        self._lock = threading.Lock()
        self._clients_lock = threading.Lock()
        self._cloudwatch: dict[str, Any] = {}
        self._stack = contextlib.ExitStack()

    def resolve(self, value: Any) -> Any:
        """Replace CloudFormation intrinsics with the moto values they stand for."""
        return self.resolver.resolve(value)

    # -- set-up ---------------------------------------------------------------------------------------
    def __enter__(self) -> LocalEngine:
        moto_patches.check_moto_version()  # before anything starts: a clear error, nothing to undo
        try:
            self._start()
        except BaseException:
            self._stack.close()
            raise
        return self

    def _start(self) -> None:
        import boto3
        from moto import mock_aws

        credentials = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}
        region = {"AWS_DEFAULT_REGION": self.region, "AWS_REGION": self.region}
        self._stack.enter_context(mock.patch.dict(os.environ, {**credentials, **region}))
        # Lambda Invoke never reaches moto (hfpipe.local.engine.hooks); should another call, no Docker container.
        config = {"stepfunctions": {"execute_state_machine": True}, "lambda": {"use_docker": False}}
        self._stack.enter_context(mock_aws(config=config))  # type: ignore[arg-type]
        moto_patches.install(self._stack, self)
        if boto3.DEFAULT_SESSION is None:
            boto3.setup_default_session()
        hooks = SessionHooks(self, self._pending_errors, self.region)
        hooks.register(boto3.DEFAULT_SESSION.events)  # type: ignore[union-attr]
        self._stack.callback(hooks.unregister)
        self.traffic = Traffic(self)
        self.guardrails = Guardrails(self, self.traffic, self.region)
        self._stack.callback(self.guardrails.close)  # before moto stops: updates under way end first
        load_lambda_package(self.lambda_dir)
        aws = importlib.import_module(f"{LAMBDA_PACKAGE}.aws")
        clients = {
            "service-quotas": self.quotas.client(self.region),
            "sagemaker-runtime": runtime_client(
                self.region, self.traffic.invoke_raw, self.traffic.invoke_component
            ),
            # One client per service for every handler call (they are thread-safe): making a boto3 client
            # costs more than the call it makes against moto.
            **{service: self.client(service) for service in ("sagemaker", "sns", "s3", "stepfunctions")},
        }
        self._stack.enter_context(mock.patch.dict(aws.OVERRIDES, clients))
        self._create_resources()
        self._start_schedules()

    def __exit__(self, *exc: Any) -> None:
        try:
            self._end_what_runs()
        finally:
            self._stack.close()

    def _end_what_runs(self) -> None:
        """Stop every execution still running (as StopExecution does) and wait, EXIT_WAIT_S in all, until the
        interpreter's threads are gone and the end events have been handled: before moto stops and while the
        handlers' clients are still this engine's.

        moto runs executions in threads of this process, and moto's accounts, its patched interpreter, boto3's
        default session and the handlers' clients (``pipeline_lambdas.aws``) belong to the process, not to
        the engine: an execution left running (a test that leaves its job in progress, a command stopped
        midway) went on after the engine had gone, its next task and its end event answered by whichever
        engine the process started next, with that engine's handlers and moto account, or by no mock at all;
        a handler run then even made boto3's default session anew, under the next engine's hooks. What still
        runs at the deadline (a handler that does not return) is named in a warning."""
        deadline = time.monotonic() + EXIT_WAIT_S
        with self._lock:
            workers = list(self._workers)
        for worker in workers:
            moto_patches.stop_execution(worker, "LocalEngineClosed", "the local engine was closed", deadline)
        interpreter = moto_patches.interpreter_threads()
        self._join(interpreter, deadline)
        with self._lock:  # the stopped executions' end events, being delivered by now
            deliveries = [t for t in self._delivering.values() if t is not None]
        self._join(deliveries, deadline)
        left = sorted(t.name for t in interpreter + deliveries if t.is_alive())
        if left:
            warnings.warn(
                f"the local engine was closed with threads still running after {EXIT_WAIT_S:g} s: "
                + ", ".join(left),
                RuntimeWarning,
                stacklevel=3,
            )

    @staticmethod
    def _join(threads: list[threading.Thread], deadline: float) -> None:
        for thread in threads:
            if thread is not threading.current_thread():
                thread.join(max(0.0, deadline - time.monotonic()))

    def client(self, service: str) -> Any:
        """A boto3 client on the engine's moto account."""
        import boto3

        return boto3.client(service, region_name=self.region)

    def put_parameters(self, extra: dict[str, str] | None = None) -> None:
        """The template's SSM parameters (and ``extra``'s, the DataStack's) in moto, as a deploy leaves them:
        the command reads an environment's settings there (hfpipe.cli.aws.resolve_environment)."""
        ssm = self.client("ssm")
        parameters = {
            str(self.resolve(res["Properties"]["Name"])): str(self.resolve(res["Properties"]["Value"]))
            for res in self.resources.values()
            if res["Type"] == "AWS::SSM::Parameter"
        }
        for name, value in {**(extra or {}), **parameters}.items():
            ssm.put_parameter(Name=name, Value=value, Type="String", Overwrite=True)

    def _cloudwatch_of(self, region: str) -> Any:
        with self._clients_lock:
            if region not in self._cloudwatch:
                import boto3

                self._cloudwatch[region] = boto3.client("cloudwatch", region_name=region)
            return self._cloudwatch[region]

    def count_answer(self, account: str, region: str, component: str, status: int) -> None:
        """The error metrics of inference component ``component`` for one call its container answered with
        HTTP ``status`` (hfpipe.local.engine.cloudwatch.record_component_answer), as ``count_invocation``."""
        record_component_answer(self._cloudwatch_of(region), component, status)

    def no_capacity(self, account: str, region: str, component: str) -> bool:
        """A call found inference component ``component`` with no copy: its ``NoCapacityInvocationFailures``
        in CloudWatch and its scale-out alarm evaluated (hfpipe.local.engine.cloudwatch.record_no_capacity);
        whether the alarm is in ALARM, which runs its step policy."""
        return record_no_capacity(self._cloudwatch_of(region), component) == "ALARM"

    def count_invocation(self, account: str, region: str, component: str) -> None:
        """SageMaker's ``Invocations`` of inference component ``component`` for one call routed to it, in
        CloudWatch of ``region`` (hfpipe.local.engine.cloudwatch.record_component_invocation); every local resource
        is in moto's default ``account``, the one the engine's clients reach. One client per region, made once
        (the default session is not safe to make clients from in several threads at once)."""
        record_component_invocation(self._cloudwatch_of(region), component)

    def _pending_errors(self, method: str) -> list[str] | None:
        return self.create_errors if method == "create_training_job" else self.sagemaker_errors.get(method)

    def _create_resources(self) -> None:
        iam, s3, sns = self.client("iam"), self.client("s3"), self.client("sns")
        existing = {b["Name"] for b in s3.list_buckets().get("Buckets", [])}
        for export, value in self.resolver.imports.items():
            # The DataStack's buckets exist in AWS before this stack; make the imported ones here.
            if export.endswith("BucketName") and value not in existing:
                where = {} if self.region == "us-east-1" else {"LocationConstraint": self.region}
                s3.create_bucket(Bucket=value, **({"CreateBucketConfiguration": where} if where else {}))
        trust = json.dumps({"Version": "2012-10-17", "Statement": []})
        self.physical.update(local_names(self.resources))  # roles, functions and log groups
        for logical, res in self.resources.items():
            if res["Type"] == "AWS::IAM::Role":
                iam.create_role(RoleName=self.physical[logical], AssumeRolePolicyDocument=trust)
            elif res["Type"] == "AWS::S3::Bucket":
                name = res.get("Properties", {}).get("BucketName") or f"local-{logical.lower()}"
                s3.create_bucket(Bucket=name)
                self.physical[logical] = name
            elif res["Type"] == "AWS::SNS::Topic":
                self.physical[logical] = sns.create_topic(Name=logical)["TopicArn"]
        #: The template's CloudWatch alarms, made in moto (after the topics their actions may name).
        self.alarm_names = create_alarms(
            self.client("cloudwatch"), self.resources, self.resolve, self.physical
        )
        self.functions = {
            logical: res["Properties"]
            for logical, res in self.resources.items()
            if res["Type"] == "AWS::Lambda::Function"
            and "pipeline_lambdas." in res["Properties"].get("Handler", "")
        }
        machines = [k for k, r in self.resources.items() if r["Type"] == "AWS::StepFunctions::StateMachine"]
        #: Every state machine of the template by its physical name (the pipeline's, the deploy one, ...).
        self.state_machine_arns: dict[str, str] = {}
        self.definitions: dict[str, dict[str, Any]] = {}
        for logical in machines:
            definition = self.resolve(self.resources[logical]["Properties"]["DefinitionString"])
            # The template's fixed name, so the ARN the functions are given (built from it) is this one.
            name = self.resources[logical]["Properties"].get("StateMachineName") or f"hfpipe-local-{logical}"
            arn = self.client("stepfunctions").create_state_machine(
                name=name, definition=definition, roleArn=f"arn:aws:iam::{ACCOUNT}:role/sfn"
            )["stateMachineArn"]
            self.physical[logical] = arn
            self.state_machine_arns[name] = arn
            self.definitions[name] = json.loads(definition)
        pipeline = [n for n in self.definitions if n.endswith("-pipeline")] or list(self.definitions)
        if len(pipeline) != 1:  # none, or several without a pipeline among them
            raise TemplateError(f"expected one pipeline state machine in the template, found {pipeline}")
        self.state_machine_arn = self.state_machine_arns[pipeline[0]]
        self.definition = self.definitions[pipeline[0]]
        deliver = lambda logical, event: json.loads(self._invoke(logical, json.dumps(event).encode(), {}))  # noqa: E731
        self.bus = LocalBus.of_template(self.resources, self.resolve, deliver, self.region)
        self._set_environments()
        #: Every event put on the local bus; (detail-type, target function, its answer) of each delivery.
        self.events, self.deliveries = self.bus.events, self.bus.deliveries

    def _set_environments(self) -> None:
        """The functions' environment variables (hfpipe.local.engine.template.split_environments): the shared ones
        set once for the engine's life, a function's own ones per invocation (``_own_env``)."""
        shared, own = split_environments(self.functions, self.resolve)
        self._own_env = {k: scaled_durations(v, self.time_scale) for k, v in own.items()}
        self._stack.enter_context(mock.patch.dict(os.environ, scaled_durations(shared, self.time_scale)))

    def _start_schedules(self) -> None:
        """The template's scheduled rules (the reaper's) on the engine's clock: each fires every period x
        ``time_scale`` in a thread of its own, stopped before moto stops; under ``time_scale`` 0 none fires by
        itself (``fire_schedules`` fires them)."""
        self._schedules_stop = threading.Event()
        threads = [
            threading.Thread(target=self._tick, args=(rule, period), name=f"schedule {rule}", daemon=True)
            for rule, period, _ in self.bus.schedules
        ]
        for thread in threads:
            thread.start()

        def stop() -> None:
            self._schedules_stop.set()
            self._join(threads, time.monotonic() + EXIT_WAIT_S)

        self._stack.callback(stop)

    def _tick(self, rule: str, period: float) -> None:
        while not self._schedules_stop.wait(period * self.time_scale if self.time_scale else 1.0):
            if self.time_scale:
                self.bus.fire_schedules(rule)

    def fire_schedules(self) -> None:
        """Every scheduled rule of the template fires now (what its timer does every period x time_scale)."""
        self.bus.fire_schedules()

    # -- the event bus --------------------------------------------------------------------------------
    def put_event(self, source: str, detail_type: str, detail: dict[str, Any], resources: list[str]) -> None:
        """Put one event on the local bus: every rule of the template it matches invokes its targets."""
        self.bus.put(source, detail_type, detail, resources)

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

    def processing_job_ended(self, name: str) -> None:
        """SageMaker's processing-job state-change event, as EventBridge delivers it (detail-type "SageMaker
        Processing Job State Change", the detail DescribeProcessingJob's answer: "Events that Amazon SageMaker
        AI sends to Amazon EventBridge")."""
        job = self.client("sagemaker").describe_processing_job(ProcessingJobName=name)
        job.pop("ResponseMetadata", None)
        self.put_event(
            "aws.sagemaker", "SageMaker Processing Job State Change", job, [job["ProcessingJobArn"]]
        )

    def execution_started(self, worker: Any) -> None:
        """An execution started (moto_patches): leaving the engine stops it unless it has ended by then, and
        releases the program of one that timed out, which moto leaves running its current state. The workers
        are kept for the engine's life (moto's executions hold them anyway)."""
        with self._lock:
            self._workers.append(worker)

    def execution_ending(self, arn: str) -> None:
        """An execution is about to end (moto_patches): ``wait`` also waits for its event's delivery."""
        with self._lock:
            self._delivering[arn] = None  # until execution_ended starts its delivery

    def execution_ended(self, execution: Any) -> None:
        """An execution ended (moto_patches): its status-change event reaches the bus a moment later, as
        EventBridge delivers asynchronously."""

        def deliver() -> None:
            time.sleep(self.event_delay_s)
            try:
                self._put_execution_event(execution)
            finally:
                with self._lock:
                    self._delivering.pop(execution.exec_arn, None)

        thread = threading.Thread(target=deliver, daemon=True)
        with self._lock:  # leaving the engine waits for it (_end_what_runs)
            self._delivering[execution.exec_arn] = thread
        thread.start()

    def _put_execution_event(self, execution: Any) -> None:
        machine = self._machine_alias.get(execution.state_machine_arn, execution.state_machine_arn)
        detail = execution_status_change(execution, machine)
        self.put_event("aws.states", "Step Functions Execution Status Change", detail, [execution.exec_arn])

    # -- Lambda ---------------------------------------------------------------------------------------
    def invoke(self, function_name: str, body: Any, response_headers: dict[str, str]) -> bytes:
        """Lambda's Invoke (hfpipe.local.engine.hooks): the function is named by ARN, name or name:qualifier."""
        return self._invoke(function_name.split(":function:")[-1].split(":")[0], body, response_headers)

    def _invoke(self, logical: str, body: Any, response_headers: dict[str, str]) -> bytes:
        props = self.functions.get(logical)
        if props is None:
            raise TemplateError(f"Lambda {logical}: not an hfpipe pipeline function in the template")
        module_name, func_name = props["Handler"].rsplit(".", 1)
        key = module_name.rsplit(".", 1)[-1]
        self.invocations.append((key, logical))
        own = self._own_env[logical]
        event = json.loads(body) if body else {}
        try:
            with mock.patch.dict(os.environ, own) if own else contextlib.nullcontext():
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


class _Injected(Exception):
    def __init__(self, error_type: str, message: str):
        super().__init__(message)
        self.error_type = error_type
