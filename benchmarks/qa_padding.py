"""QA benchmarks on the SQuAD fixture: padded tokens per epoch, and CPU time of 2-process vs 1-process training.

    python benchmarks/qa_padding.py padding            # seconds; tokenization only
    python benchmarks/qa_padding.py ddp                # minutes; trains twice through the local container

`padding` counts the tokens the model processes in one epoch (real + padding) when every window is padded
to `max_seq_length` (the original recipe's `pad_to_max_length`) and when each batch is padded to its longest
window (run_qa.py's default, DataCollatorWithPadding), batches drawn in the Trainer's seeded random order.
`ddp` trains run_qa.py on the same data for one epoch with the same global batch, once in one process and
once in two (torch_distributed, gloo), and reports wall time and CPU time (user + sys of all processes).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "training_code"))

import qa_utils  # noqa: E402

from benchmarks.common import figure  # noqa: E402
from hfpipe.fixtures import samsum  # noqa: E402
from hfpipe.fixtures.encoders import build_encoder, build_tokenizer  # noqa: E402
from hfpipe.fixtures.squad import write_squad  # noqa: E402
from hfpipe.local.training import container as lc  # noqa: E402


def window_lengths(rows: list[dict], tokenizer: Any, max_seq_length: int, doc_stride: int) -> list[int]:
    """Unpadded length of every training window run_qa.py makes from `rows` (its own windowing code)."""
    batch = {k: [r[k] for r in rows] for k in rows[0]}
    features = qa_utils.prepare_train_features(
        batch, tokenizer, max_seq_length=max_seq_length, doc_stride=doc_stride
    )
    return [len(ids) for ids in features["input_ids"]]


def epoch_tokens(lengths: list[int], max_seq_length: int, batch_size: int, seed: int) -> dict[str, float]:
    """Tokens one epoch processes: every window padded to max_seq_length vs each batch padded to its longest.

    Batches are drawn in a seeded random order, as the Trainer's sampler does; with DDP each device pads
    its own batch of `batch_size`, which is the same as random batches of that size.
    """
    t = torch.tensor(lengths)
    order = torch.randperm(len(t), generator=torch.Generator().manual_seed(seed))
    dynamic = sum(
        int(t[order[i : i + batch_size]].max()) * len(order[i : i + batch_size])
        for i in range(0, len(order), batch_size)
    )
    fixed = len(t) * max_seq_length
    return {
        "windows": len(t),
        "real_tokens": int(t.sum()),
        "mean_window_tokens": float(t.float().mean()),
        "tokens_padded_to_max_length": fixed,
        "tokens_dynamic_padding": dynamic,
        "ratio_max_length_over_dynamic": fixed / dynamic,
    }


def padding(
    n_articles: int, max_seq_length: int, doc_stride: int, batch_size: int, seed: int, kind: str
) -> dict[str, float]:
    """Tokens per epoch on the SQuAD fixture with padding to max_seq_length vs per-batch (dynamic) padding."""
    with tempfile.TemporaryDirectory() as tmp:
        path = write_squad(tmp, n_train=n_articles, n_validation=1)["train"]
        rows = qa_utils.load_squad_json(path)
    lengths = window_lengths(rows, build_tokenizer(kind), max_seq_length, doc_stride)
    return {"examples": len(rows), **epoch_tokens(lengths, max_seq_length, batch_size, seed)}


# SQuAD v1.1-shaped lengths, in tokens (see squad_shaped_rows).
CONTEXT_MEDIAN, CONTEXT_SIGMA, CONTEXT_MIN, CONTEXT_MAX = 140, 0.45, 25, 800
QUESTION_MIN, QUESTION_MAX = 6, 24


def _one_token_words(tokenizer: Any) -> list[str]:
    # Words the tokenizer keeps whole, so a text of n of them is exactly n tokens.
    words = sorted(
        w for w in tokenizer.get_vocab() if w.isalpha() and w.isascii() and w.lower() == w and len(w) > 1
    )
    words = [w for w in words if tokenizer.tokenize(w) == [w]]
    if len(words) < 10:
        raise ValueError(f"tokenizer has only {len(words)} whole-word tokens; need 10 to build texts")
    return words


def squad_shaped_lengths(n: int, seed: int) -> list[tuple[int, int]]:
    """(question, context) token counts shaped like SQuAD v1.1's training set, deterministic per seed.

    Context: log-normal, median 140 tokens, sigma 0.45 (mean ~155; ~2% past the 384 - question - 3 tokens
    a window holds), clipped to [25, 800]. SQuAD v1.1 contexts are paragraphs of ~120 words, ~150 word
    pieces on average, a few hundred at most and a thin tail past 384; with max_seq_length 384 and stride
    128 the real set makes about 1% more windows than examples. Question: uniform 6..24 tokens (SQuAD
    questions are ~11 words, 10-20 word pieces).
    """
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        c = round(rng.lognormvariate(math.log(CONTEXT_MEDIAN), CONTEXT_SIGMA))
        out.append((rng.randint(QUESTION_MIN, QUESTION_MAX), min(max(c, CONTEXT_MIN), CONTEXT_MAX)))
    return out


def squad_shaped_rows(n: int, seed: int, tokenizer: Any) -> list[dict]:
    """SQuAD-format rows whose question and context are exactly the squad_shaped_lengths token counts."""
    words = _one_token_words(tokenizer)
    rng = random.Random(seed + 1)
    rows = []
    for i, (q, c) in enumerate(squad_shaped_lengths(n, seed)):
        context = " ".join(rng.choice(words) for _ in range(c))
        answer = context.split(" ", 1)[0]
        rows.append(
            {
                "id": f"synthetic-{i}",
                "question": " ".join(rng.choice(words) for _ in range(q)),
                "context": context,
                "answers": {"text": [answer], "answer_start": [0]},
            }
        )
    return rows


def squad_shaped_padding(
    n: int, max_seq_length: int, doc_stride: int, batch_size: int, seed: int, kind: str
) -> dict[str, float]:
    """epoch_tokens() over n SQuAD-shaped synthetic examples, windowed by run_qa.py's own code."""
    tokenizer = build_tokenizer(kind)
    rows = squad_shaped_rows(n, seed, tokenizer)
    lengths = window_lengths(rows, tokenizer, max_seq_length, doc_stride)
    return {"examples": n, **epoch_tokens(lengths, max_seq_length, batch_size, seed)}


def samsum_packing(n_records: int, block_size: int) -> dict[str, float]:
    """Packing efficiency of n samsum-style fixture records at block_size (clm_throughput's packing report)."""
    from benchmarks.clm_throughput import packing_report

    with tempfile.TemporaryDirectory() as tmp:
        data_dir = Path(tmp)
        samsum.write_samsum(data_dir, n_train=n_records, n_validation=1)
        samsum.build_tiny_bloom(data_dir / "model")
        [row] = packing_report(data_dir, (block_size,))
    return row


# The recipes' settings the figures are for (recipes/bert-large-squad-ddp.json, bloomz-7b1-lora-samsum.json).
QA_MAX_SEQ_LENGTH, QA_DOC_STRIDE, QA_BATCH = 384, 128, 4
SAMSUM_BLOCK_SIZE, SAMSUM_TRAIN_RECORDS = 2048, 14_732
SEED = 42


def measure(quick: bool) -> list[dict]:
    """Issue 7 item 2: tokens processed per epoch (dynamic vs 384 padding) and samsum packing efficiency.

    Deterministic: counts, not timings; quick mode uses fewer synthetic examples and samsum records.
    """
    figs = []
    fixture = padding(200, QA_MAX_SEQ_LENGTH, QA_DOC_STRIDE, QA_BATCH, SEED, "bert")
    n_synth = 2_000 if quick else 10_000
    synth = squad_shaped_padding(n_synth, QA_MAX_SEQ_LENGTH, QA_DOC_STRIDE, QA_BATCH, SEED, "bert")
    for label, r in (
        ("SQuAD fixture (200 articles)", fixture),
        (f"SQuAD-shaped synthetic ({n_synth:,})", synth),
    ):
        figs.append(
            figure(
                f"QA tokens/epoch incl. padding, dynamic, {label}",
                r["tokens_dynamic_padding"],
                "tokens",
                f"every window padded to {QA_MAX_SEQ_LENGTH} (original)",
                r["tokens_padded_to_max_length"],
                f"{r['examples']:,} examples -> {r['windows']:,} windows, {r['real_tokens']:,} real tokens "
                f"(mean {r['mean_window_tokens']:.0f}/window); per-device batch {QA_BATCH}, stride "
                f"{QA_DOC_STRIDE}, seeded random batches; no length grouping (the recipe does not use it)",
            )
        )
    n_records = 500 if quick else SAMSUM_TRAIN_RECORDS
    pack = samsum_packing(n_records, SAMSUM_BLOCK_SIZE)
    processed = pack["blocks"] * SAMSUM_BLOCK_SIZE
    figs.append(
        figure(
            f"samsum packing efficiency (real/processed tokens), block {SAMSUM_BLOCK_SIZE}",
            pack["tokens"] / processed,
            "fraction",
            "every processed token real",
            1.0,
            f"{n_records:,} fixture dialogues, {pack['tokens']:,} tokens in {pack['blocks']} blocks "
            f"({processed - pack['tokens']:,} padding, last block only); tiny fixture tokenizer",
        )
    )
    kept = pack["tokens"] - pack["tokens_dropped_by_original_packing"]
    figs.append(
        figure(
            f"samsum tokens trained per epoch, block {SAMSUM_BLOCK_SIZE}",
            pack["tokens"],
            "tokens",
            "original packing (drops the last partial block)",
            kept,
            "ours keeps the last partial block, padded with attention 0 and label -100",
        )
    )
    return figs


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def ddp(
    n_articles: int, global_batch: int, max_seq_length: int, doc_stride: int, threads: int | None
) -> dict[str, dict[str, float]]:
    """Train one epoch in 1 and in 2 processes (same data, same global batch); wall and CPU seconds.

    torchrun gives each of the two workers one thread (OMP_NUM_THREADS=1); `threads` sets the same limit
    for the single process, so the comparison is not about thread oversubscription.
    """
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        paths = write_squad(root / "squad", n_train=n_articles, n_validation=4)
        model = build_encoder("bert", root / "tiny-bert")
        for processes in (1, 2):
            hps = {
                "do_train": True,
                "max_seq_length": max_seq_length,
                "doc_stride": doc_stride,
                "num_train_epochs": 1,
                "per_device_train_batch_size": global_batch // processes,
                "save_strategy": "no",
                "seed": 1,
                "report_to": "none",
                "disable_tqdm": True,
            }
            cpu_before, wall_before = _children_cpu(), time.monotonic()
            job = lc.run_training(
                root / f"job{processes}",
                entry_point="run_qa.py",
                source_dir=ROOT / "training_code",
                hyperparameters=hps,
                channels={"training": paths["train"], "model": model},
                distribution="torch_distributed" if processes > 1 else None,
                processes_per_host=processes,
                env={"OMP_NUM_THREADS": str(threads)} if threads and processes == 1 else None,
            )
            if job.status != "Completed":
                raise SystemExit(job.logs()[-3000:])
            metrics = json.loads((job.model_dir / "metrics.json").read_text())
            results[f"{processes}_process"] = {
                "wall_seconds_container": time.monotonic() - wall_before,
                "cpu_seconds_container": _children_cpu() - cpu_before,
                "train_runtime_seconds": metrics["train_runtime"],
                "global_step": metrics["global_step"],
            }
    one, two = results["1_process"], results["2_process"]
    results["ratio_2_over_1"] = {
        "cpu_seconds_container": two["cpu_seconds_container"] / one["cpu_seconds_container"],
        "train_runtime_seconds": two["train_runtime_seconds"] / one["train_runtime_seconds"],
    }
    return results


def main(argv: list[str] | None = None) -> None:
    """Command line; prints JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=["padding", "ddp"])
    parser.add_argument("--articles", type=int, default=200)
    parser.add_argument("--max_seq_length", type=int, default=384)
    parser.add_argument("--doc_stride", type=int, default=128)
    parser.add_argument("--batch_size", type=int, default=4, help="per-device batch of the recipe")
    parser.add_argument("--tokenizer", default="bert", choices=["bert", "roberta", "distilbert"])
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--threads", type=int, default=None, help="OMP_NUM_THREADS of the 1-process run")
    args = parser.parse_args(argv)
    out: dict[str, Any]
    if args.what == "padding":
        out = padding(
            args.articles, args.max_seq_length, args.doc_stride, args.batch_size, args.seed, args.tokenizer
        )
    else:
        out = ddp(args.articles, 2 * args.batch_size, args.max_seq_length, args.doc_stride, args.threads)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
