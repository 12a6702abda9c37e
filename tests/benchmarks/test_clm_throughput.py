"""benchmarks/clm_throughput.py: packing report and measure() in quick mode."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks import clm_throughput as ct
from hfpipe.fixtures import samsum


def test_packing_report_counts_every_token_once(tmp_path: Path) -> None:
    samsum.write_samsum(tmp_path, n_train=40, n_validation=1)
    samsum.build_tiny_bloom(tmp_path / "model")
    rows = ct.packing_report(tmp_path, (64, 100_000))
    small, huge = rows
    assert small["tokens"] == huge["tokens"] > 0
    assert small["blocks"] == -(-small["tokens"] // 64)
    assert small["tokens_dropped_by_original_packing"] == small["tokens"] % 64
    assert huge["blocks"] == 1 and huge["tokens_dropped_by_original_packing"] == huge["tokens"]
    assert huge["packing_efficiency"] == round(huge["tokens"] / 100_000, 4)


def test_throughput_refuses_too_few_steps() -> None:
    with pytest.raises(ValueError, match="steps=2"):
        ct.throughput(steps=2, rounds=1, block_size=64, batch=1, threads=1)


@pytest.mark.slow
def test_measure_quick(assert_figures, in_process_training) -> None:
    figs = assert_figures(ct.measure(quick=True), "benchmarks.clm_throughput", 2)
    assert all(f["unit"] == "tokens/s" for f in figs)
    # Both figures share the one baseline measured in the same run.
    assert figs[0]["baseline_value"] == figs[1]["baseline_value"]
