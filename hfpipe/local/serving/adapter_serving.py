"""Local mode answers an inference component's InvokeEndpoint with the vLLM stand-in (docs/adapters.md, "Local
mode serves adapter components with the vLLM stand-in": the base, the container's layer, the adapter, what is
not confirmed).

In the local world (the engine's ``world`` set), a call that names an InService component of an
inference-component endpoint (hfpipe.local.engine.inference_components ``route``) is served here, through
hfpipe.local.runtime.LocalRuntime ``invoke_component``, by hfpipe.local.serving.openai_endpoint.OpenAIEndpoint
behind the vLLM container's own SageMaker layer (hfpipe.local.serving.sagemaker_layer), one per base
component: the base is the Hub id its model's ``SM_VLLM_MODEL`` names, built here without a download (any
other is ``ComponentRefused``, InvokeEndpoint's ValidationError); the adapter is the component's
``Container.ArtifactUrl``, unpacked and registered on its base's container under the component's name, which
each call carries in the ``X-Amzn-SageMaker-Adapter-Identifier`` header.

Containers are kept by (base component, Hub id) and registrations by (component, artifact URL): a second call
builds and registers nothing, and ``close`` (the runtime's, when the world stops) closes every container.
Errors of the stand-in (vLLM's 4xx and 5xx) are hfpipe.local.engine.traffic.InvocationError, the ModelError
(424) every local endpoint answers.
"""

from __future__ import annotations

import functools
import hashlib
import json
import tarfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from hfpipe.local.engine.deployment import ApiError
from hfpipe.local.engine.traffic import InvocationError
from hfpipe.local.training.container import LocalContainerError

#: The tiny base's chat template where its tokenizer has none: ChatML, the form of the Qwen instruct bases'
#: templates (role and content between <|im_start|> and <|im_end|>, then the assistant's turn).
CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


class ComponentRefused(ApiError):
    """A component local mode cannot serve (InvokeEndpoint's ValidationError, one line)."""

    def __init__(self, message: str) -> None:
        super().__init__("ValidationError", message)


@functools.cache
def local_base_models() -> dict[str, str]:
    """{Hub id: tiny model family} of the bases local mode builds without a download: each bundled adapter
    recipe's ``adapter.base_model``, and the family its ``model`` channel is built from here."""
    from hfpipe.core.recipe.recipes import available_recipes, load_recipe
    from hfpipe.local.training.substitute import for_this_machine

    bases: dict[str, str] = {}
    for name in available_recipes():
        recipe = load_recipe(name)
        base = (recipe.get("adapter") or {}).get("base_model")
        if base:  # its `model` channel, or the stand-in local mode substitutes for its Hub model
            bases[base] = for_this_machine(recipe, gpu=False).model_family
    return bases


class AdapterServing:
    """The containers serving inference components: one per base component (and the Hub id its model
    serves), each the vLLM stand-in behind the container's SageMaker layer
    (hfpipe.local.serving.sagemaker_layer), holding the adapters registered on it by component name."""

    def __init__(self, sagemaker: Any, download: Callable[[str, Path], None], workdir: Path) -> None:
        #: ``download(s3_url, file)``: the S3 object to a local file (the runtime's S3 client).
        self.sagemaker, self.download, self.workdir = sagemaker, download, workdir
        #: (base component, Hub id) -> the container serving it.
        self.served: dict[tuple[str, str], Any] = {}
        #: (base component, Hub id) -> {adapter component: the artifact URL registered under its name}.
        self.registered: dict[tuple[str, str], dict[str, str]] = {}
        self._bases: dict[str, Path] = {}
        self._lock = threading.Lock()

    def answer(
        self, route: Any, body: bytes | str, content_type: str | None, *, stream: bool = False
    ) -> bytes | Iterator[bytes]:
        """The container's answer to one call reaching ``route`` (hfpipe.local.engine.inference_components.Route):
        the body (with ``stream``: its Server-Sent Events, whole); InvocationError for its error answers,
        ComponentRefused for a component local mode cannot serve or whose adapter the container refuses."""
        container, adapter = self.container(route)
        answer = container.invoke(body, content_type, adapter)
        if answer.status != 200:
            raise InvocationError(answer.status, answer.message())
        return iter([answer.body]) if stream else answer.body

    def container(self, route: Any) -> tuple[Any, str | None]:
        """(the container serving ``route``'s base, the adapter identifier the call carries: the adapter
        component's name, registered with its artifact first when it is not yet, or None for the base)."""
        model, environment = self._base_model(route.base)
        key = (route.base, model)
        with self._lock:
            folder = None
            wanted = route.adapter_artifact
            if wanted is not None and self.registered.get(key, {}).get(route.component) != wanted:
                folder = self._adapter_folder(wanted)  # first: an artifact refused starts nothing
            if key not in self.served:
                self.served[key] = self._start(model, environment, route)
                self.registered[key] = {}
            container = self.served[key]
            if folder is not None:
                self._register(container, self.registered[key], route, folder)
        return container, (route.component if wanted is not None else None)

    def _register(self, container: Any, registered: dict[str, str], route: Any, folder: Path) -> None:
        """The adapter component's artifact registered under its name (``POST /adapters``), replacing what
        was registered under it before (``DELETE /adapters/{name}`` first); ComponentRefused with the
        container's answer when it refuses."""
        url = route.adapter_artifact
        if route.component in registered:
            container.unregister_adapter(route.component)
            del registered[route.component]
        answer = container.register_adapter(route.component, folder)
        if answer.status != 200:
            hint = ""
            if answer.status == 404 and not container.adapter_routes:
                hint = (
                    " (vLLM mounts the adapter routes only with VLLM_ALLOW_RUNTIME_LORA_UPDATING=true in the "
                    f"base model's environment; accepted: a model of base component {route.base} that sets it)"
                )
            raise ComponentRefused(
                f"adapter component {route.component}: the container refused its adapter ({url}): POST "
                f"/adapters answered {answer.status}: {answer.message()}{hint}"
            )
        registered[route.component] = url

    def _base_model(self, base_component: str) -> tuple[str, dict[str, str]]:
        """The Hub id the base component's model serves and its container's environment."""
        spec = self.sagemaker.describe_inference_component(InferenceComponentName=base_component)
        model_name = spec["Specification"].get("ModelName")
        model = self.sagemaker.describe_model(ModelName=model_name) if model_name else {}
        container = model.get("PrimaryContainer") or (model.get("Containers") or [{}])[0]
        environment = dict(container.get("Environment") or {})
        hub = environment.get("SM_VLLM_MODEL", "")
        accepted = sorted(local_base_models())
        if hub not in accepted:
            raise ComponentRefused(
                f"base component {base_component}: SM_VLLM_MODEL {hub!r} of model {model_name} is not a base "
                f"model local mode builds without a download; accepted: one of {', '.join(accepted)} (the "
                "bundled adapter recipes' adapter.base_model)"
            )
        return hub, environment

    def _start(self, model: str, environment: dict[str, str], route: Any) -> Any:
        from hfpipe.local.serving.openai_endpoint import OpenAIEndpoint
        from hfpipe.local.serving.sagemaker_layer import ContainerLayer

        base = self._base_folder(model)
        env = {"SM_VLLM_SERVED_MODEL_NAME": model, **environment}
        try:
            endpoint = OpenAIEndpoint(base, environment=env)
        except (LocalContainerError, OSError, ValueError) as err:  # vLLM refuses to start
            message = " ".join(str(err).split())
            raise ComponentRefused(
                f"base component {route.base}: the vLLM stand-in does not start: {message}"
            ) from None
        return ContainerLayer(endpoint, env)

    def _base_folder(self, model: str) -> Path:
        """The base model's folder, built once (as local mode builds the adapter recipe's model channel),
        with a chat template when its tokenizer has none."""
        from hfpipe.fixtures import build_tiny_model

        if model not in self._bases:
            folder = build_tiny_model(local_base_models()[model], self.workdir / "bases" / _slug(model))
            config = folder / "tokenizer_config.json"
            settings = json.loads(config.read_text()) if config.is_file() else {}
            if not settings.get("chat_template"):
                config.write_text(json.dumps({**settings, "chat_template": CHAT_TEMPLATE}, indent=2))
            self._bases[model] = folder
        return self._bases[model]

    def _adapter_folder(self, url: str) -> Path:
        """The adapter's model.tar.gz downloaded from S3 and unpacked, once per URL."""
        from hfpipe.local.serving.endpoint import extract_model

        where = self.workdir / "adapters" / _slug(url)
        archive = where / "model.tar.gz"
        where.mkdir(parents=True, exist_ok=True)
        try:
            self.download(url, archive)
        except Exception as err:  # botocore's ClientError (404: no such key), a bucket that is not there
            raise ComponentRefused(f"Container.ArtifactUrl {url}: cannot be read from S3 ({err})") from None
        try:
            return extract_model(archive, where / "adapter")
        except (tarfile.TarError, OSError) as err:  # not a gzip'd tar, a member leaving the folder
            raise ComponentRefused(
                f"Container.ArtifactUrl {url}: not a model.tar.gz local mode unpacks ({err}); accepted: a gzip "
                "compressed tar archive with the adapter's files at its root"
            ) from None

    def close(self) -> None:
        """Close every stand-in (the world is stopping)."""
        with self._lock:
            served, self.served, self.registered = list(self.served.values()), {}, {}
        for container in served:
            container.close()


def _slug(text: str) -> str:
    """A folder name for a Hub id or URL: readable, and unique by its hash."""
    readable = "".join(c if c.isalnum() else "-" for c in text)[-40:].strip("-")
    return f"{readable}-{hashlib.sha256(text.encode()).hexdigest()[:12]}"
