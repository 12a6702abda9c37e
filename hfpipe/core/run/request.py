"""The CreateTrainingJob request builder: one pure function from a plan's settings to the request the
SageMaker Python SDK's ``HuggingFace`` estimator would send for the same settings, and the hyperparameter
encoding the SDK and the training toolkit agree on (also used by local mode's training container).

tests/pipeline/test_pipeline_sdk_parity.py compares it field by field with the SDK (2.x) under moto; the
intentional differences are listed in ``INTENTIONAL_DIFFERENCES`` and docs/pipeline.md.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from hfpipe import contract
from hfpipe.core.recipe.typed import Recipe, Training

#: The SDK's default container log level (logging.INFO), sent as a hyperparameter.
CONTAINER_LOG_LEVEL = 20

#: Where we deliberately differ from the SDK, and why (the parity test reads this).
INTENTIONAL_DIFFERENCES: dict[str, str] = {
    "DebugHookConfig": "the SDK turns on the Debugger hook by default; hfpipe does not use Debugger "
    "and a hook adds an S3 prefix and a sidecar nobody reads",
    "ProfilerConfig": "the SDK enables the system profiler by default; hfpipe leaves it off (cost, noise)",
    "ProfilerRuleConfigurations": "comes with the SDK's default profiler; off with it",
    "DebugRuleConfigurations": "comes with the SDK's default Debugger hook; off with it",
    "Tags": "hfpipe tags every job with env/execution/recipe/managed-by so clean-up and reports find it",
    "RetryStrategy": "the SDK sends none; neither do we, but Launch is idempotent instead",
}


#: Distribution keys the training toolkit reads from the hyperparameters.
TORCH_DISTRIBUTED_ENABLED = "sagemaker_torch_distributed_enabled"
SMDDP_ENABLED = "sagemaker_distributed_dataparallel_enabled"
MPI_ENABLED = "sagemaker_mpi_enabled"
PYTORCH_XLA_ENABLED = "sagemaker_pytorch_xla_multi_worker_enabled"


def encode_hyperparameters(hyperparameters: Mapping[str, Any]) -> dict[str, str]:
    """JSON-encode every value, as the SDK does (strings get quotes; the toolkit decodes them)."""
    return {str(k): json.dumps(v) for k, v in hyperparameters.items()}


def decode_hyperparameter(value: str) -> Any:
    """The value an encoded hyperparameter stands for, as the toolkit reads it (not JSON: the string itself)."""
    try:
        return json.loads(value)
    except (TypeError, ValueError):
        return value


def script_mode_hyperparameters(
    entry_point: str, submit_directory: str, *, job_name: str | None = None, region: str | None = None
) -> dict[str, str]:
    """The framework keys the SDK adds for every script-mode estimator, encoded."""
    keys: dict[str, Any] = {
        "sagemaker_program": entry_point,
        "sagemaker_submit_directory": submit_directory,
        "sagemaker_container_log_level": CONTAINER_LOG_LEVEL,
    }
    if job_name is not None:
        keys["sagemaker_job_name"] = job_name
    if region is not None:
        keys["sagemaker_region"] = region
    return encode_hyperparameters(keys)


_LAUNCHER_FLAGS = {
    "pytorchddp": "sagemaker_pytorch_ddp_enabled",
    "torch_distributed": TORCH_DISTRIBUTED_ENABLED,
}


def distribution_hyperparameters(distribution: dict[str, Any] | None, instance_type: str) -> dict[str, Any]:
    """The ``sagemaker_*`` launcher keys for the SDK-style ``distribution`` dict (HuggingFace estimator
    semantics: pytorchddp / torch_distributed first, else mpi / smdistributed)."""
    if not distribution:
        return {}
    out: dict[str, Any] = {}
    # Only the first launcher key present counts, enabled or not (the SDK's order).
    launcher = next((k for k in _LAUNCHER_FLAGS if k in distribution), None)
    if launcher is not None and distribution[launcher].get("enabled", False):
        return {_LAUNCHER_FLAGS[launcher]: True, "sagemaker_instance_type": instance_type}
    if "mpi" in distribution:
        mpi = distribution["mpi"]
        out[MPI_ENABLED] = mpi.get("enabled", False)
        if mpi.get("processes_per_host"):
            out["sagemaker_mpi_num_of_processes_per_host"] = mpi["processes_per_host"]
        out["sagemaker_mpi_custom_mpi_options"] = mpi.get("custom_mpi_options", "")
    if "smdistributed" in distribution:
        smd = distribution["smdistributed"]
        mp = smd.get("modelparallel", {})
        if mp.get("enabled", False) and mp.get("parameters"):
            out["mp_parameters"] = mp["parameters"]
        ddp = smd.get("dataparallel", {}).get("enabled", False)
        out[SMDDP_ENABLED] = ddp
        out["sagemaker_instance_type"] = instance_type
        if ddp:
            out["sagemaker_distributed_dataparallel_custom_mpi_options"] = smd["dataparallel"].get(
                "custom_mpi_options", ""
            )
    return out


def resource_tags(env: str, execution_name: str, recipe_name: str) -> list[dict[str, str]]:
    """The tags every SageMaker resource of an execution carries (contract.TAG_*)."""
    return [
        {"Key": contract.TAG_ENV, "Value": env},
        {"Key": contract.TAG_EXECUTION, "Value": execution_name},
        {"Key": contract.TAG_RECIPE, "Value": recipe_name},
        {"Key": contract.TAG_MANAGED_BY, "Value": contract.PROJECT},
    ]


def channel_uri(value: str, data_bucket: str) -> str:
    """An S3 URI as given, or a key prefix inside the data bucket."""
    return value if value.startswith("s3://") else f"s3://{data_bucket}/{value.lstrip('/')}"


def build_training_job_request(
    *,
    recipe: Recipe,
    training_job_name: str,
    image_uri: str,
    role_arn: str,
    region: str,
    sourcedir_uri: str,
    data_bucket: str,
    artifacts_bucket: str,
    checkpoint_s3_uri: str | None,
    tags: list[dict[str, str]],
) -> dict[str, Any]:
    """The exact CreateTrainingJob request for a validated recipe (defaults filled) and its plan."""
    t = recipe["training"]
    request: dict[str, Any] = {
        "TrainingJobName": training_job_name,
        "AlgorithmSpecification": _algorithm(t, image_uri),
        "RoleArn": role_arn,
        "OutputDataConfig": {"S3OutputPath": f"s3://{artifacts_bucket}/{contract.ARTIFACTS_OUTPUT_PREFIX}"},
        "ResourceConfig": {
            "InstanceType": t["instance_type"],
            "InstanceCount": t["instance_count"],
            "VolumeSizeInGB": t["volume_size_gb"],
        },
        "StoppingCondition": _stopping_condition(t),
        "HyperParameters": _hyperparameters(t, sourcedir_uri, training_job_name, region),
        "Tags": tags,
    }
    if t["spot"]["enabled"]:
        request["EnableManagedSpotTraining"] = True
    if t["channels"]:
        request["InputDataConfig"] = _input_data_config(t["channels"], data_bucket)
    if checkpoint_s3_uri:
        request["CheckpointConfig"] = {"S3Uri": checkpoint_s3_uri, "LocalPath": t["checkpoint_local_path"]}
    if t["environment"]:
        # Strings only, as SageMaker's Environment map holds: the recipe's rule (validate.environment).
        request["Environment"] = dict(t["environment"])
    return request


def _hyperparameters(t: Training, sourcedir_uri: str, training_job_name: str, region: str) -> dict[str, str]:
    """The recipe's hyperparameters, the script-mode keys and the distribution's, encoded as the SDK does."""
    hyperparameters = encode_hyperparameters(t["hyperparameters"])
    # The SDK adds these framework keys for every script-mode estimator.
    hyperparameters.update(
        script_mode_hyperparameters(
            t["entry_point"], sourcedir_uri, job_name=training_job_name, region=region
        )
    )
    hyperparameters.update(
        encode_hyperparameters(distribution_hyperparameters(t["distribution"], t["instance_type"]))
    )
    return hyperparameters


def _algorithm(t: Training, image_uri: str) -> dict[str, Any]:
    """AlgorithmSpecification: the image, File input, the metric definitions where there are any, and
    metrics as time series."""
    # As the SDK's HuggingFace estimator, which sets enable_sagemaker_metrics=True unless told otherwise
    # (sagemaker/huggingface/estimator.py), with or without metric definitions: metrics also go to SageMaker
    # Metrics as time series (charts in the console).
    algorithm: dict[str, Any] = {
        "TrainingImage": image_uri,
        "TrainingInputMode": "File",
        "EnableSageMakerMetricsTimeSeries": True,
    }
    if t["metric_definitions"]:
        algorithm["MetricDefinitions"] = [dict(m) for m in t["metric_definitions"]]
    return algorithm


def _stopping_condition(t: Training) -> dict[str, int]:
    """StoppingCondition: the run's limit, and under spot the wait's where the recipe sets one."""
    stopping: dict[str, int] = {"MaxRuntimeInSeconds": t["max_run_seconds"]}
    if t["spot"]["enabled"] and t["spot"]["max_wait_seconds"]:
        stopping["MaxWaitTimeInSeconds"] = t["spot"]["max_wait_seconds"]
    return stopping


def _input_data_config(channels: Mapping[str, str], data_bucket: str) -> list[dict[str, Any]]:
    """InputDataConfig: one fully replicated S3 prefix per channel (``channel_uri`` resolves each)."""
    return [
        {
            "ChannelName": name,
            "DataSource": {
                "S3DataSource": {
                    "S3DataType": "S3Prefix",
                    "S3Uri": channel_uri(uri, data_bucket),
                    "S3DataDistributionType": "FullyReplicated",
                }
            },
        }
        for name, uri in channels.items()
    ]
