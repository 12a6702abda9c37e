"""The local engine's parts on their own: the moto version guard, the Service Quotas answers' shape, the
local event bus's matching (moto's EventBridge patterns), and on the session's engine, the template's own
rules delivering what they match and nothing else."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from botocore.exceptions import ParamValidationError

from hfpipe.core.run.quotas import check_quotas, lookup_quotas
from hfpipe.local.engine import moto_patches
from hfpipe.local.engine.bus import LocalBus, matches
from hfpipe.local.engine.quotas import QuotaTable

ROOT = Path(__file__).resolve().parents[2]


# --- the moto version guard ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "requirements", ["requirements-local.txt", "requirements-dev.txt", "constraints.txt"]
)
def test_patched_moto_version_is_the_pinned_one(requirements):
    pins = re.findall(r"^moto(?:\[[^\]]*\])?==(\S+)", (ROOT / requirements).read_text(), re.MULTILINE)
    assert pins == [moto_patches.MOTO_VERSION]


def test_the_installed_moto_is_accepted():
    assert moto_patches.installed_moto_version() == moto_patches.MOTO_VERSION
    moto_patches.check_moto_version()


def test_another_moto_version_is_refused_before_anything_starts(monkeypatch):
    from hfpipe.local.engine.engine import LocalEngine

    monkeypatch.setattr(moto_patches, "installed_moto_version", lambda: "9.9.9")
    before = dict(os.environ)
    with pytest.raises(moto_patches.MotoVersionError) as caught:
        LocalEngine({"Resources": {}}).__enter__()
    message = str(caught.value)
    assert f"patches moto {moto_patches.MOTO_VERSION} internals" in message
    assert "found moto 9.9.9" in message and "requirements-local.txt" in message
    assert all(target in message for target in moto_patches.TARGETS)  # each patched target is named
    assert dict(os.environ) == before  # nothing was started (no credentials or region set)


# --- Service Quotas answers, as AWS shapes them ------------------------------------------------------------
NAMES = [f"ml.m5.{size} for endpoint usage" for size in ("large", "xlarge", "2xlarge", "4xlarge", "12xlarge")]
APPLIED = {NAMES[0]: 2.0, NAMES[2]: 8.0, NAMES[4]: 1.0}


@pytest.fixture
def quotas_client():
    return QuotaTable(APPLIED.get, NAMES, default=4.0, page_size=2).client("eu-west-1")


def pages(client, operation):
    return list(client.get_paginator(operation).paginate(ServiceCode="sagemaker"))


def test_list_service_quotas_lists_only_applied_values_in_pages(quotas_client):
    got = pages(quotas_client, "list_service_quotas")
    assert [len(p["Quotas"]) for p in got] == [2, 1]
    assert "NextToken" in got[0] and "NextToken" not in got[-1]
    assert {q["QuotaName"]: q["Value"] for p in got for q in p["Quotas"]} == APPLIED


def test_list_default_quotas_lists_every_quota_with_its_default(quotas_client):
    got = pages(quotas_client, "list_aws_default_service_quotas")
    assert [len(p["Quotas"]) for p in got] == [2, 2, 1]
    assert [q["QuotaName"] for p in got for q in p["Quotas"]] == NAMES
    assert {q["Value"] for p in got for q in p["Quotas"]} == {4.0}
    first = quotas_client.list_aws_default_service_quotas(ServiceCode="sagemaker", MaxResults=1)
    assert len(first["Quotas"]) == 1 and first["NextToken"]


def test_a_default_only_quota_is_read_from_the_defaults(quotas_client):
    values = lookup_quotas(quotas_client, "sagemaker", [NAMES[1], NAMES[2]])
    assert (values[NAMES[1]].value, values[NAMES[1]].applied) == (4.0, False)
    assert (values[NAMES[2]].value, values[NAMES[2]].applied) == (8.0, True)
    assert check_quotas(quotas_client, {NAMES[3]: 3}) == {NAMES[3]: 4.0}


def test_answers_are_checked_against_the_service_model():
    client = QuotaTable(lambda name: "many", NAMES).client("eu-west-1")  # a string where AWS sends a number
    with pytest.raises(ParamValidationError):
        client.list_service_quotas(ServiceCode="sagemaker")


def test_other_operations_are_refused(quotas_client):
    with pytest.raises(NotImplementedError, match="GetServiceQuota"):
        quotas_client.get_service_quota(ServiceCode="sagemaker", QuotaCode="L-00000000")


# --- the bus: moto's EventBridge pattern matching ----------------------------------------------------------
TRAINING_RULE = {
    "source": ["aws.sagemaker"],
    "detail-type": ["SageMaker Training Job State Change"],
    "detail": {
        "TrainingJobStatus": ["Completed", "Failed", "Stopped"],
        "TrainingJobName": [{"prefix": "dev-"}],
    },
}


def training_event(source="aws.sagemaker", detail_type="SageMaker Training Job State Change", **detail):
    detail = {"TrainingJobName": "dev-run-1", "TrainingJobStatus": "Completed", **detail}
    return {"source": source, "detail-type": detail_type, "detail": detail}


@pytest.mark.parametrize(
    "event",
    [
        training_event(source="aws.states"),
        training_event(detail_type="SageMaker Endpoint State Change"),
        training_event(TrainingJobStatus="InProgress"),
        training_event(TrainingJobName="prod-run-1"),
        {"source": "aws.sagemaker", "detail-type": "SageMaker Training Job State Change", "detail": {}},
    ],
    ids=["source", "detail-type", "status", "name-prefix", "no-detail"],
)
def test_a_non_matching_event_is_not_delivered(event):
    delivered = []
    bus = LocalBus([(TRAINING_RULE, ["OnTrainingEvent"])], lambda t, e: delivered.append(t), "eu-west-1")
    assert not matches(TRAINING_RULE, event)
    bus.put(event["source"], event["detail-type"], event["detail"], [])
    assert delivered == [] and bus.deliveries == []
    assert len(bus.events) == 1  # put on the bus all the same


def test_a_matching_event_is_delivered_to_each_target():
    delivered = []
    bus = LocalBus([(TRAINING_RULE, ["A", "B"])], lambda t, e: delivered.append(e) or t, "eu-west-1")
    event = training_event(TrainingJobStatus="Failed")
    bus.put(event["source"], event["detail-type"], event["detail"], ["arn:job"])
    assert [d[1:] for d in bus.deliveries] == [("A", "A"), ("B", "B")]
    assert delivered[0]["detail"]["TrainingJobStatus"] == "Failed" and delivered[0]["resources"] == [
        "arn:job"
    ]


# --- the template's rules on the session's engine ----------------------------------------------------------
@pytest.mark.slow
def test_the_templates_rules_deliver_only_what_they_match(fresh):
    before = len(fresh.deliveries)
    ended = {"status": "SUCCEEDED", "stateMachineArn": fresh.state_machine_arn, "name": "x"}
    fresh.put_event("aws.states", "Step Functions Execution Status Change", ended, [])  # a normal end
    other = {**ended, "status": "FAILED", "stateMachineArn": "arn:aws:states:eu-west-1:1:stateMachine:other"}
    fresh.put_event("aws.states", "Step Functions Execution Status Change", other, [])  # another machine
    fresh.put_event(
        "aws.sagemaker",
        "SageMaker Training Job State Change",
        training_event()["detail"] | {"TrainingJobStatus": "InProgress"},
        [],
    )
    assert fresh.deliveries[before:] == []
    failed = {**ended, "status": "FAILED", "executionArn": "arn:aws:states:::execution:hfpipe-local:ghost"}
    fresh.put_event("aws.states", "Step Functions Execution Status Change", failed, [])
    (delivery,) = fresh.deliveries[before:]
    assert delivery[0] == "Step Functions Execution Status Change"
    (targets,) = [t for pattern, t in fresh.bus.rules if pattern["source"] == ["aws.states"]]
    assert delivery[1] in targets and fresh.invocations[-1][1] == delivery[1]


# A definition with what the Preprocessor builds components of: an intrinsic function, a Choice, a Pass.
PARSED_ONCE = {
    "StartAt": "Greet",
    "States": {
        "Greet": {"Type": "Pass", "Parameters": {"text.$": "States.Format('hi {}', $.who)"}, "Next": "Which"},
        "Which": {
            "Type": "Choice",
            "Choices": [{"Variable": "$.text", "StringEquals": "hi ada", "Next": "Ada"}],
            "Default": "Other",
        },
        "Ada": {"Type": "Pass", "Result": "ada", "ResultPath": "$.found", "End": True},
        "Other": {"Type": "Pass", "Result": "other", "ResultPath": "$.found", "End": True},
    },
}


@pytest.mark.slow
def test_a_definition_is_parsed_once_and_each_execution_gets_its_own_components(fresh, monkeypatch):
    """moto parses a definition's text with its grammar at CreateStateMachine and again at each StartExecution;
    on the engine the grammar reads a text once (moto_patches._parsed_definitions), each execution still gets
    components of its own built from the tree, and evaluates as before; a text the grammar refuses is refused
    with moto's own error each time."""
    import json

    from botocore.exceptions import ClientError
    from moto.stepfunctions.parser.asl.antlr.runtime.ASLParser import ASLParser
    from moto.stepfunctions.parser.asl.parse.asl_parser import AmazonStateLanguageParser

    passes = []
    grammar = ASLParser.state_machine
    monkeypatch.setattr(ASLParser, "state_machine", lambda self: passes.append(1) or grammar(self))
    sfn = fresh.client("stepfunctions")
    role = f"arn:aws:iam::{moto_patches.default_account_id()}:role/parsed-once"
    text = json.dumps(PARSED_ONCE)
    arn = sfn.create_state_machine(name="parsed-once", definition=text, roleArn=role)["stateMachineArn"]
    try:
        ends = {
            who: fresh.run({"who": who}, name=f"parsed-once-{who}", state_machine_arn=arn)
            for who in ("ada", "bob", "ada-again")
        }
    finally:
        sfn.delete_state_machine(stateMachineArn=arn)
    assert [(e.status, e.output["found"]) for e in ends.values()] == [
        ("SUCCEEDED", "ada"),
        ("SUCCEEDED", "other"),
        ("SUCCEEDED", "other"),
    ]
    assert ends["ada"].states == ["Greet", "Which", "Ada"] and ends["bob"].states == [
        "Greet",
        "Which",
        "Other",
    ]
    assert len(passes) == 1  # moto alone: 4 (the create, then each of the 3 executions)
    first, second = AmazonStateLanguageParser.parse(text), AmazonStateLanguageParser.parse(text)
    assert first[1] is second[1] and first[0] is not second[0] and len(passes) == 1
    refused = text.replace('"StartAt"', '"StartsAt"')
    messages = []
    for _ in range(2):
        with pytest.raises(ClientError) as raised:
            sfn.create_state_machine(name="refused", definition=refused, roleArn=role)
        messages.append(raised.value.response["Error"])
    assert messages[0] == messages[1] and messages[0]["Message"].startswith("ASLParserException "), messages
    assert len(passes) == 3  # each refused text went through the grammar


# --- the functions' environments ----------------------------------------------------------------------------
def test_shared_variables_are_set_once_and_differing_ones_per_function():
    from hfpipe.local.engine.template import split_environments

    def fn(**variables):
        return {"Environment": {"Variables": variables}}

    functions = {
        "Plan": fn(HFPIPE_ENV="dev", LEVEL="INFO"),
        "Report": fn(HFPIPE_ENV="dev", LEVEL="DEBUG", T={"Ref": "X"}),
    }
    shared, own = split_environments(functions, lambda v: "topic-arn" if v == {"Ref": "X"} else v)
    assert shared == {"HFPIPE_ENV": "dev", "T": "topic-arn"}
    assert own == {"Plan": {"LEVEL": "INFO"}, "Report": {"LEVEL": "DEBUG"}}


def test_the_version_error_names_every_patched_target():
    class Engine:
        time_scale = timeout_scale = 1.0
        world = None

        def execution_ending(self, arn):
            pass

        def execution_ended(self, execution):
            pass

    patches = moto_patches.patches(Engine())
    assert [label for label, *_ in patches] == list(moto_patches.PATCHED)
    for label, target, name, _ in patches:  # each target exists in the installed moto
        assert name is None or hasattr(target, name), label


@pytest.mark.parametrize("recipe", ["roberta-large-mnli-smp", "bert-large-squad-smddp", "distilbert-spot"])
def test_local_metrics_are_read_per_log_line_as_sagemaker_reads_them(
    recipe: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The lines transformers' Trainer prints (its own log_metrics and metrics_format), then more log: each
    recipe's regexes, those ending in `$` too, find their values in the line that holds them."""
    from types import SimpleNamespace

    from transformers.trainer_pt_utils import log_metrics, metrics_format

    from hfpipe.core.recipe.recipes import resolve_recipe
    from hfpipe.local.runtime import _final_metrics

    trainer = SimpleNamespace(is_world_process_zero=lambda: True)
    trainer.metrics_format = lambda metrics: metrics_format(trainer, metrics)
    print("{'loss': 0.9, 'learning_rate': 4e-05, 'epoch': 0.5}")
    log_metrics(
        trainer,
        "train",
        {"epoch": 1.0, "train_loss": 0.61, "train_runtime": 83.2, "train_samples_per_second": 12.5},
    )
    log_metrics(trainer, "eval", {"epoch": 1.0, "eval_loss": 0.42, "eval_accuracy": 0.875, "eval_f1": 88.25})
    print("2026-01-01 00:00:00,000 sagemaker-training-toolkit INFO     Reporting training SUCCESS")
    log = capsys.readouterr().out
    definitions = resolve_recipe(recipe_name=recipe)["training"]["metric_definitions"]
    found = _final_metrics(log, definitions)
    expected = {
        "roberta-large-mnli-smp": {"epoch": 1.0, "train_samples_per_second": 12.5, "f1": 88.25},
        "bert-large-squad-smddp": {"epoch": 1.0, "train_samples_per_second": 12.5, "f1": 88.25},
        "distilbert-spot": {"loss": 0.9, "train_loss": 0.61, "eval_loss": 0.42, "eval_accuracy": 0.875},
    }[recipe]
    assert found == expected


@pytest.mark.slow
def test_an_execution_started_without_a_name_is_named_a_uuid_as_aws_names_it(fresh):
    """StartExecution's API reference: without a name, Step Functions generates a UUID as the execution's name
    (moto's parser backend left it None: the ARN ended in "None" and ListExecutions had no name, on which
    the deploy's Prepare failed with KeyError: 'name')."""
    import json
    import uuid

    sfn = fresh.client("stepfunctions")
    role = f"arn:aws:iam::{moto_patches.default_account_id()}:role/unnamed"
    definition = json.dumps({"StartAt": "P", "States": {"P": {"Type": "Pass", "End": True}}})
    arn = sfn.create_state_machine(name="unnamed", definition=definition, roleArn=role)["stateMachineArn"]
    try:
        started = sfn.start_execution(stateMachineArn=arn, input="{}")["executionArn"]
        name = started.rsplit(":", 1)[1]
        assert str(uuid.UUID(name)) == name, started
        assert sfn.describe_execution(executionArn=started)["name"] == name
        listed = sfn.list_executions(stateMachineArn=arn)["executions"]
        assert [e["name"] for e in listed] == [name]
    finally:
        sfn.delete_state_machine(stateMachineArn=arn)
