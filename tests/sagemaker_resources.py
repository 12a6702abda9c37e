"""SageMaker serving resources made in moto for the tests: a model, its endpoint config and (when named) the
endpoint, each with the tags given. Shared by the clean-up, rerun, forged-plan, named-endpoint and leftover
tests (tests/cli, tests/hostile, tests/core)."""

from __future__ import annotations

from typing import Any


def serving_resources(
    sm: Any,
    *,
    model: str,
    config: str,
    role: str,
    tags: list[dict[str, str]],
    endpoint: str | None = None,
    instance_type: str = "ml.m5.large",  # moto knows no g5 types
    **container: Any,
) -> None:
    """CreateModel ``model`` (``container``: its PrimaryContainer or Containers), CreateEndpointConfig
    ``config`` (one variant, AllTraffic, one instance) and, when ``endpoint`` is named, CreateEndpoint."""
    sm.create_model(ModelName=model, ExecutionRoleArn=role, Tags=tags, **container)
    variant = {"VariantName": "AllTraffic", "ModelName": model, "InitialInstanceCount": 1}
    sm.create_endpoint_config(
        EndpointConfigName=config, ProductionVariants=[{**variant, "InstanceType": instance_type}], Tags=tags
    )
    if endpoint is not None:
        sm.create_endpoint(EndpointName=endpoint, EndpointConfigName=config, Tags=tags)


def run_hosting(sm: Any, names: Any, role: str, tags: list[dict[str, str]], image: str) -> None:
    """A run's model, endpoint config and endpoint (``names``: a Plan or PlannedNames) on an ml.g4dn.xlarge,
    serving ``image``."""
    serving_resources(
        sm,
        model=names.model_name,
        config=names.endpoint_config_name,
        endpoint=names.endpoint_name,
        role=role,
        tags=tags,
        instance_type="ml.g4dn.xlarge",
        PrimaryContainer={"Image": image, "ModelDataUrl": "s3://a/model.tar.gz"},
    )
