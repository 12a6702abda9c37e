"""The `synthesized` fixture's synthesis (tests/conftest.py, tests/app_synth.py): one per run, made by the first
pytest-xdist worker that needs it and read by the others (each synthesis is ~8 s of CPU); a worker that
read it builds the construct tree only where a test asks for it (`app`, `stack`)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]


def suite_conftest() -> Any:
    """A fresh copy of tests/conftest.py (not the run's own module), to read its settings."""
    spec = importlib.util.spec_from_file_location("suite_conftest", ROOT / "tests" / "conftest.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def made(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """app_synth's synthesis played by a stand-in that writes a one-stack cloud assembly (a real one takes
    seconds); the folders it synthesized into, in order. The first call fails, as a cdk-nag finding would."""
    import app_synth

    made: list[Path] = []

    def synthesize(outdir: Path, context: dict[str, Any], *, nag: bool) -> Any:
        made.append(outdir)
        if len(made) == 1:
            raise RuntimeError("an unacknowledged cdk-nag finding")
        outdir.mkdir(parents=True, exist_ok=True)
        (outdir / "p.template.json").write_text(
            json.dumps({"Resources": {"Queue": {"Type": "AWS::SQS::Queue"}}})
        )
        stack = {"type": "aws:cloudformation:stack", "displayName": "Hfpipe-dev-Pipeline"}
        stack["properties"] = {"templateFile": "p.template.json"}
        (outdir / "manifest.json").write_text(json.dumps({"artifacts": {"p": stack}}))
        return app_synth._read(outdir, context, nag=nag, seconds=1.0, app=f"app {len(made)}")

    monkeypatch.setattr(app_synth, "_synthesize", synthesize)
    return made


def test_one_synthesis_serves_every_worker_of_the_run(
    made: list[Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import app_synth

    assert (
        suite_conftest().SHARED_ENV == app_synth.SHARED_ENV
    )  # the run's controller sets what the workers read
    shared = tmp_path / "shared"
    shared.mkdir()
    monkeypatch.setenv(app_synth.SHARED_ENV, str(shared))
    with pytest.raises(RuntimeError, match="cdk-nag"):  # a failed synthesis is not marked: the next one tries
        app_synth.synthesize_shared(tmp_path / "worker-1")
    first = app_synth.synthesize_shared(tmp_path / "worker-1")
    second = app_synth.synthesize_shared(tmp_path / "worker-2")  # another worker, later
    assert len(made) == 2 and made[1].parent == shared
    assert second.outdir == first.outdir and second.templates == first.templates
    assert second.pipeline() == {"Resources": {"Queue": {"Type": "AWS::SQS::Queue"}}}
    assert second.environments == first.environments and second.nag is first.nag is True
    assert first.app == "app 2" and len(made) == 2  # the worker that synthesized holds its app
    assert second.app == "app 3" and second.app == "app 3" and len(made) == 3  # built here, on first use
    assert made[2].parent == shared and made[2] != made[1]
    # Without the run's folder (a test module run on its own outside the suite's conftest), its own synthesis.
    monkeypatch.delenv(app_synth.SHARED_ENV)
    alone = app_synth.synthesize_shared(tmp_path / "alone")
    assert (alone.outdir, len(made)) == (tmp_path / "alone", 4)
