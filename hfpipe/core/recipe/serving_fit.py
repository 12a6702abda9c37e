"""Each serving kind's fit rule (`FIT_RULES`, named by the kind's `fit_rule`): whether the model runs on, and
fits, the endpoint's instance, and the environment the kind's server settings add (stdlib only).

`hf-inference` ("weights-in-gpu-memory"): the inference handlers load the whole model on the instance's GPUs
in 16-bit (bfloat16, else float16; `device_map="auto"` spreads it over every GPU; training_code/inference_clm.py
`model_fn`). For a model whose figures are known (`KNOWN_MODELS`) on a GPU instance of the SDK's table, the
Plan refuses an instance whose GPUs, at `USABLE_SHARE`, cannot hold those weights and
`ACTIVATION_RESERVE_MIB` per GPU. A model it does not know, and a CPU instance (no memory table for them
here), are not checked: the handler serves any model and the endpoint's own start is the test.

`vllm` ("vllm-kv-cache"): the server settings and whether they run on, and fit, the endpoint's GPUs. The
SageMaker vLLM image turns each `SM_VLLM_*` environment variable into the vLLM flag of the same name
(https://aws.github.io/deep-learning-containers/vllm/configuration/): the Plan writes them from the recipe's
`serving.server` settings, with tensor parallelism over every GPU of the endpoint's instance, and the recipe's
`serving.environment` over them. The check is of what the container gets, each error naming the field that
set the value, against the rules vLLM applies when it starts (dtype, parallelism, the KV cache's memory):
each rule, its source in vLLM and an example refusal, and where the GPU and model figures come from
(`instance_gpu_info.json` of the SageMaker Python SDK, hfpipe/core/accelerators.py, `KNOWN_MODELS`), are in
docs/lora.md ("Serving on vLLM"), which works the bloomz-7b1 numbers through.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from hfpipe import kinds
from hfpipe.core import accelerators
from hfpipe.core.recipe.schema import RecipeError
from hfpipe.core.recipe.typed import Recipe

#: The image catalog's entry with {instance type: [GPU count, MiB per GPU]}.
GPUS_KEY = "gpus"
#: 23,028 MiB of an A10G's 24,576 MiB reach programs (nvidia-smi on ml.g5 instances).
USABLE_SHARE = 23_028 / 24_576
#: Activations of vLLM's profiling pass and CUDA graphs, per GPU: an estimate (vLLM measures it at start);
#: about 1.5 GiB for a 2,048-token prefill of a 4,096-wide model (docs/lora.md).
ACTIVATION_RESERVE_MIB = 1_536
DTYPE_BYTES = {"float16": 2, "bfloat16": 2, "float32": 4}
DEFAULT_SERVER = {"dtype": "bfloat16", "gpu_memory_utilization": 0.9, "max_model_len": 2048}
#: vLLM's --dtype values and the type each means ("half" is float16, "float" float32); "auto" (the model's
#: own) is not taken: the check needs the type.
DTYPE_ALIASES = {
    "float16": "float16",
    "half": "float16",
    "bfloat16": "bfloat16",
    "float32": "float32",
    "float": "float32",
}
ENV_PREFIX = "SM_VLLM_"


@dataclass(frozen=True)
class ModelFigures:
    """What the memory of serving a decoder needs: its parameters and the size of one token's KV cache."""

    parameters: int
    layers: int
    kv_heads: int
    head_dim: int
    source: str = ""
    #: Query heads, where known (tensor parallel must divide them); else only the KV heads are checked.
    attention_heads: int | None = None

    def kv_bytes_per_token(self, dtype_bytes: int, tensor_parallel: int = 1) -> int:
        """K and V of every layer for one token on one of `tensor_parallel` GPUs (vLLM's get_num_kv_heads:
        the KV heads split, at least one per GPU)."""
        return 2 * self.layers * max(1, self.kv_heads // tensor_parallel) * self.head_dim * dtype_bytes


KNOWN_MODELS: dict[str, ModelFigures] = {
    # n_layer 30, hidden_size 4096, n_head 32 (head size 128, no grouped-query attention: 32 KV heads)
    "bigscience/bloomz-7b1": ModelFigures(
        7_069_016_064,
        30,
        32,
        128,
        "https://huggingface.co/bigscience/bloomz-7b1/blob/main/config.json",
        attention_heads=32,
    ),
    # The tiny random-weight Llama local mode builds (hfpipe.kinds TINY_MODELS "llama", its config.json as
    # hfpipe.fixtures writes it): a local world's shared base (docs/adapters.md); 2 layers, hidden 64, 4 heads
    # of 16, 2 KV heads, a 400-token vocabulary (tests/core/test_adapters.py builds it and counts).
    "hfpipe-fixtures/tiny-llama": ModelFigures(
        125_248, 2, 2, 16, "hfpipe/kinds/tasks.py (TINY_MODELS, llama)", attention_heads=4
    ),
}


def _positive_int(text: str) -> int:
    if not text.strip().isdigit() or int(text) < 1:
        raise ValueError("a positive whole number")
    return int(text)


def _share(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0 < value <= 1:
        raise ValueError("a number over 0 and at most 1")
    return value


def _dtype(text: str) -> str:
    if text not in DTYPE_ALIASES:
        raise ValueError(
            f"one of {sorted(DTYPE_ALIASES)} (the fit check needs the type; 'auto' is not taken)"
        )
    return DTYPE_ALIASES[text]


#: The settings an SM_VLLM_* variable of serving.environment overrides, and how its value is read.
ENV_SETTINGS: dict[str, Callable[[str], Any]] = {
    "max_model_len": _positive_int,
    "tensor_parallel_size": _positive_int,
    "pipeline_parallel_size": _positive_int,
    "dtype": _dtype,
    "gpu_memory_utilization": _share,
}


def settings_and_fields(recipe: Recipe) -> tuple[dict[str, Any], dict[str, str]]:
    """The settings the container gets and, for each, the recipe field that set it: serving.server over the
    defaults, then the SM_VLLM_* values of serving.environment (the Plan writes them last, so they win).
    tensor_parallel_size is there only when the environment sets it (else every GPU)."""
    server = {k: v for k, v in (recipe["serving"].get("server") or {}).items() if k != "model"}
    settings = {**DEFAULT_SERVER, **server}
    fields = {k: f"recipe.serving.server.{k}" for k in settings}
    environment = recipe["serving"].get("environment") or {}
    for name, parse in ENV_SETTINGS.items():
        variable = ENV_PREFIX + name.upper()
        if variable not in environment:
            continue
        field_name = f"recipe.serving.environment.{variable}"
        try:
            settings[name] = parse(str(environment[variable]))
        except ValueError as err:
            raise RecipeError(
                f"{field_name}: {environment[variable]!r} is not accepted; accepted: {err}"
            ) from None
        fields[name] = field_name
    return settings, fields


def server_settings(recipe: Recipe) -> dict[str, Any]:
    """The settings the container gets (see `settings_and_fields`)."""
    return settings_and_fields(recipe)[0]


def model_figures(recipe: Mapping[str, Any]) -> ModelFigures | None:
    """The figures of the model a recipe serves: its own serving.server.model, else KNOWN_MODELS by the
    model the training starts from; None when neither knows it (a tiny local model, a user's own). A raw
    recipe too (not yet validated: local mode's substitution, hfpipe.local.training.substitute), so untyped."""
    stated = (recipe["serving"].get("server") or {}).get("model")
    if stated:
        return ModelFigures(**{k: stated[k] for k in ("parameters", "layers", "kv_heads", "head_dim")})
    name = recipe["training"]["hyperparameters"].get("model_name_or_path")
    return KNOWN_MODELS.get(name) if isinstance(name, str) else None


def gpus_of(
    catalog: Mapping[str, Any],
    instance_type: str,
    region: str = "",
    field_name: str = "recipe.serving.instance_type",
) -> tuple[int, int]:
    """(GPU count, MiB per GPU) of an instance type: the SDK's table for the region (in the catalog), else
    the types hfpipe/core/accelerators.py adds; RecipeError naming ``field_name``, the type, what it is and
    the region."""
    table = catalog.get(GPUS_KEY) or {}
    info = table.get(instance_type) or accelerators.GPUS_NOT_IN_SDK.get(instance_type)
    if info:
        count, memory_mib = info
        return int(count), int(memory_mib)
    where = f"region {region!r}" if region else "this region"
    if accelerators.processor(instance_type) != "gpu":
        what = f"is {accelerators.kind_of(instance_type)} instance, not a GPU one"
    elif not table:
        what = f"has no GPU figures for {where}: the SageMaker SDK's instance_gpu_info table lists none there"
    else:
        what = f"has no GPU in the SageMaker SDK's instance_gpu_info table for {where}"
    raise RecipeError(
        f"{field_name}: {instance_type!r} {what}; the vllm serving kind (a CUDA image) needs "
        f"an NVIDIA GPU instance, one of {sorted({*table, *accelerators.GPUS_NOT_IN_SDK})}"
    )


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


def fit(
    figures: ModelFigures,
    settings: Mapping[str, Any],
    gpus: int,
    memory_mib: int,
    pipeline_parallel: int = 1,
) -> Fit:
    """What vLLM has per GPU for a model over `gpus` tensor-parallel workers (weights and KV heads split)
    times `pipeline_parallel` stages (layers split)."""
    dtype_bytes = DTYPE_BYTES[settings["dtype"]]
    share = settings["gpu_memory_utilization"] * memory_mib * USABLE_SHARE
    weights = figures.parameters * dtype_bytes / (gpus * pipeline_parallel) / 2**20
    kv_per_token = figures.kv_bytes_per_token(dtype_bytes, gpus) / pipeline_parallel / 2**20
    cache = share - weights - ACTIVATION_RESERVE_MIB
    return Fit(gpus, share, weights, kv_per_token, cache, max(0, int(cache / kv_per_token)))


def check_dtype(instance_type: str, dtype: str, field_name: str) -> None:
    """vLLM's dtype rule on the instance's GPU: bfloat16 needs compute capability 8.0 or more (vLLM's platform
    dtype check: "Bfloat16 is only supported on GPUs with compute capability of at least 8.0"; a T4 has 7.5,
    a V100 7.0), and the image is a CUDA build (no AMD GPU)."""
    gpu = accelerators.gpu_of(instance_type)
    if gpu is None:
        return  # a family the table does not name: the SDK's table says it has GPUs, nothing more
    if gpu.compute_capability is None:
        raise RecipeError(
            f"recipe.serving.instance_type: {instance_type} has {gpu.name} GPUs, which the vllm serving "
            "kind's CUDA image cannot use; accepted: an NVIDIA GPU instance"
        )
    if dtype == "bfloat16" and not gpu.supports_bfloat16():
        major, minor = gpu.compute_capability
        raise RecipeError(
            f"{field_name}: bfloat16 needs a GPU of compute capability 8.0 or more; {instance_type}'s "
            f"{gpu.name} has {major}.{minor}; accepted: float16 there, or an instance type of compute "
            "capability 8.0 or more (ml.g5, ml.g6, ml.g6e, ml.p4d, ml.p5, ...)"
        )


def check_parallel(
    instance_type: str,
    gpus: int,
    settings: Mapping[str, Any],
    fields: Mapping[str, str],
    figures: ModelFigures,
) -> int:
    """The tensor parallel size (every GPU unless set): tensor x pipeline parallel within the instance's
    GPUs (a GPU per worker), and dividing the model's attention heads and its KV heads, or a multiple of the
    KV heads when it exceeds them, as vLLM requires (`verify_with_parallel_config`; KV heads replicated,
    QKVParallelLinear)."""
    tensor_parallel = int(settings.get("tensor_parallel_size", gpus))
    stages = int(settings.get("pipeline_parallel_size", 1))
    set_by = fields.get("tensor_parallel_size") or fields.get("pipeline_parallel_size")
    where = set_by or "recipe.serving.instance_type"
    if tensor_parallel * stages > gpus:
        raise RecipeError(
            f"{where}: tensor parallel {tensor_parallel} x pipeline parallel {stages} workers need as many "
            f"GPUs; {instance_type} has {gpus}; accepted: tensor x pipeline parallel of at most {gpus}"
        )
    for what, count in (("attention heads", figures.attention_heads), ("KV heads", figures.kv_heads)):
        replicated = what == "KV heads" and tensor_parallel > figures.kv_heads
        if count and (tensor_parallel % count if replicated else count % tensor_parallel):
            fitting = [d for d in range(1, gpus + 1) if (figures.attention_heads or d) % d == 0]
            fitting = [d for d in fitting if figures.kv_heads % d == 0 or d % figures.kv_heads == 0]
            raise RecipeError(
                f"{where}: tensor parallel size {tensor_parallel} and the model's {count} {what} do not "
                f"divide (vLLM refuses it); accepted: a tensor parallel size among {fitting}"
            )
    return tensor_parallel


def vllm_environment(recipe: Recipe, catalog: Mapping[str, Any], region: str = "") -> dict[str, str]:
    """The SM_VLLM_* variables of a recipe served by the vllm kind; RecipeError naming the field when the
    settings the container gets (every override applied) cannot run on the instance's GPUs or fit them, or
    the model's figures are unknown."""
    s = recipe["serving"]
    hp = recipe["training"]["hyperparameters"]
    settings, fields = settings_and_fields(recipe)
    itype = s["instance_type"]
    gpus, memory_mib = gpus_of(catalog, itype, region)
    check_dtype(itype, settings["dtype"], fields["dtype"])
    figures = model_figures(recipe)
    if figures is None:
        raise RecipeError(
            f"recipe.serving.server.model: the fit check does not know the model "
            f"{hp.get('model_name_or_path', 'of the model channel')}; accepted: its figures from its config.json (parameters, "
            f"layers, kv_heads, head_dim), so that the Plan can check it fits {itype}"
        )
    tensor_parallel = check_parallel(itype, gpus, settings, fields, figures)
    stages = int(settings.get("pipeline_parallel_size", 1))
    f = fit(figures, settings, tensor_parallel, memory_mib, stages)
    if f.kv_cache_mib <= 0:
        raise RecipeError(
            f"recipe.serving.instance_type: {itype} ({gpus} x {memory_mib} MiB) cannot hold the model's "
            f"weights ({f.weights_mib:,.0f} MiB per GPU in {settings['dtype']}, {tensor_parallel * stages} "
            f"GPU(s) used) and vLLM's activations within gpu_memory_utilization {settings['gpu_memory_utilization']} "
            f"({f.share_mib:,.0f} MiB); accepted: an instance with more GPU memory"
        )
    if f.max_tokens < settings["max_model_len"]:
        raise RecipeError(
            f"{fields['max_model_len']}: {settings['max_model_len']} tokens do not fit the KV cache left on "
            f"{itype} ({f.kv_cache_mib:,.0f} MiB per GPU at {f.kv_mib_per_token * 1024:,.0f} KiB per token); "
            f"accepted: at most {f.max_tokens}"
        )
    return server_environment(recipe, tensor_parallel)


def server_environment(recipe: Recipe, gpus: int) -> dict[str, str]:
    """The SM_VLLM_* variables of a recipe's serving settings, tensor parallel over `gpus` unless its
    environment sets it."""
    settings = server_settings(recipe)
    return {
        "SM_VLLM_TENSOR_PARALLEL_SIZE": str(settings.get("tensor_parallel_size", gpus)),
        "SM_VLLM_MAX_MODEL_LEN": str(settings["max_model_len"]),
        "SM_VLLM_DTYPE": str(settings["dtype"]),
        "SM_VLLM_GPU_MEMORY_UTILIZATION": str(settings["gpu_memory_utilization"]),
        # The name clients put in "model" (vLLM's --served-model-name): the recipe's name.
        "SM_VLLM_SERVED_MODEL_NAME": str(recipe["name"]),
    }


def weights_environment(recipe: Recipe, catalog: Mapping[str, Any], region: str = "") -> dict[str, str]:
    """The "weights-in-gpu-memory" rule (module docstring): RecipeError naming recipe.serving.instance_type
    when a known model's 16-bit weights and the activation reserve exceed the instance's usable GPU memory;
    no environment of its own."""
    name = recipe["training"]["hyperparameters"].get("model_name_or_path")
    figures = KNOWN_MODELS.get(name) if isinstance(name, str) else None
    itype = recipe["serving"]["instance_type"]
    info = (catalog.get(GPUS_KEY) or {}).get(itype) or accelerators.GPUS_NOT_IN_SDK.get(itype)
    if figures is None or not info:
        return {}
    gpus, memory_mib = int(info[0]), int(info[1])
    weights_mib = figures.parameters * DTYPE_BYTES["bfloat16"] / 2**20
    usable_mib = gpus * (memory_mib * USABLE_SHARE - ACTIVATION_RESERVE_MIB)
    if weights_mib > usable_mib:
        raise RecipeError(
            f"recipe.serving.instance_type: {itype} ({gpus} x {memory_mib:,} MiB) cannot hold {name}'s "
            f"weights in 16-bit ({weights_mib:,.0f} MiB) and {ACTIVATION_RESERVE_MIB:,} MiB of activations "
            f"per GPU ({usable_mib:,.0f} MiB usable); accepted: an instance with more GPU memory"
        )
    return {}


@dataclass(frozen=True)
class FitRule:
    """A serving kind's fit rule: the Plan's check and environment, and the environment `hfpipe local
    --serve` gives the server on this one machine (no instance to fit)."""

    plan_environment: Callable[[Recipe, Mapping[str, Any], str], dict[str, str]]
    local_environment: Callable[[Recipe], dict[str, str]]


#: Every fit rule, by the key a serving kind names in `fit_rule` (hfpipe/kinds/serving.py).
FIT_RULES: dict[str, FitRule] = {
    "weights-in-gpu-memory": FitRule(weights_environment, lambda recipe: {}),
    "vllm-kv-cache": FitRule(vllm_environment, lambda recipe: server_environment(recipe, gpus=1)),
}


def check_packaging(recipe: Recipe) -> None:
    """RecipeError when the serving kind serves a merged model only and a LoRA recipe does not merge its
    adapter (`ServingKind.needs_merged_model`)."""
    kind = kinds.serving_kind_of(recipe)
    hp = recipe["training"]["hyperparameters"]
    if kind.needs_merged_model and "lora_r" in hp and not hp.get("merge_adapter", False):
        others = [k.name for k in kinds.SERVING_KINDS.values() if not k.needs_merged_model]
        raise RecipeError(
            f"recipe.serving.kind: {kind.name} serves the merged model from /opt/ml/model; set "
            f"training.hyperparameters.merge_adapter to true, or serve with kind {' or '.join(others)}"
        )


def kind_environment(recipe: Recipe, catalog: Mapping[str, Any], region: str = "") -> dict[str, str]:
    """What the Plan checks of a deployed recipe's serving kind (packaging, then its fit rule) and the
    environment the kind's settings add under the recipe's serving.environment."""
    check_packaging(recipe)
    rule = FIT_RULES[kinds.serving_kind_of(recipe).fit_rule]
    return rule.plan_environment(recipe, catalog, region)


def local_environment(recipe: Recipe) -> dict[str, str]:
    """The environment the serving kind's settings add when `hfpipe local --serve` serves the model."""
    return FIT_RULES[kinds.serving_kind_of(recipe).fit_rule].local_environment(recipe)
