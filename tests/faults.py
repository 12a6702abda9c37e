"""Faults at AWS calls, through botocore's event system (as botocore.stub.Stubber answers calls).

``Faults(*events)`` registers on event emitters (a boto3 session's ``events``, whose clients made later
inherit the handlers; a client's ``meta.events``) and records every call as (service, operation, API parameters). ``fail_at = N`` makes
the N-th call (0-based, counted from registration) answer ``code`` instead of reaching moto; ``when`` narrows
which calls are recorded and counted. A ``before-call`` answer is final: botocore's own retries, which happen
inside the request, do not see it, so one failed call is a fault that outlasted botocore's retries.
"""

from __future__ import annotations

import copy
import uuid
from collections.abc import Callable
from typing import Any

_PARAMS = "tests.faults.params"
#: HTTP status of each injected code (S3's HEAD answers carry no body: the code is the status).
STATUS = {
    "ThrottlingException": 400,
    "SlowDown": 503,
    "InternalFailure": 500,
    "AccessDenied": 403,
    "403": 403,
}


class Faults:
    """Records the calls of an event emitter's clients; answers one of them with an error (``fail_at``)."""

    def __init__(self, *events: Any, when: Callable[[str, str, dict[str, Any]], bool] | None = None) -> None:
        self.events = events
        self.when = when or (lambda service, operation, params: True)
        self.calls: list[tuple[str, str, dict[str, Any]]] = []
        self.fail_at: int | None = None
        self.code = "ThrottlingException"
        self.failed: tuple[str, str, dict[str, Any]] | None = None

    def __enter__(self) -> Faults:
        for events in self.events:
            events.register("before-parameter-build", self._keep)
            events.register("before-call", self._call)
        return self

    def __exit__(self, *exc: Any) -> None:
        for events in self.events:
            events.unregister("before-parameter-build", self._keep)
            events.unregister("before-call", self._call)

    def _keep(self, params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        context[_PARAMS] = copy.deepcopy(params)

    def _call(self, model: Any, context: dict[str, Any], **_: Any) -> Any:
        from botocore.awsrequest import AWSResponse

        service = model.service_model.service_name
        params = context.get(_PARAMS, {})
        if not self.when(service, model.name, params):
            return None
        self.calls.append((service, model.name, params))
        if self.fail_at != len(self.calls) - 1:
            return None
        self.failed = self.calls[-1]
        status = STATUS.get(self.code, 400)
        return AWSResponse(None, status, {}, None), {
            "Error": {"Code": self.code, "Message": f"{self.code} injected by tests/faults.py"},
            "ResponseMetadata": {"HTTPStatusCode": status, "HTTPHeaders": {}, "RequestId": str(uuid.uuid4())},
        }

    def operations(self) -> list[str]:
        """``service.Operation`` of each recorded call, in order."""
        return [f"{service}.{operation}" for service, operation, _ in self.calls]


def on_the_command(monkeypatch: Any, faults: Faults) -> Faults:
    """``faults`` on every botocore session the hfpipe command makes (hfpipe.cli.aws.make_clients), so only
    the command's own calls are recorded and failed, not those of the handlers it starts."""
    from hfpipe.cli import aws

    original = aws._botocore_session

    def session() -> Any:
        made = original()
        for name, handler in (("before-parameter-build", faults._keep), ("before-call", faults._call)):
            made.register(name, handler)
        return made

    monkeypatch.setattr(aws, "_botocore_session", session)
    return faults


def one_error_line(err: str) -> str:
    """The one ``error:`` line of a command's stderr (warnings may come before it); no traceback."""
    assert "Traceback" not in err, err
    errors = [line for line in err.splitlines() if not line.startswith("warning: ")]
    assert len(errors) == 1 and errors[0].startswith("error: "), err
    return errors[0]


class NoHistory:
    """A Step Functions client that fails on GetExecutionHistory, paginated or not (a command that must not
    read an execution's history: its record is the execution's own); every other call goes to ``sfn``."""

    def __init__(self, sfn: Any) -> None:
        self._sfn = sfn

    def get_execution_history(self, **_: Any) -> Any:
        raise AssertionError("GetExecutionHistory called")

    def get_paginator(self, operation: str) -> Any:
        if operation == "get_execution_history":
            raise AssertionError("GetExecutionHistory called (paginated)")
        return self._sfn.get_paginator(operation)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sfn, name)
