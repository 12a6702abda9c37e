"""benchmarks/run.py with fake measurement modules: the files it writes, failures, bad figures."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from benchmarks import common, run

FAKE_OK = """
from benchmarks.common import figure

def measure(quick):
    n = 3 if quick else 5
    return [
        figure("fake ours", 2.0 * n, "ms", "fake original", 8.0 * n, "median of %d" % n),
        figure("fake missing baseline", 1.0, "s", "none", None),
    ]
"""
FAKE_RAISES = """
def measure(quick):
    raise RuntimeError("synthetic failure in the fake module")
"""
FAKE_BAD_FIGURE = """
def measure(quick):
    return [{"name": "no unit", "value": 1.0}]
"""


@pytest.fixture
def fake_modules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    pkg = tmp_path / "fakebench"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    for name, src in {"ok": FAKE_OK, "raises": FAKE_RAISES, "bad": FAKE_BAD_FIGURE}.items():
        (pkg / f"{name}.py").write_text(textwrap.dedent(src))
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def test_writes_markdown_and_json_with_machine_versions_and_ratios(
    fake_modules: Path, tmp_path: Path
) -> None:
    out = tmp_path / "results"
    rc = run.main(["--quick", "--only", "fakebench.ok", "--out", str(out)])
    assert rc == 0
    stem = f"{common.today()}-{common.machine_slug(common.machine_info())}"
    md, js = out / f"{stem}.md", out / f"{stem}.json"
    data = json.loads(js.read_text())
    assert data["quick"] is True
    assert data["machine"]["cores"] >= 1 and data["machine"]["cpu"]
    for pkg in ("python", "torch", "transformers", "peft", "bitsandbytes", "aws-cdk-lib"):
        assert pkg in data["versions"]
    assert data["versions"]["aws-cdk-lib"] == "2.275.0"
    [entry] = data["measurements"]
    assert entry["status"] == "ok"
    first, second = entry["figures"]
    # quick -> n=3: 6 ms vs 24 ms, ratio computed by figure(), not by the module.
    assert (first["value"], first["baseline_value"], first["ratio"]) == (6.0, 24.0, 0.25)
    assert second["ratio"] is None
    text = md.read_text()
    assert "| fake ours | 6 | ms | fake original | 24 | 0.25x | median of 3 |" in text
    assert "## Machine" in text and "## Versions" in text and "aws-cdk-lib" in text


def test_a_failing_module_is_recorded_and_the_others_still_run(fake_modules: Path, tmp_path: Path) -> None:
    out = tmp_path / "results"
    rc = run.main(["--only", "fakebench.raises,fakebench.ok,fakebench.absent", "--out", str(out)])
    assert rc == 1
    [js] = out.glob("*.json")
    entries = {m["module"]: m for m in json.loads(js.read_text())["measurements"]}
    assert entries["fakebench.raises"]["status"] == "failed"
    assert "synthetic failure in the fake module" in entries["fakebench.raises"]["error"]
    assert entries["fakebench.ok"]["status"] == "ok" and len(entries["fakebench.ok"]["figures"]) == 2
    assert entries["fakebench.absent"]["status"] == "missing"
    [md] = out.glob("*.md")
    assert "failed: RuntimeError: synthetic failure" in md.read_text()


def test_a_figure_without_the_contract_keys_fails_naming_the_keys(fake_modules: Path) -> None:
    entry = run.run_module("fakebench.bad", quick=True)
    assert entry["status"] == "failed"
    assert "fakebench.bad" in entry["error"] and "'unit'" in entry["error"] and "'ratio'" in entry["error"]


def test_default_list_names_every_issue_measurement_and_short_names_resolve() -> None:
    assert "benchmarks.gpu_lora" in run.MEASUREMENTS and len(run.MEASUREMENTS) == 5
    assert run._qualify("gpu_lora") == "benchmarks.gpu_lora"
    assert run._qualify("fakebench.ok") == "fakebench.ok"


def test_figure_ratio_and_validation() -> None:
    assert common.figure("a", 3.0, "s", "b", 1.5)["ratio"] == 2.0
    assert common.figure("a", 3.0, "s", "b", 0.0)["ratio"] is None
    with pytest.raises(ValueError, match="value='fast'"):
        common.validate_figure({**common.figure("a", 1.0, "s", "b", 1.0), "value": "fast"}, "m")


def test_machine_slug_prefers_the_gpu() -> None:
    assert common.machine_slug({"gpus": ["NVIDIA H200"], "cores": 16, "memory_gib": 128}) == "nvidia-h200"
    assert common.machine_slug({"gpus": [], "cores": 2, "memory_gib": 23.4}) == "cpu-2c-23gib"


def test_json_floats_are_rounded_to_six_significant_digits() -> None:
    nested = {"modules": [{"v": 8492.3279861, "n": 3, "s": "x"}], "r": 0.123456789}
    assert common._rounded(nested) == {"modules": [{"v": 8492.33, "n": 3, "s": "x"}], "r": 0.123457}
