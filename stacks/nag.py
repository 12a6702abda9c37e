"""cdk-nag acknowledgements in one shape, so docs/infra.md can list every one with its reason."""

from __future__ import annotations

from aws_cdk import Acknowledgment, Stack, Token, Validations
from constructs import IConstruct


def acknowledge(scope: IConstruct, rule_id: str, reason: str) -> None:
    """Acknowledge one cdk-nag finding (`Rule` or `Rule[Finding]`) on `scope` and its children."""
    Validations.of(scope).acknowledge(Acknowledgment(id=rule_id, reason=reason))


def rendered(stack: Stack, text: str) -> str:
    """`text` as cdk-nag prints it in a finding: pseudo-parameter tokens become `<AWS::Name>`."""
    for value, name in (
        (stack.partition, "Partition"),
        (stack.region, "Region"),
        (stack.account, "AccountId"),
    ):
        if Token.is_unresolved(value):
            text = text.replace(value, f"<AWS::{name}>")
    return text


def rendered_value(stack: Stack, value: str) -> str:
    """A token (a `GetAtt`, an `ImportValue` or a string with pseudo parameters) as cdk-nag prints it."""
    resolved = stack.resolve(value)
    if isinstance(resolved, dict) and "Fn::GetAtt" in resolved:
        logical_id, attribute = resolved["Fn::GetAtt"]
        return f"<{logical_id}.{attribute}>"
    if isinstance(resolved, dict) and "Fn::ImportValue" in resolved:
        return str(resolved["Fn::ImportValue"])
    if isinstance(resolved, str):
        return resolved
    return rendered(stack, value)
