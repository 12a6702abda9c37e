"""Serve a model.tar.gz on this machine under the SageMaker inference-container contract.

`LocalEndpoint` extracts a `model.tar.gz` and answers requests through its `code/inference.py`
(`model_fn`, `input_fn`, `predict_fn`, `output_fn`), with JSON defaults for the handlers a module leaves out,
as the Hugging Face inference toolkit does.
"""

from __future__ import annotations

import importlib.util
import inspect
import json
import os
import sys
import tarfile
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hfpipe.local.container import LocalContainerError


def extract_model(model_data: str | os.PathLike[str], dest: str | os.PathLike[str]) -> Path:
    """Extract a model.tar.gz to `dest` (refusing members that escape it) and return `dest`."""
    out = Path(dest)
    out.mkdir(parents=True, exist_ok=True)
    with tarfile.open(model_data, "r:gz") as tar:
        tar.extractall(out, filter="data")
    return out


def _call(fn: Callable[..., Any], *args: Any, context: Any = None) -> Any:
    # The HF inference toolkit passes a context as an extra last argument only to handlers that accept it.
    try:
        n_params = len(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        n_params = len(args)
    return fn(*args, context) if n_params > len(args) else fn(*args)


class LocalEndpoint:
    """Serve a model.tar.gz (or an extracted model dir) through its `code/inference.py`.

    The handler functions are used as the Hugging Face inference toolkit uses them: `model_fn(model_dir)`
    once, then `input_fn(body, content_type)` -> `predict_fn(data, model)` -> `output_fn(prediction, accept)`
    per request; `transform_fn` replaces the last three when a module defines it. Missing `input_fn` /
    `output_fn` default to JSON. This does not install `code/requirements.txt`.
    """

    def __init__(self, model_data: str | os.PathLike[str], workdir: str | os.PathLike[str] | None = None):
        src = Path(model_data)
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        if src.is_dir():
            self.model_dir = src
        else:
            if workdir is None:
                self._tmp = tempfile.TemporaryDirectory(prefix="hfpipe-endpoint-")
                workdir = self._tmp.name
            self.model_dir = extract_model(src, Path(workdir) / "model")
        script = self.model_dir / "code" / "inference.py"
        if not script.is_file():
            raise LocalContainerError(
                f"{src}: no code/inference.py inside; the training script must copy it there"
            )
        code_dir = str(script.parent)
        if code_dir not in sys.path:
            sys.path.insert(0, code_dir)
        spec = importlib.util.spec_from_file_location(f"hfpipe_endpoint_{uuid.uuid4().hex}", script)
        assert spec is not None and spec.loader is not None
        self.handler = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(self.handler)
        if not hasattr(self.handler, "model_fn"):
            raise LocalContainerError(f"{script} defines no model_fn(model_dir)")
        started = time.monotonic()
        self.model = _call(self.handler.model_fn, str(self.model_dir))
        self.load_seconds = time.monotonic() - started

    def invoke(
        self, body: bytes | str, content_type: str = "application/json", accept: str = "application/json"
    ) -> bytes:
        """Answer one InvokeEndpoint request body; returns the response body."""
        h = self.handler
        if hasattr(h, "transform_fn"):
            out = _call(h.transform_fn, self.model, body, content_type, accept)
        else:
            data = (
                _call(h.input_fn, body, content_type)
                if hasattr(h, "input_fn")
                else _default_input(body, content_type)
            )
            if not hasattr(h, "predict_fn"):
                raise LocalContainerError("code/inference.py defines no predict_fn(data, model)")
            prediction = _call(h.predict_fn, data, self.model)
            out = (
                _call(h.output_fn, prediction, accept) if hasattr(h, "output_fn") else json.dumps(prediction)
            )
        return out.encode() if isinstance(out, str) else bytes(out)

    def predict(self, payload: Any) -> Any:
        """JSON in, JSON out: the shape the smoke test and the SDK's JSON serializer use."""
        return json.loads(self.invoke(json.dumps(payload)))

    def close(self) -> None:
        """Remove the extracted model if this endpoint extracted it to a temporary folder."""
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def __enter__(self) -> LocalEndpoint:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _default_input(body: bytes | str, content_type: str) -> Any:
    text = body.decode() if isinstance(body, bytes) else body
    if content_type.split(";")[0].strip() == "application/json":
        return json.loads(text)
    if content_type.startswith("text/"):
        return {"inputs": text}
    raise LocalContainerError(
        f"content_type {content_type!r} is not supported; use application/json or text/plain"
    )
