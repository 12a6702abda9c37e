"""Synth time of every environment against a one-bucket CDK app, and synth determinism.

    .venv/bin/python benchmarks/synth.py            # 5 rounds, prints a JSON summary
    .venv/bin/python benchmarks/synth.py --rounds 3 --json synth.json

Each synth runs in a fresh Python process (jsii start-up included, as for `python app.py`), the two
apps alternating so that machine load hits both alike. Both apps synthesize with CDK's built-in
CloudFormation validation off (the hfpipe default; cfn-lint is the template check). The first two
hfpipe synths are then compared: templates, asset manifests and asset bytes must be identical.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if __package__ in (None, ""):
    sys.path.insert(0, str(ROOT))

from benchmarks.common import figure  # noqa: E402

HFPIPE_APP = """
import sys
sys.path.insert(0, {root!r})
import app
app.build_app(outdir={outdir!r}).synth()
"""

ONE_BUCKET_APP = """
import aws_cdk as cdk
from aws_cdk import aws_s3 as s3
app = cdk.App(outdir={outdir!r}, builtin_cloud_formation_validation=False)
stack = cdk.Stack(app, "OneBucket")
s3.Bucket(stack, "Bucket")
app.synth()
"""


def run_synth(program: str, outdir: Path) -> float:
    """Wall seconds of one synth in a fresh interpreter."""
    env = {
        **os.environ,
        "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",
        "CDK_DISABLE_CLI_TELEMETRY": "true",
    }
    # A configured default account would change the templates between machines, not between runs.
    env.pop("CDK_DEFAULT_ACCOUNT", None)
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-c", program.format(root=str(ROOT), outdir=str(outdir))],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
    )
    return time.perf_counter() - started


def assembly_fingerprint(outdir: Path) -> dict[str, dict[str, Any]]:
    """Templates, asset manifests and staged asset bytes of one cloud assembly."""
    return {
        "templates": {p.name: json.loads(p.read_text()) for p in sorted(outdir.glob("*.template.json"))},
        "assets": {p.name: json.loads(p.read_text()) for p in sorted(outdir.glob("*.assets.json"))},
        "asset_files": {p.name: p.read_bytes() for p in sorted(outdir.glob("asset.*")) if p.is_file()},
    }


def compare(rounds: int) -> dict[str, Any]:
    """`rounds` synths of each app, alternating; medians, ratio and (with 2+ rounds) determinism."""
    if rounds < 1:
        raise ValueError(f"rounds={rounds}: need at least 1")
    hfpipe, bucket = [], []
    with tempfile.TemporaryDirectory(prefix="hfpipe-synth-") as tmp:
        outdirs = [Path(tmp) / f"hfpipe-{i}" for i in range(rounds)]
        for i in range(rounds):
            bucket.append(run_synth(ONE_BUCKET_APP, Path(tmp) / f"bucket-{i}"))
            hfpipe.append(run_synth(HFPIPE_APP, outdirs[i]))
        first = assembly_fingerprint(outdirs[0])
        summary: dict[str, Any] = {
            "rounds": rounds,
            "hfpipe_all_environments_s": {"median": statistics.median(hfpipe), "runs": hfpipe},
            "one_bucket_app_s": {"median": statistics.median(bucket), "runs": bucket},
            "ratio_median": statistics.median(hfpipe) / statistics.median(bucket),
            "stacks": sorted(first["templates"]),
            "asset_files": sorted(first["asset_files"]),
        }
        if rounds >= 2:
            second = assembly_fingerprint(outdirs[1])
            summary["identical_templates"] = first["templates"] == second["templates"]
            summary["identical_asset_manifests"] = first["assets"] == second["assets"]
            summary["identical_asset_files"] = first["asset_files"] == second["asset_files"]
    return summary


def measure(quick: bool) -> list[dict]:
    """Issue 7 item 1: synth of every environment vs a one-bucket CDK app, median of 5 (quick: 1)."""
    s = compare(1 if quick else 5)
    notes = f"fresh Python process per synth, apps alternating, median of {s['rounds']}; {len(s['stacks'])} stacks"
    if "identical_templates" in s:
        same = s["identical_templates"] and s["identical_asset_manifests"] and s["identical_asset_files"]
        notes += "; two synths byte-identical" if same else "; WARNING: two synths differ"
    return [
        figure(
            "cdk synth, all environments",
            s["hfpipe_all_environments_s"]["median"],
            "s",
            "one-bucket CDK app",
            s["one_bucket_app_s"]["median"],
            notes,
        )
    ]


def main() -> int:
    """Run the benchmark and print the summary as JSON."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=5, help="synths of each app (median reported)")
    parser.add_argument("--json", type=Path, help="also write the summary to this file")
    args = parser.parse_args()
    if args.rounds < 2:
        parser.error(f"--rounds: {args.rounds} is not accepted; accepted: 2 or more (determinism needs two)")
    summary = compare(args.rounds)
    text = json.dumps(summary, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")
    deterministic = summary["identical_templates"] and summary["identical_asset_manifests"]
    return 0 if deterministic and summary["identical_asset_files"] else 1


if __name__ == "__main__":
    sys.exit(main())
