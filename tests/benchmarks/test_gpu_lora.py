"""benchmarks/gpu_lora.py on CPU: the tiny run end to end, the FLOPs count, failure reporting."""

from __future__ import annotations

from typing import Any

import pytest

from benchmarks import gpu_lora


def _table(stdout: str) -> dict[str, dict[str, str]]:
    lines = [ln for ln in stdout.splitlines() if ln.strip()]
    start = next(i for i, ln in enumerate(lines) if ln.startswith("| setting |"))
    header = [c.strip() for c in lines[start].strip("|").split("|")]
    rows = {}
    for ln in lines[start + 2 :]:
        cells = [c.strip() for c in ln.strip("|").split("|")]
        rows[cells[0]] = dict(zip(header, cells, strict=True))
    return rows


def one_step(**options: Any) -> gpu_lora.Options:
    """Options of a tiny run on CPU, one step of 32-token blocks on one thread; ``options``: the rest."""
    return gpu_lora.Options(
        tiny=True, device="cpu", block_size=32, warmup_steps=0, steps=1, threads=1, **options
    )


def _assert_measured_or_explained(row: dict[str, str]) -> None:
    if row["status"] == "ok":
        assert float(row["tokens/s"].replace(",", "")) > 0, row
        assert row["error"] == ""
    else:
        assert row["status"] in ("failed", "skipped") and len(row["error"]) > 5, row


@pytest.mark.slow
def test_tiny_run_prints_every_setting_last(capsys: pytest.CaptureFixture[str]) -> None:
    # main() is the command line (`python benchmarks/gpu_lora.py --tiny ...`); called in-process to share
    # this process's imports. The script entry point itself runs in test_isolated_child_process_...
    rc = gpu_lora.main(["--tiny", "--block-size", "64", "--threads", "1"])
    stdout = capsys.readouterr().out
    assert rc == 0
    rows = _table(stdout)
    assert list(rows) == [s.name for s in gpu_lora.SETTINGS]
    for row in rows.values():
        _assert_measured_or_explained(row)
    # The table is the last thing printed.
    assert stdout.rstrip().splitlines()[-1].startswith("| bf16-no-ckpt |")
    assert rows[gpu_lora.BASELINE]["vs original"] == "1.00x"
    # bitsandbytes 0.50.2 runs int8 and NF4 on CPU: every setting is expected to be measured here.
    assert {r["status"] for r in rows.values()} == {"ok"}, rows


@pytest.mark.slow
def test_a_failing_setting_is_reported_and_the_others_go_on(monkeypatch: pytest.MonkeyPatch) -> None:
    real_load = gpu_lora.load_model

    def load(setting, model_dir, device):  # type: ignore[no-untyped-def]
        if setting.quantization == "nf4":
            raise RuntimeError("CUDA out of memory (simulated)")
        return real_load(setting, model_dir, device)

    monkeypatch.setattr(gpu_lora, "load_model", load)
    opts = one_step(settings=("nf4-ckpt", "bf16-no-ckpt"))
    run = gpu_lora.run_benchmark(opts)
    rows = {r["setting"]: r for r in run["rows"]}
    assert rows["nf4-ckpt"]["status"] == "failed"
    assert rows["nf4-ckpt"]["error"] == "RuntimeError: CUDA out of memory (simulated)"
    assert rows["bf16-no-ckpt"]["status"] == "ok" and rows["bf16-no-ckpt"]["tokens_per_s"] > 0
    text = gpu_lora.render(run)
    assert "| nf4-ckpt | nf4 | yes | adamw | failed |" in text
    figs = gpu_lora.figures(run, "tiny")
    assert [f["name"] for f in figs] == ["LoRA train nf4-ckpt", "LoRA train bf16-no-ckpt"]
    assert figs[0]["value"] is None and "failed: RuntimeError" in figs[0]["notes"]


@pytest.mark.slow
def test_isolated_child_process_returns_its_row() -> None:
    # The GPU default: each setting in a child process. One setting keeps this test short.
    opts = one_step(settings=("bf16-ckpt",), isolate=True)
    run = gpu_lora.run_benchmark(opts)
    [row] = run["rows"]
    assert run["isolated"] is True
    assert row["status"] == "ok", row
    assert row["tokens_per_s"] > 0 and row["trainable_params"] == 2 * 8 * (64 + 3 * 64)


def test_time_budget_skips_settings_not_started() -> None:
    opts = gpu_lora.Options(tiny=True, device="cpu", settings=("bf16-ckpt",), time_budget=0.0, isolate=False)
    [row] = gpu_lora.run_benchmark(opts)["rows"]
    assert row["status"] == "skipped" and "time budget" in row["error"]


def test_flops_n_matches_the_bloomz_7b1_parameter_count() -> None:
    import torch
    from transformers import BloomForCausalLM

    config = gpu_lora.build_config(tiny=False)
    with torch.device("meta"):
        model = BloomForCausalLM(config)
    # N counts the matmul weights: every 2-D weight except the embedding, plus the tied output projection.
    matmul = sum(
        p.numel() for n, p in model.named_parameters() if p.ndim == 2 and "word_embeddings.weight" not in n
    )
    vocab_h = config.vocab_size * config.hidden_size
    f = gpu_lora.flops_per_token(config.to_dict(), seq_len=2048, lora_r=8, checkpointing=False)
    assert f["n"] == matmul + vocab_h
    # bigscience/bloomz-7b1 is published as 7,069,016,064 parameters.
    assert sum(p.numel() for p in model.parameters()) == 7_069_016_064


def test_flops_factors_for_frozen_base_with_lora() -> None:
    cfg = {"n_layer": 2, "hidden_size": 8, "vocab_size": 10}
    n_blocks, n, n_lora, attn = 2 * 12 * 64, 2 * 12 * 64 + 80, 2 * 4 * 32, 4 * 2 * 8 * 16
    plain = gpu_lora.flops_per_token(cfg, seq_len=16, lora_r=4, checkpointing=False)
    ckpt = gpu_lora.flops_per_token(cfg, seq_len=16, lora_r=4, checkpointing=True)
    assert plain["model"] == plain["hardware"] == 4 * n + 6 * n_lora + 3 * attn
    assert ckpt["model"] == plain["model"]
    assert ckpt["hardware"] == plain["model"] + 2 * n_blocks + 2 * n_lora + attn


def test_peak_table_by_gpu_name() -> None:
    assert gpu_lora.peak_bf16_tflops("NVIDIA H200") == 989.0
    assert gpu_lora.peak_bf16_tflops("NVIDIA H100 80GB HBM3") == 989.0
    assert gpu_lora.peak_bf16_tflops("NVIDIA H100 PCIe") == 756.0
    assert gpu_lora.peak_bf16_tflops("NVIDIA A10G") is None


def test_bad_arguments_name_the_flag() -> None:
    with pytest.raises(SystemExit):
        gpu_lora.parse_args(["--steps", "0"])
    with pytest.raises(ValueError, match="unknown \\['int4'\\]"):
        gpu_lora.run_benchmark(gpu_lora.Options(tiny=True, device="cpu", settings=("int4",)))
    with pytest.raises(ValueError, match="needs a CUDA GPU"):
        gpu_lora.run_benchmark(gpu_lora.Options(tiny=False, device="cpu"))
