"""Run training scripts on this machine under the SageMaker training-container contract.

(Serving a model.tar.gz through its inference handler is `hfpipe.local.serving.endpoint`.)

Training: `run_training` lays out a folder the way SageMaker lays out `/opt/ml` in a training container
(`input/config/hyperparameters.json`, `inputdataconfig.json`, `resourceconfig.json`, `input/data/<channel>`,
`code/`, `model/`, `output/`, `checkpoints/`), points the `sagemaker-training` toolkit at it with
`SAGEMAKER_BASE_DIR` and runs the toolkit's own `train()` in a child process, exactly as the container's
entry point does. The toolkit installs the source dir's `requirements.txt`, exports `SM_*` variables and
runs the script; afterwards the model dir is packed into `model.tar.gz` like SageMaker does.
`run_training_job_request` does the same for a `CreateTrainingJob` request (the CLI's local mode).

Distributed runs: the Hugging Face training image sets `SAGEMAKER_TRAINING_MODULE` to the PyTorch
container's launcher, which picks the toolkit runner from the `sagemaker_*` distribution hyperparameters.
That package is not on PyPI, so `pytorch_container_main` below stands in for it: with
`sagemaker_torch_distributed_enabled` it runs the toolkit's `TorchDistributedRunner` (torchrun; gloo on CPU)
with `processes_per_host` processes on this one host.

Paths: the toolkit reads everything under `SAGEMAKER_BASE_DIR`; a hyperparameter whose value starts with
`/opt/ml/` is rewritten to the same place under the local base dir, and scripts should default their
checkpoint dir to `$SAGEMAKER_BASE_DIR/checkpoints` (which is `/opt/ml/checkpoints` in a real container).

Over 400 lines on purpose: it is one contract (the `/opt/ml` layout, the toolkit's process and its end,
the CreateTrainingJob mapping), read top to bottom; serving is already apart (`hfpipe.local.serving.endpoint`).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import threading
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import hfpipe
from hfpipe.core.run import request
from hfpipe.core.run.request import decode_hyperparameter, encode_hyperparameters, script_mode_hyperparameters

CONTAINER_BASE_DIR = "/opt/ml"
HOST_NAME = "algo-1"
TORCH_DISTRIBUTED_PARAM = request.TORCH_DISTRIBUTED_ENABLED
PROCESSES_PER_HOST_ENV = "HFPIPE_LOCAL_PROCESSES_PER_HOST"
_UNSUPPORTED_DISTRIBUTIONS = {
    request.SMDDP_ENABLED: "SageMaker distributed data parallel needs its GPU library",
    request.MPI_ENABLED: "MPI runs need mpirun and the model-parallel library of the GPU images",
    request.PYTORCH_XLA_ENABLED: "PyTorch XLA needs Trainium or GPU hosts",
}
# The folder that holds the hfpipe package (a child process imports this one), found from the package rather
# than from this module's depth in it.
_REPO_ROOT = Path(hfpipe.__file__).resolve().parent.parent


class LocalContainerError(RuntimeError):
    """A local run could not be prepared (bad input); the message names what was wrong."""


@dataclass(frozen=True)
class LocalTrainingJob:
    """What a local training run left behind, in the terms of DescribeTrainingJob."""

    job_name: str
    job_dir: Path
    base_dir: Path
    exit_code: int
    status: str  # Completed | Failed | Stopped
    failure_reason: str | None
    log_path: Path
    model_artifacts: Path | None
    output_artifacts: Path | None
    training_seconds: float
    hyperparameters: dict[str, str] = field(default_factory=dict)

    @property
    def checkpoint_dir(self) -> Path:
        """The folder the script saw as `/opt/ml/checkpoints` (kept across runs in the same job dir)."""
        return self.base_dir / "checkpoints"

    @property
    def model_dir(self) -> Path:
        """The script's `SM_MODEL_DIR`, before packing."""
        return self.base_dir / "model"

    @property
    def output_data_dir(self) -> Path:
        """The script's `SM_OUTPUT_DATA_DIR`."""
        return self.base_dir / "output" / "data"

    def logs(self) -> str:
        """Everything the toolkit and the script printed."""
        return self.log_path.read_text(errors="replace")


def _remap_container_path(value: Any, base_dir: Path) -> Any:
    if isinstance(value, str) and (value == CONTAINER_BASE_DIR or value.startswith(CONTAINER_BASE_DIR + "/")):
        return str(base_dir) + value[len(CONTAINER_BASE_DIR) :]
    return value


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _copy_channel(name: str, src: Path, dst: Path) -> None:
    from hfpipe.core.validate import RecipeError, channel_name

    try:
        channel_name(name, "InputDataConfig.ChannelName")  # dst is rmtree'd: it must stay in input/data/
    except RecipeError as err:
        raise LocalContainerError(str(err)) from None
    if not src.exists():
        raise LocalContainerError(f"channel {name!r}: local path {str(src)!r} does not exist")
    if dst.exists():
        shutil.rmtree(dst)
    if src.is_dir():
        shutil.copytree(src, dst)
    else:
        dst.mkdir(parents=True)
        shutil.copy2(src, dst / src.name)


def prepare_base_dir(
    job_dir: Path,
    *,
    hyperparameters: Mapping[str, str],
    channels: Mapping[str, Path],
    instance_type: str = "local",
    content_types: Mapping[str, str] | None = None,
) -> Path:
    """Write the `/opt/ml` layout under `job_dir/opt_ml` and return it.

    `hyperparameters` are JSON-encoded strings (see `hfpipe.core.run.request.encode_hyperparameters`). Channels are copied, as
    SageMaker's File input mode copies S3 objects. The `checkpoints` folder is left alone if it exists,
    so a second run in the same job dir resumes like a restarted spot job.
    """
    base = Path(job_dir).resolve() / "opt_ml"
    config = base / "input" / "config"
    config.mkdir(parents=True, exist_ok=True)
    for sub in ("model", "output/data", "checkpoints"):
        (base / sub).mkdir(parents=True, exist_ok=True)
    # A restarted container starts with an empty model dir, but keeps what the checkpoint sync restores.
    shutil.rmtree(base / "model")
    (base / "model").mkdir()
    for marker in ("success", "failure"):
        (base / "output" / marker).unlink(missing_ok=True)

    remapped = {
        k: json.dumps(_remap_container_path(decode_hyperparameter(v), base))
        for k, v in hyperparameters.items()
    }
    (config / "hyperparameters.json").write_text(json.dumps(remapped, indent=2))
    (config / "resourceconfig.json").write_text(
        json.dumps(
            {
                "current_host": HOST_NAME,
                "current_instance_type": instance_type,
                "current_group_name": "homogeneousCluster",
                "hosts": [HOST_NAME],
                "instance_groups": [
                    {
                        "instance_group_name": "homogeneousCluster",
                        "instance_type": instance_type,
                        "hosts": [HOST_NAME],
                    }
                ],
            },
            indent=2,
        )
    )
    content_types = content_types or {}
    input_config = {}
    for name, src in channels.items():
        _copy_channel(name, Path(src), base / "input" / "data" / name)
        input_config[name] = {
            "TrainingInputMode": "File",
            "S3DistributionType": "FullyReplicated",
            "RecordWrapperType": "None",
            **({"ContentType": content_types[name]} if name in content_types else {}),
        }
    (config / "inputdataconfig.json").write_text(json.dumps(input_config, indent=2))
    return base


def _extra(source: Path, env: Mapping[str, str] | None) -> dict[str, str]:
    """The caller's variables, after the source's requirements' own package folder first on the path
    (hfpipe.local.training.requirements: none when they are empty or already satisfied here)."""
    from hfpipe.local.training.requirements import RequirementsError, package_folder

    try:
        folder = package_folder(source)
    except RequirementsError as err:
        raise LocalContainerError(str(err)) from None
    paths = [str(folder), str(_REPO_ROOT), os.environ.get("PYTHONPATH", "")] if folder else []
    return {**({"PYTHONPATH": os.pathsep.join(p for p in paths if p)} if paths else {}), **(env or {})}


def _child_env(
    base: Path, *, job_name: str, processes_per_host: int, offline: bool, extra: Mapping[str, str]
) -> dict[str, str]:
    # Drop the caller's own SM_*/SAGEMAKER_* variables: a run nested in another job must see only its own.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SM_", "SAGEMAKER_"))}
    bin_dir = str(Path(sys.executable).parent)
    env.update(
        {
            "SAGEMAKER_BASE_DIR": str(base),
            # Without it the toolkit waits (up to 15 min) for the DNS name algo-1 to resolve.
            "SM_STUDIO_LOCAL_MODE": "true",
            "SAGEMAKER_TRAINING_MODULE": "hfpipe.local.training.container:pytorch_container_main",
            "TRAINING_JOB_NAME": job_name,
            PROCESSES_PER_HOST_ENV: str(processes_per_host),
            # torchrun reads PET_*; a free port lets parallel test runs coexist.
            "PET_MASTER_PORT": str(_free_port()),
            "PATH": bin_dir + os.pathsep + env.get("PATH", ""),
            "PYTHONPATH": os.pathsep.join(p for p in (str(_REPO_ROOT), env.get("PYTHONPATH", "")) if p),
            "PYTHONUNBUFFERED": "1",
            "AWS_REGION": env.get("AWS_REGION", "us-east-1"),
        }
    )
    if offline:
        # Tests and local mode must not download: requirements are already installed, models are local.
        # No index also means nothing new to resolve, so pip only checks the listed pins (seconds, not 20 s).
        env.update(
            {"PIP_NO_INDEX": "1", "PIP_NO_DEPS": "1", "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
        )
    env.update(extra)
    return env


class LocalTrainingProcess:
    """A training container started on this machine; `wait()` turns it into a `LocalTrainingJob`."""

    def __init__(
        self,
        *,
        job_name: str,
        job_dir: Path,
        base_dir: Path,
        hyperparameters: dict[str, str],
        env: dict[str, str],
        stream: IO[str] | None,
        max_runtime_seconds: float | None,
    ) -> None:
        self.job_name = job_name
        self.job_dir = job_dir
        self.base_dir = base_dir
        self.hyperparameters = hyperparameters
        self.log_path = job_dir / "logs.txt"
        self._max_runtime = max_runtime_seconds
        self._stopped = False
        self._started = time.monotonic()
        self._log = self.log_path.open("a", encoding="utf-8")
        # Every process of the run inherits this mark, also one that leaves the process group (setsid), so
        # the run's end finds and ends it (_end_marked).
        self._mark = f"{uuid.uuid4().hex}"
        self._proc = subprocess.Popen(
            [sys.executable, "-c", "from sagemaker_training.trainer import train; train()"],
            env={**env, RUN_MARK_ENV: self._mark},
            cwd=str(base_dir),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
            # Its own process group: stop() kills the toolkit, torchrun and the script together.
            start_new_session=True,
        )
        self._pump = threading.Thread(target=self._copy_output, args=(stream,), daemon=True)
        self._pump.start()
        RUNNING.add(self)

    def _copy_output(self, stream: IO[str] | None) -> None:
        assert self._proc.stdout is not None
        for line in self._proc.stdout:
            self._log.write(line)
            self._log.flush()
            if stream is not None:
                stream.write(line)

    @property
    def pid(self) -> int:
        """Process id of the toolkit (the leader of the run's process group)."""
        return self._proc.pid

    def poll(self) -> int | None:
        """The exit code, or None while running."""
        return self._proc.poll()

    def stop(self, grace_seconds: float = 30.0) -> None:
        """Stop the container as SageMaker does on StopTrainingJob or a spot interruption.

        SageMaker sends SIGTERM to the container's PID 1 and kills what is left after a grace period (120 s;
        StopTrainingJob in the SageMaker API reference). In the Hugging Face / PyTorch training images PID 1
        is `bash -m start_with_right_hostname.sh train`, a bash without a SIGTERM trap; the kernel does not
        deliver a signal with the default action to a namespace's init process, so it is ignored, and the
        sagemaker-training toolkit (`train`, bash's child) has no handler and forwards nothing to the script
        (its source handles only SIGALRM, for timeouts). So nothing of the job sees the signal: the run goes
        on through the grace period, then everything is killed. That is what happens here: the run is left
        alone for `grace_seconds`, then its whole process group gets SIGKILL. Resume therefore relies on the
        periodic checkpoints the job wrote (synced to S3 from /opt/ml/checkpoints as they are written).
        """
        self._stopped = True
        try:
            self._proc.wait(timeout=grace_seconds)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._proc.pid, signal.SIGKILL)
            end_marked(self._mark)
            # SIGKILL cannot be caught, but its delivery is not instant on a loaded host: reap the toolkit
            # here, so whoever stopped the run sees it ended (poll() not None) when stop() returns.
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._proc.wait(timeout=30)

    def wait(self) -> LocalTrainingJob:
        """Wait for the run to end (stopping it at the max runtime) and pack its artifacts."""
        try:
            self._proc.wait(timeout=self._max_runtime)
        except subprocess.TimeoutExpired:
            self.stop()
        exit_code = self._proc.wait()
        RUNNING.discard(self)
        # The script's children may outlive the toolkit: end the group, and what left it (setsid, a daemon),
        # as a container's end ends every process in it; before reading the output to its end, which one of
        # them holding the pipe would otherwise keep open for its whole life.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self._proc.pid, signal.SIGKILL)
        end_marked(self._mark)
        self._pump.join()
        self._log.close()
        elapsed = time.monotonic() - self._started
        failure_file = self.base_dir / "output" / "failure"
        failure = failure_file.read_text(errors="replace").strip() if failure_file.exists() else None
        if self._stopped:
            status = "Stopped"
        elif exit_code == 0:
            status = "Completed"
        else:
            status = "Failed"
            failure = failure_reason(
                failure, self.log_path.read_text(errors="replace"), exit_code, self.log_path
            )
        model_tar = output_tar = None
        if status == "Completed":
            model_tar = pack_dir(self.base_dir / "model", self.job_dir / "model.tar.gz")
            output_tar = pack_dir(self.base_dir / "output" / "data", self.job_dir / "output.tar.gz")
        return LocalTrainingJob(
            job_name=self.job_name,
            job_dir=self.job_dir,
            base_dir=self.base_dir,
            exit_code=exit_code,
            status=status,
            failure_reason=failure if status == "Failed" else None,
            log_path=self.log_path,
            model_artifacts=model_tar,
            output_artifacts=output_tar,
            training_seconds=elapsed,
            hyperparameters=self.hyperparameters,
        )


#: The variable every process of a local run inherits, valued with the run's own mark.
RUN_MARK_ENV = "HFPIPE_LOCAL_RUN"


def _marked(mark: str) -> list[int]:
    """The processes whose environment carries the run's mark (Linux's /proc; none where there is no /proc)."""
    wanted = f"{RUN_MARK_ENV}={mark}".encode()
    found = []
    for entry in Path("/proc").glob("[0-9]*"):
        with contextlib.suppress(OSError):
            if wanted in (entry / "environ").read_bytes().split(b"\0") and int(entry.name) != os.getpid():
                found.append(int(entry.name))
    return found


def end_marked(mark: str, rounds: int = 5) -> int:
    """SIGKILL every process of the run, also those that left its process group or session; again while
    new ones appear (a process may fork as the others end). How many were ended."""
    ended = 0
    for _ in range(rounds):
        pids = _marked(mark)
        if not pids:
            break
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
                ended += 1
        time.sleep(0.05)
    return ended


#: Training processes started and not yet waited for; `stop_all` ends them (Ctrl-C in `hfpipe local`).
RUNNING: set[LocalTrainingProcess] = set()


def stop_all(grace_seconds: float = 10.0) -> int:
    """Stop every running training process group (SIGTERM, then SIGKILL); returns how many there were."""
    running = list(RUNNING)
    for proc in running:
        proc.stop(grace_seconds)
        RUNNING.discard(proc)
    return len(running)


_TOOLKIT_LINE = re.compile(r"^\d{4}-\d\d-\d\d [\d:,]+ sagemaker-training-toolkit ")
_EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Interrupt|Exit)\b(:.*)?$")


def script_error(log: str) -> str | None:
    """The script's own last word in a training log: the exception line of its last traceback, an
    argparse-style `prog: error: ...` line, else its last line; the toolkit's own lines are skipped."""
    lines = log.splitlines()
    start = max((i for i, line in enumerate(lines) if line.startswith("Invoking script with")), default=-1)
    own = [
        line.strip()
        for line in lines[start + 1 :]
        if line.strip()
        and not _TOOLKIT_LINE.match(line)
        and not line.startswith(("ExitCode ", "Command ", "ErrorMessage "))
    ]
    if start >= 0:
        own = own[1:]  # the command line the toolkit printed after "Invoking script with ..."
    for line in reversed(own):
        if _EXCEPTION_LINE.fullmatch(line) or ": error: " in line:
            return line
    return own[-1] if own else None


def failure_reason(failure: str | None, log: str, exit_code: int, log_path: Path) -> str:
    """SageMaker's FailureReason shape with the script's own error in it: the toolkit's failure file says
    `ErrorMessage ""` when the script printed its error rather than raising through the toolkit."""
    cause = script_error(log)
    if failure and cause and 'ErrorMessage ""' in failure:
        return failure.replace('ErrorMessage ""', f"ErrorMessage {json.dumps(cause)}", 1)
    if failure:
        return failure
    return f"{cause or 'the training process exited'} (exit code {exit_code}; full log: {log_path})"


def start_training(
    job_dir: str | os.PathLike[str],
    *,
    entry_point: str,
    source_dir: str | os.PathLike[str],
    hyperparameters: Mapping[str, Any] | None = None,
    encoded_hyperparameters: Mapping[str, str] | None = None,
    channels: Mapping[str, str | os.PathLike[str]] | None = None,
    job_name: str | None = None,
    instance_type: str = "local",
    processes_per_host: int = 1,
    distribution: str | None = None,
    max_runtime_seconds: float | None = None,
    offline: bool = True,
    env: Mapping[str, str] | None = None,
    stream: IO[str] | None = None,
) -> LocalTrainingProcess:
    """Start a training container on this machine and return at once (see `run_training`)."""
    job_path = Path(job_dir).resolve()
    job_path.mkdir(parents=True, exist_ok=True)
    source = Path(source_dir).resolve()
    if not source.exists():
        raise LocalContainerError(f"source_dir {str(source)!r} does not exist (a folder or a .tar.gz)")
    if source.is_dir() and not (source / entry_point).is_file():
        raise LocalContainerError(f"entry_point {entry_point!r} is not a file in source_dir {str(source)!r}")
    if distribution not in (None, "torch_distributed"):
        raise LocalContainerError(
            f"distribution {distribution!r} is not supported; use None or 'torch_distributed'"
        )
    if processes_per_host < 1:
        raise LocalContainerError(f"processes_per_host must be >= 1, got {processes_per_host}")
    hps: dict[str, str] = dict(encoded_hyperparameters or {})
    hps.update(encode_hyperparameters(hyperparameters or {}))
    framework = script_mode_hyperparameters(entry_point, str(source))
    hps.setdefault("sagemaker_container_log_level", framework.pop("sagemaker_container_log_level"))
    hps.update(framework)
    if distribution == "torch_distributed":
        hps.update(encode_hyperparameters({TORCH_DISTRIBUTED_PARAM: True}))
    name = job_name or f"local-{uuid.uuid4().hex[:8]}"
    base = prepare_base_dir(
        job_path,
        hyperparameters=hps,
        channels={k: Path(v) for k, v in (channels or {}).items()},
        instance_type=instance_type,
    )
    # The toolkit copies the source dir only into an empty code dir; a rerun should see the current code.
    shutil.rmtree(base / "code", ignore_errors=True)
    child_env = _child_env(
        base, job_name=name, processes_per_host=processes_per_host, offline=offline, extra=_extra(source, env)
    )
    return LocalTrainingProcess(
        job_name=name,
        job_dir=job_path,
        base_dir=base,
        hyperparameters=hps,
        env=child_env,
        stream=stream,
        max_runtime_seconds=max_runtime_seconds,
    )


def run_training(job_dir: str | os.PathLike[str], **kwargs: Any) -> LocalTrainingJob:
    """Run `entry_point` from `source_dir` through the sagemaker-training toolkit and wait for it.

    Args:
        job_dir: working folder; holds `opt_ml/` (the container's `/opt/ml`), `logs.txt`, `model.tar.gz`.
            Running again in the same folder keeps `opt_ml/checkpoints`, so the script can resume.
        entry_point: the script, relative to `source_dir` (`sagemaker_program`).
        source_dir: a folder or a `sourcedir.tar.gz` (`sagemaker_submit_directory`).
        hyperparameters: plain values, JSON-encoded here as the SDK does.
        encoded_hyperparameters: values that are already JSON strings (a CreateTrainingJob request).
        channels: channel name -> local folder or file, copied to `input/data/<name>`.
        processes_per_host / distribution: `distribution="torch_distributed"` runs torchrun with that many
            processes (gloo on CPU).
        max_runtime_seconds: stop the run (SIGTERM) after this long, like `MaxRuntimeInSeconds`.
        offline: forbid pip and Hugging Face downloads in the container (default).
        env: extra environment variables for the container.
        stream: where to echo the logs as they come (they always go to `job_dir/logs.txt`).
    """
    return start_training(job_dir, **kwargs).wait()


def run_training_job_request(
    request: Mapping[str, Any],
    job_dir: str | os.PathLike[str],
    *,
    channel_paths: Mapping[str, str | os.PathLike[str]],
    source_dir: str | os.PathLike[str],
    processes_per_host: int | None = None,
    stream: IO[str] | None = None,
    offline: bool = True,
) -> LocalTrainingJob:
    """Run a CreateTrainingJob request locally.

    The caller has fetched the S3 inputs: `channel_paths` maps every channel of `InputDataConfig` to a local
    folder, and `source_dir` is the local copy of `sagemaker_submit_directory`. Hyperparameters are used as
    the request's JSON strings. A torch_distributed request with N instances runs N processes on this host
    unless `processes_per_host` says otherwise. `StoppingCondition.MaxRuntimeInSeconds` is enforced.
    """
    hps = dict(request.get("HyperParameters") or {})
    program = decode_hyperparameter(hps.pop("sagemaker_program", '""'))
    if not program:
        raise LocalContainerError(
            "HyperParameters.sagemaker_program is missing; it names the training script"
        )
    hps.pop("sagemaker_submit_directory", None)
    channels_in_request = _channels_of(request, channel_paths)
    for key, reason in _UNSUPPORTED_DISTRIBUTIONS.items():
        if decode_hyperparameter(hps.get(key, "false")) is True:
            raise LocalContainerError(f"HyperParameters.{key}=true cannot run locally: {reason}")
    resource = request.get("ResourceConfig") or {}
    instance_count = int(resource.get("InstanceCount", 1))
    torch_distributed = decode_hyperparameter(hps.get(TORCH_DISTRIBUTED_PARAM, "false")) is True
    nproc = processes_per_host or (instance_count if torch_distributed else 1)
    stopping = request.get("StoppingCondition") or {}
    proc = start_training(
        job_dir,
        entry_point=str(program),
        source_dir=source_dir,
        encoded_hyperparameters=hps,
        channels={name: channel_paths[name] for name in channels_in_request},
        job_name=request.get("TrainingJobName"),
        instance_type=str(resource.get("InstanceType", "local")),
        processes_per_host=nproc,
        distribution="torch_distributed" if torch_distributed else None,
        max_runtime_seconds=stopping.get("MaxRuntimeInSeconds"),
        offline=offline,
        stream=stream,
    )
    _keep_content_types(request, proc.base_dir)
    return proc.wait()


def _channels_of(request: Mapping[str, Any], channel_paths: Mapping[str, Any]) -> list[str]:
    """The request's channel names, each of which must have a local folder."""
    channels_in_request = [c["ChannelName"] for c in request.get("InputDataConfig") or []]
    missing = [c for c in channels_in_request if c not in channel_paths]
    if missing:
        raise LocalContainerError(
            f"InputDataConfig channels {missing} have no local path; channel_paths has {sorted(channel_paths)}"
        )
    return channels_in_request


def _keep_content_types(request: Mapping[str, Any], base_dir: Path) -> None:
    """SageMaker writes content types into inputdataconfig.json; keep them for scripts that read them."""
    content_types = {
        c["ChannelName"]: c["ContentType"]
        for c in request.get("InputDataConfig") or []
        if c.get("ContentType")
    }
    if content_types:
        cfg = base_dir / "input" / "config" / "inputdataconfig.json"
        data = json.loads(cfg.read_text())
        for name, ctype in content_types.items():
            data[name]["ContentType"] = ctype
        cfg.write_text(json.dumps(data, indent=2))


def pytorch_container_main() -> None:
    """Stand-in for the PyTorch/Hugging Face container's `SAGEMAKER_TRAINING_MODULE` launcher.

    Called by the toolkit's `train()` inside the child process; picks the runner from the distribution
    hyperparameters and lets the toolkit install requirements and run the script.
    """
    from sagemaker_training import entry_point, environment, errors, runner

    env = environment.Environment()
    extra: dict[str, Any] = {}
    runner_type = runner.ProcessRunnerType
    for key, reason in _UNSUPPORTED_DISTRIBUTIONS.items():
        if env.additional_framework_parameters.get(key):
            raise errors.ClientError(f"{key}=true cannot run locally: {reason}")
    if env.additional_framework_parameters.get(TORCH_DISTRIBUTED_PARAM):
        runner_type = runner.TorchDistributedRunnerType
        extra = {"sagemaker_mpi_num_of_processes_per_host": int(os.environ.get(PROCESSES_PER_HOST_ENV, "1"))}
    _skip_install_when_met(env.module_dir)
    entry_point.run(
        uri=env.module_dir,
        user_entry_point=env.user_entry_point,
        args=env.to_cmd_args(),
        env_vars=env.to_env_vars(),
        # True, as the PyTorch container's launcher passes it. It also matters for the exit status:
        # entry_point.run hands (wait, capture_error) on positionally, and TorchDistributedRunner.run takes
        # (capture_error, wait), so capture_error=False made torchrun runs not wait and report SUCCESS
        # whatever the script did (sagemaker-training 5.1.4).
        capture_error=True,
        runner_type=runner_type,
        extra_opts=extra,
    )


def _skip_install_when_met(source: str) -> None:
    """In the job's process: leave out the toolkit's `pip install -r requirements.txt` (a pip process, seconds
    per job) when this environment already meets every line (hfpipe.local.training.requirements.met_here, the
    job's own PYTHONPATH included), saying so in the job's log; anything else installs as before."""
    from sagemaker_training import modules

    from hfpipe.local.training.requirements import meaningful_lines, met_here

    try:
        lines = meaningful_lines(Path(source))
    except (OSError, tarfile.TarError):
        return
    if not lines or not met_here(lines):
        return

    def already_met(path: str, capture_error: bool = False) -> None:
        print(
            f"hfpipe local: requirements.txt ({len(lines)} lines) already met by this environment: "
            "the toolkit's pip install is left out",
            flush=True,
        )

    modules.install_requirements = already_met


def pack_dir(src: Path, dst: Path) -> Path:
    """Pack the contents of `src` into a gzip tarball at `dst` (members relative to `src`, like SageMaker)."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(dst, "w:gz") as tar:
        for path in sorted(src.rglob("*")):
            tar.add(path, arcname=str(path.relative_to(src)), recursive=False)
    return dst
