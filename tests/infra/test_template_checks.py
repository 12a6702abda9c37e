"""cdk-nag (AwsSolutions) and cfn-lint over every synthesized template; snapshots; determinism."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

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


def normalized(template: dict) -> dict:
    """The template with asset hashes, ECR registry hosts and account IDs replaced by placeholders."""
    text = ASSET_HASH.sub("<asset-hash>", json.dumps(template, sort_keys=True))
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
    json_snapshot = snapshot.use_extension(JSONSnapshotExtension)
    for name in sorted(synthesized.templates):
        assert normalized(synthesized.templates[name]) == json_snapshot(name=name)


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
