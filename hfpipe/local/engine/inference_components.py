"""Local mode's SageMaker inference components: moto 5.2.5 has none, so local mode plays them (docs/adapters.md,
"Local mode plays the inference-component API": the statuses, AWS's refusals with their sources, what is not
played).

CreateInferenceComponent, DescribeInferenceComponent, UpdateInferenceComponent, DeleteInferenceComponent,
UpdateInferenceComponentRuntimeConfig and ListInferenceComponents are answered here in the shapes of botocore's
SageMaker model (hfpipe.local.engine.moto_patches routes moto's SageMaker handler to
``InferenceComponents.answer``), one store per account and region, next to moto's endpoints, configs and
models, which it reads through a ``Hosting`` (no moto import here). Each
transitional status lasts ``SETTLE_SECONDS`` scaled by the engine's ``time_scale`` (0: at once).
``route`` says which component an InvokeEndpoint reaches, or refuses it as AWS does, and counts each call it
lets through with the store's ``count`` hook (the engine puts SageMaker's ``Invocations`` metric of that
component in CloudWatch with it: hfpipe.local.engine.cloudwatch); in the local world the vLLM stand-in
answers it (hfpipe.local.serving.adapter_serving).

A component's copies registered with Application Auto Scaling scale to zero when idle and back on a call
(hfpipe.local.engine.scale_to_zero; ``scaling`` answers the registration, ``route`` refuses a call to a base with
no copy with SageMaker's no-capacity ValidationError and the ``no_capacity`` hook fires its alarm).
"""

from __future__ import annotations

import contextlib
import re
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from hfpipe.core.adapters import adapter_rules
from hfpipe.core.adapters import scale_to_zero as zero_rules
from hfpipe.core.adapters.adapter_rules import Component
from hfpipe.local.engine import scale_to_zero
from hfpipe.local.engine.deployment import ApiError

OPERATIONS = (
    "CreateInferenceComponent",
    "DescribeInferenceComponent",
    "UpdateInferenceComponent",
    "DeleteInferenceComponent",
    "ListInferenceComponents",
    "UpdateInferenceComponentRuntimeConfig",
)
#: How long each transitional status lasts before the next, in seconds (scaled by ``time_scale``).
SETTLE_SECONDS = {"Creating": 60.0, "Updating": 30.0, "Deleting": 10.0}
_NAME = re.compile(r"^[a-zA-Z0-9]([\-a-zA-Z0-9]*[a-zA-Z0-9])?$")
_URL = re.compile(r"^(https|s3)://([^/]+)/?(.*)$")
VALIDATION = "ValidationException"
#: InferenceComponentStartupParameters' members, and the seconds each accepts (botocore's model of SageMaker).
STARTUP_PARAMETERS = ("ModelDataDownloadTimeoutInSeconds", "ContainerStartupHealthCheckTimeoutInSeconds")
STARTUP_SECONDS = (60, 3600)
#: InvokeEndpoint's answer for an inference-component endpoint called without a component (AWS's words).
COMPONENT_REQUIRED = (
    "Inference Component Name header is required for endpoints to which you plan to deploy inference "
    "components. Please include Inference Component Name header or consider using SageMaker models."
)


class Hosting(Protocol):
    """What the store reads of moto's SageMaker account (hfpipe.local.engine.moto_patches builds it)."""

    def endpoint(self, name: str) -> dict[str, Any] | None:
        """DescribeEndpoint's answer; None: no such endpoint."""

    def endpoint_config(self, name: str) -> dict[str, Any] | None:
        """DescribeEndpointConfig's answer; None: no such config."""

    def has_model(self, name: str) -> bool: ...

    def set_instances(self, endpoint: str, variant: str, count: int) -> None:
        """The instances DescribeEndpoint says ``variant`` runs now (a base scaled to zero and back)."""


@dataclass
class _Record:
    description: dict[str, Any]
    #: When the transitional status ends (``clock``; None: settled), and what comes then (None: it is gone).
    settles_at: float | None = None
    then: str | None = "InService"


@dataclass
class Route:
    """Which component an InvokeEndpoint call reaches: an adapter's base and artifact, or a base alone."""

    endpoint: str
    component: str
    base: str
    adapter_artifact: str | None = None


@dataclass
class InferenceComponents:
    """The inference components of every account and region of one engine."""

    time_scale: Callable[[], float] = lambda: 1.0
    clock: Callable[[], float] = time.monotonic
    #: The wall clock (epoch seconds) the engine's clock is read against where AWS answers a time.
    wall: Callable[[], float] = time.time
    #: Called with (account, region, component) for each call ``route`` lets through (None: not counted).
    count: Callable[[str, str, str], None] | None = None
    #: Called with (account, region, component, HTTP status of the container's answer) for each routed call
    #: once it is answered (None: not recorded): the errors SageMaker publishes per component.
    answered: Callable[[str, str, str, int], None] | None = None
    #: Called with (account, region, component) for each call that finds the component with no copy: publishes
    #: ``NoCapacityInvocationFailures`` and answers whether its alarm is in ALARM (None: never).
    no_capacity: Callable[[str, str, str], bool] | None = None
    _records: dict[tuple[str, str], dict[str, _Record]] = field(default_factory=dict)
    #: Application Auto Scaling's registrations of components' copies (hfpipe.local.engine.scale_to_zero).
    _scaling: dict[tuple[str, str, str], scale_to_zero.Scaling] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def answer(
        self, operation: str, account: str, region: str, params: dict[str, Any], hosting: Hosting
    ) -> dict[str, Any]:
        """The answer to one of ``OPERATIONS``; ApiError for AWS's refusals."""
        with self._lock:
            records = self._settled(account, region)
            where = _Where(account, region, records, hosting)
            handler = {
                "CreateInferenceComponent": self._create,
                "DescribeInferenceComponent": self._describe,
                "UpdateInferenceComponent": self._update,
                "DeleteInferenceComponent": self._delete,
                "ListInferenceComponents": _list,
                "UpdateInferenceComponentRuntimeConfig": self._update_copies,
            }[operation]
            return handler(where, params)

    def components(self, account: str, region: str) -> list[Component]:
        """Every component of the account and region now, as hfpipe.core.adapters.adapter_rules reads them."""
        with self._lock:
            return _components(self._settled(account, region).values())

    def route(
        self, account: str, region: str, endpoint: str, component: str | None, hosting: Hosting
    ) -> Route | None:
        """The component an InvokeEndpoint of ``endpoint`` naming ``component`` reaches (None: the endpoint
        serves a model and no component is named, or there is no such endpoint: the caller's own answer);
        ApiError (ValidationError, InvokeEndpoint's code) for the calls AWS refuses."""
        with self._lock:
            records = self._settled(account, region)
        described = hosting.endpoint(endpoint)
        if described is None:
            return None
        config = hosting.endpoint_config(described["EndpointConfigName"]) or {}
        if not _hosts_components(config):
            if component is None:
                return None
            raise ApiError(
                "ValidationError",
                f"Endpoint {endpoint} serves a model, not inference components; InferenceComponentName "
                f"{component!r} is not accepted on it",
            )
        if component is None:
            raise ApiError("ValidationError", COMPONENT_REQUIRED)
        record = records.get(component)
        found = record.description if record else None
        if found is None or found["EndpointName"] != endpoint:
            raise ApiError(
                "ValidationError", f"Inference component {component} does not exist on endpoint {endpoint}."
            )
        if found["InferenceComponentStatus"] != "InService":
            raise ApiError(
                "ValidationError",
                f"Inference component {component} is {found['InferenceComponentStatus']}, not InService.",
            )
        spec = found["Specification"]
        base = spec.get("BaseInferenceComponentName")
        self._check_capacity(account, region, base or component)
        artifact = (spec.get("Container") or {}).get("ArtifactUrl") if base else None
        self._count(account, region, component)
        return Route(endpoint, component, base or component, artifact)

    def scaling(
        self,
        operation: str,
        account: str,
        region: str,
        params: dict[str, Any],
        hosting: Hosting | None = None,
    ) -> dict[str, Any]:
        """Application Auto Scaling's ``scale_to_zero.OPERATIONS`` on a component's copies (moto refuses the
        dimension); ApiError for what AWS refuses. ``hosting``: where the endpoint's instances follow the
        copies (one copy per instance on the shared base), so DescribeEndpoint says 0 at zero."""
        if operation == "DescribeScalingActivities":  # the dimension is optional there
            params = {"ScalableDimension": zero_rules.DIMENSION, **params}
        name = scale_to_zero.component_of(params)
        key = (account, region, name)
        with self._lock:
            if operation == "DescribeScalingActivities":
                self._settled(account, region)  # the clock brought up to date first
                now, wall = self.clock(), self.wall()
                return scale_to_zero.activities(self._scaling.get(key), params, lambda t: wall - (now - t))
            if operation == "RegisterScalableTarget":
                self._scaling[key] = scale_to_zero.register(self._scaling.get(key), params, self.clock())
                self._scaling[key].hosting = hosting
                arn = f"arn:aws:application-autoscaling:{region}:{account}:scalable-target/{name}"
                return {"ScalableTargetARN": arn}
            if operation == "DeregisterScalableTarget":
                if self._scaling.pop(key, None) is None:
                    raise ApiError("ObjectNotFoundException", f"No scalable target registered for {name}")
                return {}
            policy = f"arn:aws:autoscaling:{region}:{account}:scalingPolicy:{name}:policyName/{params['PolicyName']}"
            return scale_to_zero.put_policy(self._scaling.get(key), params, policy)

    def copies(self, account: str, region: str, component: str) -> int | None:
        """The component's copies now (its CurrentCopyCount; None: no such component or no copy count)."""
        with self._lock:
            record = self._settled(account, region).get(component)
        return ((record.description.get("RuntimeConfig") or {}) if record else {}).get("CurrentCopyCount")

    def _check_capacity(self, account: str, region: str, base: str) -> None:
        """A call to a base with no copy: ``no_capacity`` (the metric, the alarm), the wake when the alarm
        fired, and InvokeEndpoint's ValidationError (hfpipe.core.adapters.scale_to_zero.NO_CAPACITY_MESSAGE)."""
        with self._lock:
            record = self._settled(account, region).get(base)
            copies = (record.description.get("RuntimeConfig") if record else None) or {}
            scaling = self._scaling.get((account, region, base))
            if scaling is not None and copies.get("CurrentCopyCount", 1) > 0:
                scaling.last_active = self.clock()
                return
            if scaling is None or copies.get("CurrentCopyCount", 1) > 0:
                return
        alarmed = False
        if self.no_capacity is not None:
            with contextlib.suppress(Exception):  # a metric lost must not change the answer
                alarmed = self.no_capacity(account, region, base)
        with self._lock:
            scale_to_zero.wake(scaling, copies, alarmed, self.clock(), self.time_scale())
        raise ApiError("ValidationError", zero_rules.NO_CAPACITY_MESSAGE)

    def _count(self, account: str, region: str, component: str) -> None:
        """One call routed to ``component``, counted (its ``Invocations``: the ``count`` hook)."""
        if self.count is None:
            return
        with contextlib.suppress(Exception):  # a metric lost must not fail the invocation
            self.count(account, region, component)

    def record_answer(self, account: str, region: str, component: str, status: int) -> None:
        """The answer of a call ``route`` let through to ``component``, recorded (the ``answered`` hook)."""
        if self.answered is None:
            return
        with contextlib.suppress(Exception):  # a metric lost must not fail the invocation
            self.answered(account, region, component, status)

    # -- the operations -----------------------------------------------------------------------------------
    def _create(self, where: _Where, params: dict[str, Any]) -> dict[str, Any]:
        name = _checked_name("inferenceComponentName", params.get("InferenceComponentName"))
        if name in where.records:
            raise ApiError(
                VALIDATION,
                f'Cannot create already existing inference component "{where.arn(name)}".',
            )
        endpoint, variant = _host(where, params)
        spec = _specification(params)
        if spec.get("BaseInferenceComponentName"):
            _check_adapter(where, name, endpoint["EndpointName"], spec)
        else:
            _check_base(where, spec)
        now = time.time()
        description: dict[str, Any] = {
            "InferenceComponentName": name,
            "InferenceComponentArn": where.arn(name),
            "EndpointName": endpoint["EndpointName"],
            "EndpointArn": endpoint["EndpointArn"],
            "VariantName": variant,
            "Specification": _summary(spec),
            "CreationTime": now,
            "LastModifiedTime": now,
            "InferenceComponentStatus": "Creating",
        }
        copies = (params.get("RuntimeConfig") or {}).get("CopyCount")
        if copies is not None:
            description["RuntimeConfig"] = {"DesiredCopyCount": copies, "CurrentCopyCount": 0}
        where.records[name] = self._transition(description, "Creating")
        return {"InferenceComponentArn": where.arn(name)}

    def _describe(self, where: _Where, params: dict[str, Any]) -> dict[str, Any]:
        return dict(_found(where, params.get("InferenceComponentName")).description)

    def _update(self, where: _Where, params: dict[str, Any]) -> dict[str, Any]:
        record = _found(where, params.get("InferenceComponentName"))
        old = record.description
        if old["InferenceComponentStatus"] not in ("InService", "Failed"):
            raise ApiError(
                VALIDATION,
                f"Cannot update inference component {old['InferenceComponentName']} while it is "
                f"{old['InferenceComponentStatus']}.",
            )
        new = dict(old)
        if params.get("Specification") is not None or params.get("Specifications") is not None:
            spec = _specification(params)
            was_base = old["Specification"].get("BaseInferenceComponentName")
            if spec.get("BaseInferenceComponentName") != was_base:
                raise ApiError(
                    VALIDATION,
                    f"BaseInferenceComponentName of {old['InferenceComponentName']} cannot change "
                    f"(it is {was_base!r}); accepted: the same base, or a new component",
                )
            if was_base:
                _check_adapter(where, old["InferenceComponentName"], old["EndpointName"], spec)
            else:
                _check_base(where, spec)
            new["Specification"] = _summary(spec)
        copies = (params.get("RuntimeConfig") or {}).get("CopyCount")
        if copies is not None:
            current = (old.get("RuntimeConfig") or {}).get("CurrentCopyCount", 0)
            new["RuntimeConfig"] = {"DesiredCopyCount": copies, "CurrentCopyCount": current}
        new["LastModifiedTime"] = time.time()
        where.records[old["InferenceComponentName"]] = self._transition(new, "Updating")
        return {"InferenceComponentArn": old["InferenceComponentArn"]}

    def _update_copies(self, where: _Where, params: dict[str, Any]) -> dict[str, Any]:
        """UpdateInferenceComponentRuntimeConfig: the component's ``DesiredRuntimeConfig.CopyCount``, Updating
        until its copies are up (a base with no copy of its own: refused, as an adapter has none)."""
        record = _found(where, params.get("InferenceComponentName"))
        old = record.description
        count = (params.get("DesiredRuntimeConfig") or {}).get("CopyCount")
        if "RuntimeConfig" not in old or not isinstance(count, int) or count < 0:
            raise ApiError(
                VALIDATION,
                f"DesiredRuntimeConfig.CopyCount {count!r} is not accepted for {old['InferenceComponentName']}; "
                "accepted: a whole number >= 0 of copies, for a component that has copies (not an adapter)",
            )
        if old["InferenceComponentStatus"] != "InService":
            raise ApiError(
                VALIDATION,
                f"Cannot update inference component {old['InferenceComponentName']} while it is "
                f"{old['InferenceComponentStatus']}.",
            )
        new = {**old, "RuntimeConfig": {**old["RuntimeConfig"], "DesiredCopyCount": count}}
        new["LastModifiedTime"] = time.time()
        where.records[old["InferenceComponentName"]] = self._transition(new, "Updating")
        return {"InferenceComponentArn": old["InferenceComponentArn"]}

    def _delete(self, where: _Where, params: dict[str, Any]) -> dict[str, Any]:
        record = _found(where, params.get("InferenceComponentName"))
        name = record.description["InferenceComponentName"]
        problem = adapter_rules.base_deletion_problem(name, _components(where.records.values()))
        if problem:
            raise ApiError(VALIDATION, problem)
        if record.description["InferenceComponentStatus"] != "Deleting":
            where.records[name] = self._transition(dict(record.description), "Deleting", then=None)
        return {}

    def _transition(
        self, description: dict[str, Any], status: str, then: str | None = "InService"
    ) -> _Record:
        description["InferenceComponentStatus"] = status
        return _Record(description, self.clock() + SETTLE_SECONDS[status] * self.time_scale(), then)

    def _settled(self, account: str, region: str) -> dict[str, _Record]:
        """The records of an account and region, every transition whose time has come made."""
        records = self._records.setdefault((account, region), {})
        now = self.clock()
        for name, record in list(records.items()):
            scaling = self._scaling.get((account, region, name))
            if record.settles_at is not None and record.settles_at <= now:
                if record.then is None:
                    del records[name]
                    continue
                record.description["InferenceComponentStatus"] = record.then
                copies = record.description.get("RuntimeConfig")
                if copies:
                    copies["CurrentCopyCount"] = copies["DesiredCopyCount"]
                if scaling is not None:  # its copies came up then: the idle period starts again from there
                    scaling.last_active = max(scaling.last_active, record.settles_at)
                record.settles_at = None
            copies = record.description.get("RuntimeConfig")
            if scaling is not None and copies and record.settles_at is None:
                scale_to_zero.settle(scaling, copies, now)
                scale_to_zero.idle(scaling, copies, now, self.time_scale())
            if scaling is not None and copies:
                scale_to_zero.follow(scaling, record.description)
        return records


@dataclass
class _Where:
    """One call's account, region, records and view of moto's hosting resources."""

    account: str
    region: str
    records: dict[str, _Record]
    hosting: Hosting

    def arn(self, name: str) -> str:
        return f"arn:aws:sagemaker:{self.region}:{self.account}:inference-component/{name}"


def _components(records: Iterable[_Record]) -> list[Component]:
    return [Component.from_description(r.description) for r in records]


def _hosts_components(config: dict[str, Any]) -> bool:
    """An inference-component endpoint config: its variants name no model (the components bring them)."""
    variants = config.get("ProductionVariants") or []
    return bool(variants) and not any(v.get("ModelName") for v in variants)


def _checked_name(member: str, value: Any) -> str:
    if not isinstance(value, str) or len(value) > 63 or not _NAME.fullmatch(value):
        raise ApiError(
            VALIDATION,
            f"1 validation error detected: Value {value!r} at '{member}' failed to satisfy constraint: Member "
            "must satisfy regular expression pattern: [a-zA-Z0-9]([\\-a-zA-Z0-9]*[a-zA-Z0-9])? and have "
            "length less than or equal to 63",
        )
    return value


def _found(where: _Where, name: Any) -> _Record:
    record = where.records.get(_checked_name("inferenceComponentName", name))
    if record is None:
        raise ApiError(VALIDATION, f'Could not find inference component "{where.arn(str(name))}".')
    return record


def _host(where: _Where, params: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """The endpoint a new component goes on and its variant; refusals for a missing endpoint, one that serves
    a model, or a variant it does not have."""
    name = params.get("EndpointName")
    endpoint = where.hosting.endpoint(str(name)) if isinstance(name, str) else None
    if endpoint is None:
        arn = f"arn:aws:sagemaker:{where.region}:{where.account}:endpoint/{str(name).lower()}"
        raise ApiError(VALIDATION, f'Could not find endpoint "{arn}".')
    config = where.hosting.endpoint_config(endpoint["EndpointConfigName"]) or {}
    if not _hosts_components(config):
        raise ApiError(
            VALIDATION,
            f"Endpoint {name} cannot host inference components: its endpoint config "
            f"{endpoint['EndpointConfigName']} names a model in its production variants; accepted: an endpoint "
            "whose config's variants name no model (with ExecutionRoleArn), made for inference components",
        )
    variants = [v["VariantName"] for v in config["ProductionVariants"]]
    variant = params.get("VariantName") or (variants[0] if len(variants) == 1 else None)
    if variant not in variants:
        raise ApiError(
            VALIDATION,
            f"VariantName {params.get('VariantName')!r} is not accepted for endpoint {name}; accepted: one of "
            f"its variants: {', '.join(variants)}",
        )
    return endpoint, str(variant)


def _specification(params: dict[str, Any]) -> dict[str, Any]:
    if params.get("Specification") is not None and params.get("Specifications") is not None:
        raise ApiError(
            VALIDATION, "Specification and Specifications are not accepted together; accepted: one"
        )
    if params.get("Specifications") is not None:
        raise ApiError(
            VALIDATION,
            "Specifications (one per instance type) is not played by local mode; accepted: Specification",
        )
    spec = params.get("Specification")
    if not isinstance(spec, dict):
        raise ApiError(VALIDATION, "Specification is required; accepted: the component's model or adapter")
    return spec


def _check_base(where: _Where, spec: dict[str, Any]) -> None:
    model = spec.get("ModelName")
    if model is None and not (spec.get("Container") or {}).get("Image"):
        raise ApiError(
            VALIDATION, "A base inference component names a model (ModelName) or a Container.Image"
        )
    if model is not None and not where.hosting.has_model(str(model)):
        arn = f"arn:aws:sagemaker:{where.region}:{where.account}:model/{str(model).lower()}"
        raise ApiError(VALIDATION, f'Could not find model "{arn}".')
    if not spec.get("ComputeResourceRequirements"):
        raise ApiError(
            VALIDATION,
            "ComputeResourceRequirements is required for an inference component that hosts a model; accepted: "
            "the accelerators, CPU cores and memory each copy takes",
        )
    _check_startup(spec.get("StartupParameters") or {})


def _check_startup(startup: dict[str, Any]) -> None:
    """InferenceComponentStartupParameters as AWS holds them: each timeout 60 to 3600 seconds (botocore's
    ProductionVariantModelDataDownloadTimeoutInSeconds and ...ContainerStartupHealthCheckTimeoutInSeconds,
    ``min`` 60, ``max`` 3600; botocore checks only the minimum before sending, the service the maximum)."""
    for member, value in startup.items():
        if member not in STARTUP_PARAMETERS:
            continue
        if not isinstance(value, int) or not STARTUP_SECONDS[0] <= value <= STARTUP_SECONDS[1]:
            field = "specification.startupParameters." + member[0].lower() + member[1:]
            raise ApiError(
                VALIDATION,
                f"1 validation error detected: Value {value!r} at '{field}' failed to satisfy constraint: "
                f"Member must have value between {STARTUP_SECONDS[0]} and {STARTUP_SECONDS[1]}",
            )


def _check_adapter(where: _Where, name: str, endpoint: str, spec: dict[str, Any]) -> None:
    base = _checked_name("baseInferenceComponentName", spec["BaseInferenceComponentName"])
    problem = adapter_rules.adapter_before_base_problem(
        name, base, endpoint, _components(where.records.values())
    )
    if problem:
        raise ApiError(VALIDATION, problem)
    if spec.get("ComputeResourceRequirements") or spec.get("ModelName"):
        raise ApiError(
            VALIDATION,
            f"Adapter inference component {name} takes neither ComputeResourceRequirements nor ModelName: it "
            f"runs on base component {base}'s resources; accepted: BaseInferenceComponentName and "
            "Container.ArtifactUrl",
        )
    url = (spec.get("Container") or {}).get("ArtifactUrl")
    if not isinstance(url, str) or len(url) > 1024 or not _URL.fullmatch(url) or not url.endswith(".tar.gz"):
        raise ApiError(
            VALIDATION,
            f"Container.ArtifactUrl {url!r} of adapter inference component {name} is not accepted; accepted: "
            "the S3 URL of a single gzip compressed tar archive (.tar.gz) holding the adapter",
        )


def _summary(spec: dict[str, Any]) -> dict[str, Any]:
    """InferenceComponentSpecificationSummary of a Specification (the container's Image is its DeployedImage)."""
    summary = {k: v for k, v in spec.items() if k != "Container"}
    container = dict(spec.get("Container") or {})
    if "Image" in container:
        image = container.pop("Image")
        container["DeployedImage"] = {"SpecifiedImage": image, "ResolvedImage": image}
    if container:
        summary["Container"] = container
    return summary


_SORT_KEYS: dict[str, Callable[[dict[str, Any]], Any]] = {
    "Name": lambda d: d["InferenceComponentName"],
    "CreationTime": lambda d: d["CreationTime"],
    "Status": lambda d: d["InferenceComponentStatus"],
}


def _list(where: _Where, params: dict[str, Any]) -> dict[str, Any]:
    """ListInferenceComponents: its filters, sort (CreationTime, Descending by default) and pages."""
    filters = (
        ("EndpointNameEquals", "EndpointName"),
        ("VariantNameEquals", "VariantName"),
        ("StatusEquals", "InferenceComponentStatus"),
    )
    found = [
        r.description
        for r in where.records.values()
        if all(params.get(p) in (None, r.description[k]) for p, k in filters)
        and str(params.get("NameContains") or "") in r.description["InferenceComponentName"]
    ]
    found.sort(
        key=_SORT_KEYS[params.get("SortBy") or "CreationTime"], reverse=params.get("SortOrder") != "Ascending"
    )
    start = int(params.get("NextToken") or 0)
    size = int(params.get("MaxResults") or 10)
    page = found[start : start + size]
    keys = (
        "CreationTime",
        "InferenceComponentArn",
        "InferenceComponentName",
        "EndpointArn",
        "EndpointName",
        "VariantName",
        "InferenceComponentStatus",
        "LastModifiedTime",
    )
    answer: dict[str, Any] = {"InferenceComponents": [{k: d[k] for k in keys} for d in page]}
    if start + size < len(found):
        answer["NextToken"] = str(start + size)
    return answer
