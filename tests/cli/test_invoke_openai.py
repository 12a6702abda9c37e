"""`hfpipe invoke` for the vllm serving kind: the OpenAI request shapes, Server-Sent Events cut anywhere,
InvokeEndpointWithResponseStream's events, and the streaming statistics."""

from __future__ import annotations

import json
import re
import threading
from typing import Any

import botocore.session
import pytest
from botocore.validate import ParamValidator

from hfpipe.cli.aws import HfpipeError
from hfpipe.cli.deploy import invoke_openai


def chunk(text: str, finish: str | None = None, **extra: Any) -> bytes:
    event = {
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": finish}],
        **extra,
    }
    return f"data: {json.dumps(event)}\n\n".encode()


STREAM = (
    chunk("Amanda ")
    + chunk("bakes ")
    + chunk("cookies.", "stop")
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
    from hfpipe.cli.deploy import invoke

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


# --- every way a stream fails is one line and a non-zero exit ------------------------------------------


def _runtime_with_error(code: str, status: int, message: str) -> Any:
    """A real sagemaker-runtime client whose InvokeEndpointWithResponseStream call fails as AWS fails it:
    botocore's Stubber raises the ClientError botocore would (ModelError: 424; ThrottlingException after
    botocore's own retries)."""
    from botocore.stub import Stubber

    client = botocore.session.get_session().create_client(
        "sagemaker-runtime",
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
    stubber = Stubber(client)
    stubber.add_client_error(
        "invoke_endpoint_with_response_stream",
        service_error_code=code,
        service_message=message,
        http_status_code=status,
    )
    stubber.activate()
    return client


def _one_line(err: pytest.ExceptionInfo[HfpipeError]) -> str:
    message = str(err.value)
    assert "\n" not in message and "Traceback" not in message
    return message


@pytest.mark.parametrize(
    ("code", "status", "message", "expected"),
    [
        (
            "ModelError",
            424,
            'Received client error (400) from primary with message "{"error": {"message": "max_tokens too big"}}".',
            r"^endpoint dev-ep refused the request: Received client error \(400\) .*max_tokens too big",
        ),
        (
            "ThrottlingException",
            400,
            "Rate exceeded",
            r"^invoking endpoint dev-ep failed: ThrottlingException: Rate exceeded$",
        ),
    ],
)
def test_an_error_of_the_stream_call_is_one_line(code: str, status: int, message: str, expected: str) -> None:
    runtime = _runtime_with_error(code, status, message)
    with pytest.raises(HfpipeError, match=expected) as err:
        list(invoke_openai.endpoint_stream(runtime, "dev-ep", b"{}"))
    _one_line(err)


@pytest.mark.parametrize(
    "bad",
    [b"data: {not json\n\n", b"data: \xff\xfe\n\n", b"data: 42\n\n", b'data: ["a"]\n\n'],
    ids=["not-json", "not-utf8", "a-number", "a-list"],
)
def test_an_event_that_is_not_a_json_object_is_one_line_after_the_text_before_it(bad: bytes) -> None:
    written: list[str] = []
    with pytest.raises(
        HfpipeError, match=r"^endpoint dev-ep sent an event that is not a JSON object: b"
    ) as err:
        invoke_openai.stream_answer([chunk("Amanda "), bad, STREAM], written.append, "endpoint dev-ep")
    _one_line(err)
    assert written == ["Amanda "]


@pytest.mark.parametrize(
    ("pieces", "kept", "expected"),
    [
        (
            [chunk("Amanda "), chunk("bakes ")],
            "Amanda bakes ",
            r"ended the stream before data: \[DONE\]; the",
        ),
        (
            [chunk("Amanda "), chunk("bakes ")[:20]],
            "Amanda ",
            r"before data: \[DONE\] \(in the middle of an event: b'data",
        ),
        ([chunk("Amanda "), chunk("bakes ", "stop")], "Amanda bakes ", r"before data: \[DONE\]"),
        ([chunk("Amanda "), b"data: [DONE]\n\n"], "Amanda ", "without a finish_reason for choice 0"),
        ([b"data: [DONE]\n\n"], "", "without a finish_reason for choice 0"),
    ],
    ids=["no-done", "cut-in-an-event", "finished-but-no-done", "done-but-no-finish", "nothing"],
)
def test_a_cut_stream_is_an_error_and_keeps_what_arrived(
    pieces: list[bytes], kept: str, expected: str
) -> None:
    written: list[str] = []
    with pytest.raises(HfpipeError, match=expected) as err:
        invoke_openai.stream_answer(pieces, written.append, "endpoint dev-ep")
    assert _one_line(err).endswith("the answer above is incomplete")
    assert "".join(written) == kept


def test_a_connection_lost_while_reading_the_endpoint_stream_is_one_line() -> None:
    from botocore.exceptions import ReadTimeoutError

    def events():
        yield {"PayloadPart": {"Bytes": chunk("a")}}
        raise ReadTimeoutError(
            endpoint_url="https://runtime.sagemaker.us-east-1.amazonaws.com/endpoints/dev-ep"
        )

    runtime = StreamingRuntime([])
    runtime.events = events()  # type: ignore[assignment]
    with pytest.raises(
        HfpipeError, match=r"^endpoint dev-ep: the stream was cut \(ReadTimeoutError: "
    ) as err:
        list(invoke_openai.endpoint_stream(runtime, "dev-ep", b"{}"))
    _one_line(err)


# --- the command, against a scripted server on this machine ------------------------------------------


class ScriptedServer:
    """What `hfpipe invoke --local` talks to: /ping names a vllm text-generation model, /v1/models its
    length, POST /invocations answers `self.answer` (raw bytes after the status line and headers) and
    closes the connection."""

    def __init__(self) -> None:
        import http.server

        self.answer = b""
        scripted = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                body = json.dumps({"data": [{"id": "fake", "max_model_len": 64}]}).encode()
                self.send_response(200)
                self.send_header("X-Hfpipe-Task", "text-generation")
                self.send_header("X-Hfpipe-Serving-Kind", "vllm")
                self.send_header("X-Hfpipe-Recipe", "fake")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers["Content-Length"]))
                self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n" + scripted.answer)
                self.wfile.flush()
                self.close_connection = True

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=10)


@pytest.fixture
def scripted() -> Any:
    server = ScriptedServer()
    yield server
    server.close()


def _chunked(*events: bytes) -> bytes:
    return b"Transfer-Encoding: chunked\r\n\r\n" + b"".join(b"%x\r\n%s\r\n" % (len(e), e) for e in events)


def _invoke(scripted: ScriptedServer, capsys: Any, *extra: str) -> tuple[int, str, str]:
    from hfpipe.cli import main

    code = main(
        [
            "invoke",
            "--local",
            "--port",
            str(scripted.port),
            "--stream",
            "--data",
            '{"prompt": "hi", "max_tokens": 4}',
            *extra,
        ]
    )
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        (_chunked(chunk("Amanda "), chunk("bakes ")) + b"0\r\n\r\n", r"before data: \[DONE\]"),
        (_chunked(chunk("Amanda ")) + b"40\r\ndata: {", r"the stream was cut \(IncompleteRead"),
        (
            _chunked(chunk("Amanda "), b"data: <html>oops</html>\n\n"),
            "sent an event that is not a JSON object",
        ),
    ],
    ids=["no-done", "connection-cut-in-a-chunk", "not-json"],
)
def test_invoke_stream_fails_with_one_line_and_exit_1_keeping_the_text(
    scripted: ScriptedServer, capsys: Any, answer: bytes, expected: str
) -> None:
    scripted.answer = answer
    code, out, err = _invoke(scripted, capsys)
    assert code == 1
    assert (
        err.count("\n") == 1 and err.startswith("error: fake on http://127.0.0.1:") and "Traceback" not in err
    )
    assert re.search(expected, err), err
    assert out == "Amanda \n" or out == "Amanda bakes \n", out


def test_invoke_stream_json_prints_json_lines_chunks_then_the_answer(
    scripted: ScriptedServer, capsys: Any
) -> None:
    scripted.answer = _chunked(*[STREAM[i : i + 9] for i in range(0, len(STREAM), 9)]) + b"0\r\n\r\n"
    code, out, err = _invoke(scripted, capsys, "--json")
    assert (code, err) == (0, "")
    lines = [json.loads(line) for line in out.splitlines()]
    assert all(line["request"] == 1 and line["endpoint"].startswith("fake on ") for line in lines)
    *chunks, last = lines
    assert [invoke_openai.delta_text(c["chunk"]) for c in chunks] == ["Amanda ", "bakes ", "cookies.", ""]
    assert last["text"] == "Amanda bakes cookies." and last["finish_reasons"] == ["stop"]
    assert last["usage"] == {"completion_tokens": 3} and last["time_to_first_token_ms"] >= 0
    # A failure after some lines: the lines stay, the error is one line on stderr.
    scripted.answer = _chunked(chunk("Amanda "))
    code, out, err = _invoke(scripted, capsys, "--json")
    assert code == 1 and len(out.splitlines()) == 1 and json.loads(out)["chunk"]["choices"][0]["delta"]
    assert err.count("\n") == 1 and "the stream was cut (IncompleteRead(0 bytes read))" in err
