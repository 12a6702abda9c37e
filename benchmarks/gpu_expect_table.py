"""The expectation tables of docs/bench.md: per recipe (full size, its own hyperparameters) and per LoRA
setting of benchmarks/gpu_lora.py, from the arithmetic of benchmarks/gpu_expect.py.

    python -m benchmarks.gpu_expect_table

Its own module because the recipe rows come from gpu_fit's cases, and gpu_fit imports gpu_expect: kept in
gpu_expect.py, the two would import each other (tests/layout/test_import_cycles.py).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    # Run as a script (python benchmarks/gpu_expect_table.py): make `benchmarks` importable.
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import gpu_expect, gpu_fit, gpu_lora
from benchmarks.common import markdown_table


def expectation_rows() -> list[dict[str, Any]]:
    """One row per recipe (full size, its own hyperparameters) and per gpu_lora setting."""
    rows = []
    for case in gpu_fit.cases(tiny=False):
        rows.append({"what": f"recipe {case.recipe}", **case.expected()})
    for s in gpu_lora.SETTINGS:
        setting = gpu_expect.LoraSetting(s.quantization, s.checkpointing, s.optimizer, s.kbit_prepare)
        mem = gpu_expect.bloom_memory(gpu_lora.BLOOMZ_7B1_CONFIG, setting, 2048, gpu_lora.LORA["r"])
        fl = gpu_lora.flops_per_token(gpu_lora.BLOOMZ_7B1_CONFIG, 2048, gpu_lora.LORA["r"], s.checkpointing)
        rows.append(
            {
                "what": f"LoRA {s.name}",
                "memory": mem,
                "model_flops_per_token": fl["model"],
                "hardware_flops_per_token": fl["hardware"],
                "tokens_per_step": 2048,
            }
        )
    return rows


def markdown() -> str:
    headers = (
        "what",
        "weights GiB",
        "grads+optimizer GiB",
        "activations GiB",
        "logits GiB",
        "total GiB",
        "model GFLOP/token",
        "hardware GFLOP/token",
    )
    rows = []
    for r in expectation_rows():
        m = r["memory"]
        rows.append(
            [
                r["what"],
                f"{m['weights'] / gpu_expect.GIB:.2f}",
                f"{m['states'] / gpu_expect.GIB:.2f}",
                f"{m['activations'] / gpu_expect.GIB:.2f}",
                f"{m['logits'] / gpu_expect.GIB:.2f}",
                f"{m['total'] / gpu_expect.GIB:.2f}",
                f"{r['model_flops_per_token'] / 1e9:.3g}",
                f"{r['hardware_flops_per_token'] / 1e9:.3g}",
            ]
        )
    return markdown_table(headers, rows)


if __name__ == "__main__":
    print(markdown())
