"""The evaluation's scorers, bootstrap and verdict (training_code/eval_scores.py) and evaluate.py's refusals,
against hand calculations and the libraries they follow; no model."""

from __future__ import annotations

import functools
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "training_code"))

import eval_scores
import evaluate

from hfpipe.kinds import TASK_KINDS

RULE = {"metric": "accuracy", "margin": 0.0, "confidence": 0.95, "resamples": 1000}


def test_macro_f1_and_accuracy_match_a_hand_calculation() -> None:
    # class 0: TP 2, FP 0, FN 1 -> 4/5; class 1: TP 1, FP 1, FN 1 -> 2/4; class 2: TP 1, FP 1, FN 0 -> 2/3.
    gold, predicted = [0, 0, 0, 1, 1, 2], [0, 0, 1, 1, 2, 2]
    accuracy, macro_f1 = eval_scores.classification_metrics(predicted, gold, [0, 1, 2])
    assert accuracy.value() == pytest.approx(100 * 4 / 6)
    assert macro_f1.value() == pytest.approx(100 * (4 / 5 + 2 / 4 + 2 / 3) / 3)
    # A class no example has nor any model predicts scores 0 (scikit-learn's zero_division=0).
    _, with_absent = eval_scores.classification_metrics(predicted, gold, [0, 1, 2, 3])
    assert with_absent.value() == pytest.approx(100 * (4 / 5 + 2 / 4 + 2 / 3) / 4)


def test_squad_scores_follow_the_official_v1_1_script() -> None:
    references = {"a": ["The Cat", "a dog"], "b": ["Paris"], "c": ["blue sky"], "d": ["the"]}
    # a: best over its gold answers; b: normalized (case, punctuation); c: unanswered scores 0; d: an empty
    # prediction is scored like any other, as evaluate-v1.1.py scores it: both normalize to "", an exact
    # match, and no common token, F1 0.
    predictions = {"a": "dog", "b": "paris!", "d": ""}
    exact, f1 = eval_scores.qa_metrics(predictions, references)
    assert exact.value() == pytest.approx(75.0)
    assert f1.value() == pytest.approx(50.0)
    partial = eval_scores.qa_metrics({"c": "a blue"}, {"c": ["blue sky"]})
    assert [m.value() for m in partial] == pytest.approx([0.0, 100 * 2 * 0.5 / 1.5])  # P 1, R 1/2


def test_rouge_is_rouge_scores_stemmed_f_measure() -> None:
    from rouge_score import rouge_scorer

    reference, prediction = "Amanda baked cookies. Jerry wants some.", "Amanda is baking cookies for Jerry."
    metrics = {m.name: m for m in eval_scores.rouge_metrics([reference], [prediction])}
    expected = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"], use_stemmer=True).score(
        reference, prediction
    )
    for key in ("rouge1", "rouge2", "rougeL"):
        assert metrics[key].value() == pytest.approx(100 * expected[key].fmeasure)


def test_perplexity_is_the_corpus_ratio_and_lower_is_better() -> None:
    metric = eval_scores.perplexity_metric([2.0, 6.0], [2, 2])
    assert metric.value() == pytest.approx(np.exp(8.0 / 4))
    assert metric.higher_is_better is False
    lower = eval_scores.perplexity_metric([1.0, 3.0], [2, 2])
    difference = eval_scores.paired_difference(lower, metric, 200, 0.95, seed=0)
    # Stated so that positive means better: champion - challenger for a lower-is-better metric.
    assert difference["value"] == pytest.approx(np.exp(2.0) - np.exp(1.0), rel=1e-5)
    assert difference["low"] > 0 and eval_scores.verdict(difference, 0.0) == "better"


def test_the_bootstrap_is_seeded_and_its_interval_holds_the_estimate() -> None:
    rng = np.random.default_rng(7)
    metric = eval_scores.mean_metric("accuracy", 100.0 * (rng.random(200) < 0.7))
    first = eval_scores.score(metric, 500, 0.95, seed=3)
    assert first == eval_scores.score(metric, 500, 0.95, seed=3)
    assert first["n"] == 200 and first["low"] < first["value"] < first["high"]
    # About 2 standard errors each side: sqrt(0.7 * 0.3 / 200) = 3.2 points.
    assert first["high"] - first["low"] == pytest.approx(4 * 3.24, rel=0.25)
    constant = eval_scores.score(eval_scores.mean_metric("f1", [50.0] * 30), 100, 0.9, seed=0)
    assert (constant["low"], constant["value"], constant["high"]) == (50.0, 50.0, 50.0)


VERDICTS = [
    (None, 0.0, "no_champion"),
    ({"low": 0.1, "high": 3.0}, 0.0, "better"),
    ({"low": -2.0, "high": -0.5}, 1.0, "not_worse"),
    ({"low": -2.0, "high": -1.5}, 1.0, "worse"),
    ({"low": -2.0, "high": 0.5}, 0.0, "not_worse"),
    ({"low": 0.0, "high": 0.0}, 0.0, "not_worse"),
    ({"low": -1.0, "high": -1.0}, 1.0, "not_worse"),
    ({"low": None, "high": None}, 0.0, "not_worse"),
]


@pytest.mark.parametrize("difference, margin, verdict", VERDICTS)
def test_the_verdict_rule_is_the_same_where_it_is_written_and_where_it_is_read(
    difference, margin, verdict
) -> None:
    """The container writes the verdict (eval_scores.verdict, numpy beside it) and the gate checks a document
    against its figures (hfpipe.core.recipe.evaluation.verdict_of, in the Lambdas, without numpy): two copies
    of one rule, held to the same table, boundaries included."""
    from hfpipe.core.recipe.evaluation import verdict_of

    assert eval_scores.verdict(difference, margin) == verdict_of(difference, margin) == verdict


def test_the_document_pairs_the_models_on_the_same_examples() -> None:
    gold = [0] * 27 + [1] * 3
    good = eval_scores.classification_metrics([0] * 30, gold, [0, 1])
    bad = eval_scores.classification_metrics([1] * 30, gold, [0, 1])
    # The same job's document, once against a champion and once alone.
    document = functools.partial(
        eval_scores.document, task="text-classification", channel="validation", rule=RULE, seed=0, seconds=1.0
    )
    doc = document(challenger=bad, champion=good)
    assert doc["verdict"] == "worse" and doc["difference"]["value"] == pytest.approx(-80.0)
    assert doc["difference"]["high"] < 0 and "worse" in doc["reason"]
    assert doc["rule"]["higher_is_better"] is True and doc["data"] == {
        "channel": "validation",
        "examples": 30,
    }
    alone = document(challenger=good, champion=None)
    assert alone["verdict"] == "no_champion" and alone["difference"] is None and alone["champion"] is None


def test_the_task_kinds_name_the_metrics_the_job_scores() -> None:
    assert {name: dict(kind.metrics) for name, kind in TASK_KINDS.items()} == eval_scores.TASK_METRICS
    assert set(evaluate.WAYS) == set(TASK_KINDS)  # each kind is read and scored
    accepted = {option for action in evaluate.build_parser()._actions for option in action.option_strings}
    for kind in TASK_KINDS.values():  # what hfpipe.core.recipe.evaluation.container_arguments passes
        assert set(kind.evaluation_arguments.values()) <= accepted, kind.name


def test_the_recipe_and_the_job_hold_the_same_floor_of_examples() -> None:
    """Newcomer finding 2: the schema's evaluation.max_examples minimum is the job's own floor, and the floor
    is the smallest n at which n examples all favouring one model pass the exact sign test at the highest
    confidence the rule accepts (docs/evaluation.md, "The bootstrap and the verdict")."""
    from hfpipe.core.recipe.schema import EVALUATION_MIN_EXAMPLES, RECIPE_SCHEMA

    field = RECIPE_SCHEMA["properties"]["evaluation"]
    assert (
        field["properties"]["max_examples"]["minimum"] == EVALUATION_MIN_EXAMPLES == eval_scores.MIN_EXAMPLES
    )
    highest = field["properties"]["confidence"]["maximum"]
    sign_test = [n for n in range(1, 30) if 2 * 0.5**n < 1 - highest]
    assert sign_test[0] == eval_scores.MIN_EXAMPLES


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["--task", "question-answering", "--metric", "accuracy"], "argument --metric: 'accuracy'"),
        (
            ["--task", "text-classification", "--metric", "accuracy", "--confidence", "0.2"],
            "argument --confidence",
        ),
        (
            ["--task", "text-classification", "--metric", "accuracy", "--resamples", "50"],
            "argument --resamples",
        ),
        (["--task", "text-classification", "--metric", "accuracy", "--margin", "-1"], "argument --margin"),
        (["--task", "summarization", "--metric", "rougeL", "--split", "train"], "argument --split: 'train'"),
        (["--task", "translation", "--metric", "bleu"], "argument --task"),
        (  # newcomer finding 2: a verdict from 2 examples
            ["--task", "text-classification", "--metric", "accuracy", "--max-examples", "2"],
            "argument --max-examples: 2; accepted: an integer >= 11 (fewer examples give no verdict",
        ),
    ],
)
def test_a_bad_argument_is_one_line_naming_it_and_exit_status_2(
    argv, named, capsys, monkeypatch, tmp_path
) -> None:
    monkeypatch.setenv("HFPIPE_LOCAL_OPT_ML", str(tmp_path))  # stands for the container's /opt/ml
    with pytest.raises(SystemExit) as ended:
        evaluate.parse_args(argv)
    assert ended.value.code == 2
    said = capsys.readouterr().err.strip()
    assert len(said.splitlines()) == 1 and named in said, said
    assert (tmp_path / "output" / "message").read_text() == said  # DescribeProcessingJob's ExitMessage
