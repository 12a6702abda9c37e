"""What the pipeline's function components share: the code asset, the settings every function gets, and
the IAM helpers more than one of them grants with.

One asset, bundled locally (no Docker, no network): lambda/pipeline/ plus a copy of hfpipe/core,
hfpipe/contract.py, recipes/ and the installed packages the core imports (``BUNDLED_PACKAGES``: the schema's
validator), so the Plan Lambda validates with the same schema, validator and recipes as the CLI. ``pipeline_function``
makes one function of it with the common settings (runtime, architecture, memory, JSON logs into its own
log group, the environment name) and its own empty role; each component then grants that role what its
handler calls.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, cast

import aws_cdk as cdk
import jsii
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from hfpipe import contract
from hfpipe.core import limits, names
from hfpipe.core.deploy import deploy_requests, expiry
from stacks.nag import acknowledge, rendered, rendered_value
from stacks.template_hygiene import function_depends_on_policy_only

ROOT = Path(__file__).resolve().parents[2]
_IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc")
#: The handlers' package in the bundle (lambda/pipeline/pipeline_lambdas); hfpipe.local.engine.engine finds the
#: pipeline's functions in a template by this prefix of their Handler.
HANDLER_PACKAGE = "pipeline_lambdas"

RoleFactory = Callable[[str, str], iam.Role]
PassRoleGrant = Callable[[iam.IGrantable], iam.Grant]


#: The third-party packages hfpipe/core imports (pure Python, no dependencies of their own; pinned in
#: requirements.txt), which the Lambda runtime lacks: copied from this environment into the bundle.
BUNDLED_PACKAGES = ("fastjsonschema",)


def copy_package(name: str, out: Path) -> None:
    """The installed package ``name`` (found with importlib, as the core imports it) and its licence files,
    copied into ``out``: the same files wherever the pinned version is installed."""
    spec = importlib.util.find_spec(name)
    if spec is None or spec.origin is None:
        raise RuntimeError(f"the Lambda bundle needs the package {name!r}; install requirements.txt")
    shutil.copytree(Path(spec.origin).parent, out / name, dirs_exist_ok=True, ignore=_IGNORE)
    for file in importlib.metadata.distribution(name).files or ():
        if file.name in {"LICENSE", "AUTHORS"}:
            (out / f"{name}.licenses").mkdir(exist_ok=True)
            shutil.copy2(Path(str(file.locate())), out / f"{name}.licenses" / file.name)


def bundle_into(output_dir: str | Path) -> None:
    """Write the Lambda code bundle (handlers + hfpipe core + recipes + BUNDLED_PACKAGES) into ``output_dir``."""
    out = Path(output_dir)
    shutil.copytree(ROOT / "lambda" / "pipeline", out, dirs_exist_ok=True, ignore=_IGNORE)
    bundle_core(out)


def bundle_core(out: Path) -> None:
    """What a handler that runs hfpipe.core needs beside it, for every Lambda bundle (the pipeline's and the
    quota custom resource's): the core, the kinds and the shared strings it imports, the recipes it reads and
    BUNDLED_PACKAGES; boto3 and botocore are the Lambda runtime's."""
    (out / "hfpipe").mkdir(exist_ok=True)
    shutil.copy2(ROOT / "hfpipe" / "__init__.py", out / "hfpipe" / "__init__.py")
    shutil.copy2(ROOT / "hfpipe" / "contract.py", out / "hfpipe" / "contract.py")
    shutil.copytree(ROOT / "hfpipe" / "core", out / "hfpipe" / "core", dirs_exist_ok=True, ignore=_IGNORE)
    shutil.copytree(ROOT / "hfpipe" / "kinds", out / "hfpipe" / "kinds", dirs_exist_ok=True, ignore=_IGNORE)
    shutil.copytree(ROOT / "recipes", out / "hfpipe" / "recipes", dirs_exist_ok=True, ignore=_IGNORE)
    for name in BUNDLED_PACKAGES:
        copy_package(name, out)


@jsii.implements(cdk.ILocalBundling)
class LocalBundling:
    """CDK's local bundling, no Docker: ``write(output_dir)`` writes the bundle."""

    def __init__(self, write: Callable[[str], None]) -> None:
        self._write = write

    def try_bundle(self, output_dir: str, *, image: Any = None, **_: Any) -> bool:
        self._write(output_dir)
        return True


def code_asset() -> lambda_.Code:
    """The bundled code; hashed by output so an edit in hfpipe/core also changes the asset."""
    return lambda_.Code.from_asset(
        str(ROOT / "lambda" / "pipeline"),
        asset_hash_type=cdk.AssetHashType.OUTPUT,
        bundling=cdk.BundlingOptions(
            image=cdk.DockerImage.from_registry("unused"), local=LocalBundling(bundle_into)
        ),
    )


def handler_of(runtime_module: str) -> str:
    """The Handler of the function whose code is lambda/pipeline/pipeline_lambdas/<runtime_module>.py."""
    return f"{HANDLER_PACKAGE}.{runtime_module}.handler"


@dataclass(frozen=True)
class FunctionSettings:
    """What every pipeline function of one environment shares.

    ``role_factory(construct_id, description)`` makes each function's role, empty (PipelineStack's
    ``lambda_role``); ``code`` is one ``code_asset()`` for all of them (one upload).
    """

    env_name: str
    code: lambda_.Code
    role_factory: RoleFactory
    #: The environment's artifacts bucket (the Data stack's; a token until deploy time).
    artifacts_bucket_name: str
    log_retention: logs.RetentionDays = logs.RetentionDays.ONE_MONTH
    removal_policy: cdk.RemovalPolicy = cdk.RemovalPolicy.DESTROY
    #: cdk.json endpoint_ttl_hours: how long the endpoints the environment creates live (None: no expiry).
    endpoint_ttl_hours: int | None = None

    def ttl_environment(self) -> dict[str, str]:
        """The variable the functions that create endpoints (Plan, DeployPrepare, Adapter) read their time to
        live from, in seconds (hfpipe.core.deploy.expiry); none without one."""
        hours = self.endpoint_ttl_hours
        return {} if hours is None else {expiry.TTL_VARIABLE: str(hours * 3600)}


#: Lambda's asynchronous invocation settings for the functions EventBridge invokes: Lambda's own maximum
#: retries (2, its default) and the event age past which it stops retrying (6 h, its default; at most 6 h).
ASYNC_RETRY_ATTEMPTS = 2
ASYNC_MAX_EVENT_AGE = cdk.Duration.hours(6)


def pipeline_function(
    component: Construct,
    settings: FunctionSettings,
    *,
    runtime_module: str,
    environment: Mapping[str, str] | None = None,
    timeout_seconds: int = limits.LAMBDA_TIMEOUT_SECONDS,
    dead_letter_queue: sqs.IQueue | None = None,
) -> tuple[lambda_.Function, iam.Role]:
    """The function of ``component`` (its ``Default`` child) and its role, which may write its logs only.

    The construct IDs keep the logical IDs of the layout before the components (one construct holding all
    functions): ``Default`` is left out of a logical ID, the role comes from the factory (at the stack's
    root, ``<component id>Role``) and the log group is the component's sibling (``<component id>Logs``),
    so a retained environment keeps its log groups and docs/ keep naming the same resources.
    ``dead_letter_queue`` (functions invoked asynchronously) gets the events that failed every attempt;
    CDK grants the role sqs:SendMessage on that queue only. Those functions' asynchronous retries are written
    out rather than left at Lambda's defaults: EventBridge hands an event to Lambda once Lambda accepts it,
    and a function error is then retried by Lambda alone, ASYNC_RETRY_ATTEMPTS times (backoff 1 min, then
    2 min), for at most ASYNC_MAX_EVENT_AGE, before the event goes to the queue
    (https://docs.aws.amazon.com/lambda/latest/dg/invocation-async-error-handling.html).
    """
    cid = component.node.id
    parent = cast(Construct, component.node.scope)
    role = settings.role_factory(f"{cid}Role", f"hfpipe {settings.env_name} pipeline {runtime_module} Lambda")
    log_group = logs.LogGroup(
        parent, f"{cid}Logs", retention=settings.log_retention, removal_policy=settings.removal_policy
    )
    log_group.grant_write(role)
    function = lambda_.Function(
        component,
        "Default",
        runtime=lambda_.Runtime.PYTHON_3_14,
        architecture=lambda_.Architecture.ARM_64,
        handler=handler_of(runtime_module),
        code=settings.code,
        role=role,
        timeout=cdk.Duration.seconds(timeout_seconds),
        memory_size=256,
        log_group=log_group,
        # Lambda's JSON log format: one JSON object per line, execution_name in each (aws.logger).
        logging_format=lambda_.LoggingFormat.JSON,
        environment={"HFPIPE_ENV": settings.env_name, "LOG_LEVEL": "INFO", **(environment or {})},
        description=f"hfpipe {settings.env_name} pipeline: {runtime_module}",
        dead_letter_queue=dead_letter_queue,
        retry_attempts=ASYNC_RETRY_ATTEMPTS if dead_letter_queue is not None else None,
        max_event_age=ASYNC_MAX_EVENT_AGE if dead_letter_queue is not None else None,
    )
    # The log grant made the role's policy: the function now depends on it alone (cfn-lint W3005).
    function_depends_on_policy_only(function, role)
    return function, role


class PipelineFunction(Construct):
    """A component of stacks/functions/: ``function`` runs lambda/pipeline/pipeline_lambdas/<RUNTIME_MODULE>.py
    under ``role``, its own (``pipeline_function``, given ``options``); the component grants the role what
    its handler calls."""

    RUNTIME_MODULE: ClassVar[str]

    def __init__(
        self, scope: Construct, construct_id: str, settings: FunctionSettings, **options: Any
    ) -> None:
        super().__init__(scope, construct_id)
        self.function, self.role = pipeline_function(
            self, settings, runtime_module=self.RUNTIME_MODULE, **options
        )

    def allow(
        self, actions: list[str], resources: list[str], conditions: Mapping[str, Any] | None = None
    ) -> None:
        """One statement in the role's policy (``allow``)."""
        allow(self.role, actions, resources, conditions)


def allow(
    role: iam.IRole, actions: list[str], resources: list[str], conditions: Mapping[str, Any] | None = None
) -> None:
    """One statement in ``role``'s policy: ``actions`` on ``resources``, under ``conditions`` where given."""
    role.add_to_principal_policy(
        iam.PolicyStatement(actions=actions, resources=resources, conditions=conditions)
    )


def owned_by(env_name: str, condition_key: str) -> dict[str, dict[str, str]]:
    """An IAM condition: the hfpipe managed-by and env tags (``aws:RequestTag`` or ``aws:ResourceTag``).

    Execution names (and so resource names) are chosen when an execution starts, so the resource
    ARNs end in ``*``; the tags are what limits these actions to this environment's own resources.
    """
    return {
        "StringEquals": {
            f"{condition_key}/{contract.TAG_MANAGED_BY}": contract.PROJECT,
            f"{condition_key}/{contract.TAG_ENV}": env_name,
        }
    }


def grant_publish(role: iam.IRole, topic: sns.ITopic) -> None:
    """sns:Publish on ``topic`` only (Report, and Cleanup's report of an abnormal end), and the use of its
    key that SNS makes on the publisher's behalf: kms:GenerateDataKey and kms:Decrypt on that key only
    (https://docs.aws.amazon.com/sns/latest/dg/sns-key-management.html, the publisher's permissions)."""
    # Not topic.grant_publish: it would grant the key's kms:Encrypt and kms:ReEncrypt* too.
    iam.Grant.add_to_principal(grantee=role, actions=["sns:Publish"], resource_arns=[topic.topic_arn])
    key = topic.master_key
    if key is not None:
        iam.Grant.add_to_principal(
            grantee=role, actions=["kms:GenerateDataKey", "kms:Decrypt"], resource_arns=[key.key_arn]
        )


def grant_artifacts(
    role: iam.IRole, artifacts_bucket_name: str, actions: list[str], prefix: str, reason: str
) -> None:
    """``actions`` on the objects under ``prefix`` of this environment's artifacts bucket (keys named at run
    time), with cdk-nag's acknowledgement of that ``*`` (``reason``)."""
    partition = cdk.Stack.of(role).partition
    objects = f"arn:{partition}:s3:::{artifacts_bucket_name}/{prefix}*"
    role.add_to_principal_policy(iam.PolicyStatement(actions=actions, resources=[objects]))
    acknowledge_artifacts(role, artifacts_bucket_name, prefix, reason)


def acknowledge_artifacts(role: iam.IRole, artifacts_bucket_name: str, prefix: str, reason: str) -> None:
    """cdk-nag's acknowledgement of a grant on ``prefix``* of this environment's artifacts bucket."""
    stack = cdk.Stack.of(role)
    bucket = rendered(stack, f"arn:{stack.partition}:s3:::") + rendered_value(stack, artifacts_bucket_name)
    acknowledge(role, f"AwsSolutions-IAM5[Resource::{bucket}/{prefix}*]", reason)


def colon_arn(scope: Construct, service: str, resource: str, name: str) -> str:
    """The ARN of ``resource`` ``name`` in this stack's account and region, in the services' form with a colon
    before the name (arn:...:alarm:NAME, :stateMachine:NAME, :log-group:NAME)."""
    return cdk.Stack.of(scope).format_arn(
        service=service, resource=resource, resource_name=name, arn_format=cdk.ArnFormat.COLON_RESOURCE_NAME
    )


def sagemaker_arn(scope: Construct, resource: str) -> str:
    """Every SageMaker ``resource`` (training-job, endpoint, ...) of this account and region."""
    return cdk.Stack.of(scope).format_arn(service="sagemaker", resource=resource, resource_name="*")


def run_arn(scope: Construct, resource: str, env_name: str) -> str:
    """Every SageMaker ``resource`` (training-job, model, endpoint-config, endpoint) a pipeline run of ``env_name``
    names: their names start with <env>- (``names.run_prefix``), which no other environment's names do (no '-'
    in environment names; none is called hfpipe, whose named endpoints' prefix this would be)."""
    prefix = names.run_prefix(env_name)
    return cdk.Stack.of(scope).format_arn(service="sagemaker", resource=resource, resource_name=f"{prefix}*")


def acknowledge_run_time_names(role: iam.IRole, resources: list[str]) -> None:
    """The cdk-nag acknowledgement of SageMaker ARNs ending in ``*`` that ``owned_by`` conditions."""
    stack = cdk.Stack.of(role)
    for resource in resources:
        acknowledge(
            role,
            f"AwsSolutions-IAM5[Resource::{rendered(stack, resource)}]",
            "SageMaker resource names derive from the Step Functions execution name, chosen at "
            "start time; creating requires the request tags hfpipe:managed-by=hfpipe and "
            "hfpipe:env=<env>, deleting/stopping/invoking requires those resource tags; only "
            "Describe*/ListTags (read-only) are untagged.",
        )


def deploy_arn(scope: Construct, resource: str, env_name: str) -> str:
    """Every SageMaker ``resource`` (endpoint, endpoint-config, model) a deploy of ``env_name`` names: their
    names start with the named endpoints' prefix, hfpipe-<env>- (``contract.deployed_endpoint_name``), which
    no pipeline run's names do (theirs start with <env>-)."""
    prefix = contract.deployed_endpoint_name(env_name, "")
    return cdk.Stack.of(scope).format_arn(service="sagemaker", resource=resource, resource_name=f"{prefix}*")


def deployment_parameters_arn(scope: Construct, env_name: str) -> str:
    """The SSM parameters of the environment's deployment records (``contract.deployment_parameter_name``)."""
    path = contract.deployment_parameter_name(env_name, "*").lstrip("/")
    return cdk.Stack.of(scope).format_arn(service="ssm", resource="parameter", resource_name=path)


#: Application Auto Scaling's service-linked role for SageMaker variants, made at the first registration.
SCALING_SERVICE = "sagemaker.application-autoscaling.amazonaws.com"
SCALING_ROLE = "AWSServiceRoleForApplicationAutoScaling_SageMakerEndpoint"


#: Application Auto Scaling's own condition keys (SageMaker variants' instance counts), on every write that takes
#: them: Register, Deregister, PutScalingPolicy (TagResource takes neither; its tag conditions scope it).
SCALING_SCOPE = {
    "application-autoscaling:service-namespace": deploy_requests.SCALING_NAMESPACE,
    "application-autoscaling:scalable-dimension": deploy_requests.SCALING_DIMENSION,
}


def scaling_tagged(env_name: str) -> dict[str, dict[str, Any]]:
    """The condition of a write on an existing scalable target: it carries this environment's tags
    (``aws:ResourceTag``; the deploy tags every target it registers or finds, hfpipe.core.deploy.deploy_requests.scaling_tags)."""
    return {"StringEquals": {**SCALING_SCOPE, **owned_by(env_name, "aws:ResourceTag")["StringEquals"]}}


def scaling_tagging(env_name: str) -> dict[str, dict[str, Any]]:
    """The condition of a write that tags a scalable target (RegisterScalableTarget with Tags, TagResource): the
    request's tags are this environment's, and a target that has tags already has this environment's
    (``StringEqualsIfExists``: a new target has none yet; a target of another environment keeps its own)."""
    return {
        "StringEquals": owned_by(env_name, "aws:RequestTag")["StringEquals"],
        "StringEqualsIfExists": owned_by(env_name, "aws:ResourceTag")["StringEquals"],
    }


def grant_endpoint_scaling(role: iam.Role, env_name: str, *, register: bool, also: str = "") -> None:
    """Application Auto Scaling on this environment's scalable targets: read, tag (an untagged target,
    registered before targets were tagged, becomes this environment's at its next deploy) and deregister
    (``register`` also: register targets and put target tracking policies, with what AWS requires of such a
    caller on the target service, CloudWatch and the service-linked role; "Application Auto Scaling
    identity-based policy examples",
    https://docs.aws.amazon.com/autoscaling/application/userguide/security_iam_id-based-policy-examples.html).

    Scalable target ARNs end in a generated ID (scalable-target/<id>, not the endpoint's name), so the
    resource is "*" and the environment's tags scope the writes (the Service Authorization Reference,
    Application Auto Scaling: the scalable-target resource type takes aws:ResourceTag, RegisterScalableTarget
    and TagResource aws:RequestTag and aws:TagKeys; RegisterScalableTarget with Tags needs TagResource too;
    "Tagging support for Application Auto Scaling",
    https://docs.aws.amazon.com/autoscaling/application/userguide/resource-tagging-support.html).
    DescribeScalableTargets has no resource type and no condition key: it cannot be scoped. ``also``: the rest
    of the role's ``Resource::*`` acknowledgement (one per role), for its other actions on "*"."""
    tag_keys = {"ForAllValues:StringEquals": {"aws:TagKeys": [contract.TAG_MANAGED_BY, contract.TAG_ENV]}}
    allow(role, ["application-autoscaling:DescribeScalableTargets"], ["*"])
    allow(role, ["application-autoscaling:TagResource"], ["*"], {**scaling_tagging(env_name), **tag_keys})
    actions = ["application-autoscaling:DeregisterScalableTarget"]
    if register:
        actions += ["application-autoscaling:PutScalingPolicy"]
        # Registering (a new target, tagged in the same request) or updating (the same request, on a target
        # that is this environment's or, registered before targets were tagged, has no tags yet).
        tagging = scaling_tagging(env_name)
        allow(
            role,
            ["application-autoscaling:RegisterScalableTarget"],
            ["*"],
            {
                **tagging,
                "StringEquals": {**SCALING_SCOPE, **tagging["StringEquals"]},
                **tag_keys,
            },
        )
    allow(role, actions, ["*"], scaling_tagged(env_name))
    acknowledge(
        role,
        "AwsSolutions-IAM5[Resource::*]",
        "Application Auto Scaling: DescribeScalableTargets supports no resource-level permissions; scalable "
        "target ARNs end in a generated ID, so Register/Tag/Deregister/PutScalingPolicy are on * and limited "
        "to this environment's targets by its tags (aws:ResourceTag, aws:RequestTag) and to SageMaker variants' "
        "instance counts by the service-namespace and scalable-dimension condition keys." + also,
    )
    if register:
        _grant_scaling_dependencies(role, env_name)


def grant_hosting_deletes(role: iam.Role, env_name: str, hosting: list[str]) -> None:
    """DeleteEndpoint, DeleteEndpointConfig and DeleteModel of ``hosting`` (their ARNs), only where they carry
    this environment's tags."""
    allow(
        role,
        ["sagemaker:DeleteEndpoint", "sagemaker:DeleteEndpointConfig", "sagemaker:DeleteModel"],
        hosting,
        owned_by(env_name, "aws:ResourceTag"),
    )


def grant_scaling_service_linked_role(role: iam.Role) -> None:
    """CreateServiceLinkedRole of Application Auto Scaling's role for SageMaker (its first scalable target in
    an account makes it), that role only and for that service only."""
    stack = cdk.Stack.of(role)
    allow(
        role,
        ["iam:CreateServiceLinkedRole"],
        [
            stack.format_arn(
                service="iam",
                region="",
                resource="role",
                resource_name=f"aws-service-role/{SCALING_SERVICE}/{SCALING_ROLE}",
            )
        ],
        {"StringEquals": {"iam:AWSServiceName": SCALING_SERVICE}},
    )


def _grant_scaling_dependencies(role: iam.Role, env_name: str) -> None:
    """What AWS requires of a caller that registers SageMaker variants and puts target tracking policies:
    the endpoint and its config, the target tracking alarms, and the service-linked role."""
    stack = cdk.Stack.of(role)
    endpoints = [deploy_arn(role, r, env_name) for r in ("endpoint", "endpoint-config")]
    allow(
        role,
        [
            "sagemaker:DescribeEndpoint",
            "sagemaker:DescribeEndpointConfig",
            "sagemaker:UpdateEndpointWeightsAndCapacities",
        ],
        endpoints,
    )
    # Target tracking alarms are named TargetTracking-<ResourceId>-AlarmHigh|AlarmLow-<id>.
    alarms = colon_arn(
        stack,
        "cloudwatch",
        "alarm",
        f"TargetTracking-endpoint/{contract.deployed_endpoint_name(env_name, '')}*",
    )
    allow(
        role, ["cloudwatch:DescribeAlarms", "cloudwatch:PutMetricAlarm", "cloudwatch:DeleteAlarms"], [alarms]
    )
    grant_scaling_service_linked_role(role)
    for resource, reason in (
        (
            endpoints[0],
            "The environment's named endpoints (hfpipe-<env>-<name>, declared in cdk.json) and their configs "
            "(hfpipe-<env>-<name>-v<n>-<hash>): names fixed by prefix, the rest chosen per deploy.",
        ),
        (
            endpoints[1],
            "The named endpoints' configs (hfpipe-<env>-<name>-v<n>-<hash>, one per deploy execution): the "
            "prefix is fixed, the rest is chosen at run time.",
        ),
        (
            alarms,
            "Application Auto Scaling names its target tracking alarms after the named endpoint's variant.",
        ),
    ):
        acknowledge(role, f"AwsSolutions-IAM5[Resource::{rendered(stack, resource)}]", reason)


def grant_quota_reads(role: iam.Role, reader: str, also: str = "") -> None:
    """Service Quotas' two list actions (hfpipe.core.run.quotas: applied values, then the AWS defaults of quotas
    that have none); neither has resource-level permissions, so the acknowledgement says why (``also``: the
    rest of the role's ``Resource::*`` acknowledgement, which is one per role)."""
    allow(role, ["servicequotas:ListServiceQuotas", "servicequotas:ListAWSDefaultServiceQuotas"], ["*"])
    acknowledge(
        role,
        "AwsSolutions-IAM5[Resource::*]",
        "servicequotas:ListServiceQuotas and ListAWSDefaultServiceQuotas support no resource-level "
        f"permissions (Service Authorization Reference, Service Quotas); {reader} only reads quotas.{also}",
    )
