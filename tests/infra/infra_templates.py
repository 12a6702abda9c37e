"""Helpers for reading synthesized CloudFormation templates in the infra tests."""

from __future__ import annotations

from typing import Any


def resources(template: dict[str, Any], resource_type: str) -> dict[str, dict[str, Any]]:
    """The resources of one type in a template, by logical ID."""
    return {k: v for k, v in template["Resources"].items() if v["Type"] == resource_type}


def statements(template: dict[str, Any]) -> list[dict[str, Any]]:
    """Every IAM policy statement of every AWS::IAM::Policy and role inline policy in a template."""
    found = []
    for resource in template["Resources"].values():
        props = resource.get("Properties", {})
        if resource["Type"] == "AWS::IAM::Policy":
            found.extend(props["PolicyDocument"]["Statement"])
        for policy in props.get("Policies", []) if resource["Type"] == "AWS::IAM::Role" else []:
            found.extend(policy["PolicyDocument"]["Statement"])
    return found


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def flat(value: Any) -> str:
    """A string or `Fn::Join` of strings and intrinsics as one string, intrinsics as `${...}`."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and "Fn::Join" in value:
        separator, parts = value["Fn::Join"]
        return separator.join(flat(part) for part in parts)
    if isinstance(value, dict) and len(value) == 1:
        ((name, argument),) = value.items()
        return "${" + f"{name}:{argument}" + "}"
    raise TypeError(f"not a string expression: {value!r}")
