"""`hfpipe invoke` for serving kinds that speak OpenAI's API (vllm): request shapes, streaming, answers.

- `--dialogue FILE` becomes a chat completion whose user message is the chat: the model's chat template
  (written by training_code/run_clm.py from the recipe's prompt template) renders it as training did.
- `--parameters` are the request's own top-level fields (max_tokens, temperature, top_p, ...).
- `--stream` asks for Server-Sent Events: on AWS through InvokeEndpointWithResponseStream (SageMaker
  relays the container's bytes as PayloadPart events, in pieces that need not end at an event's end;
  https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_runtime_InvokeEndpointWithResponseStream.html),
  locally from `hfpipe local --serve`'s /invocations. Tokens are printed as they arrive, then the time to
  the first token and the tokens per second.
"""

from __future__ import annotations

import contextlib
import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

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


def sse_events(pieces: Iterable[bytes]) -> Iterator[dict[str, Any]]:
    """The JSON events of a Server-Sent Events byte stream cut anywhere, up to `data: [DONE]`."""
    buffer = b""
    for piece in pieces:
        buffer += piece
        while b"\n\n" in buffer:
            event, buffer = buffer.split(b"\n\n", 1)
            data = b"".join(line[5:].strip() for line in event.split(b"\n") if line.startswith(b"data:"))
            if not data:
                continue
            if data.decode() == SSE_DONE:
                return
            decoded = json.loads(data)
            message = error_message(decoded)
            if message is not None:
                raise HfpipeError(f"the server ended the stream with an error: {message}")
            yield decoded


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
    """Time to the first token, tokens (the usage the server reports, else the chunks) and their rate."""

    started: float
    first_token_s: float | None = None
    chunks: int = 0
    completion_tokens: int | None = None
    ended: float | None = None

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


def stream_answer(pieces: Iterable[bytes], write: Callable[[str], None]) -> StreamStats:
    """Print each chunk's text as it arrives; return the timings."""
    stats = StreamStats(started=time.perf_counter())
    for event in sse_events(pieces):
        text = delta_text(event)
        if text:
            if stats.first_token_s is None:
                stats.first_token_s = time.perf_counter() - stats.started
            stats.chunks += 1
            write(text)
        usage = event.get("usage")
        if isinstance(usage, dict) and isinstance(usage.get("completion_tokens"), int):
            stats.completion_tokens = usage["completion_tokens"]
    stats.ended = time.perf_counter()
    return stats


def local_stream(url: str, body: bytes, name: str) -> Iterator[bytes]:
    """The local server's /invocations answer to a streaming request, as it arrives."""
    request = urllib.request.Request(
        f"{url}/invocations",
        data=body,
        headers={"Content-Type": "application/json", "Accept": "text/event-stream"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=600) as response:
            while piece := response.read1(65536):
                yield piece
    except urllib.error.HTTPError as err:
        raise HfpipeError(f"{name} answered {err.code}: {http_error_detail(err)}") from None
    except (urllib.error.URLError, OSError) as err:
        raise HfpipeError(f"{name} did not answer: {getattr(err, 'reason', err)}") from None


def endpoint_stream(runtime: Any, endpoint: str, body: bytes) -> Iterator[bytes]:
    """InvokeEndpointWithResponseStream's PayloadPart bytes. Its error events (ModelStreamError, e.g.
    ModelInvocationTimeExceeded or StreamBroken; InternalStreamFailure: ResponseStream in the SageMaker API
    reference, API_runtime_ResponseStream.html) end the stream with an error: botocore raises them as
    EventStreamError while the stream is read (botocore/eventstream.py, `_parse_event`)."""
    import botocore.exceptions

    response = runtime.invoke_endpoint_with_response_stream(
        EndpointName=endpoint, Body=body, ContentType="application/json", Accept="text/event-stream"
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
