"""OnTrainingEvent and Launch's token hand-over, against moto S3 and a Step Functions stand-in that answers
as AWS does once a task is no longer waiting (TaskTimedOut / InvalidToken, SendTaskSuccess reference)."""

from __future__ import annotations

import json

import pytest
from botocore.exceptions import ClientError
from pipeline_lambdas import on_training_event as handler
from pipeline_lambdas.training_task import token_key

BUCKET = "artifacts"
ENV = "dev"


class Sfn:
    def __init__(self, gone: str | None = None):
        self.calls: list[tuple[str, dict]] = []
        self.gone = gone

    def _call(self, name, **kwargs):
        if self.gone:
            raise ClientError({"Error": {"Code": self.gone, "Message": "gone"}}, name)
        self.calls.append((name, kwargs))

    def send_task_success(self, **kwargs):
        self._call("send_task_success", **kwargs)

    def send_task_failure(self, **kwargs):
        self._call("send_task_failure", **kwargs)


class SageMaker:
    def __init__(self, job):
        self.job = job

    def describe_training_job(self, TrainingJobName):
        return self.job


def event(name, status):
    return {
        "source": "aws.sagemaker",
        "detail-type": "SageMaker Training Job State Change",
        "detail": {"TrainingJobName": name, "TrainingJobStatus": status},
    }


def keep_token(s3, name):
    s3.put_object(
        Bucket=BUCKET, Key=token_key(name), Body=json.dumps({"task_token": "tok", "execution_name": "e"})
    )


def test_completed_job_succeeds_the_task_with_its_description(s3):
    keep_token(s3, "dev-e")
    job = {"TrainingJobName": "dev-e", "TrainingJobStatus": "Completed", "HyperParameters": {"x": "1"}}
    sfn = Sfn()
    result = handler.on_event(event("dev-e", "Completed"), SageMaker(job), s3, sfn, BUCKET, ENV)
    assert result["completed"] is True
    ((call, kwargs),) = sfn.calls
    assert call == "send_task_success" and kwargs["taskToken"] == "tok"
    assert json.loads(kwargs["output"]) == {"TrainingJobName": "dev-e", "TrainingJobStatus": "Completed"}
    # The token is used once: a repeated event finds no waiting task.
    again = handler.on_event(event("dev-e", "Completed"), SageMaker(job), s3, sfn, BUCKET, ENV)
    assert (again["completed"], again["reason"]) == (False, "no waiting task")


def test_failed_job_fails_the_task_with_its_failure_reason(s3):
    keep_token(s3, "dev-f")
    job = {"TrainingJobName": "dev-f", "TrainingJobStatus": "Failed", "FailureReason": "AlgorithmError: OOM"}
    sfn = Sfn()
    handler.on_event(event("dev-f", "Failed"), SageMaker(job), s3, sfn, BUCKET, ENV)
    ((call, kwargs),) = sfn.calls
    assert (call, kwargs["error"]) == ("send_task_failure", "TrainingJobFailed")
    assert kwargs["cause"] == "training job dev-f Failed: AlgorithmError: OOM"


@pytest.mark.parametrize("code", ["TaskTimedOut", "InvalidToken"])
def test_a_task_no_longer_waiting_is_not_an_error(s3, code):
    keep_token(s3, "dev-g")
    job = {"TrainingJobName": "dev-g", "TrainingJobStatus": "Stopped"}
    result = handler.on_event(event("dev-g", "Stopped"), SageMaker(job), s3, Sfn(gone=code), BUCKET, ENV)
    assert result["completed"] is False


def test_other_errors_are_raised(s3):
    keep_token(s3, "dev-h")
    job = {"TrainingJobName": "dev-h", "TrainingJobStatus": "Completed"}
    with pytest.raises(ClientError, match="AccessDenied"):
        handler.on_event(
            event("dev-h", "Completed"), SageMaker(job), s3, Sfn(gone="AccessDeniedException"), BUCKET, ENV
        )


def test_states_that_are_not_final_are_ignored(s3):
    result = handler.on_event(event("dev-i", "InProgress"), SageMaker({}), s3, Sfn(), BUCKET, ENV)
    assert result["completed"] is False and result["reason"] == "not final"


def test_an_event_ahead_of_describe_leaves_the_task_waiting(s3):
    """Eventual consistency: the event says Completed, DescribeTrainingJob still InProgress. The task is
    not failed (that would clean up a running job) and the token stays for the next event or re-check."""
    keep_token(s3, "dev-j")
    sfn = Sfn()
    running = {"TrainingJobName": "dev-j", "TrainingJobStatus": "InProgress"}
    result = handler.on_event(event("dev-j", "Completed"), SageMaker(running), s3, sfn, BUCKET, ENV)
    assert (result["completed"], result["reason"]) == (False, "job not final yet")
    assert sfn.calls == []
    # The next event, once Describe agrees, completes the task with the token still kept.
    done = {"TrainingJobName": "dev-j", "TrainingJobStatus": "Completed"}
    again = handler.on_event(event("dev-j", "Completed"), SageMaker(done), s3, sfn, BUCKET, ENV)
    assert again["completed"] is True and [c for c, _ in sfn.calls] == ["send_task_success"]


def test_complete_never_answers_a_task_from_a_status_that_is_not_final():
    from pipeline_lambdas.training_task import complete

    sfn = Sfn()
    assert complete(sfn, "tok", {"TrainingJobName": "dev-k", "TrainingJobStatus": "Stopping"}) is False
    assert sfn.calls == []


@pytest.mark.parametrize(
    "change",
    [
        {"source": "my.app"},
        {"detail-type": "SageMaker Training Job State Change (forged)"},
        {"detail": {"TrainingJobName": "prod-e", "TrainingJobStatus": "Completed"}},
        {"detail": {"TrainingJobName": "devx-e", "TrainingJobStatus": "Completed"}},
        {"detail": "dev-e"},
    ],
    ids=["source", "detail-type", "other-env", "env-prefix-only", "detail-not-object"],
)
def test_events_from_elsewhere_are_ignored(s3, change):
    for name in ("dev-e", "prod-e", "devx-e"):
        keep_token(s3, name)
    job = {"TrainingJobName": "dev-e", "TrainingJobStatus": "Failed", "FailureReason": "forged"}
    sfn = Sfn()
    result = handler.on_event({**event("dev-e", "Completed"), **change}, SageMaker(job), s3, sfn, BUCKET, ENV)
    assert result["completed"] is False and result["reason"]
    assert sfn.calls == []
    # Nothing was touched: every token is still there.
    for name in ("dev-e", "prod-e", "devx-e"):
        s3.head_object(Bucket=BUCKET, Key=token_key(name))


def test_a_token_replaced_by_a_recheck_meanwhile_is_the_one_answered(s3):
    """The event read the token of an attempt that timed out; Launch's re-check stored its new attempt's
    token before the answer. The handler answers the new token instead of leaving the task an hour."""
    keep_token(s3, "dev-l")

    class Racing(Sfn):
        def send_task_success(self, **kwargs):
            if kwargs["taskToken"] == "tok":  # the re-check replaced it just before
                s3.put_object(Bucket=BUCKET, Key=token_key("dev-l"), Body=json.dumps({"task_token": "tok-2"}))
                raise ClientError({"Error": {"Code": "TaskTimedOut", "Message": "gone"}}, "SendTaskSuccess")
            self.calls.append(("send_task_success", kwargs))

    sfn = Racing()
    job = {"TrainingJobName": "dev-l", "TrainingJobStatus": "Completed"}
    result = handler.on_event(event("dev-l", "Completed"), SageMaker(job), s3, sfn, BUCKET, ENV)
    assert result["completed"] is True
    assert [(c, k["taskToken"]) for c, k in sfn.calls] == [("send_task_success", "tok-2")]


@pytest.mark.parametrize("body", [b"not json", b"[1, 2]", b'{"task_token": 3}', b'{"execution_name": "e"}'])
def test_a_corrupt_token_object_raises_so_the_event_is_retried_and_alarms(s3, body):
    """Not "no waiting task": a task may be waiting that nothing can answer. The handler raises, so Lambda
    retries the asynchronous invocation and then sends it to the failed-events queue, which alarms."""
    s3.put_object(Bucket=BUCKET, Key=token_key("dev-e"), Body=body)
    job = {"TrainingJobName": "dev-e", "TrainingJobStatus": "Completed"}
    sfn = Sfn()
    with pytest.raises(
        handler.TaskTokenUnreadable, match=f"s3://{BUCKET}/{token_key('dev-e')}: not the object"
    ):
        handler.on_event(event("dev-e", "Completed"), SageMaker(job), s3, sfn, BUCKET, ENV)
    assert sfn.calls == []
    assert s3.get_object(Bucket=BUCKET, Key=token_key("dev-e"))["Body"].read() == body  # kept for a look


def test_a_token_object_s3_refuses_to_read_raises(s3):
    keep_token(s3, "dev-e")

    def refuse(**_):
        raise ClientError({"Error": {"Code": "AccessDenied", "Message": "Access Denied"}}, "GetObject")

    s3.get_object = refuse
    job = {"TrainingJobName": "dev-e", "TrainingJobStatus": "Completed"}
    with pytest.raises(ClientError, match="AccessDenied"):
        handler.on_event(event("dev-e", "Completed"), SageMaker(job), s3, Sfn(), BUCKET, ENV)
