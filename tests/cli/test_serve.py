"""The local endpoint over HTTP: SageMaker's container contract, the real summarization handler, invoke --local."""

from __future__ import annotations

import http.client
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from model_servers import serving

from hfpipe.cli import main
from hfpipe.local.serving.endpoint import LocalEndpoint
from hfpipe.local.serving.serve import (
    ENTRY_POINT_HEADER,
    RECIPE_HEADER,
    SERVING_KIND_HEADER,
    TASK_HEADER,
    ModelServer,
)

ROOT = Path(__file__).resolve().parents[2]
DIALOGUE = "Amanda: I baked cookies. Do you want some?\nJerry: Sure!\nAmanda: I'll bring you tomorrow :-)"


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random BLOOM with the summarization handler as code/inference.py, as run_clm.py leaves it."""
    from hfpipe.fixtures.samsum import build_tiny_bloom

    model = build_tiny_bloom(tmp_path_factory.mktemp("serve") / "model")
    (model / "code").mkdir(exist_ok=True)
    shutil.copyfile(ROOT / "training_code" / "inference_clm.py", model / "code" / "inference.py")
    return model


@pytest.fixture
def server(model_dir: Path) -> Iterator[ModelServer]:
    """The server on a free port in a thread; stopped (shutdown + close) after the test."""
    with serving(
        LocalEndpoint(model_dir),
        entry_point="run_clm.py",
        recipe="tiny-lora",
        task="summarization",
        serving_kind="hf-inference",
    ) as srv:
        yield srv


def request(
    srv: ModelServer, method: str, path: str, body: bytes | None = None, **headers: str
) -> tuple[int, dict[str, str], bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", srv.server_address[1], timeout=60)
    try:
        conn.request(method, path, body=body, headers={k.replace("_", "-"): v for k, v in headers.items()})
        response = conn.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        conn.close()


def test_ping_and_invocations_through_the_handler(server: ModelServer) -> None:
    status, headers, body = request(server, "GET", "/ping")
    assert (status, body) == (200, b"")
    assert headers[ENTRY_POINT_HEADER] == "run_clm.py" and headers[RECIPE_HEADER] == "tiny-lora"
    assert headers[TASK_HEADER] == "summarization" and headers[SERVING_KIND_HEADER] == "hf-inference"

    payload = {"dialogue": DIALOGUE, "parameters": {"max_new_tokens": 4, "do_sample": False}}
    status, headers, body = request(
        server, "POST", "/invocations", json.dumps(payload).encode(), Content_Type="application/json"
    )
    assert status == 200, body
    assert headers["Content-Type"] == "application/json"
    [answer] = json.loads(body)
    assert set(answer) == {"generated_text", "summary"}
    assert answer["generated_text"].startswith(
        "Summarize the chat dialogue:"
    )  # the template ran on the server

    # Accept */* is JSON, a charset parameter is fine, and text/csv is the toolkit's other default decoder.
    status, _, body = request(
        server,
        "POST",
        "/invocations",
        b'inputs\n"Amanda: hi"\n',
        Content_Type="text/csv; charset=utf-8",
        Accept="*/*",
    )
    # The handler's own input_fn reads a CSV with an `inputs` (or `dialogue`) header and one row.
    assert status == 200, body
    assert set(json.loads(body)[0]) == {"generated_text", "summary"}


def test_a_csv_request_is_answered_as_documented(server: ModelServer) -> None:
    body = b'dialogue\n"Amanda: I baked cookies.\nJerry: Sure!"\n'
    status, _, answer = request(server, "POST", "/invocations", body, Content_Type="text/csv")
    assert status == 200, answer
    assert set(json.loads(answer)[0]) == {"generated_text", "summary"}


@pytest.mark.parametrize(
    ("body", "headers", "status", "message"),
    [
        (
            b'{"dialogue": "A: hi", "parameters": {"temprature": 1}}',
            {"Content_Type": "application/json"},
            400,
            "parameters.temprature is not supported; accepted: ['do_sample', 'max_new_tokens', "
            "'no_repeat_ngram_size', 'num_beams', 'repetition_penalty', 'temperature', 'top_k', 'top_p']",
        ),
        (
            b"{nope",
            {"Content_Type": "application/json"},
            400,
            "Expecting property name enclosed in double quotes",
        ),
        (
            b"Amanda: hi",
            {"Content_Type": "text/plain"},
            400,
            "content_type 'text/plain' is not accepted; accepted: application/json, text/csv",
        ),
        (
            b'{"inputs": "x", "parameters": {"max_new_tokens": 1}}',
            {"Content_Type": "application/json", "Accept": "application/xml"},
            400,
            "accept 'application/xml' is not supported by the handler's default output_fn",
        ),
    ],
)
def test_bad_requests_get_400_with_the_handlers_message(
    server: ModelServer, body: bytes, headers: dict[str, str], status: int, message: str
) -> None:
    got, response_headers, answer = request(server, "POST", "/invocations", body, **headers)
    assert got == status
    assert response_headers["Content-Type"] == "application/json"
    error = json.loads(answer)
    assert error["code"] == status
    assert message in error["message"]


def test_other_paths_and_methods(server: ModelServer) -> None:
    assert request(server, "GET", "/invocations")[0] == 404
    assert request(server, "POST", "/ping", b"{}")[0] == 404
    assert request(server, "PUT", "/invocations", b"{}")[0] == 405


def test_a_taken_port_is_refused_before_anything_runs(
    server: ModelServer, capsys: Any, tmp_path: Path
) -> None:
    port = server.server_address[1]
    code = main(
        ["local", "--recipe", "tiny-lora", "--serve", "--port", str(port), "--out", str(tmp_path / "x")]
    )
    _, err = capsys.readouterr()
    assert code == 1
    # The first thing said: refused before the stacks are synthesized (no stage line, whatever their cache).
    assert err.startswith(f"error: cannot listen on 127.0.0.1:{port} (")
    assert err.endswith("pass another --port (0 picks a free one)\n")
    assert err.count("\n") == 1
    assert not (tmp_path / "x").exists()  # nothing made under --out


def test_invoke_local(server: ModelServer, tmp_path: Path, capsys: Any) -> None:
    port = str(server.server_address[1])
    chat = tmp_path / "chat.txt"
    chat.write_text(DIALOGUE)
    code = main(
        [
            "invoke",
            "--local",
            "--port",
            port,
            "--dialogue",
            str(chat),
            "--parameters",
            '{"max_new_tokens": 4}',
        ]
    )
    out, err = capsys.readouterr()
    assert (code, err) == (0, "")
    first, second = out.splitlines()
    assert first.startswith(f"answer from tiny-lora on http://127.0.0.1:{port} in ")
    assert second.startswith("summary: ")

    code = main(["invoke", "--local", "--port", port, "--json", "--data", '{"inputs": "Amanda: hi"}'])
    out, _ = capsys.readouterr()
    assert code == 0
    record = json.loads(out)
    assert record["request"] == 1 and record["latency_ms"] > 0
    assert "generated_text" in record["response"][0]

    # checked with the handler the server names in its /ping answer: nothing is sent
    code = main(
        ["invoke", "--local", "--port", port, "--data", '{"dialogue": "A: hi", "parameters": {"seed": 1}}']
    )
    _, err = capsys.readouterr()
    assert code == 1
    assert err.startswith(
        "error: --data is not a request the endpoint accepts: parameters.seed is not supported"
    )


def test_invoke_local_checks_against_the_recipe_before_looking_for_the_server(capsys: Any) -> None:
    srv = ModelServer(port=0)  # bound, then closed: a port nothing listens on
    port = str(srv.server_address[1])
    srv.server_close()
    bad = '{"inputs": {"question": "Who?", "context": ""}}'
    code = main(["invoke", "--local", "--port", port, "--recipe", "tiny-qa", "--data", bad])
    _, err = capsys.readouterr()
    assert code == 1
    assert err == (
        "error: --data is not a request the endpoint accepts: request field 'context' must be a non-empty "
        "string; got '' (checked with training_code/inference_qa.py; nothing was sent)\n"
    )
    code = main(["invoke", "--local", "--port", port, "--recipe", "tiny-qa", "--dialogue", __file__])
    _, err = capsys.readouterr()
    assert code == 1
    assert err == (
        "error: --dialogue is for the summarization recipes; recipe 'tiny-qa' serves question-answering "
        "(handler inference_qa.py): send its request shape with --data or --file\n"
    )
    # A request the recipe's handler accepts goes on to the server (here: none).
    code = main(
        ["invoke", "--local", "--port", port, "--recipe", "tiny-qa", "--data", bad.replace('""', '"x"')]
    )
    _, err = capsys.readouterr()
    assert code == 1 and err.startswith(f"error: nothing answers on http://127.0.0.1:{port}/ping (")


def test_invoke_local_against_another_recipes_server(server: ModelServer, capsys: Any) -> None:
    port = str(server.server_address[1])
    data = '{"inputs": {"question": "Who?", "context": "Amanda."}}'
    code = main(["invoke", "--local", "--port", port, "--recipe", "tiny-qa", "--data", data])
    _, err = capsys.readouterr()
    assert code == 1
    assert err == (
        f"error: --recipe 'tiny-qa' is a question-answering recipe; tiny-lora on http://127.0.0.1:{port} "
        "serves summarization\n"
    )


def test_invoke_local_with_nothing_serving(capsys: Any) -> None:
    srv = ModelServer(port=0)  # bound, then closed: a port nothing listens on
    port = srv.server_address[1]
    srv.server_close()
    code = main(["invoke", "--local", "--port", str(port), "--data", "{}"])
    _, err = capsys.readouterr()
    assert code == 1
    assert err.startswith(f"error: nothing answers on http://127.0.0.1:{port}/ping (")
    assert err.endswith(
        f"start it with `hfpipe local --recipe tiny-lora --serve --port {port}`, or pass the --port it prints\n"
    )
