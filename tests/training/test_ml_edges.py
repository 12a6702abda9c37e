"""Edge cases of the metrics and endpoints: an unanswered question, a question longer than a window, a
single text sent to a pair model. Each is answered with a clear error or the right score."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

TRAINING_CODE = Path(__file__).resolve().parents[2] / "training_code"


def module(name: str) -> ModuleType:
    if str(TRAINING_CODE) not in sys.path:
        sys.path.append(str(TRAINING_CODE))
    spec = importlib.util.spec_from_file_location(f"edge_{name}", TRAINING_CODE / f"{name}.py")
    assert spec is not None and spec.loader is not None
    loaded = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(loaded)
    return loaded


@pytest.mark.parametrize("gold", ["the", "A.", "  "])
def test_an_unanswered_question_scores_zero_even_when_its_answer_normalizes_to_nothing(gold: str) -> None:
    qa_utils = module("qa_utils")
    scores = qa_utils.squad_metrics({"q1": "", "q2": "Oslo"}, {"q1": [gold], "q2": ["Oslo"]})
    assert scores == {"exact_match": 50.0, "f1": 50.0}
    assert qa_utils.squad_metrics({}, {"q1": [gold]}) == {"exact_match": 0.0, "f1": 0.0}


@pytest.fixture(scope="module")
def qa_pipeline(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    from transformers import AutoModelForQuestionAnswering, AutoTokenizer, pipeline

    from hfpipe.fixtures.encoders import build_encoder

    path = build_encoder("bert", tmp_path_factory.mktemp("qa") / "bert")
    model = AutoModelForQuestionAnswering.from_pretrained(path)
    return pipeline(
        "question-answering", model=model, tokenizer=AutoTokenizer.from_pretrained(path), device=-1
    )


def test_a_question_longer_than_a_window_is_a_clear_error(qa_pipeline) -> None:  # type: ignore[no-untyped-def]
    handler = module("inference_qa")
    question = " ".join(["museum"] * 400) + "?"
    with pytest.raises(
        ValueError, match=r"^question: \d+ tokens; accepted: at most 252 tokens with max_seq_len 384"
    ):
        handler.predict_fn({"question": question, "context": "Ada visited the museum of Oslo."}, qa_pipeline)
    with pytest.raises(ValueError, match=r"at most 28 tokens with max_seq_len 64 and doc_stride 32"):
        handler.predict_fn(
            {"question": " ".join(["museum"] * 40), "context": "Ada.", "max_seq_len": 64, "doc_stride": 32},
            qa_pipeline,
        )
    answer = handler.predict_fn({"question": "Who visited?", "context": "Ada visited Oslo."}, qa_pipeline)
    assert set(answer) == {"answer", "score", "start", "end"}


def test_a_single_text_sent_to_a_pair_model_and_a_pair_to_a_single_model_are_refused() -> None:
    handler = module("inference_classification")
    handler.check_shape([("a premise", "a hypothesis")], True)
    handler.check_shape([("a text", None)], False)
    handler.check_shape([("a text", None)], None)  # a model saved without the record takes either
    with pytest.raises(ValueError, match="this model classifies text pairs"):
        handler.check_shape([("a text", None)], True)
    with pytest.raises(ValueError, match="this model classifies single texts"):
        handler.check_shape([("a", "b")], False)


def test_every_handler_reads_text_csv_with_its_own_header() -> None:
    clm, qa, cls = module("inference_clm"), module("inference_qa"), module("inference_classification")
    prompt, _ = clm.parse_request(clm.input_fn(b'dialogue\n"Amanda: hi\nJerry: yo"\n', "text/csv"))
    assert prompt == {"dialogue": "Amanda: hi\nJerry: yo"}
    items, batch = qa.parse_request(qa.input_fn("question,context\nWho?,Ada.\nWhere?,Oslo.\n", "text/csv"))
    assert batch and [i["question"] for i in items] == ["Who?", "Where?"]
    pairs, _ = cls.parse_request(cls.input_fn("premise,hypothesis\nA b.,A.\n", "text/csv; charset=utf-8"))
    assert pairs == [("A b.", "A.")]
    with pytest.raises(ValueError, match=r"one row \(one dialogue\) per request"):
        clm.input_fn("dialogue\na\nb\n", "text/csv")
    with pytest.raises(ValueError, match=r"a header row naming \['question', 'context'\]"):
        qa.input_fn("q,c\nWho?,Ada.\n", "text/csv")
    with pytest.raises(ValueError, match="accepted: application/json, text/csv"):
        cls.input_fn("hello", "text/plain")
