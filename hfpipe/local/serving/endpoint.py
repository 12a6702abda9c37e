"""Serve a model.tar.gz on this machine under the SageMaker inference-container contract.

`LocalEndpoint` extracts a `model.tar.gz` and answers requests through its `code/inference.py`
(`model_fn`, `input_fn`, `predict_fn`, `output_fn`), with the Hugging Face inference toolkit's own defaults
(JSON and CSV) for the handlers a module leaves out.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import json
import os
import sys
import tarfile
import tempfile
import time
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from types import ModuleType
from typing import Any
from unittest import mock

from hfpipe import kinds
from hfpipe.local.training.container import LocalContainerError


def extract_model(model_data: str | os.PathLike[str], dest: str | os.PathLike[str]) -> Path:
    """Extract a model.tar.gz to `dest` and return `dest`. Every member is checked before anything is
    written, with tarfile's "data" filter (PEP 706: no absolute or `..` names, no links leading out of
    `dest`, no device files), so an archive with one bad member writes nothing; tarfile.FilterError names it.
    """
    out = Path(dest)
    out.mkdir(parents=True, exist_ok=True)
    with tarfile.open(model_data, "r:gz") as tar:
        members = tar.getmembers()
        for member in members:
            tarfile.data_filter(member, str(out.resolve()))
        tar.extractall(out, members=members, filter="data")
    return out


def _call(fn: Callable[..., Any], *args: Any, context: Any = None) -> Any:
    # The HF inference toolkit passes a context as an extra last argument only to handlers that accept it.
    try:
        n_params = len(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        n_params = len(args)
    return fn(*args, context) if n_params > len(args) else fn(*args)


def load_handler_module(script: Path, module_name: str) -> ModuleType:
    """`script` loaded as module `module_name`. The inference toolkit runs the handler with code/ on its
    path, so a module next to inference.py (request_checks) imports; the same here, while the handler
    loads, then the path is as it was."""
    spec = importlib.util.spec_from_file_location(module_name, script)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    with mock.patch.object(sys, "path", [str(script.parent), *sys.path]):
        spec.loader.exec_module(module)
    return module


def local_endpoint_class(serving_kind: str) -> type[LocalEndpoint]:
    """The class that emulates a serving kind's server here ("module:Class" in hfpipe/kinds/serving.py)."""
    module_name, _, class_name = kinds.serving_kind(serving_kind).local_endpoint.partition(":")
    cls = getattr(importlib.import_module(module_name), class_name)
    assert isinstance(cls, type) and issubclass(cls, LocalEndpoint), cls
    return cls


class LocalEndpoint:
    """Serve a model.tar.gz (or an extracted model dir) through its `code/inference.py`.

    The handler functions are used as the Hugging Face inference toolkit uses them: `model_fn(model_dir)`
    once, then `input_fn(body, content_type)` -> `predict_fn(data, model)` -> `output_fn(prediction, accept)`
    per request; `transform_fn` replaces the last three when a module defines it. Missing `input_fn` /
    `output_fn` default to JSON. This does not install `code/requirements.txt`.
    """

    def __init__(
        self,
        model_data: str | os.PathLike[str],
        workdir: str | os.PathLike[str] | None = None,
        *,
        environment: Mapping[str, str] | None = None,
    ):
        # `environment` is the model container's (CreateModel's Environment); the project's handlers read
        # none of it (the toolkit's HF_TASK and the like matter only to models without code/inference.py).
        del environment
        src = Path(model_data)
        self._open_model(src, workdir)
        script = self.model_dir / "code" / "inference.py"
        if not script.is_file():
            raise LocalContainerError(
                f"{src}: no code/inference.py inside; the training script must copy it there"
            )
        self.handler = load_handler_module(script, f"hfpipe_endpoint_{uuid.uuid4().hex}")
        if not hasattr(self.handler, "model_fn"):
            raise LocalContainerError(f"{script} defines no model_fn(model_dir)")
        started = time.monotonic()
        self.model = _call(self.handler.model_fn, str(self.model_dir))
        self.load_seconds = time.monotonic() - started

    def _open_model(self, src: Path, workdir: str | os.PathLike[str] | None) -> None:
        """`model_dir`: `src` itself when a folder, else model.tar.gz extracted under `workdir` (or a
        temporary folder that `close` removes)."""
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        if src.is_dir():
            self.model_dir = src
            return
        if workdir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="hfpipe-endpoint-")
            workdir = self._tmp.name
        self.model_dir = extract_model(src, Path(workdir) / "model")

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
                _call(h.output_fn, prediction, accept)
                if hasattr(h, "output_fn")
                else _default_output(prediction, accept)
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


# What the Hugging Face inference toolkit decodes and encodes when a handler has no input_fn / output_fn
# (sagemaker-huggingface-inference-toolkit, decoder_encoder.py: `_decoder_map`, `_encoder_map`). Its NPY,
# image and audio decoders serve vision and speech models; the text handlers here take JSON or CSV.
JSON = "application/json"
CSV = "text/csv"
CSV_HEADERS = ("question", "context", "inputs")


def media_type(header: str | None) -> str | None:
    """The bare media type of a Content-Type / Accept header: 'application/json; charset=utf-8' -> 'application/json'."""
    if not header:
        return None
    return header.split(";")[0].strip().lower() or None


def _default_input(body: bytes | str, content_type: str) -> Any:
    text = body.decode() if isinstance(body, bytes) else body
    kind = media_type(content_type)
    if kind == JSON:
        return json.loads(text)
    if kind == CSV:
        # As the toolkit's decode_csv: a header row naming question/context/inputs is required.
        lines = text.splitlines()
        if not lines or not any(h in lines[0].lower() for h in CSV_HEADERS):
            raise LocalContainerError(
                f"text/csv needs a header row with one of the columns {list(CSV_HEADERS)}, as the Hugging Face "
                "inference toolkit's default handler reads it"
            )
        import csv
        import io

        rows = list(csv.DictReader(io.StringIO(text)))
        if rows and "inputs" in rows[0]:
            return {"inputs": [row["inputs"] for row in rows]}
        return {"inputs": rows}
    raise LocalContainerError(
        f"content_type {content_type!r} is not supported by the handler's default input_fn (the Hugging Face "
        "inference toolkit's decoder); use application/json or text/csv"
    )


def _default_output(prediction: Any, accept: str) -> str:
    kind = media_type(accept)
    if kind in (None, "*/*", JSON):
        # The toolkit's encode_json: no ASCII escaping, no spaces.
        return json.dumps(prediction, ensure_ascii=False, separators=(",", ":"))
    if kind == CSV:
        import csv
        import io

        rows = prediction if isinstance(prediction, list) else [prediction]
        if not rows or not all(isinstance(r, dict) for r in rows):
            raise LocalContainerError(
                f"accept {accept!r}: the prediction {prediction!r} is not rows of objects"
            )
        stream = io.StringIO()
        writer = csv.DictWriter(stream, list(rows[0].keys()))
        writer.writeheader()
        writer.writerows(rows)
        return stream.getvalue()
    raise LocalContainerError(
        f"accept {accept!r} is not supported by the handler's default output_fn (the Hugging Face inference "
        "toolkit's encoder); use application/json or text/csv"
    )
