"""`hfpipe local`: the pipeline end to end on this machine, no AWS account (docs/local.md).

The pipeline is stood up by `hfpipe.local.run.LocalRun`; this command starts the execution and follows it
with `hfpipe watch`'s view on the local moto account, then writes the outputs to `--out/<execution name>/`.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console

from hfpipe import kinds
from hfpipe.cli.aws import Clients, HfpipeError, UsageError
from hfpipe.cli.parser import (
    LOCAL_PORT,
    Subparsers,
    dry_run_options,
    option_rules,
    recipe_options,
    runs_folder_option,
    with_actions,
)
from hfpipe.cli.terminal import with_console
from hfpipe.core.recipe import serving_fit

if TYPE_CHECKING:  # annotations only: `hfpipe local` imports the command's recipes where it runs
    from hfpipe.cli.recipe.recipes import Loaded

#: Under --out: the synthesized stacks local runs share (hfpipe.local.stacks.synth_stacks).
CACHE_FOLDER = ".cache"


def add_to(sub: Subparsers) -> None:
    """`hfpipe local` (one recipe end to end here) and its actions up, down, status and prune."""
    from hfpipe.cli import local_prune, local_world

    p = sub.add_parser(
        "local",
        help="run a recipe end to end on this machine, no AWS account; or serve an environment",
        description="Run a recipe end to end on this machine, no AWS account: hfpipe local --recipe NAME. Or, "
        "with an action, serve an environment of cdk.json here (hfpipe local up --env dev).",
    )
    actions = with_actions(p, default=None)
    local_world.add_to(actions)
    local_prune.add_to(actions)
    recipe_options(p, "training.hyperparameters.max_steps=8", required=False)
    runs_folder_option(p, "folder for the run's model.tar.gz, log, metrics and report")
    dry_run_options(p, " of the run")
    p.add_argument(
        "--serve",
        action="store_true",
        help="after the run, serve the model on 127.0.0.1 (GET /ping, POST /invocations) until Ctrl-C",
    )
    p.add_argument("--port", type=int, help=f"port for --serve (default {LOCAL_PORT}; 0: any free)")
    p.add_argument(
        "--channel",
        action="append",
        dest="channels",
        default=[],
        metavar="NAME=FOLDER",
        help="run with a local folder as input channel NAME (repeatable), e.g. training=./data",
    )
    # Not an option of a run, which has a throwaway environment of its own: kept to say so (run).
    p.add_argument("--env", help=argparse.SUPPRESS)
    option_rules(p, needs={"--json": "--dry-run", "--port": "--serve"})
    p.set_defaults(func=with_console(run), command_parser=p)


def run(args: argparse.Namespace, console: Console) -> int:
    """Run one recipe end to end locally; prints the live view, the smoke-test answer and the report."""
    if args.recipe is None:
        raise UsageError(
            "hfpipe local needs --recipe NAME (see `hfpipe recipes`), or one of its actions: up, down, "
            "status, prune"
        )
    if args.env is not None:
        raise HfpipeError(
            f"--env {args.env}: `hfpipe local --recipe` runs in a throwaway environment of its own; to serve "
            f"{args.env} here: hfpipe local up --env {args.env}"
        )
    return _run_recipe(args, console)


def _run_recipe(args: argparse.Namespace, console: Console) -> int:
    """One recipe end to end locally."""
    from hfpipe.cli.recipe import recipes
    from hfpipe.local.checkout import LocalModeError, checkout_root

    try:
        checkout_root()
    except LocalModeError as exc:
        raise HfpipeError(str(exc)) from None
    loaded = recipes.load(args.recipe, args.sets)
    _runs_folder_usable(Path(args.out))
    server = None if args.dry_run else _bound_server(args, loaded)
    try:
        return _prepared_run(args, loaded, console, server)
    finally:
        if server is not None:
            server.server_close()


def _bound_server(args: argparse.Namespace, loaded: Loaded) -> Any:
    """--serve's server, bound now: a taken port fails before the stacks are synthesized and a run of minutes,
    not after them; None without --serve."""
    if not args.serve:
        return None
    from hfpipe.local.serving.serve import ModelServer, PortInUseError

    port = LOCAL_PORT if args.port is None else args.port
    if not 0 <= port < 65536:
        raise UsageError(f"--port {port} is not accepted; accepted: 0 (any free port) to 65535")
    if not loaded.resolved["deploy"]:
        raise HfpipeError(
            f"--serve: recipe {loaded.name!r} sets deploy: false, so there is no model to serve"
        )
    try:
        return ModelServer(port)
    except PortInUseError as exc:
        raise HfpipeError(str(exc)) from None


def _prepared_run(args: argparse.Namespace, loaded: Loaded, console: Console, server: Any) -> int:
    """The recipe checked as it runs here, its source packed, then the dry run's plan or the run."""
    from hfpipe.cli.recipe import sources
    from hfpipe.local.training.substitute import has_gpu

    stage = _stages()
    # The local environment's rules on the recipe as it runs here come first: before an own source is cloned
    # or packed, and before torch is imported to look for a GPU. Neither a GPU nor an own script's parser
    # changes more than hyperparameters, which those rules do not read.
    early = _as_run_here(args, loaded, False, None)
    warming = _Warming(early)
    _in_local_environment(Path(args.out).resolve() / CACHE_FOLDER, early, say=stage, meanwhile=warming.start)
    if warming.thread is not None:
        warming.thread.join()  # before this thread imports any of what it imports
    # A recipe's own dir or git source, packed (a git one cloned) once, before anything is built.
    packed = sources.pack_source(
        loaded.ref, loaded.resolved, say=lambda line: console.print(line, markup=False, highlight=False)
    )
    substitutions = _as_run_here(args, loaded, has_gpu(), sources.script_arguments(loaded.resolved, packed))
    if args.dry_run:
        return _dry_run(args, loaded, packed, substitutions, console)
    with interruptible():
        built = warming.join(substitutions)
        return _run(args, loaded, packed, substitutions, console, server, stage, built)


def _dry_run(
    args: argparse.Namespace, loaded: Loaded, packed: Any, substitutions: Any, console: Console
) -> int:
    """The plan the run's Plan state would make (hfpipe.local.dry_run), shown as `start --dry-run` shows
    one; nothing is built, trained or written."""
    from hfpipe.cli.recipe import sources
    from hfpipe.cli.run import dryrun
    from hfpipe.core import json_text
    from hfpipe.core.names import default_execution_name
    from hfpipe.core.validate import RecipeError
    from hfpipe.local.checkout import LocalModeError
    from hfpipe.local.dry_run import local_plan

    if args.serve:
        raise UsageError("--serve serves a model a run trained; --dry-run trains none: give one of them")
    execution_input = _execution_input(substitutions)

    def upload(s3: Any, bucket: str) -> dict[str, Any]:
        uri, _ = sources.upload(s3, bucket, packed)
        return sources.with_uploaded(execution_input, uri, packed.sha256)

    try:
        plan = local_plan(
            execution_input,
            default_execution_name(loaded.name),
            Path(args.out).resolve() / CACHE_FOLDER,
            upload=None if packed is None else upload,
        )
    except RecipeError as err:
        raise HfpipeError(f"recipe {loaded.name!r} cannot run locally: {err}") from None
    except LocalModeError as exc:
        raise HfpipeError(str(exc)) from None
    if args.json:
        sys.stdout.write(json_text.dumps(plan.to_json(), indent=2, default=str) + "\n")
        return 0
    _substituted(substitutions, console)
    dryrun.show(console, plan, [])
    return 0


def _substituted(substitutions: Any, console: Console) -> None:
    """What local mode runs instead of what cannot exist here (a hub model, GPUs...), one line each."""
    lines = substitutions.lines()
    console.print(
        f"substituted for this machine ({len(lines)}):" if lines else "substituted for this machine: nothing"
    )
    for line in lines:
        console.print(f"  - {line}", markup=False, highlight=False)


@contextlib.contextmanager
def interruptible() -> Iterator[None]:
    """Ctrl-C (SIGINT) and a plain `kill` (SIGTERM) stop the command as KeyboardInterrupt, ending its
    training processes and marking the output folder (hfpipe.local.run), also where it was started with
    SIGINT ignored (a shell's background job, a test runner's worker), whose ignoring a child inherits."""
    import signal

    def stop(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _run(
    args: argparse.Namespace,
    loaded: Loaded,
    packed: Any,
    substitutions: Any,
    console: Console,
    server: Any,
    stage: Any,
    built: Any = None,
) -> int:
    """`packed`: the recipe's own source packed (hfpipe.core.recipe.sourcedir.Packed), None for the project's."""
    name, out = _new_run_folder(Path(args.out), loaded.name)
    started = time.monotonic()
    stage(f"local run {name} (output in {out})")
    _substituted(substitutions, console)

    import boto3

    from hfpipe.cli.run.report import build_report
    from hfpipe.cli.run.watch import watch
    from hfpipe.local.checkout import LocalModeError
    from hfpipe.local.run import LocalRun

    try:
        with (
            _kept_once_written(out),
            LocalRun(
                substitutions, out, Path(args.out).resolve() / CACHE_FOLDER, say=stage, built=built
            ) as local,
        ):
            try:
                # The overrides are in the substituted recipe already.
                execution_input = _own_source(local, packed, loaded, _execution_input(substitutions), console)
                arn = local.start(name, execution_input)
                stage("started the execution: the live view follows it")
                clients = Clients(boto3.Session(region_name=local.region))
                snap = watch(clients, arn, console, interval=0.5, local=True)
                left = local.leftovers()
            finally:
                local.close_endpoints()
            report = build_report(clients, snap)
            report["local_mode"] = True
            local.write_outputs(report, snap.training_job)
            if report.get("model_warning"):
                console.print(f"warning: {report['model_warning']}", markup=False, highlight=False)
    except LocalModeError as exc:
        raise HfpipeError(str(exc)) from None
    except KeyboardInterrupt:
        _say_interrupted(name, out)
        raise
    console.print(f"left in the local account: {sum(map(len, left.values()))} endpoints/configs/models")
    now = time.monotonic()
    console.print(
        f"output: {out} (the run {now - started:.0f} s; {now - stage.started:.0f} s in all, set-up included)"
    )
    if snap.status != "SUCCEEDED":
        return 1
    if server is not None:
        return _serve(server, out, loaded, console)
    return 0


def _say_interrupted(name: str, out: Path) -> None:
    """What Ctrl-C stopped and where the incomplete run lies (its INTERRUPTED note), before `interrupted`."""
    from hfpipe.local.outputs import INTERRUPTED

    note = out / INTERRUPTED
    if note.is_file():
        print(f"local run {name}: {note.read_text().strip()}: {out}", file=sys.stderr)


def _as_run_here(
    args: argparse.Namespace, loaded: Loaded, gpu: bool, script_arguments: frozenset[str] | None
) -> Any:
    """The recipe as it would run (with --set), then what this machine needs instead, with the --channel
    folders; `script_arguments`: what an own script's parser takes (hfpipe.cli.recipe.sources.script_arguments)."""
    from hfpipe.core.recipe.recipes import apply_overrides
    from hfpipe.local.training.substitute import for_this_machine

    try:
        substitutions = for_this_machine(
            apply_overrides(loaded.raw, loaded.overrides), gpu=gpu, script_arguments=script_arguments
        )
    except ValueError as err:
        raise HfpipeError(f"recipe {loaded.name!r} cannot run locally: {err}") from None
    _use_channels(substitutions, args.channels or [])
    return substitutions


def _execution_input(substitutions: Any) -> dict[str, Any]:
    """What the local execution starts with (the overrides are in the substituted recipe already)."""
    return {"recipe": substitutions.recipe, "poll_seconds": 1}


def _stages() -> Any:
    """What a run is doing, a line per stage on stderr with the seconds since the command started, so the
    first seconds of a cold run (synthesis, fixtures, the engine) are not silent, and stdout stays what the
    command answers (a dry run's JSON, the live view, the report)."""
    started = time.monotonic()
    err = Console(stderr=True, soft_wrap=True, highlight=False)

    def stage(text: str) -> None:
        err.print(f"[{time.monotonic() - started:4.0f} s] {text}", markup=False, highlight=False)

    stage.started = started  # type: ignore[attr-defined]  # the command's start, for its last line
    return stage


class _Warming:
    """What a run does later that takes a core for seconds (importing torch and transformers, building the
    recipe's fixtures: about 10 s here), done on a second thread while the app's stacks are synthesized in a
    child process on a first run, so the two overlap on a machine of two cores. The command's thread joins it
    before it imports any of them itself: two threads importing one package at once can deadlock on its
    module locks. The fixtures are built in a folder of their own, moved into the run's folder once the run
    has one (hfpipe.local.run.LocalRun's ``built``), and removed when the command ends before that."""

    def __init__(self, substitutions: Any) -> None:
        self.substitutions = substitutions  # the recipe as it runs here, before the look for a GPU
        self.thread: threading.Thread | None = None
        self.built: tuple[Path, dict[str, Path]] | None = None

    def start(self) -> None:
        import atexit
        import tempfile

        folder = Path(tempfile.mkdtemp(prefix="hfpipe-fixtures-"))
        atexit.register(shutil.rmtree, folder, ignore_errors=True)  # gone once moved, or not needed

        def build() -> None:
            with contextlib.suppress(Exception):  # what fails here fails again where the run builds it
                import torch  # noqa: F401
                import transformers  # noqa: F401

                self.built = folder, self.substitutions.fixture_channels(folder)

        # A daemon: a recipe refused meanwhile ends the command without waiting for it.
        self.thread = threading.Thread(target=build, name="hfpipe-warm", daemon=True)
        self.thread.start()

    def join(self, substitutions: Any) -> tuple[Path, dict[str, Path]] | None:
        """The fixtures built meanwhile, when ``substitutions`` (the recipe as it runs, after the look for a
        GPU) builds the same ones."""
        if self.thread is None:
            return None
        self.thread.join()
        same = ("model_family", "data_kind", "hub_rows", "given_channels")
        if any(getattr(self.substitutions, a) != getattr(substitutions, a) for a in same):
            return None
        wanted = set(substitutions.recipe["training"].get("channels") or {})
        early = set(self.substitutions.recipe["training"].get("channels") or {})
        return self.built if wanted == early else None


def _in_local_environment(
    cache_dir: Path, substitutions: Any, say: Any = None, meanwhile: Any = None
) -> None:
    """What the local Plan state would refuse of the recipe as it runs here, refused before anything is built
    or packed, in the line `hfpipe start` gives: the same entry into the recipe rules (hfpipe.core.run.plan.accept)
    with the local environment's settings, read from its synthesized stacks as its Plan function has them (an
    own source's checks come once it is packed and uploaded)."""
    from hfpipe.cli.run.dryrun import in_environment
    from hfpipe.core.recipe.schema import RecipeError
    from hfpipe.core.run import plan as core_plan
    from hfpipe.local.checkout import FolderError, LocalModeError
    from hfpipe.local.stacks import plan_config, synth_stacks

    try:
        accepted = core_plan.accept(_execution_input(substitutions))
        config = plan_config(synth_stacks(cache_dir, say=say, meanwhile=meanwhile))
    except FolderError as exc:  # the cache folder under --out: a read-only file system, no permission
        if exc.folder != cache_dir:
            raise HfpipeError(str(exc)) from None
        raise _cannot_create(cache_dir.parent, cache_dir, exc.error) from None
    except RecipeError as err:
        raise HfpipeError(f"recipe {substitutions.recipe['name']!r} cannot run locally: {err}") from None
    except LocalModeError as exc:
        raise HfpipeError(str(exc)) from None
    in_environment(accepted, config, source_later=True)


def _cannot_create(runs: Path, folder: Path, err: OSError) -> HfpipeError:
    """The one line of an --out under which a folder cannot be made or written (a file on the way, no
    permission, a read-only file system)."""
    return HfpipeError(
        f"--out {str(runs)!r}: cannot create the output folder {str(folder)!r} ({err.strerror or err}); "
        "accepted: a folder path you can write to (not a file)"
    )


def _runs_folder_usable(runs: Path) -> None:
    """--out looked at before anything is synthesized or built there, without making it (a refused recipe
    leaves nothing): its nearest existing folder must be a folder this process may write to."""
    import errno

    folder = runs.resolve()
    existing = folder
    while not existing.exists():
        existing = existing.parent
    problem = (
        errno.ENOTDIR
        if not existing.is_dir()
        else errno.EACCES
        if not os.access(existing, os.W_OK | os.X_OK)
        else None
    )
    if problem is not None:
        raise _cannot_create(runs, folder, OSError(problem, os.strerror(problem)))


def _new_run_folder(runs: Path, recipe: str) -> tuple[str, Path]:
    """A new execution's name and its folder under --out, made by this command (never a folder another run
    holds: two runs started within one second get names a second apart) and writable."""
    from hfpipe.core.names import default_execution_name

    for _ in range(3):
        name = default_execution_name(recipe)
        out = runs.resolve() / name
        try:
            out.mkdir(parents=True)
            (out / ".write-test").touch()
            (out / ".write-test").unlink()
        except FileExistsError:
            time.sleep(1.0)  # the next second names the next run
            continue
        except OSError as err:
            raise _cannot_create(runs, out, err) from None
        return name, out
    raise HfpipeError(f"--out {str(runs)!r}: runs of {recipe!r} keep starting in the same second; try again")


@contextlib.contextmanager
def _kept_once_written(out: Path) -> Iterator[None]:
    """The run's folder goes again when the command ends with an error before the run wrote anything of its
    own (its log, report or INTERRUPTED: hfpipe.local.outputs.RUN_MARKERS), so a refused run leaves no folder
    behind; this command made it (`_new_run_folder`), so it holds nothing else."""
    from hfpipe.local.outputs import RUN_MARKERS

    try:
        yield
    except BaseException:
        if not any((out / marker).exists() for marker in RUN_MARKERS):
            shutil.rmtree(out, ignore_errors=True)
        raise


def _use_channels(substitutions: Any, given: list[str]) -> None:
    """`--channel NAME=FOLDER`: a local folder as an input channel, instead of the task's fixture data."""
    from hfpipe.core import validate

    seen: set[str] = set()
    for text in given:
        name, sep, folder = text.partition("=")
        if name in seen:
            raise UsageError(
                f"--channel {text!r}: channel {name!r} is given twice; accepted: one folder per channel"
            )
        seen.add(name)
        if not sep or not folder:
            raise UsageError(
                f"--channel {text!r} is not NAME=FOLDER; accepted: e.g. --channel training=./data"
            )
        try:
            validate.channel_name(name, "--channel")
        except validate.RecipeError as err:
            raise UsageError(str(err)) from None
        path = Path(folder).expanduser().resolve()
        if not path.is_dir():
            raise UsageError(
                f"--channel {text!r}: {str(path)!r} is not a folder; accepted: a local data folder"
            )
        if not any(p.is_file() for p in path.rglob("*")):
            raise UsageError(
                f"--channel {text!r}: {str(path)!r} holds no file; accepted: a folder with the channel's data "
                "(the records the task's script reads)"
            )
        substitutions.use_channel(name, path)


def _own_source(
    local: Any, packed: Any, loaded: Loaded, execution_input: dict[str, Any], console: Console
) -> dict[str, Any]:
    """A recipe's own dir or git source (packed by `run`) uploaded to the local artifacts bucket, as `hfpipe
    start` does (hfpipe.cli.recipe.sources); the execution input names the archive."""
    from hfpipe.cli.recipe import sources

    if packed is None:
        return execution_input
    for note in sources.check_source(loaded.accepted, packed).notes:
        console.print(f"note: {note}", markup=False, highlight=False)
    uri, _ = sources.upload(local.s3, local.artifacts_bucket, packed)
    files = f"{len(packed.files)} file{'s' if len(packed.files) != 1 else ''}"
    console.print(f"training source: {uri} ({files})", markup=False, highlight=False)
    return sources.with_uploaded(execution_input, uri, packed.sha256)


def _serve(server: Any, out: Path, loaded: Loaded, console: Console) -> int:
    """Serve the run's model.tar.gz through its own code/inference.py until Ctrl-C."""
    from hfpipe.local.serving.endpoint import local_endpoint_class

    model = out / "model.tar.gz"
    if not model.is_file():
        raise HfpipeError(f"the run left no {model} to serve")
    recipe = loaded.resolved
    # The serving kind names the class that emulates its server here.
    # The server settings the Plan writes (the kind's fit rule's), on this one machine, under the recipe's.
    environment = {**serving_fit.local_environment(recipe), **recipe["serving"]["environment"]}
    endpoint = local_endpoint_class(recipe["serving"]["kind"])(
        model, workdir=out / "serving", environment=environment
    )
    port = server.server_address[1]
    console.print(f"serving {model} on {server.url} (GET /ping, POST /invocations); Ctrl-C stops it")
    console.print(
        f"send it requests with: hfpipe invoke --local --port {port} --data JSON (or --dialogue FILE)"
    )
    banner = kinds.serving_kind(recipe["serving"]["kind"]).local_banner
    if banner:
        console.print(banner.format(url=server.url, environment=environment), markup=False, highlight=False)
    # Ctrl-C and a plain `kill` both stop serving the same way (`run` holds the command `interruptible`).
    try:
        server.serve(
            endpoint,
            entry_point=recipe["training"]["entry_point"],
            recipe=loaded.name,
            task=recipe["task"],
            serving_kind=recipe["serving"]["kind"],
        )
    except KeyboardInterrupt:
        pass  # how a user stops serving: not an error
    finally:
        endpoint.close()
    console.print("stopped serving")
    return 0
