"""Small template fixes that keep cfn-lint at zero warnings without switching rules off."""

from __future__ import annotations

from aws_cdk import CfnResource, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_

AUTO_DELETE_PROVIDER_ID = "Custom::S3AutoDeleteObjectsCustomResourceProvider"


def function_depends_on_policy_only(function: lambda_.Function, role: iam.Role) -> None:
    """A Lambda with its own role: `DependsOn` only the role's policy (cfn-lint W3005).

    CDK makes the function depend on the whole role construct, but the `Role` GetAtt already orders
    function after role; the policy dependency is the one that matters (it must exist before invoke).
    """
    function_resource = function.node.default_child
    policy = role.node.try_find_child("DefaultPolicy")
    assert isinstance(function_resource, CfnResource)
    depends_on = []
    if policy is not None:
        policy_resource = policy.node.default_child
        assert isinstance(policy_resource, CfnResource)
        depends_on.append(Stack.of(function).get_logical_id(policy_resource))
    function_resource.add_override("DependsOn", depends_on)


def drop_role_depends_on(function: CfnResource, role: CfnResource) -> None:
    """Remove a Lambda's `DependsOn` its role: the `Role` GetAtt already orders them (cfn-lint W3005)."""
    function.remove_resource_dependency(role)


def fix_auto_delete_provider(stack: Stack) -> None:
    """The same fix for the Lambda that CDK adds to empty `auto_delete_objects` buckets, if the stack has it."""
    provider = stack.node.try_find_child(AUTO_DELETE_PROVIDER_ID)
    if provider is not None:
        handler, role = provider.node.find_child("Handler"), provider.node.find_child("Role")
        assert isinstance(handler, CfnResource) and isinstance(role, CfnResource)
        drop_role_depends_on(handler, role)
