"""docs/vllm.md, step by step: train and serve bloomz-7b1-lora-samsum locally on the vllm kind's stand-in,
stream a summary with `hfpipe invoke --stream`, then run the page's own `openai` snippet against the server
(chat and streaming), and stop with Ctrl-C. The commands and the snippet are read from the page (its blocks
`vllm` and `vllm-client`)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from doc_blocks import doc_block
from local_runs import check_finished_run
from test_walkthrough import chat_file, serving

from hfpipe.cli import main

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]


def commands() -> list[list[str]]:
    return [c.argv for c in doc_block("vllm").commands() if c.is_hfpipe]


def test_the_section_serves_streams_and_answers_the_openai_client(tmp_path: Path, capsys: Any) -> None:
    serve, invoke = commands()
    assert serve[1:4] == ["local", "--recipe", "bloomz-7b1-lora-samsum"] and "--serve" in serve
    assert invoke[1:3] == ["invoke", "--local"] and "--stream" in invoke
    snippet = doc_block("vllm-client").text
    chat = chat_file(tmp_path)
    argv = serve[1:]
    argv[argv.index("--port") + 1] = "0"
    with serving(argv, tmp_path / "runs") as server:
        printed, port, stdout = server.printed, server.port, server.proc.stdout
        assert stdout is not None and port, "".join(printed)
        while not printed[-1].startswith("OpenAI-compatible") and len(printed) < 10_000:
            printed.append(stdout.readline())  # the lines after the address: how to send requests
        text = "".join(printed)
        assert "serving.kind: vllm" in text  # the stand-in is named as a substitution
        # The full-size LoRA recipe's end-to-end local run (tests/training/test_local_substitutions.py lists
        # it here): what every local run gives; the vllm kind serves the merged model without a handler.
        check_finished_run(tmp_path / "runs", "bloomz-7b1-lora-samsum", text, handler=False)
        assert "OpenAI-compatible, as the vLLM container" in text

        args = invoke[1:]
        args[args.index("--port") + 1] = port
        args[args.index("--dialogue") + 1] = str(chat)
        code = main(args)
        out, err = capsys.readouterr()
        assert (code, err) == (0, ""), out
        assert re.search(r"time to first token \d+ ms; \d+ tokens in \d+\.\d+ s", out), out
        # The served model's length (its /v1/models answer) bounds a request before it is sent.
        code = main(
            ["invoke", "--local", "--port", port, "--data", '{"prompt": "Amanda:", "max_tokens": 4096}']
        )
        out, err = capsys.readouterr()
        # vLLM 0.14's own words (serving_engine's length check), refused here before anything is sent.
        assert code != 0 and "maximum context length is 2048 tokens" in err, (out, err)
        assert "nothing was sent" in err, err

        # The page's snippet as written, with the port the server got and the chat file's path.
        script = snippet.replace("127.0.0.1:8081", f"127.0.0.1:{port}").replace('"chat.txt"', repr(str(chat)))
        ran = subprocess.run(
            [sys.executable, "-c", script], capture_output=True, text=True, timeout=300, check=False
        )
        # The client parsed the answer and every streamed chunk, or it would have raised (exit code 1). What
        # the random-weight model says is noise, possibly only whitespace, so the text is not checked.
        assert ran.returncode == 0, ran.stderr
