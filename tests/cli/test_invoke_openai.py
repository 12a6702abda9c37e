"""`hfpipe invoke` for the vllm serving kind: the OpenAI request shapes, Server-Sent Events cut anywhere,
InvokeEndpointWithResponseStream's events, and the streaming statistics."""

from __future__ import annotations

import json
from typing import Any

import botocore.session
import pytest
from botocore.validate import ParamValidator

from hfpipe.cli import invoke_openai
from hfpipe.cli.aws import HfpipeError


def chunk(text: str, **extra: Any) -> bytes:
    event = {
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": {"content": text}}],
        **extra,
    }
    return f"data: {json.dumps(event)}\n\n".encode()


STREAM = (
    chunk("Amanda ")
    + chunk("bakes ")
    + chunk("cookies.")
    + b'data: {"object": "chat.completion.chunk", "choices": [], "usage": {"completion_tokens": 3}}\n\n'
    + b"data: [DONE]\n\n"
)


def test_a_dialogue_becomes_a_chat_and_parameters_its_fields() -> None:
    request = {"dialogue": "Amanda: hi\nJerry: hello", "parameters": {"temperature": 0.2}}
    assert invoke_openai.openai_request(request, streaming=False) == {
        "messages": [{"role": "user", "content": "Amanda: hi\nJerry: hello"}],
        "max_tokens": invoke_openai.DIALOGUE_MAX_TOKENS,
        "temperature": 0.2,
    }
    streamed = invoke_openai.openai_request({"prompt": "x"}, streaming=True)
    assert streamed == {"prompt": "x", "stream": True, "stream_options": {"include_usage": True}}
    # A request already in the OpenAI shape keeps its own fields.
    own = {"messages": [{"role": "user", "content": "x"}], "max_tokens": 3}
    assert invoke_openai.openai_request(own, streaming=False) == own


@pytest.mark.parametrize("size", [1, 3, 7, 64, len(STREAM)])
def test_server_sent_events_cut_anywhere_give_the_same_text(size: int) -> None:
    pieces = [STREAM[i : i + size] for i in range(0, len(STREAM), size)]
    written: list[str] = []
    stats = invoke_openai.stream_answer(pieces, written.append)
    assert "".join(written) == "Amanda bakes cookies."
    assert (stats.chunks, stats.tokens) == (3, 3)
    assert stats.first_token_s is not None and "time to first token" in stats.summary()


def test_a_stream_stops_at_done_and_an_error_event_is_an_error() -> None:
    assert [
        invoke_openai.delta_text(e)
        for e in invoke_openai.sse_events([chunk("a"), b"data: [DONE]\n\n", chunk("b")])
    ] == ["a"]
    for error in (
        b'data: {"error": {"message": "This model\'s maximum context length is 64 tokens.", "code": 400}}\n\n',
        b'data: {"object": "error", "message": "This model\'s maximum context length is 64 tokens."}\n\n',
    ):
        with pytest.raises(HfpipeError, match="maximum context length is 64 tokens"):
            list(invoke_openai.sse_events([chunk("a"), error]))


def test_completion_chunks_and_answers_are_read_too() -> None:
    event = {"object": "text_completion", "choices": [{"index": 0, "text": "xy", "finish_reason": None}]}
    assert invoke_openai.delta_text(event) == "xy"
    chat = {"object": "chat.completion", "choices": [{"message": {"role": "assistant", "content": "hi"}}]}
    assert invoke_openai.answer_texts(chat) == ["hi"]
    assert invoke_openai.answer_texts(
        {"object": "text_completion", "choices": [{"text": "a"}, {"text": "b"}]}
    ) == ["a", "b"]
    assert invoke_openai.answer_texts([{"generated_text": "x"}]) == []


class StreamingRuntime:
    """sagemaker-runtime with InvokeEndpointWithResponseStream's response: an iterable of events. Each call's
    parameters are checked against botocore's own model of the operation."""

    def __init__(self, events: list[dict[str, Any]]) -> None:
        self.events = events
        self.calls: list[dict[str, Any]] = []
        model = botocore.session.get_session().get_service_model("sagemaker-runtime")
        self.shape = model.operation_model("InvokeEndpointWithResponseStream").input_shape

    def invoke_endpoint_with_response_stream(self, **params: Any) -> dict[str, Any]:
        report = ParamValidator().validate(params, self.shape)
        assert not report.has_errors(), report.generate_report()
        self.calls.append(params)
        return {"Body": iter(self.events)}


def test_the_endpoint_stream_relays_payload_parts_and_fails_on_a_stream_error() -> None:
    parts = [{"PayloadPart": {"Bytes": STREAM[i : i + 10]}} for i in range(0, len(STREAM), 10)]
    runtime = StreamingRuntime(parts)
    written: list[str] = []
    body = json.dumps({"messages": [{"role": "user", "content": "x"}], "stream": True}).encode()
    stats = invoke_openai.stream_answer(
        invoke_openai.endpoint_stream(runtime, "dev-ep", body), written.append
    )
    assert "".join(written) == "Amanda bakes cookies." and stats.tokens == 3
    assert runtime.calls == [
        {
            "EndpointName": "dev-ep",
            "Body": body,
            "ContentType": "application/json",
            "Accept": "text/event-stream",
        }
    ]
    failing = StreamingRuntime(
        [parts[0], {"ModelStreamError": {"Message": "CUDA out of memory", "ErrorCode": "500"}}]
    )
    with pytest.raises(HfpipeError, match="dev-ep: ModelStreamError: CUDA out of memory"):
        list(invoke_openai.endpoint_stream(failing, "dev-ep", body))


def test_an_answer_longer_than_the_served_model_is_refused_before_sending() -> None:
    from hfpipe import kinds
    from hfpipe.cli import invoke

    vllm = kinds.serving_kind("vllm")
    invoke.check_with_kind(vllm, None, [{"prompt": "a", "max_tokens": 10}], ["--data"], 2048)
    invoke.check_with_kind(
        vllm, None, [{"prompt": "a", "max_tokens": 4096}], ["--data"]
    )  # unknown: the server says
    with pytest.raises(
        HfpipeError, match=r"^--data is not .* would answer 400\): 'max_tokens' .* too large: 2048"
    ):
        invoke.check_with_kind(vllm, None, [{"prompt": "a", "max_tokens": 2048}], ["--data"], 2048)


def test_a_stream_error_botocore_raises_while_reading_is_an_error_naming_it() -> None:
    from botocore.exceptions import EventStreamError

    def events():
        yield {"PayloadPart": {"Bytes": chunk("a")}}
        raise EventStreamError(
            {"Error": {"Code": "ModelStreamError", "Message": "StreamBroken"}},
            "InvokeEndpointWithResponseStream",
        )

    runtime = StreamingRuntime([])
    runtime.events = events()  # type: ignore[assignment]
    with pytest.raises(HfpipeError, match="dev-ep: ModelStreamError: StreamBroken"):
        list(invoke_openai.endpoint_stream(runtime, "dev-ep", b"{}"))
