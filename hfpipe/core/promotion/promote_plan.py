"""The promote plan as a type: what the Promote step decided before its first write, and what it answers.

The Promote function (lambda/pipeline/pipeline_lambdas/promote.py) builds a ``PromotePlan`` once, from its
reads and checks of the source version (``plan_promotion``), then carries it out; its answer, the Promote state
machine's output, is a ``Promoted`` (``to_json``), which ``hfpipe promote`` reads back with
``Promoted.from_json``. Both accept exactly this schema version's fields with their types and refuse anything
else with one line naming the field (``PromotePlanFormatError``); ``path`` gives a field's JSONPath, refusing a
name the document does not have. Dict-typed fields are only the CreateModelPackage request, the source's
statistics document and the version's metadata.

Stdlib only: the Lambda bundle copies the core.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hfpipe.core.typed_json import Document, Typed

#: Raised with every change of a field's name, meaning or type.
SCHEMA_VERSION = 1
#: The Promote state machine's one task answers with the whole state: its output is the document.
ROOT_PATH = "$"


class PromotePlanFormatError(ValueError):
    """A document that is not a promote plan (or answer) of this schema version; one line naming the field."""


PLAN = Document(name="promotion", root=ROOT_PATH, version=SCHEMA_VERSION, error=PromotePlanFormatError)
ANSWER = Document(name="promoted", root=ROOT_PATH, version=SCHEMA_VERSION, error=PromotePlanFormatError)


@dataclass(frozen=True, kw_only=True)
class SourceVersion:
    """The version promoted, in the environment the target promotes from."""

    env: str
    region: str
    version_arn: str
    ref: str


@dataclass(frozen=True, kw_only=True)
class TargetVersion:
    """The version the promotion registered in the target (or an earlier promotion of the same source did)."""

    env: str
    model_package_group: str
    model_package_arn: str
    version: int
    ref: str
    approval_status: str | None


@dataclass(frozen=True, kw_only=True)
class S3Object:
    bucket: str
    key: str

    @property
    def uri(self) -> str:
        return f"s3://{self.bucket}/{self.key}"


class PromotePlan(Typed, document=PLAN):
    """Everything the Promote step writes, decided before the first write."""

    source: SourceVersion
    #: The target environment and its group for the recipe (made as the Register step makes it when missing).
    env: str
    recipe: str
    model_package_group: str
    image: str
    #: Where the copy of the source's model.tar.gz and the statistics document go (this environment's bucket).
    model: S3Object
    metrics: S3Object
    #: The source's model.tar.gz (null when an earlier promotion registered the version: nothing is read).
    source_model: S3Object | None
    #: The statistics document written beside the copy (hfpipe.core.promotion.promotion.statistics).
    statistics: dict[str, Any]
    #: CreateModelPackage as sent (checked against botocore's model).
    request: dict[str, Any]
    #: The version an earlier promotion of the source registered: then nothing is written.
    promoted_before: TargetVersion | None


class Promoted(Typed, document=ANSWER):
    """The Promote step's answer and the state machine's output: source -> target version."""

    source: SourceVersion
    target: TargetVersion
    image: str
    model_data_url: str
    #: False when an earlier promotion registered the version (nothing copied or registered again).
    created: bool

    @property
    def summary(self) -> str:
        """One line: source -> target version, its status, and what to do next."""
        source, target = self.source, self.target
        line = f"{source.ref} ({source.env}) -> {target.ref} ({target.env}), {target.approval_status}"
        if not self.created:
            line += ", already promoted (the version the first promotion made)"
        if target.approval_status == "PendingManualApproval":
            line += f"; approve with hfpipe models approve {target.ref} --env {target.env}"
        return line


def promoted(plan: PromotePlan, arn: str, status: str | None, created: bool) -> Promoted:
    """The answer for ``plan`` once version ``arn`` is registered (or was: ``created`` false)."""
    number = int(arn.rsplit("/", 1)[-1])
    target = TargetVersion(
        env=plan.env,
        model_package_group=plan.model_package_group,
        model_package_arn=arn,
        version=number,
        ref=f"{plan.recipe}/{number}",
        approval_status=status,
    )
    return Promoted(
        source=plan.source, target=target, image=plan.image, model_data_url=plan.model.uri, created=created
    )
