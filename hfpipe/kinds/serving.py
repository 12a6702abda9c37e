"""Serving kinds: how a trained model is served (stdlib only; nothing of hfpipe imported).

A serving kind says where its image comes from (the image catalog's scope and key, resolved from the
SageMaker Python SDK's tables at synth time by stacks/image_catalog.py), how the model is packaged for it,
the model environment it starts with, its request contract (its own, or the task handler's `parse_request`),
and which class emulates it in local mode (named by string: this package imports nothing of hfpipe.local).
A recipe picks one with `serving.kind`; its task kind lists the serving kinds it supports.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from hfpipe.kinds import openai_contract

#: What a recipe without `serving.kind` is served by (every recipe before serving kinds existed).
DEFAULT_SERVING_KIND = "hf-inference"
#: The image table of images the SageMaker SDK's tables do not list: stacks/dlc_images.json, in the SDK's
#: Deep Learning Containers accounts (stacks/image_catalog.py). Any other `image_table` is one of the SDK's.
PINNED_TABLE = "aws-dlc"
#: `ServingKind.serves` of a kind that serves every task kind (through the task's own handler).
ANY_TASK = "*"
#: `image_uris.retrieve("huggingface", ...)`'s arguments from a Hugging Face DLC's versions (the training
#: DLC's and the inference DLC's alike).
HF_IMAGE_ARGUMENTS = {
    "version": "{transformers_version}",
    "py_version": "{py_version}",
    "base_framework_version": "pytorch{pytorch_version}",
}


class KindError(ValueError):
    """An unknown task or serving kind, or a pair that does not go together; the message names them and
    what is accepted. hfpipe.core turns it into a RecipeError naming the recipe field."""


@dataclass(frozen=True)
class ServingKind:
    """One way of serving a model: image, packaging, environment, request contract, local emulation."""

    name: str
    description: str
    #: The image catalog scope the Plan resolves the model's image in (catalog[scope][key][processor]).
    image_scope: str
    #: The SageMaker SDK table (sagemaker/image_uri_config/<table>.json) and its scope the catalog is
    #: built from at synth time.
    image_table: str
    image_table_scope: str
    #: recipe.container.inference fields whose values, joined by "/", key the catalog scope.
    image_key_fields: tuple[str, ...]
    #: Model container environment before the recipe's serving.environment (which wins).
    environment: Mapping[str, str] = field(default_factory=dict)
    #: The training_code/ module whose `parse_request` checks a request; "{handler}" is the task kind's
    #: handler module; None: the kind's own `request_contract` checks it.
    request_module: str | None = "{handler}"
    #: The kind's own request contract, shipped in this package: called with a request body and the served
    #: model's context length (None: not known), it raises a ValueError naming the field (for vllm an
    #: openai_contract.ContractError, with the server's status and error body). None: the task handler's.
    request_contract: Callable[[Any, int | None], object] | None = None
    #: "module:Class" that serves a model.tar.gz on this machine (hfpipe local, local --serve).
    local_endpoint: str = "hfpipe.local.serving.endpoint:LocalEndpoint"
    #: (what stands in, why) when local mode cannot run the kind's own server, printed as a substitution.
    local_stand_in: tuple[str, str] | None = None
    #: Packaging: whether the kind serves a merged model only (the server loads weights from /opt/ml/model
    #: as they are; it cannot load a LoRA adapter over a base from the hub). The Plan refuses a LoRA recipe
    #: that does not merge its adapter (hfpipe/core/recipe/serving_fit.py, `kind_environment`).
    needs_merged_model: bool = False
    #: Whether the kind's server loads LoRA adapters at run time next to one base (vLLM's --enable-lora):
    #: what serves a recipe that keeps its adapter unmerged (`recipe.adapter`) on an environment's shared
    #: base (docs/adapters.md).
    serves_adapters: bool = False
    #: Whether requests are OpenAI chat/completion bodies (`openai_sample_request` is the task kind's
    #: sample in that shape) rather than the task handler's own.
    speaks_openai: bool = False
    #: The host image (ProductionVariant InferenceAmiVersion, one of botocore's
    #: ProductionVariantInferenceAmiVersion values) the kind's container needs; None: SageMaker's default.
    inference_ami_version: str | None = None
    #: The key of the kind's fit rule in hfpipe/core/recipe/serving_fit.py's `FIT_RULES` (one table): what the Plan
    #: checks, on paper, of the model on the serving instance, and the environment the kind's server
    #: settings add (at Plan time and under `hfpipe local --serve`). Rules are named by what they check, so
    #: a new kind can reuse one without touching the core.
    fit_rule: str = "weights-in-gpu-memory"
    #: Whether the kind takes `recipe.serving.server` (its server's settings and the model's figures for
    #: the fit rule); other kinds take their settings from serving.environment only.
    server_settings: bool = False
    #: What `hfpipe local --serve` prints after its usual lines, formatted with `url` (the server's) and
    #: `environment` (the model's): e.g. the OpenAI base URL and the served model name.
    local_banner: str | None = None
    #: The keyword arguments of `sagemaker.image_uris.retrieve(image_table, ...)` for an image of this kind,
    #: each formatted with container.inference's fields (besides region, image_scope and instance_type);
    #: not read for the pinned table (PINNED_TABLE).
    image_arguments: Mapping[str, str] = field(default_factory=lambda: dict(HF_IMAGE_ARGUMENTS))
    #: The task kinds it serves, by their model head (TaskKind.model_head, e.g. "causal-lm"); ANY_TASK: every
    #: task, through the task's own handler. A task kind's `serving_kinds` is read from here, so a new
    #: serving kind touches no task kind.
    serves: tuple[str, ...] = ()

    def variant_fields(self) -> dict[str, str]:
        """What every ProductionVariant serving this kind carries besides model, instance type and count."""
        return {"InferenceAmiVersion": self.inference_ami_version} if self.inference_ami_version else {}

    def catalog_key(self, container: Mapping[str, Any]) -> str:
        """The image catalog key of a recipe's container.inference for this kind."""
        return "/".join(str(container[f]) for f in self.image_key_fields)

    def check_container(self, container: Mapping[str, Any]) -> None:
        """KindError (".field: ..." or ": ...", after recipe.container.inference) unless container.inference
        holds the fields this kind's image is keyed by and none that key another kind's image (a
        vllm_version under hf-inference says the recipe meant another kind)."""
        others = {f for kind in SERVING_KINDS.values() for f in kind.image_key_fields} - set(
            self.image_key_fields
        )
        for name in container:
            if name in others:
                raise KindError(
                    f".{name}: not a field of the {self.name} serving kind's container; accepted: "
                    f"{[*self.image_key_fields, 'image_uri']}"
                )
        missing = [name for name in self.image_key_fields if not container.get(name)]
        if missing and not container.get("image_uri"):
            raise KindError(f": the {self.name} serving kind's image needs {missing} (or image_uri)")

    def request_checker(self, handler: str) -> str | None:
        """The training_code/ module whose parse_request checks requests to a model with `handler`; None
        when the kind's own request_contract does."""
        return self.request_module.format(handler=handler) if self.request_module is not None else None


#: The Hugging Face DLC versions (recipe.container.*): the catalog keys of today's images.
HF_VERSION_FIELDS = ("transformers_version", "pytorch_version", "py_version")
#: The serving kind of the AWS vLLM deep learning container (SageMaker variant).
VLLM = "vllm"

SERVING_KINDS: dict[str, ServingKind] = {
    kind.name: kind
    for kind in (
        ServingKind(
            name=DEFAULT_SERVING_KIND,
            description="the Hugging Face inference toolkit (Hugging Face PyTorch inference DLC) running the "
            "task's handler as code/inference.py",
            image_scope="inference",
            image_table="huggingface",
            image_table_scope="inference",
            image_key_fields=HF_VERSION_FIELDS,
            serves=(ANY_TASK,),
        ),
        ServingKind(
            # https://aws.github.io/deep-learning-containers/vllm/deployment/sagemaker/: the SageMaker image
            # serves vLLM's OpenAI-compatible API on port 8080 (/invocations takes chat and completion
            # bodies), loads the model from /opt/ml/model and turns each SM_VLLM_* variable into the vLLM
            # flag of the same name (SM_VLLM_MAX_MODEL_LEN=2048 -> --max-model-len 2048).
            name=VLLM,
            description="the AWS vLLM deep learning container (SageMaker variant): OpenAI-compatible chat "
            "and completion requests, streaming, continuous batching, over the merged model",
            image_scope=VLLM,
            # Not in the SageMaker SDK's tables (it lists only the Neuron vLLM images): a pinned table
            # (stacks/dlc_images.json) names the repository and tag; the registry accounts per region are
            # the SDK's Deep Learning Containers accounts (stacks/image_catalog.py).
            image_table=PINNED_TABLE,
            image_table_scope=VLLM,
            image_key_fields=("vllm_version",),
            # vLLM's OpenAI server's rules for the pinned version (hfpipe/kinds/openai_contract.py), used by
            # `hfpipe invoke`, local mode's stand-in and Plan's check of the sample request.
            request_module=None,
            request_contract=openai_contract.check_request,
            local_endpoint="hfpipe.local.serving.openai_endpoint:OpenAIEndpoint",
            needs_merged_model=True,
            serves_adapters=True,
            speaks_openai=True,
            fit_rule="vllm-kv-cache",
            server_settings=True,
            local_banner="OpenAI-compatible, as the vLLM container: base_url {url}/v1 (chat/completions, "
            'completions, models), streaming with "stream": true; model name '
            "{environment[SM_VLLM_SERVED_MODEL_NAME]!r}",
            # The image is a CUDA 12.9 build (stacks/dlc_images.json, "cu129"); the SageMaker deployment
            # guide of the vLLM DLC (https://aws.github.io/deep-learning-containers/vllm/deployment/sagemaker/)
            # deploys it with inference_ami_version "al2-ami-sagemaker-inference-gpu-3-1": NVIDIA driver 550
            # with the container toolkit's CUDA-compat mounting disabled (botocore's ProductionVariant
            # InferenceAmiVersion documentation), so the image's own forward-compatibility libraries run
            # CUDA 12.9 on that driver; the default host image's driver does not.
            inference_ami_version="al2-ami-sagemaker-inference-gpu-3-1",
            serves=("causal-lm",),
            local_stand_in=(
                "a stand-in speaking its HTTP contract (/invocations, /v1, streaming) with transformers, "
                "one request at a time (hfpipe.local.serving.openai_endpoint)",
                "vLLM's wheels need CUDA; its CPU backend is a source build",
            ),
        ),
    )
}


def serving_kind(name: Any) -> ServingKind:
    """The serving kind named `name`; KindError naming it and the accepted kinds when unknown."""
    kind = SERVING_KINDS.get(name) if isinstance(name, str) else None
    if kind is None:
        raise KindError(f"serving kind {name!r} is not known; accepted: {sorted(SERVING_KINDS)}")
    return kind


def serving_kind_of(recipe: Mapping[str, Any]) -> ServingKind:
    """The serving kind of a recipe, read or resolved (a recipe as read may leave serving.kind out)."""
    serving = recipe.get("serving") or {}
    return serving_kind(serving.get("kind", DEFAULT_SERVING_KIND) if isinstance(serving, Mapping) else None)


def openai_sample_request(prompt: str, max_tokens: int = 8) -> dict[str, Any]:
    """An OpenAI chat completion body asking for `prompt`, greedy, as a smoke test sends it."""
    return {
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": max_tokens,
        "temperature": 0,
    }
