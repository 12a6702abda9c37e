"""What happens outside the control plane in local mode: the training job runs on this machine under the
training-container contract (`hfpipe.local.training.container`), InvokeEndpoint is answered through the model's own
`code/inference.py` (`hfpipe.local.serving.endpoint`); the engine calls these as its plug-ins. An endpoint config's
model may be a registered version's (`Containers=[{"ModelPackageName": ...}]`, hfpipe.local.engine.standin): its
container and recipe decide what is served, not this run's recipe. A call to an inference component is answered
by the vLLM stand-in serving its base and adapter (`invoke_component`, hfpipe.local.serving.adapter_serving), closed with
the fleets."""

from __future__ import annotations

import contextlib
import json
import shutil
import threading
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any, cast

from hfpipe import contract
from hfpipe.local.checkout import checkout_root
from hfpipe.local.outputs import TRAINING_LOG
from hfpipe.local.serving.adapter_serving import AdapterServing


def split_s3_uri(uri: str) -> tuple[str, str]:
    bucket, _, key = uri.removeprefix("s3://").partition("/")
    return bucket, key


def upload_dir(s3: Any, folder: Path, bucket: str, prefix: str) -> None:
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        s3.upload_file(str(path), bucket, f"{prefix.rstrip('/')}/{path.relative_to(folder).as_posix()}")


def download_prefix(s3: Any, uri: str, dest: Path) -> Path:
    bucket, prefix = split_s3_uri(uri)
    dest.mkdir(parents=True, exist_ok=True)
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for obj in page.get("Contents", []):
            rel = obj["Key"][len(prefix) :].lstrip("/") or Path(obj["Key"]).name
            target = dest / rel
            if ".." in Path(rel).parts:  # an S3 key is any string; a file must stay inside dest
                raise ValueError(f"S3 key {obj['Key']!r} would leave the channel folder {dest}")
            target.parent.mkdir(parents=True, exist_ok=True)
            s3.download_file(bucket, obj["Key"], str(target))
    return dest


class LocalRuntime:
    """What happens outside the control plane: training on this machine, serving through the handler."""

    def __init__(self, s3: Any, sagemaker: Any, workdir: Path, substitutions: Any = None) -> None:
        # hfpipe.local.training.substitute.Substitutions: how a request is run here (distribution launch); None runs
        # requests as they are.
        self.substitutions = substitutions
        self.s3 = s3
        self.sagemaker = sagemaker
        self.workdir = workdir
        #: The fleets up, by (endpoint name, endpoint config name).
        self.endpoints: dict[tuple[str, str], Any] = {}
        self.jobs: dict[str, Any] = {}
        self.lock = threading.Lock()
        #: The stand-ins serving inference components (hfpipe.local.serving.adapter_serving), closed with the fleets.
        self.components = AdapterServing(sagemaker, self._download, workdir / "components")
        #: The engine's ``processing`` plug-in: processing jobs (the evaluation's) run here.
        self.processing = LocalProcessing(s3, workdir / "processing")

    def training(self, request: dict[str, Any], job: Any) -> None:
        """Run a CreateTrainingJob request here; fill moto's job like SageMaker would."""
        from hfpipe.local.training.container import run_training_job_request

        name = request["TrainingJobName"]
        job_dir = self.workdir / "jobs" / name
        _downloading(job)
        channels = {
            c["ChannelName"]: download_prefix(
                self.s3, c["DataSource"]["S3DataSource"]["S3Uri"], job_dir / "channels" / c["ChannelName"]
            )
            for c in request.get("InputDataConfig") or []
        }
        _training(job)
        log_path = self.training_log(name)
        processes = None
        substitutions = self.substitutions_for(request)
        if substitutions is not None:
            processes = substitutions.processes_per_host(request)
            request = substitutions.apply_to_request(request)
        with log_path.open("w") as file, CloudWatchLog(self.sagemaker, name, job.training_start_time) as log:
            log.also_to(file)
            result = run_training_job_request(
                request,
                job_dir / "run",
                channel_paths=channels,
                source_dir=self.source_dir(request, job_dir),
                processes_per_host=processes,
                stream=cast("IO[str]", log),
            )
        self.jobs[name] = result
        job.training_end_time = datetime.now(UTC)
        seconds = max(1, round(result.training_seconds))
        job.training_time_in_seconds = job.billable_time_in_seconds = seconds
        # Scraped with the request's definitions, as SageMaker does (the engine hands over the request as sent).
        definitions = request.get("AlgorithmSpecification", {}).get("MetricDefinitions", [])
        job.final_metric_data_list = [
            {"MetricName": name_, "Value": value, "Timestamp": job.training_end_time}
            for name_, value in _final_metrics(result.logs(), definitions).items()
        ]
        if result.status == "Completed" and result.model_artifacts:
            bucket, key = split_s3_uri(job.model_artifacts["S3ModelArtifacts"])
            self.s3.upload_file(str(result.model_artifacts), bucket, key)
        job.training_job_status = job.secondary_status = result.status
        job.secondary_status_transitions[-1]["EndTime"] = job.training_end_time
        if result.failure_reason:
            job.failure_reason = result.failure_reason

    def source_dir(self, request: dict[str, Any], job_dir: Path) -> Path:
        """The job's `sagemaker_submit_directory`: a recipe's own archive (under the artifacts bucket's sources/,
        downloaded as the toolkit would), else the project's training_code/ of this checkout."""
        from hfpipe import contract

        uri = json.loads(request.get("HyperParameters", {}).get("sagemaker_submit_directory", '""'))
        bucket, key = split_s3_uri(uri)
        if not key.startswith(contract.ARTIFACTS_SOURCES_PREFIX):
            return checkout_root() / "training_code"
        job_dir.mkdir(parents=True, exist_ok=True)
        target = job_dir / "sourcedir.tar.gz"
        self.s3.download_file(bucket, key, str(target))
        return target

    def endpoint(self, endpoint_name: str, body: Any) -> Any:
        """Answer InvokeEndpoint through the endpoint's current model's code/inference.py."""
        return self.invoke_fleet(endpoint_name, None, body)

    # The engine's ``fleets`` plug-in (hfpipe.local.engine.traffic): during an update the old and the new config's
    # fleets of one endpoint serve side by side; the one that loses is stopped.
    def start_fleet(self, endpoint_name: str, config_name: str) -> None:
        """Bring up the fleet of one endpoint config: its model, served by its serving kind's local class."""
        key = (endpoint_name, config_name)
        with self.lock:
            if key not in self.endpoints:
                self.endpoints[key] = self._load(endpoint_name, config_name)

    def invoke_fleet(self, endpoint_name: str, config_name: str | None, body: Any) -> Any:
        """Answer one request on a config's fleet (None: the endpoint's current config), started if needed."""
        if config_name is None:
            config_name = self.sagemaker.describe_endpoint(EndpointName=endpoint_name)["EndpointConfigName"]
        fleet = self.endpoints.get((endpoint_name, config_name))
        if fleet is None:
            self.start_fleet(endpoint_name, config_name)
            fleet = self.endpoints[(endpoint_name, config_name)]
        return fleet.predict(body)

    def stop_fleet(self, endpoint_name: str, config_name: str) -> None:
        """Stop a config's fleet (its extracted model stays in the run's folder)."""
        with self.lock:
            fleet = self.endpoints.pop((endpoint_name, config_name), None)
        if fleet is not None:
            fleet.close()

    def _download(self, url: str, dest: Path) -> None:
        self.s3.download_file(*split_s3_uri(url), str(dest))

    def invoke_component(
        self, route: Any, body: bytes | str, content_type: str | None, *, stream: bool = False
    ) -> bytes | Iterator[bytes]:
        """Answer one call to an inference component (``route``: hfpipe.local.engine.inference_components.Route) with
        the vLLM stand-in serving its base and adapter (hfpipe.local.serving.adapter_serving)."""
        return self.components.answer(route, body, content_type, stream=stream)

    def _load(self, endpoint_name: str, config_name: str) -> Any:
        from hfpipe.kinds import serving_kind, serving_kind_of
        from hfpipe.local.engine.standin import served_model
        from hfpipe.local.serving.endpoint import local_endpoint_class

        served = served_model(self.sagemaker, config_name)
        bucket, key = split_s3_uri(served.container["ModelDataUrl"])
        local = self.workdir / "endpoints" / endpoint_name / config_name / "model.tar.gz"
        local.parent.mkdir(parents=True, exist_ok=True)
        self.s3.download_file(bucket, key, str(local))
        # The serving kind of the version (Register records it) or of the recipe the model came from.
        kind = (
            served.package_metadata.get("serving_kind")
            or serving_kind_of(self.serving_recipe(served.model)).name
        )
        endpoint_class = local_endpoint_class(serving_kind(kind).name)
        environment = served.container.get("Environment") or {}
        return endpoint_class(local, workdir=local.parent, environment=environment)

    # Where a runtime serving several recipes (hfpipe.local.world) decides per job and per model.
    def substitutions_for(self, request: dict[str, Any]) -> Any:
        """How the CreateTrainingJob request runs here (hfpipe.local.training.substitute.Substitutions, or None: as is)."""
        return self.substitutions

    def serving_recipe(self, model: dict[str, Any]) -> Mapping[str, Any]:
        """The recipe whose serving kind serves this model (DescribeModel's answer); {}: the default kind. The
        recipe a model names (hfpipe.local.engine.standin.recipe_name_of: its tag, or its version's metadata), this
        run's own (with its overrides) when it is the one named, or when the model names none. Either a validated
        recipe or this run's as sent (raw, not yet validated), so read as a mapping."""
        from hfpipe.core.recipe.recipes import resolve_recipe
        from hfpipe.local.engine.standin import recipe_name_of

        own = self.substitutions.recipe if self.substitutions is not None else {}
        name = recipe_name_of(self.sagemaker, model)
        if name and name != own.get("name"):
            with contextlib.suppress(Exception):  # a recipe file this checkout does not bundle: the run's own
                return resolve_recipe(recipe_name=name)
        return own

    def training_log(self, job_name: str) -> Path:
        """The file a job's output also goes to (next to the run's outputs: `hfpipe logs --local` reads it)."""
        return self.workdir / TRAINING_LOG

    def close(self) -> None:
        for endpoint in self.endpoints.values():
            endpoint.close()
        self.components.close()
        self.processing.close()


class LocalProcessing:
    """Processing jobs run on this machine (hfpipe.local.training.processing), one thread each, as SageMaker
    runs them: CreateProcessingJob returns at once, the job is InProgress while its inputs are copied in and
    its container runs, its EndOfJob outputs are uploaded when it has completed, then it is Completed, Failed
    (FailureReason) or Stopped, and ``ended`` sends its state-change event."""

    def __init__(self, s3: Any, workdir: Path) -> None:
        self.s3 = s3
        self.workdir = workdir
        self.threads: dict[str, threading.Thread] = {}
        #: Set by StopProcessingJob (``stop``): the job's container is ended, the job Stopped.
        self.stops: dict[str, threading.Event] = {}
        #: The jobs that have ended; ``_ending`` orders a job's end and its stop.
        self.ended: set[str] = set()
        self._ending = threading.Lock()
        #: The runs that got as far as their container, by job name.
        self.results: dict[str, Any] = {}

    def check(self, request: dict[str, Any]) -> str | None:
        """The refusal of a request that cannot run here (ValidationException before anything is created)."""
        from hfpipe.local.training.processing import check_request

        return check_request(request)

    def start(self, request: dict[str, Any], processing_job: Any, ended: Any) -> None:
        name = request["ProcessingJobName"]
        thread = threading.Thread(
            target=self._run, args=(request, processing_job, ended), name=f"processing-{name}", daemon=True
        )
        self.threads[name] = thread
        self.stops[name] = threading.Event()
        thread.start()

    def stop(self, name: str, processing_job: Any) -> bool:
        """StopProcessingJob: the job's container is ended (its status Stopping until it has, then Stopped, as
        SageMaker answers: API reference, DescribeProcessingJob's ProcessingJobStatus); False where the job
        is not running here (ended, or never started here)."""
        with self._ending:
            if name not in self.stops or name in self.ended:
                return False
            processing_job.processing_job_status = "Stopping"
            self.stops[name].set()
            return True

    def _run(self, request: dict[str, Any], processing_job: Any, ended: Any) -> None:
        status, failure, message = "Failed", None, None
        try:
            result = self._execute(request, processing_job)
            status, failure, message = result.status, result.failure_reason, result.exit_message
        except Exception as err:  # the inputs could not be fetched, the container not started
            failure = f"ClientError: {err}"[:1024]
        name = request["ProcessingJobName"]
        with self._ending:
            if self.stops[name].is_set() and status == "Failed":
                status, failure = "Stopped", None  # stopped before its container ran (or as it failed)
            processing_job.processing_end_time = processing_job.last_modified_time = datetime.now(UTC)
            processing_job.failure_reason, processing_job.exit_message = failure, message
            processing_job.processing_job_status = status
            self.ended.add(name)
        ended()

    def _execute(self, request: dict[str, Any], processing_job: Any) -> Any:
        from hfpipe.local.training.processing import input_folders, run_processing_request

        name = request["ProcessingJobName"]
        job_dir = self.workdir / name
        for input_name, (uri, folder) in input_folders(request, job_dir).items():
            if input_name == "code" and not split_s3_uri(uri)[1].startswith(
                contract.ARTIFACTS_SOURCES_PREFIX
            ):
                # The stack's source asset (the evaluation's code: hfpipe.core.run.evaluation_job), which local
                # mode does not upload: this checkout's training_code/, as a training job's (``source_dir``).
                shutil.copytree(checkout_root() / "training_code", folder, dirs_exist_ok=True)
                continue
            download_prefix(self.s3, uri, folder)
        processing_job.processing_start_time = datetime.now(UTC)
        result = run_processing_request(request, job_dir, stop=self.stops[name])
        self.results[name] = result
        if result.status == "Completed":
            for output in (request.get("ProcessingOutputConfig") or {}).get("Outputs") or []:
                bucket, prefix = split_s3_uri(output["S3Output"]["S3Uri"])
                upload_dir(self.s3, result.outputs[output["OutputName"]], bucket, prefix)
        return result

    def wait(self, name: str, timeout_s: float = 300.0) -> Any:
        """Wait for the processing_job's thread to end; its run (hfpipe.local.training.processing.LocalProcessingJob), or
        None where it failed before its container ran."""
        self.threads[name].join(timeout_s)
        return self.results.get(name)

    def close(self, timeout_s: float = 60.0) -> None:
        for thread in list(self.threads.values()):
            thread.join(timeout_s)


def _final_metrics(logs: str, definitions: list[dict[str, str]]) -> dict[str, float]:
    """The last value each MetricDefinitions regex finds in the log, as SageMaker scrapes them
    (hfpipe.core.run.logs.metric_values)."""
    from hfpipe.core.run.logs import metric_values

    return dict(metric_values(logs.splitlines(), definitions))


class CloudWatchLog:
    """A text stream that sends each line to the job's CloudWatch log stream, as SageMaker does.

    Log group /aws/sagemaker/TrainingJobs, stream `<job>/algo-1-<epoch>` (`hfpipe.core.run.logs`), in the
    engine's moto account: `hfpipe watch`'s log lines and the failure report's tail read it there. Lines are
    sent at most once a second (or every 100 lines, and at the end), so a chatty script does not make one
    call per line and the live view still sees them within a second.
    """

    BATCH = 100

    def __init__(self, sagemaker: Any, job_name: str, started: datetime) -> None:
        import boto3

        from hfpipe.core.run import logs

        self.client = boto3.client("logs", region_name=sagemaker.meta.region_name)
        self.group = logs.LOG_GROUP
        self.stream = logs.stream_name(job_name, "algo-1", int(started.timestamp()))
        self.pending: list[dict[str, Any]] = []
        self.files: list[Any] = []
        self.lock = threading.Lock()
        self.sent_ms = 0

    def __enter__(self) -> CloudWatchLog:
        with contextlib.suppress(self.client.exceptions.ResourceAlreadyExistsException):
            self.client.create_log_group(logGroupName=self.group)
        self.client.create_log_stream(logGroupName=self.group, logStreamName=self.stream)
        return self

    def also_to(self, file: Any) -> None:
        self.files.append(file)

    def write(self, text: str) -> int:
        for file in self.files:
            file.write(text)
        now = int(datetime.now(UTC).timestamp() * 1000)
        with self.lock:
            self.pending.extend(
                {"timestamp": now, "message": line} for line in text.splitlines() if line.strip()
            )
            if len(self.pending) >= self.BATCH or now - self.sent_ms >= 1000:
                self._flush()
                self.sent_ms = now
        return len(text)

    def flush(self) -> None:
        for file in self.files:
            file.flush()
        with self.lock:
            self._flush()

    def _flush(self) -> None:
        if self.pending:
            batch, self.pending = self.pending, []
            self.client.put_log_events(logGroupName=self.group, logStreamName=self.stream, logEvents=batch)

    def __exit__(self, *exc: Any) -> None:
        self.flush()


def _downloading(job: Any) -> None:
    """What SageMaker answers for a job it has just created (DescribeTrainingJob: InProgress, its input data
    downloading), set as the plug-in's first act: moto makes a job Completed as it creates it, and a view
    polling while the channels download would show it finished before it started."""
    job.training_job_status, job.secondary_status = "InProgress", "Downloading"
    job.secondary_status_transitions = [
        {
            "Status": "Downloading",
            "StartTime": datetime.now(UTC),
            "StatusMessage": "Downloading the input data to this machine",
        }
    ]
    job.training_end_time = None
    job.final_metric_data_list = []


def _training(job: Any) -> None:
    """The job training, from now."""
    job.training_job_status, job.secondary_status = "InProgress", "Training"
    job.training_start_time = datetime.now(UTC)
    job.secondary_status_transitions = [
        {
            "Status": "Training",
            "StartTime": job.training_start_time,
            "StatusMessage": "Training on this machine",
        }
    ]
    job.training_end_time = None
    job.final_metric_data_list = []
