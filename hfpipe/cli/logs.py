"""`hfpipe logs`: an execution's training log, from CloudWatch (every instance) or from a local run's folder.

    hfpipe logs EXECUTION --env dev [--since 10m] [--follow] [--json]
    hfpipe logs [EXECUTION] --local [--out .hfpipe/local] [--follow]

The CloudWatch side reads `hfpipe.core.logs` (log group and stream naming as SageMaker documents them);
`--follow` polls until the training job has ended, then reads once more so nothing printed at the end is
lost. A local run writes `training.log` into `--out/<execution>/`; `--follow` tails it until the run has
written its `report.json`, or ends when the run was interrupted (its folder holds `INTERRUPTED`).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from hfpipe.cli import aws
from hfpipe.cli.aws import HfpipeError
from hfpipe.core import logs as core_logs
from hfpipe.local import outputs

JOB_ENDED = {"Completed", "Failed", "Stopped"}
LOCAL_LOG = outputs.TRAINING_LOG
LOCAL_DONE = outputs.REPORT


def parse_since(text: str) -> timedelta:
    """'30s', '10m', '2h', '1d', '1w' -> timedelta (the command's one duration rule, seconds allowed)."""
    from hfpipe.cli.cleanup import parse_duration

    return parse_duration(text, "--since", units="smhdw")


def _write(line: core_logs.LogLine, with_host: bool, as_json: bool) -> None:
    # Plain writes, not rich: a log line's own [brackets] must not be read as markup.
    if as_json:
        when = datetime.fromtimestamp(line.timestamp / 1000.0, UTC).isoformat()
        text = json.dumps({"timestamp": when, "host": line.host, "message": line.message})
    else:
        text = f"[{line.host}] {line.message}" if with_host else line.message
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def training_job_of(clients: aws.Clients, desc: dict[str, Any]) -> str | None:
    """The training job an execution launched (from the plan the pipeline stored), or None while it has
    no plan (Launch runs only after Plan has finished, so there is no job either)."""
    plan = aws.stored_plan(list(aws.execution_history(clients.sfn, desc["executionArn"])))
    return plan.training_job_name if plan else None


def _job_status(clients: aws.Clients, job_name: str) -> str | None:
    import botocore.exceptions

    try:
        return str(clients.sagemaker.describe_training_job(TrainingJobName=job_name)["TrainingJobStatus"])
    except botocore.exceptions.ClientError as exc:
        if exc.response.get("Error", {}).get("Code") in {"ValidationException", "ResourceNotFound"}:
            return None  # Launch has not created it yet
        raise aws.aws_error(exc, f"reading training job {job_name}") from None


def follow_cloudwatch(
    clients: aws.Clients,
    job_name: str,
    *,
    start_ms: int | None,
    follow: bool,
    interval: float,
    emit: Callable[[core_logs.LogLine], None],
    sleep: Callable[[float], None] = time.sleep,
) -> str | None:
    """Emit the job's log lines from `start_ms`; with `follow`, keep going until the job has ended.

    Returns the job's last known status. Events are read again from the last timestamp seen (CloudWatch
    may still add events with that timestamp), skipping the event ids already emitted.
    """
    seen_at_last: set[str] = set()
    last_ms = start_ms
    status: str | None = None
    while True:
        if follow:
            status = _job_status(clients, job_name)
        try:
            for line in core_logs.read_events(clients.logs, job_name, last_ms):
                if last_ms is not None and line.timestamp == last_ms and line.event_id in seen_at_last:
                    continue
                if last_ms is None or line.timestamp > last_ms:
                    last_ms, seen_at_last = line.timestamp, set()
                seen_at_last.add(line.event_id)
                emit(line)
        except Exception as exc:
            raise aws.aws_error(exc, f"reading the log of training job {job_name}") from None
        # The status was read before the events: once it said "ended", everything was printed.
        if not follow or status in JOB_ENDED:
            return status
        sleep(interval)


def cmd_logs(args: argparse.Namespace) -> int:
    """Print (or follow) an execution's training log."""
    if args.interval <= 0:
        raise HfpipeError(f"--interval {args.interval} must be a positive number of seconds")
    if args.local:
        if args.since:
            raise HfpipeError(
                "--since needs CloudWatch's timestamps; a local run's training.log has none (drop --since)"
            )
        return _local_logs(args)
    if not args.execution:
        raise HfpipeError("hfpipe logs needs an EXECUTION (its ARN, or its name with --env), or --local")
    since = parse_since(args.since) if args.since else None
    clients = _clients(args)
    desc = aws.resolve_execution(clients, args.execution, args.env)
    job_name = training_job_of(clients, desc)
    while job_name is None and args.follow and desc["status"] == "RUNNING":
        time.sleep(args.interval)
        desc = aws.resolve_execution(clients, desc["executionArn"], None)
        job_name = training_job_of(clients, desc)
    if job_name is None:
        raise aws.no_plan(desc, "it launched no training job, so it has no training log")
    start_ms = int((datetime.now(UTC) - since).timestamp() * 1000) if since else None
    streams = core_logs.log_streams(clients.logs, job_name) if not args.follow else []
    with_host = len(streams) > 1 or (args.follow and _instance_count(clients, job_name) > 1)
    printed = 0

    def emit(line: core_logs.LogLine) -> None:
        nonlocal printed
        printed += 1
        _write(line, with_host, args.json)

    status = follow_cloudwatch(
        clients, job_name, start_ms=start_ms, follow=args.follow, interval=args.interval, emit=emit
    )
    if not printed:
        where = f"{core_logs.LOG_GROUP}, streams {core_logs.stream_prefix(job_name)}*"
        print(f"training job {job_name} has no log lines yet ({where})", file=sys.stderr)
    if args.follow and status not in (None, "Completed"):
        print(f"training job {job_name} ended {status}", file=sys.stderr)
        return 1
    return 0


def _instance_count(clients: aws.Clients, job_name: str) -> int:
    try:
        job = clients.sagemaker.describe_training_job(TrainingJobName=job_name)
    except Exception:
        return 1
    return int(job.get("ResourceConfig", {}).get("InstanceCount") or 1)


def _clients(args: argparse.Namespace) -> aws.Clients:
    return aws.clients_for(args)


# --- local mode ----------------------------------------------------------------------------------------


def local_run_dir(out: Path, execution: str | None) -> Path:
    """The folder of one local run (`--out/<execution>`), or the newest run when no name is given."""
    if execution:
        run_dir = out / execution
        if not (run_dir / LOCAL_LOG).is_file():
            known = sorted(p.parent.name for p in out.glob(f"*/{LOCAL_LOG}"))
            hint = f"; local runs in {out}: {', '.join(known)}" if known else f"; {out} holds no local runs"
            raise HfpipeError(f"no local run {execution!r} with a {LOCAL_LOG}{hint}")
        return run_dir
    runs = sorted(out.glob(f"*/{LOCAL_LOG}"), key=lambda p: p.stat().st_mtime)
    if not runs:
        raise HfpipeError(
            f"{out} holds no local runs: start one with `hfpipe local --recipe tiny-lora` (or pass --out)"
        )
    return runs[-1].parent


def _local_logs(args: argparse.Namespace) -> int:
    run_dir = local_run_dir(Path(outputs.runs_folder(args.out)), args.execution)
    log = run_dir / LOCAL_LOG
    with log.open("rb") as f:
        while True:
            # Checked before reading: once the run has written its report (or was interrupted), its log is
            # complete.
            done = (run_dir / LOCAL_DONE).exists() or (run_dir / outputs.INTERRUPTED).exists()
            while True:
                start = f.tell()
                raw = f.readline()
                if not raw:
                    break
                if not raw.endswith(b"\n") and args.follow and not done:
                    f.seek(start)  # half a line: wait for the rest of it
                    break
                text = raw.decode(errors="replace").rstrip("\n")
                out = json.dumps({"host": "algo-1", "message": text}) if args.json else text
                sys.stdout.write(out + "\n")
            sys.stdout.flush()
            if not args.follow or done:
                break
            time.sleep(args.interval)
    if args.follow and (run_dir / outputs.INTERRUPTED).exists() and not (run_dir / LOCAL_DONE).exists():
        print(f"local run {run_dir.name} was interrupted before it finished", file=sys.stderr)
        return 1
    if args.follow and (run_dir / LOCAL_DONE).exists():
        report = json.loads((run_dir / LOCAL_DONE).read_text())
        status = report.get("training_job_status")
        if status not in (None, "Completed"):
            print(f"training job of {run_dir.name} ended {status}", file=sys.stderr)
            return 1
    return 0
