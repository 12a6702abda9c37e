"""The evaluation job of a run: the CreateProcessingJob request the pipeline's Evaluate step sends
(docs/evaluation.md; the paths and evaluate.py's arguments are hfpipe.core.recipe.evaluation's, the contract).

The Plan builds what is known before training (``plan_evaluation``): the job's name, the training image, the
instance, the held-out channel's data, the code, the output, the limits and the tags, checked against botocore's
shape with stand-in model URIs. After training, the PrepareEvaluation step reads the champion from the run's
target (hfpipe.core.promotion.evaluation_reads) and adds the models (``with_models``): the challenger's
model.tar.gz and, when a version serves there, the champion's, with ``--champion``.

- Image: the recipe's training image, whose libraries trained the model (the contract).
- Code: the project's own sourcedir.tar.gz (evaluate.py is in training_code/; a recipe's own source does not
  ship it), unpacked by the entry point before evaluate.py runs, as the SageMaker Python SDK's
  FrameworkProcessor unpacks its sourcedir.tar.gz in its runproc.sh (sagemaker/processing.py,
  ``_generate_framework_script``): a ProcessingInput copies objects, it never unpacks them
  (API reference: ProcessingS3Input).
- Role: the environment's SageMaker execution role, which already reads the data and artifacts buckets; it
  writes only under the job's output prefix besides training's (stacks/constructs/execution_role.py).
- Instance: the training instance type, one instance (evaluate.py runs one process); its time limit the
  training job's, at most ``limits.EVALUATION_MAX_SECONDS`` (counted in the execution's other states' time).

Stdlib only: the Plan and PrepareEvaluation Lambdas run it.
"""

from __future__ import annotations

import copy
import re
from typing import Any

from hfpipe import contract
from hfpipe.core import api_shapes, limits
from hfpipe.core.adapters.adapter_deploy import ADAPTER_NAME
from hfpipe.core.recipe import evaluation, schema
from hfpipe.core.recipe.typed import Recipe
from hfpipe.core.run.plan_model import Evaluation
from hfpipe.core.validate import RecipeError

#: The processing job's name: the training job's plus this (training job names are at most 56 characters:
#: hfpipe.core.names, so this fits SageMaker's 63).
NAME_SUFFIX = "-eval"
#: Unpack the code (the one archive of the code input: the source asset, whatever its key's name), then run
#: evaluate.py with the job's arguments (sys.argv after the -c program).
_UNPACK_AND_RUN = (
    "import glob,runpy,sys,tarfile;"
    f"d='{evaluation.INPUT_PATHS['code']}';"
    "[tarfile.open(f).extractall(d) for f in glob.glob(d+'/*gz')];"
    f"sys.argv=[d+'/{evaluation.ENTRY_POINT}']+sys.argv[1:];"
    "runpy.run_path(sys.argv[0],run_name='__main__')"
)
ENTRYPOINT = ["python3", "-c", _UNPACK_AND_RUN]
#: Stand-ins for what is known only after training, so the Plan can check the whole request's shape.
_STAND_IN_MODEL = "s3://bucket/models/job/output/model.tar.gz"


def job_name(training_job_name: str) -> str:
    return f"{training_job_name}{NAME_SUFFIX}"


def document_uri(artifacts_bucket: str, execution_name: str) -> str:
    """Where the job writes evaluation.json: s3://<artifacts>/evaluations/<execution>/ (the contract's key)."""
    return f"s3://{artifacts_bucket}/{contract.ARTIFACTS_EVALUATIONS_PREFIX}{execution_name}/"


def _input(name: str, uri: str) -> dict[str, Any]:
    return {
        "InputName": name,
        "S3Input": {
            "S3Uri": uri,
            "LocalPath": evaluation.INPUT_PATHS[name],
            "S3DataType": "S3Prefix",
            "S3InputMode": "File",
            "S3DataDistributionType": "FullyReplicated",
        },
    }


def _channel_uri(training_request: dict[str, Any], channel: str) -> str | None:
    for entry in training_request.get("InputDataConfig") or []:
        if entry.get("ChannelName") == channel:
            return str(entry["DataSource"]["S3DataSource"]["S3Uri"])
    return None


def _not_training_data(recipe: Recipe, training_request: dict[str, Any]) -> None:
    """The held-out channel against the training channels as the training request resolves them (its
    InputDataConfig's S3 URIs: a key prefix of the data bucket and an S3 URI into it are the same data), the
    recipe's rule (hfpipe.core.recipe.schema.check_not_training_data) once more where the bucket is known."""
    assert recipe["evaluation"] is not None
    resolved = {
        str(entry.get("ChannelName")): str(entry["DataSource"]["S3DataSource"]["S3Uri"])
        for entry in training_request.get("InputDataConfig") or []
    }
    written = recipe["training"].get("channels") or {}
    held_out = [name for name in written if name not in schema.NOT_HELD_OUT]
    schema.check_not_training_data(recipe["evaluation"]["data"], resolved, held_out, written)


def base_request(
    recipe: Recipe,
    *,
    training_request: dict[str, Any],
    execution_name: str,
    code_uri: str,
    artifacts_bucket: str,
) -> dict[str, Any]:
    """CreateProcessingJob without the models (``with_models`` adds them): what the Plan knows."""
    inputs = [_input("code", code_uri)]
    assert recipe["evaluation"] is not None  # plan_evaluation's call: a recipe with one
    _not_training_data(recipe, training_request)
    data = _channel_uri(training_request, recipe["evaluation"]["data"])
    if data is not None:  # else a Hub split, which the job reads itself (container_arguments)
        inputs.append(_input("data", data))
    base = _channel_uri(training_request, "model")
    if recipe.get("adapter") and base is not None:  # an unmerged adapter's base, as its training read it
        inputs.append(_input("base", base))
    t = recipe["training"]
    return {
        "ProcessingJobName": job_name(training_request["TrainingJobName"]),
        "ProcessingInputs": inputs,
        "ProcessingOutputConfig": {
            "Outputs": [
                {
                    "OutputName": "evaluation",
                    "S3Output": {
                        "S3Uri": document_uri(artifacts_bucket, execution_name),
                        "LocalPath": evaluation.OUTPUT_PATH,
                        "S3UploadMode": "EndOfJob",
                    },
                }
            ]
        },
        "ProcessingResources": {
            "ClusterConfig": {
                "InstanceCount": 1,
                "InstanceType": t["instance_type"],
                "VolumeSizeInGB": t["volume_size_gb"],
            }
        },
        "StoppingCondition": {
            "MaxRuntimeInSeconds": min(int(t["max_run_seconds"]), limits.EVALUATION_MAX_SECONDS)
        },
        "AppSpecification": {
            "ImageUri": training_request["AlgorithmSpecification"]["TrainingImage"],
            "ContainerEntrypoint": list(ENTRYPOINT),
            "ContainerArguments": evaluation.container_arguments(recipe, champion=False),
        },
        "RoleArn": training_request["RoleArn"],
        "Tags": copy.deepcopy(training_request.get("Tags") or []),
    }


def with_models(request: dict[str, Any], challenger: str, champion: str | None) -> dict[str, Any]:
    """The whole request: the challenger's model.tar.gz and, when a version serves on the target, the
    champion's, scored with ``--champion`` (hfpipe.core.recipe.evaluation.container_arguments)."""
    out = copy.deepcopy(request)
    out["ProcessingInputs"].append(_input("challenger", challenger))
    if champion is not None:
        out["ProcessingInputs"].append(_input("champion", champion))
        out["AppSpecification"]["ContainerArguments"].append("--champion")
    return out


def check(request: dict[str, Any], *, models: bool = False) -> dict[str, Any]:
    """``request`` when SageMaker's CreateProcessingJob would take it (botocore's shape: hfpipe.core.api_shapes),
    its models stood in for unless ``models`` (the whole request, as PrepareEvaluation sends it); RecipeError
    naming the first field it would refuse."""
    whole = request if models else with_models(request, _STAND_IN_MODEL, _STAND_IN_MODEL)
    found = api_shapes.problems("CreateProcessingJob", whole)
    if found:
        raise RecipeError(
            f"{found[0]}: SageMaker's CreateProcessingJob would refuse the evaluation job's request, which the "
            "recipe's settings made; accepted: what the API reference allows for that field"
        )
    return request


#: A named endpoint's name as cdk.json declares it (hfpipe.cli.deploy.deploy's --endpoint).
_ENDPOINT_NAME = re.compile(r"^[a-z0-9]([a-z0-9-]{0,40}[a-z0-9])?$")
CHAMPION_ACCEPTED = (
    'an object with one key: "endpoint" (a named endpoint of the environment, as `hfpipe deploy --endpoint` '
    'names it) or "adapter" (an adapter on its shared base)'
)


def target(
    value: Any, env: str, has_evaluation: bool, adapter: bool = False
) -> tuple[str | None, str | None]:
    """(the SageMaker endpoint, the adapter) the execution input's ``champion`` names: where the champion is read
    when the job runs; (None, None) when it names none. RecipeError naming the field otherwise: a champion of
    the other kind than the recipe's model (an endpoint serves a merged model, an adapter's component an
    adapter: docs/adapters.md), or an endpoint named by its SageMaker name (hfpipe-ENV-NAME) rather than by the
    name cdk.json declares, which would name hfpipe-ENV-hfpipe-ENV-NAME, an endpoint no deploy makes."""
    if value is None:
        return None, None
    if not has_evaluation:
        raise RecipeError(
            "input.champion: the recipe has no `evaluation`; accepted: a champion only for a recipe that "
            "names its evaluation (docs/evaluation.md)"
        )
    if not isinstance(value, dict) or len(value) != 1 or not set(value) <= {"endpoint", "adapter"}:
        raise RecipeError(f"input.champion: {value!r} is not accepted; accepted: {CHAMPION_ACCEPTED}")
    ((kind, name),) = value.items()
    pattern = _ENDPOINT_NAME if kind == "endpoint" else ADAPTER_NAME
    if not isinstance(name, str) or not pattern.fullmatch(name):
        raise RecipeError(
            f"input.champion.{kind}: {name!r} is not accepted; accepted: a name of lower-case letters, digits "
            "and '-'"
        )
    if (kind == "adapter") != adapter:
        mine = (
            "adapter:NAME (an adapter on the shared base)" if adapter else "endpoint:NAME (a named endpoint)"
        )
        raise RecipeError(
            f"input.champion.{kind}: {name!r} is not accepted for a recipe that trains "
            f"{'an adapter' if adapter else 'a merged model'}; accepted: {mine}"
        )
    full = contract.deployed_endpoint_name(env, "")
    if kind == "endpoint" and name.startswith(f"{contract.PROJECT}-"):
        declared = name.removeprefix(full) if name.startswith(full) else "NAME"
        raise RecipeError(
            f"input.champion.endpoint: {name!r} is a SageMaker endpoint's name (it would read "
            f"{contract.deployed_endpoint_name(env, name)}); accepted: the name the environment's cdk.json "
            f'"endpoints" declares, {declared!r} (endpoint:{declared})'
        )
    return (contract.deployed_endpoint_name(env, name), None) if kind == "endpoint" else (None, name)


def plan_evaluation(
    recipe: Recipe,
    champion: Any,
    *,
    training_request: dict[str, Any],
    execution_name: str,
    env: str,
    code_uri: str,
    artifacts_bucket: str,
    price_per_hour_usd: float | None,
) -> Evaluation | None:
    """The Plan's ``evaluation``: None for a recipe without one."""
    endpoint, adapter = target(
        champion, env, recipe.get("evaluation") is not None, adapter=bool(recipe.get("adapter"))
    )
    if recipe.get("evaluation") is None:
        return None
    request = base_request(
        recipe,
        training_request=training_request,
        execution_name=execution_name,
        code_uri=code_uri,
        artifacts_bucket=artifacts_bucket,
    )
    check(request)
    cluster = request["ProcessingResources"]["ClusterConfig"]
    return Evaluation(
        processing_job_name=request["ProcessingJobName"],
        request=request,
        target_endpoint=endpoint,
        target_adapter=adapter,
        instance_type=cluster["InstanceType"],
        instance_count=cluster["InstanceCount"],
        price_per_hour_usd=price_per_hour_usd,
        document_uri=document_uri(artifacts_bucket, execution_name) + evaluation.DOCUMENT_NAME,
    )
