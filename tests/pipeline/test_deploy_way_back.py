"""The way back after a failed smoke test (PutPreviousConfigBack, lambda/pipeline/pipeline_lambdas/deploy_way_back.py),
on the local engine with the test-only UpdateEndpoint stand-in (deploy_standin.py, which refuses an update of an
endpoint that is not InService as SageMaker does): it waits for an endpoint that cannot take the change yet,
retries SageMaker's throttling past the catch-all's attempts, and a refusal names AWS's own error beside what
serves."""

from __future__ import annotations

import json

import pytest
from botocore.retries.standard import ThrottledRetryableChecker
from deploy_helpers import ENDPOINT, assert_serves_again, deploy, named, register, tags, wiped
from deploy_standin import Update, stand_in_updates

from hfpipe import contract
from hfpipe.local.engine.template import ACCOUNT
from stacks.constructs.workflow import CATCH_ALL_ATTEMPTS, THROTTLING_ATTEMPTS


@pytest.fixture
def clean(fresh):
    yield from wiped(fresh)


pytestmark = pytest.mark.slow


def first_deploy(engine):
    _, r = deploy(engine, register(engine))
    assert r.status == "SUCCEEDED", r.cause
    return r.output


def moto_endpoint(engine):
    from moto.backends import get_backend

    return get_backend("sagemaker")[ACCOUNT][engine.region].endpoints[ENDPOINT]


def failing_smoke_test(engine, then):
    """The new version answers wrongly; ``then`` runs once, while the smoke test calls it."""
    done = []

    def answer(name, body):
        if not done:
            done.append(then())
        return [{"generated_text": "not an answer"}]

    engine.endpoint = answer


def assert_back_on(engine, before, r):
    assert (r.status, r.error) == ("FAILED", "SmokeTestFailed"), (r.error, r.cause)
    endpoint = assert_serves_again(engine, before)
    assert tags(engine, endpoint["EndpointArn"])[contract.TAG_MODEL_VERSION] == before["model_version_arn"]
    assert named(engine)["endpoint_configs"] == [before["endpoint_config"]]


def test_the_way_back_waits_until_the_endpoint_can_take_the_change(clean):
    """SageMaker's maintenance (SystemUpdating) right after the update: UpdateEndpoint would be refused, so the
    way back waits for InService and then puts the previous config back."""
    before = first_deploy(clean)
    with stand_in_updates(clean, Update(polls=1), Update(polls=1)) as play:
        failing_smoke_test(clean, lambda: play.maintain(moto_endpoint(clean), 3))
        _, r = deploy(clean, register(clean))
    assert_back_on(clean, before, r)
    # Two looks found it SystemUpdating (retried), the third sent the update back once.
    assert r.states.count("PutPreviousConfigBack") == 1 and len(play.requests) == 2
    assert play.requests[1]["EndpointConfigName"] == before["endpoint_config"]


def test_a_throttled_way_back_is_retried_as_throttling(clean):
    """More throttles than the catch-all's retries: the way back still happens."""
    before = first_deploy(clean)
    throttles = CATCH_ALL_ATTEMPTS + 1
    assert throttles <= THROTTLING_ATTEMPTS
    with stand_in_updates(clean, Update(polls=1), Update(polls=1)) as play:
        failing_smoke_test(clean, lambda: setattr(play, "throttle", throttles))
        _, r = deploy(clean, register(clean))
    assert_back_on(clean, before, r)
    assert len(play.requests) == 2 + throttles


def test_a_refused_way_back_names_aws_error_and_what_serves(clean):
    """The previous config deleted meanwhile: SageMaker refuses the update back (ValidationException, as the
    stand-in answers for a config it cannot find); WayBackFailed quotes that refusal and what serves, and says
    the tag and record still name the version that no longer serves."""
    before = first_deploy(clean)
    second = register(clean)
    sm = clean.client("sagemaker")

    with stand_in_updates(clean, Update(polls=1)):
        failing_smoke_test(
            clean, lambda: sm.delete_endpoint_config(EndpointConfigName=before["endpoint_config"])
        )
        _, r = deploy(clean, second)
    assert (r.status, r.error) == ("FAILED", "WayBackFailed"), (r.error, r.cause)
    cause = json.loads(r.cause)["errorMessage"]
    assert "WayBackRefused: UpdateEndpoint of" in cause and "refused: ValidationException" in cause
    assert "Could not find endpoint configuration" in cause
    assert f"serving tiny-qa/{second.rsplit('/', 1)[1]}" in cause
    assert f"still name tiny-qa/{before['version']}, which does not serve" in cause
    assert sm.describe_endpoint(EndpointName=ENDPOINT)["EndpointConfigName"] != before["endpoint_config"]


def test_the_throttling_codes_are_botocores():
    """The way back (and every other caller: hfpipe.core.throttling is their one list) treats as throttling
    exactly what botocore's standard retry mode does."""
    from pipeline_lambdas import deploy_way_back

    from hfpipe.core import throttling

    assert frozenset(ThrottledRetryableChecker._THROTTLED_ERROR_CODES) == throttling.THROTTLING_CODES
    assert deploy_way_back.THROTTLING_CODES is throttling.THROTTLING_CODES


def test_a_version_rejected_during_its_smoke_test_ends_failed_and_rolled_back(clean):
    """Approval is re-read before the record is written: a version rejected while its smoke test runs is not
    recorded, and the previous config serves again."""
    before = first_deploy(clean)
    second = register(clean)
    sm = clean.client("sagemaker")

    def answer(name, body):
        sm.update_model_package(ModelPackageArn=second, ModelApprovalStatus="Rejected")
        return [{"answer": "a", "score": 0.9, "start": 0, "end": 1}]

    clean.endpoint = answer
    with stand_in_updates(clean, Update(polls=1), Update(polls=1)) as play:
        _, r = deploy(clean, second)
    assert (r.status, r.error) == ("FAILED", "VersionRejectedDuringDeploy"), (r.error, r.cause)
    assert "SmokeTestFailed" not in r.states and "Record" not in r.states
    assert r.states[r.states.index("ApprovalBeforeRecord") :][:3] == [
        "ApprovalBeforeRecord",
        "PutPreviousBack?",
        "PutPreviousConfigBack",
    ]
    assert f"version tiny-qa/{second.rsplit('/', 1)[1]}" in json.loads(r.cause)["errorMessage"]
    assert play.requests[1]["EndpointConfigName"] == before["endpoint_config"]
    endpoint = assert_serves_again(clean, before)
    assert tags(clean, endpoint["EndpointArn"])[contract.TAG_MODEL_VERSION] == before["model_version_arn"]
