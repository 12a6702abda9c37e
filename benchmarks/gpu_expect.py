"""Analytic expectations for the GPU run, written down before any measurement: FLOPs per token and GPU memory
per recipe and per LoRA setting. benchmarks/gpu_suite.py prints each measurement next to its expectation.

    python -m benchmarks.gpu_expect_table    # the tables of docs/bench.md (benchmarks/gpu_expect_table.py)

Pure arithmetic on the architectures' configs (no torch, no other benchmark module: gpu_fit.py and
gpu_suite.py import this one, and the table of every recipe, which needs gpu_fit's cases, is
gpu_expect_table.py's); units are bytes and FLOPs.

Memory of a training step, at its peak (the backward pass of the first layers, or the loss for a large
vocabulary), in four parts:

- weights: what the base occupies on the GPU (fp32 for full fine-tuning; int8 / NF4 / bf16 for the LoRA base,
  with the non-quantized weights upcast to fp32 where peft's prepare_model_for_kbit_training runs);
- states: gradients and optimizer state of what trains (full fine-tuning: fp32 gradients 4 B + AdamW's two
  moments 8 B per parameter, plus the fp16 copies autocast makes of every matmul weight, 2 B, kept for the
  backward pass; LoRA: the adapters in fp32, 4 B + gradient 4 B + AdamW 8 B, or Adafactor's factored second
  moment, about nothing);
- activations: what the forward pass keeps for the backward pass. Encoders (scaled-dot-product attention,
  no s x s tensor kept): 34 bytes per token per hidden unit per layer, the 16-bit count of Korthikanti et
  al. 2022 (arXiv 2205.05198, eq. 1 without the 5as/h attention-score term); plus the fp32 layer-norm inputs
  autocast keeps (+4). BLOOM in transformers 4.56 uses eager attention: per layer and token 43h bytes for the
  matmul, layer-norm, GELU and LoRA-dropout inputs, plus 6a*s bytes for the attention scores (the fp32
  softmax output kept for its backward, 4 B, and its bf16 copy kept for the product with V, 2 B). With
  gradient checkpointing each block keeps only its input (4h bytes per token: fp32 once the embeddings are
  fp32, which prepare_model_for_kbit_training does) and one block at a time is recomputed: the whole
  per-layer amount twice (its activations and their gradients) for that one block;
- logits: the output layer's bf16 logits (2 B per token per vocabulary entry, kept by the model output),
  the fp32 copy the loss takes and log-softmax's fp32 output (kept for its backward), and in the backward
  pass the fp32 gradient and its bf16 cast: 2 + 4 + 4 + 2 = 12 B per token per vocabulary entry at the
  peak; encoders' heads are negligible.

The caching allocator rounds and fragments: expect the measured peak (max_memory_allocated) within about
+-25 % of these, and the reserved memory a little above it.
"""

from __future__ import annotations

import dataclasses
from typing import Any

GIB = 2**30


# ----------------------------------------------------------------------------------------- parameters


def encoder_dims(config: dict[str, Any]) -> dict[str, int]:
    """Layers, hidden, intermediate, heads, vocabulary, positions of a BERT / RoBERTa / DistilBERT config."""
    if config.get("model_type") == "distilbert":
        return {
            "L": config["n_layers"],
            "h": config["dim"],
            "i": config["hidden_dim"],
            "a": config["n_heads"],
            "V": config["vocab_size"],
            "P": config["max_position_embeddings"],
            "T": 0,
        }
    return {
        "L": config["num_hidden_layers"],
        "h": config["hidden_size"],
        "i": config["intermediate_size"],
        "a": config["num_attention_heads"],
        "V": config["vocab_size"],
        "P": config["max_position_embeddings"],
        "T": config.get("type_vocab_size", 0),
    }


def encoder_params(config: dict[str, Any], head: str, num_labels: int = 2) -> dict[str, int]:
    """Parameters of the encoder with the head the training script adds (qa or classification).

    Returns {"total", "matmul"}: every parameter, and those of the matmul weights (autocast copies them).
    BERT-style: embeddings (word, position, token type, layer norm); per layer Q, K, V, O (4h^2 + 4h), the
    feed-forward (2hi + i + h) and two layer norms (4h). BertForQuestionAnswering has no pooler; the
    classification heads: BERT pooler + classifier, RoBERTa dense + out_proj, DistilBERT pre_classifier +
    classifier.
    """
    d = encoder_dims(config)
    L, h, i, V, P, T = d["L"], d["h"], d["i"], d["V"], d["P"], d["T"]
    emb = V * h + P * h + T * h + 2 * h
    layer_matmul = 4 * h * h + 2 * h * i
    layer = layer_matmul + 4 * h + i + h + 4 * h
    if head == "qa":
        head_matmul, head_total = 2 * h, 2 * h + 2
    elif head == "classification":
        head_matmul = h * h + h * num_labels
        head_total = head_matmul + h + num_labels
    else:
        raise ValueError(f"head={head!r}: expected qa or classification")
    return {"total": emb + L * layer + head_total, "matmul": L * layer_matmul + head_matmul}


def encoder_flops_per_token(config: dict[str, Any], seq_len: int) -> float:
    """Training FLOPs per token: 6 x matmul weights + attention 12 L h s (forward 4 L h s: QK^T and PV)."""
    d = encoder_dims(config)
    n = d["L"] * (4 * d["h"] ** 2 + 2 * d["h"] * d["i"])
    return float(6 * n + 12 * d["L"] * d["h"] * seq_len)


def encoder_memory(
    config: dict[str, Any], head: str, batch: int, seq_len: int, num_labels: int = 2
) -> dict[str, float]:
    """Bytes at the peak of a full fine-tuning step with AdamW under fp16 autocast (see module docstring)."""
    d = encoder_dims(config)
    p = encoder_params(config, head, num_labels)
    tokens = batch * seq_len
    weights = 4.0 * p["total"]
    states = 4.0 * p["total"] + 8.0 * p["total"] + 2.0 * p["matmul"]
    activations = float(d["L"] * tokens * d["h"] * (34 + 4))
    out = {"weights": weights, "states": states, "activations": activations, "logits": 0.0}
    out["total"] = sum(out.values())
    return out


# --------------------------------------------------------------------------------------------- LoRA


@dataclasses.dataclass(frozen=True)
class LoraSetting:
    """How the LoRA base is held and trained (the fields gpu_lora.Setting and run_clm.py's arguments share)."""

    quantization: str  # int8 | nf4 | none
    checkpointing: bool
    optimizer: str  # adafactor | adamw
    kbit_prepare: bool  # non-quantized weights upcast to fp32
    double_quant: bool = False  # NF4 absmax quantized again (run_clm.py does; gpu_lora.py does not)


def bloom_dims(config: dict[str, Any]) -> dict[str, int]:
    return {
        "L": config["n_layer"],
        "h": config["hidden_size"],
        "a": config["n_head"],
        "V": config["vocab_size"],
    }


def bloom_memory(config: dict[str, Any], setting: LoraSetting, seq_len: int, lora_r: int) -> dict[str, float]:
    """Bytes at the peak of one LoRA step on BLOOM, batch 1 (see module docstring)."""
    d = bloom_dims(config)
    L, h, a, V = d["L"], d["h"], d["a"], d["V"]
    n_blocks = L * 12 * h * h  # query_key_value, dense, dense_h_to_4h, dense_4h_to_h
    small = L * (4 * h + 3 * h + h + 4 * h + h) + 2 * h + 2 * h  # layer norms and biases, final + emb norm
    emb = V * h  # tied with the output projection
    rest_bytes = 4 if setting.kbit_prepare else 2
    if setting.quantization == "int8":
        # Int8 weights + one fp32 scale per output row (SCB).
        base = n_blocks * 1.0 + L * 4 * (3 * h + h + 4 * h + h)
    elif setting.quantization == "nf4":
        absmax = n_blocks / 64 * (1 + 4 / 256) if setting.double_quant else n_blocks / 64 * 4
        base = n_blocks * 0.5 + absmax
    elif setting.quantization == "none":
        base = n_blocks * 2.0
    else:
        raise ValueError(f"quantization={setting.quantization!r}: expected int8, nf4 or none")
    weights = base + (emb + small) * rest_bytes
    n_lora = L * lora_r * (h + 3 * h)
    states = n_lora * (8.0 + (8.0 if setting.optimizer == "adamw" else 0.0))
    per_layer = seq_len * (43 * h + 6 * a * seq_len)  # bytes one block keeps for its backward
    # Checkpointing: each block's input (fp32) plus one block recomputed, its activations and their gradients.
    ckpt = L * seq_len * 4 * h + 2.0 * per_layer
    activations = ckpt if setting.checkpointing else float(L * per_layer)
    logits = 12.0 * seq_len * V
    out = {"weights": weights, "states": states, "activations": activations, "logits": logits}
    out["total"] = sum(out.values())
    return out


def recipe_lora_setting(hyperparameters: dict[str, Any]) -> LoraSetting:
    """The LoraSetting run_clm.py trains with these recipe hyperparameters (its defaults where unset)."""
    quant = str(hyperparameters.get("quantization", "int8"))
    optim = str(hyperparameters.get("optim", "adamw_torch"))
    return LoraSetting(
        quantization=quant,
        checkpointing=_truthy(hyperparameters.get("gradient_checkpointing", False)),
        optimizer="adafactor" if optim == "adafactor" else "adamw",
        kbit_prepare=quant != "none",
        double_quant=quant == "nf4",
    )


def _truthy(value: Any) -> bool:
    return value is True or str(value).lower() in ("true", "1", "yes")
