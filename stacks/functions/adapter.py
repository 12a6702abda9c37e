"""AdapterFunction: lambda/pipeline/pipeline_lambdas/adapter.py, the adapter state machine's steps (put an
approved adapter version on the environment's shared base, roll one back, delete one; docs/adapters.md).

Made only where cdk.json declares the environment's ``shared_base``. Its environment: the shared base
(``SHARED_BASE``, validated at synth, its fit checked against the image catalog's GPU table), the vLLM image
the base serves on (``SHARED_BASE_IMAGE``: the catalog's newest vLLM container), the GPUs of its instance
(``SHARED_BASE_GPUS``), the execution role (``EXECUTION_ROLE_ARN``: the base model's role, which pulls the
image and reads the adapters' artifacts) and the bake (``BAKE_SECONDS``, ``BAKE_PROBES``).

Its role may: read this environment's model package versions and list its groups' versions (a rollback looks
for the version an adapter serves); create (this environment's request tags) and read the shared base's model,
endpoint config and endpoint (hfpipe-<env>-shared-base only); create (request tags), update, delete (resource
tags) and read this environment's inference components (hfpipe-<env>-*); delete the shared base's endpoint,
config and model (resource tags: retiring the base); read this environment's artifacts (an adapter's
adapter_config.json); list the inference components, read the bake's CloudWatch metrics and the account's
Service Quotas (actions without resource types: ``*``); read this environment's endpoints and endpoint configs
(hfpipe-<env>-*: before the base is made, what its named endpoints run of the base's instance type counts
against the same endpoint-usage quota); pass the execution role to SageMaker; list and read its own state
machine's executions (one change at a time per adapter). Nothing else.
"""

from __future__ import annotations

from typing import Any, cast

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from constructs import Construct

from hfpipe import contract
from hfpipe.core.adapters import adapter_fit, scale_to_zero
from hfpipe.core.adapters.shared_base import SharedBase
from stacks.functions.common import (
    FunctionSettings,
    PassRoleGrant,
    PipelineFunction,
    allow,
    colon_arn,
    deploy_arn,
    grant_artifacts,
    grant_hosting_deletes,
    grant_scaling_service_linked_role,
    owned_by,
)
from stacks.functions.deploy_prepare import state_machine_arns, versions_arn
from stacks.nag import acknowledge, rendered

#: The bake: seconds the adapter's component is watched after its smoke test passed, and the probes of it in
#: that time (one every BAKE_SECONDS / BAKE_PROBES seconds, each the smoke test's call: each must answer).
BAKE_SECONDS = 300
BAKE_PROBES = 5
#: The base component's host memory (Specification.ComputeResourceRequirements.MinMemoryRequiredInMb): its
#: weights live on the GPUs; AWS's adapter examples reserve 1,024 MB of host memory for a base component.
BASE_MEMORY_MB = 1024


def newest_vllm_image(catalog: dict[str, Any]) -> str:
    """The image catalog's newest vLLM container (dlc_images.json's pins, the versions the recipes name)."""
    versions = sorted(catalog.get("vllm", {}), key=lambda v: tuple(int(p) for p in v.split(".")))
    if not versions:
        raise ValueError(
            "shared_base: the image catalog has no vLLM container; accepted: a recipe of kind vllm"
        )
    return str(catalog["vllm"][versions[-1]]["gpu"])


def components_arn(scope: Construct, env: str) -> str:
    """This environment's inference components: the shared base's and its adapters' (hfpipe-<env>-*)."""
    return cdk.Stack.of(scope).format_arn(
        service="sagemaker",
        resource="inference-component",
        resource_name=contract.deployed_endpoint_name(env, "*"),
    )


def grant_invoke_adapters(role: iam.IRole, env: str) -> None:
    """InvokeEndpoint naming one of this environment's inference components (the SmokeTest's call of an
    adapter): the reference lists inference-component as a resource type of InvokeEndpoint beside the endpoint,
    which the role already has; on the components' environment tags."""
    components = components_arn(cast(Construct, role), env)
    allow(role, ["sagemaker:InvokeEndpoint"], [components], owned_by(env, "aws:ResourceTag"))
    acknowledge(
        role,
        f"AwsSolutions-IAM5[Resource::{rendered(cdk.Stack.of(cast(Construct, role)), components)}]",
        "InvokeEndpoint of this environment's inference components (hfpipe-<env>-shared-base and "
        "hfpipe-<env>-adapter-<name>, named by the command) only, on their hfpipe:managed-by and hfpipe:env "
        "tags: the smoke test of an adapter.",
    )


class AdapterFunction(PipelineFunction):
    """The adapter state machine's function (``function``) and its role (``role``)."""

    RUNTIME_MODULE = "adapter"

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        settings: FunctionSettings,
        base: SharedBase,
        image_catalog: dict[str, Any],
        region: str,
        execution_role: iam.IRole,
        grant_pass_role: PassRoleGrant,
        named_endpoints: tuple[str, ...] = (),
        evaluation_gate: str = "advisory",
    ) -> None:
        env = settings.env_name
        fit = adapter_fit.check_shared_base(base, image_catalog, region, f"environments.{env}.shared_base")
        super().__init__(
            scope,
            construct_id,
            settings,
            environment={
                "SHARED_BASE": cdk.Stack.of(scope).to_json_string(base.to_json()),
                "SHARED_BASE_IMAGE": newest_vllm_image(image_catalog),
                "SHARED_BASE_GPUS": str(fit.base.gpus),
                "SHARED_BASE_MEMORY_MB": str(BASE_MEMORY_MB),
                "EXECUTION_ROLE_ARN": execution_role.role_arn,
                "BAKE_SECONDS": str(BAKE_SECONDS),
                "BAKE_PROBES": str(BAKE_PROBES),
                # The environment's named endpoints (cdk.json), counted beside the base it would make.
                "NAMED_ENDPOINTS": ",".join(contract.deployed_endpoint_name(env, n) for n in named_endpoints),
                **settings.ttl_environment(),
                # cdk.json evaluation_gate: Apply refuses an unevaluated version where it is mandatory.
                "EVALUATION_GATE": evaluation_gate,
            },
        )
        grant_pass_role(self.role)
        self._env = env
        self._grant(env)
        self._grant_retire(env)
        self._grant_artifact_reads(settings.artifacts_bucket_name)
        if base.scale_to_zero.enabled:
            self._grant_scale_to_zero(env)

    def _grant_retire(self, env: str) -> None:
        """Retiring the base (and a failed first deploy's way back): its endpoint, config and model, on their
        environment tags (its components: DeleteInferenceComponent, granted with the adapters')."""
        stack = cdk.Stack.of(self)
        base = contract.deployed_endpoint_name(env, contract.SHARED_BASE)
        hosting = [
            stack.format_arn(service="sagemaker", resource=r, resource_name=base)
            for r in ("model", "endpoint-config", "endpoint")
        ]
        grant_hosting_deletes(self.role, env, hosting)

    def _grant_scale_to_zero(self, env: str) -> None:
        """Scale to zero of the base (hfpipe.core.adapters.scale_to_zero), made with the base and removed when it
        is retired: Application Auto Scaling on the base component's copies only (the service-namespace and
        scalable-dimension condition keys; targets end in a generated ID, so "*" scoped by this environment's
        tags, as the named endpoints' scaling is: stacks.functions.common.grant_endpoint_scaling), what AWS
        requires of such a caller on the target service (DescribeInferenceComponent, granted above, and
        UpdateInferenceComponentRuntimeConfig) and the service-linked role, the target tracking policy's
        alarms (TargetTracking-inference-component/<name>-...) and the no-capacity alarm by its name."""
        component = contract.deployed_endpoint_name(env, contract.SHARED_BASE)
        scope = {
            "application-autoscaling:service-namespace": scale_to_zero.NAMESPACE,
            "application-autoscaling:scalable-dimension": scale_to_zero.DIMENSION,
        }
        tag_keys = {"ForAllValues:StringEquals": {"aws:TagKeys": [contract.TAG_MANAGED_BY, contract.TAG_ENV]}}
        request_tags = owned_by(env, "aws:RequestTag")["StringEquals"]
        resource_tags = owned_by(env, "aws:ResourceTag")["StringEquals"]
        for actions, conditions in (
            (
                ["application-autoscaling:RegisterScalableTarget"],
                {
                    "StringEquals": {**scope, **request_tags},
                    "StringEqualsIfExists": resource_tags,
                    **tag_keys,
                },
            ),
            (
                ["application-autoscaling:TagResource"],
                {"StringEquals": request_tags, "StringEqualsIfExists": resource_tags, **tag_keys},
            ),
            (
                [
                    "application-autoscaling:PutScalingPolicy",
                    "application-autoscaling:DeregisterScalableTarget",
                ],
                {"StringEquals": {**scope, **resource_tags}},
            ),
        ):
            self.allow(actions, ["*"], conditions)
        self._grant_scaling_dependencies(env, component)

    def _grant_scaling_dependencies(self, env: str, component: str) -> None:
        """What Application Auto Scaling requires of the caller that registers the base component and puts
        its policies, and the no-capacity alarm (``_grant_scale_to_zero``)."""
        stack = cdk.Stack.of(self)
        alarms = [
            colon_arn(stack, "cloudwatch", "alarm", name)
            for name in (
                scale_to_zero.alarm_name(component),
                f"TargetTracking-inference-component/{component}-*",
            )
        ]
        self.allow(
            ["cloudwatch:DescribeAlarms", "cloudwatch:PutMetricAlarm", "cloudwatch:DeleteAlarms"],
            alarms,
        )
        self.allow(
            ["sagemaker:UpdateInferenceComponentRuntimeConfig"],
            [stack.format_arn(service="sagemaker", resource="inference-component", resource_name=component)],
            owned_by(env, "aws:ResourceTag"),
        )
        grant_scaling_service_linked_role(self.role)
        acknowledge(
            self.role,
            f"AwsSolutions-IAM5[Resource::{rendered(stack, alarms[1])}]",
            "Application Auto Scaling names the base component's target tracking alarms "
            "TargetTracking-inference-component/<component>-AlarmHigh|AlarmLow-<id>: the id is its own.",
        )

    def _grant_artifact_reads(self, artifacts_bucket_name: str) -> None:
        """GetObject of this environment's artifacts: Apply reads an adapter version's adapter_config.json
        from its model.tar.gz (hfpipe.core.adapters.adapter_load) before anything is made."""
        grant_artifacts(
            self.role,
            artifacts_bucket_name,
            ["s3:GetObject"],
            "",
            "Reads (GetObject) the adapter versions' model.tar.gz in this environment's artifacts bucket only "
            "(keys named by the training job), to check the adapter's adapter_config.json against the base.",
        )

    def _grant(self, env: str) -> None:
        stack = cdk.Stack.of(self)
        base = contract.deployed_endpoint_name(env, contract.SHARED_BASE)
        hosting = [
            stack.format_arn(service="sagemaker", resource=r, resource_name=base)
            for r in ("model", "endpoint-config", "endpoint")
        ]
        components = components_arn(self, env)
        versions = versions_arn(self, env)
        machine, executions = state_machine_arns(self, contract.adapter_state_machine_name(env))
        for actions, resources, conditions in (
            (["sagemaker:DescribeModelPackage"], [versions], None),
            # An override Apply passed with, appended to the version's ApprovalDescription by the act
            # (adapter._record_override; UpdateModelPackage's resource type is model-package).
            (["sagemaker:UpdateModelPackage"], [versions], None),
            # Tags on create: CreateModel, ..., CreateInferenceComponent with Tags need sagemaker:AddTags too.
            (
                [
                    "sagemaker:CreateModel",
                    "sagemaker:CreateEndpointConfig",
                    "sagemaker:CreateEndpoint",
                    "sagemaker:AddTags",
                ],
                hosting,
                owned_by(env, "aws:RequestTag"),
            ),
            # CreateInferenceComponent requires both the endpoint and the inference-component resource types
            # (Service Authorization Reference, SageMaker; tests/infra/iam_reference.py checks it).
            (
                ["sagemaker:CreateInferenceComponent", "sagemaker:AddTags"],
                [components, hosting[2]],
                owned_by(env, "aws:RequestTag"),
            ),
            (
                ["sagemaker:UpdateInferenceComponent", "sagemaker:DeleteInferenceComponent"],
                [components],
                owned_by(env, "aws:ResourceTag"),
            ),
            (
                ["sagemaker:DescribeModel", "sagemaker:DescribeEndpointConfig", "sagemaker:DescribeEndpoint"],
                hosting,
                None,
            ),
            (["sagemaker:DescribeInferenceComponent"], [components], None),
            (["states:ListExecutions"], [machine], None),
            (["states:DescribeExecution"], [executions], None),
        ):
            self.allow(actions, resources, conditions)
        self._grant_reads(env)
        self._acknowledge(stack, versions, components, executions)

    def _grant_reads(self, env: str) -> None:
        """The reads without resource types, and what the environment's named endpoints run (the quota)."""
        # No resource types (Service Authorization Reference: SageMaker's ListInferenceComponents,
        # ListModelPackageGroups and ListModelPackages; CloudWatch's GetMetricStatistics).
        unscoped = [
            "sagemaker:ListInferenceComponents",
            "sagemaker:ListModelPackageGroups",
            "sagemaker:ListModelPackages",
            "cloudwatch:GetMetricStatistics",
            # The base's endpoint-usage quota, read before the base is made (hfpipe.core.run.quotas).
            "servicequotas:ListServiceQuotas",
            "servicequotas:ListAWSDefaultServiceQuotas",
        ]
        self.allow(unscoped, ["*"])
        # Before the base is made: what the environment's named endpoints run of its type (the quota).
        neighbours = [deploy_arn(self, r, env) for r in ("endpoint", "endpoint-config")]
        self.allow(["sagemaker:DescribeEndpoint", "sagemaker:DescribeEndpointConfig"], neighbours)

    def _acknowledge(self, stack: cdk.Stack, versions: str, components: str, executions: str) -> None:
        for resource, reason in (
            (
                versions,
                "Reads (DescribeModelPackage) the versions of this environment's model package groups only "
                "(hfpipe-<env>-<recipe>), numbered by SageMaker at registration, and appends an evaluation-gate "
                "override's reason to their ApprovalDescription (UpdateModelPackage, approval status unchanged).",
            ),
            (
                components,
                "This environment's inference components (hfpipe-<env>-shared-base and hfpipe-<env>-adapter-"
                "<name>, named by the command): creating requires the request tags hfpipe:managed-by and "
                "hfpipe:env, updating and deleting those resource tags; Describe is read-only.",
            ),
            (
                executions,
                "Reads (DescribeExecution) the executions of this environment's adapter state machine only, to "
                "refuse a change while another one of the same adapter runs.",
            ),
            (
                deploy_arn(self, "endpoint", self._env),
                "Reads (DescribeEndpoint) the environment's endpoints (hfpipe-<env>-*: its named endpoints and "
                "its shared base) before the base is made: what they run of the base's instance type counts "
                "against the same endpoint-usage quota; read-only.",
            ),
            (
                deploy_arn(self, "endpoint-config", self._env),
                "Reads (DescribeEndpointConfig) the configs of the environment's endpoints (hfpipe-<env>-*): "
                "the instance type each variant runs; read-only.",
            ),
            (
                "*",
                "ListInferenceComponents, ListModelPackageGroups, ListModelPackages, GetMetricStatistics, "
                "Service Quotas' ListServiceQuotas and ListAWSDefaultServiceQuotas have no resource types "
                "(Service Authorization Reference); all are read-only. Where the base scales to zero: "
                "scalable target ARNs end in a generated ID, so Register/Tag/Deregister/PutScalingPolicy are "
                "on * and limited to this environment's targets by its tags (aws:ResourceTag, aws:RequestTag) "
                "and to inference components' copy counts by the service-namespace and scalable-dimension "
                "condition keys.",
            ),
        ):
            acknowledge(self.role, f"AwsSolutions-IAM5[Resource::{rendered(stack, resource)}]", reason)
