"""Extractive question answering helpers: SQuAD loading, windowed features, n-best post-processing, EM/F1.

Pure functions over `datasets`-style batches (dicts of lists) and a transformers *fast* tokenizer (its
offset mapping maps tokens back to characters). Follows the scheme of the transformers `run_qa.py` example:
long contexts are split into windows of `max_seq_length` tokens overlapping by `doc_stride`; a training
window that does not contain the whole answer is labelled with the CLS token; predictions are the best
valid span over all windows of an example. The metric is the official SQuAD v1.1 one, computed here so
nothing is fetched at run time.
"""

from __future__ import annotations

import collections
import json
import re
import string
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np


def load_squad_json(path: str | Path) -> list[dict[str, Any]]:
    """Flatten a SQuAD v1.1 JSON file into rows with the hub `squad` columns.

    Columns: id, title, context, question, answers = {"text": [...], "answer_start": [...]}.
    A JSON-lines file already in those columns is read as it is.
    """
    text = Path(path).read_text(encoding="utf-8")
    try:
        doc = json.loads(text)
    except json.JSONDecodeError:
        # More than one JSON value: JSON lines, one flattened row per line.
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    if isinstance(doc, list):
        return doc
    if isinstance(doc, dict) and "question" in doc:
        return [doc]
    if not isinstance(doc, dict) or "data" not in doc:
        raise ValueError(
            f"{path}: not a SQuAD v1.1 file (expected a JSON object with a 'data' list of articles)"
        )
    rows = []
    for article in doc["data"]:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                rows.append(
                    {
                        "id": str(qa["id"]),
                        "title": article.get("title", ""),
                        "context": paragraph["context"],
                        "question": qa["question"],
                        "answers": {
                            "text": [a["text"] for a in qa["answers"]],
                            "answer_start": [int(a["answer_start"]) for a in qa["answers"]],
                        },
                    }
                )
    return rows


def _tokenize_windows(
    examples: dict[str, list], tokenizer: Any, max_seq_length: int, doc_stride: int, pad_to_max_length: bool
) -> Any:
    if not getattr(tokenizer, "is_fast", False):
        raise ValueError("question answering needs a fast tokenizer (offset mapping); got a slow one")
    if doc_stride >= max_seq_length:
        raise ValueError(f"doc_stride={doc_stride} must be smaller than max_seq_length={max_seq_length}")
    pad_on_right = tokenizer.padding_side == "right"
    # Leading blanks in questions only waste window space (some SQuAD questions have many).
    questions = [q.lstrip() for q in examples["question"]]
    contexts = examples["context"]
    return tokenizer(
        questions if pad_on_right else contexts,
        contexts if pad_on_right else questions,
        truncation="only_second" if pad_on_right else "only_first",
        max_length=max_seq_length,
        stride=doc_stride,
        return_overflowing_tokens=True,
        return_offsets_mapping=True,
        padding="max_length" if pad_to_max_length else False,
    )


def prepare_train_features(
    examples: dict[str, list],
    tokenizer: Any,
    max_seq_length: int = 384,
    doc_stride: int = 128,
    pad_to_max_length: bool = False,
) -> Any:
    """Tokenize a batch of examples into training windows with `start_positions` / `end_positions`.

    A window whose context part does not contain the whole answer gets the CLS index as both positions.
    """
    tokenized = _tokenize_windows(examples, tokenizer, max_seq_length, doc_stride, pad_to_max_length)
    sample_mapping = tokenized.pop("overflow_to_sample_mapping")
    offset_mapping = tokenized.pop("offset_mapping")
    context_id = 1 if tokenizer.padding_side == "right" else 0
    starts, ends = [], []
    for i, offsets in enumerate(offset_mapping):
        input_ids = tokenized["input_ids"][i]
        cls_index = input_ids.index(tokenizer.cls_token_id) if tokenizer.cls_token_id in input_ids else 0
        sequence_ids = tokenized.sequence_ids(i)
        answers = examples["answers"][sample_mapping[i]]
        if not answers["answer_start"]:
            starts.append(cls_index)
            ends.append(cls_index)
            continue
        start_char = answers["answer_start"][0]
        end_char = start_char + len(answers["text"][0])
        token_start = 0
        while sequence_ids[token_start] != context_id:
            token_start += 1
        token_end = len(input_ids) - 1
        while sequence_ids[token_end] != context_id:
            token_end -= 1
        if not (offsets[token_start][0] <= start_char and offsets[token_end][1] >= end_char):
            starts.append(cls_index)
            ends.append(cls_index)
            continue
        while (
            token_start < len(offsets)
            and sequence_ids[token_start] == context_id
            and (offsets[token_start][0] <= start_char)
        ):
            token_start += 1
        while sequence_ids[token_end] == context_id and offsets[token_end][1] >= end_char:
            token_end -= 1
        starts.append(token_start - 1)
        ends.append(token_end + 1)
    tokenized["start_positions"] = starts
    tokenized["end_positions"] = ends
    return tokenized


def prepare_validation_features(
    examples: dict[str, list],
    tokenizer: Any,
    max_seq_length: int = 384,
    doc_stride: int = 128,
    pad_to_max_length: bool = False,
) -> Any:
    """Tokenize a batch of examples into evaluation windows carrying `example_id` and context-only offsets.

    Offsets of question and special tokens are set to None so the post-processor can tell context tokens.
    """
    tokenized = _tokenize_windows(examples, tokenizer, max_seq_length, doc_stride, pad_to_max_length)
    sample_mapping = tokenized.pop("overflow_to_sample_mapping")
    context_id = 1 if tokenizer.padding_side == "right" else 0
    tokenized["example_id"] = []
    for i in range(len(tokenized["input_ids"])):
        sequence_ids = tokenized.sequence_ids(i)
        tokenized["example_id"].append(examples["id"][sample_mapping[i]])
        tokenized["offset_mapping"][i] = [
            tuple(o) if sequence_ids[k] == context_id else None
            for k, o in enumerate(tokenized["offset_mapping"][i])
        ]
    return tokenized


class RightPaddingCollator:
    """Pads each batch on the right, whatever the tokenizer's padding side.

    Answer positions (training labels) and offset mappings (evaluation) index the unpadded window; padding
    on the left would shift every token by the pad length, so labels would point off the answer and the
    evaluation would read logits from the wrong columns (an oracle model scored EM 33 instead of 100). With
    `pad_to_max_length` the windows are padded at tokenization, on the tokenizer's side, and positions and
    offsets are computed on the padded windows, so nothing needs correcting there.
    """

    def __init__(self, tokenizer: Any, pad_to_multiple_of: int | None = None) -> None:
        self.tokenizer = tokenizer
        self.pad_to_multiple_of = pad_to_multiple_of

    def __call__(self, features: list[dict[str, Any]]) -> Any:
        # The attribute, not pad(padding_side=...), which transformers before 4.45 (the seed-faithful
        # recipes' container) does not have.
        side, self.tokenizer.padding_side = self.tokenizer.padding_side, "right"
        try:
            return self.tokenizer.pad(
                features, padding=True, pad_to_multiple_of=self.pad_to_multiple_of, return_tensors="pt"
            )
        finally:
            self.tokenizer.padding_side = side


def qa_collator(tokenizer: Any, pad_to_max_length: bool, half_precision: bool = False) -> Any:
    """The batch collator for QA windows: fixed-length windows as they are, else right padding per batch."""
    from transformers import default_data_collator

    if pad_to_max_length:
        return default_data_collator
    # Multiples of 8 let fp16/bf16 kernels use tensor cores; on CPU they only cost a few pad tokens.
    return RightPaddingCollator(tokenizer, pad_to_multiple_of=8 if half_precision else None)


def postprocess_qa_predictions(
    examples: Iterable[dict[str, Any]],
    features: Sequence[dict[str, Any]],
    predictions: tuple[Sequence[Sequence[float]], Sequence[Sequence[float]]],
    n_best_size: int = 20,
    max_answer_length: int = 30,
) -> tuple[dict[str, str], dict[str, list[dict[str, Any]]]]:
    """Turn start/end logits of every window into one answer text per example.

    `features` need `example_id` and `offset_mapping` (None outside the context) as produced by
    `prepare_validation_features`; logits rows align with `features` (padding beyond a window's length is
    ignored because those offsets do not exist). Returns ({id: answer}, {id: n-best list with text, score,
    probability, start, end}), start/end being character offsets in the context.
    """
    all_start, all_end = predictions
    if len(all_start) != len(features) or len(all_end) != len(features):
        raise ValueError(
            f"got {len(all_start)} start / {len(all_end)} end logit rows for {len(features)} features; "
            "they must align one to one"
        )
    features_per_example: dict[str, list[int]] = collections.defaultdict(list)
    for i, feature in enumerate(features):
        features_per_example[feature["example_id"]].append(i)

    answers: dict[str, str] = {}
    nbest: dict[str, list[dict[str, Any]]] = {}
    for example in examples:
        context = example["context"]
        candidates: list[dict[str, Any]] = []
        for fi in features_per_example.get(example["id"], []):
            offsets = features[fi]["offset_mapping"]
            start_logits = np.asarray(all_start[fi], dtype=np.float64)[: len(offsets)]
            end_logits = np.asarray(all_end[fi], dtype=np.float64)[: len(offsets)]
            start_top = np.argsort(start_logits)[-1 : -n_best_size - 1 : -1]
            end_top = np.argsort(end_logits)[-1 : -n_best_size - 1 : -1]
            for s in start_top:
                for e in end_top:
                    if offsets[s] is None or offsets[e] is None or e < s or e - s + 1 > max_answer_length:
                        continue
                    candidates.append(
                        {
                            "start": int(offsets[s][0]),
                            "end": int(offsets[e][1]),
                            "score": float(start_logits[s] + end_logits[e]),
                        }
                    )
        candidates.sort(key=lambda c: c["score"], reverse=True)
        best = candidates[:n_best_size]
        if not best:
            best = [{"start": 0, "end": 0, "score": 0.0}]  # no valid span: empty answer
        scores = np.array([c["score"] for c in best])
        probabilities = np.exp(scores - scores.max())
        probabilities /= probabilities.sum()
        for c, p in zip(best, probabilities, strict=True):
            c["text"] = context[c["start"] : c["end"]]
            c["probability"] = float(p)
        answers[example["id"]] = best[0]["text"]
        nbest[example["id"]] = best
    return answers, nbest


def normalize_answer(text: str) -> str:
    """SQuAD normalisation: lower case, no punctuation, no articles (a, an, the), single spaces."""
    text = text.lower()
    text = "".join(ch for ch in text if ch not in set(string.punctuation))
    text = re.sub(r"\b(a|an|the)\b", " ", text)
    return " ".join(text.split())


def exact_match_score(prediction: str, truth: str) -> float:
    """1.0 when the normalised strings are equal, else 0.0."""
    return float(normalize_answer(prediction) == normalize_answer(truth))


def f1_score(prediction: str, truth: str) -> float:
    """Token-level F1 between the normalised prediction and truth."""
    pred_tokens = normalize_answer(prediction).split()
    truth_tokens = normalize_answer(truth).split()
    common = collections.Counter(pred_tokens) & collections.Counter(truth_tokens)
    overlap = sum(common.values())
    if overlap == 0:
        return 0.0
    precision = overlap / len(pred_tokens)
    recall = overlap / len(truth_tokens)
    return 2 * precision * recall / (precision + recall)


def squad_metrics(predictions: dict[str, str], references: dict[str, Sequence[str]]) -> dict[str, float]:
    """Official SQuAD v1.1 scores in percent: each question takes its best score over the gold answers.

    `references` maps every question id to its gold answer texts; a question without prediction (missing or
    empty) scores 0.
    """
    if not references:
        raise ValueError("references is empty: no question to score")
    em = f1 = 0.0
    for qid, truths in references.items():
        if not truths:
            raise ValueError(f"references[{qid!r}] has no gold answer")
        prediction = predictions.get(qid, "")
        if not prediction.strip():
            # Unanswered scores 0, even where a gold answer normalizes to "" (an answer of only "the" or
            # punctuation): an empty prediction found nothing, so it matches nothing.
            continue
        em += max(exact_match_score(prediction, t) for t in truths)
        f1 += max(f1_score(prediction, t) for t in truths)
    n = len(references)
    return {"exact_match": 100.0 * em / n, "f1": 100.0 * f1 / n}
