"""QA pre- and post-processing and the SQuAD metric, without any model."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "training_code"))

import qa_utils

from hfpipe.fixtures.encoders import build_tokenizer
from hfpipe.fixtures.squad import make_squad, write_squad

FILL = "It was mild. "
ANSWER = "Grace"


@pytest.fixture(scope="module", params=["bert", "roberta"])
def tokenizer(request):
    return build_tokenizer(request.param)


def _long_example(fill_before: int = 4) -> dict:
    context = FILL * fill_before + f"The old library of Lisbon was founded in 1801 by {ANSWER}. " + FILL * 3
    start = context.index(ANSWER)
    return {
        "id": "q1",
        "question": "Who founded the library of Lisbon?",
        "context": context,
        "answers": {"text": [ANSWER], "answer_start": [start]},
    }


def _batch(rows: list[dict]) -> dict[str, list]:
    return {k: [r[k] for r in rows] for k in rows[0]}


def _answer_window(features, example) -> int:
    """Index of the first window whose context offsets cover the whole answer."""
    start = example["answers"]["answer_start"][0]
    end = start + len(ANSWER)
    for i, offsets in enumerate(features["offset_mapping"]):
        spans = [o for o in offsets if o is not None]
        if spans[0][0] <= start and spans[-1][1] >= end:
            return i
    raise AssertionError("answer in no window")


def _second_window_example(tokenizer, max_seq_length: int = 48, doc_stride: int = 16):
    """The example with the least filler that pushes the answer out of the first window."""
    for fill_before in range(1, 40):
        example = _long_example(fill_before)
        features = qa_utils.prepare_validation_features(
            _batch([example]), tokenizer, max_seq_length, doc_stride
        )
        if _answer_window(features, example) > 0:
            return example, features
    raise AssertionError("answer never left the first window")


def test_gold_answer_in_second_window_is_found_from_gold_logits(tokenizer):
    example, features = _second_window_example(tokenizer)
    assert len(features["input_ids"]) >= 3, "context must be split into several windows"
    assert all(len(ids) <= 48 for ids in features["input_ids"])
    assert _answer_window(features, example) == 1

    # Gold logits: high exactly on the answer's tokens of window 1, zero everywhere else.
    start_char = example["answers"]["answer_start"][0]
    end_char = start_char + len(ANSWER)
    n = len(features["input_ids"])
    width = max(len(ids) for ids in features["input_ids"])
    start_logits, end_logits = np.zeros((n, width)), np.zeros((n, width))
    offsets = features["offset_mapping"][1]
    token_start = next(k for k, o in enumerate(offsets) if o is not None and o[0] <= start_char < o[1])
    token_end = next(k for k, o in enumerate(offsets) if o is not None and o[0] < end_char <= o[1])
    start_logits[1, token_start] = 10.0
    end_logits[1, token_end] = 10.0

    rows = [
        {"example_id": e, "offset_mapping": o}
        for e, o in zip(features["example_id"], features["offset_mapping"], strict=True)
    ]
    answers, nbest = qa_utils.postprocess_qa_predictions([example], rows, (start_logits, end_logits))
    assert answers == {"q1": ANSWER}
    best = nbest["q1"][0]
    assert (best["start"], best["end"]) == (start_char, end_char)
    assert best["probability"] == max(c["probability"] for c in nbest["q1"])


def test_train_features_label_cls_outside_and_span_inside(tokenizer):
    example, val = _second_window_example(tokenizer)
    batch = _batch([example])
    train = qa_utils.prepare_train_features(batch, tokenizer, max_seq_length=48, doc_stride=16)
    inside = _answer_window(val, example)
    for i, ids in enumerate(train["input_ids"]):
        s, e = train["start_positions"][i], train["end_positions"][i]
        covered = val["offset_mapping"][i]
        spans = [o for o in covered if o is not None]
        whole = spans[0][0] <= example["answers"]["answer_start"][0] and spans[-1][1] >= (
            example["answers"]["answer_start"][0] + len(ANSWER)
        )
        if whole:
            assert tokenizer.decode(ids[s : e + 1]).strip().lower() == ANSWER.lower()
        else:
            assert (s, e) == (ids.index(tokenizer.cls_token_id),) * 2
    assert inside == 1
    assert train["start_positions"][0] == 0
    assert train["start_positions"][inside] > 0


def test_pad_to_max_length_pads_every_window():
    tok = build_tokenizer("bert")
    batch = _batch([_long_example()])
    padded = qa_utils.prepare_train_features(
        batch, tok, max_seq_length=64, doc_stride=16, pad_to_max_length=True
    )
    dynamic = qa_utils.prepare_train_features(batch, tok, max_seq_length=64, doc_stride=16)
    assert {len(x) for x in padded["input_ids"]} == {64}
    assert len(dynamic["input_ids"][-1]) < 64
    assert padded["start_positions"] == dynamic["start_positions"]


def test_doc_stride_must_be_below_max_seq_length():
    tok = build_tokenizer("bert")
    with pytest.raises(ValueError, match="doc_stride=64"):
        qa_utils.prepare_train_features(_batch([_long_example()]), tok, max_seq_length=64, doc_stride=64)


def test_exact_match_and_f1_against_hand_computed_values():
    assert qa_utils.normalize_answer("  The Eiffel-Tower!  ") == "eiffeltower"
    assert qa_utils.exact_match_score("the Eiffel Tower", "Eiffel Tower.") == 1.0
    # prediction tokens [in, 1889, paris], truth [1889]: precision 1/3, recall 1 -> F1 0.5
    assert qa_utils.f1_score("in 1889, Paris", "1889") == pytest.approx(0.5)
    # prediction [ada, lovelace, wrote], truth [lovelace, wrote, notes]: 2 common -> P = R = 2/3
    assert qa_utils.f1_score("Ada Lovelace wrote", "Lovelace wrote notes") == pytest.approx(2 / 3)
    assert qa_utils.f1_score("Paris", "London") == 0.0

    metrics = qa_utils.squad_metrics(
        {"a": "the Eiffel Tower", "b": "in 1889, Paris", "d": "London"},
        {
            "a": ["Eiffel Tower"],  # EM 1, F1 1
            "b": ["1889"],  # EM 0, F1 0.5
            "c": ["missing"],  # no prediction: 0, 0
            "d": ["Paris", "London"],  # best of two truths: EM 1, F1 1
        },
    )
    assert metrics["exact_match"] == pytest.approx(100 * 2 / 4)
    assert metrics["f1"] == pytest.approx(100 * 2.5 / 4)


def test_squad_metrics_rejects_empty_references():
    with pytest.raises(ValueError, match="references"):
        qa_utils.squad_metrics({}, {})


def test_load_squad_json_flattens_v11_file(tmp_path):
    paths = write_squad(tmp_path, n_train=3, n_validation=1)
    rows = qa_utils.load_squad_json(paths["train"])
    assert len(rows) == 6
    for row in rows:
        (text,), (start,) = row["answers"]["text"], row["answers"]["answer_start"]
        assert row["context"][start : start + len(text)] == text
    # JSON lines in the flattened hub layout load unchanged.
    jsonl = tmp_path / "rows.jsonl"
    jsonl.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert qa_utils.load_squad_json(jsonl) == rows


def test_load_squad_json_names_the_file_on_bad_input(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"version": "1.1", "articles": []}))
    with pytest.raises(ValueError, match=r"bad\.json.*'data'"):
        qa_utils.load_squad_json(bad)


def test_squad_fixture_is_deterministic():
    assert make_squad(5, seed=3) == make_squad(5, seed=3)
    assert make_squad(5, seed=3) != make_squad(5, seed=4)


class OracleQA:
    """A QA 'model' that knows every window's gold span and puts its logit peaks there, wherever the window
    sits in the padded batch row it is given (found from the attention mask)."""

    def __init__(self, gold: dict[tuple[int, ...], tuple[int, int]]) -> None:
        self.gold = gold

    def module(self):  # type: ignore[no-untyped-def]
        import torch

        gold = self.gold

        class Oracle(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.dummy = torch.nn.Parameter(torch.zeros(1))

            def forward(self, input_ids, attention_mask, **kwargs):  # type: ignore[no-untyped-def]
                start = torch.full(input_ids.shape, -10.0)
                end = torch.full(input_ids.shape, -10.0)
                for i, (ids, mask) in enumerate(
                    zip(input_ids.tolist(), attention_mask.tolist(), strict=True)
                ):
                    real = [k for k, m in enumerate(mask) if m]
                    s, e = gold[tuple(ids[k] for k in real)]
                    start[i, real[s]] = 10.0
                    end[i, real[e]] = 10.0
                return {"start_logits": start + 0 * self.dummy, "end_logits": end + 0 * self.dummy}

        return Oracle()


@pytest.mark.parametrize("padding_side", ["left", "right"])
@pytest.mark.parametrize("pad_to_max_length", [False, True])
def test_an_oracle_scores_em_100_with_either_padding_side(
    padding_side, pad_to_max_length, tmp_path, in_process_training
):
    """Training labels and evaluation logits line up with the answer whichever side the tokenizer pads."""
    import datasets
    import run_qa
    from transformers import Trainer, TrainingArguments

    tokenizer = build_tokenizer("bert")
    tokenizer.padding_side = padding_side
    examples = datasets.Dataset.from_list(qa_utils.load_squad_json(write_squad(tmp_path)["validation"]))
    window = {
        "tokenizer": tokenizer,
        "max_seq_length": 64,
        "doc_stride": 32,
        "pad_to_max_length": pad_to_max_length,
    }
    labelled = examples.map(
        qa_utils.prepare_train_features, fn_kwargs=window, batched=True, remove_columns=examples.column_names
    )
    collator = qa_utils.qa_collator(tokenizer, pad_to_max_length)
    # Training: in every collated batch the labels point at the gold tokens of the window as tokenized.
    gold: dict[tuple[int, ...], tuple[int, int]] = {}
    for i in range(0, len(labelled), 5):
        rows = [labelled[j] for j in range(i, min(i + 5, len(labelled)))]
        batch = collator([dict(r) for r in rows])
        for row, ids, mask, s, e in zip(
            rows, batch["input_ids"].tolist(), batch["attention_mask"].tolist(), batch["start_positions"],
            batch["end_positions"], strict=True,
        ):  # fmt: skip
            real = [k for k, m in enumerate(mask) if m]
            unpadded = tuple(ids[k] for k in real)
            assert ids[int(s)] == row["input_ids"][row["start_positions"]]
            assert ids[int(e)] == row["input_ids"][row["end_positions"]]
            row_real = [k for k, m in enumerate(row["attention_mask"]) if m]
            gold[unpadded] = (row_real.index(row["start_positions"]) if row["start_positions"] in row_real else 0,
                              row_real.index(row["end_positions"]) if row["end_positions"] in row_real else 0)  # fmt: skip
    # Evaluation: the oracle's peaks, read back through the Trainer and the post-processing, give EM 100.
    features = examples.map(
        qa_utils.prepare_validation_features,
        fn_kwargs=window,
        batched=True,
        remove_columns=examples.column_names,
    )
    args = TrainingArguments(
        output_dir=str(tmp_path / "out"), per_device_eval_batch_size=3, use_cpu=True, report_to="none"
    )
    trainer = Trainer(model=OracleQA(gold).module(), args=args, data_collator=collator)
    data_args = run_qa.DataTrainingArguments(max_seq_length=64, doc_stride=32)
    metrics = run_qa.evaluate(trainer, examples, features, data_args)
    assert metrics["eval_exact_match"] == pytest.approx(100.0)
    assert metrics["eval_f1"] == pytest.approx(100.0)
