"""The deploy plan as a type: what the deploy's Prepare step decided, read by the deploy state machine, its
Lambdas and the command through this one definition (as the pipeline's ``Plan``, hfpipe/core/run/plan_model.py).

Prepare (lambda/pipeline/pipeline_lambdas/deploy_prepare.py) builds a ``DeployPlan`` once and returns
``plan.to_json()``, which the deploy state machine keeps at ``$.deploy``: every JSONPath it reads comes from
``DeployPlan.path`` (stacks/constructs/deploy_state_machine.py), so a renamed field breaks the synth and its test,
not an execution. Record, DeployCleanup, the approval re-checks and ``hfpipe deploy`` read it back with
``DeployPlan.from_json``, which accepts exactly this schema version's fields with their types and refuses
anything else with one line naming the field (``DeployPlanFormatError``). Dict-typed fields are only AWS
requests (``requests``). The deployment record (``DeploymentRecord``, ``DeployPlan.recorded``) is the
deploy's output and the endpoint's SSM parameter, read the same way.

Stdlib only: the Lambda bundle copies the core.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hfpipe.core.deploy import deploy_limits
from hfpipe.core.deploy.deploy_requests import SmokeSpec, VersionInfo
from hfpipe.core.deploy.deployments import EndpointSettings
from hfpipe.core.typed_json import Document, Typed

#: Raised with every change of a field's name, meaning or type (of the plan, of the record).
SCHEMA_VERSION = 3  # 2: input.ttl; 3: input.override_evaluation
RECORD_SCHEMA_VERSION = 1
#: Where the deploy state machine keeps the plan (Prepare's ResultPath).
ROOT_PATH = "$.deploy"
#: What the deploy does: ``create`` (no endpoint yet), ``update`` (blue/green to the new config), ``none``
#: (the version serves and its record says so), ``record`` (it serves, its record was not written: smoke test
#: and Record again), ``wait`` (an update whose rollback alarms are in ALARM: wait, then Prepare again).
ACTIONS = ("create", "update", "none", "record", "wait")


class DeployPlanFormatError(ValueError):
    """A document that is not a deploy plan of this schema version; the message is one line naming the field."""


DOCUMENT = Document(name="deploy", root=ROOT_PATH, version=SCHEMA_VERSION, error=DeployPlanFormatError)
#: The record is the execution's output (Deployed's, AlreadyServing's) and an SSM parameter's value.
RECORD = Document(name="record", root="$", version=RECORD_SCHEMA_VERSION, error=DeployPlanFormatError)


@dataclass(frozen=True, kw_only=True)
class DeployInput:
    """The execution input Prepare accepted (PrepareAgain hands it back after a wait)."""

    version: str
    endpoint: str
    #: `hfpipe deploy --ttl` as given (90m, 8h, 3d or none; hfpipe.core.deploy.expiry); null: the environment's.
    ttl: str | None = None
    #: `hfpipe deploy --override-evaluation` as given: the reason Prepare's evaluation gate is passed with
    #: (hfpipe.core.promotion.evaluation_gate); null: none.
    override_evaluation: str | None = None


@dataclass(frozen=True, kw_only=True)
class PreviousDeploy:
    """What served before this deploy: the way back of an update (fields the endpoint or its record did not
    give are null)."""

    endpoint_config_name: str | None
    model_version_arn: str | None
    model_name: str | None
    instance_type: str | None


@dataclass(frozen=True, kw_only=True)
class AlarmWait:
    """A wait for rollback alarms in ALARM before an update writes anything (deploy_guards.alarm_wait)."""

    since: str
    alarms: list[str]
    polls: int
    waited_seconds: int
    wait_seconds: int
    poll_seconds: int


@dataclass(frozen=True, kw_only=True)
class DeployRequests:
    """The requests the state machine sends as built (hfpipe.core.deploy.deploy_requests, checked against botocore's
    shapes by Prepare); null where this action sends none. ``Rollback`` is the UpdateEndpoint back to the
    previous config."""

    CreateModel: dict[str, Any] | None = None
    CreateEndpointConfig: dict[str, Any] | None = None
    CreateEndpoint: dict[str, Any] | None = None
    UpdateEndpoint: dict[str, Any] | None = None
    Rollback: dict[str, Any] | None = None


class DeployPlan(Typed, document=DOCUMENT):
    """What one deploy of a registered version to a named endpoint does, decided once by Prepare."""

    action: str
    input: DeployInput
    #: The endpoint's name in cdk.json and in SageMaker (hfpipe-<env>-NAME).
    name: str
    endpoint_name: str
    model_version_arn: str
    model_package_group: str
    recipe: str
    version: int
    version_ref: str
    settings: EndpointSettings
    smoke: SmokeSpec
    #: The endpoint wait's interval and bounds (hfpipe.core.deploy.deploy_limits).
    poll_seconds: int
    max_polls: int
    rollback_max_polls: int
    #: What serves before this deploy (update, record); the rest of the fields until ``requests`` are what
    #: Prepare finds or decides after its first look (``first``: none of it yet).
    previous: PreviousDeploy | None = None
    #: Prepare deregistered the endpoint's autoscaling (an instance type change): DeployCleanup puts it back.
    scaling_deregistered: bool = False
    #: The model and config this deploy makes (create, update) or that serve already (none, record).
    model_name: str | None = None
    endpoint_config_name: str | None = None
    instance_type: str | None = None
    instance_count: int | None = None
    requests: DeployRequests = field(default_factory=DeployRequests)
    #: The execution that put the serving config there (none, record), from the config's tag.
    deployed_by: str | None = None
    #: The stored deployment record when it already says this version serves (action none).
    record: DeploymentRecord | None = None
    #: The wait under way (action wait), and the one this look followed.
    alarm_wait: AlarmWait | None = None
    waited_for_alarms: AlarmWait | None = None

    def __post_init__(self) -> None:
        if self.action not in ACTIONS:
            raise DeployPlanFormatError(
                f"deploy.action: {self.action!r} is not accepted; accepted: {', '.join(ACTIONS)}"
            )

    @classmethod
    def first(
        cls, wanted: DeployInput, settings: EndpointSettings, env: str, version: VersionInfo, smoke: SmokeSpec
    ) -> DeployPlan:
        """Prepare's first look: the version (``version``, approved) on the endpoint the input names, its smoke
        test and the waits' bounds (hfpipe.core.deploy.deploy_limits); nothing made or served yet (``create`` until the
        endpoint is looked at)."""
        return cls(
            action="create",
            input=wanted,
            name=wanted.endpoint,
            endpoint_name=settings.endpoint_name(env),
            model_version_arn=version.arn,
            model_package_group=version.group,
            recipe=version.recipe,
            version=version.number,
            version_ref=version.ref,
            settings=settings,
            smoke=smoke,
            poll_seconds=deploy_limits.POLL_SECONDS,
            max_polls=deploy_limits.endpoint_polls(settings),
            rollback_max_polls=deploy_limits.ROLLBACK_POLLS,
        )

    def recorded(self, execution_name: str, deployed_at: str) -> DeploymentRecord:
        """The record of this plan once it serves (Record passes the plan with what the endpoint said)."""
        previous = self.previous
        return DeploymentRecord(
            name=self.name,
            endpoint=self.endpoint_name,
            model_version_arn=self.model_version_arn,
            model_package_group=self.model_package_group,
            recipe=self.recipe,
            version=self.version,
            endpoint_config=self.endpoint_config_name,
            model=self.model_name,
            instance_type=self.instance_type,
            instance_count=self.instance_count,
            deployed_at=deployed_at,
            execution=execution_name,
            previous_version=previous.model_version_arn if previous else None,
            previous_endpoint_config=previous.endpoint_config_name if previous else None,
        )

    @classmethod
    def request_path(cls, operation: str, member: str) -> str:
        """The path of ``member`` of the request ``operation`` (a field of ``DeployRequests``): the plan's part
        checked by ``path``, the member AWS's (the request as Prepare built it)."""
        return f"{cls.path('requests', operation)}.{member}"


class DeploymentRecord(Typed, document=RECORD):
    """Which version serves where, since when, put there by which execution: what Record writes, as JSON, to
    the endpoint's SSM parameter (contract.deployment_parameter_name) and the deploy state machine outputs;
    Prepare, ``hfpipe deploy`` and ``hfpipe endpoints`` read it back with ``from_json``. A record another
    release wrote (another schema version) is refused: Prepare then smoke-tests and records again."""

    name: str
    endpoint: str
    model_version_arn: str
    model_package_group: str
    recipe: str
    version: int
    endpoint_config: str | None
    model: str | None
    instance_type: str | None
    instance_count: int | None
    deployed_at: str
    execution: str
    previous_version: str | None
    previous_endpoint_config: str | None


def alarm_wait_from_json(doc: Any) -> AlarmWait | None:
    """The ``alarm_wait`` PrepareAgain hands back (null before the first wait)."""
    if doc is None:
        return None
    wait = DOCUMENT.read_part(AlarmWait, doc, f"{DOCUMENT.name}.alarm_wait")
    assert isinstance(wait, AlarmWait)
    return wait
