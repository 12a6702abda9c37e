"""The deploy part of the real PipelineStack (cdk.json's dev and prod): the rollback alarms of each named endpoint,
the DeploymentConfig Prepare builds from what the stack gives it, the state machine's wiring, and its role."""

from __future__ import annotations

import json

import pytest
from app_synth import as_list
from aws_cdk.assertions import Match

from hfpipe import contract
from hfpipe.core.deploy import deployments
from stacks.constructs.deploy_state_machine import DeployStateMachine

ENVS = ["dev", "prod"]


def deploy_machine(template):
    ((machine_id, machine),) = template.find_resources(
        "AWS::StepFunctions::StateMachine",
        {"Properties": {"StateMachineName": Match.string_like_regexp("-deploy$")}},
    ).items()
    return machine_id, machine


def definition(machine):
    parts = machine["Properties"]["DefinitionString"]["Fn::Join"][1]
    return json.loads("".join(p if isinstance(p, str) else "0" for p in parts))


@pytest.mark.parametrize("env", ENVS)
def test_each_named_endpoint_has_its_three_rollback_alarms(pipeline_app, env):
    template = pipeline_app.assertions(env, "Pipeline")
    declared = pipeline_app.environments[env].endpoints
    assert declared
    for settings in declared:
        endpoint = contract.deployed_endpoint_name(env, settings.name)
        for metric, (metric_name, statistic), threshold in (
            ("5xx-errors", ("Invocation5XXErrors", "Sum"), settings.alarms.max_5xx_errors),
            ("4xx-errors", ("Invocation4XXErrors", "Sum"), settings.alarms.max_4xx_errors),
            ("model-latency", ("ModelLatency", "Average"), settings.alarms.max_model_latency_ms * 1000),
        ):
            template.has_resource_properties(
                "AWS::CloudWatch::Alarm",
                {
                    "AlarmName": contract.endpoint_alarm_name(env, settings.name, metric),
                    "Namespace": "AWS/SageMaker",
                    "MetricName": metric_name,
                    "Statistic": statistic,
                    "Period": 60,
                    "Dimensions": Match.array_with(
                        [
                            {"Name": "EndpointName", "Value": endpoint},
                            {"Name": "VariantName", "Value": "AllTraffic"},
                        ]
                    ),
                    "Threshold": threshold,
                    "ComparisonOperator": "GreaterThanThreshold",
                    "EvaluationPeriods": 1,
                    "TreatMissingData": "notBreaching",
                    "AlarmActions": Match.absent(),  # SageMaker reads them during a deployment; nothing else
                },
            )
    # With the pipeline's failed-events alarm, nothing else.
    assert len(template.find_resources("AWS::CloudWatch::Alarm")) == 3 * len(declared) + 1


@pytest.mark.parametrize("env", ENVS)
def test_prepare_gets_the_declared_endpoints_and_builds_their_deployment_config(pipeline_app, env):
    template = pipeline_app.assertions(env, "Pipeline")
    ((_, function),) = template.find_resources(
        "AWS::Lambda::Function", {"Properties": {"Handler": "pipeline_lambdas.deploy_prepare.handler"}}
    ).items()
    variables = function["Properties"]["Environment"]["Variables"]
    declared = deployments.settings_from_json(variables["DEPLOY_ENDPOINTS"])
    assert tuple(declared.values()) == pipeline_app.environments[env].endpoints
    assert variables["EXECUTION_ROLE_ARN"]["Fn::GetAtt"][0].startswith("SageMakerExecutionRole")
    config = deployments.deployment_config(env, declared["summaries"])
    alarm_names = {
        a["Properties"]["AlarmName"] for a in template.find_resources("AWS::CloudWatch::Alarm").values()
    }
    assert {a["AlarmName"] for a in config["AutoRollbackConfiguration"]["Alarms"]} < alarm_names
    policy = config["BlueGreenUpdatePolicy"]
    if env == "prod":  # cdk.json: one instance, so all at once (no canary fits it), then 30 minutes' bake
        assert policy == {
            "TrafficRoutingConfiguration": {"Type": "ALL_AT_ONCE", "WaitIntervalInSeconds": 0},
            "TerminationWaitInSeconds": 1800,
            "MaximumExecutionTimeoutInSeconds": 3600 + 1800,
        }
    else:
        assert policy["TrafficRoutingConfiguration"] == {"Type": "ALL_AT_ONCE", "WaitIntervalInSeconds": 0}


@pytest.mark.parametrize("env", ENVS)
def test_the_deploy_machine_logs_traces_is_published_and_sends_preparations_requests(pipeline_app, env):
    template = pipeline_app.assertions(env, "Pipeline")
    machine_id, machine = deploy_machine(template)
    props = machine["Properties"]
    assert props["StateMachineName"] == contract.deploy_state_machine_name(env)
    assert props["StateMachineType"] == "STANDARD" and props["TracingConfiguration"] == {"Enabled": True}
    group_id = props["LoggingConfiguration"]["Destinations"][0]["CloudWatchLogsLogGroup"]["LogGroupArn"][
        "Fn::GetAtt"
    ][0]
    group = template.find_resources("AWS::Logs::LogGroup")[group_id]["Properties"]
    assert group["LogGroupName"] == f"/aws/vendedlogs/states/hfpipe-{env}-deploy"
    assert props["LoggingConfiguration"]["IncludeExecutionData"] is False
    template.has_resource_properties(
        "AWS::SSM::Parameter",
        {
            "Name": contract.ssm_parameter_name(env, contract.SSM_DEPLOY_STATE_MACHINE_ARN),
            "Value": {"Ref": machine_id},
        },
    )
    template.has_output("DeployStateMachineArn", {"Value": {"Ref": machine_id}})
    states = definition(machine)["States"]
    assert states["Prepare"]["Parameters"] == {
        "input.$": "$",
        "execution_name.$": "$$.Execution.Name",
        "state_machine.$": "$$.StateMachine.Id",  # one deploy at a time: its running executions
    }
    # The approval, re-checked by Prepare's function right before traffic moves and before the record.
    for state, before, after in (
        ("ApprovalBeforeTraffic", "traffic moves", "CreateOrUpdate?"),
        ("ApprovalBeforeRecord", "the record is written", "Record"),
    ):
        assert states[state]["Parameters"] == {"recheck.$": "$.deploy", "before": before}
        assert states[state]["Next"] == after and states[state]["ResultPath"] is None
    assert states["CreateEndpointConfig"]["Next"] == "ApprovalBeforeTraffic"
    assert states["SmokeTest"]["Next"] == "ApprovalBeforeRecord"
    assert states["ApprovalBeforeRecord"]["Catch"][0]["Next"] == "PutPreviousBack?"
    assert states["Prepare"]["Catch"] == [
        {"ErrorEquals": ["States.ALL"], "ResultPath": "$.error", "Next": "Refused"}
    ]
    # Every SageMaker request is Prepare's, field by field; no field is written here.
    for state, fields in (
        ("CreateModel", ["ModelName", "ExecutionRoleArn", "Containers", "Tags"]),
        ("CreateEndpointConfig", ["EndpointConfigName", "ProductionVariants", "Tags"]),
        ("CreateEndpoint", ["EndpointName", "EndpointConfigName", "Tags"]),
        ("UpdateEndpoint", ["EndpointName", "EndpointConfigName", "DeploymentConfig"]),
    ):
        assert states[state]["Parameters"] == {f"{f}.$": f"$.deploy.requests.{state}.{f}" for f in fields}
        assert states[state]["Catch"][0]["Next"] == "DeployCleanup"
    assert states["UpdateEndpoint"]["Resource"].endswith(":states:::aws-sdk:sagemaker:updateEndpoint")
    # Every error after Prepare ends in DeployCleanup, then DeployFailed; retried errors are named, never States.ALL.
    for name, state in states.items():
        for retry in state.get("Retry", []):
            assert "States.ALL" not in retry["ErrorEquals"], name
    assert states["DeployCleanup"]["Next"] == "DeployFailed"
    assert states["SmokeTest"]["Parameters"] == {"smoke.$": "$.deploy.smoke"}
    assert states["Deployed"] == {"Type": "Succeed", "OutputPath": "$.record"}
    assert states["AlreadyServing"] == {"Type": "Succeed", "OutputPath": "$.deploy.record"}


@pytest.mark.parametrize("env", ENVS)
def test_the_deploy_role_creates_and_updates_only_this_environments_named_endpoints(pipeline_app, env):
    template = pipeline_app.assertions(env, "Pipeline")
    _, machine = deploy_machine(template)
    role_id = machine["Properties"]["RoleArn"]["Fn::GetAtt"][0]
    (policy,) = template.find_resources(
        "AWS::IAM::Policy", {"Properties": {"Roles": [{"Ref": role_id}]}}
    ).values()
    statements = policy["Properties"]["PolicyDocument"]["Statement"]
    by_action = {a: s for s in statements for a in as_list(s["Action"])}
    prefix = f"hfpipe-{env}-*"
    for action, key in (
        ("sagemaker:CreateEndpoint", "aws:RequestTag"),
        ("sagemaker:UpdateEndpoint", "aws:ResourceTag"),
    ):
        statement = by_action[action]
        assert statement["Condition"] == {
            "StringEquals": {f"{key}/{contract.TAG_MANAGED_BY}": "hfpipe", f"{key}/{contract.TAG_ENV}": env}
        }
        assert all(json.dumps(r).endswith(f'/{prefix}"]]}}') for r in as_list(statement["Resource"]))
    assert by_action["iam:PassRole"]["Condition"] == {
        "StringEquals": {"iam:PassedToService": "sagemaker.amazonaws.com"}
    }
    alarms = json.dumps(by_action["cloudwatch:DescribeAlarms"]["Resource"])
    assert f"alarm:hfpipe-{env}-summaries-5xx-errors" in alarms and "*" not in alarms
    invoked = {
        r["Fn::GetAtt"][0]
        for r in as_list(by_action["lambda:InvokeFunction"]["Resource"])
        if "Fn::GetAtt" in r
    }
    handlers = {
        template.find_resources("AWS::Lambda::Function")[f]["Properties"]["Handler"].split(".")[1]
        for f in invoked
    }
    assert handlers == set(DeployStateMachine.INVOKES)
    assert machine["DependsOn"] == [
        next(iter(template.find_resources("AWS::IAM::Policy", {"Properties": {"Roles": [{"Ref": role_id}]}})))
    ]
