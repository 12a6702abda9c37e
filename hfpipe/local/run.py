"""One local run: the app's Data and Pipeline stacks stood up on moto (`hfpipe.local.stacks`), the state
machine on moto's Step Functions interpreter with the Lambda handlers in this process (`hfpipe.local.engine.engine`),
training and serving on this machine (`hfpipe.local.runtime`), and the recipe's fixture data in the data
bucket; what could not exist here is substituted as `hfpipe.local.training.substitute` decides. `hfpipe local`
(hfpipe.cli.local) starts the execution and watches it with the same view as on AWS.
Output files (model.tar.gz, training log, metrics, report) land in the run's output folder.
"""

from __future__ import annotations

import contextlib
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hfpipe.local.engine.engine import LocalEngine, quieted
from hfpipe.local.outputs import INTERRUPTED, METRICS, MODEL, REPORT, TRAINING_JOB
from hfpipe.local.runtime import LocalRuntime, split_s3_uri, upload_dir
from hfpipe.local.stacks import REGION, local_data, synth_stacks
from hfpipe.local.training.substitute import Substitutions


class LocalRun:
    """A context manager: the pipeline stood up on moto with the recipe's fixtures in its data bucket."""

    def __init__(
        self,
        substitutions: Substitutions,
        out: Path,
        cache_dir: Path,
        say: Callable[[str], None] = lambda line: None,
        built: tuple[Path, dict[str, Path]] | None = None,
    ) -> None:
        """``say``: told what it is doing, a line per stage (the fixtures, the engine); ``built``: the folder the
        substitutions' fixture channels were built in already, and those channels (moved into the run's
        folder, as if built there)."""
        self.say = say
        self.built = built
        self.substitutions = substitutions
        self.recipe_name = substitutions.recipe["name"]
        self.channel_prefixes: dict[str, str] = substitutions.recipe["training"].get("channels") or {}
        self.out = out
        self.cache_dir = cache_dir
        self.region = REGION
        self.runtime: LocalRuntime | None = None
        self._stack = contextlib.ExitStack()

    def __enter__(self) -> LocalRun:
        stacks = synth_stacks(self.cache_dir, say=self.say)
        data = local_data(stacks["Data"])
        from hfpipe.contract import SSM_ARTIFACTS_BUCKET, ssm_parameter_name
        from hfpipe.local.stacks import LOCAL_ENV

        #: Where a recipe's own training source is uploaded (hfpipe.cli.recipe.sources), as on AWS.
        self.artifacts_bucket = data.parameters[ssm_parameter_name(LOCAL_ENV, SSM_ARTIFACTS_BUCKET)]
        channels = self._fixtures(self.out / "fixtures")
        self.say("starting the local engine: moto's account, the stacks' resources, the state machine")
        self._stack.enter_context(quieted("moto", "moto.stepfunctions"))  # the view says what matters
        engine_kwargs: dict[str, Any] = {
            "training": lambda request, job: self.runtime.training(request, job) if self.runtime else None,
            "endpoint": lambda endpoint, body: (
                self.runtime.endpoint(endpoint, body) if self.runtime else None
            ),
            "region": REGION,
            "imports": data.imports,
        }
        self.engine = LocalEngine(stacks["Pipeline"], **engine_kwargs).__enter__()
        try:
            self.s3 = self.engine.client("s3")
            self.runtime = LocalRuntime(
                self.s3, self.engine.client("sagemaker"), self.out, substitutions=self.substitutions
            )
            self.engine.fleets = self.runtime  # an endpoint update serves the old and new config side by side
            self.engine.processing = self.runtime.processing  # the evaluation's processing jobs run here
            for bucket in data.buckets:  # the DataStack's; the Pipeline stack imports them
                self.s3.create_bucket(Bucket=bucket)
            # What the command reads of the environment (its report of an adapter run: the shared base).
            self.engine.put_parameters(data.parameters)
            for channel, local in channels.items():
                upload_dir(self.s3, local, data.data_bucket, self.channel_prefixes[channel])
        except BaseException:
            self.engine.__exit__(None, None, None)
            self._stack.close()
            raise
        return self

    def _fixtures(self, root: Path) -> dict[str, Path]:
        """The recipe's fixture channels under `root`: built now, or moved there from where they were built."""
        if self.built is None:
            self.say("building the fixtures: the tiny model, its tokenizer and the data (hfpipe.fixtures)")
            return self.substitutions.fixture_channels(root)
        folder, channels = self.built
        shutil.move(str(folder), str(root))
        return {
            name: root / path.relative_to(folder) if path.is_relative_to(folder) else path
            for name, path in channels.items()
        }

    def start(self, name: str, execution_input: dict[str, Any]) -> str:
        """Start an execution of the local state machine; returns its ARN."""
        return str(
            self.engine.client("stepfunctions").start_execution(
                stateMachineArn=self.engine.state_machine_arn,
                name=name,
                input=json.dumps(execution_input, allow_nan=False),
            )["executionArn"]
        )

    def leftovers(self) -> dict[str, list[str]]:
        """Models, endpoint configs and endpoints still in the local account."""
        return {
            kind: names
            for kind, names in self.engine.sagemaker_resources().items()
            if kind != "training_jobs"
        }

    def close_endpoints(self) -> None:
        if self.runtime is not None:
            self.runtime.close()

    def write_outputs(self, report: dict[str, Any], training_job: dict[str, Any] | None = None) -> None:
        """report.json, metrics.json, the training job's description and model.tar.gz next to the training log
        and the fixtures."""
        out = self.out
        if training_job:  # before the report: a run with a report has all its files
            described = {k: v for k, v in training_job.items() if k != "ResponseMetadata"}
            (out / TRAINING_JOB).write_text(json.dumps(described, indent=2, default=str))
        artifacts = report.get("model_artifacts")
        if artifacts and report.get("training_job_status") == "Completed":
            bucket, key = split_s3_uri(artifacts)
            self.s3.download_file(bucket, key, str(out / MODEL))
            warning = model_warning(out / MODEL)
            if warning:
                report["model_warning"] = warning
        (out / REPORT).write_text(json.dumps(report, indent=2, default=str))
        (out / METRICS).write_text(json.dumps(report.get("final_metrics") or {}, indent=2, default=str))

    def __exit__(self, *exc: Any) -> None:
        from hfpipe.local.training.container import stop_all

        if exc[0] is not None:
            # Ctrl-C or an error here: the training processes run in their own process group (so a
            # terminal's Ctrl-C does not reach them); end the whole tree, then say so in the output folder.
            stopped = stop_all()
            if issubclass(exc[0], KeyboardInterrupt):
                (self.out / INTERRUPTED).write_text(
                    f"interrupted (Ctrl-C); {stopped} training process group(s) stopped; this folder is "
                    "incomplete\n"
                )
        self.close_endpoints()
        try:
            self.engine.__exit__(*exc)
        finally:
            self._stack.close()


def model_warning(model_tar: Path) -> str | None:
    """What to say of a completed job's model.tar.gz that holds no file: SageMaker packs SM_MODEL_DIR as it
    is, so the job succeeds, and there is nothing to serve."""
    import tarfile

    with tarfile.open(model_tar, "r:gz") as tar:
        if any(m.isfile() for m in tar.getmembers()):
            return None
    return (
        "the model artifact (model.tar.gz) is empty: the script wrote nothing to SM_MODEL_DIR (/opt/ml/model), "
        "which SageMaker packs as the model; the job succeeded with nothing to serve"
    )
