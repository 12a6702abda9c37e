"""LoRA training throughput, peak memory and FLOPs utilization of the bloomz-7b1 recipe, per setting.

Issue 7, measurement 5. Builds the bigscience/bloomz-7b1 architecture from its config (written out below;
nothing is downloaded) with random weights, puts LoRA (r 8, alpha 32, dropout 0.05, ``query_key_value``)
on it and trains on random token blocks of 2048 tokens, batch 1, under bf16 autocast, in six settings:

    original-int8-ckpt   int8 (bitsandbytes LLM.int8, BitsAndBytesConfig(load_in_8bit=True)), peft's
                         prepare_model_for_kbit_training (non-quantized weights upcast to fp32), gradient
                         checkpointing, Adafactor: the original SageMaker recipe. The baseline of every ratio.
    int8-no-ckpt         the same without gradient checkpointing
    nf4-ckpt, nf4-no-ckpt    4-bit NF4 base (bnb_4bit_compute_dtype bf16), bf16 elsewhere, AdamW
    bf16-ckpt, bf16-no-ckpt  bf16 base, no quantization, AdamW

Run (one GPU of the H100/H200 class; about 4-6 minutes, bounded by --time-budget, default 420 s):

    python benchmarks/gpu_lora.py                       # prints the table last
    python benchmarks/gpu_lora.py --json-out gpu.json   # also writes the results as JSON
    python benchmarks/gpu_lora.py --peak-tflops 756     # a GPU the peak table does not know (H100 PCIe)
    python benchmarks/gpu_lora.py --tiny                # 2-layer Bloom on CPU, seconds (what the tests run)

FLOPs accounting (per trained token; N, N_blocks, N_lora, s defined in ``flops_per_token``):
the base is frozen, so its weight gradients are never computed, but the gradient still has to flow back
through every frozen matmul to reach the LoRA matrices of the earlier layers. Hence
    forward 2N + activation-gradient backward 2N + LoRA (forward, activation and weight gradient) 6 N_lora
    + attention 12 L h s   (forward 4 L h s: QK^T and PV over all s positions, backward twice that)
is the model's work per token (MFU), the same with or without checkpointing. Checkpointing recomputes each
decoder block's forward in the backward pass, 2 N_blocks + 2 N_lora + 4 L h s more per token: counted in the
hardware FLOPs (HFU) only. N counts every matmul weight the token passes through: the decoder blocks' linear
layers and the (tied) output projection; the embedding lookup, biases, layer norms, softmax and ALiBi are
not counted. Bloom's attention in transformers is eager (baddbmm over the full s x s scores, the causal mask
applied afterwards), so attention is counted over all s positions, not s/2. MFU and HFU are against the GPU's
dense bf16 peak (table below or --peak-tflops), also for int8 and NF4, whose matmuls run in other formats.

Over 400 lines on purpose: the FLOPs accounting, the settings and the measurement loop are one
measurement whose numbers must agree with each other; the docstring above is its specification.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import gc
import json
import math
import os
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    # Run as a script (python benchmarks/gpu_lora.py): make `benchmarks.common` importable.
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import figure, markdown_table

# Everything is built from configs; an offline GPU machine must never wait on a Hub request (children inherit).
os.environ.setdefault("HF_HUB_OFFLINE", "1")

# bigscience/bloomz-7b1 config.json, the fields that shape the compute.
BLOOMZ_7B1_CONFIG: dict[str, Any] = {
    "vocab_size": 250880,
    "hidden_size": 4096,
    "n_layer": 30,
    "n_head": 32,
    "layer_norm_epsilon": 1e-5,
    "initializer_range": 0.02,
    "apply_residual_connection_post_layernorm": False,
    "hidden_dropout": 0.0,
    "attention_dropout": 0.0,
    "pretraining_tp": 1,
    "slow_but_exact": False,
    "bos_token_id": 1,
    "eos_token_id": 2,
    "pad_token_id": 3,
    "use_cache": False,
}
TINY_CONFIG: dict[str, Any] = {
    **BLOOMZ_7B1_CONFIG,
    "vocab_size": 1024,
    "hidden_size": 64,
    "n_layer": 2,
    "n_head": 4,
}

# Dense (no sparsity) bf16 tensor-core peak, TFLOP/s, from NVIDIA's data sheets; matched in order against
# torch.cuda.get_device_name(). An H100 that names neither PCIe nor NVL is the SXM part.
PEAK_BF16_TFLOPS: tuple[tuple[str, float], ...] = (
    ("H200", 989.0),
    ("H100 PCIe", 756.0),
    ("H100 NVL", 835.0),
    ("H100", 989.0),
    ("A100", 312.0),
)

LORA: dict[str, Any] = {"r": 8, "lora_alpha": 32, "lora_dropout": 0.05, "target_modules": ["query_key_value"]}
LEARNING_RATE = 2e-4
BASELINE = "original-int8-ckpt"


@dataclasses.dataclass(frozen=True)
class Setting:
    """One way of training the same LoRA: base quantization, checkpointing, optimizer."""

    name: str
    quantization: str  # int8 | nf4 | none
    checkpointing: bool
    optimizer: str  # adafactor | adamw
    # peft.prepare_model_for_kbit_training, as the original recipe did (prepare_model_for_int8_training):
    # every non-quantized weight upcast to fp32.
    kbit_prepare: bool


SETTINGS: tuple[Setting, ...] = (
    Setting(BASELINE, "int8", True, "adafactor", True),
    Setting("int8-no-ckpt", "int8", False, "adafactor", True),
    Setting("nf4-ckpt", "nf4", True, "adamw", False),
    Setting("nf4-no-ckpt", "nf4", False, "adamw", False),
    Setting("bf16-ckpt", "none", True, "adamw", False),
    Setting("bf16-no-ckpt", "none", False, "adamw", False),
)
SETTINGS_BY_NAME = {s.name: s for s in SETTINGS}

TABLE_HEADERS = (
    "setting",
    "quant",
    "ckpt",
    "optim",
    "status",
    "tokens/s",
    "vs original",
    "s/step",
    "peak GiB",
    "fit under cap",
    "MFU %",
    "HFU %",
    "loss",
    "error",
)


# --------------------------------------------------------------------------------------------- FLOPs


def flops_per_token(
    config: dict[str, Any], seq_len: int, lora_r: int, checkpointing: bool
) -> dict[str, float]:
    """Model and hardware FLOPs per trained token for LoRA on a frozen Bloom base (see module docstring).

    N_blocks = L * 12 h^2 (query_key_value 3h^2, dense h^2, dense_h_to_4h 4h^2, dense_4h_to_h 4h^2),
    N = N_blocks + V h (the output projection, tied to the embeddings), N_lora = L * r * (h + 3h).
    """
    L, h, V = config["n_layer"], config["hidden_size"], config["vocab_size"]
    n_blocks = L * 12 * h * h
    n = n_blocks + V * h
    n_lora = L * lora_r * (h + 3 * h)
    attn_fwd = 4 * L * h * seq_len
    model = 2 * n + 2 * n + 6 * n_lora + 3 * attn_fwd
    recompute = (2 * n_blocks + 2 * n_lora + attn_fwd) if checkpointing else 0
    return {
        "n": float(n),
        "n_blocks": float(n_blocks),
        "n_lora": float(n_lora),
        "model": float(model),
        "hardware": float(model + recompute),
    }


def peak_bf16_tflops(device_name: str) -> float | None:
    """Dense bf16 peak of a GPU by its name, or None when the table does not know it."""
    for key, tflops in PEAK_BF16_TFLOPS:
        if key.lower() in device_name.lower():
            return tflops
    return None


# ---------------------------------------------------------------------------------------- the model


def build_config(tiny: bool) -> Any:
    """The BloomConfig of bloomz-7b1, or the 2-layer tiny one."""
    from transformers import BloomConfig

    return BloomConfig(**(TINY_CONFIG if tiny else BLOOMZ_7B1_CONFIG))


def write_random_checkpoint(config: Any, path: Path, device: str) -> None:
    """Random-weight Bloom saved as safetensors, so every setting loads the same weights through
    from_pretrained (the only way transformers applies a BitsAndBytesConfig). The weights are created
    on the target device directly in bf16: 7B parameters initialise on a GPU in seconds."""
    import torch
    from transformers import BloomForCausalLM

    if (path / "config.json").exists():
        return
    torch.manual_seed(0)
    with torch.device(device):
        model = BloomForCausalLM._from_config(config, dtype=torch.bfloat16)
    model.save_pretrained(path, max_shard_size="4GB")
    del model
    _free_memory()


def load_model(setting: Setting, model_dir: Path, device: str) -> Any:
    """The base model of one setting with LoRA on it, ready to train."""
    import torch
    from peft import LoraConfig, get_peft_model, prepare_model_for_kbit_training
    from transformers import BitsAndBytesConfig, BloomForCausalLM

    kwargs: dict[str, Any] = {"device_map": {"": device}}
    if setting.quantization == "int8":
        # dtype as the original recipe got it: bitsandbytes' default fp16 for the non-quantized weights.
        kwargs.update(quantization_config=BitsAndBytesConfig(load_in_8bit=True), dtype=torch.float16)
    elif setting.quantization == "nf4":
        kwargs.update(
            quantization_config=BitsAndBytesConfig(
                load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_compute_dtype=torch.bfloat16
            ),
            dtype=torch.bfloat16,
        )
    elif setting.quantization == "none":
        kwargs.update(dtype=torch.bfloat16)
    else:
        raise ValueError(f"quantization={setting.quantization!r}: expected int8, nf4 or none")
    model = BloomForCausalLM.from_pretrained(model_dir, **kwargs)
    model.config.use_cache = False
    # Non-reentrant checkpointing needs no input-requires-grad hook and is what transformers recommends.
    ckpt_kwargs = {"use_reentrant": False}
    if setting.kbit_prepare:
        model = prepare_model_for_kbit_training(
            model, use_gradient_checkpointing=setting.checkpointing, gradient_checkpointing_kwargs=ckpt_kwargs
        )
    elif setting.checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=ckpt_kwargs)
    if setting.checkpointing and not model.is_gradient_checkpointing:
        raise RuntimeError(f"{setting.name}: gradient checkpointing did not switch on")
    peft_model = get_peft_model(model, LoraConfig(task_type="CAUSAL_LM", **LORA))
    peft_model.train()
    return peft_model


def make_optimizer(setting: Setting, params: list[Any]) -> Any:
    """Adafactor as the Trainer's optim="adafactor" builds it, or the Trainer's default AdamW."""
    import torch
    from transformers.optimization import Adafactor

    if setting.optimizer == "adafactor":
        return Adafactor(
            params, lr=LEARNING_RATE, scale_parameter=False, relative_step=False, warmup_init=False
        )
    if setting.optimizer == "adamw":
        return torch.optim.AdamW(params, lr=LEARNING_RATE)
    raise ValueError(f"optimizer={setting.optimizer!r}: expected adafactor or adamw")


# ----------------------------------------------------------------------------------------- running


@dataclasses.dataclass
class Options:
    """What one run measures; built from the command line or by measure()."""

    tiny: bool = False
    device: str = "auto"
    block_size: int = 2048
    batch_size: int = 1
    warmup_steps: int = 2
    steps: int = 6
    max_timed_seconds: float = 30.0
    time_budget: float = 420.0
    peak_tflops: float | None = None
    settings: tuple[str, ...] = tuple(s.name for s in SETTINGS)
    isolate: bool | None = None
    workdir: str | None = None
    model_dir: str | None = None
    seed: int = 0
    threads: int | None = None
    # GiB the CUDA caching allocator may hold while loading and for the first (warm-up) steps: does the
    # setting fit the GPU of the recipe's instance (24 GiB: ml.g5.2xlarge's A10G)? None: no cap.
    memory_cap_gib: float | None = None


def resolve_device(device: str) -> str:
    """auto -> cuda when a GPU is visible, else cpu."""
    import torch

    if device == "auto":
        return "cuda:0" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"--device={device!r}: no CUDA device is visible; use --device cpu (with --tiny)")
    return device


def _free_memory() -> None:
    import torch

    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def _sync(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize(device)


def _error_text(exc: BaseException) -> str:
    first = (str(exc).strip().splitlines() or [""])[0]
    return f"{type(exc).__name__}: {first}"[:300]


def is_oom(exc: BaseException) -> bool:
    """A CUDA out-of-memory error, however the library that hit it reports it (torch, cuBLAS, bitsandbytes)."""
    import torch

    text = str(exc).lower()
    return isinstance(exc, torch.OutOfMemoryError) or any(
        marker in text
        for marker in ("out of memory", "cublas_status_alloc_failed", "cuda_error_out_of_memory")
    )


def set_memory_cap(cap_gib: float | None, device: str) -> float | None:
    """Cap what this process's CUDA caching allocator may hold to `cap_gib` GiB (None: the whole GPU).

    torch.cuda.set_per_process_memory_fraction takes a fraction of the device's total memory; an allocation
    past it raises torch.OutOfMemoryError as on a smaller GPU. The CUDA context (a few hundred MiB) is
    outside the allocator and not counted. Returns the fraction set, None on CPU (no cap there).
    """
    import torch

    if not device.startswith("cuda"):
        return None
    total = torch.cuda.get_device_properties(device).total_memory
    fraction = 1.0 if cap_gib is None else min(1.0, cap_gib * 2**30 / total)
    torch.cuda.set_per_process_memory_fraction(fraction, device)
    return fraction


def _train(setting: Setting, opts: Options, model_dir: Path, device: str) -> dict[str, Any]:
    """Load, warm up, time. Everything it allocates dies with its frame.

    With `opts.memory_cap_gib` on a GPU, loading and the warm-up steps run under that cap (the fit
    question: peak memory, or out of memory); the cap is then lifted and the timed steps run uncapped, so a
    setting that does not fit the small GPU still gets its speed measured on this one.
    """
    import torch

    cuda = device.startswith("cuda")
    fit: dict[str, Any] = {"fit_cap_gib": opts.memory_cap_gib if cuda else None}
    capped = cuda and opts.memory_cap_gib is not None
    if capped:
        set_memory_cap(opts.memory_cap_gib, device)
        torch.cuda.reset_peak_memory_stats(device)
    model: Any = None
    optimizer: Any = None
    gen = torch.Generator().manual_seed(opts.seed)

    def setup() -> tuple[Any, Any, Any, list[Any]]:
        m = load_model(setting, model_dir, device)
        params = [p for p in m.parameters() if p.requires_grad]
        if not params:
            raise RuntimeError(f"{setting.name}: LoRA left no trainable parameters")
        ids = torch.randint(0, m.config.vocab_size, (opts.batch_size, opts.block_size), generator=gen).to(
            device
        )
        return m, make_optimizer(setting, params), ids, params

    autocast = torch.autocast(device_type=torch.device(device).type, dtype=torch.bfloat16)

    def step() -> float:
        with autocast:
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return float(loss.detach())

    try:
        model, optimizer, ids, params = setup()
        for _ in range(max(opts.warmup_steps, 1 if capped else 0)):
            step()
        _sync(device)
        fit["fit_status"] = "fits" if capped else "not capped"
    except Exception as exc:
        if not (capped and is_oom(exc)):
            raise
        fit.update(fit_status="oom", fit_error=_error_text(exc))
    if capped:
        fit["fit_peak_gib"] = torch.cuda.max_memory_allocated(device) / 2**30
        fit["fit_reserved_gib"] = torch.cuda.max_memory_reserved(device) / 2**30
        set_memory_cap(None, device)
        if fit["fit_status"] == "oom":
            # Start again without the cap for the speed figures: whatever the failed step held is freed.
            if optimizer is not None:
                optimizer.zero_grad(set_to_none=True)
            model = optimizer = None
            _free_memory()
            model, optimizer, ids, params = setup()
            for _ in range(opts.warmup_steps):
                step()
            _sync(device)
    if cuda:
        torch.cuda.reset_peak_memory_stats(device)
        if capped:
            step()  # the peak of an uncapped step
            _sync(device)
    t0 = time.perf_counter()
    done, loss = 0, math.nan
    while done < opts.steps:
        loss = step()
        done += 1
        # A slow setting (int8 on some GPUs) stops early rather than eat the others' time.
        if time.perf_counter() - t0 > opts.max_timed_seconds:
            break
    _sync(device)
    elapsed = time.perf_counter() - t0
    peak = torch.cuda.max_memory_allocated(device) / 2**30 if cuda else None
    return {
        "tokens_per_s": done * opts.batch_size * opts.block_size / elapsed,
        "step_s": elapsed / done,
        "timed_steps": done,
        "peak_mem_gib": peak,
        "loss": loss,
        "trainable_params": sum(p.numel() for p in params),
        **fit,
    }


def run_setting(setting: Setting, opts: Options, model_dir: Path, device: str) -> dict[str, Any]:
    """One setting, in this process; a failure becomes status "failed" with its error, never an exception."""
    row: dict[str, Any] = {
        "setting": setting.name,
        **dataclasses.asdict(setting),
        "status": "ok",
        "error": "",
    }
    try:
        row.update(_train(setting, opts, model_dir, device))
        if not math.isfinite(row["loss"]):
            row.update(status="failed", error=f"loss is {row['loss']} after training")
    except Exception as exc:
        row.update(status="failed", error=_error_text(exc))
        traceback.print_exc()
    _free_memory()
    return row


def run_setting_isolated(setting: Setting, opts: Options, model_dir: Path, timeout: float) -> dict[str, Any]:
    """One setting in a child process: a crash, a hung kernel or a poisoned CUDA context stays there."""
    row: dict[str, Any] = {"setting": setting.name, **dataclasses.asdict(setting), "status": "failed"}
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "row.json"
        cmd = [sys.executable, str(Path(__file__).resolve()), *_child_args(opts, setting, model_dir, out)]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
        except subprocess.TimeoutExpired as exc:
            sys.stderr.write(
                (exc.stderr or b"").decode() if isinstance(exc.stderr, bytes) else (exc.stderr or "")
            )
            row["error"] = f"timed out after {timeout:.0f} s (time budget)"
            return row
        sys.stderr.write(proc.stdout + proc.stderr)
        if out.exists():
            return json.loads(out.read_text())
        tail = [ln for ln in proc.stderr.splitlines() if ln.strip()][-1:] or ["no output"]
        row["error"] = f"child exited with code {proc.returncode}: {tail[0][:300]}"
        return row


def _child_args(opts: Options, setting: Setting, model_dir: Path, out: Path) -> list[str]:
    args = [
        "--device",
        opts.device,
        "--block-size",
        str(opts.block_size),
        "--batch-size",
        str(opts.batch_size),
        "--warmup-steps",
        str(opts.warmup_steps),
        "--steps",
        str(opts.steps),
        "--max-timed-seconds",
        str(opts.max_timed_seconds),
        "--settings",
        setting.name,
        "--model-dir",
        str(model_dir),
        "--row-json",
        str(out),
        "--no-isolate",
        "--seed",
        str(opts.seed),
        *(["--threads", str(opts.threads)] if opts.threads else []),
        *(["--memory-cap-gib", str(opts.memory_cap_gib)] if opts.memory_cap_gib is not None else []),
    ]
    return [*args, "--tiny"] if opts.tiny else args


@contextlib.contextmanager
def _workdir(opts: Options) -> Iterator[Path]:
    if opts.workdir:
        path = Path(opts.workdir)
        path.mkdir(parents=True, exist_ok=True)
        yield path
    else:
        with tempfile.TemporaryDirectory(prefix="gpu-lora-") as tmp:
            yield Path(tmp)


def run_benchmark(opts: Options) -> dict[str, Any]:
    """Every selected setting; returns the run's description and one row per setting."""
    import torch

    threads = torch.get_num_threads()
    try:
        if opts.threads:
            torch.set_num_threads(opts.threads)
        return _run_benchmark(opts)
    finally:
        torch.set_num_threads(threads)


def _run_benchmark(opts: Options) -> dict[str, Any]:
    import torch

    started = time.perf_counter()
    unknown = [s for s in opts.settings if s not in SETTINGS_BY_NAME]
    if unknown:
        raise ValueError(f"--settings: unknown {unknown}; known: {', '.join(SETTINGS_BY_NAME)}")
    device = resolve_device(opts.device)
    if not opts.tiny and not device.startswith("cuda"):
        raise ValueError(f"device={device!r}: the bloomz-7b1 config needs a CUDA GPU; use --tiny on a CPU")
    isolate = device.startswith("cuda") if opts.isolate is None else opts.isolate
    config = build_config(opts.tiny)
    gpu = torch.cuda.get_device_name(device) if device.startswith("cuda") else None
    peak = opts.peak_tflops or (peak_bf16_tflops(gpu) if gpu else None)
    run: dict[str, Any] = {
        "model": "tiny 2-layer Bloom" if opts.tiny else "bigscience/bloomz-7b1 architecture, random weights",
        "device": gpu or device,
        "peak_bf16_tflops": peak,
        "block_size": opts.block_size,
        "batch_size": opts.batch_size,
        "warmup_steps": opts.warmup_steps,
        "steps": opts.steps,
        "isolated": isolate,
        "memory_cap_gib": opts.memory_cap_gib,
        "lora": LORA,
        "rows": [],
    }
    with _workdir(opts) as work:
        model_dir = Path(opts.model_dir) if opts.model_dir else work / "bloom-random"
        if not opts.model_dir:
            t0 = time.perf_counter()
            write_random_checkpoint(config, model_dir, device)
            run["checkpoint_seconds"] = time.perf_counter() - t0
        for name in opts.settings:
            setting = SETTINGS_BY_NAME[name]
            left = opts.time_budget - (time.perf_counter() - started)
            # Loading 7B weights alone takes tens of seconds: a setting with less left than that is skipped.
            if left <= (0 if opts.tiny else 30):
                row = {"setting": name, **dataclasses.asdict(setting), "status": "skipped"}
                row["error"] = f"time budget of {opts.time_budget:.0f} s spent"
            elif isolate:
                row = run_setting_isolated(setting, opts, model_dir, timeout=left)
            else:
                row = run_setting(setting, opts, model_dir, device)
            if row.get("tokens_per_s"):
                fl = flops_per_token(config.to_dict(), opts.block_size, LORA["r"], setting.checkpointing)
                row["model_flops_per_token"], row["hardware_flops_per_token"] = fl["model"], fl["hardware"]
                if peak:
                    row["mfu"] = row["tokens_per_s"] * fl["model"] / (peak * 1e12)
                    row["hfu"] = row["tokens_per_s"] * fl["hardware"] / (peak * 1e12)
            run["rows"].append(row)
            print(
                f"[gpu_lora] {name}: {row['status']} {row.get('tokens_per_s') or row.get('error')}",
                file=sys.stderr,
            )
    run["flops"] = flops_per_token(config.to_dict(), opts.block_size, LORA["r"], checkpointing=False)
    run["seconds"] = time.perf_counter() - started
    return run


# ------------------------------------------------------------------------------------------ output


def table_rows(run: dict[str, Any]) -> list[list[Any]]:
    """One table row per setting; vs original is the tokens/s ratio against the baseline of the same run."""
    base = next((r.get("tokens_per_s") for r in run["rows"] if r["setting"] == BASELINE), None)
    rows = []
    for r in run["rows"]:
        tps = r.get("tokens_per_s")
        pct = {k: None if r.get(k) is None else 100 * r[k] for k in ("mfu", "hfu")}
        rows.append(
            [
                r["setting"],
                r["quantization"],
                "yes" if r["checkpointing"] else "no",
                r["optimizer"],
                r["status"],
                tps,
                None if not (tps and base) else f"{tps / base:.2f}x",
                r.get("step_s"),
                r.get("peak_mem_gib"),
                _fit_cell(r),
                pct["mfu"],
                pct["hfu"],
                r.get("loss"),
                r.get("error", ""),
            ]
        )
    return rows


def _fit_cell(row: dict[str, Any]) -> str:
    """'fits, 18.3 GiB of 24' / 'OOM at 23.9 GiB of 24' / '' (no cap: CPU, or not asked)."""
    status, cap = row.get("fit_status"), row.get("fit_cap_gib")
    if status not in ("fits", "oom") or cap is None:
        return ""
    peak = row.get("fit_peak_gib") or 0.0
    return f"fits, {peak:.1f} GiB of {cap:g}" if status == "fits" else f"OOM at {peak:.1f} GiB of {cap:g}"


def render(run: dict[str, Any]) -> str:
    """Run description, FLOPs accounting, then the table (last)."""
    f = run["flops"]
    peak = run["peak_bf16_tflops"]
    lines = [
        f"model: {run['model']}; device: {run['device']}; blocks of {run['block_size']} tokens, batch "
        f"{run['batch_size']}; {run['warmup_steps']} warm-up + up to {run['steps']} timed steps; LoRA r "
        f"{run['lora']['r']} alpha {run['lora']['lora_alpha']} on {','.join(run['lora']['target_modules'])}",
        f"FLOPs/token: N={f['n']:.4g} (block matmuls {f['n_blocks']:.4g} + output projection), "
        f"N_lora={f['n_lora']:.4g}; model (MFU) = 4N + 6N_lora + 12*L*h*s = {f['model']:.4g}; "
        "checkpointing adds 2N_blocks + 2N_lora + 4*L*h*s to the hardware FLOPs (HFU); attention over all s.",
        f"peak bf16: {f'{peak:g} TFLOP/s' if peak else 'unknown (pass --peak-tflops); MFU/HFU not computed'}"
        + ("" if run["device"] != "cpu" else "; peak GiB: CUDA only, not measured on CPU"),
        "",
        markdown_table(TABLE_HEADERS, table_rows(run)),
    ]
    return "\n".join(lines)


def figures(run: dict[str, Any], label: str) -> list[dict[str, Any]]:
    """The run as benchmark figures: tokens/s and (on a GPU) peak memory per setting, vs the original."""
    base: dict[str, Any] = next((r for r in run["rows"] if r["setting"] == BASELINE), {})
    out = []
    for r in run["rows"]:
        bits = []
        if r["status"] != "ok":
            bits.append(f"{r['status']}: {r.get('error', '')}")
        if r.get("mfu") is not None:
            bits.append(f"MFU {100 * r['mfu']:.1f}%, HFU {100 * r['hfu']:.1f}%")
        bits.append(label)
        out.append(
            figure(
                f"LoRA train {r['setting']}",
                r.get("tokens_per_s"),
                "tokens/s",
                f"LoRA train {BASELINE}",
                base.get("tokens_per_s"),
                "; ".join(bits),
            )
        )
        if r.get("peak_mem_gib") is not None:
            out.append(
                figure(
                    f"LoRA peak memory {r['setting']}",
                    r["peak_mem_gib"],
                    "GiB",
                    f"LoRA peak memory {BASELINE}",
                    base.get("peak_mem_gib"),
                    label,
                )
            )
    return out


def measure(quick: bool) -> list[dict[str, Any]]:
    """Measurement 5 for benchmarks/run.py: the 7b1 run on a GPU, else the tiny config on CPU (said so)."""
    import torch

    if torch.cuda.is_available():
        opts = Options(steps=3 if quick else 6, warmup_steps=1 if quick else 2)
        label = f"bloomz-7b1 architecture, blocks of {opts.block_size}, {torch.cuda.get_device_name(0)}"
    else:
        # One thread: on a small shared CPU, thread contention otherwise swamps these tiny matmuls.
        opts = Options(
            tiny=True, device="cpu", block_size=128, warmup_steps=2, steps=3 if quick else 8, threads=1
        )
        label = "no GPU here: tiny 2-layer Bloom on CPU (1 thread), blocks of 128; not the 7b1 figures"
    run = run_benchmark(opts)
    print(render(run), file=sys.stderr)
    return figures(run, label)


def parse_args(argv: Sequence[str] | None) -> tuple[Options, argparse.Namespace]:
    """Command line -> Options (tiny defaults: CPU-sized blocks and steps unless given)."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tiny", action="store_true", help="2-layer Bloom, short blocks, few steps (CPU, tests)")
    p.add_argument("--device", default="auto", help="auto (cuda if visible), cpu, cuda:N")
    p.add_argument("--block-size", type=int, help="tokens per block (default 2048; 128 with --tiny)")
    p.add_argument("--batch-size", type=int, default=1)
    p.add_argument("--warmup-steps", type=int, help="untimed steps per setting (default 2; 1 with --tiny)")
    p.add_argument("--steps", type=int, help="timed steps per setting (default 6; 2 with --tiny)")
    p.add_argument("--max-timed-seconds", type=float, default=30.0, help="stop timing a setting after this")
    p.add_argument(
        "--time-budget", type=float, default=420.0, help="settings not started by then are skipped"
    )
    p.add_argument(
        "--peak-tflops", type=float, help="dense bf16 peak of the GPU, TFLOP/s (overrides the table)"
    )
    p.add_argument("--settings", default=",".join(SETTINGS_BY_NAME), help="comma-separated subset, in order")
    p.add_argument(
        "--isolate",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="each setting in a child process (default: on with a GPU, off on CPU)",
    )
    p.add_argument("--workdir", help="where the random checkpoint is written (default: a temporary folder)")
    p.add_argument("--model-dir", help=argparse.SUPPRESS)
    p.add_argument("--row-json", help=argparse.SUPPRESS)
    p.add_argument("--json-out", help="also write the run as JSON here")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, help="CPU threads for torch (default: torch's choice)")
    p.add_argument(
        "--memory-cap-gib",
        type=float,
        help="load and warm up under this GPU memory cap (fit check, e.g. 24 for an A10G), then time uncapped",
    )
    a = p.parse_args(argv)
    for name in ("block_size", "batch_size", "warmup_steps", "steps"):
        v = getattr(a, name)
        if v is not None and v < (0 if name == "warmup_steps" else 1):
            p.error(f"--{name.replace('_', '-')}={v}: must be {'>= 0' if name == 'warmup_steps' else '>= 1'}")
    opts = Options(
        tiny=a.tiny,
        device=a.device,
        block_size=a.block_size or (128 if a.tiny else 2048),
        batch_size=a.batch_size,
        warmup_steps=a.warmup_steps if a.warmup_steps is not None else (1 if a.tiny else 2),
        steps=a.steps or (2 if a.tiny else 6),
        max_timed_seconds=a.max_timed_seconds,
        time_budget=a.time_budget,
        peak_tflops=a.peak_tflops,
        settings=tuple(s.strip() for s in a.settings.split(",") if s.strip()),
        isolate=a.isolate,
        workdir=a.workdir,
        model_dir=a.model_dir,
        seed=a.seed,
        threads=a.threads,
        memory_cap_gib=a.memory_cap_gib,
    )
    return opts, a


def main(argv: Sequence[str] | None = None) -> int:
    """Command line entry: run, print the table last, optionally write JSON."""
    opts, a = parse_args(argv)
    if a.row_json:
        # Child of an isolated run: one setting, its row as JSON for the parent.
        device = resolve_device(opts.device)
        if opts.threads:
            import torch

            torch.set_num_threads(opts.threads)
        row = run_setting(SETTINGS_BY_NAME[opts.settings[0]], opts, Path(opts.model_dir or "."), device)
        Path(a.row_json).write_text(json.dumps(row))
        return 0
    try:
        run = run_benchmark(opts)
    except ValueError as exc:
        print(f"gpu_lora: {exc}", file=sys.stderr)
        return 2
    if a.json_out:
        Path(a.json_out).write_text(json.dumps(run, indent=2) + "\n")
    sys.stdout.flush()
    sys.stderr.flush()
    print(render(run), flush=True)
    return 0 if any(r["status"] == "ok" for r in run["rows"]) else 1


if __name__ == "__main__":
    sys.exit(main())
