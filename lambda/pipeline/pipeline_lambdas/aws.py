"""boto3 clients for the handlers, with one seam for tests and local mode.

``OVERRIDES`` maps a service name to a client (or a fake) that ``client`` returns instead of a real
one: hfpipe.local.engine puts a Service Quotas fake there, because moto has no SageMaker quotas.
"""

from __future__ import annotations

import json
import logging
import os
from typing import Any

OVERRIDES: dict[str, Any] = {}


def client(service: str) -> Any:
    """A boto3 client for ``service`` in the Lambda's region (or the override for it)."""
    if service in OVERRIDES:
        return OVERRIDES[service]
    import boto3

    return boto3.client(service, region_name=os.environ.get("AWS_REGION"))


def logger(name: str) -> logging.Logger:
    """A logger that writes one JSON object per line (structured logs in CloudWatch)."""
    log = logging.getLogger(name)
    log.setLevel(os.environ.get("LOG_LEVEL", "INFO"))
    return log


def log_json(log: logging.Logger, message: str, **fields: Any) -> None:
    """Log ``message`` with ``fields`` as one JSON line."""
    log.info(json.dumps({"message": message, **fields}, default=str))
