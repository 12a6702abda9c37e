"""CloudFormation intrinsics of a synthesized template resolved to the local (moto) resources they name.

The engine creates the template's roles, buckets, topics and state machine in moto and records their
physical names here; ``resolve`` then replaces ``Ref``, ``Fn::GetAtt`` (``Arn``), ``Fn::Join``, ``Fn::Sub``
and ``Fn::ImportValue`` with those values, as CloudFormation does at deploy time. Anything else it cannot
stand for raises TemplateError naming the token. ``split_environments`` resolves the Lambda functions'
environment variables for the engine.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from hfpipe.local.engine import moto_patches

#: moto's default account, which every local resource and ARN belongs to.
ACCOUNT: str = moto_patches.default_account_id()


#: The resource types the engine names after their logical ID (roles, functions, log groups): their names, and
#: so their ARNs, are known from the template alone, before the engine makes anything (``local_names``).
NAMED_BY_LOGICAL_ID = ("AWS::IAM::Role", "AWS::Lambda::Function", "AWS::Logs::LogGroup")


def local_names(resources: dict[str, Any]) -> dict[str, str]:
    """The local names of the template's resources that ``NAMED_BY_LOGICAL_ID`` names, by logical ID."""
    return {logical: logical for logical, res in resources.items() if res["Type"] in NAMED_BY_LOGICAL_ID}


class TemplateError(ValueError):
    """The template holds a token the engine cannot resolve."""


class Resolver:
    """Intrinsic functions of one template, for the resources created so far (``physical``)."""

    def __init__(self, resources: dict[str, Any], region: str, imports: dict[str, str]) -> None:
        self.resources = resources
        self.region = region
        self.imports = imports
        #: Logical ID -> the physical name (or ARN) of the local resource.
        self.physical: dict[str, str] = {}

    def pseudo(self) -> dict[str, str]:
        return {
            "AWS::Partition": "aws",
            "AWS::Region": self.region,
            "AWS::AccountId": ACCOUNT,
            "AWS::URLSuffix": "amazonaws.com",
            "AWS::StackName": "local",
        }

    def resolve(self, value: Any) -> Any:
        """Replace CloudFormation intrinsics with the moto values they stand for."""
        if isinstance(value, list):
            return [self.resolve(v) for v in value]
        if not isinstance(value, dict):
            return value
        if len(value) == 1:
            ((key, arg),) = value.items()
            if key == "Ref":
                return self._ref(arg)
            if key == "Fn::GetAtt":
                logical, attr = arg if isinstance(arg, list) else arg.split(".", 1)
                if logical in self.physical and attr in ("Arn", "TopicArn"):
                    return self.arn(logical)
                raise TemplateError(f"Fn::GetAtt {logical}.{attr}: not supported locally")
            if key == "Fn::Join":
                sep, parts = arg
                return sep.join(str(self.resolve(p)) for p in parts)
            if key == "Fn::Sub" and isinstance(arg, str):
                return re.sub(r"\$\{([^}!]+)\}", lambda m: str(self._ref(m.group(1))), arg)
            if key == "Fn::ImportValue":
                name = self.resolve(arg)
                if name not in self.imports:
                    raise TemplateError(f"Fn::ImportValue {name}: pass it in imports=")
                return self.imports[name]
        return {k: self.resolve(v) for k, v in value.items()}

    def _ref(self, name: str) -> str:
        pseudo = self.pseudo()
        if name in pseudo:
            return pseudo[name]
        if name in self.physical:
            return self.physical[name]
        raise TemplateError(f"Ref {name}: no local resource for it")

    def arn(self, logical: str) -> str:
        """The ARN of a local resource, built as AWS builds it for its type."""
        rtype = self.resources[logical]["Type"]
        name = self.physical[logical]
        return {
            "AWS::Lambda::Function": f"arn:aws:lambda:{self.region}:{ACCOUNT}:function:{name}",
            "AWS::IAM::Role": f"arn:aws:iam::{ACCOUNT}:role/{name}",
            "AWS::S3::Bucket": f"arn:aws:s3:::{name}",
            "AWS::SNS::Topic": name,
            "AWS::StepFunctions::StateMachine": name,
            "AWS::CloudWatch::Alarm": f"arn:aws:cloudwatch:{self.region}:{ACCOUNT}:alarm:{name}",
        }.get(rtype, name)


def split_environments(
    functions: dict[str, Any], resolve: Callable[[Any], Any]
) -> tuple[dict[str, str], dict[str, dict[str, str]]]:
    """The Lambda functions' environment variables, resolved, split into the ones every function that has
    them gives the same value (set once) and, per function, those whose value differs between functions.

    The engine runs the handlers in threads of one process; changing os.environ per invocation
    (mock.patch.dict empties it when it restores it) breaks whatever reads it meanwhile in another thread.
    """
    envs = {
        logical: {k: str(resolve(v)) for k, v in props.get("Environment", {}).get("Variables", {}).items()}
        for logical, props in functions.items()
    }
    values: dict[str, set[str]] = {}
    for env in envs.values():
        for key, value in env.items():
            values.setdefault(key, set()).add(value)
    shared = {key: next(iter(found)) for key, found in values.items() if len(found) == 1}
    own = {logical: {k: v for k, v in env.items() if k not in shared} for logical, env in envs.items()}
    return shared, own
