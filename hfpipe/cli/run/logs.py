"""`hfpipe logs`: an execution's training log, from CloudWatch (every instance) or from a local run's folder.

    hfpipe logs EXECUTION --env dev [--since 10m] [--follow] [--json]
    hfpipe logs [EXECUTION] --local [--out .hfpipe/local] [--follow]

The CloudWatch side reads `hfpipe.core.run.logs` (log group and stream naming as SageMaker documents them);
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
from hfpipe.cli.aws import HfpipeError, UsageError
from hfpipe.cli.parser import (
    LOCAL_EXCLUDES,
    Subparsers,
    execution_argument,
    local_run_options,
    option_rules,
)
from hfpipe.cli.paths import check_length
from hfpipe.core import json_text
from hfpipe.core.run import logs as core_logs
from hfpipe.local import outputs

JOB_ENDED = {"Completed", "Failed", "Stopped"}
LOCAL_LOG = outputs.TRAINING_LOG
LOCAL_DONE = outputs.REPORT


#: How often `logs --follow` looks for new lines, unless --interval says.
FOLLOW_INTERVAL_S = 5.0


def parse_since(text: str) -> timedelta:
    """'30s', '10m', '2h', '1d', '1w' -> timedelta (the command's one duration rule, seconds allowed)."""
    from hfpipe.cli.run.cleanup import parse_duration

    return parse_duration(text, "--since", units="smhdw")


def _write(line: core_logs.LogLine, with_host: bool, as_json: bool) -> None:
    # Plain writes, not rich: a log line's own [brackets] must not be read as markup.
    if as_json:
        when = datetime.fromtimestamp(line.timestamp / 1000.0, UTC).isoformat()
        text = json_text.dumps({"timestamp": when, "host": line.host, "message": line.message})
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
    execution_ended: Callable[[], bool] = lambda: False,
) -> str | None:
    """Emit the job's log lines from `start_ms`; with `follow`, keep going until the job has ended, or
    while there is no job, until the execution has ended (one that failed before Launch created the job
    never gets one).

    Returns the job's last known status. Events are read again from the last timestamp seen (CloudWatch
    may still add events with that timestamp), skipping the event ids already emitted.
    """
    seen_at_last: set[str] = set()
    last_ms = start_ms
    status: str | None = None
    while True:
        ended = False
        if follow:
            status = _job_status(clients, job_name)
            # Read before the events, as the status: once it said "ended", the job never comes.
            ended = status is None and execution_ended()
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
        if not follow or status in JOB_ENDED or ended:
            return status
        sleep(interval)


def cmd_logs(args: argparse.Namespace) -> int:
    """Print (or follow) an execution's training log."""
    # The commands' one --interval rule (no NaN, no inf); not given: every 5 s.
    args.interval = aws.poll_interval(args.interval, None, FOLLOW_INTERVAL_S)
    if args.local:
        if args.since:
            raise UsageError(
                "--since needs CloudWatch's timestamps; a local run's training.log has none (drop --since)"
            )
        return _local_logs(args)
    if not args.execution:
        raise UsageError("hfpipe logs needs an EXECUTION (its ARN, or its name with --env), or --local")
    since = parse_since(args.since) if args.since else None
    clients = _clients(args)
    desc, job_name = _launched_job(clients, args)
    start_ms = int((datetime.now(UTC) - since).timestamp() * 1000) if since else None
    streams = core_logs.log_streams(clients.logs, job_name) if not args.follow else []
    with_host = len(streams) > 1 or (args.follow and _instance_count(clients, job_name) > 1)
    printed = 0

    def emit(line: core_logs.LogLine) -> None:
        nonlocal printed
        printed += 1
        _write(line, with_host, args.json)

    arn = desc["executionArn"]
    final: dict[str, str] = {}

    def execution_ended() -> bool:
        final["status"] = aws.resolve_execution(clients, arn, None)["status"]
        return final["status"] != "RUNNING"

    status = follow_cloudwatch(
        clients,
        job_name,
        start_ms=start_ms,
        follow=args.follow,
        interval=args.interval,
        emit=emit,
        execution_ended=execution_ended,
    )
    return _outcome(args, desc["name"], final.get("status", "?"), job_name, status, printed)


def _launched_job(clients: aws.Clients, args: argparse.Namespace) -> tuple[dict[str, Any], str]:
    """The execution and its training job's name (with --follow, waited for while the execution runs)."""
    desc = aws.resolve_execution(clients, args.execution, args.env)
    job_name = training_job_of(clients, desc)
    while job_name is None and args.follow and desc["status"] == "RUNNING":
        time.sleep(args.interval)
        desc = aws.resolve_execution(clients, desc["executionArn"], None)
        job_name = training_job_of(clients, desc)
    if job_name is None:
        raise aws.no_plan(desc, "it launched no training job, so it has no training log")
    return desc, job_name


def _outcome(
    args: argparse.Namespace,
    execution: str,
    execution_status: str,
    job_name: str,
    status: str | None,
    printed: int,
) -> int:
    """The exit code, and on stderr why: no training job before the execution ended, no lines yet, or a
    followed job that ended other than Completed."""
    if args.follow and status is None:
        print(
            f"execution {execution} ended {execution_status} before its training job {job_name} "
            "was created: there is no training log (`hfpipe report` says why)",
            file=sys.stderr,
        )
        return 1
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


def runs_out(out: str | None) -> Path:
    """The folder of the local runs: `--out`, or the checkout's .hfpipe/local."""
    folder = outputs.runs_folder(out)
    check_length(folder, "--out")
    if Path(folder).exists() and not Path(folder).is_dir():
        raise HfpipeError(f"--out {folder!r} is a file; accepted: the folder `hfpipe local --out` wrote to")
    if out is not None and not Path(folder).exists():  # the default one is made by the first run
        raise HfpipeError(
            f"--out {folder!r}: no such folder; accepted: the folder `hfpipe local --out` wrote to"
        )
    return Path(folder)


def _known(out: Path, runs: list[Path]) -> str:
    if not runs:
        return (
            f"; {out} holds no local runs: start one with `hfpipe local --recipe tiny-lora` (or pass --out)"
        )
    return f"; local runs in {out}: {', '.join(r.name for r in runs)}"


def local_run_dir(out: Path, execution: str | None, *, finished: bool = False) -> Path:
    """The folder of one local run (`--out/<execution>`), or the newest run when no name is given (with
    `finished`, the newest that wrote its report). A name is one folder name: it never leads out of `out`."""
    runs = outputs.run_folders(out)
    if execution is not None:
        if not outputs.is_run_name(execution):
            shown = (
                execution if len(execution) <= 80 else f"{execution[:40]}... ({len(execution)} characters)"
            )
            raise HfpipeError(
                f"local run {shown!r} is not a local run's name; accepted: the name of a run's folder in "
                f"{out} ({outputs.RUN_NAME_FORM}){_known(out, runs)}"
            )
        run_dir = out / execution
        if run_dir not in runs:
            raise HfpipeError(f"no local run {execution!r}{_known(out, runs)}")
        return run_dir
    candidates = [r for r in runs if (r / LOCAL_DONE).is_file()] if finished else runs
    if not candidates:
        if runs:
            raise HfpipeError(
                f"no local run in {out} has finished (none has a {LOCAL_DONE}){_known(out, runs)}"
            )
        raise HfpipeError(_known(out, runs).removeprefix("; "))
    return candidates[-1]


def read_local_report(run_dir: Path) -> dict[str, Any]:
    """A local run's report.json, or a one-line error when it cannot be read (a run cut short while writing
    it, a file edited by hand)."""
    where = f"local run {run_dir.name}: its {LOCAL_DONE}"
    try:
        report = json.loads((run_dir / LOCAL_DONE).read_text(encoding="utf-8"))
    except (UnicodeDecodeError, RecursionError) as err:
        raise HfpipeError(f"{where} cannot be read ({type(err).__name__}); run the recipe again") from None
    except json.JSONDecodeError as err:
        raise HfpipeError(
            f"{where} is not valid JSON ({err.msg} at line {err.lineno} column {err.colno}: cut short?); "
            "run the recipe again"
        ) from None
    if not isinstance(report, dict):
        raise HfpipeError(
            f"{where} holds {type(report).__name__}, not the report object; run the recipe again"
        )
    return report


def _local_logs(args: argparse.Namespace) -> int:
    run_dir = local_run_dir(runs_out(args.out), args.execution)
    log = run_dir / LOCAL_LOG
    if not log.is_file():
        raise HfpipeError(f"local run {run_dir.name} has no {LOCAL_LOG} (its training never started)")
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
                out = json_text.dumps({"host": "algo-1", "message": text}) if args.json else text
                sys.stdout.write(out + "\n")
            sys.stdout.flush()
            if not args.follow or done:
                break
            time.sleep(args.interval)
    if args.follow and (run_dir / outputs.INTERRUPTED).exists() and not (run_dir / LOCAL_DONE).exists():
        print(f"local run {run_dir.name} was interrupted before it finished", file=sys.stderr)
        return 1
    if args.follow and (run_dir / LOCAL_DONE).exists():
        report = read_local_report(run_dir)
        status = report.get("training_job_status")
        if status not in (None, "Completed"):
            print(f"training job of {run_dir.name} ended {status}", file=sys.stderr)
            return 1
    return 0


# --- hfpipe logs -----------------------------------------------------------------------------------------


def add_to(sub: Subparsers) -> None:
    """`hfpipe logs`' arguments and help."""
    p = sub.add_parser("logs", help="an execution's training log (every instance), or a local run's")
    execution_argument(p, optional="with --local: a local run's name; default: the newest")
    p.add_argument("--follow", "-f", action="store_true", help="keep printing until the training job ends")
    p.add_argument("--since", metavar="AGE", help="only lines from the last AGE: 30s, 10m, 2h, 1d")
    p.add_argument(
        "--interval", type=float, help=f"seconds between polls with --follow (default {FOLLOW_INTERVAL_S:g})"
    )
    p.add_argument("--json", action="store_true", help="one JSON object per log line")
    local_run_options(p, "a local run's training.log (default: the newest)")
    option_rules(p, needs={"--interval": "--follow", "--out": "--local"}, excludes=LOCAL_EXCLUDES)
    p.set_defaults(func=cmd_logs, command_parser=p)
