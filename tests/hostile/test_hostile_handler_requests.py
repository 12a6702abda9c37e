"""Hostile endpoint requests, one case a line, through each handler's `parse_request` (no model needed):
each raises a ValueError (HTTP 400 in the inference toolkit) naming the field, the value and what is accepted.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

TRAINING_CODE = Path(__file__).resolve().parents[2] / "training_code"


def handler(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"hostile_{name}", TRAINING_CODE / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


QA, CLS, CLM = "inference_qa", "inference_classification", "inference_clm"
Q = {"question": "Who?", "context": "Ann did."}
LONG = "x" * 20_001


def gen(**parameters: Any) -> dict[str, Any]:
    return {"inputs": "Summarize: A: hi", "parameters": parameters}


# (handler, request, fragments of the error)
# fmt: off
CASES: list[tuple[str, Any, list[str]]] = [
    # question answering
    (QA, [], ["'inputs'", "0 items", "1 to 32 items"]),
    (QA, {"inputs": []}, ["'inputs'", "0 items"]),
    (QA, [Q] * 33, ["'inputs'", "33 items", "1 to 32"]),
    (QA, {"question": "Who?", "context": None}, ["'context'", "None", "non-empty string"]),
    (QA, {"question": 5, "context": "c"}, ["'question'", "5", "non-empty string"]),
    (QA, {"question": LONG, "context": "c"}, ["'question'", "at most 20000 characters"]),
    (QA, {"question": "q", "context": "c" * 100_001}, ["'context'", "at most 100000 characters"]),
    (QA, {**Q, "top_k": "3"}, ["'top_k'", "'3'", "a whole number from 1 to 20"]),
    (QA, {**Q, "top_k": 0}, ["'top_k'", "0", "from 1 to 20"]),
    (QA, {**Q, "top_k": 10_000_000}, ["'top_k'", "10000000", "from 1 to 20"]),
    (QA, {**Q, "top_k": 1.9}, ["'top_k'", "1.9", "a whole number"]),
    (QA, {**Q, "top_k": True}, ["'top_k'", "True", "a whole number"]),
    (QA, {**Q, "max_answer_len": -1}, ["'max_answer_len'", "-1", "from 1 to 512"]),
    (QA, {**Q, "max_seq_len": 10**6}, ["'max_seq_len'", "1000000", "from 32 to 4096"]),
    (QA, {**Q, "doc_stride": 500, "max_seq_len": 384}, ["'doc_stride'", "500", "below max_seq_len"]),
    (QA, {**Q, "max_question_len": None}, ["'max_question_len'", "None", "a whole number"]),
    (QA, {"inputs": Q, "parameters": {"top_k": "all"}}, ["'top_k'", "'all'"]),
    (QA, {"inputs": Q, "parameters": {"handle_impossible_answer": True}}, ["handle_impossible_answer", "not supported"]),
    (QA, {"inputs": Q, "parameters": [1]}, ["'parameters'", "[1]", "must be an object"]),
    # classification
    (CLS, [], ["'inputs'", "0 items", "1 to 32 items"]),
    (CLS, {"inputs": []}, ["'inputs'", "0 items"]),
    (CLS, [{"text": "a"}] * 33, ["33 items"]),
    (CLS, {"text": LONG}, ["'text'", "at most 20000 characters"]),
    (CLS, {"premise": "p", "hypothesis": LONG}, ["'text_pair'", "at most 20000"]),
    (CLS, {"premise": "p", "hypothesis": None}, ["'hypothesis'", "None", "non-empty string"]),
    (CLS, {"text": None}, ["'text'", "None", "non-empty string"]),
    (CLS, {"text": "a", "text_pair": 5}, ["'text_pair'", "5", "must be a string"]),
    (CLS, {"inputs": 5}, ["each request item must be an object", "int"]),
    (CLS, [{"text": "a"}, {"premise": "p", "hypothesis": "h"}], ["all pairs or all single texts"]),
    # generation
    (CLM, gen(max_new_tokens=1.9), ["'parameters.max_new_tokens'", "1.9", "a whole number from 1 to 1024"]),
    (CLM, gen(max_new_tokens=0), ["'parameters.max_new_tokens'", "0", "from 1 to 1024"]),
    (CLM, gen(max_new_tokens=10**9), ["'parameters.max_new_tokens'", "1000000000", "to 1024"]),
    (CLM, gen(max_new_tokens="64"), ["'parameters.max_new_tokens'", "'64'"]),
    (CLM, gen(num_beams=10_000_000), ["'parameters.num_beams'", "10000000", "from 1 to 8"]),
    (CLM, gen(num_beams=8, max_new_tokens=1024), ["num_beams' x 'parameters.max_new_tokens'", "8 x 1024", "at most 4096"]),
    (CLM, gen(num_beams=8, max_new_tokens=600), ["8 x 600", "generation cost"]),
    (CLM, gen(top_k="50"), ["'parameters.top_k'", "'50'", "a whole number from 0 to 1000"]),
    (CLM, gen(top_k=-1), ["'parameters.top_k'", "-1"]),
    (CLM, gen(top_p=0), ["'parameters.top_p'", "0", "> 0 and <= 1"]),
    (CLM, gen(top_p=1.5), ["'parameters.top_p'", "1.5", "<= 1"]),
    (CLM, gen(top_p=float("nan")), ["'parameters.top_p'", "nan"]),
    (CLM, gen(temperature=0), ["'parameters.temperature'", "0", "> 0"]),
    (CLM, gen(temperature=float("inf")), ["'parameters.temperature'", "inf"]),
    (CLM, gen(repetition_penalty=-1.0), ["'parameters.repetition_penalty'", "-1.0"]),
    (CLM, gen(no_repeat_ngram_size=1000), ["'parameters.no_repeat_ngram_size'", "1000", "0 to 64"]),
    (CLM, gen(do_sample="true"), ["'parameters.do_sample'", "'true'", "true or false"]),
    (CLM, gen(do_sample=1), ["'parameters.do_sample'", "1", "true or false"]),
    (CLM, gen(stop_sequence="x"), ["parameters.stop_sequence is not supported", "accepted: ['do_sample'"]),
    (CLM, {"inputs": "x", "parameters": "fast"}, ["'parameters'", "'fast'", "an object"]),
    (CLM, {"dialogue": None}, ["'dialogue'", "None", "non-empty string"]),
    (CLM, {"dialogue": 5}, ["'dialogue'", "5"]),
    (CLM, {"dialogue": ""}, ["'dialogue'", "''"]),
    (CLM, {"dialogue": LONG}, ["'dialogue'", "at most 20000 characters"]),
    (CLM, {"inputs": {"dialogue": ["A: hi"]}}, ["'dialogue'", "['A: hi']"]),
    (CLM, {"inputs": ""}, ["'inputs'", "''", "non-empty string"]),
    (CLM, {"inputs": LONG}, ["'inputs'", "at most 20000 characters"]),
    (CLM, {"inputs": None}, ["'inputs'", "None"]),
    (CLM, [], ["JSON object"]),
]
# fmt: on


@pytest.mark.parametrize(
    ("name", "request_body", "fragments"), CASES, ids=[f"h{i}" for i in range(len(CASES))]
)
def test_request_refused(name: str, request_body: Any, fragments: list[str]) -> None:
    with pytest.raises(ValueError) as err:
        handler(name).parse_request(request_body)
    for fragment in fragments:
        assert fragment in str(err.value), (fragment, str(err.value))


# Accepted on purpose: the limits themselves, and booleans / integers where the toolkit's own shapes use them.
# fmt: off
ACCEPTED: list[tuple[str, Any]] = [
    (QA, [Q] * 32),
    (QA, {**Q, "top_k": 20, "max_seq_len": 384, "doc_stride": 383}),
    (CLS, [{"text": "a" * 20_000}]),
    (CLM, gen(max_new_tokens=1024, num_beams=4, top_k=0, top_p=1, temperature=10, do_sample=True)),
    (CLM, {"dialogue": "A: hi", "parameters": {"max_new_tokens": 16}}),
]
# fmt: on


@pytest.mark.parametrize(("name", "request_body"), ACCEPTED, ids=[f"a{i}" for i in range(len(ACCEPTED))])
def test_request_at_the_limits_accepted(name: str, request_body: Any) -> None:
    handler(name).parse_request(request_body)


def test_handlers_ship_with_their_request_checks(tmp_path: Path) -> None:
    """The training scripts copy request_checks.py next to code/inference.py: the endpoint imports it."""
    import sys

    sys.path.insert(0, str(TRAINING_CODE))
    try:
        import encoder_utils
    finally:
        sys.path.remove(str(TRAINING_CODE))
    target = encoder_utils.install_handler(str(tmp_path), "inference_qa.py")
    assert sorted(p.name for p in target.parent.iterdir()) == ["inference.py", "request_checks.py"]
    source = (TRAINING_CODE / "run_clm.py").read_text()
    assert 'os.path.join(code, "request_checks.py")' in source
