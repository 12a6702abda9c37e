"""What an endpoint config serves, and the stand-in traffic local mode sends it.

``served_model``: the container a config's model runs and the recipe it came from. A model created from a
registered version (``Containers=[{"ModelPackageName": <version ARN>}]``, AWS's documented way to deploy a
model package: CreateModel, ContainerDefinition.ModelPackageName; moto accepts and describes such a model
as it is) runs the version's InferenceSpecification container (its ``ModelDataUrl``, ``Image`` and
``Environment``, the model's own ``Environment`` over it); the recipe is the model's ``hfpipe:recipe`` tag, else the version's CustomerMetadataProperties ``recipe`` (which
the Register step writes, hfpipe.core.promotion.registry.metadata, with ``serving_kind``).

``standin_requests``: local mode has no users, so while an endpoint update is under way (hfpipe.local.engine.guardrails)
the emulation sends requests itself, for the endpoint's CloudWatch metrics, and so its alarms, to see what the
fleets do with traffic. They are the recipe's sample request (the smoke test's; hfpipe.kinds' task kind sample
when the recipe names none) and a few requests built from the task kind's fixture data (hfpipe.fixtures, a seed
of their own, not the training split), so inputs vary as real traffic does: short and long contexts, pairs,
dialogues. Without a known recipe only a generic ``{"inputs": ...}`` request is sent.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hfpipe import contract
from hfpipe.core.recipe.typed import Recipe

#: Requests built from fixture data, next to the sample request.
FIXTURE_REQUESTS = 4
#: The fixtures' seed here: neither the training (0) nor the validation split's (1).
SEED = 7
GENERIC_REQUEST = {"inputs": "stand-in request sent by local mode during an endpoint update"}


@dataclass
class ServedModel:
    """What one endpoint config's (first) variant runs."""

    #: DescribeModel's answer.
    model: dict[str, Any]
    variant_name: str
    #: ModelDataUrl, Image and Environment, from the model or from the version it was created from.
    container: dict[str, Any]
    recipe_name: str | None = None
    #: The version's CustomerMetadataProperties (empty for a model not made from a version).
    package_metadata: dict[str, str] = field(default_factory=dict)


def served_model(sagemaker: Any, config_name: str) -> ServedModel:
    """The model of the config's first variant, resolved through its model package when it names one."""
    variant = sagemaker.describe_endpoint_config(EndpointConfigName=config_name)["ProductionVariants"][0]
    model = sagemaker.describe_model(ModelName=variant["ModelName"])
    container, metadata = _container(sagemaker, model)
    return ServedModel(model, variant["VariantName"], container, recipe_name_of(sagemaker, model), metadata)


def recipe_name_of(sagemaker: Any, model: dict[str, Any]) -> str | None:
    """The recipe a model (DescribeModel's answer) came from: its tag, else its version's metadata."""
    tags = {t["Key"]: t["Value"] for t in sagemaker.list_tags(ResourceArn=model["ModelArn"]).get("Tags", [])}
    return tags.get(contract.TAG_RECIPE) or _container(sagemaker, model)[1].get("recipe")


def _container(sagemaker: Any, model: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """(the container a model runs, its version's CustomerMetadataProperties or {})."""
    container = dict(model.get("PrimaryContainer") or (model.get("Containers") or [{}])[0])
    package = container.pop("ModelPackageName", None)
    if not package:
        return container, {}
    version = sagemaker.describe_model_package(ModelPackageName=package)
    spec = dict(version["InferenceSpecification"]["Containers"][0])
    spec["Environment"] = {**(spec.get("Environment") or {}), **(container.get("Environment") or {})}
    return spec, dict(version.get("CustomerMetadataProperties") or {})


def standin_requests(recipe: Recipe | None, count: int = FIXTURE_REQUESTS) -> list[Any]:
    """The sample request, then ``count`` requests from the recipe's fixture data, in its serving kind's shape."""
    if not recipe:
        return [GENERIC_REQUEST]
    from hfpipe.kinds import serving_kind_of, task_kind

    kind = task_kind(recipe["task"])
    serving = serving_kind_of(recipe)
    sample = (recipe.get("serving") or {}).get("sample_request") or kind.request_for(serving.name)
    hyperparameters = (recipe.get("training") or {}).get("hyperparameters") or {}
    fixture = kind.fixture(hyperparameters).name
    requests: list[Any] = [sample]
    for item in _fixture_inputs(fixture, count):
        if serving.speaks_openai:
            from hfpipe.kinds.serving import openai_sample_request

            requests.append(openai_sample_request(str(item)))
        elif isinstance(item, str):  # a dialogue: the sample's generation parameters with it
            requests.append(
                {**({"parameters": sample["parameters"]} if "parameters" in sample else {}), "inputs": item}
            )
        else:
            requests.append({"inputs": item})
    return requests


def _fixture_inputs(fixture: str, count: int) -> list[Any]:
    """``count`` handler inputs from the fixture data set named ``fixture`` (hfpipe.kinds Fixture.name), by
    the function the fixture names (Fixture.handler_inputs)."""
    from hfpipe.fixtures import fixture_handler_inputs
    from hfpipe.kinds import fixture_named

    return fixture_handler_inputs(fixture_named(fixture), count, SEED)
