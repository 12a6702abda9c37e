"""The typed deploy and promote plans (hfpipe.core.deploy.deploy_plan, hfpipe.core.promotion.promote_plan): a plan survives JSON
both ways; any other document is refused with one line naming the field; ``path`` refuses a field the plan does
not have; and every JSONPath of the synthesized deploy definition that reads the plan names a real field (the
requests' members: members of the operation's input in botocore's model)."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from app_synth import state_machine_definition
from deploy_helpers import a_plan, an_alarm_wait
from documents import assert_each_refused, strings, with_value, without

from hfpipe import contract
from hfpipe.core.deploy.deploy_plan import (
    ACTIONS,
    SCHEMA_VERSION,
    DeploymentRecord,
    DeployPlan,
    DeployPlanFormatError,
    DeployRequests,
)
from hfpipe.core.promotion.promote_plan import (
    Promoted,
    PromotePlan,
    PromotePlanFormatError,
    S3Object,
    SourceVersion,
    TargetVersion,
    promoted,
)

WAIT = an_alarm_wait()


@pytest.mark.parametrize(
    "changes",
    [
        {},
        {"action": "wait", "alarm_wait": WAIT},
        {
            "action": "none",
            "previous": None,
            "record": a_plan().recorded("deploy-1", "2026-01-01T12:00:00+00:00"),
        },
        {"action": "create", "previous": None, "waited_for_alarms": WAIT, "scaling_deregistered": True},
    ],
    ids=["update", "wait", "none", "create"],
)
def test_a_deploy_plan_survives_json_both_ways(changes: dict[str, Any]) -> None:
    plan = a_plan(**changes)
    doc = json.loads(json.dumps(plan.to_json()))  # what the state machine keeps and hands back
    assert doc["schema_version"] == SCHEMA_VERSION == 3  # 2: input.ttl; 3: input.override_evaluation
    assert DeployPlan.from_json(doc) == plan
    assert DeployPlan.from_json(doc).to_json() == doc
    # Nested parts come back typed, not as dicts.
    assert DeployPlan.from_json(doc).settings.traffic.type == "ALL_AT_ONCE"
    assert DeployPlan.from_json(doc).smoke.expected_keys == ["answer", "score"]


def test_the_record_is_the_plan_as_it_serves_and_survives_json_both_ways() -> None:
    plan = a_plan()
    record = plan.recorded("deploy-2", "2026-01-01T12:00:00+00:00")
    assert (record.endpoint, record.endpoint_config, record.version) == (
        plan.endpoint_name,
        plan.endpoint_config_name,
        2,
    )
    assert plan.previous is not None
    assert (record.previous_version, record.previous_endpoint_config) == (
        plan.previous.model_version_arn,
        plan.previous.endpoint_config_name,
    )
    doc = json.loads(json.dumps(record.to_json()))
    assert DeploymentRecord.from_json(doc) == record
    # A record an earlier release wrote (no schema version) is not half-read: Prepare records again.
    with pytest.raises(DeployPlanFormatError, match=r"^record\.schema_version: missing"):
        DeploymentRecord.from_json(without(doc, "schema_version"))
    with pytest.raises(DeployPlanFormatError, match=r"^record\.instance_count: '1' is not accepted"):
        DeploymentRecord.from_json({**doc, "instance_count": "1"})


def test_the_first_plan_is_the_approved_version_on_the_named_endpoint_with_nothing_made_yet() -> None:
    """Prepare's first look (``DeployPlan.first``): the version and endpoint, the smoke test and the waits'
    bounds; no previous deploy, model, config or request until the endpoint is looked at."""
    from hfpipe.core.deploy import deploy_limits
    from hfpipe.core.deploy.deploy_requests import VersionInfo

    whole = a_plan()
    version = VersionInfo(
        arn=whole.model_version_arn,
        group="hfpipe-dev-tiny-qa",
        number=2,
        recipe="tiny-qa",
        status="Approved",
        instance_type="ml.m5.large",
    )
    first = DeployPlan.first(whole.input, whole.settings, "dev", version, whole.smoke)
    assert (first.action, first.name, first.endpoint_name, first.version_ref) == (
        "create",
        whole.name,
        whole.endpoint_name,
        "tiny-qa/2",
    )
    assert (first.model_version_arn, first.model_package_group, first.recipe, first.version) == (
        whole.model_version_arn,
        whole.model_package_group,
        whole.recipe,
        whole.version,
    )
    assert first.max_polls == deploy_limits.endpoint_polls(whole.settings)
    assert (first.previous, first.model_name, first.endpoint_config_name, first.scaling_deregistered) == (
        None,
        None,
        None,
        False,
    )
    assert first.requests == DeployRequests()  # nothing to send yet
    assert DeployPlan.from_json(json.loads(json.dumps(first.to_json()))) == first


def _refusals(doc: dict[str, Any]) -> list[tuple[str, Any, str]]:
    return [
        (
            "another version",
            with_value(doc, ("schema_version",), 1),
            r"^deploy\.schema_version: 1 is not accepted",
        ),
        ("no version", without(doc, "schema_version"), r"^deploy\.schema_version: missing"),
        ("missing field", without(doc, "endpoint_name"), r"^deploy\.endpoint_name: missing; deploy schema"),
        ("unknown field", {**doc, "endpoint_arn": "x"}, r"^deploy\.endpoint_arn: unknown field; accepted: "),
        (
            "wrong type",
            with_value(doc, ("version",), "2"),
            r"^deploy\.version: '2' is not accepted; accepted: an int",
        ),
        (
            "an action not known",
            with_value(doc, ("action",), "delete"),
            r"^deploy\.action: 'delete' is not accepted",
        ),
        (
            "nested settings",
            with_value(doc, ("settings", "traffic", "wait_seconds"), "0"),
            r"^deploy\.settings\.traffic",
        ),
        ("nested previous", with_value(doc, ("previous", "x"), 1), r"^deploy\.previous\.x: unknown field"),
        (
            "an operation not sent",
            with_value(doc, ("requests", "DeleteEndpoint"), {}),
            r"^deploy\.requests\.Delete",
        ),
        (
            "a request not an object",
            with_value(doc, ("requests", "Rollback"), []),
            r"^deploy\.requests\.Rollback: \[\]",
        ),
        (
            "smoke keys",
            with_value(doc, ("smoke", "expected_keys"), ["a", 1]),
            r"^deploy\.smoke\.expected_keys\[1\]: 1",
        ),
        (
            "input",
            with_value(doc, ("input",), {"version": "tiny-qa/2"}),
            r"^deploy\.input\.endpoint: missing",
        ),
        ("not an object", [doc], r"^deploy: expected a JSON object, got list"),
    ]


def test_every_other_deploy_document_is_refused_naming_the_field() -> None:
    assert_each_refused(DeployPlan.from_json, DeployPlanFormatError, _refusals(a_plan().to_json()))


def test_path_names_fields_and_refuses_others() -> None:
    assert DeployPlan.path() == "$.deploy"
    assert DeployPlan.path("previous", "endpoint_config_name") == "$.deploy.previous.endpoint_config_name"
    assert DeployPlan.path("alarm_wait", "poll_seconds") == "$.deploy.alarm_wait.poll_seconds"
    assert DeployPlan.request_path("Rollback", "EndpointName") == "$.deploy.requests.Rollback.EndpointName"
    for parts in (("endpoint",), ("previous", "config"), ("requests", "DeleteEndpoint"), ("name", "x")):
        with pytest.raises(ValueError, match="is not a field of the deploy"):
            DeployPlan.path(*parts)


# A JSONPath into the deploy plan as it appears in the definition: "$.deploy" and its dotted field names.
DEPLOY_PATH = re.compile(r"\$\.deploy(?:\.[A-Za-z0-9_]+)*")


def _input_members(operation: str) -> set[str]:
    """The members of ``operation``'s input, from botocore's SageMaker model (as api_shapes.json has it)."""
    import botocore.session

    model = botocore.session.get_session().get_service_model("sagemaker")
    return set(model.operation_model(operation).input_shape.members)


def test_every_plan_path_of_the_deploy_definition_names_a_plan_field(template: dict[str, Any]) -> None:
    definition = state_machine_definition(template, contract.deploy_state_machine_name("dev"))
    found = sorted({m for s in strings(definition) for m in DEPLOY_PATH.findall(s)})
    # The walk sees what the deploy reads: the plan, the wait's interval, the way back's config, a request.
    assert {"$.deploy", "$.deploy.alarm_wait.poll_seconds", "$.deploy.previous.endpoint_config_name"} <= set(
        found
    )
    assert "$.deploy.requests.CreateModel.ExecutionRoleArn" in found
    for path in found:
        parts = tuple(path.split(".")[2:])
        if parts[:1] == ("requests",):
            # The plan's part, then a member of the operation the request is for (Rollback: UpdateEndpoint).
            assert len(parts) == 3, path
            assert DeployPlan.path(*parts[:2]) == path.rsplit(".", 1)[0]
            operation = "UpdateEndpoint" if parts[1] == "Rollback" else parts[1]
            assert parts[2] in _input_members(operation), path
        else:
            assert DeployPlan.path(*parts) == path  # ValueError names a path the plan does not have


def test_every_action_the_deploy_definition_compares_is_a_plan_action(template: dict[str, Any]) -> None:
    definition = state_machine_definition(template, contract.deploy_state_machine_name("dev"))
    compared = {
        rule["StringEquals"]
        for state in definition["States"].values()
        for rule in state.get("Choices", [])
        if rule.get("Variable") == DeployPlan.path("action")
    }
    assert compared == {"none", "record", "wait", "create", "update"}
    assert compared <= set(ACTIONS)


# -- promote ------------------------------------------------------------------------------------------------

SOURCE = SourceVersion(
    env="dev", region="eu-west-1", version_arn="arn:aws:sagemaker:eu-west-1:1:model-package/g/3", ref="r/3"
)


def a_promote_plan(**changes: Any) -> PromotePlan:
    from dataclasses import replace

    plan = PromotePlan(
        source=SOURCE,
        env="prod",
        recipe="tiny-lora",
        model_package_group="hfpipe-prod-tiny-lora",
        image="img:1",
        model=S3Object(bucket="prod-artifacts", key="promoted/dev/tiny-lora/3/model.tar.gz"),
        metrics=S3Object(bucket="prod-artifacts", key="promoted/dev/tiny-lora/3/metrics.json"),
        source_model=S3Object(bucket="dev-data", key="out/model.tar.gz"),
        statistics={"metrics": {"eval_loss": {"value": 1.5}}},
        request={"ModelPackageGroupName": "hfpipe-prod-tiny-lora"},
        promoted_before=None,
    )
    return replace(plan, **changes)


def test_a_promote_plan_and_its_answer_survive_json_both_ways() -> None:
    plan = a_promote_plan()
    doc = json.loads(json.dumps(plan.to_json()))
    assert PromotePlan.from_json(doc) == plan and doc["schema_version"] == 1
    answer = promoted(
        plan, "arn:aws:sagemaker:eu-west-2:2:model-package/hfpipe-prod-tiny-lora/4", "Approved", True
    )
    assert answer.target == TargetVersion(
        env="prod",
        model_package_group="hfpipe-prod-tiny-lora",
        model_package_arn="arn:aws:sagemaker:eu-west-2:2:model-package/hfpipe-prod-tiny-lora/4",
        version=4,
        ref="tiny-lora/4",
        approval_status="Approved",
    )
    assert answer.model_data_url == "s3://prod-artifacts/promoted/dev/tiny-lora/3/model.tar.gz"
    assert Promoted.from_json(json.loads(json.dumps(answer.to_json()))) == answer
    assert answer.summary == "r/3 (dev) -> tiny-lora/4 (prod), Approved"


def test_every_other_promote_document_is_refused_naming_the_field() -> None:
    doc = promoted(a_promote_plan(), "arn:x/4", "PendingManualApproval", False).to_json()
    for bad, message in (
        ({**doc, "extra": 1}, r"^promoted\.extra: unknown field"),
        (without(doc, "created"), r"^promoted\.created: missing"),
        (with_value(doc, ("target", "version"), "4"), r"^promoted\.target\.version: '4' is not accepted"),
        (with_value(doc, ("schema_version",), 0), r"^promoted\.schema_version: 0 is not accepted"),
    ):
        with pytest.raises(PromotePlanFormatError, match=message):
            Promoted.from_json(bad)
    with pytest.raises(PromotePlanFormatError, match=r"^promotion\.model\.key: missing"):
        PromotePlan.from_json(with_value(a_promote_plan().to_json(), ("model",), {"bucket": "b"}))
    assert PromotePlan.path("source", "ref") == "$.source.ref"
    with pytest.raises(ValueError, match="'target' is not a field of the promotion"):
        PromotePlan.path("target")


def test_the_promote_definition_reads_only_its_input(synthesized: Any) -> None:
    """The Promote state machine is one task: it hands its input and execution name to the function (which
    plans and carries out the promotion in one invocation) and outputs the function's answer as it is."""
    definition = state_machine_definition(
        dict(synthesized.pipeline("prod")), contract.promote_state_machine_name("prod")
    )
    paths = {s for s in strings(definition) if s.startswith("$")}
    assert paths == {"$", "$$.Execution.Name"}
    (state,) = definition["States"].values()
    assert "ResultPath" not in state and "OutputPath" not in state  # the output is the answer (Promoted)
