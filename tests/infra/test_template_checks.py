"""cdk-nag (AwsSolutions) and cfn-lint over every synthesized template; snapshots; determinism."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from app_synth import synthesize
from aws_cdk import aws_s3 as s3
from syrupy.extensions.json import JSONSnapshotExtension

import app as cdk_app

ASSET_HASH = re.compile(r"\b[0-9a-f]{64}\b")
ACCOUNT_ID = re.compile(r"(?<![0-9])[0-9]{12}(?![0-9])")
# ECR registry hosts of the image catalog (an AWS-owned account ID + region): no host names in snapshots.
REGISTRY_HOST = re.compile(r"(?<![0-9])[0-9]{12}\.dkr\.ecr\.[a-z0-9-]+\.amazonaws\.com(?:\.cn)?")


#: What stands for the image catalog (a JSON object with an "inference" scope: the Plan's and the promote
#: function's environment, the SSM parameter, the output) and for the repositories the execution role pulls:
#: both follow the recipes' containers, and are checked against them by tests/pipeline/test_pipeline_stack.py
#: (the catalog) and tests/infra/test_stacks.py (the pull grant), so a new recipe changes no snapshot.
CATALOG = "<image catalog of the recipes' containers>"
PULLED = "<the image catalog's repositories>"


def _without_catalog(value: Any) -> Any:
    if isinstance(value, dict):
        if value.get("Sid") == "PullHuggingFaceContainers":
            return {**value, "Resource": PULLED}
        return {k: _without_catalog(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_without_catalog(v) for v in value]
    if isinstance(value, str) and value.startswith("{") and '"inference"' in value:
        try:
            return CATALOG if "inference" in json.loads(value) else value
        except ValueError:
            return value
    return value


def normalized(template: dict) -> dict:
    """The template with asset hashes, ECR registry hosts and account IDs replaced by placeholders, and the
    image catalog and its pull grant by theirs (`CATALOG`, `PULLED`)."""
    text = ASSET_HASH.sub("<asset-hash>", json.dumps(_without_catalog(template), sort_keys=True))
    text = ACCOUNT_ID.sub("<account>", REGISTRY_HOST.sub("<registry>", text))
    return json.loads(text)


def acknowledgements(app: cdk.App) -> dict[str, str]:
    """Every acknowledged rule on every construct: rule ID -> reason."""
    found = {}
    for construct in app.node.find_all():
        for entry in construct.node.metadata:
            if entry.type == cdk.Validations.ACKNOWLEDGED_RULES_METADATA_KEY:
                found.update(entry.data)
    return found


def test_no_validation_plugin_reported_anything(synthesized):
    # Synth would have raised on an unacknowledged cdk-nag finding; the report is empty as well.
    report = json.loads((synthesized.outdir / "validation-report.json").read_text())
    assert report["pluginReports"] == []


def test_every_acknowledgement_has_a_reason_and_is_documented(synthesized, repo_root):
    # Listed in docs/infra.md, or in another part's docs/<branch>.md for the constructs it adds.
    docs = "\n".join(p.read_text() for p in sorted((repo_root / "docs").glob("*.md")))
    acknowledged = acknowledgements(synthesized.app)
    assert acknowledged
    for rule, reason in acknowledged.items():
        assert len(reason) >= 60, (rule, reason)
        # docs/infra.md lists each rule once, with the region and stack name of an environment generic.
        generic = rule.removeprefix("Annotation::")
        for env in synthesized.environments.values():
            generic = generic.replace(f":{env.region}:", ":<region>:").replace(
                f"Hfpipe-{env.name}-", "Hfpipe-<env>-"
            )
        assert f"`{generic}`" in docs, generic


def test_the_app_stops_synth_on_an_unacknowledged_finding(tmp_path):
    context = {**cdk_app.cdk_json_context(), "env": "dev", "aws:cdk:bundling-stacks": []}
    app = cdk_app.build_app(context=context, outdir=str(tmp_path))
    stack = app.node.find_child("Hfpipe-dev-Data")
    s3.Bucket(stack, "NoLogsBucket", enforce_ssl=True, block_public_access=s3.BlockPublicAccess.BLOCK_ALL)
    with pytest.raises(RuntimeError, match="AwsSolutions-S1"):
        app.synth()
    report = json.loads((tmp_path / "validation-report.json").read_text())
    rules = {v["ruleName"] for r in report["pluginReports"] for v in r["violations"]}
    assert "AwsSolutions-S1" in rules


@pytest.mark.slow
def test_cfn_lint_finds_no_errors_or_warnings(synthesized):
    templates = sorted(str(p) for p in synthesized.outdir.glob("*.template.json"))
    assert len(templates) == len(synthesized.templates)
    cfn_lint = Path(sys.executable).parent / "cfn-lint"
    result = subprocess.run(
        [str(cfn_lint), "--format", "parseable", *templates], capture_output=True, text=True, check=False
    )
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")


def test_snapshot_per_stack(synthesized, snapshot):
    # The Quota stacks follow cdk.json's targets and the recipes (tests/infra/test_stacks.py checks them
    # request by request): they are snapshotted for fixed requests below, so a new recipe changes no snapshot.
    json_snapshot = snapshot.use_extension(JSONSnapshotExtension)
    for name in sorted(n for n in synthesized.templates if not n.endswith("-Quota")):
        assert normalized(synthesized.templates[name]) == json_snapshot(name=name)


#: The Quota stack's snapshot input: dev's and prod's settings, three requests of each kind of quota
#: (training, spot training, endpoint; one needed by no recipe), and fixed users for the outputs.
FIXED_QUOTAS = [
    {"name": "ml.g5.2xlarge for training job usage", "value": 1},
    {"name": "ml.g5.2xlarge for spot training job usage", "value": 2},
    # What dev's endpoints can hold of it at once (stacks.config: the base, both named endpoints, an update).
    {"name": "ml.g5.4xlarge for endpoint usage", "value": 4},
]
FIXED_USERS = {
    "ml.g5.2xlarge for training job usage": ("recipe-a", "recipe-b"),
    "ml.g5.4xlarge for endpoint usage": ("recipe-b",),
}


def test_quota_stack_snapshot_for_fixed_requests(snapshot, tmp_path, monkeypatch):
    from stacks import quota_stack

    environments = {
        name: {**settings, "quotas": FIXED_QUOTAS}
        for name, settings in cdk_app.cdk_json_context()["hfpipe:environments"].items()
    }
    monkeypatch.setattr(quota_stack, "recipe_quota_users", lambda: FIXED_USERS)
    context = {
        **cdk_app.cdk_json_context(),
        "hfpipe:environments": environments,
        "aws:cdk:bundling-stacks": [],
    }
    assembly = cdk_app.build_app(context=context, outdir=str(tmp_path), parts=("Quota",), nag=False).synth()
    json_snapshot = snapshot.use_extension(JSONSnapshotExtension)
    stacks = sorted(assembly.stacks, key=lambda s: s.stack_name)
    assert [s.stack_name for s in stacks] == ["Hfpipe-dev-Quota", "Hfpipe-prod-Quota"]
    for stack in stacks:
        assert normalized(stack.template) == json_snapshot(name=stack.stack_name)


def test_two_synths_give_identical_templates_and_asset_hashes(synthesized, tmp_path):
    # CDK caches bundling results per process; clear it so the second synth bundles again.
    cdk.AssetStaging.clear_asset_hash_cache()
    second = synthesize(tmp_path / "cdk.out")
    assert second.templates == synthesized.templates

    def assets(outdir: Path) -> dict[str, list[str]]:
        return {
            p.name: sorted(json.loads(p.read_text())["files"]) for p in sorted(outdir.glob("*.assets.json"))
        }

    assert assets(second.outdir) == assets(synthesized.outdir)
    first_bundle = sorted(p.name for p in synthesized.outdir.glob("asset.*.tar.gz"))
    assert first_bundle == sorted(p.name for p in second.outdir.glob("asset.*.tar.gz"))
    for name in first_bundle:
        assert (second.outdir / name).read_bytes() == (synthesized.outdir / name).read_bytes()
