"""The README's BLOOMZ walk-through, step by step: locally end to end (train, serve, logs, invoke, Ctrl-C), and
its AWS commands against a moto account (start --keep-endpoint, logs --follow, endpoints, invoke, delete).

The commands run here are read from the README's walk-through blocks (by their replay markers' names,
`bloomz-local` and `bloomz-aws`), so the two cannot drift apart; only the port (a free one), the output folder
and the moto account differ.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from cli_moto import Deployed, _answer, sagemaker_backend
from doc_blocks import doc_block
from local_runs import check_finished_run

from hfpipe.cli import main
from hfpipe.cli.run.local_report import local_curves
from hfpipe.core import names
from hfpipe.core.run import logs

ROOT = Path(__file__).resolve().parents[2]


def walkthrough_blocks() -> list[list[list[str]]]:
    """The walk-through's two bash blocks, each as its `hfpipe` commands (argv lists, `hfpipe` first)."""
    local, on_aws = doc_block("bloomz-local"), doc_block("bloomz-aws")
    return [[c.argv for c in block.commands() if c.is_hfpipe] for block in (local, on_aws)]


def start_serving(argv: list[str], out_dir: Path) -> tuple[subprocess.Popen[str], list[str], str | None]:
    """`hfpipe local ... --serve` (argv without `hfpipe`) in a child process, read up to the line that gives
    its address: the process, the lines it printed, and the port (None when it ended or took 10 minutes)."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "COLUMNS": "200", "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "hfpipe.cli", *argv, "--out", str(out_dir)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert proc.stdout is not None
    printed: list[str] = []
    deadline, port = time.monotonic() + 600, None
    while port is None and time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        printed.append(line)
        match = re.search(r"^serving .* on http://127\.0\.0\.1:(\d+) ", line)
        port = match.group(1) if match else None
    return proc, printed, port


@contextlib.contextmanager
def serving(argv: list[str], out_dir: Path) -> Iterator[SimpleNamespace]:
    """``start_serving``'s server (``proc``, ``printed``, ``port``) for the block, then Ctrl-C: it must stop
    cleanly (exit 0); ``rest`` is what it printed after. Killed where the block fails."""
    proc, printed, port = start_serving(argv, out_dir)
    server = SimpleNamespace(proc=proc, printed=printed, port=port, rest="")
    try:
        yield server
        proc.send_signal(signal.SIGINT)  # Ctrl-C
        server.rest, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, "".join(printed) + server.rest


def chat_file(tmp_path: Path) -> Path:
    [printf] = re.findall(r"^printf '(.*)' > chat.txt$", doc_block("bloomz-local").text, flags=re.M)
    chat = tmp_path / "chat.txt"
    chat.write_text(printf.replace("\\n", "\n"))
    return chat


def test_the_walkthrough_has_the_steps_it_promises() -> None:
    local, on_aws = walkthrough_blocks()
    assert [c[1] for c in local] == ["local", "logs", "invoke"]
    assert "--serve" in local[0] and "--local" in local[2] and "--dialogue" in local[2]
    assert [c[1] for c in on_aws] == ["start", "logs", "endpoints", "invoke", "endpoints"]
    assert "--keep-endpoint" in on_aws[0]
    # the endpoint it deletes is the one the pipeline names for that execution of that environment
    start = on_aws[0]
    execution, env = start[start.index("--name") + 1], start[start.index("--env") + 1]
    assert on_aws[4][2:4] == ["delete", names.derive_names(execution, env)["endpoint_name"]]


@pytest.mark.slow
def test_local_walkthrough_end_to_end(tmp_path: Path, capsys: Any) -> None:
    """Train tiny-lora, serve it, read its log, summarize the README's chat over HTTP, stop with Ctrl-C."""
    (serve, read_log, invoke), _ = walkthrough_blocks()
    chat = chat_file(tmp_path)
    out_dir = tmp_path / "runs"
    argv = [a for a in serve[1:]]
    argv[argv.index("--port") + 1] = "0"  # any free port; the server prints the one it got
    with serving(argv, out_dir) as server:
        printed, port = server.printed, server.port
        assert port, "".join(printed)
        assert any("smoke test" in line for line in printed)
        assert any("training log (last lines)" in line for line in printed)  # the live view's log tail
        # The run before the server: what every local run gives (the README's first command runs it too).
        run_dir, report = check_finished_run(out_dir, "tiny-lora", "".join(printed))
        assert "generated_text" in report["smoke_test"]["response"][0]
        # scraped from the log like SageMaker: the last step's loss, and the summary's train_loss and eval_loss
        assert set(report["final_metrics"]) == {"loss", "train_loss", "eval_loss"}
        # logging_steps follows the step cap: each step is a point of the curve, at its step
        curves, _, _ = local_curves(run_dir, report)
        steps = [step for step, _ in curves.series["loss"]]
        assert (steps, curves.xlabel) == (list(range(1, len(steps) + 1)), "training step") and len(steps) >= 2

        code = main([*read_log[1:], "--out", str(out_dir)])
        log, _ = capsys.readouterr()
        assert code == 0
        assert "Reporting training SUCCESS" in log and "train_loss" in log

        args = [a for a in invoke[1:]]
        args[args.index("--port") + 1] = port
        args[args.index("--dialogue") + 1] = str(chat)
        code = main(args)
        answer, err = capsys.readouterr()
        assert (code, err) == (0, "")
        first, second = answer.splitlines()
        assert re.match(rf"answer from tiny-lora on http://127\.0\.0\.1:{port} in \d+\.\d ms$", first)
        assert second.startswith("summary: ")
    assert server.rest.strip().endswith("stopped serving")


def test_aws_walkthrough_on_moto(deployed: Deployed, tmp_path: Path, capsys: Any) -> None:
    """The AWS block against moto: the real pipeline runs the recipe and keeps its endpoint (see cli_moto);
    every command is the README's, the delete confirmed with --yes."""
    from test_use import endpoint_answers, invoked, write_log

    _, (start, follow, endpoints, invoke, delete) = walkthrough_blocks()
    chat = chat_file(tmp_path)
    code = main(start[1:])
    out, err = capsys.readouterr()
    assert (code, err) == (0, "")
    assert "the endpoint stays up after the smoke test (billed per hour)" in out and "report: bloomz-1" in out

    # What the pipeline left: the completed job and the kept endpoint (names from its plan); the job's log
    # lines are what training would have written.
    from hfpipe.cli import aws

    clients = aws.make_clients()
    desc = aws.resolve_execution(clients, "bloomz-1", "dev")
    assert desc["status"] == "SUCCEEDED"
    plan = aws.stored_plan(list(aws.execution_history(clients.sfn, desc["executionArn"])))
    assert plan is not None and plan.keep_endpoint is True
    assert deployed.job(plan.training_job_name).training_job_status == "Completed"
    assert list(sagemaker_backend().endpoints) == [plan.endpoint_name]
    now = int(time.time() * 1000)
    write_log(deployed, plan.training_job_name, "algo-1", [(now, "{'train_loss': 1.42}"), (now + 1, "done")])

    assert main(follow[1:]) == 0
    assert capsys.readouterr().out == "{'train_loss': 1.42}\ndone\n"

    assert main(endpoints[1:]) == 0
    listed = capsys.readouterr().out
    assert plan.endpoint_name in listed and "USD/h together" in listed

    # bloomz-7b1-lora-samsum serves on the vllm kind: the dialogue goes as an OpenAI chat completion with the
    # README's parameters as its fields, and the answer's message is what is printed.
    answer = _answer(plan.endpoint_name, {"messages": []})
    answer["choices"][0]["message"]["content"] = "Amanda will bring Jerry cookies."
    endpoint_answers(answer)
    args = [a for a in invoke[1:]]
    args[args.index("--dialogue") + 1] = str(chat)
    code = main(args)
    out, err = capsys.readouterr()
    assert (code, err) == (0, "")
    assert out.splitlines()[1] == "summary: Amanda will bring Jerry cookies."
    (sent,) = invoked()
    assert json.loads(sent) == {
        "messages": [{"role": "user", "content": chat.read_text().strip()}],
        "max_tokens": 64,
        "top_p": 0.9,
        "temperature": 0.7,
    }

    # the README's delete is the endpoint the pipeline named in its plan
    assert delete[3] == plan.endpoint_name
    code = main([*delete[1:], "--yes"])
    out, err = capsys.readouterr()
    assert (code, err) == (0, "")
    assert f"deleted endpoint {plan.endpoint_name}" in out
    assert not sagemaker_backend().endpoints
    assert logs.LOG_GROUP == "/aws/sagemaker/TrainingJobs"


def test_the_readme_commands_are_found_in_a_fresh_shell(tmp_path: Path) -> None:
    """A new bash with nothing but what the README says (its `source .venv/bin/activate` line) finds `hfpipe`
    and every subcommand the README and the walk-through show; nothing of this test process leaks in."""
    import shutil

    readme = (ROOT / "README.md").read_text()
    setup = re.findall(r"^(source \S+)", readme, flags=re.M)
    assert setup == ["source .venv/bin/activate"], setup
    blocks = "\n".join(re.findall(r"```bash\n(.*?)```", readme, flags=re.S))
    shown = sorted({line.split()[1] for line in re.findall(r"^hfpipe [a-z]\S*.*$", blocks, flags=re.M)})
    assert {"local", "logs", "invoke", "start", "endpoints"} <= set(shown)
    checks = " && ".join(f"hfpipe {sub} --help >/dev/null" for sub in shown)
    bash = shutil.which("bash")
    assert bash
    proc = subprocess.run(
        [bash, "--noprofile", "--norc", "-c", f"{setup[0]} && command -v hfpipe && {checks}"],
        cwd=ROOT,
        env={"HOME": str(tmp_path), "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip().endswith(".venv/bin/hfpipe")
    # Without the README's line the command is not there: the check above is what makes it found.
    bare = subprocess.run(
        [bash, "--noprofile", "--norc", "-c", "command -v hfpipe"],
        cwd=ROOT,
        env={"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
    )
    assert bare.returncode != 0
