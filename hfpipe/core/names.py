"""Resource names derived from the environment and the Step Functions execution name.

The same execution always gets the same names, which is what makes Launch idempotent: a retried or
repeated launch finds the job it created instead of creating a second one. SageMaker names are unique
per account and region, not per environment, and two environments may share an account and region;
execution names are only unique per state machine. So the environment is part of every name: `dev` and
`prod` executions both called `run-1` get `dev-run-1` and `prod-run-1`.

``PlannedNames`` is those names as a type: what clean-up needs to find what an execution created, from a
plan (``Plan.names``) or, after an abnormal end that left no plan in reach, from the environment and the
execution name alone (``PlannedNames.derive``).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from datetime import UTC, datetime

#: SageMaker names: ^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}
MAX_SAGEMAKER_NAME = 63
_SUFFIXES = {"model": "-model", "endpoint_config": "-config", "endpoint": "-ep"}
_BASE_MAX = MAX_SAGEMAKER_NAME - max(len(s) for s in _SUFFIXES.values())
_SAGEMAKER_NAME = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$")

#: Environment names: a lower-case letter, then lower-case letters and digits, at most 16 in all. No dash:
#: every name an execution gets is `<env>-<execution>` and execution names may hold dashes, so an
#: environment `dev-eu` would share names (and the training rule's `dev-` prefix) with `dev`'s execution
#: `eu-run`. Without a dash in either environment name, `<env>-` is never a prefix of another's names.
#: Nor `hfpipe`: every other environment's named endpoints and model package groups are `hfpipe-<env>-...`, which
#: an environment `hfpipe`'s run names (`hfpipe-<execution>`) would share, and with them its IAM name prefixes.
ENV_NAME = re.compile(r"[a-z][a-z0-9]{0,15}")
RESERVED_ENV_NAMES = ("hfpipe",)
ENV_NAME_ACCEPTED = (
    "a lower-case letter, then lower-case letters or digits (no '-'), at most 16 characters, not 'hfpipe'"
)


def env_name_problem(env: object) -> str | None:
    """None for a valid environment name, else what is accepted (the callers raise their own error)."""
    if isinstance(env, str) and ENV_NAME.fullmatch(env) and env not in RESERVED_ENV_NAMES:
        return None
    return ENV_NAME_ACCEPTED


def run_prefix(env: str) -> str:
    """The start of every SageMaker name a pipeline run of ``env`` gets (``derive_names``): `<env>-`. No other
    environment's names start with it (no '-' in environment names), so the stacks scope IAM grants by it."""
    return f"{env}-"


def base_name(execution_name: str) -> str:
    """A SageMaker-safe base name for ``execution_name``: invalid characters become dashes; a name
    that has to be shortened keeps a hash of the full name so two long names never collide."""
    if not execution_name:
        raise ValueError("execution_name: empty; expected the Step Functions execution name")
    cleaned = re.sub(r"-{2,}", "-", re.sub(r"[^a-zA-Z0-9-]", "-", execution_name)).strip("-") or "x"
    if len(cleaned) <= _BASE_MAX and cleaned == execution_name:
        return cleaned
    digest = hashlib.sha256(execution_name.encode()).hexdigest()[:8]
    head = cleaned[: _BASE_MAX - len(digest) - 1].rstrip("-")
    return f"{head}-{digest}" if head else digest


def derive_names(execution_name: str, env: str) -> dict[str, str]:
    """Names of the training job, model, endpoint config and endpoint of one execution of ``env``."""
    if not env:
        raise ValueError("env: empty; expected the environment name from cdk.json")
    base = base_name(f"{run_prefix(env)}{execution_name}")
    names = {"training_job_name": base}
    names.update({f"{kind}_name": base + suffix for kind, suffix in _SUFFIXES.items()})
    for value in names.values():
        assert _SAGEMAKER_NAME.fullmatch(value), value
    return names


@dataclass(frozen=True, kw_only=True)
class PlannedNames:
    """An execution's environment, name and the names of the SageMaker resources it may have created."""

    env: str
    execution_name: str
    training_job_name: str
    model_name: str
    endpoint_config_name: str
    endpoint_name: str

    @classmethod
    def derive(cls, execution_name: str, env: str) -> PlannedNames:
        """The names the Plan task gives execution ``execution_name`` of ``env`` (the rule, not a plan)."""
        return cls(env=env, execution_name=execution_name, **derive_names(execution_name, env))


def default_execution_name(recipe_name: str, now: datetime | None = None) -> str:
    """<recipe>-<UTC time>: unique per second, readable in the console, valid as an execution name."""
    stamp = (now or datetime.now(UTC)).strftime("%Y%m%d-%H%M%S")
    return f"{recipe_name[:60]}-{stamp}"
