"""The local world from the command's side: `hfpipe local up|down|status`, and routing with `HFPIPE_LOCAL=1`.

    hfpipe local up --env dev [--port N] [--time-scale 0.01]   serve environment dev here until Ctrl-C
    hfpipe local status                                        the environments up on this machine
    hfpipe local down --env dev                                stop it from another terminal
    HFPIPE_LOCAL=1 hfpipe models --env dev                     any command with --env, against it

With `HFPIPE_LOCAL=1` every AWS client a command makes for environment ENV (`--env`, or the environment an
execution ARN names) goes to that environment's local server (hfpipe.local.world_file): its URL, dummy
credentials, its region. Without it nothing is routed: dev and prod are real environment names on AWS.
"""

from __future__ import annotations

import argparse
import os
import signal
import time
from pathlib import Path
from typing import Any

from rich.console import Console

from hfpipe import contract
from hfpipe.cli.clients import Clients, HfpipeError, UsageError, _botocore_session, validate_env_name
from hfpipe.cli.parser import Subparsers, env_option
from hfpipe.cli.terminal import with_console
from hfpipe.local import world_file


def requested() -> bool:
    """Whether HFPIPE_LOCAL asks for the local world: "1" yes; unset, "" or "0" no; anything else an error."""
    value = os.environ.get(world_file.ROUTE_ENV, "")
    if value not in ("", "0", "1"):
        raise HfpipeError(
            f"{world_file.ROUTE_ENV}={value!r} is not accepted; accepted: 1 (send the command to the local "
            "environment `hfpipe local up` serves), or 0 / unset (AWS)"
        )
    return value == "1"


class LocalClients(Clients):
    """The clients of one world environment: its server's URL, dummy credentials, its region."""

    def __init__(self, session: Any, endpoint_url: str) -> None:
        super().__init__(session)
        self.endpoint_url = endpoint_url

    def client(self, service: str) -> Any:
        if service not in self._clients:
            self._clients[service] = self.session.client(service, endpoint_url=self.endpoint_url)
        return self._clients[service]


def _env_of(args: argparse.Namespace) -> str | None:
    """--env, else the environment whose pipeline ran the execution ARN the command names."""
    if getattr(args, "env", None):
        return str(args.env)
    for ref in (getattr(args, "execution", None), getattr(args, "endpoint", None)):
        parts = str(ref or "").split(":")
        if ref and str(ref).startswith("arn:") and len(parts) >= 8:
            return contract.env_of_state_machine(parts[6])
    return None


def _how_to_start(env: str) -> str:
    """`hfpipe local up` for an environment of cdk.json; for any other name, `local up`'s own refusal of it
    (hfpipe.local.stacks.local_environments), which names the ones there are."""
    from hfpipe.local.checkout import LocalModeError, cdk_environments, checkout_root
    from hfpipe.local.stacks import local_environments

    try:
        environments = cdk_environments(checkout_root())
    except (LocalModeError, OSError, ValueError, KeyError):  # no checkout (an installed wheel) or no cdk.json
        return f"start it with hfpipe local up --env {env}"
    try:
        local_environments(env, environments)
    except LocalModeError as exc:
        return str(exc)
    return f"start it with hfpipe local up --env {env}"


def clients_for(args: argparse.Namespace, env: str | None = None) -> Clients:
    """The clients of local environment `env` (default: the command's), or a one-line error."""
    import boto3

    env = env or _env_of(args)
    if env is None:
        raise HfpipeError(
            f"with {world_file.ROUTE_ENV}=1, name the local environment with --env ENV (`hfpipe local status` "
            "lists those up)"
        )
    validate_env_name(env)
    entry = world_file.live(env)
    if entry is None:
        raise HfpipeError(f"no local environment {env!r} is up: {_how_to_start(env)}")
    region = getattr(args, "region", None)
    if region and region != entry.region:
        raise HfpipeError(
            f"--region {region}: local environment {env!r} runs in {entry.region}; accepted: {entry.region} "
            "or no --region"
        )
    session = boto3.Session(
        region_name=entry.region, botocore_session=_botocore_session(), **world_file.CREDENTIALS
    )
    return LocalClients(session, entry.url)


# --- hfpipe local up | down | status --------------------------------------------------------------------


def add_to(actions: Subparsers) -> None:
    """`hfpipe local up|down|status`: arguments and help."""
    up = actions.add_parser(
        "up", help="serve --env ENV of cdk.json here until Ctrl-C (commands reach it with HFPIPE_LOCAL=1)"
    )
    env_option(up, text="the environment of cdk.json to serve")
    up.add_argument(
        "--set",
        dest="sets",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a setting of ENV's cdk.json entry in this local world only (repeatable), e.g. --set "
        "shared_base.base_model=hfpipe-fixtures/tiny-llama --set shared_base.max_model_len=256 (the tiny "
        "Llama's context)",
    )
    up.add_argument(
        "--time-scale",
        type=float,
        default=0.01,
        help="waits take this many times their seconds (default 0.01: a 300 s wait takes 3 s)",
    )
    up.add_argument("--port", type=int, default=0, help="the port to serve on (default 0: any free port)")
    up.set_defaults(func=with_console(_up), command_parser=up)
    down = actions.add_parser("down", help="stop the environment --env ENV serves")
    env_option(down, text="the environment to stop")
    down.set_defaults(func=with_console(_down), command_parser=down)
    status = actions.add_parser("status", help="the environments up on this machine")
    status.set_defaults(func=with_console(_status), command_parser=status)


def _status(args: argparse.Namespace, console: Console) -> int:
    entries = world_file.live_entries()
    if not entries:
        console.print(f"no local environment is up (world folder {world_file.folder()})")
    for entry in entries:
        console.print(f"{entry.env}: {entry.url} ({entry.region}), pid {entry.pid}, up since {entry.started}")
    return 0


def _down(args: argparse.Namespace, console: Console) -> int:
    env = args.env
    validate_env_name(env)
    entry = world_file.live(env)
    if entry is None:
        raise HfpipeError(f"no local environment {env!r} is up")
    os.kill(entry.pid, signal.SIGTERM)
    deadline = time.monotonic() + 60
    while entry.alive():  # its record goes first, then its server
        if time.monotonic() > deadline:
            raise HfpipeError(f"local environment {env!r} (pid {entry.pid}) did not stop within 60 s")
        time.sleep(0.2)
    console.print(f"local environment {env} stopped")
    return 0


def _up(args: argparse.Namespace, console: Console) -> int:
    validate_env_name(args.env)
    from hfpipe.local.checkout import LocalModeError, checkout_root
    from hfpipe.local.outputs import runs_folder
    from hfpipe.local.stacks import local_environments
    from hfpipe.local.world import LocalWorld, cdk_environments

    try:  # an environment cdk.json does not name, or an override of no setting, before anything starts
        local_environments(args.env, cdk_environments(checkout_root()), args.sets)
    except LocalModeError as exc:
        raise HfpipeError(str(exc)) from None

    port = args.port
    if not 0 <= port < 65536:
        raise UsageError(f"--port {port} is not accepted; accepted: 0 (any free port) to 65535")
    if not 0 <= args.time_scale <= 1:
        raise UsageError(
            f"--time-scale {args.time_scale}: accepted: a number from 0 (waits skipped) to 1 (real time)"
        )
    current = world_file.live(args.env)
    if current is not None:
        raise HfpipeError(
            f"local environment {args.env!r} is already up (pid {current.pid}, {current.url}); stop it with "
            f"Ctrl-C in its terminal or `hfpipe local down --env {args.env}`"
        )
    stale = world_file.read(args.env)
    if stale is not None:
        console.print(f"replacing the stale record of {args.env!r} (pid {stale.pid} no longer serves it)")

    def stop(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    # Ctrl-C, and a plain `kill` (`hfpipe local down`), both stop it the same way.
    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    started = time.monotonic()
    console.print(f"local environment {args.env}: starting (its stacks, its moto account, fixture data)")
    world = LocalWorld(
        args.env,
        workdir=world_file.folder() / args.env,
        cache_dir=Path(runs_folder()) / ".cache",
        port=port,
        time_scale=args.time_scale,
        say=lambda line: console.print(line, markup=False, highlight=False),
        overrides=tuple(args.sets),
    )
    try:
        with world:
            _started(world, console, time.monotonic() - started)
            world.wait()
    except KeyboardInterrupt:
        pass  # how a user stops it: not an error
    except LocalModeError as exc:
        raise HfpipeError(str(exc)) from None
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    console.print(_stopped(args.env, world.workdir))
    return 0


def _stopped(env: str, workdir: Path) -> str:
    return (
        f"local environment {env} stopped: its account (executions, jobs, endpoints, registry) is gone; "
        f"its jobs' files stay in {workdir} until the next `hfpipe local up --env {env}`"
    )


def _started(world: Any, console: Console, seconds: float) -> None:
    scale = world.time_scale
    console.print(
        f"local environment {world.env} ({world.region}) up on {world.url} in {seconds:.1f} s (pid {os.getpid()})"
    )
    console.print(
        f"time scale {scale:g}: waits take {scale:g} x their seconds (a 300 s canary wait {300 * scale:g} s, "
        f"a 600 s bake {600 * scale:g} s); task timeouts stay real"
    )
    if world.fixtures:
        console.print(f"fixture data of {', '.join(world.fixtures)} in s3://{world.data_bucket}/")
    console.print(
        f"use it from another terminal: export {world_file.ROUTE_ENV}=1; then any command with --env "
        f"{world.env}, e.g. hfpipe start --env {world.env} --recipe tiny-lora --watch"
    )
    console.print(
        "Ctrl-C (or `hfpipe local down --env ...`) stops it; its account lives in this process only"
    )
