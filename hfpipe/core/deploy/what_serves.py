"""What an endpoint serves, read from the endpoint itself: DescribeEndpoint -> its live config
(DescribeEndpointConfig) -> each variant's model (DescribeModel) -> the model's package version (its
containers' ``ModelPackageName``, as the deploy creates it: hfpipe.core.deploy.deploy_requests.model_request).

Tags (``hfpipe:model-version`` on the endpoint) and the deployment record (SSM) say what a deploy recorded;
they are claims written after the fact, and a failed write, a failed way back or a change by hand leaves them
naming a version that does not serve. Every reader that says what serves (the deploy's Record step and its
re-checks, ``hfpipe endpoints``, ``hfpipe deploy``) reads it here, and reports a claim that differs as a
mismatch (``Serving.mismatch``) instead of trusting it.

An update in progress: DescribeEndpoint keeps ``EndpointConfigName`` (and its ProductionVariants) on the old
fleet until the traffic has moved, and names the new one in ``PendingDeploymentSummary`` (API reference,
DescribeEndpoint and UpdateEndpoint: "the endpoint status is set to Updating ... the previous endpoint
configuration is used until the update completes"); during a canary or linear step both take traffic. So a
reading is the live config's, and ``pending`` is the config it is updating to, read the same way.

A config or model deleted while the endpoint still runs on it (SageMaker allows both: DeleteEndpointConfig,
DeleteModel) leaves what serves unknown; ``unknown`` says what could not be read. Stdlib only: the deploy's
Lambdas copy it, and the command uses it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hfpipe.core.promotion import registry
from hfpipe.core.run.cleanup import is_not_found

#: DescribeEndpoint statuses in which the live config serves requests.
SERVING_STATUSES = frozenset({"InService", "Updating", "SystemUpdating", "RollingBack"})


@dataclass(frozen=True)
class Variant:
    """One production variant of a config: its model, the version that model is, and its fleet."""

    name: str
    model: str | None
    version_arn: str | None
    instance_type: str | None = None
    initial_instance_count: int | None = None


@dataclass(frozen=True)
class ConfigReading:
    """One endpoint config as read: its variants, and what could not be read (a config or model gone)."""

    name: str
    variants: tuple[Variant, ...] = ()
    unknown: tuple[str, ...] = ()

    @property
    def version_arn(self) -> str | None:
        """The one version every variant's model is; None when a variant's is unknown, none, or they differ."""
        versions = {v.version_arn for v in self.variants}
        if len(versions) != 1 or self.unknown:
            return None
        return next(iter(versions))

    @property
    def fleet(self) -> tuple[str | None, int]:
        """(the first variant's instance type, the variants' initial instance counts summed)."""
        types = [v.instance_type for v in self.variants if v.instance_type]
        return (types[0] if types else None), sum(v.initial_instance_count or 0 for v in self.variants)

    @property
    def model(self) -> str | None:
        models = sorted({v.model for v in self.variants if v.model})
        return ", ".join(models) or None

    def describe(self, env: str) -> str:
        """'tiny-qa/3 (config C, model M)', or what is not known of it."""
        arn = self.version_arn
        if arn:
            what = registry.ref_of_arn(arn, env)
        elif self.unknown:
            what = "an unknown version (" + "; ".join(self.unknown) + ")"
        elif any(v.version_arn for v in self.variants):
            refs = sorted({registry.ref_of_arn(v.version_arn, env) for v in self.variants if v.version_arn})
            what = "versions " + " and ".join(refs)
        else:
            what = "no registered version"
        return f"{what} (config {self.name}, model {self.model or '-'})"


@dataclass(frozen=True)
class Serving:
    """What one endpoint serves now (``what_serves``)."""

    endpoint: str
    status: str
    live: ConfigReading | None
    pending: ConfigReading | None = None
    failure_reason: str | None = None
    arn: str | None = None
    current_instance_count: int | None = None
    creation_time: Any = field(default=None, compare=False)
    variants_summary: tuple[dict[str, Any], ...] = field(default=(), compare=False)
    #: DescribeEndpoint's PendingDeploymentSummary as answered (None: no update under way); its StartTime and
    #: new fleet are priced beside the live one (hfpipe.core.fleet_cost).
    pending_summary: dict[str, Any] | None = field(default=None, compare=False)

    @property
    def config(self) -> str | None:
        return self.live.name if self.live else None

    @property
    def version_arn(self) -> str | None:
        """The version the live config serves, when the endpoint serves requests and it is known."""
        return self.live.version_arn if self.live and self.status in SERVING_STATUSES else None

    @property
    def pending_version_arn(self) -> str | None:
        return self.pending.version_arn if self.pending else None

    @property
    def updating(self) -> bool:
        return self.pending is not None

    def serves(self, version_arn: str, config: str | None = None) -> bool:
        """Only ``version_arn`` serves (on ``config`` when given): InService, no update under way."""
        return (
            self.status == "InService"
            and not self.updating
            and self.version_arn == version_arn
            and (config is None or self.config == config)
        )

    def describe(self, env: str) -> str:
        """One line: 'InService, serving tiny-qa/3 (config C, model M)', with the update under way if any."""
        if self.live is None:
            text = f"{self.status}, on no endpoint config"
        elif self.status in SERVING_STATUSES:
            text = f"{self.status}, serving {self.live.describe(env)}"
        else:
            text = f"{self.status}, serving nothing (its config: {self.live.describe(env)})"
        if self.pending is not None:
            text += f"; updating to {self.pending.describe(env)}"
        if self.failure_reason:
            text += f"; FailureReason: {self.failure_reason}"
        return text

    def mismatch(self, claimed_arn: str | None, claim: str, env: str) -> str | None:
        """``mismatch`` of what this endpoint serves and what a tag or record claims."""
        return mismatch(self.version_arn, claimed_arn, claim, env)

    def to_json(self, env: str) -> dict[str, Any]:
        """What the command's --json and the deploy's errors show."""
        return {
            "status": self.status,
            "endpoint_config": self.config,
            "model": self.live.model if self.live else None,
            "model_version_arn": self.version_arn,
            "serves": registry.ref_of_arn(self.version_arn, env) if self.version_arn else None,
            "unknown": list(self.live.unknown) if self.live else [],
            "updating_to": (
                {
                    "endpoint_config": self.pending.name,
                    "model_version_arn": self.pending.version_arn,
                    "model": self.pending.model,
                }
                if self.pending
                else None
            ),
        }


def mismatch(served_arn: str | None, claimed_arn: str | None, claim: str, env: str) -> str | None:
    """'the <claim> names X, which is not what serves' when a tag or record names another version than the one
    read from the endpoint (or one where no known version serves); None when they agree or nothing is claimed."""
    if not claimed_arn or claimed_arn == served_arn:
        return None
    return f"the {claim} names {registry.ref_of_arn(claimed_arn, env)}, which is not what serves"


def _package_of(model: dict[str, Any]) -> tuple[str | None, str | None]:
    """(the version the model's containers name, a problem): one ModelPackageName across PrimaryContainer and
    Containers; none is a model of an image and artifact (a pipeline run's), several an inference pipeline."""
    containers = [model.get("PrimaryContainer") or {}, *(model.get("Containers") or [])]
    names = sorted({str(c["ModelPackageName"]) for c in containers if c.get("ModelPackageName")})
    if len(names) > 1:
        return None, f"model {model.get('ModelName')} has containers of {len(names)} model packages"
    return (names[0] if names else None), None


def read_config(sagemaker: Any, name: str) -> ConfigReading:
    """A config's variants, each with its model's version; a config or model gone is named in ``unknown``."""
    try:
        config = sagemaker.describe_endpoint_config(EndpointConfigName=name)
    except Exception as err:
        if is_not_found(err):
            return ConfigReading(name, unknown=(f"endpoint config {name} no longer exists",))
        raise
    variants: list[Variant] = []
    unknown: list[str] = []
    for variant in config.get("ProductionVariants") or []:
        model_name = variant.get("ModelName")
        version = None
        if model_name:
            try:
                version, problem = _package_of(sagemaker.describe_model(ModelName=model_name))
            except Exception as err:
                if not is_not_found(err):
                    raise
                problem = f"model {model_name} no longer exists"
            if problem:
                unknown.append(problem)
        count = variant.get("InitialInstanceCount")
        variants.append(
            Variant(
                name=str(variant.get("VariantName", "")),
                model=model_name,
                version_arn=version,
                instance_type=variant.get("InstanceType"),
                initial_instance_count=int(count) if isinstance(count, int) else None,
            )
        )
    return ConfigReading(name, tuple(variants), tuple(unknown))


def what_serves(sagemaker: Any, endpoint_name: str) -> Serving | None:
    """What ``endpoint_name`` serves, read from it (module docstring); None when there is no such endpoint.
    Errors other than "not found" are raised: a reader that cannot read says so rather than guess."""
    try:
        endpoint = sagemaker.describe_endpoint(EndpointName=endpoint_name)
    except Exception as err:
        if is_not_found(err):
            return None
        raise
    live_name = endpoint.get("EndpointConfigName")
    pending_name = (endpoint.get("PendingDeploymentSummary") or {}).get("EndpointConfigName")
    summary = tuple(endpoint.get("ProductionVariants") or ())
    counts = [v.get("CurrentInstanceCount") for v in summary]
    return Serving(
        endpoint=endpoint_name,
        status=str(endpoint.get("EndpointStatus", "")),
        live=read_config(sagemaker, live_name) if live_name else None,
        pending=read_config(sagemaker, pending_name) if pending_name and pending_name != live_name else None,
        failure_reason=endpoint.get("FailureReason") or None,
        arn=endpoint.get("EndpointArn"),
        creation_time=endpoint.get("CreationTime"),
        current_instance_count=sum(counts) if counts and all(isinstance(c, int) for c in counts) else None,
        variants_summary=summary,
        pending_summary=endpoint.get("PendingDeploymentSummary") or None,
    )
