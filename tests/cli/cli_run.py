"""`hfpipe` run in-process for the command tests: its exit status, stdout and stderr."""

from __future__ import annotations

import pytest

from hfpipe.cli import main


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def start_tiny_lora(capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, str, str]:
    """`hfpipe start --env dev --recipe tiny-lora` with ``extra``."""
    return run(capsys, "start", "--env", "dev", "--recipe", "tiny-lora", *extra)
