"""The app's stacks as local mode sees them: synthesized for a `local` environment (`hfpipe local`) or for one
environment of cdk.json made local-friendly (`hfpipe local up`, `local_environments`), and what the DataStack
would hold once deployed (bucket names, exports, SSM values) so the PipelineStack's imports resolve.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hfpipe.local.checkout import LAMBDA_PACKAGE, FolderError, LocalModeError, checkout_root

if TYPE_CHECKING:
    from hfpipe.core.run.plan import PlanConfig

LOCAL_ENV = "local"
REGION = "us-east-1"


# A dedicated environment for local runs, validated by stacks/config.py like cdk.json's entries;
# the context keys are app.py's (CONTEXT_KEY, ENV_CONTEXT_KEY, PARTS_CONTEXT_KEY, NAG_CONTEXT_KEY).
LOCAL_SETTINGS: dict[str, Any] = {
    "region": REGION,
    "removal_policy": "destroy",
    "log_retention_days": 1,
    "checkpoint_expiration_days": 1,
    "noncurrent_version_expiration_days": 1,
}
#: What an environment of cdk.json keeps in the local world (`local_environments`): where it is and what it
#: decides (region, model approval, named endpoints, promotion source, ...); these keys take LOCAL_SETTINGS' values.
LOCAL_FRIENDLY_KEYS = tuple(k for k in LOCAL_SETTINGS if k != "region")
LOCAL_PARTS = ("Data", "Pipeline")
#: A folder for the synthesized templates that several runs share (a test suite's workers, a CI job), instead
#: of each run folder's own `.cache`: entries are named by the hash of what shapes them, so a shared folder
#: never serves a stale template.
CACHE_ENV = "HFPIPE_SYNTH_CACHE"
# The code that shapes the templates: an edit in any of it invalidates the cache.
TEMPLATE_INPUTS = (
    "app.py",
    "cdk.json",
    "stacks/**/*.py",
    "hfpipe/core/**/*.py",
    "hfpipe/contract.py",
    "hfpipe/local/stacks.py",
    "lambda/**/*.py",
)


def _template_inputs(root: Path) -> list[Path]:
    return sorted({p for g in TEMPLATE_INPUTS for p in root.glob(g) if "__pycache__" not in p.parts})


def local_environments(
    env: str, environments: dict[str, Any], overrides: Iterable[str] = ()
) -> dict[str, Any]:
    """cdk.json's environments (the `hfpipe:environments` context) with `env`'s settings made local-friendly,
    and `overrides` (`hfpipe local up --set KEY=VALUE`: a dotted key of `env`'s entry, the value JSON when it
    is JSON) set in it, for this world only; the synthesis validates the result as it validates cdk.json.

    `env` keeps its region and every setting that decides what happens (model_approval, named endpoints,
    promote_from, quotas, ...); its removal policy, log retention and expirations become LOCAL_SETTINGS'
    (nothing outlives the local account anyway). The others stay as they are, so that what names them
    (promote_from) still validates. Accounts named in cdk.json become moto's one account, where every local
    resource lives.
    """
    from hfpipe.local.engine.template import ACCOUNT

    if env not in environments:
        raise LocalModeError(
            f"--env {env!r}: not an environment of cdk.json; accepted: {', '.join(sorted(environments))}"
        )
    out = {
        name: {**entry, **({"account": ACCOUNT} if "account" in entry else {})}
        for name, entry in environments.items()
    }
    out[env] = {**out[env], **{key: LOCAL_SETTINGS[key] for key in LOCAL_FRIENDLY_KEYS}}
    for override in overrides:
        out[env] = _overridden(out[env], override, env)
    return out


def _overridden(entry: dict[str, Any], override: str, env: str) -> dict[str, Any]:
    """`entry` with one `--set KEY=VALUE` applied (a copy); LocalModeError for one that is not KEY=VALUE."""
    key, sep, raw = override.partition("=")
    parts = key.strip().split(".")
    if not sep or not all(parts):
        raise LocalModeError(
            f"--set {override!r}: not accepted; accepted: KEY=VALUE, KEY a dotted setting of environment {env}'s "
            "cdk.json entry, e.g. --set shared_base.base_model=hfpipe-fixtures/tiny-llama --set "
            "shared_base.max_model_len=256"
        )
    try:
        value: Any = json.loads(raw)
    except ValueError:
        value = raw
    out = copy.deepcopy(entry)
    node = out
    for part in parts[:-1]:
        if not isinstance(node.get(part, {}), dict):
            raise LocalModeError(f"--set {override!r}: {part} of environment {env} is not an object")
        node = node.setdefault(part, {})
    node[parts[-1]] = value
    return out


def synth_stacks(
    cache_dir: Path,
    root: Path | None = None,
    *,
    env: str = LOCAL_ENV,
    environments: dict[str, Any] | None = None,
    say: Callable[[str], None] | None = None,
    meanwhile: Callable[[], None] | None = None,
) -> dict[str, dict[str, Any]]:
    """The app's Data and Pipeline stacks for one environment, by part name (``say``: told when they must
    be synthesized, which takes seconds of a child process, rather than read from the cache; ``meanwhile``:
    then called first, to start work that can run beside the child).

    The checkout's own app (`python app.py`, as `cdk synth` runs it), in a child process, for `env` (default:
    the `local` environment of `LOCAL_SETTINGS`) with `environments` as the `hfpipe:environments` context
    (default: `local` alone), through the context the CDK command line would pass (`CDK_CONTEXT_JSON`):
    without bundling (the handlers run from lambda/, the training code from training_code/) and without
    cdk-nag (the tests check the deployable environments); cached by the hash of the code that shapes it
    and of the environments.
    """
    import os

    root = root or checkout_root()
    cache_dir = Path(os.environ[CACHE_ENV]) if os.environ.get(CACHE_ENV) else cache_dir
    environments = environments if environments is not None else {LOCAL_ENV: LOCAL_SETTINGS}
    digest = hashlib.sha256(json.dumps([env, environments], sort_keys=True).encode())
    for path in _template_inputs(root):
        digest.update(path.relative_to(root).as_posix().encode())
        digest.update(path.read_bytes())
    cached = cache_dir / f"local-stacks-{env}-{digest.hexdigest()[:16]}.json"
    if cached.is_file():
        return dict(json.loads(cached.read_text()))
    import fcntl

    try:
        cache_dir.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise FolderError(cache_dir, err) from None
    # One synthesis per entry even when several processes ask at once (parallel tests, two `local up`): the
    # first takes the lock and writes the entry, the others wait for it and read it.
    with (cache_dir / f"{cached.name}.lock").open("w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:  # another process synthesizes this entry: say so, then wait for it
            if say is not None:
                say(
                    f"waiting for another hfpipe process to synthesize the stacks for {env!r} (in {cache_dir})"
                )
            fcntl.flock(lock, fcntl.LOCK_EX)
        if cached.is_file():
            return dict(json.loads(cached.read_text()))
        if say is not None:
            say(f"synthesizing the app's stacks for {env!r} (once for this code; cached in {cache_dir})")
        if meanwhile is not None:
            meanwhile()
        stacks = _synth(root, env, environments)
        partial = cached.with_suffix(f".{os.getpid()}.partial")
        partial.write_text(json.dumps(stacks))
        partial.replace(cached)  # atomic: a reader sees the whole entry or none
    return stacks


def _synth(root: Path, env: str, environments: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """`python app.py` for `env` in a child process, as `cdk synth` runs it: its Data and Pipeline templates."""
    import os
    import subprocess
    import sys
    import tempfile

    from hfpipe.contract import stack_name
    from hfpipe.local.engine.engine import ACCOUNT

    context = {
        "hfpipe:environments": environments,
        "env": env,
        "hfpipe:parts": ",".join(LOCAL_PARTS),
        "hfpipe:nag": "false",
        "aws:cdk:bundling-stacks": [],  # no stack bundles its assets
    }
    with tempfile.TemporaryDirectory(prefix="hfpipe-local-cdk-") as outdir:
        child_env = {
            **os.environ,
            "CDK_CONTEXT_JSON": json.dumps(context),
            "CDK_OUTDIR": outdir,
            "CDK_DEFAULT_ACCOUNT": ACCOUNT,
            "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",
            "SAGEMAKER_SUPPRESS_V2_WARNING": "1",
        }
        proc = subprocess.run(
            [sys.executable, "app.py"], cwd=root, env=child_env, capture_output=True, text=True, check=False
        )
        if proc.returncode != 0:
            raise LocalModeError(
                f"synthesizing the app in {root} failed (exit {proc.returncode}): "
                f"{(proc.stderr.strip() or proc.stdout.strip())[-2000:]}"
            )
        stacks = {
            part: json.loads((Path(outdir) / f"{stack_name(env, part)}.template.json").read_text())
            for part in LOCAL_PARTS
        }
    return stacks


@dataclass(frozen=True)
class LocalData:
    """What the DataStack stands for in the engine's moto account."""

    buckets: list[str]
    imports: dict[str, str]  # the DataStack's exports, for the Pipeline stack's Fn::ImportValue
    data_bucket: str
    parameters: dict[str, str] = field(default_factory=dict)  # its SSM parameters, by name


def local_data(data_template: dict[str, Any], env: str = LOCAL_ENV) -> LocalData:
    """Bucket names for `env`'s DataStack's buckets, and the values its exports and SSM parameters would have
    once deployed."""
    from hfpipe.contract import SSM_DATA_BUCKET, ssm_parameter_name, stack_name

    resources = data_template["Resources"]
    names = {
        # As CloudFormation names a bucket without BucketName: <stack name, lower case>-<logical id>-<suffix>
        # (the logical id without CDK's hash; no random suffix here), so rules that know a bucket by its
        # stack's prefix (the Promote role's grant, hfpipe.core.promotion.promotion_access) hold here as on AWS.
        logical: f"{stack_name(env, 'Data').lower()}-{re.sub(r'[0-9A-F]{8}$', '', logical).lower()}"[:63]
        for logical, res in resources.items()
        if res["Type"] == "AWS::S3::Bucket"
    }

    def value(token: Any) -> str:
        if isinstance(token, dict) and "Ref" in token:
            return names[token["Ref"]]
        if isinstance(token, dict) and token.get("Fn::GetAtt", [None, None])[1] == "Arn":
            return f"arn:aws:s3:::{names[token['Fn::GetAtt'][0]]}"
        raise LocalModeError(
            f"DataStack value {token!r}: not a bucket name or ARN; local mode cannot stand in"
        )

    imports = {
        out["Export"]["Name"]: value(out["Value"])
        for out in data_template.get("Outputs", {}).values()
        if "Export" in out
    }
    parameters = {
        res["Properties"]["Name"]: value(res["Properties"]["Value"])
        for res in resources.values()
        if res["Type"] == "AWS::SSM::Parameter"
    }
    data_bucket = parameters[ssm_parameter_name(env, SSM_DATA_BUCKET)]
    return LocalData(sorted(names.values()), imports, data_bucket, parameters)


def plan_config(stacks: dict[str, dict[str, Any]]) -> PlanConfig:
    """The environment's settings (hfpipe.core.run.plan.PlanConfig) as the local Plan state will have them, known
    before the engine starts or a fixture is built: the Plan function's environment variables in the Pipeline
    template, resolved as the engine resolves them (the DataStack's exports as ``local_data`` gives them, roles
    by their local names), read by the Plan Lambda's own reader (``PlanConfig.from_environment``)."""
    from hfpipe.core.run.plan import PlanConfig
    from hfpipe.local.engine.template import Resolver, local_names

    resources = stacks["Pipeline"]["Resources"]
    resolver = Resolver(resources, REGION, local_data(stacks["Data"]).imports)
    resolver.physical.update(local_names(resources))
    (function,) = [
        res["Properties"]
        for res in resources.values()
        if res["Type"] == "AWS::Lambda::Function"
        and res["Properties"].get("Handler") == f"{LAMBDA_PACKAGE}.plan.handler"
    ]
    variables = function.get("Environment", {}).get("Variables", {})
    # AWS_REGION is the Lambda runtime's, as the engine sets it for the handlers.
    return PlanConfig.from_environment(
        {**{key: str(resolver.resolve(value)) for key, value in variables.items()}, "AWS_REGION": REGION}
    )
