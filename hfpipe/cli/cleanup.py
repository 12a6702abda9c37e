"""`hfpipe cleanup` and `hfpipe stop`'s clean-up: the command's side of `hfpipe.core.cleanup`.

What may be deleted is the core rule (tagged by hfpipe for the environment, and the execution when one is
named), shared with the Cleanup Lambda; this module parses `--older-than` and deletes what the rule found,
saying so for each resource. S3 objects (artifacts, checkpoints, data) are never touched.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import timedelta
from typing import Any

from rich.console import Console

from hfpipe.cli.aws import HfpipeError, aws_error
from hfpipe.core.cleanup import Resource, delete, find_resources

__all__ = ["delete_all", "find_resources", "parse_duration"]

_DURATION = re.compile(r"^(\d+)([mhdw])$")
_UNITS = {"m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def parse_duration(text: str) -> timedelta:
    """'30m', '12h', '7d', '2w' -> timedelta, or an error naming the value and the accepted forms."""
    match = _DURATION.match(text)
    error = HfpipeError(
        f"--older-than {text!r} is not a duration: use a positive number followed by m, h, d or w "
        "(e.g. 12h, 7d)"
    )
    if not match or int(match.group(1)) == 0:
        raise error
    age = timedelta(**{_UNITS[match.group(2)]: int(match.group(1))}) if len(match.group(1)) < 9 else None
    if age is None or age > timedelta(weeks=5200):
        raise HfpipeError(f"--older-than {text!r} is too long; accepted: at most 5200w (100 years)")
    return age


def delete_all(sagemaker: Any, resources: Iterable[Resource], console: Console) -> int:
    """Delete each resource (in the order found: endpoints before their configs and models); returns the count."""
    import botocore.exceptions

    count = 0
    for resource in resources:
        try:
            delete(sagemaker, resource.kind, resource.name)
        except (botocore.exceptions.ClientError, botocore.exceptions.BotoCoreError) as exc:
            raise aws_error(exc, f"deleting {resource.kind.name} {resource.name}") from None
        console.print(f"deleted {resource.kind.name} {resource.name}")
        count += 1
    return count
