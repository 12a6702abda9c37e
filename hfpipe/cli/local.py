"""`hfpipe local`: the pipeline end to end on this machine, no AWS account (DESIGN.md, "Local mode").

The app's PipelineStack, synthesized for a local environment (with the DataStack it imports from),
runs on moto: its state machine on moto's Step Functions interpreter (`hfpipe.local_engine`), its
Lambda handlers in this process; the training job runs here under the SageMaker training-container
contract (`hfpipe.local_container`), and the "endpoint" answers through the model's own
`code/inference.py`. The view is `hfpipe watch`'s, on the engine's moto account. Output files
(model.tar.gz, training log, metrics, report) land in `--out/<execution name>/`.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import re
import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.console import Console

from hfpipe.aws import Clients, HfpipeError

ROOT = Path(__file__).resolve().parents[2]
LOCAL_ENV = "local"
REGION = "us-east-1"


# --- fixtures: what each tiny recipe's channels hold -----------------------------------------------------


def _qa_fixtures(root: Path) -> dict[str, Path]:
    from hfpipe.fixtures.encoders import build_encoder
    from hfpipe.fixtures.squad import write_squad

    build_encoder("bert", root / "model")
    paths = write_squad(root / "data")
    for split in ("train", "validation"):
        (root / split).mkdir(parents=True, exist_ok=True)
        shutil.move(str(paths[split]), root / split / paths[split].name)
    return {"model": root / "model", "training": root / "train", "validation": root / "validation"}


def _lora_fixtures(root: Path) -> dict[str, Path]:
    from hfpipe.fixtures.samsum import build_tiny_bloom, write_samsum

    return {"model": build_tiny_bloom(root / "model"), **write_samsum(root)}


# Recipe name -> builder of its channel folders (local paths by channel name).
FIXTURES: dict[str, Callable[[Path], dict[str, Path]]] = {
    "tiny-lora": _lora_fixtures,
    "tiny-qa": _qa_fixtures,
}


# --- the stacks -----------------------------------------------------------------------------------------


# A dedicated environment for local runs, validated by stacks/config.py like cdk.json's entries.
LOCAL_SETTINGS: dict[str, Any] = {
    "region": REGION,
    "removal_policy": "destroy",
    "log_retention_days": 1,
    "checkpoint_expiration_days": 1,
    "noncurrent_version_expiration_days": 1,
}
LOCAL_PARTS = ("Data", "Pipeline")
# The code that shapes the templates: an edit in any of it invalidates the cache.
TEMPLATE_INPUTS = (
    "app.py",
    "cdk.json",
    "stacks/**/*.py",
    "hfpipe/core/*.py",
    "hfpipe/contract.py",
    "hfpipe/cli/local.py",
    "lambda/**/*.py",
)


def _template_inputs() -> list[Path]:
    return sorted({p for g in TEMPLATE_INPUTS for p in ROOT.glob(g) if "__pycache__" not in p.parts})


def synth_stacks(cache_dir: Path) -> dict[str, dict[str, Any]]:
    """The app's Data and Pipeline stacks for the local environment, by part name.

    The real app (`app.build_app`), synthesized in this process for `LOCAL_SETTINGS` only, without
    bundling (the handlers run from lambda/, the training code from training_code/) and without cdk-nag
    (the tests check the deployable environments); cached by the hash of the code that shapes it.
    """
    digest = hashlib.sha256()
    for path in _template_inputs():
        digest.update(path.relative_to(ROOT).as_posix().encode())
        digest.update(path.read_bytes())
    cached = cache_dir / f"local-stacks-{digest.hexdigest()[:16]}.json"
    if cached.is_file():
        return dict(json.loads(cached.read_text()))

    import os
    import sys
    import tempfile

    # app.py and stacks/ live next to the package in the checkout, not in the installed distribution.
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
    os.environ.setdefault("SAGEMAKER_SUPPRESS_V2_WARNING", "1")
    import app as cdk_app
    from hfpipe.contract import stack_name
    from hfpipe.local_engine import ACCOUNT
    from stacks.config import CONTEXT_KEY, ENV_CONTEXT_KEY

    context = {
        **cdk_app.cdk_json_context(),
        CONTEXT_KEY: {LOCAL_ENV: LOCAL_SETTINGS},
        ENV_CONTEXT_KEY: LOCAL_ENV,
        "aws:cdk:bundling-stacks": [],  # no stack bundles its assets
    }
    with tempfile.TemporaryDirectory(prefix="hfpipe-local-cdk-") as outdir:
        app = cdk_app.build_app(
            context=context, outdir=outdir, default_account=ACCOUNT, parts=LOCAL_PARTS, nag=False
        )
        assembly = app.synth()
        stacks = {
            part: dict(assembly.get_stack_by_name(stack_name(LOCAL_ENV, part)).template)
            for part in LOCAL_PARTS
        }
    cache_dir.mkdir(parents=True, exist_ok=True)
    cached.write_text(json.dumps(stacks))
    return stacks


@dataclass(frozen=True)
class LocalData:
    """What the DataStack stands for in the engine's moto account."""

    buckets: list[str]
    imports: dict[str, str]  # the DataStack's exports, for the Pipeline stack's Fn::ImportValue
    data_bucket: str


def local_data(data_template: dict[str, Any]) -> LocalData:
    """Bucket names for the DataStack's buckets, and the values its exports and data-bucket SSM parameter
    would have once deployed."""
    from hfpipe.contract import SSM_DATA_BUCKET, ssm_parameter_name

    resources = data_template["Resources"]
    names = {
        # Logical ids without CDK's hash suffix: hfpipe-local-bucketsdatabucket.
        logical: f"hfpipe-{LOCAL_ENV}-{re.sub(r'[0-9A-F]{8}$', '', logical).lower()}"[:63]
        for logical, res in resources.items()
        if res["Type"] == "AWS::S3::Bucket"
    }

    def value(token: Any) -> str:
        if isinstance(token, dict) and "Ref" in token:
            return names[token["Ref"]]
        if isinstance(token, dict) and token.get("Fn::GetAtt", [None, None])[1] == "Arn":
            return f"arn:aws:s3:::{names[token['Fn::GetAtt'][0]]}"
        raise HfpipeError(f"DataStack value {token!r}: not a bucket name or ARN; local mode cannot stand in")

    imports = {
        out["Export"]["Name"]: value(out["Value"])
        for out in data_template.get("Outputs", {}).values()
        if "Export" in out
    }
    parameter = ssm_parameter_name(LOCAL_ENV, SSM_DATA_BUCKET)
    [data_bucket] = [
        value(res["Properties"]["Value"])
        for res in resources.values()
        if res["Type"] == "AWS::SSM::Parameter" and res["Properties"].get("Name") == parameter
    ]
    return LocalData(buckets=sorted(names.values()), imports=imports, data_bucket=data_bucket)


# --- S3 helpers ---------------------------------------------------------------------------------------------


def _split(uri: str) -> tuple[str, str]:
    bucket, _, key = uri.removeprefix("s3://").partition("/")
    return bucket, key


def _upload_dir(s3: Any, folder: Path, bucket: str, prefix: str) -> None:
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        s3.upload_file(str(path), bucket, f"{prefix.rstrip('/')}/{path.relative_to(folder).as_posix()}")


def _download_prefix(s3: Any, uri: str, dest: Path) -> Path:
    bucket, prefix = _split(uri)
    dest.mkdir(parents=True, exist_ok=True)
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for obj in page.get("Contents", []):
            rel = obj["Key"][len(prefix) :].lstrip("/") or Path(obj["Key"]).name
            target = dest / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            s3.download_file(bucket, obj["Key"], str(target))
    return dest


# --- plug-ins: the training job and the endpoint ----------------------------------------------------------


class LocalRuntime:
    """What happens outside the control plane: training on this machine, serving through the handler."""

    def __init__(self, s3: Any, sagemaker: Any, workdir: Path) -> None:
        self.s3 = s3
        self.sagemaker = sagemaker
        self.workdir = workdir
        self.endpoints: dict[str, Any] = {}
        self.jobs: dict[str, Any] = {}
        self.lock = threading.Lock()

    def training(self, request: dict[str, Any], job: Any) -> None:
        """Run a CreateTrainingJob request here; fill moto's job like SageMaker would."""
        from hfpipe.local_container import run_training_job_request

        name = request["TrainingJobName"]
        job_dir = self.workdir / "jobs" / name
        channels = {
            c["ChannelName"]: _download_prefix(
                self.s3, c["DataSource"]["S3DataSource"]["S3Uri"], job_dir / "channels" / c["ChannelName"]
            )
            for c in request.get("InputDataConfig") or []
        }
        job.training_job_status, job.secondary_status = "InProgress", "Training"
        job.training_start_time = datetime.now(UTC)
        job.secondary_status_transitions = [
            {
                "Status": "Training",
                "StartTime": job.training_start_time,
                "StatusMessage": "Training on this machine",
            }
        ]
        job.training_end_time = None
        job.final_metric_data_list = []
        log_path = self.workdir / "training.log"
        with log_path.open("w") as log:
            result = run_training_job_request(
                request,
                job_dir / "run",
                channel_paths=channels,
                source_dir=ROOT / "training_code",
                stream=log,
            )
        self.jobs[name] = result
        job.training_end_time = datetime.now(UTC)
        seconds = max(1, round(result.training_seconds))
        job.training_time_in_seconds = job.billable_time_in_seconds = seconds
        # Scraped with the request's definitions, as SageMaker does (the engine hands over the request as sent).
        definitions = request.get("AlgorithmSpecification", {}).get("MetricDefinitions", [])
        job.final_metric_data_list = [
            {"MetricName": name_, "Value": value, "Timestamp": job.training_end_time}
            for name_, value in _final_metrics(result.logs(), definitions).items()
        ]
        if result.status == "Completed" and result.model_artifacts:
            bucket, key = _split(job.model_artifacts["S3ModelArtifacts"])
            self.s3.upload_file(str(result.model_artifacts), bucket, key)
        job.training_job_status = job.secondary_status = result.status
        job.secondary_status_transitions[-1]["EndTime"] = job.training_end_time
        if result.failure_reason:
            job.failure_reason = result.failure_reason

    def endpoint(self, endpoint_name: str, body: Any) -> Any:
        """Answer InvokeEndpoint through the deployed model's code/inference.py."""
        from hfpipe.local_container import LocalEndpoint

        with self.lock:
            if endpoint_name not in self.endpoints:
                config = self.sagemaker.describe_endpoint(EndpointName=endpoint_name)["EndpointConfigName"]
                variants = self.sagemaker.describe_endpoint_config(EndpointConfigName=config)[
                    "ProductionVariants"
                ]
                model = self.sagemaker.describe_model(ModelName=variants[0]["ModelName"])
                bucket, key = _split(model["PrimaryContainer"]["ModelDataUrl"])
                local = self.workdir / "endpoints" / endpoint_name / "model.tar.gz"
                local.parent.mkdir(parents=True, exist_ok=True)
                self.s3.download_file(bucket, key, str(local))
                self.endpoints[endpoint_name] = LocalEndpoint(local, workdir=local.parent)
        return self.endpoints[endpoint_name].predict(body)

    def close(self) -> None:
        for endpoint in self.endpoints.values():
            endpoint.close()


def _final_metrics(logs: str, definitions: list[dict[str, str]]) -> dict[str, float]:
    """The last value each MetricDefinitions regex finds in the log, as SageMaker scrapes them."""
    metrics: dict[str, float] = {}
    for definition in definitions:
        for match in re.finditer(definition["Regex"], logs):
            try:
                metrics[definition["Name"]] = float(match.group(1))
            except (ValueError, IndexError):
                continue
    return metrics


# --- the command ------------------------------------------------------------------------------------------


def run(args: argparse.Namespace, console: Console) -> int:
    """Run one recipe end to end locally; prints the live view, the smoke-test answer and the report."""
    from hfpipe.cli import recipes
    from hfpipe.cli.commands import default_execution_name

    loaded = recipes.load(args.recipe, args.sets)
    if loaded.name not in FIXTURES:
        raise HfpipeError(
            f"recipe {loaded.name!r} has no local fixtures; `hfpipe local` runs: {', '.join(sorted(FIXTURES))}"
        )
    name = default_execution_name(loaded.name)
    out = Path(args.out).resolve() / name
    out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    console.print(f"local run {name}: building the pipeline and the fixtures (output in {out})")
    stacks = synth_stacks(Path(args.out).resolve() / ".cache")
    data = local_data(stacks["Data"])
    channels = FIXTURES[loaded.name](out / "fixtures")

    import boto3

    from hfpipe.local_engine import LocalEngine
    from hfpipe.report import build_report
    from hfpipe.watch import watch

    # moto narrates every service integration and failure on stderr; the view already says what matters.
    for logger in ("moto", "moto.stepfunctions"):
        logging.getLogger(logger).setLevel(logging.CRITICAL)

    runtime: LocalRuntime | None = None
    engine_kwargs: dict[str, Any] = {
        "training": lambda request, job: runtime.training(request, job) if runtime else None,
        "endpoint": lambda endpoint, body: runtime.endpoint(endpoint, body) if runtime else None,
        "region": REGION,
        "imports": data.imports,
    }
    with LocalEngine(stacks["Pipeline"], **engine_kwargs) as engine:
        s3, sagemaker = engine.client("s3"), engine.client("sagemaker")
        runtime = LocalRuntime(s3, sagemaker, out)
        try:
            for bucket in data.buckets:  # the DataStack's; the Pipeline stack imports them
                s3.create_bucket(Bucket=bucket)
            for channel, local in channels.items():
                prefix = loaded.resolved["training"]["channels"][channel]
                _upload_dir(s3, local, data.data_bucket, prefix)
            execution_input = {**recipes.execution_input(loaded), "poll_seconds": 1}
            arn = engine.client("stepfunctions").start_execution(
                stateMachineArn=engine.state_machine_arn, name=name, input=json.dumps(execution_input)
            )["executionArn"]
            clients = Clients(boto3.Session(region_name=REGION))
            snap = watch(clients, arn, console, interval=0.5)
            left = {
                kind: names for kind, names in engine.sagemaker_resources().items() if kind != "training_jobs"
            }
        finally:
            runtime.close()
        _write_outputs(out, build_report(clients, snap), s3)
    console.print(f"left in the local account: {sum(map(len, left.values()))} endpoints/configs/models")
    console.print(f"output: {out} ({time.monotonic() - started:.0f} s)")
    return 0 if snap.status == "SUCCEEDED" else 1


def _write_outputs(out: Path, report: dict[str, Any], s3: Any) -> None:
    """report.json, metrics.json and model.tar.gz next to the training log and the fixtures."""
    (out / "report.json").write_text(json.dumps(report, indent=2, default=str))
    (out / "metrics.json").write_text(json.dumps(report.get("final_metrics") or {}, indent=2, default=str))
    artifacts = report.get("model_artifacts")
    if artifacts and report.get("training_job_status") == "Completed":
        bucket, key = _split(artifacts)
        s3.download_file(bucket, key, str(out / "model.tar.gz"))
