"""Step Functions limits every execution must fit, and how the plan derives its waits from them.

Standard workflows keep at most 25,000 events in an execution's history; an execution that reaches the
limit fails, and no Catch applies ("Quotas related to state machine executions", "Maximum execution
history size", https://docs.aws.amazon.com/step-functions/latest/dg/service-quotas.html). The state
machine's own ``TimeoutSeconds`` ends an execution as TIMED_OUT, again without a Catch. So the plan
derives every wait from the recipe and refuses what cannot fit, before anything is created.

History events per state, as Step Functions records them (the event types of ``GetExecutionHistory``,
https://docs.aws.amazon.com/step-functions/latest/apireference/API_HistoryEvent.html):

- execution: ExecutionStarted + ExecutionSucceeded/Failed/TimedOut/Aborted = 2
- Pass, Choice, Wait, Succeed: <Type>StateEntered + <Type>StateExited = 2; Fail: FailStateEntered = 1
- Task, request-response (Lambda invoke, SageMaker create, aws-sdk describe): TaskStateEntered,
  TaskScheduled, TaskStarted, TaskSucceeded, TaskStateExited = 5
- Task, ``.waitForTaskToken``: the same plus TaskSubmitted = 6
- each retried attempt adds TaskScheduled, TaskStarted, TaskFailed = 3; a caught error adds TaskFailed
  and TaskStateExited in place of TaskSucceeded and TaskStateExited

Training waits for an event (Launch is a ``.waitForTaskToken`` task) and re-checks the job every
``TRAINING_RECHECK_SECONDS`` in case the event never comes: the task times out (States.Timeout), its
Retry runs Launch again, which completes the task itself when the job has ended. Each re-check adds
TaskTimedOut + TaskScheduled + TaskStarted + TaskSubmitted = 4 events, at most ``TRAINING_RECHECKS``
of them. The endpoint wait polls: Wait (2) + DescribeEndpoint (5) + Choice (2) + Pass (2) +
Choice (2) = 13 events per poll, bounded by ``MAX_ENDPOINT_POLLS``.
"""

from __future__ import annotations

import math

HISTORY_EVENT_LIMIT = 25_000
#: The state machine's TimeoutSeconds (a Standard workflow may run up to one year; 35 days covers the
#: longest training job SageMaker runs, 28 days of MaxRuntimeInSeconds, plus spot waiting and deployment).
EXECUTION_TIMEOUT_SECONDS = 35 * 24 * 3600
#: Beyond StoppingCondition, a job spends time starting instances, downloading data and the image, and
#: uploading the model; the training wait adds this much before Launch gives the job up as stuck.
TRAINING_WAIT_MARGIN_SECONDS = 2 * 3600
#: Time for everything but the two waits: Lambdas (at most 15 minutes each), Retry back-offs, clean-up, and
#: the evaluation job (``EVALUATION_MAX_SECONDS`` of it).
OTHER_STATES_SECONDS = 6 * 3600
#: The evaluation job's MaxRuntimeInSeconds at most (the training job's limit when lower): inside the other
#: states' time, so the longest execution Plan accepts stays within the execution timeout.
EVALUATION_MAX_SECONDS = 4 * 3600
#: The Launch task's own timeout: how often the waiting task re-checks its job when no event came, so a
#: finished job completes its run within this long of its end whatever happened to the event.
TRAINING_RECHECK_SECONDS = 3600
#: The longest training wait Plan accepts: a run that does not deploy, whose wait fills the execution
#: timeout but for the other states (Plan refuses more, ``worst_case_seconds``).
MAX_TRAINING_WAIT_SECONDS = EXECUTION_TIMEOUT_SECONDS - OTHER_STATES_SECONDS
#: The Launch task's Retry on States.Timeout (MaxAttempts, a literal in the definition): enough re-checks
#: for the longest wait; Launch itself ends a shorter plan's wait at its ``training_wait_seconds``.
TRAINING_RECHECKS = math.ceil(MAX_TRAINING_WAIT_SECONDS / TRAINING_RECHECK_SECONDS)
#: History events of one re-check: TaskTimedOut, TaskScheduled, TaskStarted, TaskSubmitted.
EVENTS_PER_RECHECK = 4
EVENTS_PER_ENDPOINT_POLL = 13
MAX_ENDPOINT_POLLS = 360
#: Every state outside the endpoint loop visited once on the longest path (success with deploy, gate,
#: evaluation, smoke test and endpoint deletion, or a failure through clean-up and the failure report), counted
#: with the per-state numbers above, plus every retry the Retry policies allow on that path (3 events each).
#: The evaluation adds 23: Evaluate? 2, PrepareEvaluation, StoreEvaluation and (a document the gate cannot
#: read) RecordEvaluationFailure 5 each, the .sync Evaluate 6 (TaskSubmitted too); its retries, 44 (the three
#: Lambdas' 6 service-exception and 6 throttling attempts each, Evaluate's 3 catch-all and 5 capacity attempts).
FIXED_PATH_EVENTS = 143
RETRY_EVENTS = 3 * (60 + 44)


#: SageMaker real-time endpoints must answer InvokeEndpoint within 60 seconds
#: (https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_runtime_InvokeEndpoint.html), so a
#: smoke-test latency limit above that can never be observed.
MAX_SMOKE_LATENCY_MS = 60_000
#: The SmokeTest Lambda outlives the slowest answer the latency check accepts (and its own start-up), so
#: a slow endpoint fails the check with its latency instead of timing out the Lambda.
SMOKE_TEST_TIMEOUT_SECONDS = 150
#: Every other pipeline Lambda (Plan, Launch, Gate, Report, Cleanup, OnTrainingEvent).
LAMBDA_TIMEOUT_SECONDS = 120


def training_wait_seconds(max_run_seconds: int, max_wait_seconds: int | None) -> int:
    """The longest Launch waits for its job: the job's own limit (MaxWait with spot, else MaxRuntime)
    plus a margin, counted from the job's CreationTime; a re-check past it gives the job up as stuck.

    MaxWaitTimeInSeconds already includes the run: it is "the amount of time spent waiting for Spot
    capacity plus the amount of time the job can run" (StoppingCondition,
    https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_StoppingCondition.html), so the two
    are not added.
    """
    limit = max_wait_seconds if max_wait_seconds is not None else max_run_seconds
    return int(limit) + TRAINING_WAIT_MARGIN_SECONDS


def endpoint_polling(endpoint_timeout_seconds: int, requested_poll_seconds: int) -> tuple[int, int]:
    """(poll seconds, number of polls) covering the endpoint timeout in at most MAX_ENDPOINT_POLLS polls."""
    poll = max(requested_poll_seconds, math.ceil(endpoint_timeout_seconds / MAX_ENDPOINT_POLLS))
    return poll, max(1, math.ceil(endpoint_timeout_seconds / poll))


def worst_case_history_events(endpoint_polls: int) -> int:
    """The most history events an execution with this many endpoint polls can record (every training
    re-check included, as if no training event ever came)."""
    return (
        FIXED_PATH_EVENTS
        + RETRY_EVENTS
        + TRAINING_RECHECKS * EVENTS_PER_RECHECK
        + endpoint_polls * EVENTS_PER_ENDPOINT_POLL
    )


def worst_case_seconds(training_wait: int, poll_seconds: int, endpoint_polls: int) -> int:
    """The longest an execution with these waits can run."""
    return training_wait + poll_seconds * endpoint_polls + OTHER_STATES_SECONDS
