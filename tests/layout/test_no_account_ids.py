"""No AWS account ID is written in the repository: local mode and the tests take moto's account, synthetic
ones are built at run time (tests/accounts.py), docs write <account>, and image registries come from the
SageMaker SDK's tables at synth. A 12-digit number anywhere in a tracked text file fails here."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TWELVE_DIGITS = re.compile(r"\b[0-9]{12}\b")


def tracked_text_files() -> list[Path]:
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    files = [ROOT / name for name in listed.decode().split("\0") if name]
    return [f for f in files if f.is_file() and b"\0" not in f.read_bytes()[:8192]]


def test_no_twelve_digit_number_is_committed() -> None:
    files = tracked_text_files()
    assert len(files) > 200  # it did read the tree
    found = [
        f"{f.relative_to(ROOT)}:{n}: {line.strip()[:120]}"
        for f in files
        for n, line in enumerate(f.read_text(errors="replace").splitlines(), 1)
        if TWELVE_DIGITS.search(line)
    ]
    assert found == []


def test_the_check_can_fail() -> None:
    assert TWELVE_DIGITS.search("arn:aws:iam::" + "4" * 12 + ":role/x")
    assert not TWELVE_DIGITS.search("arn:aws:iam::" + "4" * 13 + ":role/x")
