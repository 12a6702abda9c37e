"""The AWS vLLM container's own SageMaker layer in front of local mode's vLLM stand-in (docs/adapters.md).

AWS publishes the SageMaker integration of its vLLM container as the package `model-hosting-container-standards`
(aws/model-hosting-container-standards; pinned in requirements-local.txt at the release vLLM 0.14.0's container
holds). vLLM wires it in two places, and ``ContainerLayer`` wires it the same way over an ``OpenAIEndpoint``:

- ``POST /invocations`` (vllm/entrypoints/sagemaker/routes.py, ``invocations``) is decorated with the package's
  ``inject_adapter_id(adapter_path="model")``: the value of SageMaker's ``X-Amzn-SageMaker-Adapter-Identifier``
  header replaces the body's ``model`` field (the package's InjectToBodyApiTransform; without the header the
  field becomes null, so the base answers whatever the body named), and the body goes on to the server;
- the adapter routes (vllm/entrypoints/serve/lora/api_router.py, ``attach_router``): only when
  ``VLLM_ALLOW_RUNTIME_LORA_UPDATING`` is on (vllm/envs.py: "1" or "true", any case) does vLLM decorate its
  ``load_lora_adapter`` with the package's ``register_load_adapter_handler(request_shape={"lora_name":
  "body.name", "lora_path": "body.src"})`` and its ``unload_lora_adapter`` with
  ``register_unload_adapter_handler(request_shape={"lora_name": "path_params.adapter_name"})``; otherwise
  ``attach_router`` returns before either exists. The package mounts them at its own routes
  (sagemaker/lora/routes.py, ``LORA_ROUTE_REGISTRY``: ``POST /adapters`` with ``{"name", "src"}``, validated by
  its SageMakerRegisterLoRAAdapterRequest, and ``DELETE /adapters/{adapter_name}``) and answers a success in
  its own words (``ResponseMessage.ADAPTER_REGISTERED``: "Adapter NAME registered"); a failure is vLLM's
  ErrorResponse passed on as it is (RegisterLoRAApiTransform._transform_error_response), whose message the
  package's ``ResponseMessage`` names: "greater than max_lora_rank", "doesn't contain tensors".

Run in process: one FastAPI app per stand-in, called through Starlette's TestClient (no socket, no server).
The package's decorators also record each handler in its process-wide registry, which its ``bootstrap(app)``
mounts; several stand-ins live in one process here, each with its own setting, so each app mounts the
decorated handlers itself at the routes the package's ``get_sagemaker_route_config`` names, and the adapter
routes only where the setting is on, as ``attach_router`` decides per server. Not played: sticky sessions
(``stateful_session_manager``), ``/ping``'s health, the /v1 adapter routes (SageMaker calls /adapters).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

#: vLLM's switch for the adapter routes (vllm/envs.py ``VLLM_ALLOW_RUNTIME_LORA_UPDATING``).
RUNTIME_LORA_UPDATING = "VLLM_ALLOW_RUNTIME_LORA_UPDATING"
#: The header SageMaker sends with a call to an adapter component (the package's SageMakerLoRAApiHeader).
ADAPTER_HEADER = "X-Amzn-SageMaker-Adapter-Identifier"


def runtime_lora_updating(environment: Mapping[str, str]) -> bool:
    """vllm/envs.py: ``os.environ.get("VLLM_ALLOW_RUNTIME_LORA_UPDATING", "0").strip().lower() in ("1",
    "true")``."""
    return str(environment.get(RUNTIME_LORA_UPDATING, "0")).strip().lower() in ("1", "true")


class LayerAnswer:
    """One answer of the container: its HTTP status, content type and body."""

    def __init__(self, status: int, content_type: str, body: bytes) -> None:
        self.status, self.content_type, self.body = status, content_type, body

    def message(self) -> str:
        """The error's words: vLLM's ErrorResponse message, FastAPI's ``detail``, or the body as text."""
        try:
            parsed = json.loads(self.body)
        except (ValueError, UnicodeDecodeError):
            return self.body.decode(errors="replace")
        if isinstance(parsed, dict) and isinstance(parsed.get("error"), dict):
            return str(parsed["error"].get("message"))
        if isinstance(parsed, dict) and "detail" in parsed:
            detail = parsed["detail"]
            return detail if isinstance(detail, str) else json.dumps(detail)
        return self.body.decode(errors="replace")


@functools.cache
def _handlers() -> dict[str, Any]:
    """The handlers as vLLM decorates them, by the package's handler type (built once: the decorators import
    FastAPI and record each handler in the package's registry)."""
    import model_hosting_container_standards.sagemaker as sagemaker_standards
    from fastapi import Request
    from fastapi.responses import JSONResponse, Response

    from hfpipe.local.serving.openai_protocol import OpenAIError

    @sagemaker_standards.inject_adapter_id(adapter_path="model")
    async def invocations(raw_request: Request) -> Response:
        stand_in = raw_request.app.state.stand_in
        try:
            answer = stand_in.answer(
                "/invocations", await raw_request.body(), raw_request.headers.get("content-type")
            )
        except OpenAIError as err:
            return JSONResponse(err.body(), status_code=err.status)
        body = b"".join(answer.stream) if answer.stream is not None else bytes(answer.body)
        return Response(body, media_type=answer.content_type)

    @sagemaker_standards.register_load_adapter_handler(
        request_shape={"lora_name": "body.name", "lora_path": "body.src"}
    )
    async def load_lora_adapter(request: Any, raw_request: Request) -> Response:
        try:
            said = raw_request.app.state.stand_in.load_adapter(request.lora_name, request.lora_path)
        except OpenAIError as err:
            return JSONResponse(err.body(), status_code=err.status)
        return Response(status_code=200, content=said)

    @sagemaker_standards.register_unload_adapter_handler(
        request_shape={"lora_name": "path_params.adapter_name"}
    )
    async def unload_lora_adapter(request: Any, raw_request: Request) -> Response:
        try:
            said = raw_request.app.state.stand_in.unload_adapter(request.lora_name)
        except OpenAIError as err:
            return JSONResponse(err.body(), status_code=err.status)
        return Response(status_code=200, content=said)

    return {
        "invoke": invocations,
        "register_adapter": load_lora_adapter,
        "unregister_adapter": unload_lora_adapter,
    }


class ContainerLayer:
    """An ``OpenAIEndpoint`` behind the container's SageMaker layer: ``invoke``, ``register_adapter`` and
    ``unregister_adapter`` are SageMaker's calls to the container, answered by the package's routes."""

    def __init__(self, stand_in: Any, environment: Mapping[str, str]) -> None:
        from fastapi import FastAPI
        from fastapi.testclient import TestClient
        from model_hosting_container_standards.sagemaker.sagemaker_router import get_sagemaker_route_config

        self.stand_in = stand_in
        self.adapter_routes = runtime_lora_updating(environment)
        app = FastAPI()
        app.state.stand_in = stand_in
        handlers = _handlers()
        mounted = ("invoke", "register_adapter", "unregister_adapter") if self.adapter_routes else ("invoke",)
        for handler_type in mounted:
            route = get_sagemaker_route_config(handler_type)
            app.add_api_route(route.path, handlers[handler_type], methods=[route.method])
        self.client = TestClient(app, raise_server_exceptions=False)

    def invoke(self, body: bytes | str, content_type: str | None, adapter: str | None) -> LayerAnswer:
        """InvokeEndpoint reaching the container: ``adapter`` (an adapter component's identifier) is sent as
        SageMaker sends it, in the adapter identifier header."""
        headers = {"Content-Type": content_type or ""}
        if adapter is not None:
            headers[ADAPTER_HEADER] = adapter
        return self._answer(self.client.post("/invocations", content=body, headers=headers))

    def register_adapter(self, name: str, src: str | Path) -> LayerAnswer:
        """``POST /adapters`` with ``{"name": name, "src": src}``, the package's register request."""
        return self._answer(self.client.post("/adapters", json={"name": name, "src": str(src)}))

    def unregister_adapter(self, name: str) -> LayerAnswer:
        """``DELETE /adapters/{name}``, the package's unregister request."""
        return self._answer(self.client.delete(f"/adapters/{name}"))

    @staticmethod
    def _answer(response: Any) -> LayerAnswer:
        return LayerAnswer(response.status_code, response.headers.get("content-type", ""), response.content)

    def close(self) -> None:
        self.client.close()
        self.stand_in.close()
