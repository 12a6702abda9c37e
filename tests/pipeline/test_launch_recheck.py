"""Launch run again by the task's hourly re-check (Retry on States.Timeout): it adopts this execution's job,
keeps the new attempt's token, completes the task only from DescribeTrainingJob's final status, and gives a
job up once the plan's training wait has passed since its CreationTime."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from accounts import ACCOUNT
from pipeline_lambdas import launch as handler
from pipeline_lambdas.training_task import token_key
from test_pipeline_limits import plan_of

from hfpipe import contract

BUCKET = "artifacts"


class SageMaker:
    """A job this execution created (tagged as Launch tags it), in ``status``, created ``age`` ago."""

    def __init__(self, plan, status, age):
        self.job = {
            "TrainingJobName": plan.training_job_name,
            "TrainingJobArn": f"arn:aws:sagemaker:eu-west-1:{ACCOUNT}:training-job/{plan.training_job_name}",
            "TrainingJobStatus": status,
            "CreationTime": datetime.now(UTC) - age,
        }
        self.tags = [
            {"Key": contract.TAG_MANAGED_BY, "Value": contract.PROJECT},
            {"Key": contract.TAG_ENV, "Value": plan.env},
            {"Key": contract.TAG_EXECUTION, "Value": plan.execution_name},
        ]

    def describe_training_job(self, TrainingJobName):
        return dict(self.job)

    def list_tags(self, ResourceArn):
        return {"Tags": self.tags}

    def create_training_job(self, **_):
        raise AssertionError("a re-check never creates a second job")


class Sfn:
    def __init__(self):
        self.calls = []

    def send_task_success(self, **kwargs):
        self.calls.append(("success", kwargs))

    def send_task_failure(self, **kwargs):
        self.calls.append(("failure", kwargs))


@pytest.fixture(scope="module")
def plan():
    return plan_of({})


def stored_token(s3, plan):
    return json.loads(s3.get_object(Bucket=BUCKET, Key=token_key(plan.training_job_name))["Body"].read())


def test_a_recheck_of_a_running_job_keeps_the_new_token_and_waits(s3, plan):
    sfn = Sfn()
    result = handler.launch(SageMaker(plan, "InProgress", timedelta(hours=1)), s3, sfn, BUCKET, plan, "tok-2")
    assert result == {"training_job_name": plan.training_job_name, "created": False}
    assert sfn.calls == []
    assert stored_token(s3, plan)["task_token"] == "tok-2"  # what the next event will answer


@pytest.mark.parametrize("status", ["Completed", "Failed", "Stopped"])
def test_a_recheck_of_a_job_that_ended_completes_the_task_itself(s3, plan, status):
    sfn = Sfn()
    handler.launch(SageMaker(plan, status, timedelta(hours=3)), s3, sfn, BUCKET, plan, "tok-3")
    ((kind, kwargs),) = sfn.calls
    assert kind == ("success" if status == "Completed" else "failure") and kwargs["taskToken"] == "tok-3"


def test_a_job_still_running_past_the_training_wait_is_given_up(s3, plan):
    late = timedelta(seconds=plan.training_wait_seconds + 60)
    with pytest.raises(handler.TrainingWaitExceeded, match=r"past the plan's training wait"):
        handler.launch(SageMaker(plan, "Stopping", late), s3, Sfn(), BUCKET, plan, "tok-4")
    # Just inside the wait it keeps waiting.
    inside = timedelta(seconds=plan.training_wait_seconds - 60)
    handler.launch(SageMaker(plan, "InProgress", inside), s3, Sfn(), BUCKET, plan, "tok-5")


def test_the_wait_counts_from_the_jobs_creation_time_even_when_naive(s3, plan):
    sagemaker = SageMaker(plan, "InProgress", timedelta(0))
    sagemaker.job["CreationTime"] = datetime.now(UTC).replace(tzinfo=None) - timedelta(days=40)
    with pytest.raises(handler.TrainingWaitExceeded):
        handler.launch(sagemaker, s3, Sfn(), BUCKET, plan, "tok-6")
