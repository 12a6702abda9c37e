"""The app from cdk.json, synthesized: shared by tests/infra, tests/pipeline and tests/cli.

`tests/conftest.py` synthesizes it once per run (`synthesized`: `synthesize_shared`, one synthesis for every
pytest-xdist worker of the run); test modules import the helpers below by module name (tests/ is on
sys.path through its conftest).
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aws_cdk import assertions

import app as cdk_app
from hfpipe.contract import stack_name
from stacks.config import EnvironmentConfig, load_environments

ENV = "dev"
# What a local engine answers for the DataStack exports a Pipeline stack imports.
DATA_BUCKET = "hfpipe-test-data"
ARTIFACTS_BUCKET = "hfpipe-test-artifacts"
#: A folder every worker of one test run shares (tests/conftest.py makes it for the run and removes it).
SHARED_ENV = "HFPIPE_TESTS_SHARED"


@dataclass(frozen=True)
class Synthesized:
    """One synthesis of the whole app: its cloud assembly folder, templates and stacks by name.

    `app` is the construct tree of the synthesis this process made; where the process read another worker's
    synthesis of the same context (`synthesize_shared`), the same app is built and synthesized here on its
    first use (`app`, `stack`): only the tests of the construct tree pay for one of their own.
    """

    outdir: Path
    templates: dict[str, dict[str, Any]]
    environments: dict[str, EnvironmentConfig]
    seconds: float
    context: dict[str, Any] = field(repr=False)
    nag: bool = field(repr=False)
    _app: Any = field(default=None, repr=False)
    _assertions: dict[str, assertions.Template] = field(default_factory=dict, repr=False)

    @property
    def app(self) -> Any:
        if self._app is None:
            outdir = self.outdir.parent / f"{self.outdir.name}.app-{os.getpid()}"
            object.__setattr__(self, "_app", _synthesize(outdir, self.context, nag=self.nag).app)
        return self._app

    def stack(self, name: str) -> Any:
        return self.app.node.find_child(name)

    def pipeline(self, env: str = ENV) -> dict[str, Any]:
        """The environment's PipelineStack template."""
        return self.templates[stack_name(env, "Pipeline")]

    def assertions(self, env: str, part: str) -> assertions.Template:
        """One stack's template for CDK's fine-grained assertions (`has_resource_properties`, `Match`)."""
        name = stack_name(env, part)
        if name not in self._assertions:
            self._assertions[name] = assertions.Template.from_json(self.templates[name])
        return self._assertions[name]


def synthesize(outdir: Path) -> Synthesized:
    """Build and synthesize all environments of cdk.json into `outdir` (no CDK_DEFAULT_ACCOUNT).

    cdk-nag runs during synth: an unacknowledged finding fails here.
    """
    return _synthesize(outdir, cdk_app.cdk_json_context(), nag=True)


def synthesize_shared(outdir: Path) -> Synthesized:
    """`synthesize`, once for the run: with SHARED_ENV set (tests/conftest.py sets it for the run, and the
    pytest-xdist workers inherit it), the first worker to come synthesizes into the shared folder, under a
    lock, and the others read that cloud assembly's templates when it is complete (each synthesis is ~8 s of
    CPU, the jsii node process's included); without it, `synthesize(outdir)`."""
    shared = os.environ.get(SHARED_ENV)
    if not shared:
        return synthesize(outdir)
    folder, context = Path(shared), cdk_app.cdk_json_context()
    ready = folder / "cdk.out.ready"
    with (folder / "cdk.out.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, also when this process dies
        if ready.is_file():
            done = Path(ready.read_text())
            return _read(done, context, nag=True, seconds=0.0, app=None)
        synthesized = synthesize(folder / f"cdk.out.{os.getpid()}")
        ready.write_text(str(synthesized.outdir))  # only a complete synthesis is marked
    return synthesized


def synthesize_environments(outdir: Path, environments: dict[str, Any], *, nag: bool = True) -> Synthesized:
    """The app for other environments than cdk.json's (`environments`: the `hfpipe:environments` value), e.g.
    a source and a target in two accounts; no bundling (the handlers run from lambda/ locally)."""
    context = {
        **cdk_app.cdk_json_context(),
        "hfpipe:environments": environments,
        "aws:cdk:bundling-stacks": [],
    }
    return _synthesize(outdir, context, nag=nag)


def _synthesize(outdir: Path, context: dict[str, Any], *, nag: bool) -> Synthesized:
    started = time.perf_counter()
    app = cdk_app.build_app(context=context, outdir=str(outdir), default_account=None, nag=nag)
    app.synth()
    return _read(outdir, context, nag=nag, seconds=time.perf_counter() - started, app=app)


def _read(outdir: Path, context: dict[str, Any], *, nag: bool, seconds: float, app: Any) -> Synthesized:
    """The synthesis in cloud assembly folder `outdir`: its stacks' templates, by stack name."""
    manifest = json.loads((outdir / "manifest.json").read_text())
    templates = {
        artifact["displayName"]: json.loads((outdir / artifact["properties"]["templateFile"]).read_text())
        for artifact in manifest["artifacts"].values()
        if artifact["type"] == "aws:cloudformation:stack"
    }
    environments = load_environments(context["hfpipe:environments"])
    return Synthesized(
        outdir=outdir,
        templates=templates,
        environments=environments,
        seconds=seconds,
        context=context,
        nag=nag,
        _app=app,
    )


def region_of(env: str) -> str:
    """The environment's region from cdk.json."""
    return load_environments(cdk_app.cdk_json_context()["hfpipe:environments"])[env].region


def data_imports(env: str = ENV) -> dict[str, str]:
    """The DataStack export values the Pipeline stack imports, as a local engine should answer them."""
    data = stack_name(env, "Data")
    return {
        f"{data}-DataBucketName": DATA_BUCKET,
        f"{data}-DataBucketArn": f"arn:aws:s3:::{DATA_BUCKET}",
        f"{data}-ArtifactsBucketName": ARTIFACTS_BUCKET,
        f"{data}-ArtifactsBucketArn": f"arn:aws:s3:::{ARTIFACTS_BUCKET}",
    }


def policy_statements(template: dict[str, Any]) -> list[dict[str, Any]]:
    """Every statement of every AWS::IAM::Policy and role inline policy: for rules that hold for all of
    them (a condition on every PassRole), which CDK's assertions express per resource only."""
    found = []
    for resource in template["Resources"].values():
        props = resource.get("Properties", {})
        if resource["Type"] == "AWS::IAM::Policy":
            found.extend(props["PolicyDocument"]["Statement"])
        for policy in props.get("Policies", []) if resource["Type"] == "AWS::IAM::Role" else []:
            found.extend(policy["PolicyDocument"]["Statement"])
    return found


def as_list(value: Any) -> list[Any]:
    """An IAM Action or Resource, one or many, as a list."""
    return value if isinstance(value, list) else [value]


def state_machine_definition(template: dict[str, Any], name: str) -> dict[str, Any]:
    """The definition of the state machine ``name`` (its StateMachineName) in ``template``, as JSON (each
    CloudFormation token in its DefinitionString read as "0")."""
    (machine,) = [
        r
        for r in template["Resources"].values()
        if r["Type"] == "AWS::StepFunctions::StateMachine" and r["Properties"]["StateMachineName"] == name
    ]
    parts = machine["Properties"]["DefinitionString"]["Fn::Join"][1]
    return dict(json.loads("".join(p if isinstance(p, str) else "0" for p in parts)))
