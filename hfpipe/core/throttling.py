"""Whether an AWS error is throttling: one list for the command and the functions (the command's poll loops,
the deploy's and the adapter's ways back, the promotion's copies, the alarm reads)."""

from __future__ import annotations

#: botocore's standard retry mode's throttling codes (botocore/retries/standard.py,
#: ThrottledRetryableChecker._THROTTLED_ERROR_CODES, botocore 1.44.8;
#: tests/pipeline/test_deploy_way_back.py compares them with the installed botocore). SageMaker answers
#: ``ThrottlingException`` (Amazon SageMaker API Reference, Common Errors).
BOTOCORE_THROTTLING_CODES = frozenset(
    {
        "Throttling",
        "ThrottlingException",
        "ThrottledException",
        "RequestThrottledException",
        "TooManyRequestsException",
        "ProvisionedThroughputExceededException",
        "TransactionInProgressException",
        "RequestLimitExceeded",
        "BandwidthLimitExceeded",
        "LimitExceededException",
        "RequestThrottled",
        "SlowDown",
        "PriorRequestNotComplete",
        "EC2ThrottledException",
    }
)
#: What counts as throttled here: botocore's list (S3's ``SlowDown`` is in it).
THROTTLING_CODES = BOTOCORE_THROTTLING_CODES


def error_code(err: BaseException) -> str:
    """The AWS error code of a botocore ClientError (or of anything with its ``response``), else ""."""
    response = getattr(err, "response", None) or {}
    return str((response.get("Error") or {}).get("Code", ""))


def is_throttled(err: BaseException) -> bool:
    """Whether AWS answered ``err`` because the caller sent too many requests (``THROTTLING_CODES``)."""
    return error_code(err) in THROTTLING_CODES
