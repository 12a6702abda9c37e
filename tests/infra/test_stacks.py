"""Fine-grained assertions on the synthesized templates of every environment, in CDK's own terms
(`Template.has_resource_properties`, `all_resources_properties`, `Match`, `Capture`)."""

from __future__ import annotations

import json

import aws_cdk as cdk
import pytest
from app_synth import as_list, policy_statements
from aws_cdk import assertions
from aws_cdk.assertions import Capture, Match

import app as cdk_app
from hfpipe.contract import ARTIFACTS_CHECKPOINTS_PREFIX, stack_name
from stacks.constructs.quota_request import RESOURCE_TYPE
from stacks.data_stack import DataStack
from stacks.pipeline_stack import PipelineStack

ENVS = ["dev", "prod"]


def bucket_id(template: assertions.Template, construct_path: str) -> str:
    """A bucket's logical ID by its construct path (the ID is the path plus an 8-hex-digit hash)."""
    (found,) = [k for k in template.find_resources("AWS::S3::Bucket") if k[:-8] == construct_path]
    return found


def test_each_environment_has_three_stacks_named_by_the_contract(synthesized):
    assert sorted(synthesized.templates) == sorted(
        stack_name(env, part) for env in ENVS for part in ("Data", "Quota", "Pipeline")
    )


@pytest.mark.parametrize("env", ENVS)
def test_buckets_block_public_access_encrypt_and_enforce_bucket_ownership(synthesized, env):
    template = synthesized.assertions(env, "Data")
    template.resource_count_is("AWS::S3::Bucket", 3)
    template.all_resources_properties(
        "AWS::S3::Bucket",
        {
            "PublicAccessBlockConfiguration": {
                "BlockPublicAcls": True,
                "BlockPublicPolicy": True,
                "IgnorePublicAcls": True,
                "RestrictPublicBuckets": True,
            },
            "BucketEncryption": {
                "ServerSideEncryptionConfiguration": [
                    {"ServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}
                ]
            },
            "OwnershipControls": {"Rules": [{"ObjectOwnership": "BucketOwnerEnforced"}]},
        },
    )


@pytest.mark.parametrize("env", ENVS)
def test_every_bucket_policy_denies_plain_http_and_old_tls(synthesized, env):
    template = synthesized.assertions(env, "Data")
    template.resource_count_is("AWS::S3::BucketPolicy", 3)
    deny = {"Effect": "Deny", "Action": "s3:*", "Principal": {"AWS": "*"}}
    template.all_resources_properties(
        "AWS::S3::BucketPolicy",
        {
            "PolicyDocument": {
                "Statement": Match.array_with(
                    [
                        Match.object_like({**deny, "Condition": {"Bool": {"aws:SecureTransport": "false"}}}),
                        Match.object_like({**deny, "Condition": {"NumericLessThan": {"s3:TlsVersion": 1.2}}}),
                    ]
                )
            }
        },
    )
    # One policy per bucket.
    policed = Capture()
    template.all_resources_properties("AWS::S3::BucketPolicy", {"Bucket": {"Ref": policed}})
    buckets = []
    while True:
        buckets.append(policed.as_string())
        if not policed.next():
            break
    assert sorted(buckets) == sorted(template.find_resources("AWS::S3::Bucket"))


@pytest.mark.parametrize("env", ENVS)
def test_versioning_lifecycle_and_access_logs(synthesized, env):
    template = synthesized.assertions(env, "Data")
    config = synthesized.environments[env]
    logs_id = bucket_id(template, "BucketsAccessLogsBucket")
    versioned = {"VersioningConfiguration": {"Status": "Enabled"}}
    logged = {"LoggingConfiguration": Match.object_like({"DestinationBucketName": {"Ref": logs_id}})}
    abort = Match.object_like({"Id": "AbortIncompleteMultipartUploads"})
    template.has_resource(
        "AWS::S3::Bucket",
        {
            "Properties": Match.object_like(
                {
                    **versioned,
                    **logged,
                    "LifecycleConfiguration": {
                        # In the order the construct writes them (Match.array_with keeps order).
                        "Rules": Match.array_with(
                            [
                                Match.object_like(
                                    {
                                        "Id": "AbortIncompleteMultipartUploads",
                                        "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 7},
                                    }
                                ),
                                Match.object_like(
                                    {
                                        "Id": "ExpireNoncurrentVersions",
                                        "NoncurrentVersionExpiration": {
                                            "NoncurrentDays": config.noncurrent_version_expiration_days
                                        },
                                    }
                                ),
                                {
                                    "Id": "ExpireCheckpoints",
                                    "Prefix": ARTIFACTS_CHECKPOINTS_PREFIX,
                                    "ExpirationInDays": config.checkpoint_expiration_days,
                                    "Status": "Enabled",
                                },
                            ]
                        )
                    },
                }
            )
        },
    )
    data_id = bucket_id(template, "BucketsDataBucket")
    assert data_id in template.find_resources(
        "AWS::S3::Bucket",
        {
            "Properties": Match.object_like(
                {**versioned, **logged, "LifecycleConfiguration": {"Rules": Match.array_with([abort])}}
            )
        },
    )
    assert logs_id in template.find_resources(
        "AWS::S3::Bucket",
        {
            "Properties": Match.object_like(
                {
                    "VersioningConfiguration": Match.absent(),
                    "LifecycleConfiguration": {"Rules": Match.array_with([abort])},
                }
            )
        },
    )


def test_prod_retains_and_protects_dev_auto_deletes(synthesized):
    prod, dev = synthesized.assertions("prod", "Data"), synthesized.assertions("dev", "Data")
    retain = {"DeletionPolicy": "Retain", "UpdateReplacePolicy": "Retain"}
    delete = {"DeletionPolicy": "Delete", "UpdateReplacePolicy": "Delete"}
    assert len(prod.find_resources("AWS::S3::Bucket", retain)) == 3
    prod.resource_count_is("Custom::S3AutoDeleteObjects", 0)
    assert len(dev.find_resources("AWS::S3::Bucket", delete)) == 3
    dev.resource_count_is("Custom::S3AutoDeleteObjects", 3)
    manifest_protection = {
        name: synthesized.stack(name).termination_protection for name in synthesized.templates
    }
    assert manifest_protection == {
        stack_name("prod", "Data"): True,
        stack_name("prod", "Pipeline"): True,
        stack_name("prod", "Quota"): False,
        stack_name("dev", "Data"): False,
        stack_name("dev", "Pipeline"): False,
        stack_name("dev", "Quota"): False,
    }
    for env, policy in (("prod", "Retain"), ("dev", "Delete")):
        template = synthesized.assertions(env, "Pipeline")
        groups = template.find_resources("AWS::Logs::LogGroup")
        assert groups and groups == template.find_resources("AWS::Logs::LogGroup", {"DeletionPolicy": policy})


@pytest.mark.parametrize("env", ENVS)
def test_ssm_parameters_and_outputs_name_what_the_cli_needs(synthesized, env):
    names = {
        p["Properties"]["Name"]
        for part in ("Data", "Pipeline")
        for p in synthesized.assertions(env, part).find_resources("AWS::SSM::Parameter").values()
    }
    assert names == {
        f"/hfpipe/{env}/{key}"
        for key in (
            "data-bucket",
            "artifacts-bucket",
            "execution-role-arn",
            "sourcedir-uri",
            "notification-topic-arn",
            # The pipeline's: the state machine and the image catalog resolved at synth time.
            "state-machine-arn",
            "image-catalog",
            # What the gate does with an unevaluated version (cdk.json evaluation_gate; docs/evaluation.md).
            "evaluation-gate",
            # The deploy state machine's (docs/deploy.md).
            "deploy-state-machine-arn",
            # An environment that promotes from another (cdk.json promote_from): its Promote state machine.
            *(["promote-state-machine-arn"] if synthesized.environments[env].promote_from else []),
            # An environment that declares a shared base: its adapter state machine and the base itself, which
            # `hfpipe report` reads rather than a checkout's cdk.json (docs/adapters.md).
            *(
                ["adapter-state-machine-arn", "shared-base"]
                if synthesized.environments[env].shared_base
                else []
            ),
            # An environment whose endpoints expire (cdk.json endpoint_ttl_hours): what the dry run plans with.
            *(["endpoint-ttl-seconds"] if synthesized.environments[env].endpoint_ttl_hours else []),
        )
    }
    pipeline = synthesized.assertions(env, "Pipeline")
    for output in (
        "ExecutionRoleArn",
        "SourcedirUri",
        "NotificationTopicArn",
        "PipelineLogGroupName",
        "StateMachineArn",
        "ImageCatalog",
        "DeployStateMachineArn",
    ):
        pipeline.has_output(output, {"Value": Match.any_value()})
    for output in ("DataBucketName", "ArtifactsBucketName"):
        synthesized.assertions(env, "Data").has_output(output, {"Value": Match.any_value()})


def test_the_shared_base_parameter_reads_back_as_the_environments_shared_base(synthesized):
    """What a Pipeline stack writes as shared-base is its cdk.json entry, defaults filled: the command's reader
    (parse_shared_base, hfpipe.cli.adapters.adapter_report) gives back the config the stack was built with."""
    from hfpipe.core.adapters.shared_base import parse_shared_base

    declaring = [env for env in ENVS if synthesized.environments[env].shared_base]
    assert declaring  # dev declares one (cdk.json)
    for env in declaring:
        name = f"/hfpipe/{env}/shared-base"
        parameters = synthesized.assertions(env, "Pipeline").find_resources("AWS::SSM::Parameter").values()
        [value] = [p["Properties"]["Value"] for p in parameters if p["Properties"]["Name"] == name]
        assert parse_shared_base(json.loads(value), name) == synthesized.environments[env].shared_base


@pytest.mark.parametrize("env", ENVS)
def test_execution_role_is_scoped(synthesized, env):
    template = synthesized.assertions(env, "Pipeline")
    region = synthesized.environments[env].region
    # The execution role is the one SageMaker assumes; the pipeline's Lambda and state machine roles are
    # checked in tests/pipeline.
    trust = {
        "Statement": [
            Match.object_like(
                {
                    "Principal": {"Service": "sagemaker.amazonaws.com"},
                    "Condition": {"StringEquals": Match.any_value(), "ArnLike": Match.any_value()},
                }
            )
        ]
    }
    (role_id,) = template.find_resources(
        "AWS::IAM::Role",
        {
            "Properties": {
                "AssumeRolePolicyDocument": Match.object_like(trust),
                "ManagedPolicyArns": Match.absent(),
            }
        },
    )
    data_arn = {"Fn::ImportValue": f"Hfpipe-{env}-Data-DataBucketArn"}
    artifacts_arn = {"Fn::ImportValue": f"Hfpipe-{env}-Data-ArtifactsBucketArn"}
    # What the role must pull, stated from the template's own image catalog (the SSM parameter the Plan and
    # the command read), parsed here: every image a job or endpoint of this environment runs, and no other.
    (catalog,) = [
        json.loads(p["Properties"]["Value"])
        for p in template.find_resources("AWS::SSM::Parameter").values()
        if isinstance(p["Properties"]["Value"], str) and '"training"' in p["Properties"]["Value"]
    ]
    # Every image scope ({key: {processor: uri}}: training, and each serving kind's), whichever kinds the
    # recipes use; the SDK's distribution and GPU tables hold lists.
    uris = [
        uri
        for scope in catalog.values()
        for images in scope.values()
        if isinstance(images, dict)
        for uri in images.values()
    ]
    repositories = Match.array_equals(
        sorted(
            {
                f"arn:aws:ecr:{region}:{host.split('.')[0]}:repository/{path.split(':')[0]}"
                for host, path in (uri.split("/", 1) for uri in uris)
            }
        )
    )
    sourcedir = Capture()
    template.has_resource_properties(
        "AWS::IAM::Policy",
        {
            "Roles": [{"Ref": role_id}],
            "PolicyDocument": {
                "Statement": Match.array_with(
                    [
                        Match.object_like(
                            {
                                "Sid": "ReadData",
                                "Action": "s3:GetObject",
                                "Resource": {"Fn::Join": ["", [data_arn, "/*"]]},
                            }
                        ),
                        Match.object_like(
                            {
                                "Sid": "ReadArtifacts",
                                "Action": "s3:GetObject",
                                "Resource": {"Fn::Join": ["", [artifacts_arn, "/*"]]},
                            }
                        ),
                        # Writes only under the prefixes a job's request names: models/ (S3OutputPath),
                        # checkpoints/ (CheckpointConfig) and evaluations/ (the evaluation job's output).
                        Match.object_like(
                            {
                                "Sid": "WriteJobOutputs",
                                "Action": Match.array_with(["s3:PutObject"]),
                                # (CDK orders a statement's resources.)
                                "Resource": Match.array_equals(
                                    [
                                        {"Fn::Join": ["", [artifacts_arn, "/checkpoints/*"]]},
                                        {"Fn::Join": ["", [artifacts_arn, "/evaluations/*"]]},
                                        {"Fn::Join": ["", [artifacts_arn, "/models/*"]]},
                                    ]
                                ),
                            }
                        ),
                        Match.object_like(
                            {
                                "Sid": "SageMakerMetrics",
                                "Condition": {"StringLike": {"cloudwatch:namespace": "/aws/sagemaker/*"}},
                            }
                        ),
                        Match.object_like({"Sid": "PullHuggingFaceContainers", "Resource": repositories}),
                        # The sourcedir: one object of the assets bucket, not the bucket.
                        {"Effect": "Allow", "Action": "s3:GetObject", "Resource": sourcedir},
                    ]
                )
            },
        },
    )
    # The recipes train on the Hugging Face PyTorch training DLC and serve on its inference DLC or the vLLM DLC
    # (and on whatever image another serving kind a recipe names has).
    assert {uri.split("/", 1)[1].split(":")[0] for uri in uris} >= {
        "huggingface-pytorch-training",
        "huggingface-pytorch-inference",
        "vllm",
    }
    # arn:aws:s3:::cdk-...-assets-<account>-<region>/<hash>.gz
    joined = sourcedir.as_object()["Fn::Join"][1]
    assert joined[0] == "arn:aws:s3:::" and "assets" in joined[1]["Fn::Sub"] and joined[-1].endswith(".gz")
    policies = template.find_resources("AWS::IAM::Policy", {"Properties": {"Roles": [{"Ref": role_id}]}})
    for policy in policies.values():
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            for action in as_list(statement["Action"]):
                assert "*" not in action, statement
            if statement["Resource"] == "*":
                assert statement["Sid"] in {"SageMakerMetrics", "EcrLogin"}, statement
            if "s3:PutObject" in as_list(statement["Action"]):
                assert statement.get("Sid") == "WriteJobOutputs", statement


@pytest.mark.parametrize("env", ENVS)
def test_notification_topic_is_encrypted_and_tls_only(synthesized, env):
    template = synthesized.assertions(env, "Pipeline")
    config = synthesized.environments[env]
    template.resource_count_is("AWS::SNS::Topic", 1)
    # Its own key (CloudWatch alarms cannot use the AWS managed alias/aws/sns key), rotated.
    ((key_id, key),) = template.find_resources("AWS::KMS::Key").items()
    assert key["Properties"]["EnableKeyRotation"] is True
    template.has_resource_properties("AWS::SNS::Topic", {"KmsMasterKeyId": {"Fn::GetAtt": [key_id, "Arn"]}})
    template.has_resource_properties(
        "AWS::SNS::TopicPolicy",
        {
            "PolicyDocument": {
                # TLS only; the other statement admits the failed-events alarm (test_pipeline_stack).
                "Statement": Match.array_with(
                    [
                        Match.object_like(
                            {"Effect": "Deny", "Condition": {"Bool": {"aws:SecureTransport": "false"}}}
                        )
                    ]
                )
            }
        },
    )
    # The stack's log group and the pipeline Lambdas' log groups: all with the environment's retention.
    assert template.find_resources("AWS::Logs::LogGroup")
    template.all_resources_properties("AWS::Logs::LogGroup", {"RetentionInDays": config.log_retention_days})


@pytest.mark.parametrize("env", ENVS)
def test_one_quota_request_per_configured_quota(synthesized, env):
    template = synthesized.assertions(env, "Quota")
    config = synthesized.environments[env]
    template.resource_count_is(RESOURCE_TYPE, len(config.quotas))
    for q in config.quotas:
        template.has_resource_properties(
            RESOURCE_TYPE, {"ServiceCode": q.service_code, "QuotaName": q.name, "DesiredValue": q.value}
        )
    # Each request's status output names the recipes needing the quota, derived from the recipes (stated
    # here by hand for the original recipes: the LoRA recipe serves on g5.4xlarge, the data-parallel and
    # model-parallel ones train on p3.16xlarge).
    described = {
        o["Description"].split(" (target ")[0]: o["Description"] for o in template.find_outputs("*").values()
    }
    assert set(described) == {q.name for q in config.quotas}
    assert described["ml.g5.4xlarge for endpoint usage"].endswith("used by bloomz-7b1-lora-samsum)")
    training = described["ml.p3.16xlarge for training job usage"]
    assert "bert-large-squad-ddp" in training and "roberta-large-mnli-mp" in training
    # The quota handler (JSON logs) and CDK's custom_resources.Provider framework function, which the
    # custom resources' service token names and which answers CloudFormation.
    template.resource_count_is("AWS::Lambda::Function", 2)
    handler = template.find_resources(
        "AWS::Lambda::Function",
        {
            "Properties": {
                "Handler": "quota_request.handler",
                "Runtime": "python3.14",
                "LoggingConfig": {"LogFormat": "JSON"},
            }
        },
    )
    assert len(handler) == 1
    (framework_id,) = set(template.find_resources("AWS::Lambda::Function")) - set(handler)
    template.all_resources_properties(RESOURCE_TYPE, {"ServiceToken": {"Fn::GetAtt": [framework_id, "Arn"]}})
    # No reserved concurrency: Lambda keeps 10 unreserved, so accounts limited to 10 refuse any.
    template.all_resources_properties(
        "AWS::Lambda::Function", {"ReservedConcurrentExecutions": Match.absent()}
    )
    actions = {a for s in policy_statements(template.to_json()) for a in as_list(s["Action"])}
    assert actions == {
        "logs:CreateLogStream",
        "logs:PutLogEvents",
        "lambda:InvokeFunction",  # the Provider framework invoking the handler
        "lambda:GetFunction",
        "servicequotas:RequestServiceQuotaIncrease",
        "servicequotas:ListServiceQuotas",
        "servicequotas:ListAWSDefaultServiceQuotas",
        "servicequotas:ListRequestedServiceQuotaChangeHistoryByQuota",
    }
    status_outputs = [k for k in template.find_outputs("*") if k.endswith("Status")]
    assert len(status_outputs) == len(config.quotas)


def _stack_with_pass_role(config):
    """A PipelineStack whose future Lambda uses the PassRole helper; bundling skipped (fast)."""
    # cdk.json's feature flags apply (e.g. access logs through a bucket policy, not ACLs).
    context = {**cdk_app.cdk_json_context(), "aws:cdk:bundling-stacks": []}
    app = cdk.App(context=context, builtin_cloud_formation_validation=False)
    env = cdk.Environment(region=config.region)
    data_stack = DataStack(app, "Data", config=config, env=env)
    stack = PipelineStack(
        app,
        "Pipeline",
        config=config,
        data_bucket=data_stack.shared_data_bucket,
        artifacts_bucket=data_stack.shared_artifacts_bucket,
        env=env,
    )
    role = stack.lambda_role("TestLaunchFunctionRole", "test: launches training jobs")
    stack.grant_pass_execution_role(role)
    return stack


def test_pass_role_only_on_the_execution_role_and_only_to_sagemaker(synthesized):
    stack = _stack_with_pass_role(synthesized.environments["dev"])
    template = assertions.Template.from_stack(stack)
    role_id = stack.get_logical_id(stack.execution_role.node.default_child)
    template.has_resource_properties(
        "AWS::IAM::Policy",
        {
            "PolicyDocument": {
                "Statement": [
                    {
                        "Action": "iam:PassRole",
                        "Effect": "Allow",
                        "Resource": {"Fn::GetAtt": [role_id, "Arn"]},
                        "Condition": {"StringEquals": {"iam:PassedToService": "sagemaker.amazonaws.com"}},
                    }
                ]
            }
        },
    )
    # Every PassRole anywhere (this stack and the real app) is on the execution role, conditioned.
    templates = [template.to_json(), *synthesized.templates.values()]
    pass_roles = [
        s
        for t in templates
        for s in policy_statements(t)
        if "iam:PassRole" in as_list(s["Action"]) or s["Action"] == "iam:*"
    ]
    assert pass_roles
    for statement in pass_roles:
        assert statement["Condition"] == {"StringEquals": {"iam:PassedToService": "sagemaker.amazonaws.com"}}
        assert statement["Resource"]["Fn::GetAtt"][0].startswith("SageMakerExecutionRole")
    new_role = template.find_resources(
        "AWS::IAM::Role", {"Properties": {"Description": "test: launches training jobs"}}
    )
    (lambda_role,) = new_role.values()
    assert lambda_role["Properties"]["AssumeRolePolicyDocument"]["Statement"][0]["Principal"] == {
        "Service": "lambda.amazonaws.com"
    }
    assert "ManagedPolicyArns" not in lambda_role["Properties"]


def test_pipeline_stack_exposes_what_the_state_machine_needs(synthesized):
    stack = synthesized.stack(stack_name("dev", "Pipeline"))
    assert isinstance(stack, PipelineStack)
    template = synthesized.assertions("dev", "Pipeline")
    # The attributes are the stack's own resources (not a look-up or an import).
    for attribute, resource_type in (
        ("execution_role", "AWS::IAM::Role"),
        ("notification_topic", "AWS::SNS::Topic"),
        ("log_group", "AWS::Logs::LogGroup"),
    ):
        logical_id = stack.get_logical_id(getattr(stack, attribute).node.default_child)
        assert logical_id in template.find_resources(resource_type), attribute
    assert stack.resolve(stack.data_bucket.bucket_arn) == {"Fn::ImportValue": "Hfpipe-dev-Data-DataBucketArn"}
    assert stack.resolve(stack.artifacts_bucket.bucket_name) == {
        "Fn::ImportValue": "Hfpipe-dev-Data-ArtifactsBucketName"
    }
    assert stack.resolve(stack.sourcedir_uri)["Fn::Sub"].startswith("s3://cdk-")


def test_stacks_carry_the_contract_tags(synthesized):
    for name in synthesized.templates:
        env = name.split("-")[1]
        assert synthesized.stack(name).tags.tag_values() == {"hfpipe:env": env, "hfpipe:managed-by": "hfpipe"}
