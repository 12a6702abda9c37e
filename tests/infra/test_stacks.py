"""Fine-grained assertions on the synthesized templates of every environment."""

from __future__ import annotations

import aws_cdk as cdk
import pytest
from aws_cdk import assertions
from infra_templates import as_list, flat, resources, statements

import app as cdk_app
from hfpipe.contract import ARTIFACTS_CHECKPOINTS_PREFIX, stack_name
from stacks.constructs.execution_role import huggingface_dlc_repositories
from stacks.constructs.quota_request import RESOURCE_TYPE
from stacks.data_stack import DataStack
from stacks.pipeline_stack import PipelineStack

ENVS = ["dev", "prod"]


def data(synthesized, env):
    return synthesized.templates[stack_name(env, "Data")]


def pipeline(synthesized, env):
    return synthesized.templates[stack_name(env, "Pipeline")]


def quota(synthesized, env):
    return synthesized.templates[stack_name(env, "Quota")]


def statements_of_role(template, role_id):
    """The statements of the AWS::IAM::Policy resources attached to one role (by logical ID)."""
    return [
        statement
        for policy in resources(template, "AWS::IAM::Policy").values()
        if {"Ref": role_id} in policy["Properties"]["Roles"]
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
    ]


def bucket_ids(template):
    # Logical IDs are the construct path plus an 8-hex-digit hash.
    return {logical_id[:-8]: logical_id for logical_id in resources(template, "AWS::S3::Bucket")}


def test_each_environment_has_three_stacks_named_by_the_contract(synthesized):
    assert sorted(synthesized.templates) == sorted(
        stack_name(env, part) for env in ENVS for part in ("Data", "Quota", "Pipeline")
    )


@pytest.mark.parametrize("env", ENVS)
def test_buckets_block_public_access_encrypt_and_enforce_bucket_ownership(synthesized, env):
    buckets = resources(data(synthesized, env), "AWS::S3::Bucket")
    assert len(buckets) == 3
    for bucket in buckets.values():
        props = bucket["Properties"]
        assert props["PublicAccessBlockConfiguration"] == {
            "BlockPublicAcls": True,
            "BlockPublicPolicy": True,
            "IgnorePublicAcls": True,
            "RestrictPublicBuckets": True,
        }
        assert props["BucketEncryption"]["ServerSideEncryptionConfiguration"] == [
            {"ServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}
        ]
        assert props["OwnershipControls"] == {"Rules": [{"ObjectOwnership": "BucketOwnerEnforced"}]}


@pytest.mark.parametrize("env", ENVS)
def test_every_bucket_policy_denies_plain_http_and_old_tls(synthesized, env):
    template = data(synthesized, env)
    policies = resources(template, "AWS::S3::BucketPolicy")
    assert {p["Properties"]["Bucket"]["Ref"] for p in policies.values()} == set(
        resources(template, "AWS::S3::Bucket")
    )
    for policy in policies.values():
        denies = [s for s in policy["Properties"]["PolicyDocument"]["Statement"] if s["Effect"] == "Deny"]
        conditions = [s["Condition"] for s in denies]
        assert {"Bool": {"aws:SecureTransport": "false"}} in conditions
        assert {"NumericLessThan": {"s3:TlsVersion": 1.2}} in conditions
        for deny in denies:
            assert deny["Action"] == "s3:*" and deny["Principal"] == {"AWS": "*"}


@pytest.mark.parametrize("env", ENVS)
def test_versioning_lifecycle_and_access_logs(synthesized, env):
    template = data(synthesized, env)
    config = synthesized.environments[env]
    by_name = bucket_ids(template)
    buckets = template["Resources"]
    artifacts = buckets[by_name["BucketsArtifactsBucket"]]["Properties"]
    data_bucket = buckets[by_name["BucketsDataBucket"]]["Properties"]
    logs_bucket = buckets[by_name["BucketsAccessLogsBucket"]]["Properties"]
    assert artifacts["VersioningConfiguration"] == {"Status": "Enabled"}
    assert data_bucket["VersioningConfiguration"] == {"Status": "Enabled"}
    assert "VersioningConfiguration" not in logs_bucket
    rules = {r["Id"]: r for r in artifacts["LifecycleConfiguration"]["Rules"]}
    assert rules["ExpireCheckpoints"] == {
        "Id": "ExpireCheckpoints",
        "Prefix": ARTIFACTS_CHECKPOINTS_PREFIX,
        "ExpirationInDays": config.checkpoint_expiration_days,
        "Status": "Enabled",
    }
    assert rules["AbortIncompleteMultipartUploads"]["AbortIncompleteMultipartUpload"] == {
        "DaysAfterInitiation": 7
    }
    assert rules["ExpireNoncurrentVersions"]["NoncurrentVersionExpiration"] == {
        "NoncurrentDays": config.noncurrent_version_expiration_days
    }
    for props in (data_bucket, logs_bucket):
        assert "AbortIncompleteMultipartUploads" in {
            r["Id"] for r in props["LifecycleConfiguration"]["Rules"]
        }
    for props in (artifacts, data_bucket):
        assert props["LoggingConfiguration"]["DestinationBucketName"] == {
            "Ref": by_name["BucketsAccessLogsBucket"]
        }


def test_prod_retains_and_protects_dev_auto_deletes(synthesized):
    prod, dev = data(synthesized, "prod"), data(synthesized, "dev")
    for bucket in resources(prod, "AWS::S3::Bucket").values():
        assert (bucket["DeletionPolicy"], bucket["UpdateReplacePolicy"]) == ("Retain", "Retain")
    assert resources(prod, "Custom::S3AutoDeleteObjects") == {}
    for bucket in resources(dev, "AWS::S3::Bucket").values():
        assert (bucket["DeletionPolicy"], bucket["UpdateReplacePolicy"]) == ("Delete", "Delete")
    assert len(resources(dev, "Custom::S3AutoDeleteObjects")) == 3
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
    for group in resources(pipeline(synthesized, "prod"), "AWS::Logs::LogGroup").values():
        assert group["DeletionPolicy"] == "Retain"
    for group in resources(pipeline(synthesized, "dev"), "AWS::Logs::LogGroup").values():
        assert group["DeletionPolicy"] == "Delete"


@pytest.mark.parametrize("env", ENVS)
def test_ssm_parameters_and_outputs_name_what_the_cli_needs(synthesized, env):
    names = {
        p["Properties"]["Name"]
        for part in ("Data", "Pipeline")
        for p in resources(synthesized.templates[stack_name(env, part)], "AWS::SSM::Parameter").values()
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
        )
    }
    assert {
        "ExecutionRoleArn",
        "SourcedirUri",
        "NotificationTopicArn",
        "PipelineLogGroupName",
        "StateMachineArn",
        "ImageCatalog",
    } <= set(pipeline(synthesized, env)["Outputs"])
    assert {"DataBucketName", "ArtifactsBucketName"} <= set(data(synthesized, env)["Outputs"])


@pytest.mark.parametrize("env", ENVS)
def test_execution_role_is_scoped(synthesized, env):
    template = pipeline(synthesized, env)
    region = synthesized.environments[env].region
    # The execution role is the one SageMaker assumes; the pipeline's Lambda and state machine roles are
    # checked in tests/pipeline.
    ((role_id, role),) = [
        (k, r)
        for k, r in resources(template, "AWS::IAM::Role").items()
        if r["Properties"]["AssumeRolePolicyDocument"]["Statement"][0]["Principal"].get("Service")
        == "sagemaker.amazonaws.com"
    ]
    role_statements = statements_of_role(template, role_id)
    (trust,) = role["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    assert trust["Principal"] == {"Service": "sagemaker.amazonaws.com"}
    assert set(trust["Condition"]) == {"StringEquals", "ArnLike"}
    assert "ManagedPolicyArns" not in role["Properties"]
    by_sid = {s.get("Sid"): s for s in role_statements}
    assert by_sid["ReadData"]["Action"] == "s3:GetObject"
    assert by_sid["ReadData"]["Resource"] == {
        "Fn::Join": ["", [{"Fn::ImportValue": f"Hfpipe-{env}-Data-DataBucketArn"}, "/*"]]
    }
    artifacts = {"Fn::ImportValue": f"Hfpipe-{env}-Data-ArtifactsBucketArn"}
    assert by_sid["ReadArtifacts"]["Action"] == "s3:GetObject"
    assert by_sid["ReadArtifacts"]["Resource"] == {"Fn::Join": ["", [artifacts, "/*"]]}
    # Writes only under the prefixes a job's request names: models/ (S3OutputPath), checkpoints/.
    assert "s3:PutObject" in by_sid["WriteJobOutputs"]["Action"]
    assert sorted(flat(r) for r in by_sid["WriteJobOutputs"]["Resource"]) == [
        f"${{Fn::ImportValue:Hfpipe-{env}-Data-ArtifactsBucketArn}}/checkpoints/*",
        f"${{Fn::ImportValue:Hfpipe-{env}-Data-ArtifactsBucketArn}}/models/*",
    ]
    writes = [s for s in role_statements if "s3:PutObject" in as_list(s["Action"])]
    assert writes == [by_sid["WriteJobOutputs"]]
    assert by_sid["SageMakerMetrics"]["Condition"] == {
        "StringLike": {"cloudwatch:namespace": "/aws/sagemaker/*"}
    }
    repositories = [flat(r).split(":", 2)[2] for r in by_sid["PullHuggingFaceContainers"]["Resource"]]
    assert repositories == [
        f"ecr:{region}:{account}:repository/{repo}" for account, repo in huggingface_dlc_repositories(region)
    ]
    assert {repo for _, repo in huggingface_dlc_repositories(region)} >= {
        "huggingface-pytorch-training",
        "huggingface-pytorch-inference",
    }
    # The sourcedir: one object of the assets bucket, not the bucket.
    (sourcedir,) = [s for s in role_statements if "Sid" not in s]
    assert sourcedir["Action"] == "s3:GetObject"
    assert flat(sourcedir["Resource"]).endswith(".gz")
    assert "assets" in flat(sourcedir["Resource"])
    for statement in role_statements:
        for action in as_list(statement["Action"]):
            assert "*" not in action, statement
        if statement["Resource"] == "*":
            assert statement["Sid"] in {"SageMakerMetrics", "EcrLogin"}, statement


@pytest.mark.parametrize("env", ENVS)
def test_notification_topic_is_encrypted_and_tls_only(synthesized, env):
    template = pipeline(synthesized, env)
    (topic,) = resources(template, "AWS::SNS::Topic").values()
    key = flat(topic["Properties"]["KmsMasterKeyId"])
    assert key.endswith(f":kms:{synthesized.environments[env].region}:${{Ref:AWS::AccountId}}:alias/aws/sns")
    (policy,) = resources(template, "AWS::SNS::TopicPolicy").values()
    (deny,) = policy["Properties"]["PolicyDocument"]["Statement"]
    assert (deny["Effect"], deny["Condition"]) == ("Deny", {"Bool": {"aws:SecureTransport": "false"}})
    # The stack's log group and the pipeline Lambdas' log groups: all with the environment's retention.
    groups = resources(template, "AWS::Logs::LogGroup").values()
    assert len(groups) >= 1
    for group in groups:
        assert group["Properties"]["RetentionInDays"] == synthesized.environments[env].log_retention_days


@pytest.mark.parametrize("env", ENVS)
def test_one_quota_request_per_configured_quota(synthesized, env):
    template = quota(synthesized, env)
    config = synthesized.environments[env]
    requests = resources(template, RESOURCE_TYPE)
    assert sorted(
        (r["Properties"]["ServiceCode"], r["Properties"]["QuotaName"], r["Properties"]["DesiredValue"])
        for r in requests.values()
    ) == sorted((q.service_code, q.name, q.value) for q in config.quotas)
    functions = resources(template, "AWS::Lambda::Function").values()
    (function,) = [f for f in functions if f["Properties"]["Handler"] == "quota_request.handler"]
    assert function["Properties"]["Runtime"] == "python3.14"
    assert function["Properties"]["LoggingConfig"]["LogFormat"] == "JSON"
    # No reserved concurrency: Lambda keeps 10 unreserved, so accounts limited to 10 refuse any.
    assert all("ReservedConcurrentExecutions" not in f["Properties"] for f in functions)
    # custom_resources.Provider: the custom resources' service token is the framework function, which
    # invokes the handler and answers CloudFormation.
    (framework,) = [f for f in functions if f is not function]
    for request in requests.values():
        token = request["Properties"]["ServiceToken"]["Fn::GetAtt"][0]
        assert template["Resources"][token] is framework
    actions = {a for s in statements(template) for a in as_list(s["Action"])}
    assert actions >= {
        "servicequotas:GetServiceQuota",
        "servicequotas:RequestServiceQuotaIncrease",
        "servicequotas:ListServiceQuotas",
        "servicequotas:ListAWSDefaultServiceQuotas",
        "servicequotas:GetAWSDefaultServiceQuota",
        "servicequotas:ListRequestedServiceQuotaChangeHistoryByQuota",
    }
    status_outputs = [k for k in template["Outputs"] if k.endswith("Status")]
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
        for s in statements(t)
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
    for attribute in ("execution_role", "notification_topic", "log_group", "sourcedir"):
        assert getattr(stack, attribute) is not None
    assert stack.resolve(stack.data_bucket.bucket_arn) == {"Fn::ImportValue": "Hfpipe-dev-Data-DataBucketArn"}
    assert stack.resolve(stack.artifacts_bucket.bucket_name) == {
        "Fn::ImportValue": "Hfpipe-dev-Data-ArtifactsBucketName"
    }
    assert stack.resolve(stack.sourcedir_uri)["Fn::Sub"].startswith("s3://cdk-")


def test_stacks_carry_the_contract_tags(synthesized):
    for name in synthesized.templates:
        env = name.split("-")[1]
        assert synthesized.stack(name).tags.tag_values() == {"hfpipe:env": env, "hfpipe:managed-by": "hfpipe"}
