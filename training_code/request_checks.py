"""Request checks of the inference handlers: every parameter type- and range-checked, limits on input size
and generation cost. Copied next to the handler into <model_dir>/code/ (the serving code folder is on the
import path there), so the handlers import it as `request_checks`. Stdlib only.

An error is a `RequestError` (a ValueError) whose message names the field, the value and what is accepted.
The Hugging Face inference toolkit answers any exception raised while handling a request with HTTP 400 and
the exception's message (sagemaker_huggingface_inference_toolkit/handler_service.py, `handle`:
`except Exception as e: raise PredictionException(str(e), 400)`), so the caller sees that message.

Limits (documented in docs/pipeline.md, "Endpoint requests"):

| what | limit |
|---|---|
| items in one request (batch) | 1 to 32 |
| a text field (question, context, text, premise, dialogue, prompt) | 1 to 20,000 characters (context 100,000) |
| max_new_tokens | 1 to 1024 |
| num_beams | 1 to 8; num_beams x max_new_tokens at most 4096 |
| top_k (generation) | 0 to 1000; top_p in (0, 1]; temperature in (0, 10]; repetition_penalty in (0, 10] |
| no_repeat_ngram_size | 0 to 64 |
| QA top_k 1 to 20, max_answer_len 1 to 512, max_seq_len 32 to 4096, doc_stride 1 to max_seq_len - 1, max_question_len 1 to 512 |
"""

from __future__ import annotations

import math
from typing import Any

MAX_BATCH = 32
MAX_TEXT_CHARS = 20_000
MAX_CONTEXT_CHARS = 100_000
MAX_NEW_TOKENS = 1024
MAX_BEAMS = 8
MAX_BEAM_TOKENS = 4096


class RequestError(ValueError):
    """A request the endpoint refuses (HTTP 400 through the inference toolkit)."""


def _accepts(field: str, value: Any, accepted: str) -> RequestError:
    shown = repr(value)
    shown = shown if len(shown) <= 80 else shown[:77] + "..."
    return RequestError(f"request field {field!r}: {shown} is not accepted; accepted: {accepted}")


def text(value: Any, field: str, max_chars: int = MAX_TEXT_CHARS) -> str:
    """A non-empty string of at most ``max_chars`` characters."""
    if not isinstance(value, str) or not value.strip() or len(value) > max_chars:
        raise _accepts(field, value, f"a non-empty string of at most {max_chars} characters")
    return value


def whole(value: Any, field: str, low: int, high: int) -> int:
    """A JSON integer (not a boolean, not 1.9) from ``low`` to ``high``."""
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise _accepts(field, value, f"a whole number from {low} to {high}")
    return value


def real(value: Any, field: str, low: float, high: float, *, low_open: bool = False) -> float:
    """A finite number in [low, high] (or (low, high] with ``low_open``)."""
    ok = (
        not isinstance(value, bool)
        and isinstance(value, int | float)
        and math.isfinite(value)
        and (value > low if low_open else value >= low)
        and value <= high
    )
    if not ok:
        raise _accepts(field, value, f"a number {'>' if low_open else '>='} {low:g} and <= {high:g}")
    return float(value)


def boolean(value: Any, field: str) -> bool:
    if not isinstance(value, bool):
        raise _accepts(field, value, "true or false")
    return value


def batch(items: list[Any], field: str = "inputs") -> None:
    """A request's items: 1 to MAX_BATCH of them."""
    if not 1 <= len(items) <= MAX_BATCH:
        raise RequestError(
            f"request field {field!r}: {len(items)} items are not accepted; accepted: 1 to {MAX_BATCH} items"
        )


# --- question answering ----------------------------------------------------------------------------------

QA_PARAMETERS = {
    "top_k": lambda v, f: whole(v, f, 1, 20),
    "max_answer_len": lambda v, f: whole(v, f, 1, 512),
    "max_seq_len": lambda v, f: whole(v, f, 32, 4096),
    "doc_stride": lambda v, f: whole(v, f, 1, 4095),
    "max_question_len": lambda v, f: whole(v, f, 1, 512),
}


def check_qa(items: list[Any]) -> None:
    """Each item: question and context strings within limits, pass-through parameters in range."""
    batch(items)
    for item in items:
        if not isinstance(item, dict):
            continue  # the handler's own check names the item's type
        text(item.get("question"), "question")
        text(item.get("context"), "context", MAX_CONTEXT_CHARS)
        for key, check in QA_PARAMETERS.items():
            if key in item:
                check(item[key], key)
        if "doc_stride" in item and item["doc_stride"] >= item.get("max_seq_len", 384):
            raise _accepts("doc_stride", item["doc_stride"], "a number below max_seq_len (default 384)")


# --- classification --------------------------------------------------------------------------------------


def check_classification(pairs: list[tuple[Any, Any]]) -> None:
    """1 to MAX_BATCH (text, pair) items, each text within the limit."""
    batch(pairs)
    for first, second in pairs:
        text(first, "text")
        if second is not None:
            text(second, "text_pair")


# --- generation ------------------------------------------------------------------------------------------

GENERATION_PARAMETERS = {
    "do_sample": boolean,
    "max_new_tokens": lambda v, f: whole(v, f, 1, MAX_NEW_TOKENS),
    "num_beams": lambda v, f: whole(v, f, 1, MAX_BEAMS),
    "top_k": lambda v, f: whole(v, f, 0, 1000),
    "no_repeat_ngram_size": lambda v, f: whole(v, f, 0, 64),
    "top_p": lambda v, f: real(v, f, 0, 1, low_open=True),
    "temperature": lambda v, f: real(v, f, 0, 10, low_open=True),
    "repetition_penalty": lambda v, f: real(v, f, 0, 10, low_open=True),
}


def check_clm(data: Any, default_max_new_tokens: int) -> None:
    """The prompt (a string) or the template's record (string fields), and the generation parameters."""
    if not isinstance(data, dict):
        return  # the handler's own check says what the request must be
    parameters = data.get("parameters")
    if parameters is not None:
        if not isinstance(parameters, dict):
            raise _accepts("parameters", parameters, "an object of generation parameters")
        for key, value in parameters.items():
            if key in GENERATION_PARAMETERS:  # unknown names: the handler's own error lists the accepted ones
                GENERATION_PARAMETERS[key](value, f"parameters.{key}")
        beams = parameters.get("num_beams", 1)
        tokens = parameters.get("max_new_tokens", default_max_new_tokens)
        if beams * tokens > MAX_BEAM_TOKENS:
            raise RequestError(
                f"request fields 'parameters.num_beams' x 'parameters.max_new_tokens': {beams} x {tokens} is "
                f"not accepted; accepted: at most {MAX_BEAM_TOKENS} (generation cost)"
            )
    inputs = data.get("inputs")
    record = inputs if isinstance(inputs, dict) else data if "dialogue" in data else None
    if record is None:
        if "inputs" in data:
            text(inputs, "inputs")
        return
    for key, value in record.items():
        if key != "parameters":
            text(value, key)


# --- request bodies --------------------------------------------------------------------------------------

JSON = "application/json"
CSV = "text/csv"


def decode(
    body: str | bytes, content_type: str | None, columns: tuple[str, ...]
) -> list[dict[str, str]] | Any:
    """A request body as the handlers read it: JSON as is; text/csv (a header row, then one row per item) as
    a list of objects with the named `columns`, e.g. question,context or premise,hypothesis. Other media
    types are refused naming the accepted ones."""
    kind = (content_type or JSON).split(";")[0].strip().lower()
    text = body.decode("utf-8") if isinstance(body, bytes) else body
    if kind == JSON:
        import json

        return json.loads(text)
    if kind != CSV:
        raise RequestError(f"content_type {content_type!r} is not accepted; accepted: {JSON}, {CSV}")
    import csv
    import io

    reader = csv.DictReader(io.StringIO(text))
    header = [h.strip() for h in reader.fieldnames or []]
    if not any(c in header for c in columns):
        raise RequestError(f"text/csv header {header}: accepted: a header row naming {list(columns)}")
    rows = [{k.strip(): v for k, v in row.items() if k and k.strip() in columns} for row in reader]
    if not rows:
        raise RequestError("text/csv: no row after the header; accepted: one row per request item")
    return rows
