"""The recipe schema: one JSON Schema (draft-07) shared by the CLI and the Plan Lambda, validated by
``fastjsonschema``.

The schema is data (``RECIPE_SCHEMA``), so editors and the ``jsonschema`` library can read it; it is checked
against draft-07's meta-schema in the tests (tests/core/test_schema.py).
``fastjsonschema`` (pure Python, no dependencies; pinned in requirements.txt and copied into the Lambda bundle
by stacks/functions/common.py) compiles it once and fills the ``default`` of every missing property; its
exception becomes the project's one line in ``schema_error``. Every property carries a ``description``: that is
the documentation of the recipe format.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable, Mapping
from typing import Any, cast

import fastjsonschema

from hfpipe.core.adapters.shared_base import HUB_ID_PATTERN
from hfpipe.core.recipe.typed import Recipe
from hfpipe.core.validate import RecipeError
from hfpipe.kinds import DEFAULT_SERVING_KIND, SERVING_KINDS, TASK_KINDS

__all__ = [
    "RECIPE_SCHEMA",
    "RecipeError",
    "check_evaluation",
    "check_not_training_data",
    "schema_error",
    "validate",
]

_INSTANCE_TYPE = {"type": "string", "pattern": r"^ml\.[a-z0-9]+\.[a-z0-9]+$"}

_CONTAINER = {
    "type": "object",
    "description": "Hugging Face Deep Learning Container versions, resolved to an image URI from the "
    "SageMaker Python SDK's image tables at synth time (see stacks/image_catalog.py).",
    "additionalProperties": False,
    "properties": {
        "transformers_version": {"type": "string", "description": "transformers version of the container."},
        "pytorch_version": {"type": "string", "description": "PyTorch version of the container."},
        "py_version": {"type": "string", "pattern": r"^py3\d+$", "description": "Python tag, e.g. py312."},
        "image_uri": {
            "type": ["string", "null"],
            "default": None,
            "description": "Explicit image URI; overrides the versions above (for custom images).",
        },
    },
    "required": ["transformers_version", "pytorch_version", "py_version"],
}

#: container.inference: the fields its serving kind keys the image by (hfpipe/kinds/serving.py
#: image_key_fields) are required by the rules (hfpipe.core.validate), since they differ by kind; a kind's
#: key fields beyond the Hugging Face DLC's versions (vllm_version, ...) are properties here, from the registry.
_INFERENCE_CONTAINER = {
    **_CONTAINER,
    "description": "The serving container: the image key fields of the recipe's serving kind (the Hugging "
    "Face inference DLC's versions for hf-inference, vllm_version for vllm, ...: hfpipe/kinds/serving.py), "
    "resolved to an image URI at synth time (stacks/image_catalog.py); or image_uri.",
    "properties": {
        **_CONTAINER["properties"],  # type: ignore[dict-item]
        **{
            name: {
                "type": "string",
                "description": f"{name} of the image of serving kind {kind.name} ({kind.description}).",
            }
            for kind in SERVING_KINDS.values()
            for name in kind.image_key_fields
            if name not in _CONTAINER["properties"]  # type: ignore[operator]
        },
    },
    "required": [],
}

#: training.source: the team's own training code (docs/own-code.md); exactly one of dir, git and s3, and the
#: other rules a schema cannot say, are hfpipe.core.validate.training_source's.
_SOURCE = {
    "type": ["object", "null"],
    "default": None,
    "description": "The training code, as the SageMaker estimator's source_dir/git_config: null (default): the "
    "project's training_code/; or exactly one of dir, git, s3. `hfpipe start` packs dir and git sources into "
    "sourcedir.tar.gz and uploads them to the artifacts bucket; the pipeline itself takes only s3.",
    "additionalProperties": False,
    "properties": {
        "dir": {
            "type": "string",
            "description": "A folder next to the recipe file, as the SDK's source_dir: scripts, ./scripts or .",
        },
        "git": {
            "type": "object",
            "description": "A git repository, cloned by `hfpipe start` (or `hfpipe local`) only.",
            "additionalProperties": False,
            "required": ["repo"],
            "properties": {
                "repo": {"type": "string", "description": "Clone URL or a local repository's path."},
                "branch": {
                    "type": "string",
                    "description": "Branch or tag to check out, as the SDK's git_config takes it (`git checkout "
                    "<branch>`), e.g. main or v4.6.1 (at most one of branch and tag).",
                },
                "tag": {"type": "string", "description": "Tag to check out, e.g. v4.6.1."},
                "commit": {
                    "type": "string",
                    "description": "Commit (7 to 40 hex digits) to check out, alone or after branch or tag.",
                },
                "token": {
                    "type": "string",
                    "description": "As the SDK's git_config token, for an https repository: '${NAME}', the "
                    "environment variable holding it (never the token itself).",
                },
                "username": {
                    "type": "string",
                    "description": "As the SDK's git_config username (with password): a name, or '${NAME}'.",
                },
                "password": {
                    "type": "string",
                    "description": "As the SDK's git_config password: '${NAME}', the environment variable "
                    "holding it (never the password itself).",
                },
                "2FA_enabled": {
                    "type": "boolean",
                    "description": "As the SDK's git_config 2FA_enabled: true uses only token over https.",
                },
                "path": {
                    "type": "string",
                    "description": "Sub-folder holding the code, e.g. examples/pytorch.",
                },
            },
        },
        "s3": {"type": "string", "description": "s3://<artifacts bucket>/sources/<sha256>/sourcedir.tar.gz."},
        "sha256": {"type": "string", "description": "The archive's sha256 (hex); required with s3."},
        "include": {
            "type": "array",
            "items": {"type": "string"},
            "description": "Files whose names look like secrets (.env, *.pem, ...) to pack all the same.",
        },
        "exclude": {
            "type": "array",
            "items": {"type": "string"},
            "description": "Files and folders never packed: globs of a path or a name, a folder ending in "
            "'/' (e.g. '.venv/', '*.csv', 'data/raw/*').",
        },
    },
}

#: recipe.evaluation: the held-out evaluation of a version against the one it would replace (docs/evaluation.md);
#: that data names a held-out channel or split and the metric one its task kind scores is
#: ``check_evaluation``'s rule, below.
#: The fewest held-out examples a verdict is drawn from: with n examples the smallest non-zero difference is
#: 100/n points, and 11 is the smallest n at which n examples all in one model's favour are evidence by the
#: exact sign test at the highest confidence accepted, 0.999 (2 * 0.5**11 < 0.001); the container's
#: training_code/eval_scores.py MIN_EXAMPLES, which the job holds what it read to, says the same
#: (tests/training/test_eval_scores.py). docs/evaluation.md, "The bootstrap and the verdict".
EVALUATION_MIN_EXAMPLES = 11

_EVALUATION = {
    "type": ["object", "null"],
    "default": None,
    "additionalProperties": False,
    "required": ["data", "metric"],
    "description": "Optional: score each version and the one it would replace (the champion) on the same "
    "held-out data in a SageMaker processing job (training_code/evaluate.py; docs/evaluation.md); null: the "
    "recipe's versions are not evaluated.",
    "properties": {
        "data": {
            "type": "string",
            "pattern": r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$",
            "description": "The held-out data: a channel of training.channels other than training and model "
            "(validation, test, ...), or, for a recipe that reads a Hub data set (the dataset_name "
            "hyperparameter), one of its held-out splits (validation, validation_matched, test).",
        },
        "metric": {
            "type": "string",
            "description": "The metric the verdict compares, one the task kind scores (hfpipe/kinds/tasks.py "
            "metrics): exact_match, f1 (question-answering); accuracy, macro_f1 (text-classification); "
            "rouge1, rouge2, rougeL, rougeLsum, perplexity (summarization, text-generation).",
        },
        "margin": {
            "type": "number",
            "minimum": 0,
            "default": 0.0,
            "description": "How much worse than the champion still passes, in the metric's units: worse "
            "means the whole interval of the difference lies below -margin.",
        },
        "confidence": {
            "type": "number",
            "minimum": 0.5,
            "maximum": 0.999,
            "default": 0.95,
            "description": "The confidence of the bootstrap intervals (percentile bootstrap).",
        },
        "resamples": {
            "type": "integer",
            "minimum": 100,
            "maximum": 10000,
            "default": 1000,
            "description": "Bootstrap resamples of the examples.",
        },
        "max_examples": {
            "type": ["integer", "null"],
            "minimum": EVALUATION_MIN_EXAMPLES,
            "default": None,
            "description": f"Score the first N held-out examples only (N >= {EVALUATION_MIN_EXAMPLES}: fewer "
            "give no verdict); null: all of them.",
        },
    },
}

RECIPE_SCHEMA: dict[str, Any] = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "$id": "https://github.com/hfpipe/hfpipe/recipes/schema.json",
    "title": "hfpipe recipe",
    "description": "One fine-tuning workload: training job, optional evaluation gate, endpoint and smoke test.",
    "type": "object",
    "additionalProperties": False,
    "required": ["name", "task", "container", "training", "serving"],
    "properties": {
        "name": {
            "type": "string",
            "pattern": r"^[a-z0-9]([a-z0-9-]{0,38}[a-z0-9])?$",
            "description": "Recipe name (lower-case, digits, dashes; at most 40 characters). Tagged on resources.",
        },
        "description": {
            "type": "string",
            "default": "",
            "description": "Free text: where the recipe comes from.",
        },
        "task": {
            "type": "string",
            "enum": list(TASK_KINDS),
            "description": "What the model does (a task kind, hfpipe/kinds/tasks.py): selects the records the "
            "data set must hold, the inference handler, local mode's fixtures and the serving kinds allowed.",
        },
        "container": {
            "type": "object",
            "description": "Training and inference containers.",
            "additionalProperties": False,
            "required": ["training", "inference"],
            "properties": {"training": _CONTAINER, "inference": _INFERENCE_CONTAINER},
        },
        "training": {
            "type": "object",
            "description": "The SageMaker training job.",
            "additionalProperties": False,
            "required": ["entry_point", "instance_type", "hyperparameters"],
            "properties": {
                "entry_point": {
                    "type": "string",
                    "pattern": r"^[A-Za-z0-9_./-]+\.py$",
                    "description": "Script inside the training source (training.source; by default the "
                    "project's training_code/), e.g. run_qa.py.",
                },
                "source": _SOURCE,
                "instance_type": {
                    **_INSTANCE_TYPE,
                    "description": "Training instance type, e.g. ml.p3.16xlarge.",
                },
                "instance_count": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": 64,
                    "default": 1,
                    "description": "Number of training instances.",
                },
                "volume_size_gb": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": 16384,
                    "default": 30,
                    "description": "EBS volume per instance (GB); the SDK's default is 30.",
                },
                "max_run_seconds": {
                    "type": "integer",
                    "minimum": 60,
                    "maximum": 2419200,
                    "default": 86400,
                    "description": "StoppingCondition.MaxRuntimeInSeconds.",
                },
                "expected_hours": {
                    "type": ["number", "null"],
                    "exclusiveMinimum": 0,
                    # 28 days: the longest MaxRuntime SageMaker accepts (CreateTrainingJob's StoppingCondition).
                    "maximum": 672,
                    "default": None,
                    "description": "Expected training time, for the cost estimate; null: max_run_seconds.",
                },
                "hyperparameters": {
                    "type": "object",
                    "description": "Script arguments, Hugging Face names (TrainingArguments fields, "
                    "model_name_or_path, max_seq_length, lora_r, ...); JSON-encoded like the SDK does.",
                },
                "distribution": {
                    "type": ["object", "null"],
                    "default": None,
                    "description": "The SDK's `distribution` argument, verbatim: "
                    '{"torch_distributed": {"enabled": true}}, '
                    '{"smdistributed": {"dataparallel": {"enabled": true}}}, or '
                    '{"smdistributed": {"modelparallel": {"enabled": true, "parameters": {...}}}, '
                    '"mpi": {"enabled": true, "processes_per_host": 8}}.',
                },
                "spot": {
                    "type": "object",
                    "description": "Managed spot training.",
                    "additionalProperties": False,
                    # Written whole: a filled default is not descended into (fastjsonschema, as JSON Schema).
                    "default": {"enabled": False, "max_wait_seconds": None},
                    "properties": {
                        "enabled": {"type": "boolean", "default": False, "description": "Use spot capacity."},
                        "max_wait_seconds": {
                            "type": ["integer", "null"],
                            "minimum": 60,
                            "default": None,
                            "description": "StoppingCondition.MaxWaitTimeInSeconds; required with spot, "
                            ">= max_run_seconds.",
                        },
                    },
                },
                "checkpoint_s3_uri": {
                    "type": ["string", "null"],
                    "default": None,
                    "description": "Where checkpoints sync to. Required (or 'auto') with spot; 'auto' means "
                    "s3://<artifacts bucket>/checkpoints/<training job name>/.",
                },
                "checkpoint_local_path": {
                    "type": "string",
                    "default": "/opt/ml/checkpoints",
                    "description": "Checkpoint directory inside the container (the scripts' output_dir).",
                },
                "channels": {
                    "type": "object",
                    "default": {},
                    "description": "Input channels: name -> S3 URI or key prefix in the data bucket. "
                    "Empty when the script loads a Hub data set by dataset_name.",
                },
                "metric_definitions": {
                    "type": "array",
                    "default": [],
                    "description": "[{Name, Regex}] scraped from the logs (AlgorithmSpecification.MetricDefinitions).",
                    "items": {
                        "type": "object",
                        "required": ["Name", "Regex"],
                        "additionalProperties": False,
                        "properties": {
                            "Name": {"type": "string", "description": "Metric name."},
                            "Regex": {"type": "string", "description": "Regex with one group."},
                        },
                    },
                },
                "environment": {
                    "type": "object",
                    "default": {},
                    "description": "Extra container environment variables (string values).",
                },
            },
        },
        "evaluation_gate": {
            "type": ["object", "null"],
            "default": None,
            "description": "Optional: deploy only when a final metric passes a threshold.",
            "additionalProperties": False,
            "required": ["metric", "threshold"],
            "properties": {
                "metric": {"type": "string", "description": "A final metric name, e.g. eval_accuracy."},
                "threshold": {"type": "number", "description": "The bound the metric must reach."},
                "higher_is_better": {
                    "type": "boolean",
                    "default": True,
                    "description": "true: metric >= threshold passes; false: metric <= threshold passes.",
                },
            },
        },
        "evaluation": _EVALUATION,
        "adapter": {
            "type": ["object", "null"],
            "default": None,
            "additionalProperties": False,
            "required": ["base_model"],
            "description": "Keep the LoRA adapter unmerged (a LoRA recipe only): the artifact is the adapter "
            "(adapter_config.json + weights, megabytes) with the identity of its base, and the registered "
            "version records that base; it is served on the environment's shared base (docs/adapters.md), "
            "not on an endpoint of its own.",
            "properties": {
                "base_model": {
                    "type": "string",
                    "pattern": HUB_ID_PATTERN,
                    "description": "The Hub id of the base the adapter is trained on: the "
                    "model_name_or_path hyperparameter when the recipe names one, else the model the "
                    "`model` channel holds; the shared base that serves it must be this model.",
                },
            },
        },
        "deploy": {
            "type": "boolean",
            "default": True,
            "description": "Create model, endpoint and smoke test.",
        },
        "serving": {
            "type": "object",
            "description": "The real-time endpoint and its smoke test.",
            "additionalProperties": False,
            "required": ["instance_type", "sample_request"],
            "properties": {
                "kind": {
                    "type": "string",
                    "enum": list(SERVING_KINDS),
                    "default": DEFAULT_SERVING_KIND,
                    "description": "How the model is served (a serving kind, hfpipe/kinds/serving.py): its image, "
                    "packaging, environment and request checks; the task's kind must support it.",
                },
                "instance_type": {**_INSTANCE_TYPE, "description": "Endpoint instance type."},
                "instance_count": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": 16,
                    "default": 1,
                    "description": "Initial instance count of the endpoint's variant.",
                },
                "environment": {
                    "type": "object",
                    "default": {},
                    "description": "Model container environment (e.g. HF_TASK, SM_NUM_GPUS); over what the "
                    "serving kind sets.",
                },
                "server": {
                    "type": "object",
                    "default": {},
                    "additionalProperties": False,
                    "description": "Settings of the vllm serving kind's server, written as SM_VLLM_* variables "
                    "(hfpipe/core/recipe/serving_fit.py); the Plan refuses a setting that cannot fit the instance.",
                    "properties": {
                        "max_model_len": {
                            "type": "integer",
                            "minimum": 16,
                            "maximum": 131072,
                            "description": "Longest prompt plus answer in tokens (default 2048).",
                        },
                        "dtype": {
                            "type": "string",
                            "enum": ["bfloat16", "float16", "float32"],
                            "description": "Weights' data type on the GPU (default bfloat16).",
                        },
                        "gpu_memory_utilization": {
                            "type": "number",
                            "exclusiveMinimum": 0,
                            "maximum": 0.98,
                            "description": "Share of each GPU vLLM takes (default 0.9).",
                        },
                        "model": {
                            "type": "object",
                            "additionalProperties": False,
                            "required": ["parameters", "layers", "kv_heads", "head_dim"],
                            "description": "The served model's figures, for a model the fit check does not "
                            "know (from its config.json).",
                            "properties": {
                                k: {"type": "integer", "minimum": 1}
                                for k in ("parameters", "layers", "kv_heads", "head_dim")
                            },
                        },
                    },
                },
                "keep_endpoint": {
                    "type": "boolean",
                    "default": False,
                    "description": "false: delete endpoint, config and model after the smoke test.",
                },
                "endpoint_timeout_seconds": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": 86400,
                    "default": 3600,
                    "description": "Overall limit on waiting for the endpoint to become InService.",
                },
                "sample_request": {
                    "type": "object",
                    "description": 'JSON body the smoke test sends, e.g. {"inputs": ...}.',
                },
                "expected_keys": {
                    "type": "array",
                    "items": {"type": "string"},
                    "default": [],
                    "description": 'Keys the (first) answer object must contain, e.g. ["answer", "score"].',
                },
                "max_latency_ms": {
                    "type": "number",
                    "exclusiveMinimum": 0,
                    "default": 60000,
                    "description": "The smoke test fails above this round-trip latency.",
                },
            },
        },
    },
}


@functools.cache
def _validator() -> Callable[[Any], Any]:
    """The schema compiled once (fastjsonschema generates a Python function from it)."""
    return fastjsonschema.compile(RECIPE_SCHEMA)


def validate(recipe: Any) -> Recipe:
    """Validate a recipe against ``RECIPE_SCHEMA`` and return a copy with every default filled in, typed
    (hfpipe/core/recipe/typed.py; its test holds it to this schema).

    Raises RecipeError naming the first offending field (dotted path from ``recipe``).
    """
    if not isinstance(recipe, dict):
        raise RecipeError(f"recipe: expected a JSON object, got {type(recipe).__name__}")
    try:
        checked: dict[str, Any] = _validator()(copy.deepcopy(recipe))
    except fastjsonschema.JsonSchemaValueException as err:
        raise RecipeError(schema_error(err)) from None
    return cast(Recipe, checked)


#: Channels that are never held-out data: what the model is trained on, and the model it starts from.
NOT_HELD_OUT = ("training", "train", "model")
#: The Hub data set splits recipe.evaluation.data may name (docs/evaluation.md, "The recipe's evaluation"): the
#: held-out splits of the data sets the recipes read (datasets' split names, case as the Hub writes them).
HUB_HELD_OUT_SPLITS = ("validation", "validation_matched", "validation_mismatched", "test")


def check_evaluation(recipe: Recipe) -> None:
    """recipe.evaluation's rules past the schema: its metric one the task kind scores, its data a held-out
    channel of the recipe, or a split of the Hub data set it reads; RecipeError naming the field. Checked by
    hfpipe.core.recipe.recipes.resolve_recipe after the channels' own rules (hfpipe.core.validate.recipe)."""
    evaluation = recipe.get("evaluation")
    if evaluation is None:
        return
    scored = list(TASK_KINDS[recipe["task"]].metrics)
    if evaluation["metric"] not in scored:
        raise RecipeError(
            f"recipe.evaluation.metric: {evaluation['metric']!r} is not scored for task {recipe['task']!r}; "
            f"accepted: {scored}"
        )
    data, training = evaluation["data"], recipe["training"]
    channels = training.get("channels") or {}
    held_out = [name for name in channels if name not in NOT_HELD_OUT]
    if data in NOT_HELD_OUT:
        raise RecipeError(
            f"recipe.evaluation.data: {data!r} is not held-out data (the training data or the model); "
            f"accepted: {held_out or 'a held-out channel or split'}"
        )
    _not_inside_training(data, channels, held_out)
    hub = (training.get("hyperparameters") or {}).get("dataset_name")
    if data not in channels and not hub:
        raise RecipeError(
            f"recipe.evaluation.data: {data!r} is not a channel of the recipe; accepted: {held_out} (a split "
            "name only for a recipe that reads a Hub data set, the dataset_name hyperparameter)"
        )
    if data not in channels and data not in HUB_HELD_OUT_SPLITS:
        raise RecipeError(
            f"recipe.evaluation.data: {data!r} is not a held-out split of the Hub data set {hub!r} nor a channel "
            f"of the recipe; accepted: a split of {list(HUB_HELD_OUT_SPLITS)}"
            + (f" or a channel of {held_out}" if held_out else "")
        )


def _not_inside_training(data: str, channels: dict[str, str], held_out: list[str]) -> None:
    """The recipe's channels as written (``check_not_training_data``); the Plan checks them again as resolved."""
    check_not_training_data(data, channels, held_out)


def check_not_training_data(
    data: str, paths: Mapping[str, str], held_out: list[str], written: Mapping[str, str] | None = None
) -> None:
    """A held-out channel whose path is a training channel's, or holds it, or lies inside it, is the training
    data under another name: refused. A channel is an S3 prefix (its objects are every key below it: API
    reference, S3DataSource.S3Uri), so the paths are compared at their '/' boundaries. ``paths``: each channel's
    path, as written (recipe validation) or as the Plan resolves it (``written``: as written, named with it:
    a key prefix of the data bucket and that bucket's S3 URI are the same data, hfpipe.core.run.request
    .channel_uri; the Plan's, the dry run's and local mode's requests all come from it)."""
    path = paths.get(data)
    if not isinstance(path, str):
        return
    mine = path.rstrip("/") + "/"
    for name in NOT_HELD_OUT[:2]:  # the training channels; the model channel is not data
        theirs = paths.get(name)
        if isinstance(theirs, str) and (mine.startswith(theirs.rstrip("/") + "/") or theirs.startswith(mine)):
            others = [n for n in held_out if n != data]
            raise RecipeError(
                f"recipe.evaluation.data: channel {data!r} ({_as_written(data, path, written)}) is the training "
                f"data (channel {name!r}: {_as_written(name, theirs, written)}, the same path, inside it or "
                "holding it); accepted: a held-out channel whose path neither is, holds nor lies inside the "
                f"training channel's{f' ({others})' if others else ''}"
            )


def _as_written(name: str, path: str, written: Mapping[str, str] | None) -> str:
    said = (written or {}).get(name, path)
    return path if said == path else f"{said}, that is {path}"


def schema_error(err: fastjsonschema.JsonSchemaValueException) -> str:
    """fastjsonschema's refusal as one line: the field (``recipe.training.instance_type``), the value and what
    the schema accepts there (its enum, pattern, bounds, type, fields)."""
    path = "recipe" + str(err.name or "data").removeprefix("data")
    rule, definition, value = err.rule, err.definition or {}, err.value
    if rule == "required":
        missing = [k for k in definition["required"] if not isinstance(value, dict) or k not in value]
        return f"{path}.{missing[0]}: required field is missing"
    if rule == "additionalProperties":
        accepted = sorted(definition.get("properties", {}))
        return f"{path}: unknown field(s) {sorted(set(value) - set(accepted))}; accepted: {accepted}"
    limit = definition.get(rule)
    said = {
        "type": lambda: (
            f"is not of type {' or '.join(map(str, limit if isinstance(limit, list) else [limit]))}"
        ),
        "enum": lambda: f"is not one of {limit}",
        "pattern": lambda: f"does not match {limit}",
        "minimum": lambda: f"is below the minimum {limit}",
        "maximum": lambda: f"is above the maximum {limit}",
        "exclusiveMinimum": lambda: f"must be greater than {limit}",
        "minItems": lambda: f"needs at least {limit} items",
    }
    if rule in said:
        return f"{path}: {value!r} {said[rule]()}"
    return f"{path}: {value!r} is not accepted ({rule}: {limit!r})"
