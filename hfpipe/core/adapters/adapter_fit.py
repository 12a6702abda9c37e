"""Whether a shared base (hfpipe.core.adapters.shared_base) fits its instance with the adapters it may hold: the base's
weights, vLLM's LoRA slots and the KV cache, per GPU, on paper (stdlib only).

It is the vllm serving kind's arithmetic (hfpipe.core.recipe.serving_fit: the GPU share vLLM takes, the weights, the
activation reserve, the KV cache per token; docs/lora.md works the numbers through) with vLLM's LoRA slots
taken out of the cache. With ``--enable-lora`` vLLM preallocates, for every linear layer it wraps, ``max_loras``
slots of ``max_lora_rank`` (``lora_a``: rank x input size, ``lora_b``: output size x rank, in the model's
dtype), whether or not an adapter is loaded (vllm/lora/layers, ``create_lora_weights``). One slot therefore
holds ``max_lora_rank x lora_width x layers`` values, where ``lora_width`` is the sum of the input and output
sizes of one layer's linear modules. The figure is an upper bound: it counts each slot whole on every GPU
(vLLM splits some of them over tensor-parallel GPUs) and leaves out LoRA on the embeddings and the LM head.

A base model must also be one vLLM serves LoRA on: vLLM refuses ``--enable-lora`` at start for a model class
that does not implement ``SupportsLoRA`` ("<class> does not support LoRA yet", ``load_lora_model``).
``LORA_FIGURES`` records that and ``lora_width`` for the models ``serving_fit.KNOWN_MODELS`` knows.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hfpipe.core.adapters.shared_base import SharedBase
from hfpipe.core.recipe import serving_fit
from hfpipe.core.recipe.schema import RecipeError

#: Model classes (config.json's ``architectures``) vLLM serves no LoRA on: their vLLM classes do not implement
#: ``SupportsLoRA`` (BloomForCausalLM: vllm/model_executor/models/bloom.py). The local stand-in refuses
#: adapters over them as vLLM does.
ARCHITECTURES_WITHOUT_LORA = frozenset({"BloomForCausalLM"})


@dataclass(frozen=True)
class LoraFigures:
    """What a base model's LoRA slots take, and its model class (config.json's ``architectures``)."""

    #: The sum of the input and output sizes of one layer's linear modules.
    lora_width: int
    architecture: str
    source: str = ""

    @property
    def vllm_serves_lora(self) -> bool:
        return self.architecture not in ARCHITECTURES_WITHOUT_LORA


LORA_FIGURES: dict[str, LoraFigures] = {
    # Per layer (hidden 4096): query_key_value 4096 -> 12288, dense 4096 -> 4096, dense_h_to_4h 4096 -> 16384,
    # dense_4h_to_h 16384 -> 4096: 16384 + 8192 + 20480 + 20480. vLLM's BloomForCausalLM implements SupportsPP
    # and SupportsQuant, not SupportsLoRA (vllm/model_executor/models/bloom.py), and vLLM's supported-models
    # table leaves BLOOM's LoRA column empty.
    "bigscience/bloomz-7b1": LoraFigures(
        65_536,
        architecture="BloomForCausalLM",
        source="https://github.com/vllm-project/vllm/blob/main/vllm/model_executor/models/bloom.py",
    ),
    # Per layer (hidden 64, 2 KV heads of 16, MLP 128): q 64 -> 64, k and v 64 -> 32, o 64 -> 64, gate and up
    # 64 -> 128, down 128 -> 64: 128 + 96 + 96 + 128 + 192 + 192 + 192.
    "hfpipe-fixtures/tiny-llama": LoraFigures(
        1_024, architecture="LlamaForCausalLM", source="hfpipe/kinds/tasks.py (TINY_MODELS, llama)"
    ),
}


@dataclass(frozen=True)
class AdapterFit:
    """The memory arithmetic of a shared base with its adapters, per GPU, in MiB."""

    base: serving_fit.Fit
    lora_slot_mib: float
    lora_mib: float
    kv_cache_mib: float
    max_tokens: int

    def adapters_that_fit(self, max_model_len: int) -> int:
        """The most LoRA slots that leave a KV cache of one ``max_model_len`` sequence."""
        room = self.base.kv_cache_mib - max_model_len * self.base.kv_mib_per_token
        return max(0, int(room / self.lora_slot_mib))


def figures_of(base: SharedBase, path: str) -> tuple[serving_fit.ModelFigures, int]:
    """The base model's figures and ``lora_width``: cdk.json's ``model``, else the fit check's tables;
    RecipeError naming ``path`` when neither knows it or vLLM serves no LoRA on it."""
    stated = base.stated_figures()
    if stated:
        figures = serving_fit.ModelFigures(
            stated["parameters"], stated["layers"], stated["kv_heads"], stated["head_dim"]
        )
        return figures, stated["lora_width"]
    known, lora = serving_fit.KNOWN_MODELS.get(base.base_model), LORA_FIGURES.get(base.base_model)
    if known is None or lora is None:
        raise RecipeError(
            f"{path}.model: the fit check does not know the model {base.base_model}; accepted: its figures "
            "from its config.json (parameters, layers, kv_heads, head_dim, lora_width)"
        )
    if not lora.vllm_serves_lora:
        raise RecipeError(
            f"{path}.base_model: {base.base_model!r} cannot be a shared base: vLLM serves no LoRA adapters on "
            f"its architecture and refuses --enable-lora for it at start ({lora.source}); accepted: a base "
            "model whose architecture vLLM serves LoRA on, with its figures (model)"
        )
    return known, lora.lora_width


def adapter_fit(
    base: SharedBase, figures: serving_fit.ModelFigures, lora_width: int, gpus: int, memory_mib: int
) -> AdapterFit:
    """What each of ``gpus`` GPUs of ``memory_mib`` has left for the KV cache once vLLM holds the base's
    weights (tensor parallel over every GPU), its activations and ``max_adapters`` LoRA slots."""
    settings: dict[str, Any] = {**serving_fit.DEFAULT_SERVER, "max_model_len": base.max_model_len}
    fit = serving_fit.fit(figures, settings, gpus, memory_mib)
    dtype_bytes = serving_fit.DTYPE_BYTES[str(settings["dtype"])]
    slot_mib = base.max_lora_rank * lora_width * figures.layers * dtype_bytes / 2**20
    lora_mib = base.max_adapters * slot_mib
    cache = fit.kv_cache_mib - lora_mib
    return AdapterFit(fit, slot_mib, lora_mib, cache, max(0, int(cache / fit.kv_mib_per_token)))


def check_shared_base(base: SharedBase, catalog: Mapping[str, Any], region: str, path: str) -> AdapterFit:
    """RecipeError naming the field of ``path`` when the base cannot run on, or fit, its instance's GPUs with
    ``max_adapters`` LoRA slots and one ``max_model_len`` sequence of KV cache; else the fit."""
    figures, width = figures_of(base, path)
    gpus, memory_mib = serving_fit.gpus_of(catalog, base.instance_type, region, f"{path}.instance_type")
    serving_fit.check_dtype(
        base.instance_type, str(serving_fit.DEFAULT_SERVER["dtype"]), f"{path}.instance_type"
    )
    fit = adapter_fit(base, figures, width, gpus, memory_mib)
    if fit.base.kv_cache_mib <= 0:
        raise RecipeError(
            f"{path}.instance_type: {base.instance_type} ({gpus} x {memory_mib:,} MiB) cannot hold "
            f"{base.base_model}'s weights ({fit.base.weights_mib:,.0f} MiB per GPU) and vLLM's activations "
            f"within its {fit.base.share_mib:,.0f} MiB share; accepted: an instance with more GPU memory"
        )
    if fit.max_tokens < base.max_model_len:
        most = fit.adapters_that_fit(base.max_model_len)
        raise RecipeError(
            f"{path}.max_adapters: {base.max_adapters} LoRA slots of rank {base.max_lora_rank} "
            f"({fit.lora_mib:,.0f} MiB, {fit.lora_slot_mib:,.1f} MiB each) leave {max(0.0, fit.kv_cache_mib):,.0f} "
            f"MiB of KV cache on {base.instance_type}, less than one sequence of max_model_len "
            f"{base.max_model_len} needs; accepted: at most {most} adapters at this rank and length"
        )
    return fit
