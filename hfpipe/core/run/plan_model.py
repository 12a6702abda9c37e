"""The plan as a type: the one contract between the core, the state machine, the Lambdas and the command.

``hfpipe.core.run.plan.build_plan`` returns a ``Plan``; the Plan Lambda returns ``plan.to_json()``, which the
state machine keeps at ``$.plan`` (its JSONPaths come from ``Plan.path``, so a renamed field breaks the
synth and its test, not an execution); every other Lambda and the command read it back with
``Plan.from_json``, which accepts exactly this schema version's fields with their types and refuses
anything else with one line naming the field (``PlanFormatError``; the reader is hfpipe.core.typed_json's). Dict-typed fields are only those whose
content is an AWS request, a tag list or the recipe's free-form sample request.

Stdlib only: the Lambda bundle copies the core.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hfpipe.core.names import PlannedNames
from hfpipe.core.typed_json import Document, Typed

#: Raised with every change of a field's name, meaning or type; a reader refuses any other version, so
#: a plan written by another release is never half-understood.
# 2: serving_production_variants; 3: hyperparameters_not_checked; 4: adapter_base_model; 5: hosting_tags;
# 6: evaluation
SCHEMA_VERSION = 6
#: Where the state machine keeps the plan (the Plan task's ResultPath).
ROOT_PATH = "$.plan"


class PlanFormatError(ValueError):
    """A document that is not a plan of this schema version; the message is one line naming the field."""


DOCUMENT = Document(name="plan", root=ROOT_PATH, version=SCHEMA_VERSION, error=PlanFormatError)


@dataclass(frozen=True, kw_only=True)
class Gate:
    """The recipe's evaluation gate; ``enabled`` false (and the rest null) when the recipe has none."""

    enabled: bool
    metric: str | None
    threshold: float | None
    higher_is_better: bool

    def __post_init__(self) -> None:
        # An enabled gate without its metric or threshold would have nothing to compare: not a gate.
        for name in ("metric", "threshold"):
            if self.enabled and getattr(self, name) is None:
                raise PlanFormatError(
                    f"plan.gate.{name}: null is not accepted when plan.gate.enabled is true"
                )


@dataclass(frozen=True, kw_only=True)
class Evaluation:
    """The recipe's evaluation job (docs/evaluation.md; hfpipe.core.run.evaluation_job): the CreateProcessingJob
    request without its models, where the champion is read (the execution input's ``champion``: a named
    endpoint's SageMaker name or an adapter on the shared base; both null: the run names none, the job
    scores the challenger alone), and the job's instance and price for the report."""

    processing_job_name: str
    request: dict[str, Any]
    target_endpoint: str | None
    target_adapter: str | None
    instance_type: str
    instance_count: int
    price_per_hour_usd: float | None
    #: The contract's document, s3://<artifacts>/evaluations/<execution>/evaluation.json.
    document_uri: str


class Plan(Typed, document=DOCUMENT):
    """Everything an execution needs, decided once by the Plan task from the input and the environment."""

    execution_name: str
    recipe_name: str
    task: str
    #: How the endpoint serves (hfpipe/kinds); "hf-inference" when the recipe does not say.
    serving_kind: str
    env: str
    training_job_name: str
    model_name: str
    endpoint_config_name: str
    endpoint_name: str
    instance_type: str
    instance_count: int
    serving_instance_type: str
    serving_instance_count: int
    #: CreateEndpointConfig's ProductionVariants as sent (hfpipe.core.deploy.fleets.production_variant: the
    #: serving kind's host image among them).
    serving_production_variants: list[dict[str, Any]]
    spot: bool
    price_per_hour_usd: float | None
    estimated_cost_usd: float | None
    estimated_hours: float
    deploy: bool
    keep_endpoint: bool
    #: The endpoint wait loop's interval and count (counted down: the overall limit on InService).
    poll_seconds: int
    endpoint_max_polls: int
    #: The longest Launch waits for its job (its MaxRuntime or MaxWait plus a margin, from CreationTime).
    training_wait_seconds: int
    checkpoint_s3_uri: str | None
    image_uri: str
    inference_image_uri: str | None
    role_arn: str
    serving_environment: dict[str, str]
    sample_request: dict[str, Any]
    expected_keys: list[str]
    max_latency_ms: float
    gate: Gate
    tags: list[dict[str, str]]
    #: The tags of the model, endpoint config and endpoint: ``tags`` and, where the run has a time to live,
    #: ``hfpipe:expires-at`` (hfpipe.core.deploy.expiry), counted from the Plan.
    hosting_tags: list[dict[str, str]]
    training_job_request: dict[str, Any]
    #: Why a recipe's own script's hyperparameters were not checked against its parser (it cannot be read
    #: without running the script: hfpipe.core.recipe.sources.not_checked); null when they were, or for the
    #: project's scripts. The report says it.
    hyperparameters_not_checked: str | None
    #: The Hub id of the base an adapter recipe's unmerged adapter needs (``recipe.adapter.base_model``):
    #: the run registers the adapter without an endpoint of its own (``deploy`` is false), to be served on
    #: the environment's shared base; null for every other recipe.
    adapter_base_model: str | None
    #: The recipe's evaluation job, null for a recipe without ``evaluation`` (schema 6 added it).
    evaluation: Evaluation | None

    @property
    def names(self) -> PlannedNames:
        """The environment, execution and resource names: what clean-up needs of the plan."""
        return PlannedNames(
            env=self.env,
            execution_name=self.execution_name,
            training_job_name=self.training_job_name,
            model_name=self.model_name,
            endpoint_config_name=self.endpoint_config_name,
            endpoint_name=self.endpoint_name,
        )
