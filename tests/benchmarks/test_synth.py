"""benchmarks/synth.py: compare() and measure() with a stand-in synth; the real one is slow-marked."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import synth


def _fake_run_synth(times: dict[str, list[float]], differ: bool = False):
    calls = {"n": 0}

    def run(program: str, outdir: Path) -> float:
        outdir.mkdir(parents=True)
        kind = "hfpipe" if program == synth.HFPIPE_APP else "bucket"
        calls["n"] += 1
        body = {"Resources": {"B": {"Type": "AWS::S3::Bucket"}}, "n": calls["n"] if differ else 0}
        (outdir / "Stack.template.json").write_text(json.dumps(body))
        return times[kind].pop(0)

    return run


def test_measure_reports_medians_and_ratio(monkeypatch: pytest.MonkeyPatch, assert_figures) -> None:
    times = {"hfpipe": [9.0, 30.0, 10.0, 11.0, 12.0], "bucket": [2.0, 2.5, 20.0, 3.0, 2.0]}
    monkeypatch.setattr(synth, "run_synth", _fake_run_synth(times))
    [fig] = assert_figures(synth.measure(quick=False), "benchmarks.synth", 1)
    assert fig["value"] == 11.0 and fig["baseline_value"] == 2.5 and fig["ratio"] == 4.4
    assert "median of 5" in fig["notes"] and "byte-identical" in fig["notes"]


def test_measure_flags_nondeterministic_synth(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(synth, "run_synth", _fake_run_synth({"hfpipe": [1.0] * 5, "bucket": [1.0] * 5}, True))
    [fig] = synth.measure(quick=False)
    assert "WARNING: two synths differ" in fig["notes"]


def test_compare_refuses_zero_rounds() -> None:
    with pytest.raises(ValueError, match="rounds=0"):
        synth.compare(0)


@pytest.mark.slow
def test_measure_quick_real_synth(assert_figures) -> None:
    [fig] = assert_figures(synth.measure(quick=True), "benchmarks.synth", 1)
    assert "median of 1" in fig["notes"]
    assert fig["ratio"] > 1  # every environment's stacks take longer than one bucket
