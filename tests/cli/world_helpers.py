"""The local world for the command tests: dev and prod of cdk.json started as `hfpipe local up` subprocesses (free
ports, a temporary world folder), and `hfpipe` commands run against them in subprocesses with HFPIPE_LOCAL=1,
as a user types them by hand (tests/cli/test_local_world.py: docs/local.md's local world and docs/deploy.md's
lifecycle walk-through). The `world` fixture starts and stops the environments with the `local up` and
`local down` lines of docs/local.md's block, as typed."""

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
from doc_blocks import block_commands

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


#: The block of docs/local.md whose `local up` and `local down` lines start and stop the `world` fixture.
WORLD_BLOCK = "local-world"


def world_lines(action: str, name: str = WORLD_BLOCK) -> dict[str, list[str]]:
    """The `hfpipe local ACTION --env ENV` lines of block `name`, by environment, as argv after `hfpipe`."""
    lines = [argv for argv, _ in block_commands(name) if argv[:2] == ["local", action]]
    return {argv[argv.index("--env") + 1]: argv for argv in lines}


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    """dev and prod of cdk.json, started by docs/local.md's `hfpipe local up --env ENV` lines and stopped by its
    `hfpipe local down --env ENV` lines, as typed."""
    home = tmp_path_factory.mktemp("world")
    ups, downs = world_lines("up"), world_lines("down")
    assert sorted(ups) == sorted(downs) == sorted(ENVIRONMENTS), (ups, downs)
    yield from worlds_up(home, ups, downs)


def worlds_up(
    home: Path, commands: dict[str, list[str]], downs: dict[str, list[str]] | None = None
) -> Iterator[World]:
    """Each environment started by its `hfpipe` command (``commands``: env -> argv), yielded as a World once
    every one is up; at the end each stopped by its `downs` command (`hfpipe local down --env ENV`, run as
    typed from another terminal), else with SIGTERM, as `hfpipe local down` stops it."""
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
    downs = downs or {}
    up = False
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
        up = True
        yield world
    finally:
        # Once every environment was up, its own `local down` line stops it (a failed start: SIGTERM, which is
        # what `local down` sends, so the start's own failure is the one reported).
        stopped = {env: hfpipe(home, *downs[env], route=False) for env in downs if up}
        for env, proc in procs.items():
            if env not in stopped and proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for env, proc in procs.items():
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                pytest.fail(f"hfpipe local up --env {env} did not stop on SIGTERM:\n{logs[env].read_text()}")
        for env, down in stopped.items():
            assert down.returncode == 0, (downs[env], down.stdout, down.stderr)


def out(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout
