"""The validated recipe as a typed value: one ``TypedDict`` per object of ``RECIPE_SCHEMA`` (schema.py).

What ``hfpipe.core.recipe.schema.validate`` returns (and so ``resolve_recipe``, the command's ``Loaded``, the Plan
Lambda and local mode), read by every later layer with its fields checked by mypy. A field the schema requires
or gives a ``default`` is a required key (fastjsonschema fills every default); the others are ``NotRequired``.
The schema stays the one contract: tests/core/test_recipe_typed.py fails when a property is missing from or
extra in its ``TypedDict``, or its required-ness or type differs. Free-form objects (hyperparameters,
distribution, sample_request) stay ``dict[str, Any]``; channels and environments hold strings once
``hfpipe.core.validate.recipe`` has run (resolve_recipe runs it before it returns).

No ``from __future__ import annotations`` here: Python 3.11's ``TypedDict`` reads ``NotRequired`` only from
evaluated annotations (``__required_keys__``, which the test compares with the schema).
"""

from typing import Any, NotRequired, TypedDict

__all__ = [
    "Adapter",
    "Container",
    "Containers",
    "Evaluation",
    "EvaluationGate",
    "GitSource",
    "InferenceContainer",
    "MetricDefinition",
    "Recipe",
    "Server",
    "ServerModel",
    "Serving",
    "Source",
    "Spot",
    "Training",
]


class Container(TypedDict):
    """recipe.container.training: the Hugging Face DLC's versions, or an explicit image."""

    transformers_version: str
    pytorch_version: str
    py_version: str
    image_uri: str | None


class InferenceContainer(TypedDict):
    """recipe.container.inference: the image key fields of the serving kind (required by the kind's rule,
    hfpipe.core.validate.recipe, not by the schema), or an explicit image."""

    transformers_version: NotRequired[str]
    pytorch_version: NotRequired[str]
    py_version: NotRequired[str]
    image_uri: str | None
    vllm_version: NotRequired[str]


class Containers(TypedDict):
    """recipe.container."""

    training: Container
    inference: InferenceContainer


# Functional form: "2FA_enabled" is not an identifier.
GitSource = TypedDict(
    "GitSource",
    {
        "repo": str,
        "branch": NotRequired[str],
        "tag": NotRequired[str],
        "commit": NotRequired[str],
        "token": NotRequired[str],
        "username": NotRequired[str],
        "password": NotRequired[str],
        "2FA_enabled": NotRequired[bool],
        "path": NotRequired[str],
    },
)
GitSource.__doc__ = "recipe.training.source.git: the SDK's git_config."


class Source(TypedDict, total=False):
    """recipe.training.source: exactly one of dir, git and s3 (hfpipe.core.validate.training_source)."""

    dir: str
    git: GitSource
    s3: str
    sha256: str
    include: list[str]
    exclude: list[str]


class Spot(TypedDict):
    """recipe.training.spot."""

    enabled: bool
    max_wait_seconds: int | None


class MetricDefinition(TypedDict):
    """One of recipe.training.metric_definitions (AlgorithmSpecification.MetricDefinitions)."""

    Name: str
    Regex: str


class Training(TypedDict):
    """recipe.training: the SageMaker training job."""

    entry_point: str
    source: Source | None
    instance_type: str
    instance_count: int
    volume_size_gb: int
    max_run_seconds: int
    expected_hours: float | None
    hyperparameters: dict[str, Any]
    distribution: dict[str, Any] | None
    spot: Spot
    checkpoint_s3_uri: str | None
    checkpoint_local_path: str
    channels: dict[str, str]
    metric_definitions: list[MetricDefinition]
    environment: dict[str, str]


class EvaluationGate(TypedDict):
    """recipe.evaluation_gate."""

    metric: str
    threshold: float
    higher_is_better: bool


class Evaluation(TypedDict):
    """recipe.evaluation: the held-out evaluation against the champion (docs/evaluation.md)."""

    data: str
    metric: str
    margin: float
    confidence: float
    resamples: int
    max_examples: int | None


class Adapter(TypedDict):
    """recipe.adapter: the LoRA adapter kept unmerged (docs/adapters.md)."""

    base_model: str


class ServerModel(TypedDict):
    """recipe.serving.server.model: the served model's figures for the fit check."""

    parameters: int
    layers: int
    kv_heads: int
    head_dim: int


class Server(TypedDict, total=False):
    """recipe.serving.server: the vllm serving kind's server settings (serving_fit.py)."""

    max_model_len: int
    dtype: str
    gpu_memory_utilization: float
    model: ServerModel


class Serving(TypedDict):
    """recipe.serving: the endpoint and its smoke test."""

    kind: str
    instance_type: str
    instance_count: int
    environment: dict[str, str]
    server: Server
    keep_endpoint: bool
    endpoint_timeout_seconds: int
    sample_request: dict[str, Any]
    expected_keys: list[str]
    max_latency_ms: float


class Recipe(TypedDict):
    """A recipe after validation (schema.validate): every default filled."""

    name: str
    description: str
    task: str
    container: Containers
    training: Training
    evaluation_gate: EvaluationGate | None
    evaluation: Evaluation | None
    adapter: Adapter | None
    deploy: bool
    serving: Serving
