"""SageMaker inference handler for extractive QA (copied to <model_dir>/code/inference.py by run_qa.py).

Request: {"question": str, "context": str} (or a list of them), or the Hugging Face inference toolkit's
shape {"inputs": {"question", "context"} or a list of them, "parameters": {...}}. Response: {"answer",
"score", "start", "end"} (start/end are character offsets in the context), or a list of those. Optional
keys `top_k`, `max_answer_len`, `doc_stride`, `max_seq_len` (in an item or in `parameters`) pass through
to the pipeline. Self-contained: the endpoint only has this file and the model directory.
"""

from __future__ import annotations

import json
from typing import Any

import request_checks

PASS_THROUGH = ("top_k", "max_answer_len", "doc_stride", "max_seq_len", "max_question_len")


def model_fn(model_dir: str, context: Any = None) -> Any:
    """Load the fine-tuned model and tokenizer into a question-answering pipeline."""
    # Imported here so request parsing (parse_request) needs neither torch nor transformers.
    import torch
    from transformers import AutoModelForQuestionAnswering, AutoTokenizer, pipeline

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForQuestionAnswering.from_pretrained(model_dir)
    device = 0 if torch.cuda.is_available() else -1
    return pipeline("question-answering", model=model, tokenizer=tokenizer, device=device)


def input_fn(request_body: str | bytes, content_type: str = "application/json", context: Any = None) -> Any:
    """Decode a JSON request, or text/csv with a question,context header (one row per question)."""
    rows = request_checks.decode(request_body, content_type, ("question", "context"))
    return rows[0] if content_type.startswith(request_checks.CSV) and len(rows) == 1 else rows


def _check(item: Any) -> None:
    if not isinstance(item, dict):
        raise ValueError(
            f"each request item must be an object with 'question' and 'context'; got {type(item).__name__}"
        )
    for key in ("question", "context"):
        if not isinstance(item.get(key), str) or not item[key].strip():
            raise ValueError(f"request field {key!r} must be a non-empty string; got {item.get(key)!r}")


def parse_request(data: Any) -> tuple[list[dict[str, Any]], bool]:
    """The checked question/context items of a decoded request, and whether it asked for a list.

    Accepts the plain shape (an object or a list of objects) and the toolkit's {"inputs": ...,
    "parameters": {...}}, whose parameters apply to every item (an item's own keys win).
    """
    if isinstance(data, dict) and "inputs" in data:
        parameters = data.get("parameters") or {}
        if not isinstance(parameters, dict):
            raise ValueError(f"request field 'parameters' must be an object; got {parameters!r}")
        unknown = sorted(set(parameters) - set(PASS_THROUGH))
        if unknown:
            raise ValueError(
                f"request parameters {unknown} are not supported; accepted: {list(PASS_THROUGH)}"
            )
        inputs = data["inputs"]
        batch = isinstance(inputs, list)
        items = [
            {**parameters, **item} if isinstance(item, dict) else item
            for item in (inputs if batch else [inputs])
        ]
    else:
        batch = isinstance(data, list)
        items = data if batch else [data]
    for item in items:
        _check(item)
    request_checks.check_qa(items)
    return items, batch


#: The question-answering pipeline's defaults (transformers QuestionAnsweringPipeline).
DEFAULT_MAX_SEQ_LEN = 384
DEFAULT_DOC_STRIDE = 128


def check_question_fits(tokenizer: Any, question: str, kwargs: dict[str, Any]) -> None:
    """A question must leave room for context in every window: with `max_seq_len` tokens a window and
    `doc_stride` tokens of overlap, the fast tokenizer refuses a question of max_seq_len - doc_stride -
    special tokens or more with a Rust panic (pyo3's PanicException, a BaseException that no `except
    Exception` of the inference toolkit catches). Say so in the request's terms instead (a 400)."""
    max_seq_len = int(kwargs.get("max_seq_len", min(DEFAULT_MAX_SEQ_LEN, tokenizer.model_max_length)))
    doc_stride = int(kwargs.get("doc_stride", min(DEFAULT_DOC_STRIDE, max_seq_len // 2)))
    limit = max_seq_len - doc_stride - tokenizer.num_special_tokens_to_add(pair=True) - 1
    length = len(tokenizer(question, add_special_tokens=False)["input_ids"])
    if length > limit:
        raise ValueError(
            f"question: {length} tokens; accepted: at most {limit} tokens with max_seq_len {max_seq_len} and "
            f"doc_stride {doc_stride} (each window needs room for context); shorten the question or raise "
            "max_seq_len"
        )


def predict_fn(data: Any, qa: Any, context: Any = None) -> Any:
    """Answer one request object, or each object of a list (either request shape)."""
    items, batch = parse_request(data)
    results = []
    for item in items:
        kwargs = {k: item[k] for k in PASS_THROUGH if k in item}
        check_question_fits(qa.tokenizer, item["question"], kwargs)
        answer = qa(question=item["question"], context=item["context"], **kwargs)
        results.append(_plain(answer))
    return results if batch else results[0]


def _plain(answer: Any) -> Any:
    if isinstance(answer, list):
        return [_plain(a) for a in answer]
    return {
        "answer": answer["answer"],
        "score": float(answer["score"]),
        "start": int(answer["start"]),
        "end": int(answer["end"]),
    }


def output_fn(prediction: Any, accept: str = "application/json", context: Any = None) -> str:
    """Encode the prediction as JSON."""
    if accept not in ("application/json", "*/*"):
        raise ValueError(f"accept={accept!r} is not supported; accept application/json")
    return json.dumps(prediction)
