"""The typed documents' one ``to_json`` / ``from_json`` / ``path`` (hfpipe.core.typed_json.Typed): each class
reads and addresses its own document, refuses with its own document's error and names itself in a path error."""

from __future__ import annotations

import pytest

from hfpipe.core.adapters.adapter_plan import AdapterDeleted, AdapterPlan, AdapterPlanFormatError, BaseRetired
from hfpipe.core.deploy.deploy_plan import DeploymentRecord, DeployPlan, DeployPlanFormatError
from hfpipe.core.promotion.promote_plan import Promoted, PromotePlan, PromotePlanFormatError
from hfpipe.core.run.plan_model import Plan, PlanFormatError
from hfpipe.core.typed_json import Typed

DOCUMENTS = [
    (Plan, "plan", "$.plan", PlanFormatError),
    (DeployPlan, "deploy", "$.deploy", DeployPlanFormatError),
    (DeploymentRecord, "record", "$", DeployPlanFormatError),
    (PromotePlan, "promotion", "$", PromotePlanFormatError),
    (Promoted, "promoted", "$", PromotePlanFormatError),
    (AdapterPlan, "adapter", "$.plan", AdapterPlanFormatError),
    (AdapterDeleted, "deleted", "$.deleted", AdapterPlanFormatError),
    (BaseRetired, "retired", "$.retired", AdapterPlanFormatError),
]


def test_every_typed_document_is_listed_here() -> None:
    assert set(Typed.__subclasses__()) == {kind for kind, *_ in DOCUMENTS}


@pytest.mark.parametrize(("kind", "name", "root", "error"), DOCUMENTS)
def test_each_class_reads_and_addresses_its_own_document(
    kind: type[Typed], name: str, root: str, error: type[ValueError]
) -> None:
    with pytest.raises(error, match=rf"^{name}: expected a JSON object, got list$"):
        kind.from_json([])
    with pytest.raises(error, match=rf"^{name}\.schema_version: missing"):
        kind.from_json({})
    assert kind.path("schema_version") == f"{root}.schema_version"
    with pytest.raises(ValueError, match=rf"^{kind.__name__}\.path: 'nope' is not a field of the {name} "):
        kind.path("nope")
