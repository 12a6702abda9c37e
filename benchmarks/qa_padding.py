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

from hfpipe import local_container as lc  # noqa: E402
from hfpipe.fixtures.encoders import build_encoder, build_tokenizer  # noqa: E402
from hfpipe.fixtures.squad import write_squad  # noqa: E402


def padding(
    n_articles: int, max_seq_length: int, doc_stride: int, batch_size: int, seed: int, kind: str
) -> dict[str, float]:
    """Tokens per epoch with padding to max_seq_length vs per-batch (dynamic) padding."""
    with tempfile.TemporaryDirectory() as tmp:
        path = write_squad(tmp, n_train=n_articles, n_validation=1)["train"]
        rows = qa_utils.load_squad_json(path)
    tokenizer = build_tokenizer(kind)
    batch = {k: [r[k] for r in rows] for k in rows[0]}
    features = qa_utils.prepare_train_features(
        batch, tokenizer, max_seq_length=max_seq_length, doc_stride=doc_stride
    )
    lengths = torch.tensor([len(ids) for ids in features["input_ids"]])
    order = torch.randperm(len(lengths), generator=torch.Generator().manual_seed(seed))
    dynamic = sum(
        int(lengths[order[i : i + batch_size]].max()) * len(order[i : i + batch_size])
        for i in range(0, len(order), batch_size)
    )
    fixed = len(lengths) * max_seq_length
    return {
        "examples": len(rows),
        "windows": len(lengths),
        "real_tokens": int(lengths.sum()),
        "mean_window_tokens": float(lengths.float().mean()),
        "tokens_padded_to_max_length": fixed,
        "tokens_dynamic_padding": dynamic,
        "ratio_max_length_over_dynamic": fixed / dynamic,
    }


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
