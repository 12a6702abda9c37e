"""The app's stacks as local mode sees them: synthesized for a `local` environment, and what the
DataStack would hold once deployed (bucket names, exports, SSM values) so the PipelineStack's imports resolve.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
LOCAL_ENV = "local"
REGION = "us-east-1"


class LocalModeError(RuntimeError):
    """Local mode cannot stand in for what the template or the request asks; the message says why."""


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
    "hfpipe/local/stacks.py",
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
    from hfpipe.local.engine import ACCOUNT
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
        raise LocalModeError(
            f"DataStack value {token!r}: not a bucket name or ARN; local mode cannot stand in"
        )

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
