"""`hfpipe invoke`'s requests: from --data, --file, --dialogue or standard input, with --parameters merged,
each with where it came from (the error that refuses one names it)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from hfpipe.cli.aws import HfpipeError
from hfpipe.cli.paths import argument_text, read_text
from hfpipe.core import json_text
from hfpipe.core.validate import RecipeError


def _parse(text: str, origin: str) -> Any:
    """json.loads, with a request nested deeper than the core's rule refused in one line."""
    try:
        value = json.loads(text)
    except RecursionError:
        raise HfpipeError(
            f"{origin} is nested deeper than can be read; accepted: JSON nested at most "
            f"{json_text.MAX_NESTING} levels"
        ) from None
    try:
        json_text.check_nesting(value, origin)
    except RecipeError as err:
        raise HfpipeError(str(err)) from None
    return value


def _json_documents(text: str, origin: str) -> tuple[list[Any], list[str]]:
    """One JSON document, or else one request per non-empty line (JSON lines)."""
    try:
        return [_parse(text, origin)], [origin]
    except ValueError:
        pass
    requests, sources = [], []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            requests.append(_parse(line, f"{origin} line {number}"))
        except json.JSONDecodeError as err:
            raise HfpipeError(
                f"{origin} line {number} is not JSON ({err.msg}); give one JSON request, or one per line"
            ) from None
        sources.append(f"{origin} line {number}")
    if not requests:
        raise HfpipeError(f"{origin} holds no request: give one JSON request, or one per line")
    return requests, sources


def read_requests(args: argparse.Namespace) -> tuple[list[Any], list[str]]:
    """The requests from --data, --file, --dialogue (one of them: invoke's option_rules) or standard input, and
    where each came from."""
    parameters = None
    if args.parameters:
        try:
            parameters = _parse(args.parameters, "--parameters")
        except json.JSONDecodeError as err:
            raise HfpipeError(f"--parameters {args.parameters!r} is not JSON ({err.msg})") from None
        if not isinstance(parameters, dict):
            raise HfpipeError(
                f"--parameters {args.parameters!r} must be a JSON object, e.g. '{{\"top_p\": 0.9}}'"
            )
    if args.dialogue:
        text = read_text(args.dialogue, "--dialogue").strip()
        if not text:
            raise HfpipeError(
                f"--dialogue {args.dialogue!r} is empty: give a chat, one 'Name: message' per line"
            )
        requests: list[Any] = [{"dialogue": text}]
        sources = [f"--dialogue {args.dialogue}"]
    elif args.data:
        try:
            text = argument_text(args.data, "--data")
            requests, sources = [_parse(text, "--data")], ["--data"]
        except json.JSONDecodeError as err:
            raise HfpipeError(f"--data is not JSON ({err.msg}): {args.data[:80]!r}") from None
    elif args.file:
        requests, sources = _json_documents(read_text(args.file, "--file"), f"--file {args.file}")
    else:
        if sys.stdin.isatty():
            raise HfpipeError(
                "no request: pass --data JSON, --file PATH, --dialogue FILE, or pipe JSON lines to stdin"
            )
        requests, sources = _json_documents(sys.stdin.read(), "stdin")
    if parameters is not None:
        for request in requests:
            if not isinstance(request, dict):
                raise HfpipeError("--parameters needs requests that are JSON objects")
            request["parameters"] = {**(request.get("parameters") or {}), **parameters}
    return requests, sources
