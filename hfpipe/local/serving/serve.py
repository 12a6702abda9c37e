"""A trained model served on this machine over HTTP, under SageMaker's inference-container contract.

SageMaker talks to a model container over HTTP: `GET /ping` must answer 200 once the model is loaded, and
`POST /invocations` carries InvokeEndpoint's body with its Content-Type and Accept headers, on port 8080
(Amazon SageMaker Developer Guide, "Custom Inference Code with Hosting Services": how your container should
respond to inference and to health check (ping) requests,
https://docs.aws.amazon.com/sagemaker/latest/dg/your-algorithms-inference-code.html). The
Hugging Face inference toolkit answers every request through the model's `code/inference.py`
(`hfpipe.local.serving.endpoint.LocalEndpoint` here) and turns any exception of the handler into a 400 whose message
is the exception's text (handler_service.py: `raise PredictionException(str(e), 400)`); a missing Accept or
`*/*` means JSON. `hfpipe local --serve` runs this on 127.0.0.1 until Ctrl-C; `hfpipe invoke --local`
talks to it.

Standard library only (http.server's ThreadingHTTPServer): pings answer while a request is generating;
the handler itself is called one request at a time, as a single model worker would. As HTTP/1.1 asks of a
server (RFC 9112, section 6), a body comes with a Content-Length or chunked; a Content-Length that is not a
non-negative integer is a 400 and the connection closes (its framing is lost), a body over InvokeEndpoint's
6 MB limit a 413, and the listen backlog takes a burst of clients (socketserver's default of 5 reset the
sixth concurrent connection).

An `OpenAIEndpoint` (the `vllm` kind's stand-in, hfpipe.local.serving.openai_endpoint) is served as the AWS vLLM
container serves: `/ping` and `/invocations`, and as vLLM's OpenAI server also `/v1/chat/completions`,
`/v1/completions`, `GET /v1/models` and `GET /health`; its errors have OpenAI's shape
(`{"error": {"message", "type", "param", "code"}}`). A `"stream": true` body is answered with
`text/event-stream` in chunked transfer coding (RFC 9112, section 7.1), each event written and flushed as
the model generates it; the connection stays usable after the last chunk.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections.abc import Iterator
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from hfpipe.kinds import openai_contract
from hfpipe.local.serving import openai_protocol
from hfpipe.local.serving.endpoint import JSON, LocalEndpoint, media_type
from hfpipe.local.serving.openai_endpoint import OpenAIEndpoint

HOST = "127.0.0.1"
DEFAULT_PORT = 8080  # the port SageMaker's model containers listen on
#: InvokeEndpoint's Body: at most 6,291,456 bytes (botocore's service model, sagemaker-runtime, "BodyBlob").
MAX_BODY_BYTES = 6_291_456
# Extra headers on the /ping answer, so a client can check its requests with the same handler first.
ENTRY_POINT_HEADER = "X-Hfpipe-Entry-Point"
RECIPE_HEADER = "X-Hfpipe-Recipe"
TASK_HEADER = "X-Hfpipe-Task"  # the task kind: its handler checks the requests (hfpipe.kinds)
SERVING_KIND_HEADER = "X-Hfpipe-Serving-Kind"
OPENAI_POST_ROUTES = ("/invocations", "/v1/chat/completions", "/v1/completions")


class PortInUseError(OSError):
    """The port is taken; the message says which and what to do."""


class ModelServer(ThreadingHTTPServer):
    """The HTTP server; bound at construction, so a taken port fails before anything long starts."""

    daemon_threads = True
    request_queue_size = 128  # the listen backlog: concurrent clients wait instead of being reset

    def __init__(self, port: int = DEFAULT_PORT, host: str = HOST) -> None:
        # Before binding: a failed bind calls server_close.
        self._connections: dict[Any, threading.Thread | None] = {}  # open ones, with the thread serving each
        self._connections_lock = threading.Lock()
        try:
            super().__init__((host, port), _Handler)
        except OSError as exc:
            raise PortInUseError(
                f"cannot listen on {host}:{port} ({exc.strerror or exc}): pass another --port (0 picks a free one)"
            ) from None
        self.endpoint: LocalEndpoint | None = None
        self.ping_headers: dict[str, str] = {}
        self.lock = threading.Lock()

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._connections_lock:
            self._connections[request] = None
        super().process_request(request, client_address)

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        with self._connections_lock:
            self._connections[request] = threading.current_thread()
        super().process_request_thread(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self._connections_lock:
            self._connections.pop(request, None)
        super().shutdown_request(request)

    def server_close(self, wait_s: float = 10.0) -> None:
        """Stop listening, then end every connection still open: a keep-alive client (an SDK's connection
        pool) would otherwise hold its handler thread, waiting for a next request, for as long as that client
        lives (the request threads are daemons, which ThreadingMixIn's own server_close does not wait for). A
        request being answered ends first; ``wait_s`` in all is waited for the threads."""
        super().server_close()
        with self._connections_lock:
            open_now = dict(self._connections)
        for connection in open_now:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)
        deadline = time.monotonic() + wait_s
        for thread in open_now.values():
            if thread is not None and thread is not threading.current_thread():
                thread.join(max(0.0, deadline - time.monotonic()))

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}"

    def serve(
        self,
        endpoint: LocalEndpoint,
        entry_point: str | None = None,
        recipe: str | None = None,
        task: str | None = None,
        serving_kind: str | None = None,
    ) -> None:
        """Answer requests through `endpoint` until `shutdown()` (or Ctrl-C in the calling thread)."""
        self.endpoint = endpoint
        headers = (
            (ENTRY_POINT_HEADER, entry_point),
            (RECIPE_HEADER, recipe),
            (TASK_HEADER, task),
            (SERVING_KIND_HEADER, serving_kind),
        )
        self.ping_headers = {k: v for k, v in headers if v is not None}
        self.serve_forever(poll_interval=0.2)


class _Handler(BaseHTTPRequestHandler):
    server: ModelServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass  # one line per request on stderr would bury the command's own output

    def _send(self, status: int, body: bytes = b"", content_type: str = JSON, **headers: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for key, value in headers.items():
            self.send_header(key, value)
        self.end_headers()
        if body and self.command != "HEAD":
            self.wfile.write(body)

    def _error(self, status: HTTPStatus, message: str) -> None:
        body = json.dumps({"code": int(status), "type": status.phrase, "message": message}).encode()
        self._send(int(status), body)

    def _openai_error(self, exc: openai_protocol.OpenAIError) -> None:
        self._send(exc.status, json.dumps(exc.body()).encode())

    def _stream(self, events: Iterator[bytes]) -> None:
        """200 and the events in chunked transfer coding, each flushed as it comes. An error after the
        status line is sent as vLLM sends it, one `data: {"error": ...}` event with the status vLLM gives
        that error (openai_contract.error_for), then [DONE]."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            try:
                for event in events:
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(event), event))
                    self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                raise
            except Exception as exc:  # vLLM's stream generators: the error's body as an event, then [DONE]
                error = openai_contract.error_for(exc)
                for event in (openai_protocol.sse(error.body()), openai_protocol.DONE):
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(event), event))
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the client left; generation stops with the generator
        finally:
            close = getattr(events, "close", None)
            if close is not None:
                close()  # releases the endpoint's generation lock at once

    def _openai_get(self, endpoint: OpenAIEndpoint, path: str) -> bool:
        if path == "/health":
            self._send(200, b"", "text/plain")
        elif path == "/v1/models":
            self._send(200, json.dumps(endpoint.models()).encode())
        else:
            return False
        return True

    def _openai_post(self, endpoint: OpenAIEndpoint, path: str, body: bytes) -> None:
        # Every refusal, and any error before generation starts, is an HTTP answer with vLLM's status and
        # body (a missing Content-Type too: vLLM's validate_json_request refuses it).
        try:
            answer = endpoint.answer(path, body, self.headers.get("Content-Type"))
        except Exception as exc:
            self._openai_error(openai_contract.error_for(exc))
            return
        if answer.stream is not None:
            self._stream(answer.stream)
        else:
            self._send(200, answer.body, answer.content_type)

    def do_GET(self) -> None:
        path = self.path.split("?")[0]
        endpoint = self.server.endpoint
        if isinstance(endpoint, OpenAIEndpoint) and self._openai_get(endpoint, path):
            return
        if path != "/ping":
            self._error(
                HTTPStatus.NOT_FOUND, f"{self.path}: the container serves GET /ping and POST /invocations"
            )
            return
        if self.server.endpoint is None:
            self._error(HTTPStatus.SERVICE_UNAVAILABLE, "the model is still loading")
            return
        self._send(200, b"", "text/plain", **self.server.ping_headers)

    def _body(self) -> bytes | None:
        """The request body (Content-Length or chunked); None after answering a malformed one."""
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            return self._chunked()
        raw = self.headers.get("Content-Length")
        if raw is None:
            return b""
        if not raw.strip().isdigit():
            self.close_connection = True  # the body's end is unknown: nothing more can be read safely
            self._error(
                HTTPStatus.BAD_REQUEST, f"Content-Length {raw!r}: accepted: a non-negative integer of bytes"
            )
            return None
        length = int(raw)
        if length > MAX_BODY_BYTES:
            self.close_connection = True
            self._error(
                HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
                f"body of {length} bytes; accepted: at most {MAX_BODY_BYTES} (InvokeEndpoint's limit)",
            )
            return None
        return self.rfile.read(length)

    def _chunked(self) -> bytes | None:
        body = bytearray()
        while True:
            line = self.rfile.readline(1024).split(b";")[0].strip()
            try:
                size = int(line, 16)
            except ValueError:
                size = -1
            if size < 0:
                self.close_connection = True
                self._error(
                    HTTPStatus.BAD_REQUEST, f"chunk size {line[:40]!r}: accepted: a hexadecimal number"
                )
                return None
            if len(body) + size > MAX_BODY_BYTES:
                self.close_connection = True
                self._error(
                    HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
                    f"chunked body over {MAX_BODY_BYTES} bytes (InvokeEndpoint's limit)",
                )
                return None
            if size == 0:
                while self.rfile.readline(1024).strip():  # trailer fields, up to the empty line
                    pass
                return bytes(body)
            body += self.rfile.read(size)
            self.rfile.readline(1024)  # the CRLF after each chunk

    def do_POST(self) -> None:
        body = self._body()
        if body is None:
            return
        path = self.path.split("?")[0]
        if isinstance(self.server.endpoint, OpenAIEndpoint) and path in OPENAI_POST_ROUTES:
            self._openai_post(self.server.endpoint, path, body)
            return
        if path != "/invocations":
            self._error(
                HTTPStatus.NOT_FOUND, f"{self.path}: the container serves GET /ping and POST /invocations"
            )
            return
        endpoint = self.server.endpoint
        if endpoint is None:
            self._error(HTTPStatus.SERVICE_UNAVAILABLE, "the model is still loading")
            return
        content_type = self.headers.get("Content-Type") or JSON
        accept = self.headers.get("Accept") or JSON
        if media_type(accept) == "*/*":
            accept = JSON
        try:
            with self.server.lock:
                answer = endpoint.invoke(body, content_type=content_type, accept=accept)
        except Exception as exc:  # the toolkit answers 400 with the handler's message, whatever it raised
            self._error(HTTPStatus.BAD_REQUEST, str(exc))
            return
        self._send(200, answer, str(media_type(accept)))

    def do_PUT(self) -> None:
        self._error(HTTPStatus.METHOD_NOT_ALLOWED, "the container serves GET /ping and POST /invocations")

    do_DELETE = do_PUT
