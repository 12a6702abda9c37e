"""Fixtures of the benchmark tests: the checks every measurement module's figures must pass."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest

from benchmarks.common import FIGURE_KEYS, validate_figure


def _assert_figures(figures: Any, module: str, count: int) -> list[dict[str, Any]]:
    assert isinstance(figures, list) and len(figures) == count, figures
    for f in figures:
        validate_figure(f, module)
        assert set(f) == set(FIGURE_KEYS), f
        assert f["value"] > 0 and f["baseline_value"] > 0, f
        assert math.isclose(f["ratio"], f["value"] / f["baseline_value"], rel_tol=1e-12), f
        assert f["name"] and f["unit"] and f["baseline_name"] and f["notes"], f
    assert len({f["name"] for f in figures}) == count, "figure names must be distinct"
    return figures


@pytest.fixture
def assert_figures() -> Callable[[Any, str, int], list[dict[str, Any]]]:
    """assert_figures(figures, module, count): exactly `count` valid figures, ratio == value / baseline."""
    return _assert_figures
