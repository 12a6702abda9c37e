"""`hfpipe invoke` for serving kinds that speak OpenAI's API (vllm): request shapes, streaming, answers.

- `--dialogue FILE` becomes a chat completion whose user message is the chat: the model's chat template
  (written by training_code/run_clm.py from the recipe's prompt template) renders it as training did.
- `--parameters` are the request's own top-level fields (max_tokens, temperature, top_p, ...).
- `--stream` asks for Server-Sent Events: on AWS through InvokeEndpointWithResponseStream (SageMaker
  relays the container's bytes as PayloadPart events, in pieces that need not end at an event's end;
  https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_runtime_InvokeEndpointWithResponseStream.html),
  locally from `hfpipe local --serve`'s /invocations. Tokens are printed as they arrive, then the time to
  the first token and the tokens per second (`--json`: JSON lines, `print_stream`). A stream that fails
  or is cut short (an error of the call or in the stream, an event that is not JSON, no `data: [DONE]` or no
  finish_reason) is one HfpipeError after what did arrive.
"""

from __future__ import annotations

import contextlib
import json
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from hfpipe.cli import aws
from hfpipe.cli.aws import HfpipeError

#: The answer length a --dialogue request asks for (vLLM's own default is 16 tokens).
DIALOGUE_MAX_TOKENS = 128
SSE_DONE = "[DONE]"


def openai_request(request: Any, streaming: bool) -> Any:
    """A request as the OpenAI API takes it: a --dialogue becomes a chat, --parameters its fields."""
    if not isinstance(request, dict):
        return request
    shaped = dict(request)
    if "dialogue" in shaped and "messages" not in shaped and "prompt" not in shaped:
        dialogue = shaped.pop("dialogue")
        shaped = {
            "messages": [{"role": "user", "content": dialogue}],
            "max_tokens": DIALOGUE_MAX_TOKENS,
            **shaped,
        }
    parameters = shaped.pop("parameters", None)
    if isinstance(parameters, dict):
        shaped.update(parameters)
    if streaming:
        shaped["stream"] = True
        shaped["stream_options"] = {"include_usage": True}
    return shaped


def answer_texts(answer: Any) -> list[str]:
    """The text of each choice of a chat or text completion ([] for another shape)."""
    if not isinstance(answer, dict) or not isinstance(answer.get("choices"), list):
        return []
    texts = []
    for choice in answer["choices"]:
        if isinstance(choice, dict):
            message = choice.get("message")
            text = message.get("content") if isinstance(message, dict) else choice.get("text")
            if isinstance(text, str):
                texts.append(text)
    return texts


def sse_events(pieces: Iterable[bytes], source: str = "the server") -> Iterator[dict[str, Any]]:
    """The JSON events of a Server-Sent Events byte stream cut anywhere, up to `data: [DONE]`.

    Every way a stream can fail is one HfpipeError naming `source`: an error event (vLLM's error body), an
    event whose data is not a JSON object, and a stream that ends before `data: [DONE]` (vLLM's OpenAI server
    ends every stream with it, after an error event too: serving_chat.py / serving_completion.py).
    """
    buffer = b""
    for piece in pieces:
        buffer += piece
        while b"\n\n" in buffer:
            event, buffer = buffer.split(b"\n\n", 1)
            data = b"".join(line[5:].strip() for line in event.split(b"\n") if line.startswith(b"data:"))
            if not data:
                continue
            if data == SSE_DONE.encode():
                return
            try:
                decoded = json.loads(data)
            except ValueError:  # UnicodeDecodeError too
                decoded = None
            if not isinstance(decoded, dict):
                raise HfpipeError(f"{source} sent an event that is not a JSON object: {_preview(data)}")
            message = error_message(decoded)
            if message is not None:
                raise HfpipeError(f"{source} ended the stream with an error: {message}")
            yield decoded
    raise HfpipeError(
        f"{source} ended the stream before data: {SSE_DONE}"
        + (f" (in the middle of an event: {_preview(buffer)})" if buffer.strip() else "")
        + "; the answer above is incomplete"
    )


def _preview(data: bytes, limit: int = 80) -> str:
    """A few bytes of a bad event, on one line."""
    text = repr(data[:limit])
    return text + ("..." if len(data) > limit else "")


def http_error_detail(err: urllib.error.HTTPError) -> str:
    """The message of a server's error answer: vLLM's {"error": {"message"}}, the inference toolkit's
    {"message"}, else the body as text."""
    detail = err.read().decode(errors="replace")
    with contextlib.suppress(ValueError, AttributeError):
        body = json.loads(detail)
        return error_message(body) or str(body.get("message", detail))
    return detail


def error_message(body: Any) -> str | None:
    """The message of vLLM's error body: {"error": {"message", ...}} (vLLM 0.10 and later, OpenAI's shape)
    or the flat {"object": "error", "message", ...} of earlier releases; None for anything else."""
    if not isinstance(body, dict):
        return None
    if isinstance(body.get("error"), dict):
        return str(body["error"].get("message"))
    if body.get("object") == "error":
        return str(body.get("message"))
    return None


def delta_text(event: dict[str, Any]) -> str:
    """The text one chunk adds (chat: choices[0].delta.content; completion: choices[0].text)."""
    choices = event.get("choices") or []
    if not choices or not isinstance(choices[0], dict):
        return ""
    delta = choices[0].get("delta")
    text = delta.get("content") if isinstance(delta, dict) else choices[0].get("text")
    return text if isinstance(text, str) else ""


@dataclass
class StreamStats:
    """Time to the first token, tokens (the usage the server reports, else the chunks) and their rate, and
    what the stream said: its text, each choice's finish_reason, the usage."""

    started: float
    first_token_s: float | None = None
    chunks: int = 0
    completion_tokens: int | None = None
    ended: float | None = None
    text: str = ""
    finish_reasons: dict[int, str] = field(default_factory=dict)
    choices: set[int] = field(default_factory=set)
    usage: dict[str, Any] | None = None

    @property
    def tokens(self) -> int:
        return self.completion_tokens if self.completion_tokens is not None else self.chunks

    def summary(self) -> str:
        total = (self.ended or time.perf_counter()) - self.started
        if self.first_token_s is None:
            return f"no tokens in {total:.2f} s"
        decoding = total - self.first_token_s
        rate = (
            f"{(self.tokens - 1) / decoding:.1f} tokens/s"
            if self.tokens > 1 and decoding > 0
            else "one token"
        )
        return f"time to first token {self.first_token_s * 1000:.0f} ms; {self.tokens} tokens in {total:.2f} s ({rate})"

    def record(self) -> dict[str, Any]:
        """The last JSON line of `invoke --stream --json`: what the stream said, and its timings."""
        first = self.first_token_s
        return {
            "text": self.text,
            "finish_reasons": [self.finish_reasons[i] for i in sorted(self.finish_reasons)],
            "usage": self.usage,
            "time_to_first_token_ms": None if first is None else round(first * 1000.0, 1),
            "latency_ms": round(((self.ended or time.perf_counter()) - self.started) * 1000.0, 1),
        }

    def read(self, event: dict[str, Any]) -> str:
        """Take one chunk in; returns the text it adds."""
        for choice in event.get("choices") or []:
            if isinstance(choice, dict):
                index = choice.get("index", 0)
                self.choices.add(index)
                if choice.get("finish_reason") is not None:
                    self.finish_reasons[index] = str(choice["finish_reason"])
        usage = event.get("usage")
        if isinstance(usage, dict):
            self.usage = usage
            if isinstance(usage.get("completion_tokens"), int):
                self.completion_tokens = usage["completion_tokens"]
        text = delta_text(event)
        if text:
            if self.first_token_s is None:
                self.first_token_s = time.perf_counter() - self.started
            self.chunks += 1
            self.text += text
        return text


def stream_answer(
    pieces: Iterable[bytes],
    write: Callable[[str], None],
    source: str = "the server",
    on_event: Callable[[dict[str, Any]], None] | None = None,
) -> StreamStats:
    """Print each chunk's text as it arrives (and hand each chunk to `on_event`); return the timings. A
    stream that reached [DONE] without a finish_reason for every choice it started is cut, as one without
    [DONE] is: an HfpipeError, after the text that did arrive."""
    stats = StreamStats(started=time.perf_counter())
    for event in sse_events(pieces, source):
        if on_event is not None:
            on_event(event)
        text = stats.read(event)
        if text:
            write(text)
    stats.ended = time.perf_counter()
    unfinished = sorted(stats.choices - set(stats.finish_reasons)) or ([] if stats.finish_reasons else [0])
    if unfinished:
        raise HfpipeError(
            f"{source} ended the stream without a finish_reason for choice {unfinished[0]}; the answer above "
            "is incomplete"
        )
    return stats


def print_stream(
    pieces: Iterable[bytes], name: str, index: int, as_json: bool, console: Any, source: str | None = None
) -> None:
    """One streamed answer: its text as it arrives, then its timings; with `as_json`, JSON lines instead:
    `{"request", "endpoint", "chunk"}` per event as the server sent it, then `{"request", "endpoint", "text",
    "finish_reasons", "usage", "time_to_first_token_ms", "latency_ms"}`. A failure is one HfpipeError after
    what did arrive (docs/cli.md). `source`: how errors name the server (default `name`)."""
    source = source or name
    if as_json:

        def line(record: dict[str, Any]) -> None:
            sys.stdout.write(json.dumps({"request": index, "endpoint": name, **record}) + "\n")
            sys.stdout.flush()

        stats = stream_answer(pieces, lambda text: None, source, on_event=lambda e: line({"chunk": e}))
        line(stats.record())
        return
    written: list[str] = []

    def write(text: str) -> None:
        written.append(text)
        console.out(text, end="", highlight=False)

    try:
        stats = stream_answer(pieces, write, source)
    except HfpipeError:
        if written:
            console.out("")  # the error's line starts on its own; the text that arrived stays
        raise
    console.print(f"\n{stats.summary()}")


def local_stream(url: str, body: bytes, name: str) -> Iterator[bytes]:
    """The local server's /invocations answer to a streaming request, as it arrives."""
    import http.client

    try:
        with urllib.request.urlopen(local_request(url, body, "text/event-stream"), timeout=600) as response:
            while piece := response.read1(65536):
                yield piece
    except urllib.error.HTTPError as err:
        raise HfpipeError(f"{name} answered {err.code}: {http_error_detail(err)}") from None
    except (urllib.error.URLError, OSError, http.client.HTTPException) as err:
        # IncompleteRead: the connection closed in the middle of a chunk (chunked transfer coding).
        detail = (
            repr(err)
            if isinstance(err, http.client.HTTPException)
            else f"{type(err).__name__}: {getattr(err, 'reason', err)}"
        )
        raise HfpipeError(f"{name}: the stream was cut ({detail}); the answer above is incomplete") from None


def endpoint_error(exc: Exception, endpoint: str) -> HfpipeError:
    """One line for an InvokeEndpoint / InvokeEndpointWithResponseStream error raised at call time: ModelError
    (the container answered 4xx/5xx before any byte was streamed) with the container's message, anything
    else (ThrottlingException after botocore's retries, ValidationError, ServiceUnavailable, ...) as AWS
    names it (botocore's sagemaker-runtime model lists the operation's errors)."""
    import botocore.exceptions

    if isinstance(exc, botocore.exceptions.ClientError):
        error = exc.response.get("Error", {})
        if error.get("Code") == "ModelError":
            # The container's message (see the log stream it names for the traceback).
            message = " ".join(str(error.get("Message", "")).split())
            return HfpipeError(f"endpoint {endpoint} refused the request: {message}")
    return aws.aws_error(exc, f"invoking endpoint {endpoint}")


def local_request(url: str, body: bytes, accept: str) -> urllib.request.Request:
    """POST /invocations of the local server at ``url``: ``body`` as application/json, answered as ``accept``."""
    return urllib.request.Request(
        f"{url}/invocations",
        data=body,
        headers={"Content-Type": "application/json", "Accept": accept},
        method="POST",
    )


def call_endpoint(
    operation: Any,
    endpoint: str,
    body: bytes,
    accept: str,
    component: str | None,
    through: Callable[[Callable[[], Any]], Any] = lambda call: call(),
) -> Any:
    """``operation`` (InvokeEndpoint or InvokeEndpointWithResponseStream) of ``body`` as application/json on
    ``endpoint``, or its ``component``, made ``through`` a wrapper (a cold start's waits); an error of the
    call is one line (``endpoint_error``)."""
    import botocore.exceptions

    try:
        return through(
            lambda: operation(
                EndpointName=endpoint,
                Body=body,
                ContentType="application/json",
                Accept=accept,
                **({"InferenceComponentName": component} if component else {}),
            )
        )
    except (botocore.exceptions.ClientError, botocore.exceptions.BotoCoreError) as exc:
        raise endpoint_error(exc, endpoint) from None


def endpoint_stream(
    runtime: Any, endpoint: str, body: bytes, component: str | None = None
) -> Iterator[bytes]:
    """InvokeEndpointWithResponseStream's PayloadPart bytes. Its error events (ModelStreamError, e.g.
    ModelInvocationTimeExceeded or StreamBroken; InternalStreamFailure: ResponseStream in the SageMaker API
    reference, API_runtime_ResponseStream.html) end the stream with an error: botocore raises them as
    EventStreamError while the stream is read (botocore/eventstream.py, `_parse_event`). Errors of the call
    itself (ModelError, throttling) and a connection lost while reading are one-line errors too."""
    import botocore.exceptions

    response = call_endpoint(
        runtime.invoke_endpoint_with_response_stream, endpoint, body, "text/event-stream", component
    )
    try:
        for event in response["Body"]:
            if "PayloadPart" in event:
                yield event["PayloadPart"]["Bytes"]
            for error in ("ModelStreamError", "InternalStreamFailure"):
                if error in event:  # as an event, where a client delivers it so
                    raise HfpipeError(f"endpoint {endpoint}: {error}: {event[error].get('Message', '')}")
    except botocore.exceptions.EventStreamError as exc:
        error = exc.response.get("Error", {})
        raise HfpipeError(
            f"endpoint {endpoint}: {error.get('Code', 'stream error')}: {error.get('Message', '')}"
        ) from None
    except botocore.exceptions.BotoCoreError as exc:  # ReadTimeoutError, ResponseStreamingError, ...
        raise HfpipeError(
            f"endpoint {endpoint}: the stream was cut ({type(exc).__name__}: {exc}); the answer above is "
            "incomplete"
        ) from None


def with_served_limits(target: Any) -> Any:
    """`target` (the local server) with the max_model_len its /v1/models answer names, as vLLM lists it."""
    import dataclasses

    try:
        with urllib.request.urlopen(f"{target.url}/v1/models", timeout=10) as response:
            models = json.loads(response.read()).get("data") or []
    except (urllib.error.URLError, OSError, ValueError):
        return target
    lengths = [m.get("max_model_len") for m in models if isinstance(m, dict)]
    known = [n for n in lengths if isinstance(n, int) and n > 0]
    return dataclasses.replace(target, max_model_len=min(known)) if known else target
