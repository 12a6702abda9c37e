"""No execution outgrows Step Functions: the wait design on the synthesized definition, Plan's limits, and
the longest execution the schema allows, run on the local engine with its history events counted as
AWS counts them (hfpipe.core.limits documents the per-state numbers used)."""

from __future__ import annotations

import itertools
import json

import pytest
from plan_config import dev_config

from hfpipe.core import limits
from hfpipe.core.recipe.schema import RecipeError

_ids = itertools.count()
LONGEST_MAX_RUN = 2_419_200  # the schema's maximum for training.max_run_seconds (SageMaker's 28 days)
ENDPOINT_TIMEOUT = limits.MAX_ENDPOINT_POLLS * 10  # 360 polls of 10 s: the most polls Plan allows


def definition(template):
    (machine,) = [
        r
        for r in template["Resources"].values()
        if r["Type"] == "AWS::StepFunctions::StateMachine"
        and r["Properties"]["StateMachineName"].endswith("-pipeline")
    ]
    parts = machine["Properties"]["DefinitionString"]["Fn::Join"][1]
    return json.loads("".join(p if isinstance(p, str) else "0" for p in parts)), machine["Properties"]


def test_launch_waits_for_the_training_event_and_rechecks_the_job_every_hour(template):
    states, _props = definition(template)
    launch = states["States"]["Launch"]
    assert launch["Resource"].endswith(":states:::lambda:invoke.waitForTaskToken")
    # The task times out every hour and its Retry runs Launch again: a re-check of the job.
    assert launch["TimeoutSeconds"] == limits.TRAINING_RECHECK_SECONDS == 3600
    assert "TimeoutSecondsPath" not in launch
    (recheck,) = [r for r in launch["Retry"] if r["ErrorEquals"] == ["States.Timeout"]]
    assert recheck["MaxAttempts"] == limits.TRAINING_RECHECKS
    assert recheck.get("BackoffRate", 2.0) == 1 and recheck["IntervalSeconds"] == 1
    # Enough re-checks for the longest training wait Plan accepts, no more than the history allows.
    assert limits.TRAINING_RECHECKS * limits.TRAINING_RECHECK_SECONDS >= limits.MAX_TRAINING_WAIT_SECONDS
    assert (limits.TRAINING_RECHECKS - 1) * limits.TRAINING_RECHECK_SECONDS < limits.MAX_TRAINING_WAIT_SECONDS
    # After the last re-check, States.Timeout goes to clean-up like any other error.
    assert any(c["ErrorEquals"] == ["States.ALL"] and c["Next"] == "CleanupOnError" for c in launch["Catch"])
    assert launch["Parameters"]["Payload"]["task_token.$"] == "$$.Task.Token"
    # No polling for training: no Wait state, no DescribeTrainingJob loop.
    assert "WaitForTraining" not in states["States"] and "DescribeTrainingJob" not in states["States"]
    assert states["TimeoutSeconds"] == limits.EXECUTION_TIMEOUT_SECONDS
    # The event routing: this environment's jobs that ended -> OnTrainingEvent.
    rules = [r["Properties"] for r in template["Resources"].values() if r["Type"] == "AWS::Events::Rule"]
    # (The reaper's rule is a schedule, with no pattern: tests/infra/test_reaper_stack.py.)
    patterns = {r["EventPattern"]["detail-type"][0]: r["EventPattern"] for r in rules if "EventPattern" in r}
    training = patterns["SageMaker Training Job State Change"]
    assert training["source"] == ["aws.sagemaker"]
    assert training["detail"] == {
        "TrainingJobStatus": ["Completed", "Failed", "Stopped"],
        "TrainingJobName": [{"prefix": "dev-"}],
    }
    ended = patterns["Step Functions Execution Status Change"]
    assert ended["detail"]["status"] == ["TIMED_OUT", "ABORTED", "FAILED"]


def plan_of(recipe_overrides, poll=1):
    from hfpipe.core.run.plan import build_plan
    from hfpipe.local.engine.quotas import QuotaTable, default_quotas

    config = dev_config()
    event = {"recipe_name": "tiny-spot", "overrides": recipe_overrides, "poll_seconds": poll}
    return build_plan(event, "limits-1", config, QuotaTable(default_quotas()).client("eu-west-1"))


def longest_overrides(extra_seconds=0):
    """The longest spot job the plan accepts: training wait + endpoint wait + the rest == the timeout."""
    max_wait = (
        limits.EXECUTION_TIMEOUT_SECONDS
        - limits.OTHER_STATES_SECONDS
        - limits.TRAINING_WAIT_MARGIN_SECONDS
        - ENDPOINT_TIMEOUT
        + extra_seconds
    )
    return {
        "training.max_run_seconds": LONGEST_MAX_RUN,
        "training.spot.max_wait_seconds": max_wait,
        "serving.endpoint_timeout_seconds": ENDPOINT_TIMEOUT,
    }


def test_plan_derives_the_waits_from_the_job_limits():
    plan = plan_of(longest_overrides())
    spot_wait = plan.training_job_request["StoppingCondition"]["MaxWaitTimeInSeconds"]
    assert plan.training_wait_seconds == spot_wait + limits.TRAINING_WAIT_MARGIN_SECONDS
    # A requested 1 s poll is stretched so the endpoint wait fits MAX_ENDPOINT_POLLS polls.
    assert (plan.poll_seconds, plan.endpoint_max_polls) == (10, limits.MAX_ENDPOINT_POLLS)
    longest = limits.worst_case_seconds(
        plan.training_wait_seconds, plan.poll_seconds, plan.endpoint_max_polls
    )
    assert longest == limits.EXECUTION_TIMEOUT_SECONDS


def test_plan_refuses_a_run_that_cannot_finish_before_the_execution_timeout():
    with pytest.raises(RecipeError, match=r"recipe.training.spot.max_wait_seconds: \d+ .* execution timeout"):
        plan_of(longest_overrides(extra_seconds=1))


def test_plan_refuses_a_latency_limit_no_endpoint_can_be_held_to():
    with pytest.raises(RecipeError, match=r"recipe\.serving\.max_latency_ms: 90000"):
        plan_of({"serving.max_latency_ms": 90000})


#: Events per state as Step Functions records them (hfpipe.core.limits, the HistoryEvent types).
EVENTS_PER_STATE = {"Task": 5, "Pass": 2, "Choice": 2, "Wait": 2, "Succeed": 2, "Fail": 1}


def aws_event_count(history):
    """History events of an execution as AWS records them: per state entered, +1 for each
    .waitForTaskToken task (TaskSubmitted), +3 per retried attempt, +2 for the execution."""
    entered = [e["type"].removesuffix("StateEntered") for e in history if e["type"].endswith("StateEntered")]
    count = 2 + sum(EVENTS_PER_STATE[t] for t in entered)
    count += sum(1 for e in history if e["type"] == "TaskSubmitted")
    task_states = entered.count("Task")
    attempts = sum(1 for e in history if e["type"] == "TaskScheduled") + sum(
        1 for e in history if e["type"] == "LambdaFunctionScheduled"
    )
    return count + 3 * max(0, attempts - task_states)


@pytest.mark.slow
def test_longest_allowed_execution_fits_the_history_limit(fresh):
    """The longest recipe the schema and Plan allow: a 28-day spot job waiting the longest MaxWait, then
    an endpoint that never comes InService for every allowed poll, then clean-up and the failure report."""
    fresh.on_endpoint = lambda ep: setattr(ep, "endpoint_status", "Creating")
    name = f"longest-{next(_ids)}"
    r = fresh.run(
        {"recipe_name": "tiny-spot", "overrides": longest_overrides(), "poll_seconds": 1},
        name=name,
        timeout_s=600,
    )
    assert (r.status, r.error) == ("FAILED", "EndpointWaitTimeout"), r.cause
    assert r.states.count("DescribeEndpoint") == limits.MAX_ENDPOINT_POLLS
    assert "CleanupOnError" in r.states
    counted = aws_event_count(r.history)
    print(
        f"longest execution: {counted} history events as AWS counts them ({len(r.history)} recorded by moto)"
    )
    assert counted <= limits.worst_case_history_events(limits.MAX_ENDPOINT_POLLS) < limits.HISTORY_EVENT_LIMIT
    # Nothing else it created is left: the endpoint is still Creating, which SageMaker will not delete yet,
    # so clean-up leaves it and the config and model it uses for `hfpipe cleanup` (teardown.py).
    left = fresh.sagemaker_resources()
    assert [
        n
        for names in (left["models"], left["endpoint_configs"], left["endpoints"])
        for n in names
        if name in n
    ] == [f"dev-{name}-model", f"dev-{name}-config", f"dev-{name}-ep"]
    endpoint = fresh.client("sagemaker").describe_endpoint(EndpointName=f"dev-{name}-ep")
    assert endpoint["EndpointStatus"] == "Creating"


def lost_event_run(engine, training=None, recipe="tiny-qa", **inp):
    """A run whose training-job event never comes; the Launch task's hourly timeout takes 1 s."""
    engine.drop_training_events = True
    engine.timeout_scale = 1 / limits.TRAINING_RECHECK_SECONDS
    engine.training = training
    name = f"lost-{next(_ids)}"
    try:
        r = engine.run({"recipe_name": recipe, "poll_seconds": 1, **inp}, name=name, timeout_s=120)
    finally:
        engine.drop_training_events, engine.timeout_scale, engine.training = False, 1.0, None
    return name, r


def test_a_lost_training_event_still_completes_the_run_after_the_recheck(fresh):
    name, r = lost_event_run(fresh)
    assert r.status == "SUCCEEDED", (r.error, r.cause)
    assert r.output["training"]["TrainingJobStatus"] == "Completed"
    assert "CreateModel" in r.states and "SmokeTest" in r.states
    # One re-check: the first attempt timed out, the retried Launch found the job ended.
    assert [e["type"] for e in r.history].count("TaskTimedOut") == 1
    assert r.states.count("Launch") == 1  # retried inside the state
    # No training event was delivered for this job (its evaluation job's own event was).
    assert not [
        e
        for e in fresh.events
        if e["detail-type"] == "SageMaker Training Job State Change" and name in json.dumps(e)
    ]


def test_a_recheck_costs_the_history_events_the_limits_count(fresh):
    """The per-re-check events limits.EVENTS_PER_RECHECK counts: the same run with and without the event."""
    _name, lost = lost_event_run(fresh, deploy=False)
    heard = fresh.run(
        {"recipe_name": "tiny-qa", "poll_seconds": 1, "deploy": False}, name=f"heard-{next(_ids)}"
    )
    assert (lost.status, heard.status) == ("SUCCEEDED", "SUCCEEDED")
    lost_types, heard_types = [e["type"] for e in lost.history], [e["type"] for e in heard.history]

    # moto may record the callback's TaskSucceeded twice when it comes during the attempt's own Invoke
    # (Launch completing the task itself), and where the second lands depends on timing, inside the re-check's
    # events too (a clean-clone run saw it between TaskStarted and TaskSubmitted); AWS records one per task
    # (HistoryEvent types). So: every other event in order, and at most that one extra TaskSucceeded.
    def others(types: list[str]) -> list[str]:
        return [t for t in types if t != "TaskSucceeded"]

    # The re-check: the attempt's TaskTimedOut, then the retried attempt's Scheduled/Started/Submitted.
    lost_others = others(lost_types)
    at = lost_others.index("TaskTimedOut")
    recheck = lost_others[at : at + limits.EVENTS_PER_RECHECK]
    assert recheck == ["TaskTimedOut", "TaskScheduled", "TaskStarted", "TaskSubmitted"]
    assert lost_others[:at] + lost_others[at + limits.EVENTS_PER_RECHECK :] == others(heard_types)
    assert lost_types.count("TaskSucceeded") - heard_types.count("TaskSucceeded") in (0, 1)


def test_a_job_that_failed_without_an_event_ends_as_training_job_failed(fresh):
    def fail(request, job):
        job.training_job_status = "Failed"
        job.failure_reason = "AlgorithmError: CUDA out of memory"

    _name, r = lost_event_run(fresh, training=fail)
    assert (r.status, r.error) == ("FAILED", "TrainingJobFailed"), r.cause
    assert "CUDA out of memory" in r.cause and "CreateModel" not in r.states


def test_a_job_still_running_past_its_training_wait_is_given_up_and_stopped(fresh):
    """The re-check bounds the wait by the plan's training_wait_seconds (the job's own limit + margin)."""
    import datetime

    def stuck(request, job):
        job.training_job_status = "InProgress"
        job.creation_time = datetime.datetime.now(datetime.UTC) - datetime.timedelta(days=30)

    _name, r = lost_event_run(fresh, training=stuck)
    assert (r.status, r.error) == ("FAILED", "TrainingWaitExceeded"), r.cause
    assert "past the plan's training wait" in r.cause
    assert "CleanupOnError" in r.states and "CreateModel" not in r.states


def test_state_machine_logs_to_a_vended_logs_group(template):
    _, machine = definition(template)
    destination = machine["LoggingConfiguration"]["Destinations"][0]
    group_id = destination["CloudWatchLogsLogGroup"]["LogGroupArn"]["Fn::GetAtt"][0]
    name = template["Resources"][group_id]["Properties"]["LogGroupName"]
    assert name == "/aws/vendedlogs/states/hfpipe-dev-pipeline"


def test_infra_docs_say_what_each_stack_needs_to_deploy(repo_root):
    text = (repo_root / "docs" / "infra.md").read_text()
    section = text.split("## What a real `cdk deploy` needs, per stack", 1)[1].split("\n## ", 1)[0]
    for needed in ("cdk bootstrap", "Hfpipe-<env>-Data", "Hfpipe-<env>-Quota", "Hfpipe-<env>-Pipeline"):
        assert needed in section, needed
    assert "reserved concurrency" in section and "quotas" in section.lower()
