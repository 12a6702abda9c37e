"""The deploy state machine's waits, bounded (as hfpipe.core.limits does for the pipeline): how often it polls
DescribeEndpoint, how many polls the longest deployment allowed needs, how long an update waits for rollback
alarms already in ALARM, its execution timeout, and the most history events an execution can record (far
below Step Functions' 25,000). Stdlib only.
"""

from __future__ import annotations

import math

from hfpipe.core.deploy.deployments import MAX_DEPLOYMENT_SECONDS, PROVISIONING_SECONDS, EndpointSettings

#: DescribeEndpoint every minute while an endpoint is created or updated.
POLL_SECONDS = 60
#: After MaximumExecutionTimeoutInSeconds SageMaker rolls the update back; the poll waits this long more.
ROLLBACK_SECONDS = 3600
#: Polls of the longest deployment allowed: 28,800 s of blue/green, then its rollback.
MAX_POLLS = math.ceil((MAX_DEPLOYMENT_SECONDS + ROLLBACK_SECONDS) / POLL_SECONDS)
#: Polls of the deploy's own rollback after a failed smoke test (an all-at-once update to the old config).
ROLLBACK_POLLS = math.ceil((PROVISIONING_SECONDS + ROLLBACK_SECONDS) / POLL_SECONDS)
#: The way back (PutPreviousConfigBack) waits for an endpoint that cannot take an UpdateEndpoint yet (Updating,
#: SystemUpdating, RollingBack: lambda/pipeline/pipeline_lambdas/deploy_way_back.py) by a Retry every POLL_SECONDS,
#: this many times at most (30 minutes): three events a retry (LambdaFunctionScheduled, Started, Failed), in
#: RETRY_EVENTS.
WAY_BACK_READY_ATTEMPTS = 30
#: An update whose rollback alarms are in ALARM before it starts waits for them this long at most (CloudWatch's
#: clock: Prepare compares its own time with the first look's), polling them every ALARM_POLL_SECONDS. The
#: alarms have one-minute periods and treat missing data as not breaching: one whose errors have stopped is OK
#: again within a period or two; one still in ALARM after five is fed by the live fleet's own traffic, and
#: SageMaker would roll the update back at once (docs/deploy.md).
ALARM_WAIT_SECONDS = 300
ALARM_POLL_SECONDS = POLL_SECONDS
#: Polls of that wait at the most, whatever its Wait states last: on AWS the deadline comes first (after
#: ALARM_WAIT_SECONDS / ALARM_POLL_SECONDS + 1 polls); where waits are shortened (local mode's time scale,
#: 0.01 in the local world: 0.6 s a poll) the deadline is still real time, and this bounds the history.
ALARM_MAX_POLLS = 500
#: Wait (2) + Prepare again (5) + Choice (2) per poll of the alarms.
EVENTS_PER_ALARM_POLL = 9
#: Wait (2) + DescribeEndpoint (5) + Choice (2) + Pass (2) + Choice (2), as hfpipe.core.limits counts them.
EVENTS_PER_POLL = 13
#: Every state outside the two poll loops on the longest path (Prepare, CreateModel, CreateEndpointConfig, the
#: approval re-check, UpdateEndpoint, SmokeTest, the rollback, the read of what serves after a failed way back,
#: DeployCleanup, the Fail, and the Pass/Choice states between), with the events hfpipe.core.limits counts per state, plus every retry their Retry policies
#: allow (3 each).
FIXED_PATH_EVENTS = 100
RETRY_EVENTS = 3 * (120 + WAY_BACK_READY_ATTEMPTS)
#: Lambdas (15 minutes at most each), Retry back-offs: everything but the two waits.
OTHER_STATES_SECONDS = 2 * 3600
#: The deploy state machine's TimeoutSeconds: both waits at their longest, and the rest.
EXECUTION_TIMEOUT_SECONDS = (
    (MAX_POLLS + ROLLBACK_POLLS) * POLL_SECONDS
    + ALARM_WAIT_SECONDS
    + ALARM_POLL_SECONDS
    + WAY_BACK_READY_ATTEMPTS * POLL_SECONDS
    + OTHER_STATES_SECONDS
)


def endpoint_polls(settings: EndpointSettings) -> int:
    """Polls of one deploy's wait: its blue/green deployment at its longest, then SageMaker's rollback
    (a new endpoint needs less: it has no traffic steps)."""
    return math.ceil((settings.deployment_seconds + ROLLBACK_SECONDS) / POLL_SECONDS)


def worst_case_history_events(
    polls: int = MAX_POLLS, rollback_polls: int = ROLLBACK_POLLS, alarm_polls: int = ALARM_MAX_POLLS
) -> int:
    """The most history events a deploy execution can record: the three poll loops used up, every retry
    taken."""
    return (
        FIXED_PATH_EVENTS
        + RETRY_EVENTS
        + (polls + rollback_polls) * EVENTS_PER_POLL
        + alarm_polls * EVENTS_PER_ALARM_POLL
    )
