"""One table of requests held against the three users of the `vllm` kind's request contract
(hfpipe/kinds/openai_contract.py, vLLM 0.14.0's rules): `hfpipe invoke`'s pre-check, local mode's stand-in
over HTTP (POST /invocations, as SageMaker sends) and Plan's check of a recipe's sample request.

Each row is a body and its verdict: "accept", or (status, a word the error names). Where a user cannot know
what decides a row (invoke and Plan have no tokenizer, no vocabulary; invoke knows no served model name),
the row says what that user answers instead, and why.
"""

from __future__ import annotations

import copy
import http.client
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from model_servers import serving

from hfpipe import kinds
from hfpipe.cli.aws import HfpipeError
from hfpipe.cli.deploy import invoke
from hfpipe.core.recipe import sample_request
from hfpipe.core.recipe.recipes import resolve_recipe
from hfpipe.core.recipe.schema import RecipeError
from hfpipe.local.serving.openai_endpoint import OpenAIEndpoint
from hfpipe.local.serving.serve import ModelServer

MAX_MODEL_LEN = 128
NAME = "tiny"
USER = [{"role": "user", "content": "hi"}]
Verdict = str | tuple[int, str]


@dataclass
class Row:
    name: str
    body: dict[str, Any]
    verdict: Verdict
    #: What a user answers where it differs from the server's verdict: "invoke", "standin", "plan".
    by: dict[str, Verdict] = field(default_factory=dict)

    def expected(self, user: str) -> Verdict:
        return self.by.get(user, self.verdict)


def chat(**fields: Any) -> dict[str, Any]:
    return {"messages": USER, "max_tokens": 4, "temperature": 0, **fields}


TABLE = [
    # accepted by vLLM 0.14.0, so by all three (the cases first)
    Row("seed -1 is a random seed", chat(seed=-1), "accept"),
    Row("max_completion_tokens", {"messages": USER, "max_completion_tokens": 3, "temperature": 0}, "accept"),
    Row(
        "content as text parts",
        chat(messages=[{"role": "user", "content": [{"type": "text", "text": "hi"}]}]),
        "accept",
    ),
    Row(
        "a tool role",
        chat(
            messages=[
                *USER,
                {"role": "assistant", "content": "x"},
                {"role": "tool", "content": "y", "tool_call_id": "1"},
            ]
        ),
        "accept",
    ),
    Row("a system-only chat", chat(messages=[{"role": "system", "content": "Summarize."}]), "accept"),
    Row("an empty content", chat(messages=[{"role": "user", "content": ""}]), "accept"),
    Row("the served model by name", chat(model=NAME, stop="\n", top_k=-1), "accept"),
    Row(
        "stream_options with stream",
        chat(stream=True, stream_options={"include_usage": True}),
        "accept",
        by={"plan": (400, "stream")},
    ),
    Row("a completion over token ids", {"prompt": [1, 2, 3], "max_tokens": 2, "temperature": 0}, "accept"),
    Row(
        "a completion over strings",
        {"prompt": ["a", "b"], "max_tokens": 2, "temperature": 0.5, "seed": 3},
        "accept",
    ),
    # accepted by vLLM; the stand-in does not implement it and says so (501), Plan plans for the endpoint
    Row("n 2", chat(n=2, temperature=1.0), "accept", by={"standin": (501, "n")}),
    Row(
        "tools with tool_choice none",
        chat(tools=[{"type": "function", "function": {"name": "f"}}], tool_choice="none"),
        "accept",
        by={"standin": (501, "tools")},
    ),
    # refused by vLLM 0.14.0 (the cases first)
    Row("top_k -5", chat(top_k=-5), (400, "top_k must be 0 (disable), or at least 1, got -5.")),
    Row(
        "tool_choice without tools",
        chat(tool_choice="auto"),
        (400, "When using `tool_choice`, `tools` must be set."),
    ),
    Row(
        "tools with tool_choice auto: no tool parser",
        chat(tools=[{"type": "function", "function": {"name": "f"}}]),
        (400, "--enable-auto-tool-choice"),
    ),
    Row(
        "stream_options without stream",
        chat(stream_options={"include_usage": True}),
        (400, "Stream options can only be defined when `stream=True`."),
    ),
    Row("min_p 2", chat(min_p=2), (400, "min_p must be in [0, 1], got 2.0.")),
    Row("max_tokens 0", chat(max_tokens=0), (400, "max_tokens must be at least 1, got 0.")),
    Row("top_p 0", chat(top_p=0), (400, "top_p must be in (0, 1], got 0.0.")),
    Row("temperature -1", chat(temperature=-1), (400, "temperature must be non-negative")),
    Row("an empty stop string", chat(stop=["a", ""]), (400, "stop cannot contain an empty string.")),
    Row(
        "both continue_final_message and add_generation_prompt",
        chat(continue_final_message=True),
        (400, "continue_final_message"),
    ),
    Row(
        "a suffix",
        {"prompt": "a", "suffix": "b", "max_tokens": 2},
        (400, "suffix is not currently supported"),
    ),
    Row(
        "a toolkit-shaped body",
        {"inputs": "Amanda: hi", "parameters": {"max_new_tokens": 8}},
        (400, "Either prompt or prompt_embeds must be provided"),
    ),
    Row("no body fields at all", {}, (400, "Cannot find suitable handler for request")),
    Row("max_tokens that cannot fit the context", chat(max_tokens=MAX_MODEL_LEN), (400, "max_tokens")),
    Row(
        "a prompt over the context",
        {"prompt": "word " * 300, "max_tokens": 2},
        (400, "context"),
        by={"invoke": "accept"},
    ),
    Row(
        "token ids beyond the vocabulary",
        {"prompt": [10**6], "max_tokens": 2},
        (400, "Token id 1000000 is out of vocabulary"),
        by={"invoke": "accept", "plan": "accept"},
    ),
    Row(
        "another model's name",
        chat(model="other"),
        (404, "The model `other` does not exist."),
        by={"invoke": "accept"},
    ),
    # where this project is narrower than vLLM (docs/vllm.md, "The request contract")
    Row("temperature NaN", chat(temperature=float("nan")), (400, "temperature: nan is not accepted")),
    Row(
        "a lone surrogate", chat(messages=[{"role": "user", "content": "a\ud800b"}]), (400, "lone surrogate")
    ),
    Row("a negative token id", {"prompt": [-1], "max_tokens": 2}, (400, "Token id -1 is out of vocabulary")),
    Row("a misspelt field vLLM would ignore", chat(max_token=5), (400, "did you mean max_tokens")),
    Row("a field of OpenAI's that vLLM 0.14 dropped", {"prompt": "a", "best_of": 2}, (400, "best_of")),
    Row(
        "a role no template is written for",
        chat(messages=[{"role": "robot", "content": "x"}]),
        (400, "messages[0].role"),
    ),
    Row("no messages", chat(messages=[]), (400, "messages: [] is not accepted")),
    Row(
        "an image part",
        chat(messages=[{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]),
        (400, "messages[0].content[0]"),
    ),
    Row("a number as a string", chat(max_tokens="5"), (400, "max_tokens: '5' is not accepted")),
]


def _ids(rows: list[Row]) -> list[str]:
    return [r.name for r in rows]


def _outcome(verdict: Verdict, status: int | None, message: str) -> None:
    if verdict == "accept":
        assert status is None, f"refused ({status}): {message}"
        return
    expected_status, word = verdict
    assert status is not None, f"accepted; expected {expected_status} naming {word!r}"
    assert (status, word in message) == (expected_status, True), message


# --- (a) hfpipe invoke's pre-check --------------------------------------------------------------------------


@pytest.mark.parametrize("row", TABLE, ids=_ids(TABLE))
def test_invoke_checks_before_sending_as_the_table_says(row: Row) -> None:
    vllm, task = kinds.serving_kind("vllm"), kinds.task_kind("summarization")
    status, message = None, ""
    try:
        invoke.check_with_kind(vllm, task, [copy.deepcopy(row.body)], ["--data"], MAX_MODEL_LEN)
    except HfpipeError as err:
        message = str(err)
        status = int(message.split("would answer ")[1][:3]) if "would answer " in message else 400
    _outcome(row.expected("invoke"), status, message)


# --- (c) Plan's check of the sample request ---------------------------------------------------------------


@pytest.fixture(scope="module")
def recipe() -> dict[str, Any]:
    return resolve_recipe(recipe_name="bloomz-7b1-lora-samsum")


@pytest.mark.parametrize("row", TABLE, ids=_ids(TABLE))
def test_plan_holds_the_sample_request_as_the_table_says(row: Row, recipe: dict[str, Any]) -> None:
    planned = copy.deepcopy(recipe)
    planned["serving"]["sample_request"] = copy.deepcopy(row.body)
    environment = {"SM_VLLM_MAX_MODEL_LEN": str(MAX_MODEL_LEN), "SM_VLLM_SERVED_MODEL_NAME": NAME}
    status, message = None, ""
    try:
        sample_request.check(planned, environment)
    except RecipeError as err:
        message = str(err)
        assert message.startswith("recipe.serving.sample_request"), message
        status = int(message.split("would answer ")[1][:3]) if "would answer " in message else 400
    _outcome(row.expected("plan"), status, message)


# --- (b) the stand-in over HTTP ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ModelServer]:
    """The tiny random BLOOM with the chat template run_clm.py saves, behind ModelServer on a free port."""
    import inference_clm
    from transformers import AutoTokenizer

    from hfpipe.fixtures.samsum import build_tiny_bloom

    model: Path = build_tiny_bloom(tmp_path_factory.mktemp("contract") / "model")
    tokenizer = AutoTokenizer.from_pretrained(model)
    tokenizer.chat_template = inference_clm.chat_template(inference_clm.DEFAULT_PROMPT_TEMPLATE)
    tokenizer.save_pretrained(model)
    endpoint = OpenAIEndpoint(
        model, environment={"SM_VLLM_MAX_MODEL_LEN": str(MAX_MODEL_LEN), "SM_VLLM_SERVED_MODEL_NAME": NAME}
    )
    with serving(endpoint, serving_kind="vllm") as srv:
        yield srv


def post(
    server: ModelServer, body: bytes, headers: dict[str, str], path: str = "/invocations"
) -> tuple[int, str, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", server.server_address[1], timeout=120)
    try:
        conn.request("POST", path, body=body, headers=headers)
        response = conn.getresponse()  # a dropped connection raises here: every request gets an answer
        return response.status, response.getheader("Content-Type") or "", response.read()
    finally:
        conn.close()


def _error(status: int, raw: bytes) -> str:
    """vLLM's ErrorResponse: {"error": {message, type, param, code}}, code the HTTP status."""
    error = json.loads(raw)["error"]
    assert set(error) == {"message", "type", "param", "code"} and error["code"] == status, error
    return str(error["message"])


@pytest.mark.parametrize("row", TABLE, ids=_ids(TABLE))
def test_the_stand_in_answers_as_the_table_says(row: Row, server: ModelServer) -> None:
    # json.dumps writes NaN as vLLM's server reads it (Python's json) and a lone surrogate as \ud800
    status, content_type, raw = post(
        server, json.dumps(row.body).encode(), {"Content-Type": "application/json"}
    )
    if status == 200:
        if row.body.get("stream"):
            assert content_type.startswith("text/event-stream") and raw.endswith(b"data: [DONE]\n\n")
        _outcome(row.expected("standin"), None, "")
        return
    assert content_type == "application/json"  # an error answer, never a stream
    _outcome(row.expected("standin"), status, _error(status, raw))


@pytest.mark.parametrize(
    ("body", "headers", "word"),
    [
        (json.dumps(chat()).encode(), {}, "Only 'application/json' is allowed"),  # validate_json_request
        (json.dumps(chat()).encode(), {"Content-Type": "text/plain"}, "Only 'application/json' is allowed"),
        (b'{"messages": [', {"Content-Type": "application/json"}, "JSON decode error"),
        (b"\xff\xfe", {"Content-Type": "application/json"}, "JSON decode error"),
        (json.dumps([chat()]).encode(), {"Content-Type": "application/json"}, "Cannot find suitable handler"),
    ],
    ids=["no Content-Type", "text/plain", "cut JSON", "not UTF-8", "a list"],
)
def test_the_stand_in_answers_a_body_it_cannot_read_with_vllms_400(
    server: ModelServer, body: bytes, headers: dict[str, str], word: str
) -> None:
    status, _, raw = post(server, body, headers)
    assert status == 400 and word in _error(status, raw)


def test_on_a_v1_route_a_validation_failure_is_fastapis_400_naming_the_param(server: ModelServer) -> None:
    """api_server.validation_exception_handler: type "Bad Request", param from a VLLMValidationError."""
    body = json.dumps(chat(stream_options={"include_usage": True})).encode()
    status, _, raw = post(server, body, {"Content-Type": "application/json"}, "/v1/chat/completions")
    error = json.loads(raw)["error"]
    assert (status, error["type"], error["param"]) == (400, "Bad Request", "stream_options")


def test_an_error_inside_generation_ends_the_stream_as_vllm_does(
    server: ModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """serving_chat.chat_completion_stream_generator: the error's body (create_error_response's status for
    it) as one data event, then data: [DONE]."""
    endpoint = server.endpoint
    assert isinstance(endpoint, OpenAIEndpoint)

    def broken(*args: Any, **kwargs: Any) -> Iterator[Any]:
        yield "a", None, None, 1
        raise RuntimeError("CUDA error: device-side assert triggered")

    monkeypatch.setattr(endpoint, "_generate", broken)
    status, _, raw = post(
        server, json.dumps(chat(stream=True)).encode(), {"Content-Type": "application/json"}
    )
    events = raw.decode().split("\n\n")
    assert status == 200 and events[-2:] == ["data: [DONE]", ""]
    error = json.loads(events[-3].removeprefix("data: "))["error"]
    assert (error["code"], error["type"]) == (400, "BadRequestError") and "device-side assert" in error[
        "message"
    ]
