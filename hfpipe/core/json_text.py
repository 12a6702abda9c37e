"""JSON text from a user (a recipe file, a `--set` value, a request): read as JSON defines it, with what
Python's `json` accepts beyond that refused (NaN and Infinity), and nesting bounded, since the code that
walks, copies and validates a value recurses. Stdlib only (the Lambdas import it)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from hfpipe.core.validate import RecipeError


def refuse_constant(name: str) -> Any:
    raise ValueError(name)


#: How deep objects and lists may nest in a recipe, an override or a request: far deeper than any recipe or
#: request needs (a recipe nests 6 levels), and shallow enough that walking, validating and copying one
#: (recursive code, Python's limit is 1,000 frames) cannot fail with RecursionError.
MAX_NESTING = 100


def check_nesting(value: Any, field: str) -> None:
    """Refuse a value whose objects and lists nest deeper than MAX_NESTING (walked without recursion)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, Mapping | list | tuple):
            if depth > MAX_NESTING:
                raise RecipeError(
                    f"{field}: objects and lists nested more than {MAX_NESTING} levels deep are not accepted; "
                    f"accepted: JSON nested at most {MAX_NESTING} levels"
                )
            children = node.values() if isinstance(node, Mapping) else node
            stack.extend((child, depth + 1) for child in children)


def loads(text: str | bytes, field: str) -> Any:
    """``json.loads`` that refuses NaN, Infinity and -Infinity (Python accepts them, JSON does not, and
    Step Functions refuses an input that holds them), and values nested deeper than MAX_NESTING."""
    try:
        value = json.loads(text, parse_constant=refuse_constant)
    except RecursionError:
        raise RecipeError(
            f"{field}: nested deeper than can be read; accepted: JSON nested at most {MAX_NESTING} levels"
        ) from None
    except json.JSONDecodeError as err:
        raise RecipeError(
            f"{field}: not valid JSON ({err.msg} at line {err.lineno} column {err.colno})"
        ) from None
    except ValueError as err:
        raise RecipeError(
            f"{field}: {err} is not accepted; accepted: finite numbers (JSON has no NaN or Infinity)"
        ) from None
    check_nesting(value, field)
    return value


def finite(value: Any) -> Any:
    """``value`` with every NaN, Infinity and -Infinity float replaced by None (JSON's null), walked without
    recursion; what JSON cannot hold (a diverged loss, a metric of a run that never evaluated) is unknown."""
    import math

    def fix(node: Any) -> Any:
        return None if isinstance(node, float) and not math.isfinite(node) else node

    root: list[Any] = [value]
    stack: list[tuple[Any, Any]] = [(root, 0)]
    while stack:
        parent, key = stack.pop()
        node = parent[key]
        if isinstance(node, Mapping):
            parent[key] = copy = dict(node)
            stack.extend((copy, k) for k in copy)
        elif isinstance(node, list | tuple):
            parent[key] = copy_list = list(node)
            stack.extend((copy_list, i) for i in range(len(copy_list)))
        else:
            parent[key] = fix(node)
    return root[0]


def dumps(value: Any, *, indent: int | None = None, sort_keys: bool = False, default: Any = None) -> str:
    """Strict JSON text of ``value`` (what the command's --json prints): NaN and infinities become null
    (``finite``), and ``allow_nan=False`` makes anything else non-finite an error rather than Python's
    ``NaN``, which JSON parsers (jq, JSON.parse) refuse."""
    return json.dumps(finite(value), indent=indent, sort_keys=sort_keys, default=default, allow_nan=False)
