"""boto3 clients for the handlers, with one seam for tests and local mode.

``OVERRIDES`` maps a service name to a client that ``client`` returns instead of a new one: hfpipe.local.engine.engine
puts its clients there (one per service, made once), among them a Service Quotas client answered from a table
(hfpipe.local.engine.quotas), because moto has no SageMaker quotas.

``REGION_OVERRIDES`` maps another region to a function ``(service, config) -> client`` that ``client(service,
region=R)`` calls instead of making a client for R: the local world (hfpipe.local.world) puts one there per
region of the other environments of cdk.json, so that a handler reading another environment (a promotion's
source) reaches that environment's own local server.
"""

from __future__ import annotations

import contextvars
import logging
import os
from collections.abc import Callable
from typing import Any

OVERRIDES: dict[str, Any] = {}
REGION_OVERRIDES: dict[str, Callable[[str, Any], Any]] = {}
_EXECUTION: contextvars.ContextVar[str] = contextvars.ContextVar("execution_name", default="")


def client(service: str, config: Any = None, region: str | None = None) -> Any:
    """A boto3 client for ``service`` in the Lambda's region (or the override for it), or in ``region`` when
    that is another region (another environment's, for promotion: what ``REGION_OVERRIDES`` gives for it, never
    ``OVERRIDES``, which are the Lambda's region's)."""
    own = os.environ.get("AWS_REGION")
    if region is not None and region != own:
        if region in REGION_OVERRIDES:
            return REGION_OVERRIDES[region](service, config)
        import boto3

        return boto3.client(service, region_name=region, config=config)
    if service in OVERRIDES:
        return OVERRIDES[service]
    import boto3

    return boto3.client(service, region_name=own, config=config)


class _ExecutionName(logging.Filter):
    """Puts the execution name on every record; Lambda's JSON log format writes it as a key."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.execution_name = _EXECUTION.get()
        return True


def not_sent_by(event: dict[str, Any], source: str, detail_type: str) -> str | None:
    """Why EventBridge's ``event`` is not ``source``'s ``detail_type``; None when it is."""
    if event.get("source") != source:
        return f"source {event.get('source')!r} is not {source}"
    if event.get("detail-type") != detail_type:
        return f"detail-type {event.get('detail-type')!r} is not {detail_type!r}"
    return None


def logger(name: str) -> logging.Logger:
    """A logger for a handler module: Lambda's JSON log format (``LoggingFormat.JSON`` on the function)
    writes each record as one JSON object, with ``execution_name`` and the ``extra`` fields as keys."""
    log = logging.getLogger(name)
    log.setLevel(os.environ.get("LOG_LEVEL", "INFO"))
    if not any(isinstance(f, _ExecutionName) for f in log.filters):
        log.addFilter(_ExecutionName())
    return log


def execution_name_of(event: Any) -> str:
    """The execution an event without a plan belongs to: the Plan task's input, or an EventBridge event's
    detail. Handlers that get a plan bind its ``execution_name`` (they read the plan only through the type)."""
    if not isinstance(event, dict):
        return ""
    detail: dict[str, Any] = event["detail"] if isinstance(event.get("detail"), dict) else {}
    return str(event.get("execution_name") or detail.get("name") or "")


def bind(event: Any, execution_name: str | None = None) -> None:
    """Name the execution every following log line of this invocation belongs to (``execution_name``, else
    the one ``event`` names)."""
    _EXECUTION.set(execution_name if execution_name is not None else execution_name_of(event))


def log_json(log: logging.Logger, message: str, **fields: Any) -> None:
    """Log ``message`` with ``fields`` (under ``details``, clear of LogRecord's own attribute names)."""
    log.info(message, extra={"details": fields})
