"""`hfpipe invoke`'s requests: from --data, --file, --dialogue or standard input, with --parameters merged,
each with where it came from (the error that refuses one names it)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from hfpipe.cli.aws import HfpipeError


def _json_documents(text: str, origin: str) -> tuple[list[Any], list[str]]:
    """One JSON document, or else one request per non-empty line (JSON lines)."""
    try:
        return [json.loads(text)], [origin]
    except ValueError:
        pass
    requests, sources = [], []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            requests.append(json.loads(line))
        except json.JSONDecodeError as err:
            raise HfpipeError(
                f"{origin} line {number} is not JSON ({err.msg}); give one JSON request, or one per line"
            ) from None
        sources.append(f"{origin} line {number}")
    if not requests:
        raise HfpipeError(f"{origin} holds no request: give one JSON request, or one per line")
    return requests, sources


def read_requests(args: argparse.Namespace) -> tuple[list[Any], list[str]]:
    """The requests from --data, --file, --dialogue or standard input, and where each came from."""
    given = [opt for opt in ("data", "file", "dialogue") if getattr(args, opt)]
    if len(given) > 1:
        raise HfpipeError(
            f"give one of --data, --file, --dialogue (got {', '.join('--' + g for g in given)})"
        )
    parameters = None
    if args.parameters:
        try:
            parameters = json.loads(args.parameters)
        except json.JSONDecodeError as err:
            raise HfpipeError(f"--parameters {args.parameters!r} is not JSON ({err.msg})") from None
        if not isinstance(parameters, dict):
            raise HfpipeError(
                f"--parameters {args.parameters!r} must be a JSON object, e.g. '{{\"top_p\": 0.9}}'"
            )
    if args.dialogue:
        path = Path(args.dialogue)
        if not path.is_file():
            raise HfpipeError(f"--dialogue {args.dialogue!r}: no such file")
        text = path.read_text().strip()
        if not text:
            raise HfpipeError(
                f"--dialogue {args.dialogue!r} is empty: give a chat, one 'Name: message' per line"
            )
        requests: list[Any] = [{"dialogue": text}]
        sources = [f"--dialogue {args.dialogue}"]
    elif args.data:
        try:
            requests, sources = [json.loads(args.data)], ["--data"]
        except json.JSONDecodeError as err:
            raise HfpipeError(f"--data is not JSON ({err.msg}): {args.data[:80]!r}") from None
    elif args.file:
        path = Path(args.file)
        if not path.is_file():
            raise HfpipeError(f"--file {args.file!r}: no such file")
        requests, sources = _json_documents(path.read_text(), f"--file {args.file}")
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
