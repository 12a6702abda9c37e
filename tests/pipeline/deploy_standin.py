"""A test-only stand-in for UpdateEndpoint on the local engine, until local mode emulates blue/green updates.

moto 5.2.5 has no UpdateEndpoint. This answers it through botocore's hooks (as hfpipe.local.engine.hooks answers
InvokeEndpoint) and plays only what the deploy state machine observes through DescribeEndpoint: the endpoint
is Updating for a given number of DescribeEndpoint calls, then InService on the new config ("done"), back on
its old config with a FailureReason ("rolled back", as SageMaker's automatic rollback leaves it) or Updating
for ever ("never"); it refuses an UpdateEndpoint while the endpoint is not InService (ValidationException,
as SageMaker does), can throttle the next calls (``throttle``) and hold the endpoint SystemUpdating for a few
looks (``maintain``). No traffic shifting, no alarms, no second fleet: those are the emulation's to play.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import boto3
from botocore.awsrequest import AWSResponse
from botocore.exceptions import ClientError

from hfpipe.local.engine.template import ACCOUNT


@dataclass
class Update:
    """How one UpdateEndpoint call ends: after ``polls`` DescribeEndpoint calls, ``outcome``."""

    polls: int
    outcome: str = "done"  # done | rolled back | never


@dataclass
class StandIn:
    """The updates to play, in call order; ``requests`` are the UpdateEndpoint requests as sent."""

    updates: list[Update]
    requests: list[dict[str, Any]] = field(default_factory=list)
    #: UpdateEndpoint calls still to answer ThrottlingException (SageMaker's throttle, HTTP 400).
    throttle: int = 0
    _pending: dict[str, Any] = field(default_factory=dict)
    _maintenance: dict[str, Any] = field(default_factory=dict)

    def maintain(self, endpoint: Any, polls: int) -> None:
        """``endpoint`` (moto's) is SystemUpdating for the next ``polls`` DescribeEndpoint calls."""
        endpoint.endpoint_status = "SystemUpdating"
        self._maintenance = {"endpoint": endpoint, "left": polls}


def _error(code: str, message: str) -> ClientError:
    return ClientError(
        {
            "Error": {"Code": code, "Message": message},
            "ResponseMetadata": {"HTTPStatusCode": 400, "RequestId": "r"},
        },
        "UpdateEndpoint",
    )


@contextlib.contextmanager
def stand_in_updates(engine: Any, *updates: Update) -> Iterator[StandIn]:
    """Answer UpdateEndpoint (and progress DescribeEndpoint) on ``engine`` while the block runs."""
    from moto.backends import get_backend

    backend = get_backend("sagemaker")[ACCOUNT][engine.region]
    play = StandIn(list(updates))

    def keep(params: dict[str, Any], **_: Any) -> None:
        play.requests.append(dict(params))

    def update(**_: Any) -> tuple[Any, dict[str, Any]]:
        request = play.requests[-1]
        endpoint = backend.endpoints[request["EndpointName"]]
        if play.throttle > 0:
            play.throttle -= 1
            raise _error("ThrottlingException", "Rate exceeded")
        if endpoint.endpoint_status != "InService":
            # AWS takes UpdateEndpoint only on an InService endpoint (DescribeEndpoint's EndpointStatus).
            raise _error("ValidationException", f'Cannot update in-progress endpoint "{endpoint.arn}".')
        if request["EndpointConfigName"] not in backend.endpoint_configs:
            raise _error(
                "ValidationException",
                f'Could not find endpoint configuration "{request["EndpointConfigName"]}".',
            )
        step = play.updates.pop(0)
        play._pending = {
            "endpoint": endpoint,
            "old": endpoint.endpoint_config_name,
            "left": step.polls,
            **vars(step),
        }
        play._pending["new"] = request["EndpointConfigName"]
        endpoint.endpoint_status = "Updating"
        return AWSResponse(None, 200, {}, None), {
            "EndpointArn": endpoint.arn,
            "ResponseMetadata": {"HTTPStatusCode": 200, "HTTPHeaders": {}, "RetryAttempts": 0},
        }

    def progress(**_: Any) -> None:
        held = play._maintenance
        if held:
            held["left"] -= 1
            if held["left"] <= 0:
                held["endpoint"].endpoint_status = "InService"
                play._maintenance = {}
        pending = play._pending
        if not pending or pending["outcome"] == "never":
            return
        pending["left"] -= 1
        if pending["left"] > 0:
            return
        endpoint = pending["endpoint"]
        endpoint.endpoint_status = "InService"
        if pending["outcome"] == "done":
            endpoint.endpoint_config_name = pending["new"]
        else:
            endpoint.failure_reason = (
                "Alarm hfpipe-dev-summaries-5xx-errors went into ALARM during the deployment"
            )
        play._pending = {}

    # The state machine's SDK tasks make their clients from boto3's default session; the Lambdas use the
    # engine's (pipeline_lambdas.aws.OVERRIDES, made once): the way back is sent by DeployCleanup's function.
    from pipeline_lambdas import aws

    emitters = [boto3.DEFAULT_SESSION.events]  # type: ignore[union-attr]
    if "sagemaker" in aws.OVERRIDES:
        emitters.append(aws.OVERRIDES["sagemaker"].meta.events)
    hooks = (
        ("provide-client-params.sagemaker.UpdateEndpoint", keep),
        ("before-call.sagemaker.UpdateEndpoint", update),
        ("before-call.sagemaker.DescribeEndpoint", progress),
    )
    for events in emitters:
        for name, handler in hooks:
            events.register(name, handler)
    try:
        yield play
    finally:
        for events in emitters:
            for name, handler in hooks:
                events.unregister(name, handler)
