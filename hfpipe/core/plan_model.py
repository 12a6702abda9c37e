"""The plan as a type: the one contract between the core, the state machine, the Lambdas and the command.

``hfpipe.core.plan.build_plan`` returns a ``Plan``; the Plan Lambda returns ``plan.to_json()``, which the
state machine keeps at ``$.plan`` (its JSONPaths come from ``Plan.path``, so a renamed field breaks the
synth and its test, not an execution); every other Lambda and the command read it back with
``Plan.from_json``, which accepts exactly this schema version's fields with their types and refuses
anything else with one line naming the field (``PlanFormatError``). Dict-typed fields are only those whose
content is an AWS request, a tag list or the recipe's free-form sample request.

Stdlib only: the Lambda bundle copies the core.
"""

from __future__ import annotations

import types
from dataclasses import asdict, dataclass, fields, is_dataclass
from functools import cache
from typing import Any, Union, get_args, get_origin, get_type_hints

from hfpipe.core.names import PlannedNames

#: Raised with every change of a field's name, meaning or type; a reader refuses any other version, so
#: a plan written by another release is never half-understood.
SCHEMA_VERSION = 3  # 2: serving_production_variants; 3: hyperparameters_not_checked
#: Where the state machine keeps the plan (the Plan task's ResultPath).
ROOT_PATH = "$.plan"


class PlanFormatError(ValueError):
    """A document that is not a plan of this schema version; the message is one line naming the field."""


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
class Plan:
    """Everything an execution needs, decided once by the Plan task from the input and the environment."""

    schema_version: int = SCHEMA_VERSION
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
    #: CreateEndpointConfig's ProductionVariants as sent (hfpipe.core.fleets.production_variant: the
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
    training_job_request: dict[str, Any]
    #: Why a recipe's own script's hyperparameters were not checked against its parser (it cannot be read
    #: without running the script: hfpipe.core.sources.not_checked); null when they were, or for the
    #: project's scripts. The report says it.
    hyperparameters_not_checked: str | None

    def to_json(self) -> dict[str, Any]:
        """The plan as a JSON-able dict (what the Plan Lambda returns and the state machine keeps)."""
        return asdict(self)

    @classmethod
    def from_json(cls, doc: Any) -> Plan:
        """The plan in ``doc``, or PlanFormatError for another schema version, a missing, unknown or
        wrongly typed field."""
        if not isinstance(doc, dict):
            raise PlanFormatError(f"plan: expected a JSON object, got {type(doc).__name__}")
        # The version first: a plan of another version is refused as such, not for its first odd field.
        if "schema_version" not in doc:
            raise PlanFormatError(
                "plan.schema_version: missing; accepted: a plan written with schema_version"
            )
        version = doc["schema_version"]
        if isinstance(version, bool) or version != SCHEMA_VERSION:
            raise PlanFormatError(
                f"plan.schema_version: {_shown(version)} is not accepted; accepted: {SCHEMA_VERSION} (the "
                "version this hfpipe reads; a plan of another version came from another release)"
            )
        plan = _read(cls, doc, "plan")
        assert isinstance(plan, Plan)
        return plan

    @classmethod
    def path(cls, *parts: str) -> str:
        """The state machine's JSONPath of a field (``Plan.path("gate", "enabled")`` is
        ``$.plan.gate.enabled``); ValueError for a name the plan does not have."""
        kind: Any = cls
        for i, part in enumerate(parts):
            hints = _hints(kind) if isinstance(kind, type) and is_dataclass(kind) else {}
            if part not in hints:
                raise ValueError(
                    f"Plan.path: {'.'.join(parts[: i + 1])!r} is not a field of the plan "
                    f"(schema version {SCHEMA_VERSION})"
                )
            kind = hints[part]
        return ".".join((ROOT_PATH, *parts))

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


@cache
def _hints(kind: Any) -> dict[str, Any]:
    """A dataclass's field types, resolved (the annotations are strings under ``from __future__``)."""
    names = {f.name for f in fields(kind)}
    return {k: v for k, v in get_type_hints(kind).items() if k in names}


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _type_name(hint: Any) -> str:
    if hint is Any:
        return "any JSON value"
    if get_origin(hint) in (Union, types.UnionType):
        return " or ".join(_type_name(a) for a in get_args(hint))
    if hint is type(None):
        return "null"
    if is_dataclass(hint):
        return "an object"
    if get_origin(hint) is list:
        return f"a list of {_type_name(get_args(hint)[0])}"
    if get_origin(hint) is dict:
        return f"an object of {_type_name(get_args(hint)[1])}"
    return {bool: "a boolean", int: "an integer", float: "a number", str: "a string"}[hint]


def _read(kind: Any, doc: Any, where: str) -> Any:
    """A dataclass from its JSON object: every field present, none unknown, each of its type."""
    if not isinstance(doc, dict):
        raise PlanFormatError(f"{where}: {_shown(doc)} is not accepted; accepted: an object")
    hints = _hints(kind)
    unknown = sorted(set(doc) - set(hints))
    if unknown:
        raise PlanFormatError(
            f"{where}.{unknown[0]}: unknown field; accepted: the fields of plan schema version "
            f"{SCHEMA_VERSION}"
        )
    missing = [name for name in hints if name not in doc]
    if missing:
        raise PlanFormatError(
            f"{where}.{missing[0]}: missing; plan schema version {SCHEMA_VERSION} requires it"
        )
    return kind(**{name: _value(doc[name], hint, f"{where}.{name}") for name, hint in hints.items()})


def _value(value: Any, hint: Any, where: str) -> Any:
    """``value`` checked against ``hint`` (nested dataclasses built), or PlanFormatError naming ``where``."""
    if hint is Any:
        return value
    if get_origin(hint) in (Union, types.UnionType):
        options = get_args(hint)
        if value is None and type(None) in options:
            return None
        for option in options:
            if option is not type(None):
                try:
                    return _value(value, option, where)
                except PlanFormatError:
                    continue
        raise PlanFormatError(f"{where}: {_shown(value)} is not accepted; accepted: {_type_name(hint)}")
    if is_dataclass(hint):
        return _read(hint, value, where)
    origin = get_origin(hint)
    if origin is list and isinstance(value, list):
        return [_value(item, get_args(hint)[0], f"{where}[{i}]") for i, item in enumerate(value)]
    if origin is dict and isinstance(value, dict):
        for key in value:
            if not isinstance(key, str):  # JSON keys always are; a dict built in Python may not be
                raise PlanFormatError(f"{where}: key {_shown(key)} is not accepted; accepted: a string")
        return {key: _value(item, get_args(hint)[1], f"{where}.{key}") for key, item in value.items()}
    ok = (
        (hint is bool and isinstance(value, bool))
        or (hint is int and isinstance(value, int) and not isinstance(value, bool))
        or (hint is float and isinstance(value, int | float) and not isinstance(value, bool))
        or (hint is str and isinstance(value, str))
    )
    if not ok:
        raise PlanFormatError(f"{where}: {_shown(value)} is not accepted; accepted: {_type_name(hint)}")
    return value
