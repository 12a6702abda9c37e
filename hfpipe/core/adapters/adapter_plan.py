"""The adapter plan as a type: what the adapter state machine's Apply step decided, read by its later states,
its function and ``hfpipe deploy --adapter`` through this one definition (as the deploy's ``DeployPlan``,
hfpipe/core/deploy/deploy_plan.py, on hfpipe/core/typed_json.py).

Apply returns ``AdapterPlan.to_json()``, which the state machine keeps at ``$.plan``: every JSONPath it reads of
it comes from ``AdapterPlan.path`` (stacks/constructs/adapter_state_machine.py), so a renamed field breaks the
synth and its test, not an execution. The later steps (WaitAdapter, BakeCheck, Confirm, WayBack,
WayBackSettled) and the command read it back with ``AdapterPlan.from_json``, which accepts exactly this
schema version's fields with their types and refuses anything else in one line naming the field. A delete's
and a retirement's answers are typed the same way (``AdapterDeleted``, ``BaseRetired``), and the steps the
function runs are one tuple (``STEPS``) that the state machine's payloads are checked against at synth.

Stdlib only: the Lambda bundle copies the core.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hfpipe.core.deploy.deploy_requests import SmokeSpec
from hfpipe.core.typed_json import Document, Typed

#: Raised with every change of a field's name, meaning or type.
SCHEMA_VERSION = 1
#: Where the adapter state machine keeps the plan (Apply's ResultPath).
ROOT_PATH = "$.plan"
#: What the execution input asks (its ``action``).
REQUESTS = ("deploy", "rollback", "delete", "retire")
#: What Apply did to the adapter's component (the plan's ``action``).
CHANGES = ("created", "updated", "unchanged")
#: The adapter function's steps, one per state that invokes it (the payload's ``step``).
STEPS = ("apply", "abandon", "wait", "bake", "confirm", "way_back", "settled", "delete", "gone", "retire")


class AdapterPlanFormatError(ValueError):
    """A document that is not an adapter plan of this schema version; the message names the field."""


DOCUMENT = Document(name="adapter", root=ROOT_PATH, version=SCHEMA_VERSION, error=AdapterPlanFormatError)
DELETED = Document(name="deleted", root="$.deleted", version=SCHEMA_VERSION, error=AdapterPlanFormatError)
RETIRED = Document(name="retired", root="$.retired", version=SCHEMA_VERSION, error=AdapterPlanFormatError)


class AdapterPlan(Typed, document=DOCUMENT):
    """What one deploy (or rollback) of an adapter did at Apply, and what the states after it need."""

    #: The execution input's action: deploy or rollback.
    request: str
    adapter: str
    #: The adapter's inference component (hfpipe-<env>-adapter-<adapter>).
    component: str
    #: What Apply did to it: one of ``CHANGES``.
    action: str
    version_ref: str
    version_arn: str
    #: The version's ModelDataUrl, which the component serves once Apply is done.
    artifact: str
    #: The artifact the component served before (None: it did not exist).
    previous_artifact: str | None
    #: The shared base's requests this execution sent (CreateModel, ...): the base it made, retired on the way
    #: back when no adapter remains on it.
    base_created: list[str] = field(default_factory=list)
    #: The smoke test of the version's recipe, aimed at the adapter's component.
    smoke: SmokeSpec
    #: When the component took the change (ISO 8601, UTC): the bake counts errors from then.
    applied_at: str

    def __post_init__(self) -> None:
        if self.action not in CHANGES:
            raise AdapterPlanFormatError(
                f"adapter.action: {self.action!r} is not accepted; accepted: {', '.join(CHANGES)}"
            )
        if self.request not in REQUESTS[:2]:
            raise AdapterPlanFormatError(
                f"adapter.request: {self.request!r} is not accepted; accepted: deploy, rollback"
            )


@dataclass(frozen=True, kw_only=True)
class BaseBilling:
    """What the shared base bills while it stands, whatever adapters it holds (hfpipe.core.prices)."""

    endpoint: str
    instance_type: str
    instances: int
    #: The fleet's on-demand USD per hour (None: the price table does not know the type).
    usd_per_hour: float | None
    #: The command that retires the base.
    retire_command: str


class AdapterDeleted(Typed, document=DELETED):
    """A delete's answer: the component deleted, the adapters still on the base and, when none is, what keeps
    billing and how to stop it."""

    component: str
    remaining: list[str]
    base: BaseBilling


class BaseRetired(Typed, document=RETIRED):
    """A retirement's answer: what was deleted, in the order it was (and what was gone already)."""

    gone: list[str]
    base: BaseBilling
