"""The pipeline part of the real PipelineStack (cdk.json's environments): grants, outputs, parameters;
in CDK's assertion terms where a property of one resource is checked."""

from __future__ import annotations

import json

import pytest
from app_synth import as_list, policy_statements
from aws_cdk import assertions
from aws_cdk.assertions import Capture, Match

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
    "sagemaker:CreateModelPackageGroup",
    "sagemaker:CreateModelPackage",
    # The evaluation's processing job (the state machine's Evaluate task).
    "sagemaker:CreateProcessingJob",
    "sagemaker:StopProcessingJob",
}


#: Registering, scaling and deregistering a named endpoint's variant (stacks/functions/common.py).
SCALING = {
    "application-autoscaling:DescribeScalableTargets",
    # A target registered before targets were tagged is tagged for the environment first (docs/deploy.md).
    "application-autoscaling:TagResource",
    "application-autoscaling:RegisterScalableTarget",
    "application-autoscaling:PutScalingPolicy",
    "application-autoscaling:DeregisterScalableTarget",
    "sagemaker:DescribeEndpoint",
    "sagemaker:DescribeEndpointConfig",
    "sagemaker:UpdateEndpointWeightsAndCapacities",
    "cloudwatch:DescribeAlarms",
    "cloudwatch:PutMetricAlarm",
    "cloudwatch:DeleteAlarms",
    "iam:CreateServiceLinkedRole",
}


def role_statements(template: assertions.Template, role_id: str) -> list[dict]:
    """The statements of the AWS::IAM::Policy resources attached to one role."""
    policies = template.find_resources("AWS::IAM::Policy", {"Properties": {"Roles": [{"Ref": role_id}]}})
    return [s for p in policies.values() for s in p["Properties"]["PolicyDocument"]["Statement"]]


def pipeline_functions(template: assertions.Template) -> dict[str, tuple[dict, list[dict]]]:
    """Handler key (plan, launch, ...) -> (function properties, its role's statements)."""
    functions = template.find_resources(
        "AWS::Lambda::Function", {"Properties": {"Handler": Match.string_like_regexp(r"^pipeline_lambdas\.")}}
    )
    out = {}
    for props in (r["Properties"] for r in functions.values()):
        role_id = props["Role"]["Fn::GetAtt"][0]
        out[props["Handler"].split(".")[1]] = (props, role_statements(template, role_id))
    return out


def actions(statements):
    return {a for s in statements for a in as_list(s["Action"])}


#: The adapter function's actions: the shared base made, adapter components created, updated, deleted and
#: read, versions read and their groups listed, the bake's metrics, the execution role passed, one change at a
#: time per adapter, the base's endpoint-usage quota read before the base is made, an override recorded.
ADAPTER_ACTIONS = {
    "sagemaker:DescribeModelPackage",
    "sagemaker:CreateModel",
    "sagemaker:CreateEndpointConfig",
    "sagemaker:CreateEndpoint",
    "sagemaker:CreateInferenceComponent",
    "sagemaker:AddTags",
    "sagemaker:UpdateInferenceComponent",
    "sagemaker:DeleteInferenceComponent",
    # Retiring the base (and a failed first deploy's way back): its endpoint, config and model.
    "sagemaker:DeleteEndpoint",
    "sagemaker:DeleteEndpointConfig",
    "sagemaker:DeleteModel",
    # Apply reads the adapter's adapter_config.json from its version's model.tar.gz.
    "s3:GetObject",
    "sagemaker:DescribeModel",
    "sagemaker:DescribeEndpointConfig",
    "sagemaker:DescribeEndpoint",
    "sagemaker:DescribeInferenceComponent",
    "sagemaker:ListInferenceComponents",
    "sagemaker:ListModelPackageGroups",
    "sagemaker:ListModelPackages",
    "cloudwatch:GetMetricStatistics",
    "servicequotas:ListServiceQuotas",
    "servicequotas:ListAWSDefaultServiceQuotas",
    "iam:PassRole",
    "states:ListExecutions",
    "states:DescribeExecution",
    # Apply appends an override it passed the gate with to the version's ApprovalDescription.
    "sagemaker:UpdateModelPackage",
}
#: Where the base scales to zero (dev's cdk.json; hfpipe.core.adapters.scale_to_zero): made with the base,
#: removed when it is retired, and what AWS requires of the caller that registers it.
SCALE_TO_ZERO_ACTIONS = {
    "application-autoscaling:RegisterScalableTarget",
    "application-autoscaling:TagResource",
    "application-autoscaling:PutScalingPolicy",
    "application-autoscaling:DeregisterScalableTarget",
    "cloudwatch:PutMetricAlarm",
    "cloudwatch:DescribeAlarms",
    "cloudwatch:DeleteAlarms",
    "sagemaker:UpdateInferenceComponentRuntimeConfig",
    "iam:CreateServiceLinkedRole",
}


@pytest.mark.parametrize("env", ENVS)
def test_each_function_has_its_own_role_with_only_its_actions(pipeline_app, env):
    functions = pipeline_functions(pipeline_app.assertions(env, "Pipeline"))
    # Where the environment promotes from another (prod, in cdk.json), its Promote function too: its role is
    # checked in tests/infra/test_promotion_stacks.py.
    promote = functions.pop("promote", None)
    assert (promote is not None) == (pipeline_app.environments[env].promote_from is not None)
    # Where it declares a shared base (dev), the adapter state machine's function (docs/adapters.md).
    adapter = functions.pop("adapter", None)
    assert (adapter is not None) == (pipeline_app.environments[env].shared_base is not None)
    # Every environment's reaper of expired, idle endpoints: its role is checked in
    # tests/infra/test_reaper_stack.py.
    assert functions.pop("reaper", None) is not None
    if adapter is not None:
        base = pipeline_app.environments[env].shared_base
        expected = ADAPTER_ACTIONS | (SCALE_TO_ZERO_ACTIONS if base.scale_to_zero.enabled else set())
        assert actions(adapter[1]) - {"logs:CreateLogStream", "logs:PutLogEvents"} == expected
    assert set(functions) == set(PipelineLambdas.HANDLERS)
    assert len({props["Role"]["Fn::GetAtt"][0] for props, _ in functions.values()}) == len(functions)
    logs = {"logs:CreateLogStream", "logs:PutLogEvents"}
    assert {k: actions(s) - logs for k, (_, s) in functions.items()} == {
        "plan": {
            "servicequotas:ListServiceQuotas",
            "servicequotas:ListAWSDefaultServiceQuotas",
            "s3:GetObject",
        },
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
            "s3:ListBucket",
            "s3:GetObject",
            "s3:DeleteObject",
            "states:SendTaskSuccess",
            "states:SendTaskFailure",
            "sqs:SendMessage",
        },
        "gate": set(),
        "smoke_test": {"sagemaker:InvokeEndpoint"},
        "report": {
            "sns:Publish",
            "kms:GenerateDataKey",
            "kms:Decrypt",
            "logs:DescribeLogStreams",
            "logs:GetLogEvents",
        },
        "cleanup": {
            "sns:Publish",
            "kms:GenerateDataKey",
            "kms:Decrypt",
            "sagemaker:DescribeEndpoint",
            "sagemaker:DescribeEndpointConfig",
            "sagemaker:DescribeModel",
            "sagemaker:DescribeTrainingJob",
            "sagemaker:ListTags",
            "sagemaker:DeleteEndpoint",
            "sagemaker:DeleteEndpointConfig",
            "sagemaker:DeleteModel",
            "sagemaker:StopTrainingJob",
            "sqs:SendMessage",
        },
        # The evaluation's steps: the champion read from the run's target, the job's document and its wrapper.
        "evaluation": {
            "sagemaker:DescribeEndpoint",
            "sagemaker:DescribeEndpointConfig",
            "sagemaker:DescribeModel",
            "sagemaker:DescribeInferenceComponent",
            "sagemaker:DescribeModelPackage",
            "sagemaker:ListModelPackages",
            "s3:GetObject",
            "s3:PutObject",
        },
        "register": {
            "sagemaker:DescribeModelPackageGroup",
            "sagemaker:CreateModelPackageGroup",
            "sagemaker:CreateModelPackage",
            "sagemaker:AddTags",
            "sagemaker:ListModelPackages",
            "sagemaker:DescribeModelPackage",
            "s3:PutObject",
        },
        # The deploy's (docs/deploy.md); Prepare and DeployCleanup deregister autoscaling, Record and
        # DeployCleanup register it (with what Application Auto Scaling asks of its caller).
        "deploy_prepare": {
            "sagemaker:DescribeModelPackage",
            "sagemaker:DescribeEndpoint",
            "sagemaker:DescribeEndpointConfig",
            "sagemaker:ListTags",
            "ssm:GetParameter",
            "application-autoscaling:DescribeScalableTargets",
            "application-autoscaling:DeregisterScalableTarget",
            "application-autoscaling:TagResource",
            # What serves: the live config's model (hfpipe.core.deploy.what_serves).
            "sagemaker:DescribeModel",
            # The endpoint-usage quota the fleets must fit before the deploy starts.
            "servicequotas:ListServiceQuotas",
            "servicequotas:ListAWSDefaultServiceQuotas",
            # One deploy at a time per endpoint: the deploy state machine's running executions.
            "states:ListExecutions",
            "states:DescribeExecution",
            # An update's rollback alarms, looked at before anything is written (issue #34).
            "cloudwatch:DescribeAlarms",
            # The evaluation gate: the version's statistics document (its stored evaluation).
            "s3:GetObject",
            # An override Prepare passed the gate with, appended to the version's ApprovalDescription.
            "sagemaker:UpdateModelPackage",
        },
        "deploy_record": {"sagemaker:AddTags", "sagemaker:DescribeModel", "ssm:PutParameter", *SCALING},
        "deploy_cleanup": {
            "sagemaker:DescribeModel",
            "sagemaker:ListTags",
            "sagemaker:DeleteEndpoint",
            "sagemaker:DeleteEndpointConfig",
            "sagemaker:DeleteModel",
            # The way back (deploy_way_back.py) and what failed clean-ups left (deploy_leftovers).
            "sagemaker:UpdateEndpoint",
            "sagemaker:ListEndpointConfigs",
            "sagemaker:ListModels",
            "states:DescribeExecution",
            "ssm:GetParameter",
            *SCALING,
        },
    }
    for props, _ in functions.values():
        assert props["Runtime"] == "python3.14" and "Environment" in props
        # Lambda's JSON log format; timeouts above the smoke test's latency limit (60 s at most).
        assert props["LoggingConfig"] == {"LogFormat": "JSON", "LogGroup": props["LoggingConfig"]["LogGroup"]}
        assert props["Timeout"] > limits.MAX_SMOKE_LATENCY_MS / 1000


#: The adapter function's inference-component actions, each on this environment's tags.
ADAPTER_TAGGED = {
    "sagemaker:CreateInferenceComponent",
    "sagemaker:UpdateInferenceComponent",
    "sagemaker:DeleteInferenceComponent",
}


@pytest.mark.parametrize("env", ENVS)
def test_creating_deleting_and_invoking_need_this_environments_tags(pipeline_app, env):
    seen = set()
    # Where the environment declares a shared base (dev), the adapter function's component actions too.
    expected = TAGGED_ACTIONS | (ADAPTER_TAGGED if pipeline_app.environments[env].shared_base else set())
    for statement in policy_statements(pipeline_app.pipeline(env)):
        tagged = expected & set(as_list(statement["Action"]))
        if not tagged:
            continue
        seen |= tagged
        # Either request tags (create) or resource tags (delete, stop, invoke), never neither.
        key = "aws:RequestTag" if any(a.startswith("sagemaker:Create") for a in tagged) else "aws:ResourceTag"
        condition = json.loads(json.dumps(statement["Condition"]))
        # The Register role creates versions only with the environment's approval status, and in its own
        # groups by name: a versioned package takes no tags of its own (CreateModelPackage's Tags: "you cannot
        # supply a tag argument" with ModelPackageGroupName), so no request tag could be asked of it.
        if set(as_list(statement["Action"])) == {"sagemaker:CreateModelPackage"}:
            assert condition == {"StringEquals": {"sagemaker:ModelApprovalStatus": "PendingManualApproval"}}
            assert all(f"hfpipe-{env}-" in json.dumps(r) for r in as_list(statement["Resource"])), statement
            continue
        # The state machine's keep tag: AddTags of that one key on this environment's own endpoints.
        keep_only = condition.pop("ForAllValues:StringEquals", None)
        # ... or the deploy's Record: the version, deploy execution and recipe on a named endpoint.
        record_keys = [contract.TAG_MODEL_VERSION, contract.TAG_DEPLOY_EXECUTION, contract.TAG_RECIPE]
        assert keep_only in (None, {"aws:TagKeys": [contract.TAG_KEEP]}, {"aws:TagKeys": record_keys}), (
            statement
        )
        assert keep_only is None or set(as_list(statement["Action"])) == {"sagemaker:AddTags"}, statement
        assert condition == {
            "StringEquals": {
                f"{key}/{contract.TAG_MANAGED_BY}": contract.PROJECT,
                f"{key}/{contract.TAG_ENV}": env,
            }
        }, statement
        for resource in as_list(statement["Resource"]):
            assert ":sagemaker:" in json.dumps(resource), resource
    assert seen == expected


@pytest.mark.parametrize("env", ENVS)
def test_state_machine_logs_traces_and_is_published(pipeline_app, env):
    template = pipeline_app.assertions(env, "Pipeline")
    # The pipeline's and the deploy's, where the environment promotes from another (prod) its Promote one, and
    # where it declares a shared base (dev) its adapter state machine.
    promotes = pipeline_app.environments[env].promote_from is not None
    adapters = pipeline_app.environments[env].shared_base is not None
    template.resource_count_is("AWS::StepFunctions::StateMachine", 2 + promotes + adapters)
    policies = Capture()
    template.has_resource(
        "AWS::StepFunctions::StateMachine",
        {
            "Properties": Match.object_like(
                {
                    "StateMachineType": "STANDARD",
                    "TracingConfiguration": {"Enabled": True},
                    "LoggingConfiguration": Match.object_like(
                        {
                            "Destinations": [
                                {
                                    "CloudWatchLogsLogGroup": {
                                        "LogGroupArn": {
                                            "Fn::GetAtt": [
                                                Match.string_like_regexp("^PipelineLogGroup"),
                                                "Arn",
                                            ]
                                        }
                                    }
                                }
                            ]
                        }
                    ),
                }
            ),
            "DependsOn": policies,
        },
    )
    assert policies.as_array() == [
        k for k in template.find_resources("AWS::IAM::Policy") if k.startswith("PipelineStateMachineRole")
    ]
    (machine_id,) = template.find_resources(
        "AWS::StepFunctions::StateMachine", {"Properties": {"StateMachineName": f"hfpipe-{env}-pipeline"}}
    )
    template.has_resource_properties(
        "AWS::SSM::Parameter",
        {
            "Name": contract.ssm_parameter_name(env, contract.SSM_STATE_MACHINE_ARN),
            "Value": {"Ref": machine_id},
        },
    )
    template.has_output("StateMachineArn", {"Value": {"Ref": machine_id}})
    region = load_environments(cdk_app.cdk_json_context()["hfpipe:environments"])[env].region
    catalog = Match.serialized_json(build_catalog(region))
    template.has_resource_properties(
        "AWS::SSM::Parameter",
        {"Name": contract.ssm_parameter_name(env, contract.SSM_IMAGE_CATALOG), "Value": catalog},
    )
    template.has_output("ImageCatalog", {"Value": catalog})
    template.has_resource_properties(
        "AWS::Lambda::Function",
        {
            "Handler": "pipeline_lambdas.plan.handler",
            "Environment": {"Variables": Match.object_like({"IMAGE_CATALOG": catalog})},
        },
    )


@pytest.mark.parametrize("env", ENVS)
def test_cleanup_knows_its_state_machine_by_its_fixed_name(pipeline_app, env):
    """Cleanup's STATE_MACHINE_ARN is the state machine's own ARN, built from its fixed name (no Ref: the
    state machine invokes Cleanup, a Ref back would be a cycle)."""
    template = pipeline_app.assertions(env, "Pipeline")
    ((machine_id, machine),) = template.find_resources(
        "AWS::StepFunctions::StateMachine", {"Properties": {"StateMachineName": f"hfpipe-{env}-pipeline"}}
    ).items()
    name = machine["Properties"]["StateMachineName"]
    assert name == f"hfpipe-{env}-pipeline"
    cleanup_props, _ = pipeline_functions(template)["cleanup"]
    arn = cleanup_props["Environment"]["Variables"]["STATE_MACHINE_ARN"]
    pseudo = {"AWS::Partition": "aws", "AWS::Region": "r", "AWS::AccountId": "1"}
    rendered = "".join(p if isinstance(p, str) else pseudo[p["Ref"]] for p in arn["Fn::Join"][1])
    region = load_environments(cdk_app.cdk_json_context()["hfpipe:environments"])[env].region
    assert rendered.replace(":r:", f":{region}:") == f"arn:aws:states:{region}:1:stateMachine:{name}"
    assert machine_id not in json.dumps(arn)


@pytest.mark.parametrize("env", ENVS)
def test_failed_events_go_to_an_encrypted_queue_with_an_alarm(pipeline_app, env):
    template = pipeline_app.assertions(env, "Pipeline")
    ((queue_id, queue),) = template.find_resources("AWS::SQS::Queue").items()
    assert queue["Properties"]["SqsManagedSseEnabled"] is True
    assert queue["Properties"]["MessageRetentionPeriod"] == 14 * 24 * 3600
    queue_arn = {"Fn::GetAtt": [queue_id, "Arn"]}
    # The functions EventBridge invokes asynchronously have it as their dead-letter queue (CKV_AWS_116): the
    # two of the pipeline's events and the reaper of its schedule.
    functions = pipeline_functions(template)
    for key in ("on_training_event", "cleanup", "reaper"):
        props, statements = functions[key]
        assert props["DeadLetterConfig"] == {"TargetArn": queue_arn}
        (send,) = [s for s in statements if "sqs:SendMessage" in as_list(s["Action"])]
        assert (as_list(send["Action"]), send["Resource"]) == (["sqs:SendMessage"], queue_arn)
    # Lambda's own retries of a function error are written out (Lambda retries those, not EventBridge),
    # for these three functions and no other.
    function_ids = {
        props["Handler"].split(".")[1]: logical_id
        for logical_id, props in (
            (i, r["Properties"]) for i, r in template.find_resources("AWS::Lambda::Function").items()
        )
        if props.get("Handler", "").startswith("pipeline_lambdas.")
    }
    invoke_configs = template.find_resources("AWS::Lambda::EventInvokeConfig").values()
    assert sorted(c["Properties"]["FunctionName"]["Ref"] for c in invoke_configs) == sorted(
        function_ids[key] for key in ("on_training_event", "cleanup", "reaper")
    )
    for config in invoke_configs:
        assert config["Properties"]["MaximumRetryAttempts"] == 2
        assert config["Properties"]["MaximumEventAgeInSeconds"] == 6 * 3600
    # ... and the three rule targets, which retry for a day first.
    rules = template.find_resources("AWS::Events::Rule")
    assert len(rules) == 3
    for rule in rules.values():
        (target,) = rule["Properties"]["Targets"]
        assert target["DeadLetterConfig"] == {"Arn": queue_arn}
        assert target["RetryPolicy"] == {"MaximumEventAgeInSeconds": 86400, "MaximumRetryAttempts": 8}
    # The queue takes TLS only and, from EventBridge, only these rules' events.
    ((policy),) = template.find_resources("AWS::SQS::QueuePolicy").values()
    statements = policy["Properties"]["PolicyDocument"]["Statement"]
    assert any(
        s["Effect"] == "Deny" and s["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
        for s in statements
    )
    from_events = [s for s in statements if s.get("Principal") == {"Service": "events.amazonaws.com"}]
    assert {json.dumps(s["Condition"]["ArnEquals"]["aws:SourceArn"]) for s in from_events} == {
        json.dumps({"Fn::GetAtt": [rule_id, "Arn"]}) for rule_id in rules
    }
    # One message visible is an alarm to the environment's notification topic.
    ((alarm),) = template.find_resources(
        "AWS::CloudWatch::Alarm", {"Properties": {"AlarmName": f"hfpipe-{env}-failed-events"}}
    ).values()
    props = alarm["Properties"]
    assert (props["MetricName"], props["Namespace"]) == ("ApproximateNumberOfMessagesVisible", "AWS/SQS")
    assert props["Dimensions"] == [{"Name": "QueueName", "Value": {"Fn::GetAtt": [queue_id, "QueueName"]}}]
    assert (props["Threshold"], props["ComparisonOperator"]) == (1, "GreaterThanOrEqualToThreshold")
    (topic_id,) = template.find_resources("AWS::SNS::Topic")
    assert props["AlarmActions"] == [{"Ref": topic_id}]
    # CloudWatch may publish to the topic and use its key, for this alarm only.
    alarm_arn = f"alarm:hfpipe-{env}-failed-events"
    ((topic_policy),) = template.find_resources("AWS::SNS::TopicPolicy").values()
    ((key),) = template.find_resources("AWS::KMS::Key").values()
    for statements, actions in (
        (topic_policy["Properties"]["PolicyDocument"]["Statement"], ["sns:Publish"]),
        (key["Properties"]["KeyPolicy"]["Statement"], ["kms:GenerateDataKey", "kms:Decrypt"]),
    ):
        (grant,) = [s for s in statements if s.get("Principal") == {"Service": "cloudwatch.amazonaws.com"}]
        assert sorted(as_list(grant["Action"])) == sorted(actions)
        assert json.dumps(grant["Condition"]["ArnLike"]["aws:SourceArn"]).endswith(f'{alarm_arn}"]]}}')
        assert grant["Condition"]["StringEquals"] == {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}
    # Publishers use the key only through SNS's two calls, on this key only.
    for key_name in ("report", "cleanup"):
        (_props, statements) = pipeline_functions(template)[key_name]
        (use,) = [s for s in statements if "kms:Decrypt" in as_list(s["Action"])]
        assert sorted(as_list(use["Action"])) == ["kms:Decrypt", "kms:GenerateDataKey"]
        assert use["Resource"] == {
            "Fn::GetAtt": [next(iter(template.find_resources("AWS::KMS::Key"))), "Arn"]
        }


def flat(value) -> str:
    """A resource expression as text: Fn::Join joined, Refs as <Name>."""
    if isinstance(value, str):
        return value
    if "Ref" in value:
        return f"<{value['Ref']}>"
    if "Fn::ImportValue" in value:
        return f"<{value['Fn::ImportValue']}>"
    sep, parts = value["Fn::Join"]
    return sep.join(flat(p) for p in parts)


@pytest.mark.parametrize("env", ENVS)
def test_plan_reads_only_the_training_sources_of_its_artifacts_bucket(pipeline_app, env):
    _, statements = pipeline_functions(pipeline_app.assertions(env, "Pipeline"))["plan"]
    reads = [s for s in statements if "s3:GetObject" in as_list(s["Action"])]
    assert [(as_list(s["Action"]), [flat(r) for r in as_list(s["Resource"])]) for s in reads] == [
        (["s3:GetObject"], [f"arn:aws:s3:::<Hfpipe-{env}-Data-ArtifactsBucketName>/sources/*"])
    ]


@pytest.mark.parametrize("env", ENVS)
def test_register_role_is_limited_to_this_environments_groups_and_metrics_prefix(pipeline_app, env):
    props, statements = pipeline_functions(pipeline_app.assertions(env, "Pipeline"))["register"]
    assert props["Environment"]["Variables"]["MODEL_APPROVAL_STATUS"] == "PendingManualApproval"
    got = {
        (
            tuple(sorted(as_list(s["Action"]))),
            tuple(sorted(flat(r) for r in as_list(s["Resource"]))),
            json.dumps(s.get("Condition"), sort_keys=True),
        )
        for s in statements
        if not any(a.startswith("logs:") for a in as_list(s["Action"]))
    }
    sm = next(r for _, rs, _ in got for r in rs if ":sagemaker:" in r).split(":model-package")[0]
    assert sm.endswith(":<AWS::AccountId>")
    group, version = f"{sm}:model-package-group/hfpipe-{env}-*", f"{sm}:model-package/hfpipe-{env}-*/*"
    tagged = {
        "StringEquals": {
            f"aws:RequestTag/{contract.TAG_MANAGED_BY}": contract.PROJECT,
            f"aws:RequestTag/{contract.TAG_ENV}": env,
        }
    }
    (bucket,) = {r for a, rs, _ in got if a == ("s3:PutObject",) for r in rs}
    assert bucket == f"arn:aws:s3:::<Hfpipe-{env}-Data-ArtifactsBucketName>/model-metrics/*"
    assert got == {
        (("sagemaker:DescribeModelPackageGroup",), (group,), "null"),
        (
            ("sagemaker:AddTags", "sagemaker:CreateModelPackageGroup"),
            (group,),
            json.dumps(tagged, sort_keys=True),
        ),
        (
            ("sagemaker:CreateModelPackage",),
            tuple(sorted([group, version])),
            json.dumps({"StringEquals": {"sagemaker:ModelApprovalStatus": "PendingManualApproval"}}),
        ),
        (("sagemaker:DescribeModelPackage",), (version,), "null"),
        # A listing names no version, so a version ARN would never match it (stacks/functions/register.py).
        (("sagemaker:ListModelPackages",), ("*",), "null"),
        (("s3:PutObject",), (bucket,), "null"),
    }
