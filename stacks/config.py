"""Per-environment settings, read from the `hfpipe:environments` context in cdk.json and validated.

cdk.json carries data only; this module turns it into one frozen `EnvironmentConfig` per environment.
Every error names the key (as a dotted path from the context key), the value and what is accepted, so
a typo in cdk.json stops synth with a message that says how to fix it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal

from hfpipe.core import names
from hfpipe.core.adapters.shared_base import SharedBase, SharedBaseError, parse_shared_base
from hfpipe.core.deploy import deployments
from hfpipe.core.promotion import evaluation_gate, registry
from hfpipe.core.run import quotas

CONTEXT_KEY = "hfpipe:environments"
"""cdk.json context key holding {environment name: settings}."""

ENV_CONTEXT_KEY = "env"
"""`-c env=NAME` picks one environment; without it every environment is synthesized."""

LOG_RETENTION_DAYS = (
    1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653,
)  # fmt: skip
"""The retention periods CloudWatch Logs accepts (AWS::Logs::LogGroup RetentionInDays)."""

REMOVAL_POLICIES = ("retain", "destroy")
RemovalPolicyName = Literal["retain", "destroy"]

_REGION = re.compile(r"^[a-z]{2}(-gov|-iso[a-z]*)?-[a-z]+-\d$")
_ACCOUNT = re.compile(r"^\d{12}$")

_ENV_KEYS = {
    "region": 'an AWS region name such as "eu-west-1"',
    "account": "a 12-digit AWS account ID as a string (optional; defaults to CDK_DEFAULT_ACCOUNT)",
    "promote_from": "the name of another environment of cdk.json whose approved model versions `hfpipe promote` "
    "copies into this one (optional; no cycles; an account on both environments or on neither)",
    "removal_policy": ", ".join(f'"{p}"' for p in REMOVAL_POLICIES),
    "log_retention_days": "one of " + ", ".join(str(d) for d in LOG_RETENTION_DAYS),
    "checkpoint_expiration_days": "a whole number of days from 1 to 3650",
    "noncurrent_version_expiration_days": "a whole number of days from 1 to 3650",
    "quotas": "a list of objects with keys name, value, service_code (optional)",
    "allowed_s3_buckets": "a list of S3 bucket names outside this environment that recipes may read channels "
    "from or write checkpoints to (optional; default none; the execution role must also be granted them)",
    "allowed_image_registries": "a list of container registry hosts outside the image catalog, e.g. "
    '"<account>.dkr.ecr.eu-west-1.amazonaws.com" (your registry\'s host), that recipes may name in image_uri (optional; default none)',
    "model_approval": "the approval status of each model version a run registers: "
    + " or ".join(f'"{s}"' for s in registry.APPROVAL_STATUSES)
    + f' (optional; default "{registry.DEFAULT_APPROVAL}"; "Approved" approves every run that passed its smoke test)',
    "evaluation_gate": '"mandatory" or "advisory": whether `models approve`, `promote`, `deploy` and `deploy '
    '--adapter` refuse a version with no evaluation (optional; default "advisory"; a version evaluated worse '
    "than the version it would replace is refused in both; docs/evaluation.md)",
    "endpoints": "an object {NAME: settings} of the named endpoints registered versions are deployed to "
    "(optional; default none; docs/deploy.md lists the settings)",
    "endpoint_ttl_hours": "a whole number of hours from 1 to 8760, or null: every endpoint the environment's runs, "
    "deploys and shared base create expires that long after its creation, unless the command that creates it "
    'gives --ttl (optional; default null: no expiry; docs/deploy.md, "Time to live")',
    "endpoint_idle_minutes": "a whole number of minutes from 5 to 1440: the reaper deletes an expired endpoint "
    "only after this long without a call (optional; default 60)",
    "shared_base": "an object with base_model, instance_type, max_adapters (copies, max_lora_rank, "
    "max_model_len, model optional): the base model the environment's LoRA adapters are served on "
    "(optional; default none; docs/adapters.md)",
}
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.\-]{1,61}[a-z0-9]$")
_REGISTRY = re.compile(r"^[a-z0-9]([a-z0-9.\-]*[a-z0-9])?(:\d+)?$")
_QUOTA_KEYS = {
    "name": 'a Service Quotas quota name such as "ml.g5.2xlarge for training job usage"',
    "value": "a whole number from 1 to 10000",
    "service_code": 'a Service Quotas service code such as "sagemaker" (optional; default "sagemaker")',
}
_DEFAULTS: dict[str, Any] = {
    "removal_policy": "retain",
    "log_retention_days": 365,
    "checkpoint_expiration_days": 30,
    "noncurrent_version_expiration_days": 90,
    "quotas": [],
    "allowed_s3_buckets": [],
    "allowed_image_registries": [],
    "model_approval": registry.DEFAULT_APPROVAL,
    "evaluation_gate": evaluation_gate.DEFAULT_GATE_MODE,
    "endpoints": {},
    "shared_base": None,
    "endpoint_ttl_hours": None,
    "endpoint_idle_minutes": 60,
}


@dataclass(frozen=True)
class PromotionPeer:
    """The other end of a promotion: the environment promoted from, or one that promotes from this one."""

    name: str
    region: str
    account: str | None


@dataclass(frozen=True, kw_only=True)
class PromoteOptions:
    """What a target environment's Promote function is made of (its cdk.json settings), given
    by the stack to ``Promotion``, which makes the function with them (stacks/functions/promote.py)."""

    #: The environment promoted from.
    source: PromotionPeer
    #: The source is deployed to another account than this one (the role then gets its fixed name).
    cross_account: bool
    #: This environment's image catalog (the Plan's).
    image_catalog: dict[str, Any]
    model_approval: str = registry.DEFAULT_APPROVAL
    allowed_image_registries: tuple[str, ...] = ()
    #: cdk.json evaluation_gate: the promotion refuses an unevaluated version where it is mandatory.
    evaluation_gate: str = "advisory"


class ConfigError(ValueError):
    """A cdk.json context entry is missing or malformed; the message says which and what is accepted."""


@dataclass(frozen=True)
class QuotaTarget:
    """One service quota the environment needs at least `value` of, e.g. instances of one type."""

    name: str
    value: int
    service_code: str = "sagemaker"


@dataclass(frozen=True)
class EnvironmentConfig:
    """Validated settings of one environment (dev, prod, ...)."""

    name: str
    region: str
    account: str | None
    removal_policy: RemovalPolicyName
    log_retention_days: int
    checkpoint_expiration_days: int
    noncurrent_version_expiration_days: int
    quotas: tuple[QuotaTarget, ...]
    #: cdk.json ``promote_from``; ``promote_source`` is that environment and ``promoted_to`` those promoting from
    #: this one (filled by ``load_environments``, which sees every environment).
    promote_from: str | None = None
    promote_source: PromotionPeer | None = None
    promoted_to: tuple[PromotionPeer, ...] = ()
    #: Outside the environment, yet accepted by the Plan in recipes (see `hfpipe.core.run.plan.check_ownership`).
    allowed_s3_buckets: tuple[str, ...] = ()
    allowed_image_registries: tuple[str, ...] = ()
    #: ModelApprovalStatus of the versions the Register step makes (hfpipe.core.promotion.registry.APPROVAL_STATUSES).
    model_approval: str = registry.DEFAULT_APPROVAL
    #: What the evaluation gate does with an unevaluated version (hfpipe.core.promotion.evaluation_gate.GATE_MODES).
    evaluation_gate: str = evaluation_gate.DEFAULT_GATE_MODE
    #: The named endpoints a deploy may serve registered versions on (hfpipe.core.deploy.deployments), by name.
    endpoints: tuple[deployments.EndpointSettings, ...] = ()
    #: The base model its LoRA adapters are served on as inference components (hfpipe.core.adapters.shared_base).
    shared_base: SharedBase | None = None
    #: How long its endpoints live (None: no expiry) and how long an expired one must go without a call before
    #: the reaper deletes it (hfpipe.core.deploy.expiry).
    endpoint_ttl_hours: int | None = None
    endpoint_idle_minutes: int = 60

    @property
    def retain(self) -> bool:
        """True when stateful resources outlive their stack (and stacks get termination protection)."""
        return self.removal_policy == "retain"

    def in_other_account(self, peer: PromotionPeer) -> bool:
        """True when ``peer`` is deployed to another account than this environment (both name theirs)."""
        return self.account is not None and peer.account is not None and self.account != peer.account


def _rejected(path: str, value: object, accepted: str) -> ConfigError:
    return ConfigError(f"{path}: {value!r} is not accepted; accepted: {accepted}")


def _whole_number(path: str, value: object, low: int, high: int, accepted: str) -> int:
    # bool is an int in Python; `true` in JSON is never a number of days.
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise _rejected(path, value, accepted)
    return value


def _names(path: str, value: object, pattern: re.Pattern[str], accepted: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(e, str) and pattern.fullmatch(e) for e in value):
        raise _rejected(path, value, accepted)
    return tuple(value)


def _check_keys(path: str, entry: Mapping[str, Any], known: Mapping[str, str]) -> None:
    for key in entry:
        if key not in known:
            raise ConfigError(f"{path}.{key}: unknown key; accepted: {', '.join(sorted(known))}")


def _parse_quota(path: str, entry: object) -> QuotaTarget:
    if not isinstance(entry, Mapping):
        raise _rejected(path, entry, "an object with keys " + ", ".join(_QUOTA_KEYS))
    _check_keys(path, entry, _QUOTA_KEYS)
    for required in ("name", "value"):
        if required not in entry:
            raise ConfigError(f"{path}.{required}: required; accepted: {_QUOTA_KEYS[required]}")
    name = entry["name"]
    if not isinstance(name, str) or not name.strip():
        raise _rejected(f"{path}.name", name, _QUOTA_KEYS["name"])
    value = _whole_number(f"{path}.value", entry["value"], 1, 10_000, _QUOTA_KEYS["value"])
    service_code = entry.get("service_code", "sagemaker")
    if not isinstance(service_code, str) or not re.fullmatch(r"[a-z0-9-]+", service_code):
        raise _rejected(f"{path}.service_code", service_code, _QUOTA_KEYS["service_code"])
    return QuotaTarget(name=name, value=value, service_code=service_code)


def parse_environment(name: str, entry: object, *, default_account: str | None = None) -> EnvironmentConfig:
    """Validate one environment's settings; `default_account` is used when the entry names no account."""
    path = f"{CONTEXT_KEY}.{name}"
    checked = _environment_entry(name, path, entry)
    region, account, promote_from = _placement(path, checked, default_account)
    values = {**_DEFAULTS, **checked}
    removal_policy, log_retention_days, days = _retention(path, values)
    quotas_entry = values["quotas"]
    if not isinstance(quotas_entry, list):
        raise _rejected(f"{path}.quotas", quotas_entry, _ENV_KEYS["quotas"])
    quotas = tuple(_parse_quota(f"{path}.quotas[{i}]", q) for i, q in enumerate(quotas_entry))
    allowed = {
        key: _names(f"{path}.{key}", values[key], pattern, _ENV_KEYS[key])
        for key, pattern in (("allowed_s3_buckets", _BUCKET), ("allowed_image_registries", _REGISTRY))
    }
    model_approval = values["model_approval"]
    if not isinstance(model_approval, str) or model_approval not in registry.APPROVAL_STATUSES:
        raise _rejected(f"{path}.model_approval", model_approval, _ENV_KEYS["model_approval"])
    if values["evaluation_gate"] not in evaluation_gate.GATE_MODES:
        raise _rejected(f"{path}.evaluation_gate", values["evaluation_gate"], _ENV_KEYS["evaluation_gate"])
    try:
        endpoints = deployments.parse_endpoints(name, values["endpoints"], f"{path}.endpoints")
        base = parse_shared_base(values["shared_base"], f"{path}.shared_base")
    except (deployments.EndpointSettingsError, SharedBaseError) as err:
        raise ConfigError(str(err)) from None
    _check_quota_names(path, quotas)
    _check_endpoint_quotas(path, quotas, endpoints, base)
    return EnvironmentConfig(
        name=name,
        region=region,
        account=account,
        removal_policy=removal_policy,
        log_retention_days=log_retention_days,
        quotas=quotas,
        promote_from=promote_from,
        promote_source=None,  # load_environments links the environments
        promoted_to=(),
        allowed_s3_buckets=allowed["allowed_s3_buckets"],
        allowed_image_registries=allowed["allowed_image_registries"],
        model_approval=model_approval,
        evaluation_gate=values["evaluation_gate"],
        endpoints=endpoints,
        shared_base=base,
        **_expiry(path, values),
        **days,
    )


def _expiry(path: str, values: Mapping[str, Any]) -> dict[str, Any]:
    """The endpoints' time to live (null: none) and the reaper's idle window."""
    ttl = values["endpoint_ttl_hours"]
    key = "endpoint_ttl_hours"
    return {
        key: None if ttl is None else _whole_number(f"{path}.{key}", ttl, 1, 8760, _ENV_KEYS[key]),
        "endpoint_idle_minutes": _whole_number(
            f"{path}.endpoint_idle_minutes",
            values["endpoint_idle_minutes"],
            5,
            1440,
            _ENV_KEYS["endpoint_idle_minutes"],
        ),
    }


def _environment_entry(name: str, path: str, entry: object) -> Mapping[str, Any]:
    """The entry of environment ``name``: a valid name, an object, known keys only."""
    problem = names.env_name_problem(name)
    if problem:
        raise _rejected(f"{CONTEXT_KEY}", name, f"environment names of {problem}")
    if not isinstance(entry, Mapping):
        raise _rejected(path, entry, "an object with keys " + ", ".join(_ENV_KEYS))
    _check_keys(path, entry, _ENV_KEYS)
    return entry


def _placement(
    path: str, entry: Mapping[str, Any], default_account: str | None
) -> tuple[str, str | None, str | None]:
    """Where the environment is (its region, required, and account) and what it promotes from."""
    if "region" not in entry:
        raise ConfigError(f"{path}.region: required; accepted: {_ENV_KEYS['region']}")
    region = entry["region"]
    if not isinstance(region, str) or not _REGION.fullmatch(region):
        raise _rejected(f"{path}.region", region, _ENV_KEYS["region"])
    account = entry.get("account", default_account)
    if account is not None and (not isinstance(account, str) or not _ACCOUNT.fullmatch(account)):
        raise _rejected(f"{path}.account", account, _ENV_KEYS["account"])
    promote_from = entry.get("promote_from")
    if promote_from is not None and (
        not isinstance(promote_from, str) or names.env_name_problem(promote_from)
    ):
        raise _rejected(f"{path}.promote_from", promote_from, _ENV_KEYS["promote_from"])
    return region, account, promote_from


def _retention(path: str, values: Mapping[str, Any]) -> tuple[RemovalPolicyName, int, dict[str, int]]:
    """What is kept and how long: the removal policy, the log retention, the buckets' expiration days."""
    removal_policy = values["removal_policy"]
    if removal_policy not in REMOVAL_POLICIES:
        raise _rejected(f"{path}.removal_policy", removal_policy, _ENV_KEYS["removal_policy"])
    log_retention_days = values["log_retention_days"]
    if isinstance(log_retention_days, bool) or log_retention_days not in LOG_RETENTION_DAYS:
        raise _rejected(f"{path}.log_retention_days", log_retention_days, _ENV_KEYS["log_retention_days"])
    days = {
        key: _whole_number(f"{path}.{key}", values[key], 1, 3650, _ENV_KEYS[key])
        for key in ("checkpoint_expiration_days", "noncurrent_version_expiration_days")
    }
    return removal_policy, log_retention_days, days


def _check_quota_names(path: str, quotas: tuple[QuotaTarget, ...]) -> None:
    """Each quota once: two targets for one quota would leave which value wins to chance."""
    seen: set[tuple[str, str]] = set()
    for i, quota in enumerate(quotas):
        key = (quota.service_code, quota.name)
        if key in seen:
            raise ConfigError(
                f"{path}.quotas[{i}].name: {quota.name!r} is listed twice; accepted: each quota once, "
                "with the largest value any recipe needs"
            )
        seen.add(key)


def _check_endpoint_quotas(
    path: str,
    targets: tuple[QuotaTarget, ...],
    endpoints: tuple[deployments.EndpointSettings, ...],
    base: SharedBase | None,
) -> None:
    """Every endpoint-usage quota target holds what the environment's endpoints can run of its type at once
    (``deployments.endpoint_usage``): the shared base's instances where it is of that type, every named
    endpoint's fleet, and one blue/green update's new fleet beside them."""
    for i, quota in enumerate(targets):
        if quota.service_code != "sagemaker" or not quota.name.endswith(quotas.ENDPOINT_USAGE):
            continue
        instance_type = quota.name.removesuffix(quotas.ENDPOINT_USAGE)
        base_instances = base.instances if base is not None and base.instance_type == instance_type else 0
        needed, why = deployments.endpoint_usage(endpoints, base_instances)
        if quota.value < needed:
            raise ConfigError(
                f"{path}.quotas[{i}].value: {quota.value!r} is not accepted for {quota.name!r}; accepted: at "
                f"least {needed}: {why}, all of {instance_type} at once"
            )


def load_environments(context: object, *, default_account: str | None = None) -> dict[str, EnvironmentConfig]:
    """Validate the whole `hfpipe:environments` context value; returns the environments by name."""
    if context is None:
        raise ConfigError(
            f"{CONTEXT_KEY}: missing from the cdk.json context; accepted: an object mapping environment names "
            'to settings, e.g. {"dev": {"region": "eu-west-1"}}'
        )
    if not isinstance(context, Mapping) or not context:
        raise _rejected(
            CONTEXT_KEY,
            context,
            'an object mapping environment names to settings, e.g. {"dev": {"region": "eu-west-1"}}',
        )
    environments = {
        name: parse_environment(name, entry, default_account=default_account)
        for name, entry in context.items()
    }
    return _link_promotions(environments, context)


def _link_promotions(
    environments: dict[str, EnvironmentConfig], context: Mapping[str, Any]
) -> dict[str, EnvironmentConfig]:
    """Check every ``promote_from`` against the other environments and fill in both ends of each promotion.

    An account on one end only is refused: the other end's would then be CDK_DEFAULT_ACCOUNT, the account of
    whoever deploys, which is the wrong one for the stacks of the environment not being deployed."""
    peers = {n: PromotionPeer(n, e.region, e.account) for n, e in environments.items()}
    links = {name: env.promote_from for name, env in environments.items() if env.promote_from is not None}
    for name, source in links.items():
        others = ", ".join(f'"{n}"' for n in sorted(environments) if n != name) or "none"
        if source == name or source not in environments:
            what = "the environment itself" if source == name else "not an environment of cdk.json"
            raise ConfigError(
                f"{CONTEXT_KEY}.{name}.promote_from: {source!r} is {what}; accepted: another environment: {others}"
            )
    for name, source in links.items():
        path = f"{CONTEXT_KEY}.{name}.promote_from"
        chain = [name, source]
        while chain[-1] in links:
            chain.append(links[chain[-1]])
            if chain[-1] in chain[:-1]:
                raise ConfigError(
                    f"{path}: {source!r} makes a cycle ({' -> '.join(chain)}); accepted: promotions that end "
                    "at an environment that promotes from none"
                )
        if ("account" in context[name]) != ("account" in context[source]):
            raise ConfigError(
                f"{path}: {source!r} and {name!r} do not both name an account; accepted: an account on both "
                "environments (cross-account promotion), or on neither (both in the deploying account)"
            )
    return {
        name: replace(
            env,
            promote_source=peers[links[name]] if name in links else None,
            promoted_to=tuple(peers[n] for n in sorted(links) if links[n] == name),
        )
        for name, env in environments.items()
    }


def select_environments(
    environments: Mapping[str, EnvironmentConfig], requested: object
) -> list[EnvironmentConfig]:
    """The environment named by `-c env=NAME`, or all of them (sorted by name) when none is named."""
    if requested is None:
        return [environments[name] for name in sorted(environments)]
    if not isinstance(requested, str) or requested not in environments:
        raise ConfigError(
            f"{ENV_CONTEXT_KEY}: unknown environment {requested!r}; accepted: "
            f"{', '.join(sorted(environments))} (the keys of {CONTEXT_KEY} in cdk.json)"
        )
    return [environments[requested]]
