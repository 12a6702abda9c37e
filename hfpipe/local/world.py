"""The local world: one environment of cdk.json on this machine, up until stopped (`hfpipe local up --env ENV`;
docs/local.md, "The local world").

Where `hfpipe.local.run` stands up a throwaway `local` environment for one run, a world environment is the
environment itself, named as in cdk.json with its region and settings (made local-friendly by
`hfpipe.local.stacks.local_environments`), served by its own process until Ctrl-C/SIGTERM: its stacks on moto
(a `LocalEngine`, every state machine of the template), moto's HTTP server on 127.0.0.1 that every
`hfpipe ... --env ENV` command reaches with `HFPIPE_LOCAL=1`, the tiny recipes' fixture data in its data bucket,
and a runtime (`WorldRuntime`) that trains and serves a job's recipe as written, refusing, as a failed job, one
local mode would have to change. Another environment's region is that environment's own world process (the
world file): one process per environment, as separate accounts are. Waits are scaled by ``time_scale``; task
timeouts stay real. What is not played is local mode's list (docs/pipeline.md, "Local engine"); everything
lives in this process's memory and ends with it.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import json
import os
import shutil
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from unittest import mock

from hfpipe import contract
from hfpipe.local import world_file
from hfpipe.local.checkout import LAMBDA_PACKAGE, LocalModeError, cdk_environments, checkout_root
from hfpipe.local.engine import moto_patches
from hfpipe.local.engine.engine import LocalEngine, quieted
from hfpipe.local.runtime import LocalRuntime, upload_dir
from hfpipe.local.stacks import local_data, local_environments, synth_stacks

#: Waits take this share of their seconds: a deploy's 300 s canary wait 3 s, its 600 s bake 6 s.
DEFAULT_TIME_SCALE = 0.01
HOST = "127.0.0.1"


class WorldRuntime(LocalRuntime):
    """The runtime of a world environment: per job, the recipe of the execution that launched it."""

    def __init__(self, engine: LocalEngine, workdir: Path, say: Callable[[str], None]) -> None:
        super().__init__(engine.client("s3"), engine.client("sagemaker"), workdir)
        self.engine = engine
        self.say = say
        self._planned: dict[str, tuple[dict[str, Any], Any]] = {}

    def training(self, request: dict[str, Any], job: Any) -> None:
        name = request["TrainingJobName"]
        try:
            recipe, substitutions = self._plan(request)
        except ValueError as err:  # no local stand-in at all (hfpipe.local.training.substitute)
            return self._refuse(job, f"the recipe cannot train here: {err}")
        if substitutions is not None and substitutions.recipe != recipe:
            changed = "; ".join(line for line in substitutions.lines() if not line.startswith(_MACHINE_ONLY))
            return self._refuse(
                job,
                f"recipe {recipe['name']!r} cannot train in the local world as written ({changed}); "
                f"run it with `hfpipe local --recipe {recipe['name']}`, which substitutes these",
            )
        self.say(f"training job {name} (recipe {recipe.get('name', '?')}): training on this machine")
        super().training(request, job)
        self.say(f"training job {name}: {job.training_job_status} in {job.training_time_in_seconds} s")

    def _refuse(self, job: Any, reason: str) -> None:
        """End the job Failed with `reason`, as SageMaker ends one that cannot start."""
        self.say(f"training job {job.training_job_name}: refused: {reason}")
        job.training_job_status = job.secondary_status = "Failed"
        job.failure_reason = reason
        job.training_start_time = job.training_end_time = datetime.now(UTC)
        job.final_metric_data_list = []  # moto's canned ones otherwise

    def substitutions_for(self, request: dict[str, Any]) -> Any:
        return self._plan(request)[1]

    def serving_recipe(self, model: dict[str, Any]) -> dict[str, Any]:
        tags = {t["Key"]: t["Value"] for t in self.sagemaker.list_tags(ResourceArn=model["ModelArn"])["Tags"]}
        return self._raw_recipe_of(tags) or {}

    def training_log(self, job_name: str) -> Path:
        path = self.workdir / "jobs" / job_name / "training.log"
        path.parent.mkdir(parents=True, exist_ok=True)
        return path

    def _plan(self, request: dict[str, Any]) -> tuple[dict[str, Any], Any]:
        """(the job's recipe, its Substitutions) for a CreateTrainingJob request; ({}, None) for a job no
        recipe is known for, which runs as it is."""
        from hfpipe.local.training.substitute import for_this_machine, has_gpu

        name = request["TrainingJobName"]
        if name not in self._planned:
            recipe = self._raw_recipe_of({t["Key"]: t["Value"] for t in request.get("Tags") or []})
            self._planned[name] = (recipe, for_this_machine(recipe, gpu=has_gpu())) if recipe else ({}, None)
        return self._planned[name]

    def _raw_recipe_of(self, tags: dict[str, str]) -> dict[str, Any] | None:
        """The recipe, raw (as read, with the execution's --set overrides; not validated) of a resource an execution tagged: the
        execution's input, else the recipe its tag names, else the model package group a deployed model's
        version belongs to (hfpipe-<env>-<recipe>)."""
        from hfpipe.core.recipe.recipes import apply_overrides, load_recipe

        execution = tags.get(contract.TAG_EXECUTION)
        if execution:
            arn = self.engine.state_machine_arn.replace(":stateMachine:", ":execution:", 1) + f":{execution}"
            with contextlib.suppress(Exception):  # not this pipeline's (another state machine's, or gone)
                described = self.engine.client("stepfunctions").describe_execution(executionArn=arn)
                execution_input = json.loads(described["input"])
                return apply_overrides(execution_input["recipe"], execution_input.get("overrides"))
        name = tags.get(contract.TAG_RECIPE)
        version = tags.get(contract.TAG_MODEL_VERSION, "")
        group = version.split(":model-package/")[-1].split("/")[0] if ":model-package/" in version else ""
        if not name and group.startswith(f"{contract.PROJECT}-"):
            prefix = group.split("-", 2)  # hfpipe, <env>, <recipe> (environment names have no dash)
            name = prefix[2] if len(prefix) == 3 else None
        if name:
            with contextlib.suppress(Exception):  # not a bundled recipe
                return load_recipe(name)
        return None


#: Substitution lines about the machine alone (hfpipe.local.training.substitute): the recipe itself is unchanged.
_MACHINE_ONLY = ("instance_type:", "container.training:", "serving.kind:")


class LocalWorld:
    """A context manager: environment `env` of cdk.json up on moto behind an HTTP server, recorded in the
    world file while it is up."""

    def __init__(
        self,
        env: str,
        *,
        workdir: Path,
        cache_dir: Path,
        port: int = 0,
        time_scale: float = DEFAULT_TIME_SCALE,
        say: Callable[[str], None] = print,
        overrides: tuple[str, ...] = (),
    ) -> None:
        self.env = env
        #: `hfpipe local up --set KEY=VALUE`: settings of this environment's cdk.json entry, in this world only.
        self.overrides = overrides
        self.workdir = workdir
        self.cache_dir = cache_dir
        self.port = port
        self.time_scale = time_scale
        self.say = say
        self.fixtures: list[str] = []
        self._stack = contextlib.ExitStack()

    def __enter__(self) -> LocalWorld:
        try:
            self._start()
        except BaseException:
            self._stack.close()
            raise
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stack.close()

    def _start(self) -> None:
        from hfpipe.local.training.container import stop_all

        root = checkout_root()
        environments = local_environments(self.env, cdk_environments(root), self.overrides)
        self.region = str(environments[self.env]["region"])
        stacks = synth_stacks(self.cache_dir, root, env=self.env, environments=environments, say=self.say)
        data = local_data(stacks["Data"], self.env)
        self.data_bucket = data.data_bucket
        self._stack.enter_context(quieted("moto", "moto.stepfunctions", "werkzeug"))  # each request, narrated
        shutil.rmtree(self.workdir, ignore_errors=True)  # the last run's jobs; its account is gone with it
        self.say("starting the local engine: moto's account, the stacks' resources, the state machines")
        self.engine = LocalEngine(
            stacks["Pipeline"],
            training=lambda request, job: self.runtime.training(request, job),
            endpoint=lambda name, body: self.runtime.endpoint(name, body),
            region=self.region,
            imports=data.imports,
            time_scale=self.time_scale,
        )
        self._stack.enter_context(self.engine)
        self.engine.world = self  # InvokeEndpoint over HTTP, other environments' S3 objects (moto_patches)
        self.runtime = WorldRuntime(self.engine, self.workdir, self.say)
        self.engine.fleets = self.runtime  # an endpoint update serves the old and new config side by side
        self.engine.processing = self.runtime.processing  # the evaluation's processing jobs run here
        self._stack.callback(self.runtime.close)
        # Last in, first out: training process groups end before the account they write to.
        self._stack.callback(stop_all)
        self._create_buckets(data.buckets)
        self.engine.put_parameters(data.parameters)
        self.say("building the fixture data of the recipes that train here as written (hfpipe.fixtures)")
        self.fixtures = self._upload_fixtures(data.data_bucket)
        self._route_other_regions(environments)
        self._serve()

    def _create_buckets(self, buckets: list[str]) -> None:
        s3 = self.engine.client("s3")
        existing = {b["Name"] for b in s3.list_buckets().get("Buckets", [])}
        where = (
            {}
            if self.region == "us-east-1"
            else {"CreateBucketConfiguration": {"LocationConstraint": self.region}}
        )
        for bucket in sorted(set(buckets) - existing):  # the DataStack's; the engine made the imported ones
            s3.create_bucket(Bucket=bucket, **where)

    def _upload_fixtures(self, bucket: str) -> list[str]:
        """Every bundled recipe that trains here as written gets its fixture data at its channel prefixes."""
        from hfpipe.core.recipe.recipes import available_recipes, load_recipe
        from hfpipe.local.training.substitute import for_this_machine, has_gpu

        s3, uploaded = self.engine.client("s3"), []
        for name in available_recipes():
            recipe = load_recipe(name)
            try:
                substitutions = for_this_machine(recipe, gpu=has_gpu())
            except ValueError:
                continue  # no local stand-in at all
            prefixes: dict[str, str] = recipe["training"].get("channels") or {}
            if substitutions.recipe != recipe or not prefixes:
                continue
            for channel, folder in substitutions.fixture_channels(self.workdir / "fixtures" / name).items():
                upload_dir(s3, folder, bucket, prefixes[channel])
            uploaded.append(name)
        return uploaded

    def _route_other_regions(self, environments: dict[str, Any]) -> None:
        aws = importlib.import_module(f"{LAMBDA_PACKAGE}.aws")
        regions: dict[str, list[str]] = {}
        for name, entry in sorted(environments.items()):
            if name != self.env and entry["region"] != self.region:
                regions.setdefault(entry["region"], []).append(name)
        routes = {
            region: functools.partial(_world_client, region, names) for region, names in regions.items()
        }
        self._stack.enter_context(mock.patch.dict(aws.REGION_OVERRIDES, routes))

    def _serve(self) -> None:
        server = moto_patches.threaded_server(HOST, self.port)
        server.start()
        self._stack.callback(server.stop)
        host, port = server.get_host_and_port()
        self.url = f"http://{host}:{port}"
        self.entry = world_file.Entry(
            env=self.env,
            url=self.url,
            region=self.region,
            pid=os.getpid(),
            started=datetime.now(UTC).isoformat(timespec="seconds"),
        )
        current = world_file.live(self.env)
        if current is not None and current.pid != self.entry.pid:  # another process came up meanwhile
            raise LocalModeError(
                f"local environment {self.env!r} is already up (pid {current.pid}, {current.url})"
            )
        world_file.write(self.entry)
        self._stack.callback(world_file.remove, self.env, self.entry.pid)  # first thing undone

    def foreign_object(
        self, bucket: str, key: str, version_id: str | None
    ) -> tuple[bytes, dict[str, str]] | None:
        """An object of a bucket another world environment holds (S3's bucket names are global), read from
        that environment's server: its body and user metadata; None when no environment up holds the bucket."""
        import botocore.exceptions

        for entry in world_file.live_entries():
            if entry.env == self.env:
                continue
            s3 = _client(entry, "s3", None)
            try:
                s3.head_bucket(Bucket=bucket)
            except botocore.exceptions.ClientError:
                continue  # not this environment's bucket
            found = s3.get_object(Bucket=bucket, Key=key, **({"VersionId": version_id} if version_id else {}))
            return found["Body"].read(), dict(found.get("Metadata") or {})
        return None

    def wait(self) -> None:
        """Serve until interrupted (Ctrl-C, or SIGTERM turned into KeyboardInterrupt by the caller).

        In short sleeps: a signal may land on any thread (the tokenizers' and BLAS's included), and Python runs
        its handler in the main thread only when that thread next runs, not while it blocks in one long wait."""
        while True:
            time.sleep(0.5)


def _client(entry: world_file.Entry, service: str, config: Any) -> Any:
    import boto3

    return boto3.client(
        service, region_name=entry.region, endpoint_url=entry.url, config=config, **world_file.CREDENTIALS
    )


def _world_client(region: str, names: list[str], service: str, config: Any) -> Any:
    """A client of the world environment (one of `names`) in `region`, at its own server."""
    for name in names:
        entry = world_file.live(name)
        if entry is not None:
            return _client(entry, service, config)
    raise LocalModeError(
        f"no local environment in {region} ({', '.join(names)}) is up: start it with "
        f"hfpipe local up --env {names[0]}"
    )
