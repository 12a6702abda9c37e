"""Record: once the new version serves and passed its smoke test, say so where the command and the next deploy
read it, and put the endpoint's declared autoscaling on it.

1. what the endpoint serves is read from it (hfpipe.core.deploy.what_serves: its live config, that config's model, the
   model's package version); unless it is InService, with no update under way, on the deploy's config and that
   config's model is the deploy's version, nothing is written and the step fails, ``NotServingTheNewVersion``,
   naming what serves: a version that does not serve is never recorded over the one that does;
2. the endpoint is tagged with the version (``TAG_MODEL_VERSION``), the deploy execution
   (``TAG_DEPLOY_EXECUTION``) and the version's recipe (``TAG_RECIPE``);
3. the deployment record (hfpipe.core.deploy.deploy_plan.DeploymentRecord, from ``DeployPlan.recorded``: its version,
   config and model as the endpoint gave them) is written, as JSON, to the SSM parameter ``contract.deployment_parameter_name(env,
   NAME)``; it is also the step's result and the execution's output;
4. the variant's autoscaling becomes what cdk.json declares (deploy_common.apply_scaling).

Every step writes the same values again on a rerun, so a retried invocation finishes what a failed one began.
The tag, the record and the autoscaling are each tried whatever the others did: when one fails, the step
fails ``RecordIncomplete``, naming what serves (read from the endpoint) and what could not be written, and the
state machine ends there (``RecordIncomplete``) without DeployCleanup: the new version serves and passed its
smoke test, nothing is to be removed; a rerun of the same deploy finds it serving with a record or tag that
does not say so (Prepare's action ``record``) and writes them.
"""

from __future__ import annotations

import json
import os
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from hfpipe import contract
from hfpipe.core.deploy.deploy_plan import DeploymentRecord, DeployPlan
from hfpipe.core.deploy.what_serves import what_serves
from pipeline_lambdas import aws
from pipeline_lambdas.deploy_common import apply_scaling

LOG = aws.logger(__name__)


class RecordIncomplete(Exception):
    """The new version serves and passed its smoke test, but its tag, record or autoscaling could not all be
    written: the error names what serves and what is missing; a rerun of the deploy writes them."""


class NotServingTheNewVersion(Exception):
    """The endpoint does not serve this deploy's version on its config (read from the endpoint): nothing is
    recorded, and the error says what serves."""


def record(
    plan: DeployPlan,
    execution_name: str,
    env: str,
    clients: dict[str, Any],
    now: datetime | None = None,
) -> dict[str, Any]:
    """Tag, record and scale; returns the deployment record."""
    sagemaker = clients["sagemaker"]
    endpoint_name, version = plan.endpoint_name, plan.model_version_arn
    serving = what_serves(sagemaker, endpoint_name)
    if serving is None or not serving.serves(version, plan.endpoint_config_name):
        found = "does not exist" if serving is None else serving.describe(env)
        raise NotServingTheNewVersion(
            f"endpoint {endpoint_name}: {found}; expected InService on {plan.endpoint_config_name} serving "
            f"{plan.version_ref} ({version}): nothing recorded, the endpoint's tag and "
            "deployment record are left as they were"
        )
    deployed_at = (now or datetime.now(UTC)).isoformat(timespec="seconds")
    # What the endpoint said, not what the deploy intended (they agree: checked just above).
    served = replace(
        plan,
        model_version_arn=str(serving.version_arn),
        endpoint_config_name=serving.config,
        model_name=serving.live.model if serving.live else None,
    )
    result = served.recorded(plan.deployed_by or execution_name, deployed_at)
    failed = _write_claims(clients, serving.arn, result, env, plan)
    try:
        scaling = apply_scaling(
            clients["application-autoscaling"], endpoint_name, plan.settings.autoscaling, env
        )
    except Exception as err:
        failed.append(f"its declared autoscaling ({type(err).__name__}: {err})")
        scaling = None
    if failed:
        aws.log_json(LOG, "deployment record incomplete", failed=failed, **result.to_json())
        raise RecordIncomplete(
            f"endpoint {endpoint_name} serves {serving.describe(env)}, read from it, and passed its smoke "
            f"test; could not write {'; '.join(failed)}: a rerun of `hfpipe deploy --env {env} --model "
            f"{plan.version_ref} --endpoint {plan.name}` finds it serving and writes them (nothing else changes)"
        )
    aws.log_json(LOG, "deployment recorded", autoscaling=scaling, **result.to_json())
    return result.to_json()


def _write_claims(
    clients: dict[str, Any], endpoint_arn: Any, result: DeploymentRecord, env: str, plan: DeployPlan
) -> list[str]:
    """Tag the endpoint and write the record, each tried whatever the other did (so they follow what serves as
    far as AWS lets them); what could not be written."""
    failed: list[str] = []
    try:
        clients["sagemaker"].add_tags(
            ResourceArn=endpoint_arn,
            Tags=[
                {"Key": contract.TAG_MODEL_VERSION, "Value": result.model_version_arn},
                {"Key": contract.TAG_DEPLOY_EXECUTION, "Value": result.execution},
                {"Key": contract.TAG_RECIPE, "Value": result.recipe},
            ],
        )
    except Exception as err:
        failed.append(
            f"the endpoint's tag {contract.TAG_MODEL_VERSION} (AddTags: {type(err).__name__}: {err})"
        )
    parameter = contract.deployment_parameter_name(env, plan.name)
    try:
        clients["ssm"].put_parameter(
            Name=parameter,
            Description=f"hfpipe {env}: the model version endpoint {plan.endpoint_name} serves (written by each deploy)",
            Value=json.dumps(result.to_json(), sort_keys=True),
            Type="String",
            Overwrite=True,
        )
    except Exception as err:
        failed.append(f"the deployment record {parameter} (PutParameter: {type(err).__name__}: {err})")
    return failed


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Event: {"deploy": <Prepare's result>, "execution_name": <name>}."""
    aws.bind(event)
    return record(
        DeployPlan.from_json(event["deploy"]),
        str(event["execution_name"]),
        os.environ["HFPIPE_ENV"],
        {s: aws.client(s) for s in ("sagemaker", "ssm", "application-autoscaling")},
    )
