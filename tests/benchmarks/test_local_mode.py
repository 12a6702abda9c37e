"""benchmarks/local_mode.py: cold/warm bookkeeping with a stand-in run; a real failing run's error."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks import local_mode as lm


def test_measure_cold_warm_figures(monkeypatch: pytest.MonkeyPatch, assert_figures) -> None:
    seen: list[tuple[Path, Path]] = []
    walls = iter([100.0, 40.0, 120.0, 50.0, 110.0, 45.0])

    def fake(out: Path, cache: Path, recipe: str = "tiny-lora") -> tuple[float, dict]:
        seen.append((out, cache))
        return next(walls), {"outcome": "succeeded", "training_seconds": 30.0}

    monkeypatch.setattr(lm, "run_local", fake)
    cold, warm = assert_figures(lm.measure(quick=False), "benchmarks.local_mode", 2)
    assert cold["value"] == 110.0 and cold["baseline_value"] == 30.0
    assert warm["value"] == 45.0 and warm["baseline_value"] == 110.0
    # Each pair: cold and warm share folder and caches; the next pair starts from fresh ones.
    assert seen[0] == seen[1] and seen[2] == seen[3] and seen[4] == seen[5]
    assert len({seen[0], seen[2], seen[4]}) == 3


def test_failed_run_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        lm, "run_local", lambda out, cache, recipe="x": (1.0, {"outcome": "failed", "failure_reason": "boom"})
    )
    with pytest.raises(RuntimeError, match="cold run did not succeed: boom"):
        lm.measure(quick=True)


def test_real_command_error_is_reported(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="no-such-recipe"):
        lm.run_local(tmp_path / "out", tmp_path / "cache", recipe="no-such-recipe")
