"""The `vllm` serving kind's server settings and whether they fit the endpoint's GPUs (stdlib only).

The SageMaker vLLM image turns each `SM_VLLM_*` environment variable into the vLLM flag of the same name
(https://aws.github.io/deep-learning-containers/vllm/configuration/): the Plan writes them from the
recipe's `serving.server` settings, with tensor parallelism over every GPU of the endpoint's instance.

Fit, on paper (docs/lora.md, "Serving on vLLM" works the bloomz-7b1 numbers through): vLLM takes
`gpu_memory_utilization` of each GPU for the weights, the activations of its profiling pass and the KV
cache (vLLM engine arguments; default 0.90). The Plan refuses a setting whose weights and activations
leave less KV cache than one sequence of `max_model_len` tokens needs, and says the longest that fits.

- GPU count and memory per instance type: the SageMaker Python SDK's `image_uri_config/instance_gpu_info.json`
  (TotalGpuMemoryInMiB over Count), shipped to the Plan in the image catalog (stacks/image_catalog.py).
- A program sees less than the nominal memory (ECC, the driver's reserve): an A10G's 24,576 MiB shows as
  23,028 MiB in `nvidia-smi`, the ratio `USABLE_SHARE` applied to every GPU here.
- Model figures (parameters, layers, KV heads x head size) from the model's `config.json` on the Hugging
  Face Hub, in `KNOWN_MODELS`, or from the recipe's `serving.server.model` when the model is not listed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hfpipe.core.schema import RecipeError

#: The image catalog's entry with {instance type: [GPU count, MiB per GPU]}.
GPUS_KEY = "gpus"
#: 23,028 MiB of an A10G's 24,576 MiB reach programs (nvidia-smi on ml.g5 instances).
USABLE_SHARE = 23_028 / 24_576
#: Activations of vLLM's profiling pass and CUDA graphs, per GPU: an estimate (vLLM measures it at start);
#: about 1.5 GiB for a 2,048-token prefill of a 4,096-wide model (docs/lora.md).
ACTIVATION_RESERVE_MIB = 1_536
DTYPE_BYTES = {"float16": 2, "bfloat16": 2, "float32": 4}
DEFAULT_SERVER = {"dtype": "bfloat16", "gpu_memory_utilization": 0.9, "max_model_len": 2048}


@dataclass(frozen=True)
class ModelFigures:
    """What the memory of serving a decoder needs: its parameters and the size of one token's KV cache."""

    parameters: int
    layers: int
    kv_heads: int
    head_dim: int
    source: str = ""

    def kv_bytes_per_token(self, dtype_bytes: int) -> int:
        """K and V of every layer for one token."""
        return 2 * self.layers * self.kv_heads * self.head_dim * dtype_bytes


KNOWN_MODELS: dict[str, ModelFigures] = {
    # n_layer 30, hidden_size 4096, n_head 32 (head size 128, no grouped-query attention: 32 KV heads)
    "bigscience/bloomz-7b1": ModelFigures(
        7_069_016_064, 30, 32, 128, "https://huggingface.co/bigscience/bloomz-7b1/blob/main/config.json"
    ),
}


def server_settings(recipe: Mapping[str, Any]) -> dict[str, Any]:
    """The recipe's serving.server over the defaults."""
    return {**DEFAULT_SERVER, **(recipe["serving"].get("server") or {})}


def model_figures(recipe: Mapping[str, Any]) -> ModelFigures | None:
    """The figures of the model a recipe serves: its own serving.server.model, else KNOWN_MODELS by the
    model the training starts from; None when neither knows it (a tiny local model, a user's own)."""
    stated = (recipe["serving"].get("server") or {}).get("model")
    if stated:
        return ModelFigures(**{k: stated[k] for k in ("parameters", "layers", "kv_heads", "head_dim")})
    name = recipe["training"]["hyperparameters"].get("model_name_or_path")
    return KNOWN_MODELS.get(name) if isinstance(name, str) else None


def gpus_of(catalog: Mapping[str, Any], instance_type: str) -> tuple[int, int]:
    """(GPU count, MiB per GPU) of an instance type; RecipeError when it has no GPU in the SDK's table."""
    info = (catalog.get(GPUS_KEY) or {}).get(instance_type)
    if not info:
        known = sorted(catalog.get(GPUS_KEY) or {})
        raise RecipeError(
            f"recipe.serving.instance_type: {instance_type!r} has no GPU in the SageMaker SDK's "
            f"instance_gpu_info table for this region; the vllm serving kind needs one of {known}"
        )
    count, memory_mib = info
    return int(count), int(memory_mib)


@dataclass(frozen=True)
class Fit:
    """The memory arithmetic of one setting, per GPU, in MiB."""

    gpus: int
    share_mib: float
    weights_mib: float
    kv_mib_per_token: float
    kv_cache_mib: float
    max_tokens: int

    def concurrent_sequences(self, max_model_len: int) -> float:
        return self.max_tokens / max_model_len


def fit(figures: ModelFigures, settings: Mapping[str, Any], gpus: int, memory_mib: int) -> Fit:
    """What vLLM has per GPU for a model sharded over `gpus` (tensor parallel: weights and KV heads split)."""
    dtype_bytes = DTYPE_BYTES[settings["dtype"]]
    share = settings["gpu_memory_utilization"] * memory_mib * USABLE_SHARE
    weights = figures.parameters * dtype_bytes / gpus / 2**20
    kv_per_token = figures.kv_bytes_per_token(dtype_bytes) / gpus / 2**20
    cache = share - weights - ACTIVATION_RESERVE_MIB
    return Fit(gpus, share, weights, kv_per_token, cache, max(0, int(cache / kv_per_token)))


def vllm_environment(recipe: Mapping[str, Any], catalog: Mapping[str, Any]) -> dict[str, str]:
    """The SM_VLLM_* variables of a recipe served by the vllm kind; RecipeError naming the field when the
    setting cannot fit the instance's GPUs or the model is not merged."""
    s = recipe["serving"]
    hp = recipe["training"]["hyperparameters"]
    if "lora_r" in hp and not hp.get("merge_adapter", False):
        raise RecipeError(
            "recipe.serving.kind: vllm serves the merged model from /opt/ml/model; set "
            "training.hyperparameters.merge_adapter to true, or serve with kind hf-inference"
        )
    settings = server_settings(recipe)
    gpus, memory_mib = gpus_of(catalog, s["instance_type"])
    figures = model_figures(recipe)
    if figures is not None:
        f = fit(figures, settings, gpus, memory_mib)
        if f.kv_cache_mib <= 0:
            raise RecipeError(
                f"recipe.serving.instance_type: {s['instance_type']} ({gpus} x {memory_mib} MiB) cannot hold "
                f"the model's weights ({f.weights_mib:,.0f} MiB per GPU in {settings['dtype']}) and vLLM's "
                f"activations within gpu_memory_utilization {settings['gpu_memory_utilization']} "
                f"({f.share_mib:,.0f} MiB); accepted: an instance with more GPU memory"
            )
        if f.max_tokens < settings["max_model_len"]:
            raise RecipeError(
                f"recipe.serving.server.max_model_len: {settings['max_model_len']} tokens do not fit the KV "
                f"cache left on {s['instance_type']} ({f.kv_cache_mib:,.0f} MiB per GPU at "
                f"{f.kv_mib_per_token * 1024:,.0f} KiB per token); accepted: at most {f.max_tokens}"
            )
    return server_environment(recipe, gpus)


def server_environment(recipe: Mapping[str, Any], gpus: int) -> dict[str, str]:
    """The SM_VLLM_* variables of a recipe's serving.server settings, tensor parallel over `gpus`."""
    settings = server_settings(recipe)
    return {
        "SM_VLLM_TENSOR_PARALLEL_SIZE": str(gpus),
        "SM_VLLM_MAX_MODEL_LEN": str(settings["max_model_len"]),
        "SM_VLLM_DTYPE": str(settings["dtype"]),
        "SM_VLLM_GPU_MEMORY_UTILIZATION": str(settings["gpu_memory_utilization"]),
        # The name clients put in "model" (vLLM's --served-model-name): the recipe's name.
        "SM_VLLM_SERVED_MODEL_NAME": str(recipe["name"]),
    }
