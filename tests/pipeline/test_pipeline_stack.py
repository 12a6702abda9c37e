"""The pipeline part of the real PipelineStack (cdk.json's environments): grants, outputs, parameters."""

from __future__ import annotations

import json

import pytest

import app as cdk_app
from hfpipe import contract
from hfpipe.core import limits
from stacks.config import load_environments
from stacks.constructs.pipeline_lambdas import PipelineLambdas
from stacks.image_catalog import build_catalog

ENVS = ["dev", "prod"]
TAGGED_ACTIONS = {
    "sagemaker:CreateTrainingJob",
    "sagemaker:CreateModel",
    "sagemaker:CreateEndpointConfig",
    "sagemaker:CreateEndpoint",
    "sagemaker:AddTags",
    "sagemaker:DeleteEndpoint",
    "sagemaker:DeleteEndpointConfig",
    "sagemaker:DeleteModel",
    "sagemaker:StopTrainingJob",
    "sagemaker:InvokeEndpoint",
}


def as_list(value):
    return value if isinstance(value, list) else [value]


def of_type(template, resource_type):
    return {k: v for k, v in template["Resources"].items() if v["Type"] == resource_type}


def role_statements(template, role_id):
    return [
        s
        for p in of_type(template, "AWS::IAM::Policy").values()
        if {"Ref": role_id} in p["Properties"]["Roles"]
        for s in p["Properties"]["PolicyDocument"]["Statement"]
    ]


def pipeline_functions(template):
    """Handler key (plan, launch, ...) -> (function properties, its role's statements)."""
    out = {}
    for props in (r["Properties"] for r in of_type(template, "AWS::Lambda::Function").values()):
        if props["Handler"].startswith("pipeline_lambdas."):
            role_id = props["Role"]["Fn::GetAtt"][0]
            out[props["Handler"].split(".")[1]] = (props, role_statements(template, role_id))
    return out


def actions(statements):
    return {a for s in statements for a in as_list(s["Action"])}


@pytest.mark.parametrize("env", ENVS)
def test_each_function_has_its_own_role_with_only_its_actions(pipeline_app, env):
    functions = pipeline_functions(pipeline_app.pipeline(env))
    assert set(functions) == set(PipelineLambdas.HANDLERS)
    assert len({props["Role"]["Fn::GetAtt"][0] for props, _ in functions.values()}) == len(functions)
    logs = {"logs:CreateLogStream", "logs:PutLogEvents"}
    assert {k: actions(s) - logs for k, (_, s) in functions.items()} == {
        "plan": {"servicequotas:ListServiceQuotas", "servicequotas:ListAWSDefaultServiceQuotas"},
        "launch": {
            "sagemaker:CreateTrainingJob",
            "sagemaker:AddTags",
            "sagemaker:DescribeTrainingJob",
            "sagemaker:ListTags",
            "iam:PassRole",
            "s3:PutObject",
            "states:SendTaskSuccess",
            "states:SendTaskFailure",
        },
        "on_training_event": {
            "sagemaker:DescribeTrainingJob",
            "s3:GetObject",
            "s3:DeleteObject",
            "states:SendTaskSuccess",
            "states:SendTaskFailure",
        },
        "gate": set(),
        "smoke_test": {"sagemaker:InvokeEndpoint"},
        "report": {"sns:Publish"},
        "cleanup": {
            "sns:Publish",
            "sagemaker:DescribeEndpoint",
            "sagemaker:DescribeEndpointConfig",
            "sagemaker:DescribeModel",
            "sagemaker:DescribeTrainingJob",
            "sagemaker:ListTags",
            "sagemaker:DeleteEndpoint",
            "sagemaker:DeleteEndpointConfig",
            "sagemaker:DeleteModel",
            "sagemaker:StopTrainingJob",
        },
    }
    for props, _ in functions.values():
        assert props["Runtime"] == "python3.14" and "Environment" in props
        # Lambda's JSON log format; timeouts above the smoke test's latency limit (60 s at most).
        assert props["LoggingConfig"] == {"LogFormat": "JSON", "LogGroup": props["LoggingConfig"]["LogGroup"]}
        assert props["Timeout"] > limits.MAX_SMOKE_LATENCY_MS / 1000


@pytest.mark.parametrize("env", ENVS)
def test_creating_deleting_and_invoking_need_this_environments_tags(pipeline_app, env):
    template = pipeline_app.pipeline(env)
    seen = set()
    for statement in role_statements_everywhere(template):
        tagged = TAGGED_ACTIONS & set(as_list(statement["Action"]))
        if not tagged:
            continue
        seen |= tagged
        # Either request tags (create) or resource tags (delete, stop, invoke), never neither.
        key = "aws:RequestTag" if any(a.startswith("sagemaker:Create") for a in tagged) else "aws:ResourceTag"
        assert statement["Condition"] == {
            "StringEquals": {
                f"{key}/{contract.TAG_MANAGED_BY}": contract.PROJECT,
                f"{key}/{contract.TAG_ENV}": env,
            }
        }, statement
        for resource in as_list(statement["Resource"]):
            assert ":sagemaker:" in json.dumps(resource), resource
    assert seen == TAGGED_ACTIONS


def role_statements_everywhere(template):
    return [
        s
        for p in of_type(template, "AWS::IAM::Policy").values()
        for s in p["Properties"]["PolicyDocument"]["Statement"]
    ]


@pytest.mark.parametrize("env", ENVS)
def test_state_machine_logs_traces_and_is_published(pipeline_app, env):
    template = pipeline_app.pipeline(env)
    ((machine_id, machine),) = of_type(template, "AWS::StepFunctions::StateMachine").items()
    props = machine["Properties"]
    assert props["StateMachineType"] == "STANDARD" and props["TracingConfiguration"] == {"Enabled": True}
    (destination,) = props["LoggingConfiguration"]["Destinations"]
    assert destination["CloudWatchLogsLogGroup"]["LogGroupArn"]["Fn::GetAtt"][0].startswith(
        "PipelineLogGroup"
    )
    assert machine["DependsOn"] == [
        k for k in of_type(template, "AWS::IAM::Policy") if k.startswith("PipelineStateMachineRole")
    ]
    parameters = {
        p["Properties"]["Name"]: p["Properties"]["Value"]
        for p in of_type(template, "AWS::SSM::Parameter").values()
    }
    assert parameters[contract.ssm_parameter_name(env, contract.SSM_STATE_MACHINE_ARN)] == {"Ref": machine_id}
    assert template["Outputs"]["StateMachineArn"]["Value"] == {"Ref": machine_id}
    region = load_environments(cdk_app.cdk_json_context()["hfpipe:environments"])[env].region
    catalog = json.loads(parameters[contract.ssm_parameter_name(env, contract.SSM_IMAGE_CATALOG)])
    assert catalog == build_catalog(region)
    assert json.loads(template["Outputs"]["ImageCatalog"]["Value"]) == catalog
    (plan, _) = pipeline_functions(template)["plan"]
    assert json.loads(plan["Environment"]["Variables"]["IMAGE_CATALOG"]) == catalog
