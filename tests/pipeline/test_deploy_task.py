"""A named endpoint is bound to its task: the deploy that creates it tags it with the version's task kind
(``hfpipe:task``), and Prepare refuses a version of another task before anything is created, naming both (an
endpoint created before the tag is bound to the task of the version it serves, read from it)."""

from __future__ import annotations

import json

import pytest
from deploy_helpers import ENDPOINT, deploy, named, register, stored_record, tags, wiped

from hfpipe import contract


@pytest.fixture
def clean(fresh):
    yield from wiped(fresh)


pytestmark = pytest.mark.slow


def test_a_version_of_another_task_is_refused_before_anything_is_created(clean):
    qa = register(clean, recipe="tiny-qa")
    _, r = deploy(clean, qa)
    assert r.status == "SUCCEEDED", r.cause
    endpoint = clean.client("sagemaker").describe_endpoint(EndpointName=ENDPOINT)
    assert tags(clean, endpoint["EndpointArn"])[contract.TAG_TASK] == "question-answering"
    before, made = stored_record(clean), named(clean)
    classifier = register(clean, recipe="tiny-mnli")
    _, r = deploy(clean, classifier)
    assert (r.status, r.error) == ("FAILED", "EndpointTaskMismatch"), (r.error, r.cause)
    message = json.loads(r.cause)["errorMessage"]
    assert message.startswith(
        f"endpoint {ENDPOINT} serves task question-answering (its hfpipe:task tag, recorded at its creation); "
        f"version tiny-mnli/{classifier.rsplit('/', 1)[1]} is task text-classification (recipe tiny-mnli)"
    )
    assert "accepted: a version of a question-answering recipe, or another endpoint name" in message
    assert r.states[-1] == "Refused" and "CreateModel" not in r.states
    assert named(clean) == made and stored_record(clean) == before


def test_an_endpoint_without_the_tag_is_bound_to_the_task_it_serves(clean):
    qa = register(clean, recipe="tiny-qa")
    _, r = deploy(clean, qa)
    assert r.status == "SUCCEEDED", r.cause
    sm = clean.client("sagemaker")
    arn = sm.describe_endpoint(EndpointName=ENDPOINT)["EndpointArn"]
    sm.delete_tags(ResourceArn=arn, TagKeys=[contract.TAG_TASK])  # made before deploys recorded the task
    _, r = deploy(clean, register(clean, recipe="tiny-mnli"))
    assert (r.status, r.error) == ("FAILED", "EndpointTaskMismatch"), (r.error, r.cause)
    assert (
        f"serves task question-answering (the task of tiny-qa/{qa.rsplit('/', 1)[1]}, which it serves)"
        in json.loads(r.cause)["errorMessage"]
    )
