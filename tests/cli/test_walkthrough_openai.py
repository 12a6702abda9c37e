"""The README's vLLM section, step by step: train and serve bloomz-7b1-lora-samsum locally on the vllm kind's
stand-in, stream a summary with `hfpipe invoke --stream`, then run the README's own `openai` snippet against
the server (chat and streaming), and stop with Ctrl-C. The commands and the snippet are read from the README."""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from test_walkthrough import chat_file

from hfpipe.cli import main

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
SECTION = "## Serving the LLM as teams do now: vLLM, OpenAI-compatible"


def section() -> str:
    return (ROOT / "README.md").read_text().split(SECTION, 1)[1].split("\n## ", 1)[0]


def commands() -> list[list[str]]:
    (block,) = re.findall(r"```bash\n(.*?)```", section(), flags=re.S)
    return [shlex.split(line, comments=True) for line in block.splitlines() if line.startswith("hfpipe ")]


def test_the_section_serves_streams_and_answers_the_openai_client(tmp_path: Path, capsys: Any) -> None:
    serve, invoke = commands()
    assert serve[1:4] == ["local", "--recipe", "bloomz-7b1-lora-samsum"] and "--serve" in serve
    assert invoke[1:3] == ["invoke", "--local"] and "--stream" in invoke
    (snippet,) = re.findall(r"```python\n(.*?)```", section(), flags=re.S)
    chat = chat_file(tmp_path)
    argv = serve[1:]
    argv[argv.index("--port") + 1] = "0"
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "COLUMNS": "200", "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "hfpipe.cli", *argv, "--out", str(tmp_path / "runs")],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    printed: list[str] = []
    try:
        assert proc.stdout is not None
        deadline, port = time.monotonic() + 600, None
        while port is None and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            printed.append(line)
            match = re.search(r"^serving .* on http://127\.0\.0\.1:(\d+) ", line)
            port = match.group(1) if match else None
        assert port, "".join(printed)
        while not printed[-1].startswith("OpenAI-compatible") and len(printed) < 10_000:
            printed.append(proc.stdout.readline())  # the lines after the address: how to send requests
        text = "".join(printed)
        assert "serving.kind: vllm" in text  # the stand-in is named as a substitution
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
        assert code != 0 and "at most 2048 tokens of prompt and answer together" in err, (out, err)

        # The README's snippet as written, with the port the server got and the chat file's path.
        script = snippet.replace("127.0.0.1:8081", f"127.0.0.1:{port}").replace('"chat.txt"', repr(str(chat)))
        ran = subprocess.run(
            [sys.executable, "-c", script], capture_output=True, text=True, timeout=300, check=False
        )
        assert ran.returncode == 0, ran.stderr
        # The greedy chat answer is printed once, then the same tokens streamed (temperature defaults to 1
        # in OpenAI's API, so the two texts may differ; both were parsed by the client without error).
        assert ran.stdout.strip(), ran.stdout

        proc.send_signal(signal.SIGINT)
        rest, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, "".join(printed) + rest
