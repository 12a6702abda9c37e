"""SageMaker inference handler for sequence(-pair) classification (copied to <model_dir>/code/inference.py).

Request: {"premise": str, "hypothesis": str} (MNLI), {"text": str, "text_pair": str} or {"text": str}
(single text), or a list of those; or the Hugging Face inference toolkit's shape {"inputs": ...}, where
`inputs` is a text, one of the objects above, or a list of either. Response: {"label": str, "scores": {label: probability}}, or a list of those. Self-contained: the
endpoint only has this file and the model directory.
"""

from __future__ import annotations

import json
from typing import Any

import request_checks


def model_fn(model_dir: str, context: Any = None) -> Any:
    """Load the fine-tuned model and tokenizer."""
    # Imported here so request parsing (parse_request) needs neither torch nor transformers.
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForSequenceClassification.from_pretrained(model_dir)
    model.eval()
    if torch.cuda.is_available():
        model.to("cuda")
    return {"model": model, "tokenizer": tokenizer}


def input_fn(request_body: str | bytes, content_type: str = "application/json", context: Any = None) -> Any:
    """Decode a JSON request, or text/csv with a text[,text_pair] or premise,hypothesis header (one row per
    item)."""
    rows = request_checks.decode(request_body, content_type, ("text", "text_pair", "premise", "hypothesis"))
    return rows[0] if content_type.startswith(request_checks.CSV) and len(rows) == 1 else rows


def _pair(item: Any) -> tuple[str, str | None]:
    if isinstance(item, dict) and isinstance(item.get("inputs"), dict):
        item = item["inputs"]
    if not isinstance(item, dict):
        raise ValueError(f"each request item must be an object; got {type(item).__name__}")
    if "premise" in item or "hypothesis" in item:
        first, second = item.get("premise"), item.get("hypothesis")
        names = ("premise", "hypothesis")
    else:
        first, second = item.get("text", item.get("inputs")), item.get("text_pair")
        names = ("text", "text_pair")
    if not isinstance(first, str) or not first.strip():
        raise ValueError(f"request field {names[0]!r} must be a non-empty string; got {first!r}")
    if names[0] == "premise" and (not isinstance(second, str) or not second.strip()):
        raise ValueError(f"request field 'hypothesis' must be a non-empty string; got {second!r}")
    if second is not None and not isinstance(second, str):
        raise ValueError(f"request field {names[1]!r} must be a string; got {second!r}")
    return first, second


def parse_request(data: Any) -> tuple[list[tuple[str, str | None]], bool]:
    """The checked (text, text pair or None) items of a decoded request, and whether it asked for a list.

    Accepts the plain shape (an object or a list of objects) and the toolkit's {"inputs": ...} with a
    text, an object or a list of either as `inputs`.
    """
    if isinstance(data, dict) and not isinstance(data.get("inputs", ""), str):
        inputs = data["inputs"]
        batch = isinstance(inputs, list)
        items = [{"text": i} if isinstance(i, str) else i for i in (inputs if batch else [inputs])]
    else:
        batch = isinstance(data, list)
        items = data if batch else [data]
    pairs = [_pair(item) for item in items]
    request_checks.check_classification(pairs)
    if any(p[1] is None for p in pairs) and not all(p[1] is None for p in pairs):
        raise ValueError("a batch must be all pairs or all single texts")
    return pairs, batch


def check_shape(pairs: list[tuple[str, str | None]], trained_on_pairs: bool | None) -> None:
    """Refuse a single text for a model trained on pairs (MNLI) and a pair for a single-text model; a model
    saved without that record (trained elsewhere) takes either."""
    if trained_on_pairs is None:
        return
    singles = any(second is None for _, second in pairs)
    if trained_on_pairs and singles:
        raise ValueError(
            "this model classifies text pairs: send premise and hypothesis (or text and text_pair); "
            "a single text was sent"
        )
    if not trained_on_pairs and not singles:
        raise ValueError("this model classifies single texts: send text alone; a text pair was sent")


def predict_fn(data: Any, bundle: Any, context: Any = None) -> Any:
    """Classify one request object, or each object of a list, in one batch (either request shape)."""
    import torch

    pairs, batch = parse_request(data)
    model, tokenizer = bundle["model"], bundle["tokenizer"]
    check_shape(pairs, getattr(model.config, "hfpipe_text_pair", None))
    firsts = [p[0] for p in pairs]
    seconds = [p[1] for p in pairs]
    encoded = tokenizer(
        firsts,
        None if seconds[0] is None else seconds,
        truncation=True,
        padding=True,
        return_tensors="pt",
    ).to(model.device)
    with torch.no_grad():
        probabilities = model(**encoded).logits.softmax(-1).cpu().tolist()
    id2label = model.config.id2label
    results = []
    for row in probabilities:
        scores = {id2label[i]: float(p) for i, p in enumerate(row)}
        results.append({"label": max(scores, key=scores.__getitem__), "scores": scores})
    return results if batch else results[0]


def output_fn(prediction: Any, accept: str = "application/json", context: Any = None) -> str:
    """Encode the prediction as JSON."""
    if accept not in ("application/json", "*/*"):
        raise ValueError(f"accept={accept!r} is not supported; accept application/json")
    return json.dumps(prediction)
