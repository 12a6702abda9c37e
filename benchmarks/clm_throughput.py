"""CPU training throughput of the tiny BLOOM under the original recipe's settings vs run_clm.py's defaults.

    .venv/bin/python benchmarks/clm_throughput.py [--steps 30] [--block-size 256] [--rounds 2]

Both settings run in this one process, interleaved (A B A B ...) so machine load hits them alike; each
round trains `--steps` optimizer steps on the samsum fixture and times the steps after the first two.
Also prints the packing efficiency of the fixture for a few block sizes, and how many tokens the
original notebook's packing (which drops the last partial block) would have thrown away.
Settings:
  original  int8 base + gradient checkpointing + adafactor (the bloomz-7b1 notebook)
  defaults  run_clm.py defaults: int8 base, no gradient checkpointing, adamw_torch (HF default)
  none      unquantized fp32 base, no gradient checkpointing, adamw_torch
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "training_code"))
sys.path.insert(0, str(ROOT))

import run_clm  # noqa: E402
from transformers import AutoTokenizer, Trainer, TrainerCallback, default_data_collator  # noqa: E402

from benchmarks.common import figure  # noqa: E402
from hfpipe.fixtures import samsum  # noqa: E402

SETTINGS = {
    "original": ["--quantization", "int8", "--gradient_checkpointing", "true", "--optim", "adafactor"],
    "defaults": [],
    "none": ["--quantization", "none"],
}


class StepTimer(TrainerCallback):
    """Wall time of each optimizer step."""

    def __init__(self) -> None:
        self.times: list[float] = []
        self._t = 0.0

    def on_step_begin(self, args, state, control, **kwargs):
        self._t = time.perf_counter()

    def on_step_end(self, args, state, control, **kwargs):
        self.times.append(time.perf_counter() - self._t)


def run_once(name: str, workdir: Path, data_dir: Path, steps: int, block_size: int, batch: int) -> float:
    argv = [
        "--model_name_or_path",
        str(data_dir / "model"),
        "--train_file",
        str(data_dir / "train"),
        "--output_dir",
        str(workdir / name),
        "--block_size",
        str(block_size),
        "--per_device_train_batch_size",
        str(batch),
        "--max_steps",
        str(steps),
        "--save_strategy",
        "no",
        "--logging_steps",
        "1000",
        "--disable_tqdm",
        "true",
        "--validation_split_percentage",
        "0",
        *SETTINGS[name],
    ]
    model_args, data_args, training_args = run_clm.parse_args(argv)
    tokenizer = AutoTokenizer.from_pretrained(data_dir / "model")
    raw, _ = run_clm.load_raw_datasets(data_args, training_args.seed)
    blocks, _ = run_clm.packed_dataset(
        run_clm.tokenize(raw, tokenizer, data_args, training_args), block_size, tokenizer.pad_token_id
    )
    model = run_clm.load_training_model(str(data_dir / "model"), model_args, training_args)
    timer = StepTimer()
    trainer = Trainer(
        model=model,
        args=training_args,
        train_dataset=blocks,
        data_collator=default_data_collator,
        callbacks=[timer],
    )
    trainer.train()
    step = statistics.median(timer.times[2:])
    return batch * block_size / step


def packing_report(data_dir: Path, block_sizes: tuple[int, ...] = (64, 256, 2048)) -> list[dict]:
    """Packing efficiency (real / processed tokens) of data_dir/train at each block size.

    run_clm.py keeps the last partial block (padded); the original notebook dropped it.
    """
    tokenizer = AutoTokenizer.from_pretrained(data_dir / "model")
    records = [json.loads(line) for line in (data_dir / "train" / "train.jsonl").read_text().splitlines()]
    eos = tokenizer.eos_token
    lengths = [
        len(
            tokenizer(
                run_clm.inference_clm.render(run_clm.inference_clm.DEFAULT_PROMPT_TEMPLATE, r, eos),
                add_special_tokens=False,
            )["input_ids"]
        )
        for r in records
    ]
    total = sum(lengths)
    rows = []
    for block in block_sizes:
        n_blocks = -(-total // block)
        rows.append(
            {
                "block_size": block,
                "records": len(records),
                "tokens": total,
                "blocks": n_blocks,
                "packing_efficiency": round(total / (n_blocks * block), 4),
                "tokens_dropped_by_original_packing": total % block,
            }
        )
    return rows


def throughput(steps: int, rounds: int, block_size: int, batch: int, threads: int) -> dict[str, list[float]]:
    """Tokens/s of each setting, `rounds` interleaved rounds of `steps` optimizer steps each."""
    if steps < 3:
        raise ValueError(f"steps={steps}: need at least 3 (the first two steps are not timed)")
    previous_threads = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            data_dir = Path(tmp) / "data"
            samsum.write_samsum(data_dir, n_train=256, n_validation=8)
            samsum.build_tiny_bloom(data_dir / "model")
            results: dict[str, list[float]] = {name: [] for name in SETTINGS}
            for _ in range(rounds):
                for name in SETTINGS:
                    results[name].append(run_once(name, Path(tmp), data_dir, steps, block_size, batch))
    finally:
        torch.set_num_threads(previous_threads)
    return results


def measure(quick: bool) -> list[dict]:
    """Issue 7 item 3: tiny LoRA recipe tokens/s on CPU, run_clm.py defaults vs the original settings."""
    steps, rounds, block_size, batch, threads = (6, 1, 256, 1, 1) if quick else (30, 3, 256, 1, 1)
    results = throughput(steps, rounds, block_size, batch, threads)
    base = statistics.median(results["original"])
    notes = (
        f"tiny BLOOM (2 layers), block {block_size}, batch {batch}, {threads} thread, "
        f"median of {rounds} interleaved round(s) x {steps - 2} timed steps"
    )
    return [
        figure(
            f"tiny LoRA CPU tokens/s, {label}",
            statistics.median(results[name]),
            "tokens/s",
            "original: int8 + gradient checkpointing + adafactor",
            base,
            notes,
        )
        for name, label in (
            ("defaults", "our defaults (int8, no checkpointing, adamw)"),
            ("none", "unquantized fp32 base, no checkpointing, adamw"),
        )
    ]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--block-size", type=int, default=256)
    parser.add_argument("--batch-size", type=int, default=1, help="the recipe's per-device batch")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    results = throughput(args.steps, args.rounds, args.block_size, args.batch_size, args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        data_dir = Path(tmp) / "data"
        samsum.write_samsum(data_dir, n_train=256, n_validation=8)
        samsum.build_tiny_bloom(data_dir / "model")
        report = {
            "torch": torch.__version__,
            "threads": args.threads,
            "block_size": args.block_size,
            "batch_size": args.batch_size,
            "steps": args.steps,
            "tokens_per_second": {k: round(statistics.median(v), 1) for k, v in results.items()},
            "tokens_per_second_all_rounds": {k: [round(x, 1) for x in v] for k, v in results.items()},
            "packing": packing_report(data_dir),
        }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
