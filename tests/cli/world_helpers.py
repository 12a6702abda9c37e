"""The local world for the command tests: dev and prod of cdk.json started as `hfpipe local up` subprocesses (free
ports, a temporary world folder), and `hfpipe` commands run against them in subprocesses with HFPIPE_LOCAL=1,
as a user types them by hand (tests/cli/test_local_world.py, the README's lifecycle walk-through)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import pytest

from hfpipe.local import world_file

ROOT = Path(__file__).resolve().parents[2]
#: The environments the walk-through uses, as in cdk.json.
ENVIRONMENTS = ("dev", "prod")
#: Start-up here: synthesis (cached after the first), moto, the fixture models; two at once on two cores.
UP_TIMEOUT_S = 240


# --- a world of two environments, by hand ----------------------------------------------------------------


def _environ(home: Path, route: bool = True) -> dict[str, str]:
    environ = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "PYTHONUNBUFFERED": "1",
        "COLUMNS": "200",
        world_file.HOME_ENV: str(home),
    }
    environ.pop(world_file.ROUTE_ENV, None)
    if route:
        environ[world_file.ROUTE_ENV] = "1"
    return environ


def hfpipe(
    home: Path, *argv: str, route: bool = True, **environ: str | None
) -> subprocess.CompletedProcess[str]:
    """One `hfpipe` command in a subprocess, as typed in a terminal (with HFPIPE_LOCAL=1 unless told;
    `environ` sets variables, None unsets one)."""
    merged = {**_environ(home, route), **environ}
    return subprocess.run(
        [sys.executable, "-m", "hfpipe.cli", *argv],
        cwd=ROOT,
        env={key: value for key, value in merged.items() if value is not None},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


class World:
    """The environments up, each a `run(*argv)` that adds `--env ENV`; `hfpipe(*argv)` runs any command."""

    def __init__(self, home: Path, logs: dict[str, Path]) -> None:
        self.home = home
        self.logs = logs
        self.started_s: dict[str, float] = {}

    def __getitem__(self, env: str) -> Callable[..., subprocess.CompletedProcess[str]]:
        return lambda *argv, **kw: hfpipe(self.home, *argv, "--env", env, **kw)

    def hfpipe(self, *argv: str, **kw: Any) -> subprocess.CompletedProcess[str]:
        return hfpipe(self.home, *argv, **kw)

    def log(self, env: str) -> str:
        return self.logs[env].read_text()

    def live(self, env: str) -> world_file.Entry | None:
        with mock.patch.dict(os.environ, {world_file.HOME_ENV: str(self.home)}):
            return world_file.live(env)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    """dev and prod of cdk.json, each as `hfpipe local up --env ENV`."""
    home = tmp_path_factory.mktemp("world")
    yield from worlds_up(home, {env: ["local", "up", "--env", env] for env in ENVIRONMENTS})


def worlds_up(home: Path, commands: dict[str, list[str]]) -> Iterator[World]:
    """Each environment started by its `hfpipe` command (``commands``: env -> argv), yielded as a World once
    every one is up; each stopped with SIGTERM at the end, as `hfpipe local down` stops it."""
    logs = {env: home / f"{env}.log" for env in commands}
    started = time.monotonic()
    procs = {
        env: subprocess.Popen(
            [sys.executable, "-m", "hfpipe.cli", *argv],
            cwd=ROOT,
            env=_environ(home, route=False),
            stdout=logs[env].open("w"),
            stderr=subprocess.STDOUT,
            start_new_session=True,  # a Ctrl-C in the test's terminal is the test's, not theirs
        )
        for env, argv in commands.items()
    }
    world = World(home, logs)
    try:
        pending = set(commands)
        while pending:
            for env in sorted(pending):
                assert procs[env].poll() is None, (
                    f"hfpipe local up --env {env} ended:\n{logs[env].read_text()}"
                )
                if world.live(env) is not None:
                    pending.discard(env)
                    world.started_s[env] = time.monotonic() - started
            assert time.monotonic() - started < UP_TIMEOUT_S, {e: logs[e].read_text() for e in pending}
            time.sleep(0.5)
        yield world
    finally:
        for proc in procs.values():  # as `hfpipe local down` does
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for env, proc in procs.items():
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                pytest.fail(f"hfpipe local up --env {env} did not stop on SIGTERM:\n{logs[env].read_text()}")


def readme_commands(section: str) -> list[tuple[list[str], str]]:
    """The `hfpipe` commands of the one bash block under the README's ``## section`` heading, each as its
    arguments after `hfpipe` and its comment, in order (a walk-through's replay test runs them as typed)."""
    import re
    import shlex

    text = (ROOT / "README.md").read_text().split(f"## {section}", 1)[1].split("\n## ", 1)[0]
    [block] = re.findall(r"```bash\n(.*?)```", text, flags=re.S)
    commands = []
    for line in block.splitlines():
        if line.startswith("hfpipe "):
            command, _, comment = line.partition("  # ")
            commands.append((shlex.split(command)[1:], comment.strip()))
    return commands


def out(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout
