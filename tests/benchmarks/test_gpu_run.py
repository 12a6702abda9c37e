"""The prepared GPU run: the wheel set, the CPU rehearsal of benchmarks/gpu_run.sh, the fit and expectation code.

The rehearsal runs the GPU script itself (`benchmarks/gpu_run.sh --tiny`) through the same install path:
the pinned wheels (downloaded by scripts/gpu_wheels.sh, for CPython 3.12) installed into a private folder
first on PYTHONPATH. What cannot install on this Python is named by the install report: on Python 3.11,
multiprocess, whose wheel is tagged py312 only (the interpreter's own multiprocess serves instead); every
other wheel, bitsandbytes' CUDA 13 build included (it carries its CPU library too), installs and is imported
from the private folder. Only the GPU itself is left out: no memory cap (CUDA only), tiny models.

The wheels (58 MiB) are cached in $HFPIPE_GPU_WHEELS or ~/.cache/hfpipe/gpu-wheels; a fresh download from
the package index takes seconds. The rehearsal takes ~75 s of CPU, 77-230 s wall on a 2-core machine (quiet to busy).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import zipfile
from pathlib import Path
from typing import Any

import pytest

from benchmarks import gpu_expect, gpu_expect_table, gpu_fit, gpu_lora, gpu_suite, gpu_wheels

ROOT = Path(__file__).resolve().parents[2]


def _wheel_dir() -> Path:
    return Path(os.environ.get("HFPIPE_GPU_WHEELS") or Path.home() / ".cache" / "hfpipe" / "gpu-wheels")


@pytest.fixture(scope="module")
def wheels() -> Path:
    """The pinned wheel set, downloaded (or found in the cache) by the project's own script."""
    dest = _wheel_dir()
    proc = subprocess.run(
        ["bash", str(ROOT / "scripts" / "gpu_wheels.sh"), str(dest)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PYTHON": sys.executable},
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "MiB  total" in proc.stdout
    return dest


@pytest.fixture(scope="module")
def rehearsal(wheels: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """benchmarks/gpu_run.sh --tiny, as the GPU machine runs it (PYTHON = this interpreter)."""
    tmp = tmp_path_factory.mktemp("gpu-run")
    out, site = tmp / "out", tmp / "site"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(PYTHON=sys.executable, GPU_WHEELS=str(wheels), GPU_SITE=str(site), GPU_BUDGET_S="400")
    t0 = time.perf_counter()
    proc = subprocess.run(
        ["bash", str(ROOT / "benchmarks" / "gpu_run.sh"), "--tiny", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    seconds = time.perf_counter() - t0
    print(f"gpu_run.sh --tiny: {seconds:.1f} s")
    assert (out / "results.json").exists(), proc.stdout[-3000:] + proc.stderr[-3000:]
    return {
        "rc": proc.returncode,
        "stdout": proc.stdout,
        "results": json.loads((out / "results.json").read_text()),
        "markdown": (out / "results.md").read_text(),
        "install": json.loads((out / "install.json").read_text()),
        "log": (out / "log.txt").read_text(),
        "site": site,
        "seconds": seconds,
    }


# ---------------------------------------------------------------------------------------- wheel set


@pytest.mark.slow
def test_downloaded_wheels_are_exactly_the_pins_and_fit_the_carry_limit(wheels: Path) -> None:
    pins = gpu_wheels.read_pins()
    report = gpu_wheels.report(wheels, pins)
    assert [(w["name"], w["version"]) for w in report["wheels"]] == list(pins.items())
    for w in report["wheels"]:
        assert w["file"], w
        name, version = w["file"].split("-")[:2]
        assert (gpu_wheels.normalize(name), version) == (w["name"], w["version"])
    assert report["total_bytes"] < gpu_wheels.MAX_MIB * 2**20, report["total_bytes"]
    # bitsandbytes' manylinux wheel carries the CUDA 13.0 library the GPU machine's torch (cu130) loads.
    bnb = wheels / next(w["file"] for w in report["wheels"] if w["name"] == "bitsandbytes")
    assert "bitsandbytes/libbitsandbytes_cuda130.so" in zipfile.ZipFile(bnb).namelist()


def test_pins_are_the_versions_the_project_pins() -> None:
    # The wheels are the recipes' container versions: every pin that constraints.txt also pins agrees with it.
    constraints = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        if "==" in line and not line.startswith("#"):
            name, version = line.split("==")
            constraints[gpu_wheels.normalize(name)] = version.strip()
    pins = gpu_wheels.read_pins()
    assert {"transformers", "peft", "accelerate", "bitsandbytes", "datasets"} <= set(pins)
    assert {n: v for n, v in pins.items() if n in constraints} == {
        n: constraints[n] for n in pins if n in constraints
    }
    assert pins["transformers"] == "4.56.2" and pins["peft"] == "0.17.1"


def test_pin_file_errors_name_the_line(tmp_path: Path) -> None:
    bad = tmp_path / "pins.txt"
    bad.write_text("transformers==4.56.2\npeft>=0.17\n")
    with pytest.raises(ValueError, match=r"pins.txt:2: 'peft>=0.17' is not name==version"):
        gpu_wheels.read_pins(bad)
    bad.write_text("peft==0.17.1\nPEFT==0.17.1\n")
    with pytest.raises(ValueError, match="pinned twice"):
        gpu_wheels.read_pins(bad)


# ---------------------------------------------------------------------------------------- rehearsal


@pytest.mark.slow
def test_rehearsal_installs_exactly_the_installable_pins_and_imports_them(rehearsal: dict[str, Any]) -> None:
    pins = gpu_wheels.read_pins()
    install = rehearsal["install"]
    not_here = {w["name"]: w["reason"] for w in install["wheels"] if not w["installable"]}
    for reason in not_here.values():
        assert "do not include this Python" in reason, reason
    if sys.version_info[:2] != (3, 12):
        assert set(not_here) == {"multiprocess"}, not_here  # its only wheel is py312-none-any
    installed = {}
    for info in rehearsal["site"].glob("*.dist-info"):
        name, version = info.name[: -len(".dist-info")].rsplit("-", 1)
        installed[gpu_wheels.normalize(name)] = version
    assert installed == {n: v for n, v in pins.items() if n not in not_here}
    env = rehearsal["results"]["environment"]
    for name, info in env["packages"].items():
        assert info["version"] == pins[gpu_wheels.normalize(name)], (name, info)
        assert Path(info["from"]).parent == rehearsal["site"], (name, info)
    assert env["bitsandbytes_check"]["int8"] == "ok" and env["bitsandbytes_check"]["nf4"] == "ok", env


@pytest.mark.slow
def test_rehearsal_runs_each_recipe_script_at_its_own_shapes(rehearsal: dict[str, Any]) -> None:
    rows = {r["recipe"]: r for r in rehearsal["results"]["fit"]}
    assert list(rows) == list(gpu_fit.RECIPES)
    for recipe, row in rows.items():
        case = gpu_fit.make_case(recipe, tiny=True)
        hp = case.hyperparameters
        if row["status"] == "ok":
            assert row["verdict"] == "ran (no cap on CPU)"
            assert len(row["step_seconds"]) == gpu_suite.FIT_STEPS[True], row
            # The recipe's batch and sequence length reach the model (the point of the fit run).
            assert row["batch_shapes"][0] == [case.batch, case.seq_len], row["batch_shapes"]
            assert row["hyperparameters"]["learning_rate"] == hp["learning_rate"]
        else:
            # A recipe whose hyperparameters its own script rejects is a finding the run reports; the
            # arguments named must be the recipe's, never ones the fit run adds.
            assert row["status"] == "failed" and "not used by the HfArgumentParser" in row["error"], row
            flags = re.findall(r"'--([a-z_]+)'", row["error"])
            assert flags and set(flags) <= set(hp) - set(gpu_fit.FIT_OVERRIDES), (flags, hp)
        assert row["expected"]["memory"]["total"] > 0
    # These two run today; the LoRA recipe is the one whose speed and fit matter most.
    assert rows["bert-large-squad-ddp"]["status"] == "ok", rows["bert-large-squad-ddp"]
    assert rows["bloomz-7b1-lora-samsum"]["status"] == "ok", rows["bloomz-7b1-lora-samsum"]
    fits_ok = all(r["status"] in ("ok", "oom") for r in rows.values())
    assert rehearsal["rc"] == (0 if fits_ok else 1), rehearsal["stdout"][-2000:]
    assert f"[gpu_run] exit {rehearsal['rc']}" in rehearsal["log"]


@pytest.mark.slow
def test_rehearsal_measures_every_lora_setting_against_the_original(rehearsal: dict[str, Any]) -> None:
    lora = rehearsal["results"]["lora"]
    rows = {r["setting"]: r for r in lora["rows"]}
    assert list(rows) == list(gpu_suite.LORA_ORDER)
    assert sorted(gpu_suite.LORA_ORDER) == sorted(s.name for s in gpu_lora.SETTINGS)
    assert all(r["status"] == "ok" and r["tokens_per_s"] > 0 for r in rows.values()), rows
    assert lora["memory_cap_gib"] == gpu_suite.LORA_CAP_GIB == 24.0
    md = rehearsal["markdown"]
    assert "| original-int8-ckpt | int8 | yes | adafactor | ok |" in md
    assert "1.00x" in md and "### Measured vs expected" in md
    assert "| recipe | instance (GPU) | cap GiB |" in md
    steps = [s["step"] for s in rehearsal["results"]["steps"]]
    assert steps == ["environment", *(f"fit:{r}" for r in gpu_fit.RECIPES), "lora"]


# ----------------------------------------------------------------------------------- fit and expect


def test_instance_gpu_table() -> None:
    assert gpu_fit.instance_gpu("ml.g5.2xlarge") == ("NVIDIA A10G", 24.0, 1)
    assert gpu_fit.instance_gpu("ml.p3.16xlarge") == ("NVIDIA V100 16GB", 16.0, 8)
    assert gpu_fit.instance_gpu("ml.p3.2xlarge") == ("NVIDIA V100 16GB", 16.0, 1)
    assert gpu_fit.instance_gpu("ml.p3dn.24xlarge")[1] == 32.0
    assert gpu_fit.instance_gpu("ml.g4dn.xlarge")[1] == 16.0
    assert gpu_fit.instance_gpu("ml.p4d.24xlarge")[1] == 40.0
    with pytest.raises(ValueError, match=r"'ml.m5.xlarge' has no GPU in the table; known families: ml\.g5\."):
        gpu_fit.instance_gpu("ml.m5.xlarge")


def test_fit_run_keeps_the_recipe_hyperparameters(tmp_path: Path) -> None:
    for case in gpu_fit.cases(tiny=False):
        hp = gpu_fit.fit_hyperparameters(case, tmp_path / "m", tmp_path / "d.json", tmp_path, steps=3)
        changed = (
            set(gpu_fit.FIT_OVERRIDES) | set(gpu_fit.CLM_OVERRIDES) | {"model_name_or_path", "max_steps"}
        )
        for key, value in case.hyperparameters.items():
            if key not in changed and key not in gpu_fit.FIT_DROPPED:
                assert hp[key] == value, (case.recipe, key)
        assert (
            hp["max_steps"] == 3
            and hp["do_eval"] is False
            and hp["model_name_or_path"] == str(tmp_path / "m")
        )
    bloom = gpu_fit.make_case("bloomz-7b1-lora-samsum", tiny=False)
    assert (bloom.batch, bloom.seq_len, bloom.cap_gib) == (1, 2048, 24.0)
    assert bloom.config["hidden_size"] == 4096 and bloom.config["n_layer"] == 30


@pytest.mark.parametrize(
    ("architecture", "head", "cls_name"),
    [
        ("bert-large-uncased-whole-word-masking", "qa", "AutoModelForQuestionAnswering"),
        ("roberta-large", "classification", "AutoModelForSequenceClassification"),
        ("distilbert-base-uncased", "classification", "AutoModelForSequenceClassification"),
    ],
)
def test_parameter_formula_matches_the_model_the_scripts_build(
    architecture: str, head: str, cls_name: str
) -> None:
    import torch
    import transformers

    labels = 2 if head == "qa" else 3  # the QA head is a Linear(h, num_labels) for start and end: 2
    config = transformers.AutoConfig.for_model(**gpu_fit.ARCHITECTURES[architecture], num_labels=labels)
    with torch.device("meta"):
        model = getattr(transformers, cls_name).from_config(config)
    params = gpu_expect.encoder_params(gpu_fit.ARCHITECTURES[architecture], head, num_labels=labels)
    assert params["total"] == sum(p.numel() for p in model.parameters())
    matmul = sum(p.numel() for n, p in model.named_parameters() if p.ndim == 2 and "embeddings" not in n)
    assert params["matmul"] == matmul


def test_lora_expectations_order_the_settings() -> None:
    cfg, gib = gpu_lora.BLOOMZ_7B1_CONFIG, 2**30

    def total(q: str, ckpt: bool, kbit: bool) -> float:
        return (
            gpu_expect.bloom_memory(cfg, gpu_expect.LoraSetting(q, ckpt, "adamw", kbit), 2048, 8)["total"]
            / gib
        )

    assert total("nf4", True, False) < total("int8", True, True) < total("none", True, False)
    assert 17 < total("int8", True, True) < 20  # the original: fits an A10G's 24 GiB
    for q, kbit in (("int8", True), ("nf4", False), ("none", False)):
        assert total(q, False, kbit) > 24 > total(q, True, kbit)  # without checkpointing nothing fits
    weights = gpu_expect.bloom_memory(cfg, gpu_expect.LoraSetting("none", True, "adamw", False), 2048, 8)[
        "weights"
    ]
    assert weights == pytest.approx(2 * 7_069_016_064, rel=1e-3)  # bf16: 2 bytes per parameter


def test_expectation_table_has_a_row_per_recipe_and_lora_setting() -> None:
    rows = gpu_expect_table.expectation_rows()
    expected = [f"recipe {r}" for r in gpu_fit.RECIPES] + [f"LoRA {s.name}" for s in gpu_lora.SETTINGS]
    assert [r["what"] for r in rows] == expected
    assert all(r["memory"]["total"] > 0 for r in rows)
    assert len(gpu_expect_table.markdown().splitlines()) == 2 + len(expected)


def test_verdicts() -> None:
    row = {"status": "ok", "cap_gib": 24.0, "peak_reserved_gib": 18.0}
    assert gpu_fit.verdict(row) == "fits"
    assert gpu_fit.verdict({**row, "peak_reserved_gib": 23.5}) == "tight (< 1 GiB left)"
    assert gpu_fit.verdict({**row, "status": "oom"}) == "OOM"
    assert gpu_fit.verdict({**row, "peak_reserved_gib": None}) == "ran (no cap on CPU)"
    assert gpu_fit.verdict({**row, "status": "timeout"}) == "timeout"
    assert gpu_lora._fit_cell({"fit_status": "oom", "fit_cap_gib": 24.0, "fit_peak_gib": 23.71}) == (
        "OOM at 23.7 GiB of 24"
    )
    assert gpu_lora._fit_cell({"fit_status": "fits", "fit_cap_gib": 24.0, "fit_peak_gib": 18.04}) == (
        "fits, 18.0 GiB of 24"
    )


def test_out_of_memory_is_recognised() -> None:
    import torch

    assert gpu_lora.is_oom(torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"))
    assert gpu_lora.is_oom(RuntimeError("CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling cublasCreate"))
    assert not gpu_lora.is_oom(ValueError("quantization='int4' is not supported"))


def test_a_script_out_of_memory_is_a_result(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The child process of a fit run, in-process: the script (stood in for by runpy) runs out of memory.
    import runpy

    import torch
    import transformers

    monkeypatch.setattr(transformers.Trainer, "__init__", transformers.Trainer.__init__)
    monkeypatch.setattr(transformers.Trainer, "training_step", transformers.Trainer.training_step)
    monkeypatch.setattr(sys, "argv", list(sys.argv))
    for var in ("SM_MODEL_DIR", "HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"):
        monkeypatch.setenv(var, os.environ.get(var, "1"))

    def out_of_memory(path: str, run_name: str) -> None:
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 1.50 GiB (simulated)")

    monkeypatch.setattr(runpy, "run_path", out_of_memory)
    out = tmp_path / "row.json"
    spec = {"recipe": "distilbert-spot", "tiny": True, "work": str(tmp_path), "out": str(out), "steps": 1}
    assert gpu_fit.child(spec) == 0
    row = json.loads(out.read_text())
    assert row["status"] == "oom" and "Tried to allocate 1.50 GiB" in row["error"], row
    assert gpu_fit.verdict(row) == "OOM"
    # The model folder was prepared before the script ran: config, weights, tokenizer.
    model_dir = tmp_path / "models" / "distilbert-base-uncased-tiny"
    assert {"config.json", "model.safetensors", "tokenizer.json"} <= {p.name for p in model_dir.iterdir()}


def test_fit_runs_sharing_a_process_keep_what_it_wrote(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The rehearsal's one child for every fit run, stopped at its cap during the second run: the first keeps
    # its result, the second is the timeout, the ones never started are skipped, each saying why.
    recipes = list(gpu_fit.RECIPES)
    commands: list[list[str]] = []

    def stopped_in_the_second(cmd: list[str], timeout: float) -> int | str:
        commands.append(cmd)
        done = {"recipe": recipes[0], "status": "ok", "step_seconds": [0.1, 0.1], "wall_seconds": 3.0}
        (tmp_path / f"fit-{recipes[0]}.json").write_text(json.dumps(done))
        running = {"recipe": recipes[1], "status": "training", "step_seconds": [0.2]}
        (tmp_path / f"fit-{recipes[1]}.json").write_text(json.dumps(running))
        return "timeout"

    monkeypatch.setattr(gpu_fit, "run_process", stopped_in_the_second)
    rows = gpu_fit.run_cases(recipes, tmp_path, 2, True, 42.0)
    assert len(commands) == 1 and commands[0][-2] == "--children", commands
    specs = json.loads(Path(commands[0][-1]).read_text())
    assert [s["recipe"] for s in specs] == recipes and {s["steps"] for s in specs} == {2}
    assert [r["recipe"] for r in rows] == recipes
    assert [r["status"] for r in rows] == ["ok", "timeout", *["skipped"] * (len(recipes) - 2)]
    assert rows[0]["verdict"] == "ran (no cap on CPU)" and rows[0]["expected"]["memory"]["total"] > 0
    assert rows[1]["error"] == "stopped after its 42 s cap (training)", rows[1]
    assert rows[2]["error"] == "not started: the shared fit process ended first (its 42 s cap)", rows[2]


def _fake_wheels(folder: Path, pins: dict[str, str], size: int = 1024) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, version in pins.items():
        (folder / f"{name.replace('-', '_')}-{version}-py3-none-any.whl").write_bytes(b"0" * size)


def test_wheel_check_names_what_is_missing_or_too_large(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    pins = gpu_wheels.read_pins()
    _fake_wheels(tmp_path, pins)
    (tmp_path / "transformers-4.0.0-py3-none-any.whl").write_bytes(b"0" * 10**6)  # not the pinned version
    assert gpu_wheels.main(["check", str(tmp_path)]) == 0
    assert f"{len(pins)} wheels" in capsys.readouterr().out
    assert gpu_wheels.main(["installable", str(tmp_path), "bitsandbytes", "datasets"]) == 0
    assert [Path(line).name.split("-")[0] for line in capsys.readouterr().out.split()] == [
        "bitsandbytes",
        "datasets",
    ]
    assert gpu_wheels.main(["installable", str(tmp_path), "torch"]) == 2
    assert "not pinned in gpu_wheels.txt: torch" in capsys.readouterr().err
    monkeypatch.setattr(gpu_wheels, "MAX_MIB", 0.001)
    assert gpu_wheels.main(["check", str(tmp_path)]) == 1
    assert "over the 0.001 MiB limit" in capsys.readouterr().err
    (tmp_path / "peft-0.17.1-py3-none-any.whl").unlink()
    assert gpu_wheels.main(["check", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "not in" in err and "peft==0.17.1" in err, err
