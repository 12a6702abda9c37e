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

from hfpipe.core.adapters import adapter_deploy
from hfpipe.core.deploy.what_serves import what_serves
from hfpipe.core.promotion import evaluation_gate, promotion
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
    uri = statistics_uri(package)
    return evaluation_gate.of_statistics(read(uri)) if uri else None


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
