"""benchmarks/qa_padding.py: padded token counts, the SQuAD-shaped distribution, measure()."""

from __future__ import annotations

import statistics

import pytest

from benchmarks import qa_padding as qp
from hfpipe.fixtures.encoders import build_tokenizer


def test_epoch_tokens_bounds_and_extremes() -> None:
    lengths = [10, 300, 40, 384, 5, 77, 120]
    one = qp.epoch_tokens(lengths, 384, batch_size=1, seed=0)
    assert one["tokens_dynamic_padding"] == sum(lengths)  # a batch of one is never padded
    assert one["tokens_padded_to_max_length"] == 384 * len(lengths)
    everything = qp.epoch_tokens(lengths, 384, batch_size=len(lengths), seed=0)
    assert everything["tokens_dynamic_padding"] == max(lengths) * len(lengths)
    mid = qp.epoch_tokens(lengths, 384, batch_size=3, seed=5)
    assert sum(lengths) < mid["tokens_dynamic_padding"] < 384 * len(lengths)
    assert mid == qp.epoch_tokens(lengths, 384, batch_size=3, seed=5)


def test_squad_shaped_lengths_are_deterministic_and_squad_like() -> None:
    pairs = qp.squad_shaped_lengths(20_000, seed=42)
    assert pairs == qp.squad_shaped_lengths(20_000, seed=42)
    assert pairs != qp.squad_shaped_lengths(20_000, seed=43)
    questions, contexts = zip(*pairs, strict=True)
    assert min(questions) == qp.QUESTION_MIN and max(questions) == qp.QUESTION_MAX
    assert 130 <= statistics.median(contexts) <= 150
    assert 140 <= statistics.mean(contexts) <= 170
    overflow = sum(c > 384 - 3 - q for q, c in pairs) / len(pairs)
    assert 0.005 < overflow < 0.05, overflow  # a thin tail past one window
    assert max(contexts) <= qp.CONTEXT_MAX and min(contexts) >= qp.CONTEXT_MIN


def test_synthetic_rows_have_exact_token_counts_and_window_like_run_qa() -> None:
    tok = build_tokenizer("bert")
    rows = qp.squad_shaped_rows(30, seed=1, tokenizer=tok)
    for row, (q, c) in zip(rows, qp.squad_shaped_lengths(30, seed=1), strict=True):
        assert len(tok.tokenize(row["question"])) == q
        assert len(tok.tokenize(row["context"])) == c
    # One long example: 600 context tokens, 10 question tokens; a window holds 384 - 10 - 3 = 371 context
    # tokens and the next starts 128 tokens before the previous ended: 2 windows, the second 10+3+357.
    long_row = dict(rows[0], question=" ".join(rows[0]["question"].split()[:1] * 10))
    long_row["context"] = " ".join((rows[0]["context"].split() * 40)[:600])
    assert len(tok.tokenize(long_row["question"])) == 10
    assert qp.window_lengths([long_row], tok, 384, 128) == [384, 10 + 3 + (600 - 371 + 128)]


@pytest.mark.slow
def test_measure_quick(assert_figures) -> None:
    figs = assert_figures(qp.measure(quick=True), "benchmarks.qa_padding", 4)
    fixture, synthetic, packing, trained = figs
    # Dynamic padding processes fewer tokens than padding every window to 384, never fewer than the real ones.
    for f in (fixture, synthetic):
        assert f["baseline_value"] % 384 == 0 and f["ratio"] < 1
    assert 0 < packing["value"] <= 1 and packing["baseline_value"] == 1.0
    assert trained["ratio"] >= 1  # the original drops the last partial block
