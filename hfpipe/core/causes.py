"""The message of a Step Functions error's ``Cause``.

A caught error (``Catch`` with a ``ResultPath``) and a failed execution carry ``Error`` and ``Cause``. When a
Lambda function raised, the ``Cause`` is the function's error object as JSON, ``{"errorMessage": ...,
"errorType": ..., "stackTrace": [...]}`` ("Handling errors in Step Functions workflows", "Error names",
https://docs.aws.amazon.com/step-functions/latest/dg/concepts-error-handling.html; the error object:
"Lambda function errors in Python", https://docs.aws.amazon.com/lambda/latest/dg/python-exceptions.html);
any other cause is plain text. Stdlib only: the Report Lambda, the deploy's guards and the command share it.
"""

from __future__ import annotations

import json

NO_CAUSE = "no cause given"


def cause_message(cause: object) -> str:
    """The text of an error's cause: a Lambda error's ``errorMessage``, else the cause itself as it is
    (``NO_CAUSE`` when there is none)."""
    if cause is None or cause == "":
        return NO_CAUSE
    text = str(cause)
    try:
        parsed = json.loads(text)
    except ValueError:
        return text
    message = parsed.get("errorMessage") if isinstance(parsed, dict) else None
    return str(message) if message else text
