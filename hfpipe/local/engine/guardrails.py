"""UpdateEndpoint in local mode: SageMaker's deployment guardrails played as AWS documents them, since moto has no
UpdateEndpoint. The engine answers the call here (hfpipe.local.engine.hooks); hfpipe.local.engine.traffic routes
invocations.

The contract, each rule with its source (the Developer Guide's "Deployment guardrails", the API reference,
what AWS's own controllers and examples show), is docs/deploy.md, "UpdateEndpoint as local mode plays it":
the request checked against botocore's model and refused in AWS's words; the new fleet started, traffic
shifted all at once, canary or linear, the bake, the alarms evaluated during every step and bake, a rollback
to the old config with a FailureReason, a timeout bounded by MaximumExecutionTimeoutInSeconds; stand-in
traffic during an update (local mode has no users). The fields moto lacks are attributes set on its endpoint
object: no moto code is patched. Not played: RollingUpdatePolicy (refused), multi-variant configs.
"""

from __future__ import annotations

import contextlib
import copy
import json
import math
import re
import threading
import time
from datetime import UTC, datetime
from typing import Any

from hfpipe.local.engine import cloudwatch, moto_patches
from hfpipe.local.engine.deployment import ApiError, Deployment, Step, plan_steps, retains_count
from hfpipe.local.engine.template import ACCOUNT
from hfpipe.local.engine.traffic import Traffic

IN_PROGRESS = ("Creating", "Updating", "SystemUpdating", "RollingBack", "Deleting")
#: Stand-in rounds (traffic, then alarm evaluation) per bake: one a minute of the bake, at most this many.
MAX_ROUNDS = 5
#: Real seconds a new fleet may take to start when the scaled timeout is shorter (time_scale 0 makes every
#: wait instant, but loading a model here takes real time).
START_FLOOR_S = 600.0


class Guardrails:
    """UpdateEndpoint of one engine (``engine``: client, time_scale, put_event; ``traffic``: its invocations)."""

    def __init__(self, engine: Any, traffic: Traffic, region: str) -> None:
        self.engine = engine
        self.traffic = traffic
        self.region = region
        self.lock = threading.Lock()
        #: Endpoint name -> its latest deployment (under way or ended).
        self.deployments: dict[str, Deployment] = {}
        self._closing = threading.Event()
        self._threads: list[threading.Thread] = []
        #: Real seconds a new fleet may take to start at the least (START_FLOOR_S).
        self.start_floor_s = START_FLOOR_S

    # -- UpdateEndpoint -------------------------------------------------------------------------------
    def update_endpoint(self, request: dict[str, Any]) -> dict[str, Any]:
        """Accept an UpdateEndpoint request and start its deployment; ApiError as AWS refuses one."""
        from hfpipe.core import api_shapes

        found = api_shapes.problems("UpdateEndpoint", request)
        if found:
            raise ApiError("ValidationException", f"{found[0]}; accepted: what the API reference allows")
        name, new = request["EndpointName"], request["EndpointConfigName"]
        sm = self.traffic.client("sagemaker")
        endpoint = self._moto_endpoint(name)
        if endpoint is None:
            raise ApiError("ValidationException", f'Could not find endpoint "{self._arn("endpoint", name)}".')
        try:
            variants = sm.describe_endpoint_config(EndpointConfigName=new)["ProductionVariants"]
        except sm.exceptions.ClientError:
            arn = self._arn("endpoint-config", new)
            raise ApiError("ValidationException", f'Could not find endpoint configuration "{arn}".') from None
        with self.lock:
            status = endpoint.endpoint_status
            if status != "InService":
                word = "in-progress" if status in IN_PROGRESS else status.lower()
                raise ApiError("ValidationException", f'Cannot update {word} endpoint "{endpoint.arn}".')
            config = self._deployment_config(request, endpoint)
            capacity = sum(int(v.get("InitialInstanceCount", 1)) for v in variants)
            retained = retains_count(request)
            if retained:
                capacity = sum(int(v.get("CurrentInstanceCount") or 0) for v in endpoint.production_variants)
            d = Deployment(
                name,
                endpoint.endpoint_config_name,
                new,
                copy.deepcopy(config or {}),
                plan_steps(config or {}, capacity),
                capacity,
                str(variants[0].get("InstanceType", "")),
                variants[0]["VariantName"],
                retained=retained,
            )
            endpoint.endpoint_status, endpoint.failure_reason = "Updating", None
            endpoint.last_modified_time = datetime.now(UTC)
            if config:
                endpoint.last_deployment_config = copy.deepcopy(config)
            self._pending(endpoint, d, "Creating", f"Launching {capacity} instance(s).", active=0)
            self.deployments[name] = d
        thread = threading.Thread(target=self._deploy, args=(d,), name=f"update-{name}", daemon=True)
        self._threads.append(thread)
        thread.start()
        return {"EndpointArn": endpoint.arn}

    def _deployment_config(self, request: dict[str, Any], endpoint: Any) -> dict[str, Any] | None:
        """The update's DeploymentConfig (the endpoint's last one under RetainDeploymentConfig); ApiError for
        a rolling update (not emulated) or a rollback alarm the account does not have."""
        config = request.get("DeploymentConfig")
        if config is None and request.get("RetainDeploymentConfig"):
            config = getattr(endpoint, "last_deployment_config", None)
        if config and "RollingUpdatePolicy" in config:
            raise ApiError(
                "ValidationException",
                "DeploymentConfig.RollingUpdatePolicy: not emulated locally; accepted: BlueGreenUpdatePolicy",
            )
        for alarm in (config or {}).get("AutoRollbackConfiguration", {}).get("Alarms", []):
            # Local strictness: an alarm the account does not have could never roll anything back.
            if not self.traffic.client("cloudwatch").describe_alarms(AlarmNames=[alarm["AlarmName"]])[
                "MetricAlarms"
            ]:
                raise ApiError(
                    "ValidationException",
                    f"AutoRollbackConfiguration: alarm {alarm['AlarmName']!r} does not exist",
                )
        return config

    def wait(self, endpoint_name: str, timeout_s: float = 60.0) -> Deployment:
        """The endpoint's latest deployment, once it has ended (TimeoutError if it does not in time)."""
        d = self.deployments[endpoint_name]
        if not d.done.wait(timeout_s):
            raise TimeoutError(f"the update of endpoint {endpoint_name} did not end within {timeout_s} s")
        return d

    def close(self) -> None:
        """Stop the deployments under way (the engine is stopping) and wait for their threads."""
        self._closing.set()
        for thread in self._threads:
            thread.join(timeout=10)

    # -- the deployment -------------------------------------------------------------------------------
    def _deploy(self, d: Deployment) -> None:
        try:
            reason = self._start(d)
            if reason:
                self._roll_back(d, reason)
                return
            requests = self.traffic.standin_requests(d.new_config)
            for number, step in enumerate(d.steps, 1):
                stage = f"step {number}/{len(d.steps)}"
                self.traffic.shift(d.endpoint, d.old_config, d.new_config, step.share)
                d.log.append((f"{stage} traffic", step.share))
                self._status(
                    d,
                    "ActivatingTraffic",
                    f"Activating traffic on {step.capacity} capacity of {step.instances} instance(s).",
                    step.instances,
                )
                self._status(
                    d,
                    "Baking",
                    f"Baking for {step.bake_s} seconds ({step.bake_field}) with traffic enabled on {step.capacity} capacity of {step.instances} instance(s).",
                    step.instances,
                )
                reason = self._bake(d, step, stage, requests)
                if reason:
                    self._roll_back(d, reason)
                    return
            self._succeed(d)
        except Exception as err:  # the engine stopped under it, or moto refused something: end it visibly
            d.outcome = d.outcome or f"error: {err}"
        finally:
            d.done.set()

    def _start(self, d: Deployment) -> str | None:
        """Start the new fleet within what MaximumExecutionTimeoutInSeconds leaves (scaled, at least
        START_FLOOR_S real seconds); the rollback reason, or None. Its real start time is charged to the
        deployment's clock as the waits are (seconds / time_scale)."""
        scale = self.engine.time_scale
        outcome: dict[str, BaseException | None] = {}

        def start() -> None:
            try:
                self.traffic.fleet("start_fleet", d.endpoint, d.new_config)
                outcome["error"] = None
            except Exception as err:
                outcome["error"] = err
            if self._closing.is_set() or d.done.is_set():  # abandoned: stop what came up late
                with contextlib.suppress(Exception):
                    self.traffic.fleet("stop_fleet", d.endpoint, d.new_config)

        thread = threading.Thread(target=start, name=f"start-{d.new_config}", daemon=True)
        began = time.monotonic()
        thread.start()
        thread.join(max(self.start_floor_s, (d.timeout_s - d.clock_s) * scale))
        if self._closing.is_set():
            raise RuntimeError("the engine stopped during the update")
        if thread.is_alive():
            d.clock_s = d.timeout_s
            return (
                f"the new fleet ({d.new_config}) did not start within MaximumExecutionTimeoutInSeconds "
                f"({d.timeout_s} s)"
            )
        d.clock_s += (time.monotonic() - began) / scale if scale else 0.0
        if outcome.get("error") is not None:
            return f"the new fleet ({d.new_config}) did not start: {outcome['error']}"
        return None

    def _bake(self, d: Deployment, step: Step, stage: str, requests: list[Any]) -> str | None:
        """Stand-in traffic and alarm evaluation through one bake; the rollback reason, or None."""
        rounds = min(MAX_ROUNDS, max(1, math.ceil(step.bake_s / 60)))
        limit = d.timeout_s
        for _ in range(rounds):
            self.traffic.standin(d.endpoint, d.old_config, d.new_config, requests, step.share)
            reason = self._alarms(d, stage)
            if reason:
                return reason
            seconds = step.bake_s / rounds
            if limit and d.clock_s + seconds > limit:
                self._sleep(d, limit - d.clock_s)
                return f"the deployment did not complete within MaximumExecutionTimeoutInSeconds ({limit} s)"
            self._sleep(d, seconds)
        d.log.append((f"{stage} baked {step.bake_s} s", step.share))
        return self._alarms(d, stage)

    def _alarms(self, d: Deployment, stage: str) -> str | None:
        cw = self.traffic.client("cloudwatch")
        fired = [name for name in d.alarms if cloudwatch.evaluate(cw, name) == "ALARM"]
        if not fired:
            return None
        return (
            f"CloudWatch alarm(s) {', '.join(fired)} in ALARM during {stage} of the update to {d.new_config}"
        )

    def _sleep(self, d: Deployment, seconds: float) -> None:
        d.clock_s += seconds
        if self._closing.wait(seconds * self.engine.time_scale):
            raise RuntimeError("the engine stopped during the update")

    def _roll_back(self, d: Deployment, reason: str) -> None:
        self.traffic.shift(d.endpoint, d.old_config, d.new_config, 0.0)  # all traffic back to the old fleet
        d.log.append(("rolled back", 0.0))
        with contextlib.suppress(Exception):
            self.traffic.fleet("stop_fleet", d.endpoint, d.new_config)
        endpoint = self._moto_endpoint(d.endpoint)
        if endpoint is not None:
            endpoint.failure_reason = f"Endpoint update rolled back to {d.old_config}: {reason}."
            endpoint.pending_deployment_summary = None
            endpoint.last_modified_time = datetime.now(UTC)
            endpoint.endpoint_status = "InService"
            self._event(endpoint)
        d.outcome = f"rolled back: {reason}"

    def _succeed(self, d: Deployment) -> None:
        variants = self.traffic.client("sagemaker").describe_endpoint_config(EndpointConfigName=d.new_config)[
            "ProductionVariants"
        ]
        endpoint = self._moto_endpoint(d.endpoint)
        if endpoint is None:
            raise RuntimeError(f"endpoint {d.endpoint} was deleted during its update")
        with self.lock:
            # DescribeEndpoint's ProductionVariantSummary of the new fleet, now the endpoint's.
            endpoint.production_variants = [
                {
                    "VariantName": v["VariantName"],
                    "CurrentWeight": float(v.get("InitialVariantWeight", 1.0)),
                    "DesiredWeight": float(v.get("InitialVariantWeight", 1.0)),
                    "CurrentInstanceCount": d.instance_count
                    if d.retained
                    else int(v.get("InitialInstanceCount", 1)),
                    "DesiredInstanceCount": d.instance_count
                    if d.retained
                    else int(v.get("InitialInstanceCount", 1)),
                }
                for v in variants
            ]
            endpoint.endpoint_config_name = d.new_config
            endpoint.pending_deployment_summary = None
            endpoint.last_modified_time = datetime.now(UTC)
            endpoint.endpoint_status = "InService"
        self.traffic.shift(
            d.endpoint, d.old_config, d.new_config, 0.0
        )  # the endpoint's config is the new one
        d.log.append(("old fleet terminated", 1.0))
        with contextlib.suppress(Exception):
            self.traffic.fleet("stop_fleet", d.endpoint, d.old_config)
        self._event(endpoint)
        d.outcome = "succeeded"

    # -- moto's endpoint ------------------------------------------------------------------------------
    def _moto_endpoint(self, name: str) -> Any:
        return moto_patches.endpoint_record(ACCOUNT, self.region, name)

    def _arn(self, kind: str, name: str) -> str:
        return f"arn:aws:sagemaker:{self.region}:{ACCOUNT}:{kind}/{name}"

    def _pending(self, endpoint: Any, d: Deployment, status: str, message: str, active: int) -> None:
        now = datetime.now(UTC)
        summary = getattr(endpoint, "pending_deployment_summary", None) or {
            "EndpointConfigName": d.new_config,
            "StartTime": now,
        }
        variant = {
            "VariantName": d.variant_name,
            "CurrentInstanceCount": active,
            "DesiredInstanceCount": d.instance_count,
            "InstanceType": d.instance_type,
            "VariantStatus": [{"Status": status, "StatusMessage": message, "StartTime": now}],
        }
        # A new dict each time: moto may be encoding the previous one in another thread.
        endpoint.pending_deployment_summary = {**summary, "ProductionVariants": [variant]}

    def _status(self, d: Deployment, status: str, message: str, active: int) -> None:
        endpoint = self._moto_endpoint(d.endpoint)
        if endpoint is not None and endpoint.endpoint_status == "Updating":
            self._pending(endpoint, d, status, message, active)
            self._event(endpoint)

    def _event(self, endpoint: Any) -> None:
        """SageMaker's "SageMaker Endpoint Deployment State Change" event, on the engine's bus."""
        desc = self.traffic.client("sagemaker").describe_endpoint(EndpointName=endpoint.endpoint_name)
        desc.pop("ResponseMetadata", None)
        millis = lambda v: int(v.timestamp() * 1000) if isinstance(v, datetime) else str(v)  # noqa: E731
        detail = json.loads(json.dumps({**desc, "Tags": {}}, default=millis))
        detail["EndpointStatus"] = re.sub(r"(?<!^)(?=[A-Z])", "_", desc["EndpointStatus"]).upper()
        with contextlib.suppress(Exception):
            self.engine.put_event(
                "aws.sagemaker", "SageMaker Endpoint Deployment State Change", detail, [endpoint.arn]
            )
