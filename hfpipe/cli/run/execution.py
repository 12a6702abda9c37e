"""What an execution is now: its status, plan, training job, metrics, cost so far and endpoint.

`snapshot` gathers it from Step Functions, SageMaker and CloudWatch (clients are passed in, so `hfpipe local`
points it at its own moto-backed clients); `hfpipe.cli.run.watch` shows it live, `hfpipe.cli.run.report` turns it
into the report. The plan is the one the pipeline stored (`aws.stored_plan`: the Plan state's exit), never
the execution input; an execution whose Plan did not finish has none, and so no job or endpoint to show.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from hfpipe.cli import aws
from hfpipe.core import cost
from hfpipe.core.cost import as_utc
from hfpipe.core.run.logs import Progress, progress
from hfpipe.core.run.plan_model import Plan

TERMINAL = {"SUCCEEDED", "FAILED", "TIMED_OUT", "ABORTED"}


@dataclass
class Snapshot:
    """Everything the live view shows at one moment."""

    execution_arn: str
    execution_name: str
    status: str
    started: datetime | None
    stopped: datetime | None
    state: str | None = None
    plan: Plan | None = None
    training_job: dict[str, Any] | None = None
    metrics: dict[str, float] = field(default_factory=dict)
    cost_so_far_usd: float | None = None
    #: The plan's evaluation job once created (DescribeProcessingJob), and what it cost so far.
    evaluation_job: dict[str, Any] | None = None
    evaluation_cost_so_far_usd: float | None = None
    endpoint_status: str | None = None
    #: Whether the execution's CreateEndpoint state finished (else no endpoint of it ever existed).
    endpoint_created: bool = False
    failure: str | None = None
    output: Any = None
    log_tail: list[str] = field(default_factory=list)
    #: Steps done of total, time left and speed, from the training log (the same way here and on AWS).
    progress: Progress | None = None
    now: datetime = field(default_factory=lambda: datetime.now(UTC))
    #: The execution's history events read so far, oldest first: the next view of it reads only newer ones.
    events: list[dict[str, Any]] = field(default_factory=list, repr=False)

    @property
    def finished(self) -> bool:
        return self.status in TERMINAL

    @property
    def elapsed_seconds(self) -> float:
        if self.started is None:
            return 0.0
        end = self.stopped or self.now
        return max(0.0, (end - self.started).total_seconds())


# Where SageMaker puts the metrics a training job's MetricDefinitions extract from its logs.
TRAINING_METRICS_NAMESPACE = "/aws/sagemaker/TrainingJobs"


def metric_names(job: dict[str, Any]) -> list[str]:
    """The metric names a training job defines (regexes over its log, published to CloudWatch)."""
    definitions = job.get("AlgorithmSpecification", {}).get("MetricDefinitions", [])
    return [d["Name"] for d in definitions if d.get("Name")]


def metric_series(
    clients: aws.Clients, job: dict[str, Any], names: list[str] | None = None
) -> dict[str, list[tuple[datetime, float]]]:
    """Each metric's values over the job's run from CloudWatch, oldest first (host algo-1)."""
    names = metric_names(job) if names is None else names
    if not names:
        return {}
    job_name = job["TrainingJobName"]
    start = job.get("TrainingStartTime") or job.get("CreationTime") or datetime.now(UTC) - timedelta(days=14)
    end = job.get("TrainingEndTime") or datetime.now(UTC)
    queries = [
        {
            "Id": f"m{i}",
            "Label": name,
            "MetricStat": {
                "Metric": {
                    "Namespace": TRAINING_METRICS_NAMESPACE,
                    "MetricName": name,
                    "Dimensions": [{"Name": "Host", "Value": f"{job_name}/algo-1"}],
                },
                "Period": 60,
                "Stat": "Average",
            },
        }
        for i, name in enumerate(names)
    ]
    series: dict[str, list[tuple[datetime, float]]] = {}
    # GetMetricData takes at most 500 queries; a recipe defines a handful.
    response = clients.cloudwatch.get_metric_data(
        MetricDataQueries=queries,
        StartTime=start - timedelta(minutes=1),
        EndTime=end + timedelta(minutes=1),
        ScanBy="TimestampAscending",
    )
    for result in response.get("MetricDataResults", []):
        points = sorted(zip(result.get("Timestamps", []), result.get("Values", []), strict=False))
        if points:
            series[result.get("Label") or names[int(result["Id"][1:])]] = [(t, float(v)) for t, v in points]
    return series


def latest_metrics(clients: aws.Clients, job: dict[str, Any]) -> dict[str, float]:
    """The final metrics of a finished job, else the latest CloudWatch value of each defined metric."""
    final = {m["MetricName"]: float(m["Value"]) for m in job.get("FinalMetricDataList", []) if "Value" in m}
    if final:
        return final
    try:
        series = metric_series(clients, job)
    except Exception:  # a live view must not die because CloudWatch is slow or denied
        return {}
    return {name: points[-1][1] for name, points in series.items()}


def _client_error_code(exc: Exception) -> str | None:
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        return response.get("Error", {}).get("Code")
    return None


LIVE_LOG_LINES = 8
#: The state machine's CreateEndpoint task (stacks/constructs/pipeline_state_machine.py).
CREATE_ENDPOINT_STATE = "CreateEndpoint"
#: Its Evaluate task, which creates the evaluation's processing job (the same module).
EVALUATE_STATE = "Evaluate"


def training_log_tail(clients: aws.Clients, job_name: str, lines: int = LIVE_LOG_LINES) -> list[str]:
    """The last lines of the job's CloudWatch log for the view ([] when there is none or it is unreadable)."""
    from hfpipe.core.run import logs

    try:
        return logs.format_lines(logs.log_tail(clients.logs, job_name, lines))
    except Exception:  # a live view must not die because CloudWatch Logs is slow or denied
        return []


def current_state(events: list[dict[str, Any]]) -> str | None:
    """The name of the state the execution last entered."""
    for event in reversed(events):
        details = event.get("stateEnteredEventDetails")
        if details:
            return str(details.get("name"))
    return None


def failure_of(events: list[dict[str, Any]], description: dict[str, Any]) -> str | None:
    """Error and cause of a failed execution, from DescribeExecution or its last failure event; a Lambda
    error's cause (its JSON error object) as its message."""
    found = description if description.get("error") or description.get("cause") else _last_failure(events)
    if found is None:
        return None
    cause = aws.cause_message(str(found["cause"])) if found.get("cause") else None
    return ": ".join(str(x) for x in (found.get("error"), cause) if x)


def _last_failure(events: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The details of the history's last failure event (its `error` and `cause`)."""
    for event in reversed(events):
        for key, details in event.items():
            if key.endswith("FailedEventDetails") and isinstance(details, dict):
                return details
    return None


def snapshot(
    clients: aws.Clients, execution_arn: str, now: datetime | None = None, previous: Snapshot | None = None
) -> Snapshot:
    """Read the execution, its history, the training job, its metrics and the endpoint once (`previous`:
    the last view of it, whose training progress this one never goes back on)."""
    snap = _execution_view(clients, execution_arn, now or datetime.now(UTC), previous)
    if not snap.plan:
        return snap
    _read_training_job(clients, snap, previous)
    if snap.plan.evaluation is not None and _entered(snap.events, EVALUATE_STATE):
        _read_evaluation_job(clients, snap)
    if snap.plan.deploy:
        _read_endpoint(clients, snap)
    return snap


def new_events(sfn: Any, arn: str, after: int) -> list[dict[str, Any]]:
    """The history events of an execution with an id above `after` (0: all of them), oldest first.

    A history only grows: its events are never changed, and "Events are numbered sequentially, starting at
    one" (GetExecutionHistory's HistoryEvent id; botocore's stepfunctions service-2.json). So a poll asks for
    the newest event alone first (reverseOrder, maxResults 1): while a run trains nothing is new, and that is
    the whole read; else its id says how many events are new, read newest first in a page of that size (and
    further pages with nextToken, up to an event already seen, should more have come in between). A live view
    thus never reads the whole history again. An answer in another order or size (moto alone ignores
    reverseOrder and maxResults) is filtered by id all the same.
    """
    size = 1000  # a whole history in the fewest pages (maxResults: at most 1000)
    if after:
        newest = sfn.get_execution_history(executionArn=arn, reverseOrder=True, maxResults=1)["events"]
        if len(newest) != 1:  # not paged: the whole history is here
            return sorted((e for e in newest if e["id"] > after), key=lambda e: int(e["id"]))
        if newest[0]["id"] <= after:
            return []
        size = min(size, int(newest[0]["id"]) - after)
    newer: list[dict[str, Any]] = []
    kwargs: dict[str, Any] = {"executionArn": arn, "reverseOrder": True, "maxResults": size}
    while True:
        page = sfn.get_execution_history(**kwargs)
        fresh = [e for e in page["events"] if e["id"] > after]
        newer.extend(fresh)
        # Done at an event seen, at the history's end, or with the event right after `after` (ids are sequential).
        done = len(fresh) < len(page["events"]) or any(e["id"] == after + 1 for e in fresh)
        if done or not page.get("nextToken"):
            return sorted(newer, key=lambda e: int(e["id"]))
        kwargs["nextToken"] = page["nextToken"]


def _execution_view(
    clients: aws.Clients, execution_arn: str, now: datetime, previous: Snapshot | None = None
) -> Snapshot:
    """The execution's part of the view: its description, current state, stored plan, output and failure
    (`previous`: the last view of the same execution, whose history this one only extends)."""
    import json

    import botocore.exceptions

    seen = previous.events if previous is not None and previous.execution_arn == execution_arn else []
    try:
        desc = clients.sfn.describe_execution(executionArn=execution_arn)
        events = seen + new_events(clients.sfn, execution_arn, int(seen[-1]["id"]) if seen else 0)
    except (botocore.exceptions.ClientError, botocore.exceptions.BotoCoreError) as exc:
        raise aws.aws_error(exc, f"reading execution {execution_arn}") from None
    snap = Snapshot(
        execution_arn=execution_arn,
        execution_name=desc.get("name", execution_arn.rsplit(":", 1)[-1]),
        status=desc["status"],
        started=as_utc(desc.get("startDate")),
        stopped=as_utc(desc.get("stopDate")),
        state=current_state(events),
        # The stored plan is the Plan state's first exit (aws.stored_plan), which a longer history keeps.
        plan=previous.plan if seen and previous is not None and previous.plan else aws.stored_plan(events),
        endpoint_created=any(
            (e.get("stateExitedEventDetails") or {}).get("name") == CREATE_ENDPOINT_STATE for e in events
        ),
        now=now,
        events=events,
    )
    if desc.get("output"):
        try:
            snap.output = json.loads(desc["output"])
        except ValueError:
            snap.output = desc["output"]
    if snap.status in {"FAILED", "TIMED_OUT", "ABORTED"}:
        snap.failure = failure_of(events, desc)
    return snap


def _read_training_job(clients: aws.Clients, snap: Snapshot, previous: Snapshot | None) -> None:
    """The training job of the plan, once launched: its description, metrics, cost so far, log tail, progress."""
    import botocore.exceptions

    assert snap.plan is not None
    job_name = snap.plan.training_job_name
    if job_name:
        try:
            snap.training_job = clients.sagemaker.describe_training_job(TrainingJobName=job_name)
        except botocore.exceptions.ClientError as exc:
            # Before Launch has run the job does not exist yet; that is a state, not an error.
            if _client_error_code(exc) not in {"ValidationException", "ResourceNotFound"}:
                raise aws.aws_error(exc, f"reading training job {job_name}") from None
    if snap.training_job:
        snap.metrics = latest_metrics(clients, snap.training_job)
        snap.cost_so_far_usd = cost.training_cost_so_far(
            snap.training_job, snap.plan.price_per_hour_usd, snap.plan.instance_count, snap.now
        )
        snap.log_tail = training_log_tail(clients, snap.training_job["TrainingJobName"])
        found = progress(snap.log_tail, previous.progress if previous else None)
        snap.progress = found.of_job(snap.training_job.get("TrainingJobStatus")) if found else None


def _read_evaluation_job(clients: aws.Clients, snap: Snapshot) -> None:
    """The plan's evaluation job, once its Evaluate state created it: its description and cost so far."""
    import botocore.exceptions

    assert snap.plan is not None and snap.plan.evaluation is not None
    e = snap.plan.evaluation
    try:
        snap.evaluation_job = clients.sagemaker.describe_processing_job(
            ProcessingJobName=e.processing_job_name
        )
    except botocore.exceptions.ClientError as exc:
        # Refused before it was created (CreateProcessingJob's ValidationException): a state, not an error.
        if _client_error_code(exc) not in {"ValidationException", "ResourceNotFound"}:
            raise aws.aws_error(exc, f"reading evaluation job {e.processing_job_name}") from None
        return
    snap.evaluation_cost_so_far_usd = cost.processing_cost_so_far(
        snap.evaluation_job, e.price_per_hour_usd, e.instance_count, snap.now
    )


def _entered(events: list[dict[str, Any]], state: str) -> bool:
    """Whether the history shows the execution entering `state`."""
    return any((e.get("stateEnteredEventDetails") or {}).get("name") == state for e in events)


def _read_endpoint(clients: aws.Clients, snap: Snapshot) -> None:
    """The plan's endpoint status; one that does not exist is deleted, never created or not created yet."""
    import botocore.exceptions

    assert snap.plan is not None
    endpoint = snap.plan.endpoint_name
    if not _entered(snap.events, CREATE_ENDPOINT_STATE):
        # The plan's endpoint is named after the execution, and only its CreateEndpoint state makes it
        # (stacks/constructs/pipeline_state_machine.py): before that state there is none to describe.
        snap.endpoint_status = "never created" if snap.finished else "not created yet"
        return
    try:
        snap.endpoint_status = clients.sagemaker.describe_endpoint(EndpointName=endpoint)["EndpointStatus"]
    except botocore.exceptions.ClientError as exc:
        if _client_error_code(exc) not in {"ValidationException", "ResourceNotFound"}:
            raise aws.aws_error(exc, f"reading endpoint {endpoint}") from None
        if snap.endpoint_created:
            snap.endpoint_status = "deleted"
        else:
            snap.endpoint_status = "never created" if snap.finished else "not created yet"
