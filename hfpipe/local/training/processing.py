"""Run a CreateProcessingJob request's container on this machine, under SageMaker Processing's contract.

SageMaker Processing runs the image's entry point, or `AppSpecification.ContainerEntrypoint` with
`ContainerArguments` after it, as `docker run --entry-point ...` would ("How Amazon SageMaker Processing Runs
Your Processing Container Image"), with `Environment` set; each `ProcessingInputs[].S3Input` is copied from
S3 to its `LocalPath` before the container starts (File mode), each `ProcessingOutputConfig.Outputs[].S3Output`
is uploaded from its `LocalPath` when the job ends (EndOfJob); a `LocalPath` must begin with
/opt/ml/processing/ (API reference: ProcessingS3Input.LocalPath, ProcessingS3Output.LocalPath). The exit
status decides the status, Completed or Failed, and the first KB of `/opt/ml/output/message` is
DescribeProcessingJob's `ExitMessage` ("Save and Access Metadata Information About Your Processing Job").

Here the container is this environment: the recipe's training image is the one local training runs in
(hfpipe.local.training.container), its `python3` is this interpreter, and `/opt/ml` is the job's folder
`opt_ml/`: every `/opt/ml/` in the entry point and arguments is rewritten to it, and the variable
HFPIPE_LOCAL_OPT_ML names it for a script that defaults to /opt/ml paths (training_code/evaluate.py).
What this does not emulate: Pipe and FastFile input modes, manifest inputs, dataset definitions, Continuous
uploads, several instances (each is refused before the job starts, naming the field).
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from hfpipe.local.training.container import LocalContainerError, _child_env

CONTAINER_ROOT = "/opt/ml/"
PROCESSING_ROOT = "/opt/ml/processing/"
#: The variable naming the folder that stands for /opt/ml (training_code/evaluate.py reads it).
OPT_ML_ENV = "HFPIPE_LOCAL_OPT_ML"
#: The first KB of /opt/ml/output/message is ExitMessage; FailureReason is at most 1024 characters too
#: (botocore's sagemaker model: ExitMessage and FailureReason, max 1024).
MESSAGE_LIMIT = 1024


@dataclass(frozen=True)
class LocalProcessingJob:
    """What a local processing run left behind, in the terms of DescribeProcessingJob."""

    job_name: str
    status: str  # Completed | Failed | Stopped
    exit_code: int
    failure_reason: str | None
    exit_message: str | None
    outputs: dict[str, Path]  # OutputName -> the folder its LocalPath stood for
    seconds: float
    log_path: Path


def check_request(request: Mapping[str, Any]) -> str | None:
    """What of a CreateProcessingJob request cannot run here or would be refused by SageMaker, in one line
    naming the field; None: it runs."""
    for i, item in enumerate(request.get("ProcessingInputs") or []):
        field = f"ProcessingInputs[{i}]"
        s3 = item.get("S3Input")
        if s3 is None:
            return f"{field}: only S3Input runs here (DatasetDefinition is not emulated)"
        if not str(s3.get("LocalPath", "")).startswith(PROCESSING_ROOT):
            return f"{field}.S3Input.LocalPath: {s3.get('LocalPath')!r}; accepted: a path under {PROCESSING_ROOT}"
        if s3.get("S3DataType", "S3Prefix") != "S3Prefix" or s3.get("S3InputMode", "File") != "File":
            return f"{field}.S3Input: S3DataType S3Prefix with S3InputMode File runs here; got {s3}"
    for i, item in enumerate((request.get("ProcessingOutputConfig") or {}).get("Outputs") or []):
        field = f"ProcessingOutputConfig.Outputs[{i}]"
        s3 = item.get("S3Output")
        if s3 is None:
            return f"{field}: only S3Output runs here (FeatureStoreOutput is not emulated)"
        if not str(s3.get("LocalPath", "")).startswith(PROCESSING_ROOT):
            return f"{field}.S3Output.LocalPath: {s3.get('LocalPath')!r}; accepted: a path under {PROCESSING_ROOT}"
        if s3.get("S3UploadMode") != "EndOfJob":
            return f"{field}.S3Output.S3UploadMode: {s3.get('S3UploadMode')!r}; EndOfJob runs here"
    cluster = (request.get("ProcessingResources") or {}).get("ClusterConfig") or {}
    if int(cluster.get("InstanceCount", 1)) != 1:
        return f"ProcessingResources.ClusterConfig.InstanceCount: {cluster['InstanceCount']}; 1 runs here"
    if not (request.get("AppSpecification") or {}).get("ContainerEntrypoint"):
        return (
            "AppSpecification.ContainerEntrypoint: required here (the image's own entry point is not known)"
        )
    return None


def local_path(container_path: str, base: Path) -> Path:
    """Where a container path under /opt/ml/ is in the job's folder."""
    return base / container_path[len(CONTAINER_ROOT) :]


def command(app: Mapping[str, Any], base: Path) -> list[str]:
    """ContainerEntrypoint + ContainerArguments, /opt/ml/ rewritten to the job's folder and the image's
    python3 (or python) to this interpreter."""
    words = [*app["ContainerEntrypoint"], *(app.get("ContainerArguments") or [])]
    words = [w.replace(CONTAINER_ROOT, str(base) + "/") for w in words]
    if words[0] in ("python3", "python", "/usr/bin/python3", "/usr/local/bin/python3"):
        words[0] = sys.executable
    return words


def run_processing_request(
    request: Mapping[str, Any],
    job_dir: Path,
    *,
    offline: bool = True,
    stream: IO[str] | None = None,
    stop: threading.Event | None = None,
) -> LocalProcessingJob:
    """Run the request's container with its inputs already in place (``prepare_inputs`` ran): `job_dir/opt_ml`
    is /opt/ml. Stops it at StoppingCondition.MaxRuntimeInSeconds, or when ``stop`` is set (StopProcessingJob):
    status Stopped."""
    problem = check_request(request)
    if problem:
        raise LocalContainerError(problem)
    base = (job_dir / "opt_ml").resolve()
    (base / "output").mkdir(parents=True, exist_ok=True)
    outputs = {
        o["OutputName"]: local_path(o["S3Output"]["LocalPath"], base)
        for o in (request.get("ProcessingOutputConfig") or {}).get("Outputs") or []
    }
    for folder in outputs.values():
        folder.mkdir(parents=True, exist_ok=True)
    name = request["ProcessingJobName"]
    env = _child_env(base, job_name=name, processes_per_host=1, offline=offline, extra={})
    env.update({str(k): str(v) for k, v in (request.get("Environment") or {}).items()})
    env[OPT_ML_ENV] = str(base)
    limit = (request.get("StoppingCondition") or {}).get("MaxRuntimeInSeconds")
    log_path = job_dir / "logs.txt"
    started = time.monotonic()
    exit_code, stopped = _run(
        command(request["AppSpecification"], base),
        env,
        base,
        log_path,
        limit,
        stream,
        stop or threading.Event(),
    )
    message_file = base / "output" / "message"
    message = message_file.read_text(errors="replace")[:MESSAGE_LIMIT] if message_file.exists() else None
    status = "Stopped" if stopped else "Completed" if exit_code == 0 else "Failed"
    failure = None
    if status == "Failed":
        cause = (message or "").strip() or _last_line(log_path) or f"exit code {exit_code}"
        failure = f"AlgorithmError: {cause}"[:MESSAGE_LIMIT]
    return LocalProcessingJob(
        name, status, exit_code, failure, message, outputs, time.monotonic() - started, log_path
    )


def _run(
    words: list[str],
    env: dict[str, str],
    cwd: Path,
    log_path: Path,
    limit: float | None,
    stream: IO[str] | None,
    stop: threading.Event,
) -> tuple[int, bool]:
    """Run the container's process to its end, or end it at its time limit or when ``stop`` is set (then:
    stopped); its output to the log (and `stream`)."""
    with log_path.open("w", encoding="utf-8") as log:
        proc = subprocess.Popen(
            words,
            env=env,
            cwd=str(cwd),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
        )

        def pump() -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                log.write(line)
                if stream is not None:
                    stream.write(line)

        reader = threading.Thread(target=pump, daemon=True)
        reader.start()
        deadline = None if limit is None else time.monotonic() + float(limit)
        while proc.poll() is None and not stop.is_set():
            if deadline is not None and time.monotonic() >= deadline:
                break
            stop.wait(0.1)
        stopped = proc.poll() is None
        if stopped:
            proc.kill()
        code = proc.wait()
        reader.join()
        return code, stopped


def _last_line(log_path: Path) -> str | None:
    lines = [line.strip() for line in log_path.read_text(errors="replace").splitlines() if line.strip()]
    return lines[-1] if lines else None


def input_folders(request: Mapping[str, Any], job_dir: Path) -> dict[str, tuple[str, Path]]:
    """InputName -> (its S3Uri, the folder its LocalPath stands for), to be filled before the run."""
    base = (job_dir / "opt_ml").resolve()
    return {
        i["InputName"]: (i["S3Input"]["S3Uri"], local_path(i["S3Input"]["LocalPath"], base))
        for i in request.get("ProcessingInputs") or []
    }
