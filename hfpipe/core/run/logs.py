"""A training job's CloudWatch log: where SageMaker writes it, reading it, and its last lines.

SageMaker sends what a training container prints to the log group `/aws/sagemaker/TrainingJobs`, one log
stream per instance named `[training-job-name]/algo-[instance-number-in-cluster]-[epoch_timestamp]`
(Amazon SageMaker Developer Guide, "Log groups and streams that Amazon SageMaker AI sends to Amazon
CloudWatch Logs", https://docs.aws.amazon.com/sagemaker/latest/dg/logging-cloudwatch.html). The SageMaker
Python SDK's `logs_for_job` finds a job's streams the same way: DescribeLogStreams with the prefix
`<job-name>/`. The log group only exists once the account's first job has logged, and a stream only once
its container has printed something, so "not there yet" is a state, not an error.

Stdlib only: the functions take a CloudWatch Logs client (boto3's, or moto's in tests and local mode),
so the Report Lambda and the command share them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from typing import Any

LOG_GROUP = "/aws/sagemaker/TrainingJobs"
TAIL_LINES = 20
# Between a failure cause and the log tail the Report Lambda appends to it; views cut the cause there.
CAUSE_TAIL_MARKER = "\nlast lines of the training log:\n"
_HOST = re.compile(r"/(algo-\d+)(?:-\d+)?\Z")


def stream_prefix(job_name: str) -> str:
    """The prefix every log stream of one training job starts with."""
    return f"{job_name}/"


def stream_name(job_name: str, host: str, epoch_seconds: int) -> str:
    """The stream SageMaker names for one instance (`host` is algo-N) started at `epoch_seconds`."""
    return f"{job_name}/{host}-{epoch_seconds}"


def host_of(log_stream_name: str) -> str:
    """algo-N of a stream name (the whole name when it does not follow SageMaker's pattern)."""
    match = _HOST.search(log_stream_name)
    return match.group(1) if match else log_stream_name


@dataclass(frozen=True)
class LogLine:
    """One log event: when (milliseconds since the epoch), which instance, what it printed."""

    timestamp: int
    host: str
    message: str
    event_id: str = ""


def _not_found(exc: Exception) -> bool:
    response = getattr(exc, "response", None)
    return isinstance(response, dict) and response.get("Error", {}).get("Code") == "ResourceNotFoundException"


def _pages(call: Any, kwargs: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every page of ``call(**kwargs)``, following ``nextToken`` until the service stops returning a new one;
    none when the log group or stream does not exist (ResourceNotFoundException)."""
    kwargs = dict(kwargs)
    try:
        while True:
            page = call(**kwargs)
            yield page
            token = page.get("nextToken")
            if not token or token == kwargs.get("nextToken"):
                return
            kwargs["nextToken"] = token
    except Exception as exc:
        if _not_found(exc):
            return
        raise


def log_streams(logs: Any, job_name: str) -> list[str]:
    """The job's log stream names (one per instance that has logged), sorted; [] before any exists."""
    kwargs = {"logGroupName": LOG_GROUP, "logStreamNamePrefix": stream_prefix(job_name)}
    pages = _pages(logs.describe_log_streams, kwargs)
    return sorted(s["logStreamName"] for page in pages for s in page.get("logStreams", []))


def read_events(logs: Any, job_name: str, start_ms: int | None = None) -> Iterator[LogLine]:
    """Every event of every instance of the job from `start_ms` on, interleaved by time (FilterLogEvents).

    FilterLogEvents with `logStreamNamePrefix` reads all the job's streams at once and sorts them by time;
    paging follows `nextToken` until the service stops returning one.
    """
    kwargs: dict[str, Any] = {
        "logGroupName": LOG_GROUP,
        "logStreamNamePrefix": stream_prefix(job_name),
        # AWS ignores this flag since 2019 and always interleaves the streams by time (FilterLogEvents, API
        # reference); moto interleaves only when asked, so ask.
        "interleaved": True,
    }
    if start_ms is not None:
        kwargs["startTime"] = int(start_ms)
    for page in _pages(logs.filter_log_events, kwargs):
        for event in page.get("events", []):
            # AWS applies the prefix; checked here as well because moto's FilterLogEvents ignores it.
            if not str(event.get("logStreamName", "")).startswith(kwargs["logStreamNamePrefix"]):
                continue
            yield LogLine(
                int(event.get("timestamp", 0)),
                host_of(event.get("logStreamName", "")),
                str(event.get("message", "")).rstrip("\n"),
                str(event.get("eventId", "")),
            )


def log_tail(logs: Any, job_name: str, lines: int = TAIL_LINES) -> list[LogLine]:
    """The job's last `lines` log lines over all its instances, oldest first ([] when it has no log).

    GetLogEvents with startFromHead=false returns a stream's latest events, so this reads at most
    `lines` events per instance however long the log is.
    """
    if lines <= 0:
        return []
    tail: list[LogLine] = []
    for stream in log_streams(logs, job_name):
        try:
            page = logs.get_log_events(
                logGroupName=LOG_GROUP, logStreamName=stream, startFromHead=False, limit=lines
            )
        except Exception as exc:
            if _not_found(exc):
                continue
            raise
        host = host_of(stream)
        tail.extend(
            LogLine(int(e.get("timestamp", 0)), host, str(e.get("message", "")).rstrip("\n"))
            for e in page.get("events", [])
        )
    tail.sort(key=lambda line: line.timestamp)
    return tail[-lines:]


def metric_values(lines: Iterable[str], definitions: list[dict[str, str]]) -> Iterator[tuple[str, float]]:
    """(name, value) for each value the job's MetricDefinitions find in its log, in log order, as SageMaker
    scrapes them: each regex in each log line on its own (a CloudWatch event; the regexes of Hugging Face's
    SageMaker notebooks end in `$`, the end of a line), every match's first group, a value that is not a
    number skipped (https://docs.aws.amazon.com/sagemaker/latest/dg/automatic-model-tuning-define-metrics-variables.html).
    The final metrics are the last of each; a loss curve is all of them."""
    patterns = [(definition["Name"], re.compile(definition["Regex"])) for definition in definitions]
    for line in lines:
        for name, pattern in patterns:
            for match in pattern.finditer(line):
                try:
                    yield name, float(match.group(1))
                except (ValueError, IndexError):
                    continue


def cause_without_tail(cause: str) -> str:
    """A failure cause without the log tail appended to it (views show the tail on its own)."""
    return cause.split(CAUSE_TAIL_MARKER, 1)[0]


def format_lines(lines: list[LogLine], with_host: bool | None = None) -> list[str]:
    """Lines as text; prefixed with `[algo-N]` when they come from more than one instance."""
    if with_host is None:
        with_host = len({line.host for line in lines}) > 1
    return [f"[{line.host}] {line.message}" if with_host else line.message for line in lines]


# --- progress: what the Trainer's progress bar and its logged dicts say ------------------------------------

#: A tqdm bar: ` 45%|####5     | 9/20 [00:10<00:12,  1.10it/s]` (or `s/it` when a step takes longer than a
#: second). The log keeps each redraw, so the last one is the newest. What precedes the percentage is the
#: bar's description: tqdm writes `desc: ` before it ("Loading checkpoint shards: 50%|...", "Map: ..."),
#: and the Trainer's training bar has none (transformers' ProgressCallback: `tqdm(total=state.max_steps)`).
_BAR = re.compile(
    r"(?P<head>[^\r]*?)\s*\d{1,3}%\|[^|]*\|\s*(?P<done>\d+)/(?P<total>\d+) "
    r"\[(?P<elapsed>[\d:]+)<(?P<left>[\d:?]+),\s*(?P<rate>[\d.]+)\s*(?P<unit>it/s|s/it)"
)
#: Prefixes a line may carry before the bar: `[algo-2] ` (hfpipe.core.run.logs.format_lines), `[rank0]: `
#: or `[rank1] ` (torchrun's and the local container's per-process prefixes).
_PREFIX = re.compile(r"^(?:\s*\[[^\]]*\]:?)*\s*")
#: The Trainer's own count of the run's steps (`logger.info("  Total optimization steps = {max_steps:,}")`):
#: the training bar's total. An evaluation bar counts evaluation batches, another total.
_TOTAL = re.compile(r"Total optimization steps = (?P<total>[\d,]+)")
_SAMPLES = re.compile(r"'?train_samples_per_second'?\s*[=:]\s*([0-9.eE+-]+)")
_TOKENS = re.compile(r"'?train_tokens_per_second'?\s*[=:]\s*([0-9.eE+-]+)")


@dataclass(frozen=True)
class Progress:
    """Where a training job stands, read from its log: steps done of total, time left, speed."""

    step: int
    total: int
    eta: str
    steps_per_second: float
    samples_per_second: float | None = None
    tokens_per_second: float | None = None

    @property
    def fraction(self) -> float:
        return min(1.0, self.step / self.total) if self.total else 0.0

    def of_job(self, status: str | None) -> Progress:
        """The progress of a job whose status is ``status``: all of its steps once it is Completed (the
        log's last bar redraw can be a step or two behind the end: tqdm redraws at most ten times a
        second), else as the log shows it."""
        if status != "Completed":
            return self
        return replace(self, step=self.total, eta="00:00")


def _training_bars(lines: list[str]) -> Iterator[re.Match[str] | int]:
    """The undescribed bars of the lines in order, and the totals the Trainer announces (as ints)."""
    for line in lines:
        if match := _TOTAL.search(line):
            yield int(match.group("total").replace(",", ""))
        # A captured tqdm bar redraws with carriage returns: each piece is one state of the bar.
        for piece in line.split("\r"):
            for bar in _BAR.finditer(piece):
                if not _PREFIX.sub("", bar.group("head")):  # no description: a Trainer bar
                    yield bar


def progress(lines: list[str], previous: Progress | None = None) -> Progress | None:
    """The newest training progress the log lines show, or `previous` (the last view's) when they show
    none: only the Trainer's training bar counts (its total is the Trainer's "Total optimization steps", or
    the previous view's, or the first bar's), not an evaluation bar, a "Loading checkpoint shards" bar or a
    data set's map. Never more steps than the total, never fewer than `previous` showed of the same total;
    None before the first step (or with the bar disabled)."""
    total = previous.total if previous else None
    announced = [found for found in _training_bars(lines) if isinstance(found, int)]
    if announced:
        total = announced[-1]
    bar = None
    for found in _training_bars(lines):
        if isinstance(found, int):
            continue
        if total is None:
            total = int(found.group("total"))
        if int(found.group("total")) == total:
            bar = found
    samples = tokens = None
    for line in lines:
        if match := _SAMPLES.search(line):
            samples = float(match.group(1))
        if match := _TOKENS.search(line):
            tokens = float(match.group(1))
    if bar is None or total is None:
        return previous
    rate = float(bar.group("rate"))
    steps_per_second = rate if bar.group("unit") == "it/s" else (1.0 / rate if rate else 0.0)
    step = min(int(bar.group("done")), total)
    if previous is not None and previous.total == total and previous.step > step:
        return previous  # an older redraw (or another process's bar) behind what was already shown
    return Progress(
        step=step,
        total=total,
        eta=bar.group("left"),
        steps_per_second=steps_per_second,
        samples_per_second=samples
        if samples is not None
        else previous.samples_per_second
        if previous
        else None,
        tokens_per_second=tokens if tokens is not None else previous.tokens_per_second if previous else None,
    )
