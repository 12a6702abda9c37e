"""What the deploy's Lambdas (deploy_prepare.py, deploy_record.py, deploy_cleanup.py) share: reading a named
endpoint with its tags, and its autoscaling.

Autoscaling and blue/green updates ("Update endpoints that use auto scaling",
https://docs.aws.amazon.com/sagemaker/latest/dg/endpoint-scaling-update.html): an UpdateEndpoint that would
change the instance type of a variant registered with Application Auto Scaling fails, so its scalable target
must be deregistered first (which deletes its scaling policies) and registered again after the update;
changing only the model is allowed as is. Auto scaling is blocked while the update runs, so the new fleet
starts as large as the old one is now (deploy_prepare.py). Prepare deregisters when the instance type
changes, Record registers the declared target and policy once the new version serves, and DeployCleanup puts
them back on the old fleet when the deploy fails after Prepare.
"""

from __future__ import annotations

from typing import Any

from hfpipe import contract
from hfpipe.core.deploy import deploy_requests as requests
from hfpipe.core.deploy.deployments import Autoscaling
from hfpipe.core.run import cleanup as rule
from hfpipe.core.throttling import error_code


def describe_endpoint(sagemaker: Any, name: str) -> dict[str, Any] | None:
    """DescribeEndpoint, or None when there is no such endpoint."""
    return rule.describe_or_none(sagemaker.describe_endpoint, EndpointName=name)


def describe_config(sagemaker: Any, name: str) -> dict[str, Any] | None:
    """DescribeEndpointConfig, or None when there is no such config."""
    return rule.describe_or_none(sagemaker.describe_endpoint_config, EndpointConfigName=name)


def is_deploy_made(tags: dict[str, str], env: str, name: str) -> bool:
    """Made by a deploy of this environment for the named endpoint ``name`` (its tags say so)."""
    return rule.is_ours(tags, env) and tags.get(contract.TAG_DEPLOYMENT) == name


def scalable_target(autoscaling: Any, endpoint_name: str) -> dict[str, Any] | None:
    """The variant's registered scalable target, or None."""
    found = autoscaling.describe_scalable_targets(
        ServiceNamespace=requests.SCALING_NAMESPACE,
        ResourceIds=[requests.scaling_resource_id(endpoint_name)],
        ScalableDimension=requests.SCALING_DIMENSION,
    ).get("ScalableTargets", [])
    return dict(found[0]) if found else None


def claim_target(autoscaling: Any, target: dict[str, Any], env: str) -> bool:
    """Tag a registered scalable target with the environment's tags (TagResource: a target registered before
    the deploy tagged its targets gets them; AddTags semantics, so a tagged one is unchanged). The role may
    write only on targets tagged so, and may tag only targets that have no tags or this environment's
    (stacks/functions/common.py, grant_endpoint_scaling). False when the target is gone meanwhile."""
    try:
        autoscaling.tag_resource(ResourceARN=target["ScalableTargetARN"], Tags=requests.scaling_tags(env))
    except Exception as err:
        if error_code(err) != "ResourceNotFoundException":
            raise
        return False
    return True


def apply_scaling(
    autoscaling: Any, endpoint_name: str, scaling: Autoscaling | None, env: str
) -> dict[str, Any] | None:
    """Make the variant's autoscaling what cdk.json declares: register the target (tagged for ``env``) and put
    the target tracking policy (both create or update), or deregister a target the declaration no longer has.
    Returns what is in force (None: no autoscaling)."""
    if scaling is None:
        remove_scaling(autoscaling, endpoint_name, env)
        return None
    target = scalable_target(autoscaling, endpoint_name)
    if target is not None:
        claim_target(autoscaling, target, env)  # gone meanwhile: the registration below creates it, tagged
    autoscaling.register_scalable_target(**requests.scalable_target_request(endpoint_name, scaling, env))
    autoscaling.put_scaling_policy(**requests.scaling_policy_request(endpoint_name, scaling))
    return {
        "min_instances": scaling.min_instances,
        "max_instances": scaling.max_instances,
        "invocations_per_instance": scaling.invocations_per_instance,
    }


def remove_scaling(autoscaling: Any, endpoint_name: str, env: str) -> bool:
    """Deregister the variant's scalable target (its policies go with it); True when there was one."""
    target = scalable_target(autoscaling, endpoint_name)
    if target is None or not claim_target(autoscaling, target, env):
        return False
    try:
        autoscaling.deregister_scalable_target(
            ServiceNamespace=requests.SCALING_NAMESPACE,
            ResourceId=requests.scaling_resource_id(endpoint_name),
            ScalableDimension=requests.SCALING_DIMENSION,
        )
    except Exception as err:
        if error_code(err) != "ObjectNotFoundException":  # deregistered meanwhile
            raise
    return True
