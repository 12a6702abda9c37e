"""InvokeEndpoint in local mode: which fleet of an endpoint serves a request, what the caller sees, and the
CloudWatch metrics SageMaker publishes for it (hfpipe.local.engine.cloudwatch), so alarms see what endpoints do.

Every InvokeEndpoint of the engine's sagemaker-runtime client comes here (hfpipe.local.engine.hooks.runtime_client).
Outside an update the endpoint's current config serves it; while an update shifts traffic
(hfpipe.local.engine.guardrails) the new fleet serves its share of the calls, in turn, the old fleet the rest.

The ``fleets`` plug-in of the engine serves a request on one fleet (``invoke_fleet(endpoint, config, body)``;
``config`` None: the endpoint's current one) and starts and stops fleets (``start_fleet``, ``stop_fleet``);
hfpipe.local.runtime.LocalRuntime is one. Without it the ``endpoint(name, body)`` plug-in serves every fleet.

An outcome is classified as the Hugging Face inference toolkit and its model server answer it: any exception of
the handler is a 400 (handler_service.py: ``raise PredictionException(str(e), 400)``), counted in
``Invocation4XXErrors``; a handler that ends its worker process (an exception outside ``Exception``, such as
a tokenizer's Rust panic, pyo3's PanicException) is the model server's 500 "Worker died." (pytorch/serve and
multi-model-server, WorkerThread), counted in ``Invocation5XXErrors``. The caller gets InvokeEndpoint's
ModelError (HTTP 424) with the container's status and message, as AWS answers it.

Substituted (local mode has no users): during each step and bake of an update, ``standin`` sends the
stand-in requests (hfpipe.local.engine.standin) itself: each once to the new fleet and, for the old fleet's share
of the traffic, at most once to the old one.
"""

from __future__ import annotations

import contextlib
import json
import math
import threading
import time
from dataclasses import dataclass
from typing import Any

from hfpipe.local.engine import cloudwatch
from hfpipe.local.engine.standin import served_model, standin_requests


class InvocationError(Exception):
    """The model container answered an invocation with an HTTP error ``status``."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status, self.message = status, message


@dataclass
class _Route:
    old: str
    new: str
    share: float
    turn: int = 0


class Traffic:
    """The invocations of one engine (``engine``: client, the ``endpoint`` and ``fleets`` plug-ins)."""

    #: What ``invoke_raw`` raises for the container's error answer (hfpipe.local.engine.moto_patches, the lowest
    #: module of local mode, finds it here rather than importing this module).
    InvocationError = InvocationError

    def __init__(self, engine: Any) -> None:
        self.engine = engine
        self.lock = threading.Lock()
        self._routes: dict[str, _Route] = {}
        self._variants: dict[str, str] = {}
        self._clients: dict[str, Any] = {}

    def client(self, service: str) -> Any:
        """One client per service for every invocation and update (making a boto3 client costs more than the
        call, and the default session is not safe to make clients from in several threads at once)."""
        with self.lock:
            if service not in self._clients:
                self._clients[service] = self.engine.client(service)
            return self._clients[service]

    def shift(self, endpoint: str, old: str, new: str, share: float) -> None:
        """From now on the new fleet serves ``share`` of the endpoint's calls (0: none, the route is gone)."""
        with self.lock:
            if share <= 0:
                self._routes.pop(endpoint, None)
            else:
                self._routes[endpoint] = _Route(old, new, share)

    def invoke_raw(self, endpoint: str, raw: bytes | str) -> Any:
        """An InvokeEndpoint call with its body as sent: one that is not JSON is the handler's 400 (the local
        plug-ins take JSON; a handler's input_fn refuses what it cannot decode)."""
        try:
            body = json.loads(raw)
        except ValueError as err:
            self._record(endpoint, None, 400, 0.0)
            raise InvocationError(400, f"the request body is not JSON: {err}") from None
        return self.invoke(endpoint, body)

    def invoke_component(self, endpoint: str, component: str, raw: bytes | str) -> Any:
        """An InvokeEndpoint naming inference component ``component``: AWS's refusals first (an ApiError:
        hfpipe.local.engine.inference_components.InferenceComponents.route), then the engine's ``component`` plug-in
        answers it (in the local world, the runtime's vLLM stand-in: hfpipe.local.serving.adapter_serving); a body
        that is not JSON is a 400, as for an endpoint."""
        from hfpipe.local.engine.moto_patches import default_account_id, moto_hosting

        account, region = default_account_id(), self.engine.region
        route = self.engine.inference_components.route(
            account, region, endpoint, component, moto_hosting(account, region)
        )
        if route is None:  # no such endpoint
            from hfpipe.local.engine.deployment import ApiError

            raise ApiError("ValidationError", f"Endpoint {endpoint} of account {account} not found.")
        store = self.engine.inference_components
        try:
            answer = self._component_answer(route, raw)
        except InvocationError as err:  # the container's error: the component's error metrics
            store.record_answer(account, region, route.component, err.status)
            raise
        store.record_answer(account, region, route.component, 200)
        return answer

    def _component_answer(self, route: Any, raw: bytes | str) -> Any:
        fleets: Any = getattr(self.engine, "fleets", None)
        if self.engine.world is not None and hasattr(fleets, "invoke_component"):  # the vLLM stand-in
            return json.loads(fleets.invoke_component(route, raw, "application/json"))
        try:
            body = json.loads(raw)
        except ValueError as err:
            raise InvocationError(400, f"the request body is not JSON: {err}") from None
        return self.engine.component(route, body)

    def invoke(self, endpoint: str, body: Any) -> Any:
        """One InvokeEndpoint call; InvocationError when the container answered with an error."""
        config = None
        with self.lock:
            route = self._routes.get(endpoint)
            if route is not None:
                route.turn += 1
                new = math.floor(route.turn * route.share) > math.floor((route.turn - 1) * route.share)
                config = route.new if new else route.old
        return self.serve(endpoint, config, body)

    def standin(self, endpoint: str, old: str, new: str, requests: list[Any], share: float) -> None:
        """One round of stand-in traffic while the new fleet carries ``share`` of it."""
        to_old = min(len(requests), round(len(requests) * (1 - share) / share)) if share < 1 else 0
        for config, bodies in ((new, requests), (old, requests[:to_old])):
            for body in bodies:
                with contextlib.suppress(InvocationError):
                    self.serve(endpoint, config, body)

    def standin_requests(self, config: str) -> list[Any]:
        """The stand-in requests for the recipe the config's model came from (hfpipe.local.engine.standin)."""
        from hfpipe.core.recipe.recipes import resolve_recipe

        recipe = None
        with contextlib.suppress(Exception):  # no tag, no version, a recipe not bundled: the generic request
            name = served_model(self.client("sagemaker"), config).recipe_name
            recipe = resolve_recipe(recipe_name=name) if name else None
        return standin_requests(recipe)

    def serve(self, endpoint: str, config: str | None, body: Any) -> Any:
        """Serve ``body`` on the fleet of ``config`` (None: the endpoint's current one), record its metrics."""
        started = time.perf_counter()
        status, message, answer = 200, "", None
        try:
            answer = self.fleet("invoke_fleet", endpoint, config, body)
        except Exception as err:  # the inference toolkit answers any handler exception with 400; vLLM's
            status = getattr(err, "status", 400)  # server says its own (openai_protocol.OpenAIError.status)
            status, message = (status if isinstance(status, int) and 400 <= status < 600 else 400), str(err)
        except (KeyboardInterrupt, GeneratorExit):
            raise
        except BaseException:  # the worker process died with the request
            status, message = 500, "Worker died."
        self._record(endpoint, config, status, (time.perf_counter() - started) * 1e6)
        if status != 200:
            raise InvocationError(status, message)
        return answer

    def fleet(self, method: str, endpoint: str, *args: Any) -> Any:
        """Call the ``fleets`` plug-in; without one the ``endpoint`` plug-in serves, and fleets need no start."""
        fleets = getattr(self.engine, "fleets", None)
        if fleets is not None:
            return getattr(fleets, method)(endpoint, *args)
        if method == "invoke_fleet":
            return self.engine.endpoint(endpoint, args[-1])
        return None

    def _record(self, endpoint: str, config: str | None, status: int, latency_us: float) -> None:
        with contextlib.suppress(Exception):  # a metric lost must not fail the invocation
            variant = self._variant(endpoint, config)
            cloudwatch.record_invocation(self.client("cloudwatch"), endpoint, variant, status, latency_us)

    def _variant(self, endpoint: str, config: str | None) -> str:
        """The variant a config serves (a config never changes: remembered by its name)."""
        sm = self.client("sagemaker")
        if config is None:
            config = sm.describe_endpoint(EndpointName=endpoint)["EndpointConfigName"]
        if config not in self._variants:
            variants = sm.describe_endpoint_config(EndpointConfigName=config)["ProductionVariants"]
            self._variants[config] = variants[0]["VariantName"]
        return self._variants[config]
