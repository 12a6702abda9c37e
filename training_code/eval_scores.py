"""The evaluation's scores: per task kind, each with its sample size and a percentile bootstrap interval, the
paired bootstrap of challenger minus champion over the same examples, and the verdict (docs/evaluation.md).

numpy only (rouge_score where ROUGE is asked for, imported then); no model, no torch: `evaluate.py` predicts,
this module scores. Each metric is a statistic of a resample of the examples, so an interval of a mean
(exact match, accuracy, ROUGE) and of a ratio over the whole set (macro-F1, corpus perplexity) come from the
same bootstrap:

- extractive QA: `exact_match`, `f1` as the official SQuAD v1.1 evaluation script scores them
  (`evaluate-v1.1.py`: normalize_answer, exact_match_score, f1_score, metric_max_over_ground_truths; the
  functions are qa_utils', which training's evaluation uses too), in percent;
- classification: `accuracy` and `macro_f1` (the unweighted mean over the classes of each class's F1 =
  2TP / (2TP + FP + FN), scikit-learn's f1_score(average="macro", labels=L, zero_division=0) with L the
  classes that occur in the gold labels or either model's predictions), in percent;
- summarization: `rouge1`, `rouge2`, `rougeL`, `rougeLsum`, the F-measure of Google's rouge_score
  (RougeScorer with use_stemmer=True, as training's run_clm.py scores), in percent;
- causal LM: `perplexity`, exp(total negative log-likelihood / total tokens) over the examples' tokens;
  lower is better.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

SCHEMA = "hfpipe.evaluation/1"
#: The task kinds' metrics, each with whether higher is better (hfpipe/kinds/tasks.py's `metrics` must say
#: the same: tests/training/test_eval_scores.py compares them).
ROUGE_KEYS = ("rouge1", "rouge2", "rougeL", "rougeLsum")
TASK_METRICS: dict[str, dict[str, bool]] = {
    "question-answering": {"exact_match": True, "f1": True},
    "text-classification": {"accuracy": True, "macro_f1": True},
    "summarization": {**dict.fromkeys(ROUGE_KEYS, True), "perplexity": False},
    "text-generation": {**dict.fromkeys(ROUGE_KEYS, True), "perplexity": False},
}
#: The fewest held-out examples a verdict is drawn from (the recipe schema's evaluation.max_examples minimum,
#: hfpipe.core.recipe.schema.EVALUATION_MIN_EXAMPLES, must say the same: tests/training/test_eval_scores.py).
#: With n examples the smallest non-zero difference is 100/n points, and the paired bootstrap cannot see
#: further than the examples: n examples that all favour one model give the interval [d, d], a `better`
#: from 2 examples. 11 is the smallest n for which even that clean sweep is evidence at every confidence
#: the rule accepts (up to 0.999) by the exact sign test, the small-sample test of paired outcomes: n
#: examples all in one model's favour have the two-sided p = 2 * 0.5**n, below 1 - 0.999 = 0.001 only from
#: n = 11 (2 * 0.5**10 = 0.00195). Fewer, and no verdict is given (evaluate.py fails the job, saying why).
MIN_EXAMPLES = 11
#: The most resampled example indices held at once (resamples x examples), to bound memory.
_CHUNK = 2_000_000

Statistic = Callable[[np.ndarray], np.ndarray]


@dataclass(frozen=True)
class Metric:
    """One metric of one model on n examples: `statistic(indices)` maps a (resamples, n) array of example
    indices to one value per row; the point estimate is its value on the examples themselves."""

    name: str
    n: int
    statistic: Statistic
    higher_is_better: bool = True

    def value(self) -> float:
        return float(self.statistic(np.arange(self.n)[None, :])[0])


def mean_metric(name: str, per_example: Sequence[float]) -> Metric:
    """A metric that is the mean of a per-example score (exact match, F1, accuracy, ROUGE)."""
    values = np.asarray(per_example, dtype=np.float64)
    return Metric(name, len(values), lambda idx: values[idx].mean(axis=1))


def macro_f1_metric(predictions: Sequence[int], gold: Sequence[int], labels: Sequence[int]) -> Metric:
    """Macro-F1 in percent over `labels` (a class without TP, FP or FN in a resample scores 0)."""
    pred, truth = np.asarray(predictions), np.asarray(gold)
    if pred.shape != truth.shape:
        raise ValueError(f"{len(pred)} predictions for {len(truth)} gold labels; they must align")

    def statistic(idx: np.ndarray) -> np.ndarray:
        p, g = pred[idx], truth[idx]
        f1 = []
        for label in labels:
            tp = ((p == label) & (g == label)).sum(axis=1)
            wrong = ((p == label) != (g == label)).sum(axis=1)  # FP + FN
            denominator = 2 * tp + wrong
            f1.append(np.where(denominator > 0, 2 * tp / np.maximum(denominator, 1), 0.0))
        return 100.0 * np.mean(f1, axis=0)

    return Metric("macro_f1", len(pred), statistic)


def perplexity_metric(nll: Sequence[float], tokens: Sequence[int]) -> Metric:
    """Corpus perplexity: exp(sum of the examples' token NLL / sum of their scored tokens)."""
    losses, counts = np.asarray(nll, dtype=np.float64), np.asarray(tokens, dtype=np.float64)
    if (counts <= 0).any():
        raise ValueError("every example needs at least one scored token for perplexity")
    return Metric(
        "perplexity",
        len(losses),
        lambda idx: np.exp(np.minimum(losses[idx].sum(axis=1) / counts[idx].sum(axis=1), 50.0)),
        higher_is_better=False,
    )


# --- per task kind: the metrics of one model's predictions -------------------------------------------------
def qa_metrics(predictions: Mapping[str, str], references: Mapping[str, Sequence[str]]) -> list[Metric]:
    """SQuAD v1.1 exact match and F1 per question, in percent, as the official script's evaluate() takes them:
    a question without a prediction scores 0 ("Unanswered question ... will receive score 0"), any other
    prediction (an empty one too) takes its best score over the gold answers (metric_max_over_ground_truths),
    with qa_utils' normalize_answer, exact_match_score and f1_score (the script's own)."""
    import qa_utils

    em, f1 = [], []
    for qid, truths in references.items():
        if not truths:
            raise ValueError(f"question {qid!r} has no gold answer")
        if qid not in predictions:
            em.append(0.0)
            f1.append(0.0)
            continue
        prediction = predictions[qid]
        em.append(100.0 * max(qa_utils.exact_match_score(prediction, t) for t in truths))
        f1.append(100.0 * max(qa_utils.f1_score(prediction, t) for t in truths))
    return [mean_metric("exact_match", em), mean_metric("f1", f1)]


def classification_metrics(
    predictions: Sequence[int], gold: Sequence[int], labels: Sequence[int]
) -> list[Metric]:
    """Accuracy and macro-F1 (over `labels`), in percent."""
    correct = [100.0 * (p == g) for p, g in zip(predictions, gold, strict=True)]
    return [mean_metric("accuracy", correct), macro_f1_metric(predictions, gold, labels)]


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def sentence_lines(text: str) -> str:
    """One sentence per line: `rougeLsum` scores the longest common subsequence per sentence (newline-split),
    which is how samsum results are usually reported (the `evaluate` summarization scripts split with nltk;
    this splits after . ! ?, enough for dialogue summaries and without a download)."""
    return "\n".join(s for s in _SENTENCE_END.split(text.strip()) if s)


def rouge_metrics(references: Sequence[str], predictions: Sequence[str]) -> list[Metric]:
    """ROUGE-1/2/L/Lsum F-measure per example (rouge_score's RougeScorer, stemmed), in percent."""
    from rouge_score import rouge_scorer

    scorer = rouge_scorer.RougeScorer(list(ROUGE_KEYS), use_stemmer=True)
    per_key: dict[str, list[float]] = {key: [] for key in ROUGE_KEYS}
    for reference, prediction in zip(references, predictions, strict=True):
        scores = scorer.score(sentence_lines(reference), sentence_lines(prediction))
        for key in ROUGE_KEYS:
            per_key[key].append(100.0 * scores[key].fmeasure)
    return [mean_metric(key, values) for key, values in per_key.items()]


# --- the bootstrap -----------------------------------------------------------------------------------------
def resample_indices(n: int, resamples: int, seed: int) -> list[np.ndarray]:
    """`resamples` rows of n example indices drawn with replacement (numpy's PCG64 seeded with `seed`), in
    chunks of at most _CHUNK indices; the same seed gives the same rows, so two models can be paired."""
    if n < 1:
        raise ValueError("no example to score")
    rng = np.random.default_rng(seed)
    rows = max(1, _CHUNK // n)
    chunks, left = [], resamples
    while left > 0:
        take = min(rows, left)
        chunks.append(rng.integers(0, n, size=(take, n)))
        left -= take
    return chunks


def percentile_interval(values: np.ndarray, confidence: float) -> tuple[float, float]:
    """The percentile bootstrap interval: the (1 - c)/2 and (1 + c)/2 quantiles of the resampled values."""
    tail = (1.0 - confidence) / 2.0
    low, high = np.quantile(values, [tail, 1.0 - tail])
    return float(low), float(high)


def score(metric: Metric, resamples: int, confidence: float, seed: int) -> dict[str, Any]:
    """{"value", "n", "low", "high"} of one metric."""
    values = np.concatenate([metric.statistic(idx) for idx in resample_indices(metric.n, resamples, seed)])
    low, high = percentile_interval(values, confidence)
    return {"value": _finite(metric.value()), "n": metric.n, "low": _finite(low), "high": _finite(high)}


def paired_difference(
    challenger: Metric, champion: Metric, resamples: int, confidence: float, seed: int
) -> dict[str, Any]:
    """Challenger minus champion on the same resampled examples, stated so that positive is better (for a
    lower-is-better metric, champion minus challenger): {"metric", "value", "low", "high"}."""
    if challenger.n != champion.n:
        raise ValueError(f"paired bootstrap needs the same examples: {challenger.n} vs {champion.n}")
    sign = 1.0 if challenger.higher_is_better else -1.0
    diffs = np.concatenate(
        [
            sign * (challenger.statistic(idx) - champion.statistic(idx))
            for idx in resample_indices(challenger.n, resamples, seed)
        ]
    )
    low, high = percentile_interval(diffs, confidence)
    value = sign * (challenger.value() - champion.value())
    return {"metric": challenger.name, "value": _finite(value), "low": _finite(low), "high": _finite(high)}


def verdict(difference: Mapping[str, Any] | None, margin: float) -> str:
    """better (the interval's low end above 0), worse (its high end below -margin), else not_worse;
    no_champion without a champion."""
    if difference is None:
        return "no_champion"
    low, high = difference["low"], difference["high"]
    if low is not None and low > 0:
        return "better"
    if high is not None and high < -margin:
        return "worse"
    return "not_worse"


def reason(verdict_: str, rule: Mapping[str, Any], difference: Mapping[str, Any] | None) -> str:
    """The verdict in one line a person reads."""
    metric, confidence = rule["metric"], rule["confidence"]
    if difference is None:
        return f"no champion to compare with: the challenger's {metric} is recorded, nothing is compared"
    sense = "" if rule.get("higher_is_better", True) else " (lower is better; positive means better)"
    value, low, high = (_figure(difference[key]) for key in ("value", "low", "high"))
    span = f"challenger - champion {metric}{sense}: {value}, {confidence:.1%} interval [{low}, {high}]"
    said = {
        "better": "better beyond noise: the whole interval is above 0",
        "worse": f"worse: the whole interval is below -{rule['margin']:g} (the margin)",
        "not_worse": f"not worse by more than the margin {rule['margin']:g}, not better beyond noise",
    }
    return f"{said[verdict_]}; {span}"


def _figure(value: float | None) -> str:
    return "n/a" if value is None else f"{value:+.4g}"


def _finite(value: float) -> float | None:
    """JSON has no NaN or infinity: None where a figure is not a number."""
    return round(value, 6) + 0.0 if math.isfinite(value) else None  # + 0.0: no "-0"


def document(
    *,
    task: str,
    channel: str,
    rule: Mapping[str, Any],
    challenger: Sequence[Metric],
    champion: Sequence[Metric] | None,
    seed: int,
    seconds: float,
) -> dict[str, Any]:
    """evaluation.json (the contract's schema "hfpipe.evaluation/1"): each model's scores, the paired
    difference on the rule's metric and the verdict."""
    resamples, confidence = int(rule["resamples"]), float(rule["confidence"])
    by_name = {m.name: m for m in challenger}
    chosen = by_name[rule["metric"]]
    full_rule = {**rule, "higher_is_better": chosen.higher_is_better}
    scores = {"scores": {m.name: score(m, resamples, confidence, seed) for m in challenger}}
    champion_scores = difference = None
    if champion is not None:
        champion_scores = {"scores": {m.name: score(m, resamples, confidence, seed) for m in champion}}
        other = {m.name: m for m in champion}[rule["metric"]]
        difference = paired_difference(chosen, other, resamples, confidence, seed)
    said = verdict(difference, float(rule["margin"]))
    return {
        "schema": SCHEMA,
        "task": task,
        "data": {"channel": channel, "examples": chosen.n},
        "rule": full_rule,
        "challenger": scores,
        "champion": champion_scores,
        "difference": difference,
        "verdict": said,
        "reason": reason(said, full_rule, difference),
        "seconds": round(seconds, 3),
    }
