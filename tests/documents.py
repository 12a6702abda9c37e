"""What the tests of the typed documents (the plan, the deploy plan, the promote plan) share: a document with
one value changed or one key left out, the check that each such document is refused in one line, and every string of a synthesized definition (to find the JSONPaths it
reads). Test modules import it by name (tests/ is on sys.path through its conftest)."""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Iterable
from typing import Any

import pytest


def with_value(doc: dict[str, Any], path: tuple[str, ...], value: Any) -> dict[str, Any]:
    """A deep copy of ``doc`` with the value at ``path`` (keys, outermost first) replaced by ``value``."""
    out = copy.deepcopy(doc)
    inner = out
    for key in path[:-1]:
        inner = inner[key]
    inner[path[-1]] = value
    return out


def without(doc: dict[str, Any], key: str) -> dict[str, Any]:
    """``doc`` without its top-level ``key``."""
    return {k: v for k, v in doc.items() if k != key}


def assert_each_refused(
    read: Callable[[Any], Any], error: type[Exception], refusals: Iterable[tuple[str, Any, str]]
) -> None:
    """Each ``(case, document, pattern)``: ``read`` refuses the document with ``error``, in one line that
    ``pattern`` (a regular expression) finds."""
    for case, bad, pattern in refusals:
        with pytest.raises(error) as raised:
            read(bad)
        text = str(raised.value)
        assert re.search(pattern, text), (case, text)
        assert "\n" not in text, case


def strings(node: Any) -> list[str]:
    """Every string in a JSON value, keys included, depth first."""
    if isinstance(node, dict):
        return [s for k, v in node.items() for s in (*strings(k), *strings(v))]
    if isinstance(node, list):
        return [s for v in node for s in strings(v)]
    return [node] if isinstance(node, str) else []


def assert_same_plan(stored: dict[str, Any], planned: dict[str, Any]) -> None:
    """The plan a Plan state stored is the one a dry run printed: the same JSON, but for the endpoint's expiry
    tag, which counts from each one's planning (seconds apart), and which both have or neither has."""
    from hfpipe import contract
    from hfpipe.core.deploy import expiry

    def split(plan: dict[str, Any]) -> tuple[dict[str, Any], Any]:
        tags = plan["hosting_tags"]
        rest = [t for t in tags if t["Key"] != contract.TAG_EXPIRES_AT]
        return {**plan, "hosting_tags": rest}, expiry.expiry_of({t["Key"]: t["Value"] for t in tags})

    (a, a_expires), (b, b_expires) = split(stored), split(planned)
    assert a == b
    assert (a_expires is None) == (b_expires is None)
    assert a_expires is None or abs((a_expires - b_expires).total_seconds()) < 600
