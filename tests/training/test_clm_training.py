"""run_clm.py end to end under the container contract (sagemaker-training toolkit, SAGEMAKER_BASE_DIR).

A 2-layer random-weight BLOOM with a tokenizer trained on the fixture dialogues; blocks of 64 tokens.
"""

from __future__ import annotations

import json
import re
import tarfile
import time
from pathlib import Path

import pytest

from hfpipe.fixtures import samsum
from hfpipe.local.serving import endpoint as le
from hfpipe.local.training import container as lc

pytestmark = pytest.mark.slow

# The bloomz recipe's LoRA settings (the script's defaults), sized for a CPU and made to move fast.
HYPERPARAMETERS = {
    "block_size": 64,
    "per_device_train_batch_size": 4,
    "per_device_eval_batch_size": 4,
    "learning_rate": 3e-2,
    "max_steps": 40,
    "save_steps": 4,
    "logging_steps": 1,
    "seed": 7,
    "rouge_eval_samples": 4,
    "generation_max_new_tokens": 8,
}


@pytest.fixture(scope="module")
def fixture_dir(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("samsum")
    samsum.write_samsum(root, n_train=48, n_validation=8)
    samsum.build_tiny_bloom(root / "model")
    return root


def _channels(root: Path) -> dict[str, Path]:
    return {"training": root / "train", "validation": root / "validation", "model": root / "model"}


def _run(job_dir, training_code_dir, fixture_dir, container_env, **overrides):
    return lc.run_training(
        job_dir,
        entry_point="run_clm.py",
        source_dir=training_code_dir,
        hyperparameters={**HYPERPARAMETERS, **overrides},
        channels=_channels(fixture_dir),
        env=container_env,
    )


def _losses(checkpoint: Path) -> dict[int, float]:
    state = json.loads((checkpoint / "trainer_state.json").read_text())
    return {e["step"]: e["loss"] for e in state["log_history"] if "loss" in e}


@pytest.fixture(scope="module")
def int8_job(tmp_path_factory, training_code_dir, fixture_dir, container_env) -> lc.LocalTrainingJob:
    """The recipe's default path (int8 base), uninterrupted; also the reference for the resume test."""
    job = _run(tmp_path_factory.mktemp("int8") / "job", training_code_dir, fixture_dir, container_env)
    assert job.status == "Completed", job.logs()[-5000:]
    return job


def test_loss_falls_and_metrics_are_printed_for_the_metric_definitions(int8_job):
    losses = _losses(int8_job.checkpoint_dir / "checkpoint-40")
    assert len(losses) == 40
    first, last = sum(losses[s] for s in (1, 2, 3)) / 3, sum(losses[s] for s in (38, 39, 40)) / 3
    assert last < first - 0.05, losses
    logs = int8_job.logs()
    assert "quantization=int8, quantized layer types ['Linear8bitLt']" in logs
    for name in (
        "eval_loss",
        "eval_rouge1",
        "eval_rouge2",
        "eval_rougeL",
        "eval_rougeLsum",
        "train_packing_efficiency",
    ):
        assert re.search(rf"^\s*{name}\s*=\s*[0-9.]+\s*$", logs, re.MULTILINE), name
    with tarfile.open(int8_job.output_artifacts) as tar:
        metrics = json.load(tar.extractfile("metrics.json"))  # type: ignore[arg-type]
    assert metrics["global_step"] == 40
    assert 0 <= metrics["eval_rouge1"] <= 100
    assert 0.9 < metrics["train_packing_efficiency"] <= 1.0


def test_adapter_and_merged_model_are_saved_and_agree(int8_job, tmp_path, fixture_dir):
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model_dir = le.extract_model(int8_job.model_artifacts, tmp_path / "model")  # type: ignore[arg-type]
    for name in (
        "model.safetensors",
        "config.json",
        "tokenizer.json",
        "code/inference.py",
        "hfpipe_prompt.json",
    ):
        assert (model_dir / name).is_file(), name
    assert (model_dir / "adapter" / "adapter_model.safetensors").is_file()
    assert not (model_dir / "adapter_config.json").exists()  # merged: a plain model, no adapter on top

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    ids = tokenizer(["Amanda: Where are you?\nJerry: At the park."], return_tensors="pt")["input_ids"]
    merged = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    base = AutoModelForCausalLM.from_pretrained(fixture_dir / "model", dtype=torch.float32)
    adapted = PeftModel.from_pretrained(base, model_dir / "adapter").eval()
    with torch.no_grad():
        merged_logits, adapter_logits = merged(ids).logits, adapted(ids).logits
        with adapted.disable_adapter():
            base_logits = adapted(ids).logits
    # Merging W + BA in fp32 only reorders float sums: agreement to 1e-5 absolute.
    torch.testing.assert_close(merged_logits, adapter_logits, atol=1e-5, rtol=1e-5)
    assert (adapter_logits - base_logits).abs().max() > 1e-3  # the adapter learned something


def test_the_vllm_stand_in_chats_with_the_trained_model_as_the_handler_summarizes(int8_job):
    """model.tar.gz as the vLLM container gets it: the saved chat template makes a chat request the
    training prompt, so the greedy chat answer is the handler's greedy summary of the same dialogue."""
    from hfpipe.local.serving.openai_endpoint import OpenAIEndpoint

    dialogue = "Amanda: I have pizza. Do you want some?\nJerry: Sure!"
    with le.LocalEndpoint(int8_job.model_artifacts) as handler:  # type: ignore[arg-type]
        [summary] = handler.predict({"dialogue": dialogue, "parameters": {"max_new_tokens": 6}})
    with OpenAIEndpoint(int8_job.model_artifacts) as vllm:  # type: ignore[arg-type]
        answer = vllm.predict(
            {"messages": [{"role": "user", "content": dialogue}], "max_tokens": 6, "temperature": 0}
        )
    content = answer["choices"][0]["message"]["content"]
    prompt = f"Summarize the chat dialogue:\n{dialogue}\n---\nSummary:\n"
    # generated_text is prompt + continuation (the handler strips only its "summary").
    assert summary["generated_text"] == prompt + content
    assert content.strip() == summary["summary"]


def test_endpoint_serves_both_request_shapes_from_model_tar_gz(int8_job):
    with le.LocalEndpoint(int8_job.model_artifacts) as endpoint:  # type: ignore[arg-type]
        dialogue = "Amanda: I have pizza. Do you want some?\nJerry: Sure!"
        prompt = f"Summarize the chat dialogue:\n{dialogue}\n---\nSummary:\n"
        by_prompt = endpoint.predict(
            {
                "inputs": prompt,
                "parameters": {"do_sample": True, "top_p": 0.9, "temperature": 0.9, "max_new_tokens": 6},
            }
        )
        by_dialogue = endpoint.predict({"dialogue": dialogue, "parameters": {"max_new_tokens": 6}})
        greedy = endpoint.predict({"inputs": prompt, "parameters": {"max_new_tokens": 6}})
        with pytest.raises(ValueError, match=r"parameters\.max_length is not supported"):
            endpoint.predict({"dialogue": dialogue, "parameters": {"max_length": 3}})
    for answer in (by_prompt, by_dialogue):
        assert isinstance(answer, list) and len(answer) == 1
        assert set(answer[0]) == {"generated_text", "summary"}
        assert answer[0]["generated_text"].startswith(prompt.rstrip("\n")[:40])
    # The server-side template gives exactly the prompt the client built by hand.
    assert by_dialogue == greedy


def test_killed_run_resumes_to_the_same_step_and_loss(
    tmp_path, training_code_dir, fixture_dir, container_env, int8_job
):
    proc = lc.start_training(
        tmp_path / "job",
        entry_point="run_clm.py",
        source_dir=training_code_dir,
        hyperparameters=HYPERPARAMETERS,
        channels=_channels(fixture_dir),
        env=container_env,
    )
    checkpoints = proc.base_dir / "checkpoints"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and proc.poll() is None:
        if any((c / "trainer_state.json").exists() for c in checkpoints.glob("checkpoint-*")):
            break
        time.sleep(0.02)
    proc.stop(grace_seconds=0)  # a spot interruption: the script never sees the signal, then is killed
    stopped = proc.wait()
    assert stopped.status == "Stopped"
    done = sorted(int(c.name.split("-")[1]) for c in checkpoints.glob("checkpoint-*"))
    assert done and max(done) < 40, f"the run ended before it could be interrupted: {done}"

    resumed = _run(tmp_path / "job", training_code_dir, fixture_dir, container_env)
    assert resumed.status == "Completed", resumed.logs()[-5000:]
    assert "resuming from" in resumed.logs()
    with tarfile.open(resumed.output_artifacts) as tar:
        metrics = json.load(tar.extractfile("metrics.json"))  # type: ignore[arg-type]
    assert metrics["global_step"] == 40
    expected = _losses(int8_job.checkpoint_dir / "checkpoint-40")
    got = _losses(resumed.checkpoint_dir / "checkpoint-40")
    assert got.keys() == expected.keys()
    assert got[40] == pytest.approx(expected[40], rel=1e-6, abs=1e-6)
    assert got == pytest.approx(expected, rel=1e-6, abs=1e-6)


@pytest.mark.parametrize(
    ("quantization", "layer", "processes"),
    # The unquantized run doubles as the data-parallel check: torch_distributed, 2 CPU processes (gloo).
    [("nf4", "Linear4bit", 1), ("none", None, 2)],
)
def test_other_quantizations_train_a_few_steps(
    quantization, layer, processes, tmp_path, training_code_dir, fixture_dir, container_env
):
    job = lc.run_training(
        tmp_path / "job",
        entry_point="run_clm.py",
        source_dir=training_code_dir,
        hyperparameters={
            **HYPERPARAMETERS,
            "quantization": quantization,
            "max_steps": 3,
            "save_steps": 3,
            "rouge_eval_samples": 0,
            "merge_adapter": False,
            # One run names its base (an adapter recipe's recipe.adapter.base_model, through the plan).
            **({"adapter_base_model": "my-org/tiny-bloom"} if quantization == "nf4" else {}),
        },
        channels=_channels(fixture_dir),
        env=container_env,
        distribution="torch_distributed" if processes > 1 else None,
        processes_per_host=processes,
    )
    assert job.status == "Completed", job.logs()[-5000:]
    logs = job.logs()
    expected_layers = [layer] if layer else []
    assert f"quantization={quantization}, quantized layer types {expected_layers}" in logs
    assert f"world_size={processes}" in logs
    assert len(_losses(job.checkpoint_dir / "checkpoint-3")) == 3
    # One process writes the outputs (trainer.log_metrics prints on the main process only).
    assert len(re.findall(r"^\s*global_step\s*=\s*3\s*$", logs, re.MULTILINE)) == 1
    # Not merged: the model dir is the adapter itself, which the handler loads over its base.
    assert (job.model_dir / "adapter_config.json").is_file()
    assert not (job.model_dir / "model.safetensors").exists()
    # The adapter names its base as given; otherwise where PEFT loaded it from (the model channel's folder).
    base = json.loads((job.model_dir / "adapter_config.json").read_text())["base_model_name_or_path"]
    assert (base == "my-org/tiny-bloom") == (quantization == "nf4"), base
