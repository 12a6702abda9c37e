"""Custom resource `Custom::ServiceQuotaRequest`: make sure a service quota is (being) raised to a target.

Properties: `ServiceCode` (e.g. "sagemaker"), `QuotaName` (e.g. "ml.g5.2xlarge for training job usage"),
`DesiredValue` (number). On Create/Update the quota code is resolved by name, the applied value is read,
and an increase is requested only when the applied value is below the target and no request for the
quota is open. AWS grants increases in hours or days, so a deploy never waits for or fails on that:
the result (attributes `Status`, `QuotaCode`, `AppliedValue`, `DesiredValue`, `RequestId`,
`RequestStatus`, `Reason`) says where things stand. Delete does nothing: a granted quota stays.

Whatever AWS answers, the deploy goes on: a refused check or request (AccessDeniedException,
DependencyAccessDeniedException, QuotaExceededException, IllegalArgumentException, NoSuchResourceException,
InvalidResourceStateException, ServiceException: the errors the Service Quotas API reference lists for
ListServiceQuotas and RequestServiceQuotaIncrease) is status REFUSED with AWS's code and message as the
reason, and throttling is UNVERIFIED; the next deploy checks again. Only a quota name that does not exist
fails the deploy: it is a typo in cdk.json, named in the message with the closest names.
Pure functions take a boto3 `service-quotas` client; `handler` is the `onEvent` handler of CDK's
`custom_resources.Provider`, which answers CloudFormation, retries and times out for it: the handler
returns `PhysicalResourceId` and `Data`, or raises (the Provider reports FAILED with the message).
The quota look-up (applied value, else the AWS default) is hfpipe.core.run.quotas, shared with Plan.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass
from typing import Any

from botocore.exceptions import ClientError

from hfpipe.core.run.quotas import UnknownQuotaError, is_throttling, lookup_quotas

# Lambda's JSON log format (LoggingFormat.JSON on the function) turns each record into one JSON object;
# `extra` fields become keys of it.
LOGGER = logging.getLogger(__name__)
LOGGER.setLevel(logging.INFO)

OPEN_REQUEST_STATUSES = frozenset({"PENDING", "CASE_OPENED"})

# Status values reported to CloudFormation (and the stack outputs).
SATISFIED = "SATISFIED"  # applied value already >= target
REQUESTED = "REQUESTED"  # this deploy opened an increase request
REQUEST_OPEN = "REQUEST_OPEN"  # a request was already open; none added
UNVERIFIED = "UNVERIFIED"  # Service Quotas throttled us; the next deploy checks again
REFUSED = "REFUSED"  # AWS refused the check or the request (reason: its code and message)


@dataclass(frozen=True)
class QuotaState:
    """Where one quota stands against its target after `ensure_quota`."""

    status: str
    service_code: str
    quota_name: str
    desired_value: float
    quota_code: str = ""
    applied_value: float | None = None
    request_id: str = ""
    request_status: str = ""
    reason: str = ""

    def attributes(self) -> dict[str, str]:
        """CloudFormation `Data`: strings only, so `Fn::GetAtt` always yields a string."""
        return {
            _pascal(key): "" if value is None else str(value)
            for key, value in asdict(self).items()
            if key not in ("service_code", "quota_name")
        }


def _pascal(snake: str) -> str:
    return "".join(part.capitalize() for part in snake.split("_"))


def find_quota(client: Any, service_code: str, quota_name: str) -> tuple[str, float, bool]:
    """(quota code, value that applies, whether an applied value exists); UnknownQuotaError if none."""
    quota = lookup_quotas(client, service_code, [quota_name])[quota_name]
    return quota.code, quota.value, quota.applied


def open_request(client: Any, service_code: str, quota_code: str) -> dict[str, Any] | None:
    """The newest increase request for this quota that AWS has not closed yet, if any."""
    paginator = client.get_paginator("list_requested_service_quota_change_history_by_quota")
    open_requests = [
        request
        for page in paginator.paginate(ServiceCode=service_code, QuotaCode=quota_code)
        for request in page.get("RequestedQuotas", [])
        if request.get("Status") in OPEN_REQUEST_STATUSES
    ]
    if not open_requests:
        return None
    return max(open_requests, key=lambda r: str(r.get("Created", "")))


def ensure_quota(client: Any, service_code: str, quota_name: str, desired_value: float) -> QuotaState:
    """Request an increase of the named quota to `desired_value` when needed; never waits for AWS.

    Raises UnknownQuotaError for a name the service does not have. A throttled Service Quotas API
    (after botocore's own retries) gives status UNVERIFIED instead of an error.
    """
    state = QuotaState(
        status="", service_code=service_code, quota_name=quota_name, desired_value=desired_value
    )
    try:
        quota_code, current, _ = find_quota(client, service_code, quota_name)
        state = QuotaState(**{**asdict(state), "quota_code": quota_code})
        state = QuotaState(**{**asdict(state), "applied_value": current})
        if current >= desired_value:
            return QuotaState(**{**asdict(state), "status": SATISFIED})
        existing = open_request(client, service_code, quota_code)
        if existing is not None:
            return _open(state, existing)
        try:
            response = client.request_service_quota_increase(
                ServiceCode=service_code, QuotaCode=quota_code, DesiredValue=float(desired_value)
            )
        except ClientError as error:
            # Another request was opened between our check and this call (e.g. by a parallel deploy).
            if error.response.get("Error", {}).get("Code") == "ResourceAlreadyExistsException":
                return QuotaState(
                    **{**asdict(state), "status": REQUEST_OPEN, "reason": "a request is already open"}
                )
            raise
        requested = response["RequestedQuota"]
        return QuotaState(
            **{
                **asdict(state),
                "status": REQUESTED,
                "request_id": requested.get("Id", ""),
                "request_status": requested.get("Status", ""),
            }
        )
    except ClientError as error:
        if not is_throttling(error):
            err = error.response.get("Error", {})
            return QuotaState(
                **{
                    **asdict(state),
                    "status": REFUSED,
                    "reason": f"{error.operation_name}: {err.get('Code', 'Error')}: {err.get('Message', '')}"[
                        :1000
                    ],
                }
            )
        return QuotaState(
            **{
                **asdict(state),
                "status": UNVERIFIED,
                "reason": f"Service Quotas throttled the check ({error.response['Error']['Code']}); "
                "the next deploy of this stack checks again",
            }
        )


def _open(state: QuotaState, request: dict[str, Any]) -> QuotaState:
    return QuotaState(
        **{
            **asdict(state),
            "status": REQUEST_OPEN,
            "request_id": request.get("Id", ""),
            "request_status": request.get("Status", ""),
            "reason": f"request for {request.get('DesiredValue')} already open",
        }
    )


def physical_resource_id(service_code: str, quota_name: str) -> str:
    """Stable per quota: renaming the quota in cdk.json replaces the resource (and deletes nothing)."""
    return f"{service_code}/{quota_name}"


def _properties(event: dict[str, Any]) -> tuple[str, str, float]:
    props = event.get("ResourceProperties", {})
    service_code = props.get("ServiceCode")
    quota_name = props.get("QuotaName")
    desired = props.get("DesiredValue")
    if not isinstance(service_code, str) or not service_code:
        raise ValueError(
            f"ServiceCode: {service_code!r} is not accepted; accepted: a service code such as 'sagemaker'"
        )
    if not isinstance(quota_name, str) or not quota_name:
        raise ValueError(f"QuotaName: {quota_name!r} is not accepted; accepted: a Service Quotas quota name")
    try:
        # CloudFormation passes every property as a string.
        value = float(desired)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ValueError(f"DesiredValue: {desired!r} is not accepted; accepted: a positive number") from None
    if value <= 0:
        raise ValueError(f"DesiredValue: {desired!r} is not accepted; accepted: a positive number")
    return service_code, quota_name, value


def on_event(event: dict[str, Any], client: Any) -> dict[str, Any]:
    """The Provider framework's answer for one custom-resource event; raises to fail the resource."""
    request_type = event.get("RequestType")
    if request_type == "Delete":
        # Quota increases cannot be handed back; leave them, never fail a stack deletion.
        return {"PhysicalResourceId": event.get("PhysicalResourceId", "none"), "Data": {}}
    service_code, quota_name, desired = _properties(event)
    try:
        state = ensure_quota(client, service_code, quota_name, desired)
    except UnknownQuotaError as error:
        raise UnknownQuotaError(f"QuotaName: {error}") from error
    LOGGER.info("quota checked", extra={"request_type": request_type, **asdict(state)})
    return {"PhysicalResourceId": physical_resource_id(service_code, quota_name), "Data": state.attributes()}


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Lambda entry point (the Provider's onEvent): an exception here is reported FAILED by the Provider."""
    import boto3
    from botocore.config import Config

    client = boto3.client("service-quotas", config=Config(retries={"mode": "standard", "max_attempts": 6}))
    try:
        return on_event(event, client)
    except (UnknownQuotaError, ValueError, ClientError) as error:
        LOGGER.error(
            "quota request failed", extra={"request_type": event.get("RequestType"), "error": str(error)}
        )
        raise
