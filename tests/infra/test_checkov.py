"""checkov on every synthesized template (every environment of cdk.json): no failed check, no parsing error,
and every check a resource skips carries its reason (stacks/checkov.py).

checkov runs from .venv-checkov (scripts/checkov_venv.sh, which scripts/test.sh calls), apart from .venv
because its dependencies pin other versions than the app's.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from stacks import checkov

pytestmark = pytest.mark.slow

CHECKOV = Path(__file__).resolve().parents[2] / ".venv-checkov" / "bin" / "checkov"


@pytest.fixture(scope="module")
def scanned(synthesized: Any, tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    assert CHECKOV.is_file(), f"{CHECKOV} is missing: run scripts/checkov_venv.sh (scripts/test.sh does)"
    folder = tmp_path_factory.mktemp("templates")
    for name, template in synthesized.templates.items():
        (folder / f"{name}.template.json").write_text(json.dumps(template))
    proc = subprocess.run(
        [
            str(CHECKOV),
            "-d",
            str(folder),
            "--framework",
            "cloudformation",
            "-o",
            "json",
            "--compact",
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    assert proc.stdout.strip(), proc.stderr[-2000:]
    reports = json.loads(proc.stdout)
    return reports if isinstance(reports, list) else [reports]


def test_every_template_passes_checkov(scanned: list[dict[str, Any]], synthesized: Any) -> None:
    failed = [
        f"{check['file_path']} {check['resource']}: {check['check_id']} {check['check_name']}"
        for report in scanned
        for check in report["results"]["failed_checks"]
    ]
    assert failed == []
    assert sum(r["summary"]["parsing_errors"] for r in scanned) == 0
    assert sum(r["summary"]["passed"] for r in scanned) > 100  # it did scan the resources


def test_every_skip_has_its_reason(scanned: list[dict[str, Any]], synthesized: Any) -> None:
    reasons = {
        **checkov.FUNCTION,
        **checkov.SYNCHRONOUS_FUNCTION,
        **checkov.LOG_GROUP,
        **checkov.QUEUE_SQS_MANAGED,
        **checkov.ACCESS_LOG_BUCKET,
    }
    skips = [
        skip
        for template in synthesized.templates.values()
        for resource in template["Resources"].values()
        for skip in resource.get("Metadata", {}).get("checkov", {}).get("skip", [])
    ]
    provider = {**checkov.FUNCTION, **checkov.PROVIDER_FUNCTION}
    assert skips and all(s["comment"] in (reasons.get(s["id"]), provider.get(s["id"])) for s in skips)
    skipped = {c["check_id"] for report in scanned for c in report["results"].get("skipped_checks", [])}
    # Each reason is used, so none outlives the finding it answers.
    assert skipped == set(reasons)


def test_asynchronous_functions_are_not_excused_from_a_dead_letter_queue(synthesized: Any) -> None:
    """The pipeline's functions (CfnFunction, with a Handler): only the synchronously invoked are excused."""
    for template in synthesized.templates.values():
        for resource in template["Resources"].values():
            if resource["Type"] != "AWS::Lambda::Function" or "Handler" not in resource["Properties"]:
                continue
            ids = {s["id"] for s in resource.get("Metadata", {}).get("checkov", {}).get("skip", [])}
            has_queue = "DeadLetterConfig" in resource["Properties"]
            assert ("CKV_AWS_116" in ids) is not has_queue
