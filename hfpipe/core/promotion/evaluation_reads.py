"""What the evaluation gate reads just before traffic moves (hfpipe.core.promotion.evaluation_gate): a version's
evaluation, from its statistics document, and the champion, from the target itself (an endpoint: DescribeEndpoint
-> config -> model -> package, hfpipe.core.deploy.what_serves; an adapter: its inference component's artifact),
never from a tag or a record. The command and the Lambdas (Promote, the adapter's) read through these, so each
reads the same way. Stdlib only; the clients are boto3's.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from hfpipe import contract
from hfpipe.core.adapters import adapter_deploy
from hfpipe.core.deploy.what_serves import what_serves
from hfpipe.core.promotion import evaluation_gate, promotion, registry
from hfpipe.core.promotion.evaluation_gate import Champion, Evaluated
from hfpipe.core.run.cleanup import is_not_found


def statistics_uri(package: dict[str, Any]) -> str | None:
    """The statistics document's URI of a DescribeModelPackage answer (ModelMetrics.ModelQuality.Statistics)."""
    stats = ((package.get("ModelMetrics") or {}).get("ModelQuality") or {}).get("Statistics") or {}
    uri = stats.get("S3Uri")
    return str(uri) if uri else None


def read_json(s3: Any, uri: str) -> dict[str, Any]:
    """The JSON object at an s3:// URI (errors are the caller's: a gate that cannot read does not pass)."""
    bucket, _, key = uri.removeprefix("s3://").partition("/")
    document = json.loads(s3.get_object(Bucket=bucket, Key=key)["Body"].read())
    if not isinstance(document, dict):
        raise evaluation_gate.EvaluationFormatError(f"{uri}: not a JSON object")
    return document


def evaluation_of(package: dict[str, Any], read: Callable[[str], dict[str, Any]]) -> Evaluated | None:
    """The evaluation stored with a version (its DescribeModelPackage answer); None when it has none.
    ``read`` reads a JSON document by its URI (``read_json`` with the right client)."""
    return evaluation_gate.of_statistics(statistics_of(package, read))


def statistics_of(package: dict[str, Any], read: Callable[[str], dict[str, Any]]) -> dict[str, Any]:
    """A version's statistics document ({} when it names none): its evaluation (``of_statistics``), or its
    evaluation job's failure (``failure_of``), and its lineage."""
    uri = statistics_uri(package)
    return read(uri) if uri else {}


def champion_of_version(sagemaker: Any, arn: str) -> Champion:
    """A serving version as a champion: its ARN, its model data and (a promoted one) its source."""
    package = sagemaker.describe_model_package(ModelPackageName=arn)
    containers = (package.get("InferenceSpecification") or {}).get("Containers") or [{}]
    meta = package.get("CustomerMetadataProperties") or {}
    return Champion(
        version_arn=arn,
        model_data=containers[0].get("ModelDataUrl") or meta.get("model_data"),
        source_arn=meta.get(promotion.PROMOTED_FROM),
    )


def version_task(sagemaker: Any, arn: str, read: Callable[[str], dict[str, Any]] | None = None) -> str | None:
    """The task a version's model does: its CustomerMetadataProperties ``task`` (Register writes it:
    hfpipe.core.promotion.registry.metadata), else its statistics document's metadata when ``read`` can read
    it; None when neither says."""
    package = sagemaker.describe_model_package(ModelPackageName=arn)
    task = (package.get("CustomerMetadataProperties") or {}).get("task")
    if task is None and read is not None:
        task = (statistics_of(package, read).get("metadata") or {}).get("task")
    return str(task) if task else None


def other_task(
    sagemaker: Any,
    champion: Champion | None,
    task: str,
    where: str,
    env: str,
    read: Callable[[str], dict[str, Any]] | None = None,
) -> str | None:
    """Why ``champion`` (what serves at ``where``) cannot be scored against a model of ``task``: it does another
    task (evaluate.py scores both models with one task's reader: a classifier's answers do not unpack as a
    question-answering model's); None when it does the same one, or its task is not known."""
    if champion is None or champion.version_arn is None:
        return None
    theirs = version_task(sagemaker, champion.version_arn, read)
    if theirs is None or theirs == task:
        return None
    return (
        f"{where} serves {registry.ref_of_arn(champion.version_arn, env)}, a {theirs} model; accepted: a champion "
        f"serving a {task} model, the recipe's task"
    )


def champion_on_endpoint(sagemaker: Any, endpoint: str) -> Champion | None:
    """The version that serves on ``endpoint`` now (read from it); None when none serves (no endpoint, or one
    serving no registered version)."""
    serving = what_serves(sagemaker, endpoint)
    arn = serving.version_arn if serving else None
    return champion_of_version(sagemaker, arn) if arn else None


def champion_on_adapter(sagemaker: Any, env: str, adapter: str) -> Champion | None:
    """The artifact adapter ``adapter`` serves on the environment's shared base now; None when it is not there."""
    try:
        return Champion(model_data=adapter_deploy.serving_artifact(sagemaker, env, adapter))
    except Exception as err:
        if is_not_found(err) or adapter_deploy.is_absent(err):
            return None
        raise


def champion_at(sagemaker: Any, env: str, target: dict[str, str]) -> Champion | None:
    """The champion at an evaluation's target ({"endpoint": NAME} or {"adapter": NAME}; {}: none)."""
    if target.get("endpoint"):
        return champion_on_endpoint(sagemaker, target["endpoint"])
    if target.get("adapter"):
        return champion_on_adapter(sagemaker, env, target["adapter"])
    return None


def champion_to_replace(
    sagemaker: Any, env: str, target: dict[str, str], version_arn: str
) -> Champion | None:
    """What version ``version_arn`` would replace at ``target``, read now: the champion there, or None when
    nothing serves there or it serves that version already (then it replaces nothing)."""
    return replaced(sagemaker, env, target, version_arn)[0]


def replaced(
    sagemaker: Any, env: str, target: dict[str, str], version_arn: str
) -> tuple[Champion | None, bool]:
    """``champion_to_replace``, and whether version ``version_arn`` serves at ``target`` itself (then it replaces
    nothing, and the gate's pass line says it is its own champion: evaluation_gate.passed)."""
    champion = champion_at(sagemaker, env, target)
    if champion is not None and champion.same_as(champion_of_version(sagemaker, version_arn)):
        return None, True
    return champion, False


def target_here(target: dict[str, str], env: str, source_env: str | None) -> dict[str, str]:
    """An evaluation's target as environment ``env`` names it. The evaluation ran in the environment the version
    was trained in (``source_env`` for a version promoted from there: its ``promoted_from_env``), which stored
    its named endpoint's SageMaker name, hfpipe-<source>-NAME; here that named endpoint is hfpipe-<env>-NAME
    (contract.deployed_endpoint_name). An adapter keeps its name (each environment's shared base)."""
    endpoint = target.get("endpoint")
    if not endpoint or not source_env or source_env == env:
        return dict(target)
    prefix = contract.deployed_endpoint_name(source_env, "")
    if not endpoint.startswith(prefix):
        return dict(target)
    return {"endpoint": contract.deployed_endpoint_name(env, endpoint.removeprefix(prefix))}


def promoted_from_env(package: dict[str, Any], statistics: dict[str, Any] | None = None) -> str | None:
    """The environment a version was promoted from (its metadata ``promoted_from_env``, which its statistics
    document repeats); None for a version trained in its own environment."""
    meta = package.get("CustomerMetadataProperties") or {}
    value = meta.get(promotion.PROMOTED_FROM_ENV) or ((statistics or {}).get("metadata") or {}).get(
        promotion.PROMOTED_FROM_ENV
    )
    return str(value) if value else None
