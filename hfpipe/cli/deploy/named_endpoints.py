"""Named endpoints (`hfpipe deploy`): what `hfpipe endpoints` shows of them (the version each serves, read from
the endpoint by hfpipe.core.deploy.what_serves, and its deployment record: when, by which execution, after which
version; a record or tag that names another version is shown as a mismatch) and what deleting one removes.

A named endpoint is declared in cdk.json (an environment's "endpoints"), is called hfpipe-<env>-<name> in
SageMaker, and every endpoint, endpoint config and model a deploy made for it carries ``hfpipe:deployment`` =
<name> (hfpipe.contract.TAG_DEPLOYMENT). No run's clean-up deletes those (hfpipe.core.run.cleanup.is_protected);
`hfpipe endpoints delete NAME` does, since it names the endpoint, and with the endpoint it removes every config
and model deploys made for it (successive deploys leave the earlier ones, which serve nothing), its
deployment record (the SSM parameter the deploy's Record step wrote) and its autoscaling target. The model
package versions and their artifacts stay: they belong to the registry.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from typing import Any

from hfpipe import contract
from hfpipe.cli.aws import aws_error
from hfpipe.cli.run.cleanup import step
from hfpipe.core.deploy.deploy_plan import DeploymentRecord
from hfpipe.core.deploy.what_serves import Serving, mismatch
from hfpipe.core.promotion import registry
from hfpipe.core.run.cleanup import KINDS, Resource, is_not_found, is_ours, tags_of

#: The variant every deploy makes (one per endpoint), and so the autoscaling target's resource ID,
#: endpoint/<endpoint>/variant/<variant> in namespace sagemaker
#: (https://docs.aws.amazon.com/sagemaker/latest/dg/endpoint-auto-scaling-add-code-register.html).
VARIANT = "AllTraffic"


def deployment_of(tags: dict[str, str]) -> str | None:
    """The named endpoint a resource was deployed for, or None for a run's own."""
    return tags.get(contract.TAG_DEPLOYMENT) or None


class EndpointGone(LookupError):
    """The endpoint was deleted between being listed and being read."""


def serving(found: Serving, tags: dict[str, str]) -> dict[str, Any]:
    """EndpointInfo's fields of what serves, read from the endpoint (hfpipe.core.deploy.what_serves): RECIPE/N of its
    live config's model's package version (None: no registered version, or not known), its ARN, the version an
    update under way moves to, a tag that names another version (``mismatch``) and what could not be read."""
    env = tags.get(contract.TAG_ENV, "")
    view = found.to_json(env)
    claim = found.mismatch(tags.get(contract.TAG_MODEL_VERSION), "endpoint's hfpipe:model-version tag", env)
    pending = found.pending_version_arn
    return {
        "serves": view["serves"],
        "model_version_arn": found.version_arn,
        "updating_to": registry.ref_of_arn(pending, env) if pending else None,
        "mismatch": (claim,) if claim else (),
        "unknown": tuple(view["unknown"]),
    }


def serves_cell(e: Any) -> str:
    """The table's serves cell: read from the endpoint, with the update under way and a mismatch flagged."""
    text = e.serves or ("unknown" if e.unknown else "-")
    if e.updating_to:
        text += f" (updating to {e.updating_to})"
    return text + (" (mismatch: below)" if e.mismatch else "")


def with_record(info: Any, found: dict[str, DeploymentRecord], env: str) -> Any:
    """An EndpointInfo (hfpipe.cli.deploy.endpoints) with its deployment record's claim added to its ``mismatch``
    when the record names another version than the one read from the endpoint."""
    record = found.get(info.deployment or "") if info.deployment else None
    claimed = record.model_version_arn if record else None
    claim = mismatch(info.model_version_arn, claimed, "deployment record", env)
    return dataclasses.replace(info, mismatch=(*info.mismatch, claim)) if claim else info


def print_mismatches(console: Any, endpoints: list[Any]) -> None:
    """One line per endpoint whose tag or record names a version that does not serve."""
    for e in endpoints:
        if e.mismatch:
            console.print(
                f"mismatch: {e.name} serves {e.serves or 'no known version'} (read from the endpoint: its live "
                f"config's model); {'; '.join(e.mismatch)}"
            )


def records(ssm: Any, env: str) -> dict[str, DeploymentRecord]:
    """The deployment records of the environment's named endpoints by name (the SSM parameters the deploy's
    Record step writes, hfpipe.contract.deployment_parameter_name, read as DeploymentRecord); {} when none can
    be read. A parameter that holds no record this release reads is named in a warning and left out."""
    prefix = contract.deployment_parameter_name(env, "")
    found: dict[str, DeploymentRecord] = {}
    try:
        for page in ssm.get_paginator("get_parameters_by_path").paginate(Path=prefix.rstrip("/")):
            for parameter in page.get("Parameters", []):
                try:
                    record = DeploymentRecord.from_json(json.loads(parameter["Value"]))
                except ValueError as err:  # not JSON, or DeployPlanFormatError
                    print(f"warning: {parameter['Name']}: not a deployment record: {err}", file=sys.stderr)
                    continue
                found[parameter["Name"].removeprefix(prefix)] = record
    except Exception as exc:  # the table is still worth showing
        print(
            f"warning: {aws_error(exc, f'reading {prefix}*')}; deployment records not shown", file=sys.stderr
        )
    return found


def print_records(console: Any, found: dict[str, DeploymentRecord], env: str) -> None:
    """One line per named endpoint's record: the version, when and by which execution, what it replaced."""
    for name, record in sorted(found.items()):
        version = registry.ref_of_arn(record.model_version_arn, env)
        previous = record.previous_version
        after = f", after {registry.ref_of_arn(previous, env)}" if previous else ""
        console.print(f"{name}: {version} deployed {record.deployed_at} by {record.execution}{after}")


def resolve_name(sagemaker: Any, name: str, env: str) -> str:
    """The SageMaker name of NAME: as given when such an endpoint exists, else hfpipe-<env>-NAME when that one
    does (a named endpoint called by the name cdk.json gives it), else as given."""
    full = contract.deployed_endpoint_name(env, name)
    if name == full:
        return name
    for candidate in (name, full):
        try:
            sagemaker.describe_endpoint(EndpointName=candidate)
            return candidate
        except Exception as exc:
            if not is_not_found(exc):
                raise
    return name


def short_name(endpoint: str, env: str) -> str | None:
    """NAME of hfpipe-<env>-NAME, or None for a name of another shape."""
    prefix = contract.deployed_endpoint_name(env, "")
    return endpoint.removeprefix(prefix) if endpoint.startswith(prefix) and endpoint != prefix else None


def leftovers(sagemaker: Any, env: str, name: str) -> list[Resource]:
    """Every endpoint config and model of this environment deploys made for named endpoint ``name``."""
    found: list[Resource] = []
    for kind in KINDS[1:]:
        for page in sagemaker.get_paginator(kind.list).paginate():
            for item in page[kind.list_key]:
                tags = step(
                    f"reading the tags of {kind.name} {item[kind.name_key]}",
                    tags_of,
                    sagemaker=sagemaker,
                    arn=item[kind.arn_key],
                )
                if is_ours(tags, env) and deployment_of(tags) == name:
                    found.append(
                        Resource(
                            kind, item[kind.name_key], tags.get(contract.TAG_DEPLOY_EXECUTION, "-"), None
                        )
                    )
    return found


def gone(clients: Any, env: str, given: str) -> tuple[str, str, list[str]] | None:
    """For NAME or hfpipe-<env>-NAME whose endpoint no longer exists: (its SageMaker name, NAME, what a named
    endpoint's interrupted delete left that is not a config or model: its autoscaling target, its record), when
    it left anything at all, configs and models included; else None (not a named endpoint, or nothing left)."""
    name = short_name(given, env) or given
    endpoint = contract.deployed_endpoint_name(env, name)
    rest = remaining(clients, env, endpoint, name)
    return (endpoint, name, rest) if rest or leftovers(clients.sagemaker, env, name) else None


def remaining(clients: Any, env: str, endpoint: str, name: str) -> list[str]:
    """The autoscaling target and the deployment record of a named endpoint, those that exist."""
    resource_id, targets = _scalable_targets(clients.client("application-autoscaling"), endpoint)
    found = [f"autoscaling target {resource_id}"] if targets else []
    parameter = contract.deployment_parameter_name(env, name)
    if step(
        f"reading deployment record {parameter}", _unless_gone, call=clients.ssm.get_parameter, name=parameter
    ):
        found.append(f"deployment record {parameter}")
    return found


def forget(clients: Any, env: str, endpoint: str, name: str) -> list[str]:
    """After the endpoint is gone: its autoscaling target and its deployment record; what was removed."""
    removed: list[str] = []
    scaling = clients.client("application-autoscaling")
    resource_id, targets = _scalable_targets(scaling, endpoint)
    for target in targets:
        step(
            f"deregistering the autoscaling target of {endpoint}",
            scaling.deregister_scalable_target,
            ServiceNamespace="sagemaker",
            ResourceId=resource_id,
            ScalableDimension=target["ScalableDimension"],
        )
        removed.append(f"autoscaling target {resource_id}")
    parameter = contract.deployment_parameter_name(env, name)
    if step(
        f"deleting deployment record {parameter}",
        _unless_gone,
        call=clients.ssm.delete_parameter,
        name=parameter,
    ):
        removed.append(f"deployment record {parameter}")
    return removed


def _scalable_targets(scaling: Any, endpoint: str) -> tuple[str, list[dict[str, Any]]]:
    """The autoscaling target's resource ID of ``endpoint`` and the targets registered under it (none or one)."""
    resource_id = f"endpoint/{endpoint}/variant/{VARIANT}"
    targets = step(
        f"reading the autoscaling target of {endpoint}",
        scaling.describe_scalable_targets,
        ServiceNamespace="sagemaker",
        ResourceIds=[resource_id],
    ).get("ScalableTargets", [])
    return resource_id, targets


def _unless_gone(call: Any, name: str) -> bool:
    """SSM's GetParameter or DeleteParameter of ``name``; False when it does not exist (ParameterNotFound: a
    rerun after an interruption finds it gone already)."""
    import botocore.exceptions

    try:
        call(Name=name)
    except botocore.exceptions.ClientError as exc:
        if exc.response.get("Error", {}).get("Code") == "ParameterNotFound":
            return False
        raise
    return True
