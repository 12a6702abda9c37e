"""Service Quotas look-ups as AWS answers them: the one rule Plan and the quota custom resource share.

``ListServiceQuotas`` "lists the applied quota values ... For some quotas, only the default values are
available. If the applied quota value is not available for a quota, the quota is not retrieved"
(https://docs.aws.amazon.com/servicequotas/2019-06-24/apireference/API_ListServiceQuotas.html), so a
quota missing from it is not missing from the account: its value is the AWS default, which
``ListAWSDefaultServiceQuotas`` / ``GetAWSDefaultServiceQuota`` return
(https://docs.aws.amazon.com/servicequotas/2019-06-24/apireference/API_GetAWSDefaultServiceQuota.html).
Both list calls are paginated (``NextToken``, at most 100 per page); the look-up goes through botocore's
paginators, so every page is read. Throttling is ``TooManyRequestsException`` (the API reference's
error list for these operations); botocore retries it first, and what still fails is raised.

Pure apart from the client it is given (boto3 ``service-quotas``, or anything with ``get_paginator``).
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from hfpipe.core.adapters.adapter_recipe import own_endpoint
from hfpipe.core.recipe.typed import Recipe
from hfpipe.core.throttling import error_code

#: Error codes Service Quotas uses for throttling (API reference, "Errors" of each operation).
THROTTLING_CODES = frozenset({"TooManyRequestsException", "ThrottlingException", "Throttling"})


class UnknownQuotaError(ValueError):
    """No quota of that name exists for the service (neither applied nor default)."""


class QuotaPaginatorClient(Protocol):
    """The part of boto3's service-quotas client the look-up uses."""

    def get_paginator(self, operation_name: str) -> Any: ...


@dataclass(frozen=True)
class QuotaValue:
    """One quota as it applies to the account: ``applied`` False when only the AWS default exists."""

    name: str
    code: str
    value: float
    applied: bool


def _pages(client: QuotaPaginatorClient, operation: str, service_code: str) -> Any:
    for page in client.get_paginator(operation).paginate(ServiceCode=service_code):
        yield from page.get("Quotas", [])


def lookup_quotas(client: QuotaPaginatorClient, service_code: str, names: list[str]) -> dict[str, QuotaValue]:
    """The value that applies to each named quota: the applied value, else the AWS default.

    Raises UnknownQuotaError naming the first name the service has neither applied nor by default.
    """
    wanted = set(names)
    found: dict[str, QuotaValue] = {}
    for quota in _pages(client, "list_service_quotas", service_code):
        if quota.get("QuotaName") in wanted:
            found[quota["QuotaName"]] = QuotaValue(
                quota["QuotaName"], quota.get("QuotaCode", ""), float(quota["Value"]), True
            )
    missing = wanted - set(found)
    if missing:
        seen: list[str] = []
        for quota in _pages(client, "list_aws_default_service_quotas", service_code):
            name = quota.get("QuotaName", "")
            seen.append(name)
            if name in missing:
                found[name] = QuotaValue(name, quota.get("QuotaCode", ""), float(quota["Value"]), False)
        for name in names:
            if name not in found:
                close = difflib.get_close_matches(name, seen, n=3, cutoff=0.6)
                hint = f"; did you mean {', '.join(repr(n) for n in close)}?" if close else ""
                raise UnknownQuotaError(
                    f"quota {name!r} is not a quota of service {service_code!r} (neither applied nor an AWS "
                    f"default); accepted: a quota name as the Service Quotas console lists it, such as "
                    f"'ml.g5.2xlarge for training job usage'{hint}"
                )
    return {name: found[name] for name in names}


def is_throttling(error: BaseException) -> bool:
    """Whether an error is Service Quotas throttling (after botocore's own retries)."""
    return error_code(error) in THROTTLING_CODES


# --- the Plan's check: every instance type the plan will use has the quota it needs ---------------------


class QuotaTooLowError(Exception):
    """An account quota is below what the recipe needs; the message names quota, applied and needed."""


class QuotaLookupThrottled(Exception):
    """Service Quotas kept throttling the quota check; the state machine retries Plan."""


def endpoint_quota_name(instance_type: str) -> str:
    """The SageMaker quota that bounds the instances of ``instance_type`` serving endpoints in the account."""
    return f"{instance_type}{ENDPOINT_USAGE}"


ENDPOINT_USAGE = " for endpoint usage"


def quota_names(recipe: Recipe, deploy: bool) -> dict[str, int]:
    """Service Quotas quota name -> instances needed, for every instance type the plan will use."""
    t = recipe["training"]
    kind = "spot training job usage" if t["spot"]["enabled"] else "training job usage"
    needed = {f"{t['instance_type']} for {kind}": t["instance_count"]}
    if deploy:
        s = recipe["serving"]
        key = endpoint_quota_name(s["instance_type"])
        needed[key] = needed.get(key, 0) + s["instance_count"]
    if recipe.get("evaluation") is not None:
        # The evaluation job: one instance of the training type (hfpipe.core.run.evaluation_job).
        needed[processing_quota_name(t["instance_type"])] = 1
    return needed


def processing_quota_name(instance_type: str) -> str:
    """The SageMaker quota that bounds the instances of ``instance_type`` running processing jobs."""
    return f"{instance_type} for processing job usage"


def quota_users(recipes: Mapping[str, Recipe]) -> dict[str, tuple[str, ...]]:
    """Quota name -> the recipes needing it (`quota_names` of each validated recipe, deployed unless it is
    an adapter, which is served on the shared base), sorted: what the Quota stack's outputs say each quota is
    for, derived rather than written in cdk.json."""
    users: dict[str, list[str]] = {}
    for name in sorted(recipes):
        for quota in quota_names(recipes[name], deploy=own_endpoint(recipes[name])):
            users.setdefault(quota, []).append(name)
    return {quota: tuple(names) for quota, names in sorted(users.items())}


def check_quotas(client: QuotaPaginatorClient, needed: dict[str, int]) -> dict[str, float]:
    """Compare the SageMaker quotas that apply (applied value, else the AWS default; see core.quotas)
    with what is needed; raise QuotaTooLowError naming the first short one. Returns the values looked at.

    Service Quotas throttling that outlasts botocore's retries becomes QuotaLookupThrottled, which the
    state machine retries with backoff.
    """
    try:
        values = lookup_quotas(client, "sagemaker", list(needed))
    except UnknownQuotaError as err:
        raise QuotaTooLowError(str(err)) from err
    except Exception as err:
        if is_throttling(err):
            raise QuotaLookupThrottled(f"Service Quotas throttled the quota check: {err}") from err
        raise
    for name, count in needed.items():
        quota = values[name]
        if quota.value < count:
            source = "applied value" if quota.applied else "AWS default value (no increase applied)"
            raise QuotaTooLowError(
                f"quota {name!r}: {source} {quota.value:g} < needed {count}; request an increase "
                "(the QuotaStack does this for the quotas in cdk.json)"
            )
    return {name: q.value for name, q in values.items()}
