"""What the deploy re-checks besides Prepare's first look (deploy_prepare.py, whose function runs both): one
deploy at a time per endpoint (the deploy state machine's RUNNING executions, ``other_deploy``), and the
version's approval right before traffic moves and before the record is written (``recheck_approval``).
"""

from __future__ import annotations

import json
from typing import Any

from pipeline_lambdas.deploy_common import describe_endpoint


class VersionRejectedDuringDeploy(Exception):
    """The version is no longer Approved (re-checked before traffic moves and before the record is written)."""


def other_deploy(stepfunctions: Any, state_machine_arn: str, execution_name: str, name: str) -> str | None:
    """The RUNNING execution of the deploy state machine for endpoint ``name`` that goes first, if it is not
    this one: the earliest started (then the least name), so of two deploys that see each other one goes on.
    ListExecutions is eventually consistent (API reference: "results are best effort and may not reflect very
    recent updates"); an execution it does not list yet is caught by its own Prepare, which sees this one."""
    running: list[tuple[Any, str, str]] = []
    paginator = stepfunctions.get_paginator("list_executions")
    for page in paginator.paginate(stateMachineArn=state_machine_arn, statusFilter="RUNNING"):
        for execution in page.get("executions", []):
            described = stepfunctions.describe_execution(executionArn=execution["executionArn"])
            try:
                endpoint = json.loads(described.get("input") or "{}").get("endpoint")
            except (ValueError, AttributeError):
                endpoint = None
            if endpoint == name or execution["name"] == execution_name:
                running.append((execution["startDate"], execution["name"], execution["executionArn"]))
    # Not listed yet itself, this execution is the newest: any listed one goes first.
    first = min(running, default=None)
    return f"{first[1]} (started {first[0]})" if first and first[1] != execution_name else None


def recheck_approval(sagemaker: Any, prepared: dict[str, Any], before: str) -> dict[str, Any]:
    """The version is still Approved ``before`` traffic moves or the record is written; else
    VersionRejectedDuringDeploy saying what the endpoint serves and what the state machine does next."""
    status = sagemaker.describe_model_package(ModelPackageName=prepared["model_version_arn"]).get(
        "ModelApprovalStatus", ""
    )
    if status == "Approved":
        return {"status": status}
    endpoint = describe_endpoint(sagemaker, prepared["endpoint_name"])
    serving = (
        f"{prepared['endpoint_name']} serves config {endpoint.get('EndpointConfigName')} "
        f"({endpoint.get('EndpointStatus')})"
        if endpoint
        else f"{prepared['endpoint_name']} does not exist"
    )
    then = (
        "the previous config is put back"
        if prepared.get("action") == "update" and before == "the record is written"
        else "what this deploy made is cleaned up"
    )
    raise VersionRejectedDuringDeploy(
        f"version {prepared.get('version_ref')} ({prepared['model_version_arn']}) is {status or 'without a status'} "
        f"now, checked before {before}: it was Approved when the deploy started; endpoint {serving}; {then}, "
        "and nothing is recorded"
    )
