"""The way back (PutPreviousConfigBack): after a failed smoke test, or a version rejected before its record, an
update is undone by an UpdateEndpoint to the config that served before (``DeployPlan.requests.Rollback``). It
runs in DeployCleanup's function (the one that acts after a failure), not as a Step Functions SDK task, because
only here can the error codes AWS answers be told apart: the AWS SDK integration names every SageMaker error
it has no model for ``SageMaker.SageMakerException`` (a throttle and a refusal alike).

1. The endpoint must be able to take the change: UpdateEndpoint is accepted only on an InService endpoint
   (DescribeEndpoint's EndpointStatus: "SystemUpdating: Endpoint is undergoing maintenance and cannot be updated
   or deleted or re-scaled until it has completed"; "Updating"/"RollingBack": an update or rollback is under
   way, https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_DescribeEndpoint.html). While it is in one
   of those statuses, ``EndpointNotReadyForWayBack`` is raised, which the state machine retries every
   ``deploy_limits.POLL_SECONDS`` up to ``deploy_limits.WAY_BACK_READY_ATTEMPTS`` times.
2. An endpoint already InService on the previous config needs nothing sent.
3. A throttle that outlasts botocore's own retries (the codes botocore's standard retry mode treats as
   throttling, ``THROTTLING_CODES``; SageMaker answers ``ThrottlingException``, "The request was denied due to
   request throttling", https://docs.aws.amazon.com/sagemaker/latest/APIReference/CommonErrors.html) is
   ``WayBackThrottled``, retried by the state machine with back-off as the other throttles
   (THROTTLING_ATTEMPTS).
4. ``ResourceLimitExceeded`` (SageMaker's capacity error) is ``WayBackCapacity``, retried as the deploy's
   other capacity errors are (CAPACITY_ATTEMPTS, a minute apart).
5. Anything else SageMaker refuses (the previous config deleted meanwhile: ValidationException) is
   ``WayBackRefused``, naming the code and AWS's message: the state machine takes it to WhatServesAfterWayBack,
   whose WayBackFailed quotes it beside what serves, read from the endpoint.
"""

from __future__ import annotations

from typing import Any

from hfpipe.core import throttling
from hfpipe.core.deploy.deploy_plan import DeployPlan
from hfpipe.core.throttling import error_code
from pipeline_lambdas import aws
from pipeline_lambdas.deploy_common import describe_endpoint

LOG = aws.logger(__name__)
#: What counts as throttled (hfpipe.core.throttling: botocore's standard retry mode's codes).
THROTTLING_CODES = throttling.THROTTLING_CODES
#: Statuses that end by themselves, after which the endpoint takes an UpdateEndpoint again.
NOT_READY = frozenset({"Creating", "Updating", "SystemUpdating", "RollingBack"})


class EndpointNotReadyForWayBack(Exception):
    """The endpoint is still changing (NOT_READY); the state machine tries the way back again later."""


class WayBackThrottled(Exception):
    """SageMaker throttled the UpdateEndpoint back past botocore's retries; the state machine retries it."""


class WayBackCapacity(Exception):
    """SageMaker answered ResourceLimitExceeded (its capacity error, the one the SageMaker integrations name
    SageMaker.ResourceLimitExceededException); the state machine retries it as the other capacity errors."""


class WayBackRefused(Exception):
    """SageMaker refused the UpdateEndpoint back, or the endpoint cannot take it (gone, Failed); the message
    names AWS's error code and message."""


def put_back(sagemaker: Any, plan: DeployPlan) -> dict[str, Any]:
    """Send the plan's Rollback request once the endpoint can take it (module docstring); what was done."""
    request = plan.requests.Rollback
    if request is None:
        raise WayBackRefused(f"deploy of {plan.version_ref}: no way back was prepared (action {plan.action})")
    endpoint_name, previous = request["EndpointName"], request["EndpointConfigName"]
    endpoint = describe_endpoint(sagemaker, endpoint_name)
    if endpoint is None:
        raise WayBackRefused(f"endpoint {endpoint_name} no longer exists: there is nothing to put back")
    status = str(endpoint.get("EndpointStatus", ""))
    if status in NOT_READY:
        raise EndpointNotReadyForWayBack(
            f"endpoint {endpoint_name} is {status}: SageMaker takes UpdateEndpoint only on an InService "
            f"endpoint; the way back to {previous} waits"
        )
    if status != "InService":
        raise WayBackRefused(
            f"endpoint {endpoint_name} is {status} ({endpoint.get('FailureReason') or 'no FailureReason'}): "
            f"it cannot be updated back to {previous}"
        )
    if endpoint.get("EndpointConfigName") == previous:
        aws.log_json(LOG, "way back not needed", endpoint=endpoint_name, config=previous)
        return {"sent": False, "endpoint_config": previous}
    try:
        sagemaker.update_endpoint(**request)
    except Exception as err:
        code = error_code(err)
        if code == "ResourceLimitExceeded":
            raise WayBackCapacity(
                f"UpdateEndpoint of {endpoint_name} back to {previous}: no capacity ({code}): {err}"
            ) from err
        if code in THROTTLING_CODES:
            raise WayBackThrottled(
                f"UpdateEndpoint of {endpoint_name} back to {previous} throttled ({code}): {err}"
            ) from err
        raise WayBackRefused(
            f"UpdateEndpoint of {endpoint_name} back to {previous} refused: {code or type(err).__name__}: {err}"
        ) from err
    aws.log_json(LOG, "way back sent", endpoint=endpoint_name, config=previous)
    return {"sent": True, "endpoint_config": previous}
