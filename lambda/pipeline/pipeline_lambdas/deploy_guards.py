"""What the deploy re-checks besides Prepare's first look (deploy_prepare.py, whose function runs them all): one
deploy at a time per endpoint (the deploy state machine's RUNNING executions, ``other_deploy``), the update's
rollback alarms before anything is written (``alarm_wait``), the version's approval right before traffic moves
and before the record is written (``recheck_approval``), and, when the way back after a failed smoke test or a
rejection failed, what serves now (``way_back_failed``). What serves is read from the endpoint
(hfpipe.core.deploy.what_serves), never from its tag or record.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any, NoReturn

from hfpipe.core import throttling
from hfpipe.core.causes import cause_message
from hfpipe.core.deploy import deploy_limits
from hfpipe.core.deploy.deploy_plan import AlarmWait, DeployPlan
from hfpipe.core.deploy.what_serves import Serving, what_serves
from hfpipe.core.promotion import registry
from pipeline_lambdas.deploy_common import describe_endpoint

#: DescribeAlarms takes at most 100 AlarmNames (botocore's model: AlarmNames max 100).
ALARM_NAMES_PER_CALL = 100


class RollbackAlarmInAlarm(Exception):
    """A rollback alarm of the update was in ALARM before the deploy began and still is at the wait's bound."""


class AlarmLookupThrottled(Exception):
    """CloudWatch kept throttling DescribeAlarms; the state machine retries Prepare."""


class VersionRejectedDuringDeploy(Exception):
    """The version is no longer Approved (re-checked before traffic moves and before the record is written)."""


class WayBackFailed(Exception):
    """The previous config could not be put back (the update back refused, failed or timed out); the error
    names what the endpoint serves instead, read from it."""


def other_deploy(
    stepfunctions: Any, state_machine_arn: str, execution_name: str, name: str, key: str = "endpoint"
) -> str | None:
    """The RUNNING execution of the state machine for endpoint ``name`` (or what its input's ``key`` names:
    the adapter state machine's ``adapter``) that goes first, if it is not this one: the earliest started (then the least name), so of two deploys that see each other one goes on.
    ListExecutions is eventually consistent (API reference: "results are best effort and may not reflect very
    recent updates"); an execution it does not list yet is caught by its own Prepare, which sees this one."""
    running: list[tuple[Any, str, str]] = []
    paginator = stepfunctions.get_paginator("list_executions")
    for page in paginator.paginate(stateMachineArn=state_machine_arn, statusFilter="RUNNING"):
        for execution in page.get("executions", []):
            described = stepfunctions.describe_execution(executionArn=execution["executionArn"])
            try:
                endpoint = json.loads(described.get("input") or "{}").get(key)
            except (ValueError, AttributeError):
                endpoint = None
            if endpoint == name or execution.get("name") == execution_name:
                running.append((execution["startDate"], execution["name"], execution["executionArn"]))
    # Not listed yet itself, this execution is the newest: any listed one goes first.
    first = min(running, default=None)
    return f"{first[1]} (started {first[0]})" if first and first[1] != execution_name else None


def recheck_approval(sagemaker: Any, plan: DeployPlan, before: str) -> dict[str, Any]:
    """The version is still Approved ``before`` traffic moves or the record is written; else
    VersionRejectedDuringDeploy saying what the endpoint serves and what the state machine does next."""
    status = sagemaker.describe_model_package(ModelPackageName=plan.model_version_arn).get(
        "ModelApprovalStatus", ""
    )
    if status == "Approved":
        return {"status": status}
    endpoint = describe_endpoint(sagemaker, plan.endpoint_name)
    serving = (
        f"{plan.endpoint_name} serves config {endpoint.get('EndpointConfigName')} "
        f"({endpoint.get('EndpointStatus')})"
        if endpoint
        else f"{plan.endpoint_name} does not exist"
    )
    then = (
        "the previous config is put back"
        if plan.action == "update" and before == "the record is written"
        else "what this deploy made is cleaned up"
    )
    raise VersionRejectedDuringDeploy(
        f"version {plan.version_ref} ({plan.model_version_arn}) is {status or 'without a status'} "
        f"now, checked before {before}: it was Approved when the deploy started; endpoint {serving}; {then}, "
        "and nothing is recorded"
    )


def _error_text(error: Any) -> str:
    """'Error: cause' of a caught error; a Lambda's cause is its JSON error, whose errorMessage is the text."""
    if not isinstance(error, dict):
        return "an error not given"
    return f"{error.get('Error', 'an error')}: {cause_message(error.get('Cause'))}"


def way_back_failed(sagemaker: Any, plan: DeployPlan, env: str, error: Any, rollback_error: Any) -> NoReturn:
    """Always raises WayBackFailed: the deploy ``error`` that sent it back, why the way back failed
    (``rollback_error``), and what the endpoint serves now, read from it. The endpoint's tag and the deployment
    record are left naming the previous version: a rerun of the deploy of this version smoke-tests it again."""
    old_arn = plan.previous.model_version_arn if plan.previous else None
    old_config = plan.previous.endpoint_config_name if plan.previous else None
    old = registry.ref_of_arn(old_arn, env) if old_arn else "the previous version"
    endpoint = plan.endpoint_name
    try:
        serving: Serving | None = what_serves(sagemaker, endpoint)
        now = f"endpoint {endpoint} is {serving.describe(env)}" if serving else f"endpoint {endpoint} is gone"
    except Exception as err:  # the error must still say what happened, and that what serves is not known
        serving, now = (
            None,
            f"what endpoint {endpoint} serves could not be read ({type(err).__name__}: {err})",
        )
    claims = ""
    if serving is not None and serving.version_arn != old_arn:
        claims = f"; its tag and deployment record still name {old}, which does not serve"
    raise WayBackFailed(
        f"the way back to config {old_config} ({old}) failed: "
        f"{_error_text(rollback_error)}; it was taken after {_error_text(error)}; {now}{claims}; to settle "
        f"it, deploy the version that should serve (`hfpipe deploy --env {env} --model VERSION --endpoint "
        f"{plan.name}`)"
    )


def firing_alarms(cloudwatch: Any, names: list[str]) -> list[str]:
    """The alarms of ``names`` in ALARM now (DescribeAlarms, paginated, 100 names a call). CloudWatch
    throttling that outlasts botocore's retries becomes AlarmLookupThrottled."""
    fired: set[str] = set()
    paginator = cloudwatch.get_paginator("describe_alarms")
    try:
        for start in range(0, len(names), ALARM_NAMES_PER_CALL):
            for page in paginator.paginate(AlarmNames=names[start : start + ALARM_NAMES_PER_CALL]):
                for alarm in page.get("MetricAlarms", []) + page.get("CompositeAlarms", []):
                    if alarm.get("StateValue") == "ALARM":
                        fired.add(str(alarm["AlarmName"]))
    except Exception as err:
        if throttling.is_throttled(err):  # left after botocore's own retries
            raise AlarmLookupThrottled(
                f"CloudWatch throttled DescribeAlarms for the rollback alarms {', '.join(names)}: {err}"
            ) from err
        raise
    return sorted(fired)


def alarm_wait(
    cloudwatch: Any,
    update_request: dict[str, Any],
    waiting: AlarmWait | None,
    now: datetime | None = None,
) -> AlarmWait | None:
    """None when no rollback alarm of ``update_request`` (its AutoRollbackConfiguration) is in ALARM; else the
    wait to take before Prepare looks again (``waiting``: the previous look's, None the first time). At the
    bound (ALARM_WAIT_SECONDS after the first look, or ALARM_MAX_POLLS looks) RollbackAlarmInAlarm.

    SageMaker rolls a blue/green update back when one of these alarms is in ALARM during its baking
    (https://docs.aws.amazon.com/sagemaker/latest/dg/deployment-guardrails-configuration.html): an update
    started while one already is would be rolled back at once, for errors that came before it."""
    config = update_request.get("DeploymentConfig") or {}
    names = [a["AlarmName"] for a in (config.get("AutoRollbackConfiguration") or {}).get("Alarms", [])]
    fired = firing_alarms(cloudwatch, names) if names else []
    if not fired:
        return None
    now = now or datetime.now(UTC)
    first_look = now.isoformat(timespec="seconds")
    began, polls = (waiting.since, waiting.polls) if waiting else (first_look, 0)
    since = datetime.fromisoformat(began)
    waited = int((now - since).total_seconds())
    if (
        now >= since + timedelta(seconds=deploy_limits.ALARM_WAIT_SECONDS)
        or polls >= deploy_limits.ALARM_MAX_POLLS
    ):
        raise RollbackAlarmInAlarm(
            f"rollback alarm(s) {', '.join(fired)} of endpoint "
            f"{update_request.get('EndpointName')} were in ALARM before this deploy began ({began}) "
            f"and still are after {waited} s of waiting; SageMaker would roll the update back at once, so "
            "nothing was changed: deploy again once they are OK (an alarm is OK again one period after its "
            f"errors stop: aws cloudwatch describe-alarms --alarm-names {' '.join(fired)})"
        )
    return AlarmWait(
        since=began,
        alarms=fired,
        polls=polls + 1,
        waited_seconds=waited,
        wait_seconds=deploy_limits.ALARM_WAIT_SECONDS,
        poll_seconds=deploy_limits.ALARM_POLL_SECONDS,
    )
