"""Fit: does each recipe's own training script, with its own hyperparameters, train the full-size model in
the GPU memory of the instance the recipe names?

For each recipe: the architecture at full size with random weights (configs below, nothing downloaded), a
tokenizer trained on fixture text (its vocabulary is small; what matters is that every input reaches the
recipe's sequence length), fixture data shaped so that every batch is full length, and the recipe's
training script run in a child process with the recipe's hyperparameters and a few optimizer steps, its
CUDA memory capped with torch.cuda.set_per_process_memory_fraction to what one GPU of the instance has.
It reports the peak memory (max_memory_allocated / max_memory_reserved), the time per step, and
"fits" or "OOM" (out of memory is a result, not a crash).

What the run changes in the hyperparameters, and only that (`FIT_OVERRIDES`): where the model and data come
from (a local folder and file instead of the hub), max_steps, no evaluation, no checkpoints, no merge of
the LoRA adapter. Multi-GPU recipes run one process: the per-GPU memory of data parallel training (each GPU
holds a replica; DDP adds a gradient bucket copy, 4 B per parameter, which one process does not show), and
an upper bound for FSDP, whose shards would divide weights, gradients and optimizer state by the GPUs.

    python -m benchmarks.gpu_fit                                  # every recipe, on the GPU
    python -m benchmarks.gpu_fit --recipes distilbert-spot --steps 3
    python -m benchmarks.gpu_fit --tiny                           # small models on CPU (what the tests run)
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import random
import runpy
import subprocess
import sys
import time
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import gpu_expect, gpu_lora

ROOT = Path(__file__).resolve().parent.parent
TRAINING_CODE = ROOT / "training_code"

# GPU memory per GPU of the instances the recipes name, in GiB, as AWS lists them:
# https://docs.aws.amazon.com/ec2/latest/instancetypes/ac.html (accelerated computing instance
# specifications: "GPU memory (GiB)"), https://aws.amazon.com/ec2/instance-types/g5/ (A10G, 24 GiB),
# https://aws.amazon.com/ec2/instance-types/p3/ (V100 16 GiB; p3dn.24xlarge 32 GiB per GPU),
# https://aws.amazon.com/ec2/instance-types/g4/ (T4, 16 GiB), https://aws.amazon.com/ec2/instance-types/p4/
# (A100 40 GiB; p4de 80 GiB), https://aws.amazon.com/ec2/instance-types/p5/ (H100 80 GiB). SageMaker's ml.*
# instances are these EC2 types (https://aws.amazon.com/sagemaker/pricing/ lists them with the same GPUs).
# The physical cards expose a little less than the nominal figure to programs (ECC, driver reserve).
INSTANCE_GPUS: dict[str, tuple[str, float, int]] = {
    # family prefix: (GPU, GiB per GPU, GPUs of the largest size are listed per type below)
    "ml.g5.": ("NVIDIA A10G", 24.0, 1),
    "ml.g6.": ("NVIDIA L4", 24.0, 1),
    "ml.g4dn.": ("NVIDIA T4", 16.0, 1),
    "ml.p3dn.": ("NVIDIA V100 32GB", 32.0, 8),
    "ml.p3.": ("NVIDIA V100 16GB", 16.0, 1),
    "ml.p4d.": ("NVIDIA A100 40GB", 40.0, 8),
    "ml.p4de.": ("NVIDIA A100 80GB", 80.0, 8),
    "ml.p5.": ("NVIDIA H100 80GB", 80.0, 8),
}
GPUS_PER_INSTANCE: dict[str, int] = {
    "ml.p3.2xlarge": 1,
    "ml.p3.8xlarge": 4,
    "ml.p3.16xlarge": 8,
    "ml.g5.12xlarge": 4,
    "ml.g5.24xlarge": 4,
    "ml.g5.48xlarge": 8,
    "ml.g4dn.12xlarge": 4,
}


def instance_gpu(instance_type: str) -> tuple[str, float, int]:
    """(GPU name, GiB per GPU, GPUs) of a SageMaker instance type; ValueError names the known families."""
    for prefix, (gpu, gib, count) in INSTANCE_GPUS.items():
        if instance_type.startswith(prefix):
            return gpu, gib, GPUS_PER_INSTANCE.get(instance_type, count)
    raise ValueError(
        f"instance_type={instance_type!r} has no GPU in the table; known families: {', '.join(INSTANCE_GPUS)}"
    )


# The architectures at full size: the fields of each model's config.json on the Hugging Face hub that shape
# memory and compute (bert-large-uncased-whole-word-masking, roberta-large, distilbert-base-uncased,
# bigscience/bloomz-7b1: gpu_lora.BLOOMZ_7B1_CONFIG).
ARCHITECTURES: dict[str, dict[str, Any]] = {
    "bert-large-uncased-whole-word-masking": {
        "model_type": "bert",
        "vocab_size": 30522,
        "hidden_size": 1024,
        "num_hidden_layers": 24,
        "num_attention_heads": 16,
        "intermediate_size": 4096,
        "max_position_embeddings": 512,
        "type_vocab_size": 2,
        "hidden_act": "gelu",
        "hidden_dropout_prob": 0.1,
        "attention_probs_dropout_prob": 0.1,
        "layer_norm_eps": 1e-12,
        "initializer_range": 0.02,
        "pad_token_id": 0,
    },
    "roberta-large": {
        "model_type": "roberta",
        "vocab_size": 50265,
        "hidden_size": 1024,
        "num_hidden_layers": 24,
        "num_attention_heads": 16,
        "intermediate_size": 4096,
        "max_position_embeddings": 514,
        "type_vocab_size": 1,
        "hidden_act": "gelu",
        "hidden_dropout_prob": 0.1,
        "attention_probs_dropout_prob": 0.1,
        "layer_norm_eps": 1e-5,
        "initializer_range": 0.02,
        "pad_token_id": 1,
        "bos_token_id": 0,
        "eos_token_id": 2,
    },
    "distilbert-base-uncased": {
        "model_type": "distilbert",
        "vocab_size": 30522,
        "dim": 768,
        "n_layers": 6,
        "n_heads": 12,
        "hidden_dim": 3072,
        "max_position_embeddings": 512,
        "activation": "gelu",
        "dropout": 0.1,
        "attention_dropout": 0.1,
        "qa_dropout": 0.1,
        "seq_classif_dropout": 0.2,
        "sinusoidal_pos_embds": False,
        "initializer_range": 0.02,
        "pad_token_id": 0,
    },
    "bigscience/bloomz-7b1": {"model_type": "bloom", **gpu_lora.BLOOMZ_7B1_CONFIG},
}
# --tiny: the same families, 2 layers of width 64 (CPU, seconds); BLOOM with gpu_lora's tiny config.
TINY_SIZES: dict[str, dict[str, Any]] = {
    "bert": {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 128},
    "roberta": {
        "hidden_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "intermediate_size": 128,
    },
    "distilbert": {"dim": 64, "n_layers": 2, "n_heads": 4, "hidden_dim": 128},
    "bloom": {k: gpu_lora.TINY_CONFIG[k] for k in ("vocab_size", "hidden_size", "n_layer", "n_head")},
}

# The recipes whose fit is measured, and the head each script puts on the base model.
RECIPES: dict[str, str] = {
    "distilbert-spot": "classification",
    "bert-large-squad-ddp": "qa",
    "roberta-large-mnli-mp": "classification",
    "bloomz-7b1-lora-samsum": "clm",
}
# Hyperparameters the fit run sets (everything else is the recipe's own); see the module docstring.
FIT_OVERRIDES: dict[str, Any] = {
    "do_train": True,
    "do_eval": False,
    "save_strategy": "no",
    "logging_steps": 1,
    "report_to": "none",
    "disable_tqdm": True,
    "seed": 0,
}
# Dropped because they name the hub (the data comes from a file) or need several processes (one runs here).
FIT_DROPPED = ("dataset_name", "dataset_config_name", "fsdp", "validation_split_name")
CLM_OVERRIDES: dict[str, Any] = {
    "validation_split_percentage": 0,
    "rouge_eval_samples": 0,
    "merge_adapter": False,
}


def _architecture_name(hyperparameters: dict[str, Any]) -> str:
    name = str(hyperparameters.get("model_name_or_path", ""))
    if name not in ARCHITECTURES:
        raise ValueError(f"model_name_or_path={name!r} has no config here; known: {', '.join(ARCHITECTURES)}")
    return name


@dataclasses.dataclass(frozen=True)
class FitCase:
    """One recipe's fit run: its script, architecture, shapes and the GPU it is capped to."""

    recipe: str
    script: str
    head: str  # qa | classification | clm
    architecture: str
    config: dict[str, Any]  # the architecture's config, full size or tiny
    hyperparameters: dict[str, Any]  # the recipe's own
    instance_type: str
    gpu: str
    cap_gib: float
    gpus: int
    tiny: bool

    @property
    def batch(self) -> int:
        return int(self.hyperparameters.get("per_device_train_batch_size", 8))

    @property
    def seq_len(self) -> int:
        hp = self.hyperparameters
        return int(hp.get("block_size", 2048) if self.head == "clm" else hp.get("max_seq_length", 128))

    @property
    def num_labels(self) -> int:
        return 3 if "mnli" in self.recipe else 2

    def expected(self) -> dict[str, Any]:
        """Analytic memory and FLOPs of one training step (benchmarks/gpu_expect.py)."""
        if self.head == "clm":
            setting = gpu_expect.recipe_lora_setting(self.hyperparameters)
            r = int(self.hyperparameters.get("lora_r", 8))
            memory = gpu_expect.bloom_memory(self.config, setting, self.seq_len, r)
            fl = gpu_lora.flops_per_token(self.config, self.seq_len, r, setting.checkpointing)
            model_fl, hw_fl = fl["model"], fl["hardware"]
        else:
            memory = gpu_expect.encoder_memory(
                self.config, self.head, self.batch, self.seq_len, self.num_labels
            )
            model_fl = hw_fl = gpu_expect.encoder_flops_per_token(self.config, self.seq_len)
        return {
            "memory": memory,
            "model_flops_per_token": model_fl,
            "hardware_flops_per_token": hw_fl,
            "tokens_per_step": self.batch * self.seq_len,
        }


def make_case(recipe_name: str, tiny: bool) -> FitCase:
    """The FitCase of a recipe, from its JSON (hfpipe.core.recipe.recipes)."""
    from hfpipe.core.recipe.recipes import load_recipe

    if recipe_name not in RECIPES:
        raise ValueError(f"recipe={recipe_name!r}: no fit run for it; known: {', '.join(RECIPES)}")
    recipe = load_recipe(recipe_name)
    training = recipe["training"]
    hp = dict(training["hyperparameters"])
    arch = _architecture_name(hp)
    config = dict(ARCHITECTURES[arch])
    if tiny:
        config.update(TINY_SIZES[config["model_type"]])
    gpu, gib, gpus = instance_gpu(training["instance_type"])
    return FitCase(
        recipe=recipe_name,
        script=str(training["entry_point"]),
        head=RECIPES[recipe_name],
        architecture=arch,
        config=config,
        hyperparameters=hp,
        instance_type=training["instance_type"],
        gpu=gpu,
        cap_gib=gib,
        gpus=gpus,
        tiny=tiny,
    )


def cases(tiny: bool, recipes: Sequence[str] | None = None) -> list[FitCase]:
    return [make_case(r, tiny) for r in (recipes or RECIPES)]


# ----------------------------------------------------------------------------------- model and data


def _family_tokenizer(case: FitCase) -> Any:
    if case.head == "clm":
        from hfpipe.fixtures.samsum import dialogues, train_tokenizer

        texts = [f"{r['dialogue']}\n{r['summary']}" for r in dialogues(200)]
        return train_tokenizer([*texts, "Summarize the chat dialogue:\n---\nSummary:\n"])
    from hfpipe.fixtures.encoders import build_tokenizer

    return build_tokenizer(case.config["model_type"])


def prepare_model(case: FitCase, dest: Path, device: str) -> Path:
    """A folder from_pretrained loads: the architecture with random weights and a fixture tokenizer.

    Written under a temporary name and renamed when complete, so a run killed half-way leaves nothing that
    looks ready. BLOOM's weights are made on the GPU in bf16 (gpu_lora.write_random_checkpoint, 14 GB).
    """
    if (dest / "config.json").exists():
        return dest
    import shutil

    import torch
    from transformers import AutoConfig, AutoModel

    part = dest.with_name(dest.name + ".part")
    shutil.rmtree(part, ignore_errors=True)
    config = AutoConfig.for_model(**case.config)
    if case.head == "clm":
        gpu_lora.write_random_checkpoint(config, part, device)
    else:
        # The base encoder, as on the hub: the script adds its QA or classification head. Initialised on the
        # device (seconds on a GPU for 355M parameters), saved in fp32 as the hub has it.
        torch.manual_seed(0)
        with torch.device(device):
            model = AutoModel.from_config(config)
        model.save_pretrained(part, safe_serialization=True)
        del model
        gpu_lora._free_memory()
    _family_tokenizer(case).save_pretrained(part)
    part.rename(dest)
    return dest


def _long_text(rng: random.Random, sentences: int) -> str:
    from hfpipe.fixtures.encoders import FILLER

    return " ".join(rng.choice(FILLER) for _ in range(sentences))


def prepare_data(case: FitCase, dest: Path, steps: int) -> Path:
    """Training records in the format the recipe's script reads, long enough that every batch is full length.

    QA: SQuAD v1.1 JSON, contexts of ~60 sentences (~700 word pieces: every window but the last of each
    context is max_seq_length long). Classification: JSON lines whose texts run past max_seq_length
    (truncated to it). CLM: samsum-shaped dialogues, enough tokens for `steps` full blocks and more.
    """
    dest.mkdir(parents=True, exist_ok=True)
    rng = random.Random(0)
    need = case.batch * (steps + 2)
    if case.head == "qa":
        from hfpipe.fixtures.squad import make_article

        n = max(4, need // 4)
        data = {"version": "1.1", "data": [make_article(rng, i, 60, 60) for i in range(n)]}
        path = dest / "train.json"
        path.write_text(json.dumps(data))
        return path
    if case.head == "classification":
        words = case.seq_len // 8 + 4  # sentences of ~10 word pieces: past max_seq_length
        path = dest / "train.jsonl"
        with path.open("w") as f:
            for i in range(need):
                if "mnli" in case.recipe:
                    row: dict[str, Any] = {
                        "premise": _long_text(rng, words),
                        "hypothesis": _long_text(rng, 2),
                        "label": i % 3,
                    }
                else:
                    row = {"text": _long_text(rng, words), "label": i % 2}
                f.write(json.dumps(row) + "\n")
        return path
    from hfpipe.fixtures.samsum import dialogues

    path = dest / "train.jsonl"
    # ~60 tokens per rendered record with the fixture tokenizer; 4x the tokens the steps need.
    n = max(64, 4 * case.seq_len * case.batch * (steps + 1) // 60)
    with path.open("w") as f:
        for row in dialogues(n):
            f.write(json.dumps(row) + "\n")
    return path


def fit_hyperparameters(
    case: FitCase, model_dir: Path, train_file: Path, work: Path, steps: int
) -> dict[str, Any]:
    """The recipe's hyperparameters with the fit run's overrides (FIT_OVERRIDES, FIT_DROPPED)."""
    hp = {k: v for k, v in case.hyperparameters.items() if k not in FIT_DROPPED}
    hp.update(FIT_OVERRIDES)
    hp.update(
        model_name_or_path=str(model_dir),
        train_file=str(train_file),
        max_steps=steps,
        output_dir=str(work / "checkpoints"),
    )
    if case.head == "clm":
        hp.update(CLM_OVERRIDES)
    else:
        hp["model_dir"] = str(work / "model")
    return hp


# ------------------------------------------------------------------------------------ the child run


def _write(path: Path, row: dict[str, Any]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(row, indent=1, default=str))
    tmp.replace(path)


def _install_probe(row: dict[str, Any], out: Path, device: str) -> Any:
    """Time every optimizer step and record the peak memory, through a callback added to every Trainer the
    script builds (Trainer.__init__ wrapped; the scripts are run unchanged). Each step rewrites `out`.
    Returns the function that puts the Trainer back as it was (the next fit run in this process wraps it anew).
    """
    import torch
    import transformers
    from transformers import TrainerCallback

    cuda = device.startswith("cuda")

    def sync() -> None:
        if cuda:
            torch.cuda.synchronize()

    class FitProbe(TrainerCallback):  # type: ignore[misc]
        t0 = 0.0

        def on_train_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            sync()
            if cuda:
                row["loaded_gib"] = torch.cuda.memory_allocated() / 2**30
            row["status"] = "training"
            _write(out, row)

        def on_step_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            sync()
            self.t0 = time.perf_counter()

        def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            sync()
            row["step_seconds"].append(round(time.perf_counter() - self.t0, 4))
            if cuda:
                row["peak_allocated_gib"] = torch.cuda.max_memory_allocated() / 2**30
                row["peak_reserved_gib"] = torch.cuda.max_memory_reserved() / 2**30
            _write(out, row)

    original = transformers.Trainer.__init__
    original_step = transformers.Trainer.training_step

    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        self.add_callback(FitProbe())

    def training_step(self: Any, model: Any, inputs: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        # The shapes that reach the model: batch x tokens must be the recipe's batch x sequence length.
        ids = inputs.get("input_ids")
        if ids is not None and len(row["batch_shapes"]) < 8:
            row["batch_shapes"].append(list(ids.shape))
        return original_step(self, model, inputs, *args, **kwargs)

    transformers.Trainer.__init__ = init  # type: ignore[method-assign]
    transformers.Trainer.training_step = training_step  # type: ignore[method-assign]

    def restore() -> None:
        transformers.Trainer.__init__ = original  # type: ignore[method-assign]
        transformers.Trainer.training_step = original_step  # type: ignore[method-assign]

    return restore


def child(spec: dict[str, Any]) -> int:
    """Prepare the model and data, cap the GPU memory, run the recipe's script in this process."""
    out = Path(spec["out"])
    case = make_case(spec["recipe"], spec["tiny"])
    work = Path(spec["work"])
    row: dict[str, Any] = {
        "recipe": case.recipe,
        "script": case.script,
        "architecture": case.architecture + (" (tiny)" if case.tiny else ""),
        "instance_type": case.instance_type,
        "gpu": case.gpu,
        "cap_gib": case.cap_gib,
        "batch": case.batch,
        "seq_len": case.seq_len,
        "status": "preparing",
        "step_seconds": [],
        "batch_shapes": [],
        "error": "",
    }
    _write(out, row)
    import torch

    device = "cuda:0" if torch.cuda.is_available() else "cpu"
    row["device"] = torch.cuda.get_device_name(0) if device != "cpu" else "cpu"
    started = time.perf_counter()
    try:
        model_name = case.architecture.replace("/", "--") + ("-tiny" if case.tiny else "")
        model_dir = prepare_model(case, work / "models" / model_name, device)
        run_dir = work / "runs" / case.recipe
        train_file = prepare_data(case, run_dir / "data", spec["steps"])
        hp = fit_hyperparameters(case, model_dir, train_file, run_dir, spec["steps"])
        (run_dir / "hyperparameters.json").write_text(json.dumps(hp, indent=1))
        row["prepare_seconds"] = round(time.perf_counter() - started, 2)
        row["hyperparameters"] = hp
    except Exception as exc:
        traceback.print_exc()
        row.update(status="failed", error=f"preparing: {gpu_lora._error_text(exc)}")
        _write(out, row)
        return 1
    if device != "cpu":
        torch.cuda.empty_cache()
        row["cap_fraction"] = gpu_lora.set_memory_cap(case.cap_gib, device)
        torch.cuda.reset_peak_memory_stats()
    restore = _install_probe(row, out, device)
    script = TRAINING_CODE / case.script
    sys.argv = [str(script), str(run_dir / "hyperparameters.json")]
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    os.environ["SM_MODEL_DIR"] = str(run_dir / "model")
    t0 = time.perf_counter()
    try:
        runpy.run_path(str(script), run_name="__main__")
        row["status"] = "ok"
    except SystemExit as exc:
        row["status"] = "ok" if exc.code in (0, None) else "failed"
        if row["status"] == "failed":
            row["error"] = f"exit code {exc.code}"
    except BaseException as exc:
        traceback.print_exc()
        row["status"] = "oom" if gpu_lora.is_oom(exc) else "failed"
        row["error"] = gpu_lora._error_text(exc)
    finally:
        restore()
    row["script_seconds"] = round(time.perf_counter() - t0, 2)
    if device != "cpu":
        row["peak_allocated_gib"] = torch.cuda.max_memory_allocated() / 2**30
        row["peak_reserved_gib"] = torch.cuda.max_memory_reserved() / 2**30
    if row["status"] == "ok" and not row["step_seconds"]:
        row.update(status="failed", error="the script trained no step")
    _write(out, row)
    return 0


def children(specs: list[dict[str, Any]]) -> int:
    """Several fit runs one after another in this process: on a CPU (the rehearsal) nothing a run leaves
    behind changes the next one's figures, and torch and transformers are imported once instead of once per
    recipe. Each row gets the seconds its own run took."""
    for spec in specs:
        t0 = time.perf_counter()
        child(spec)
        out = Path(spec["out"])
        row = json.loads(out.read_text())
        row["wall_seconds"] = round(time.perf_counter() - t0, 2)
        _write(out, row)
    return 0


# ------------------------------------------------------------------------------------------ parent


def verdict(row: dict[str, Any]) -> str:
    """fits / tight / OOM / failed / timeout: the answer to 'does it train on that GPU?'."""
    status = row.get("status")
    if status == "oom":
        return "OOM"
    if status != "ok":
        return str(status)
    peak = row.get("peak_reserved_gib")
    if peak is None:
        return "ran (no cap on CPU)"
    # The real card exposes a little less than its nominal memory and the CUDA context takes some too.
    return "fits" if row["cap_gib"] - peak >= 1.0 else "tight (< 1 GiB left)"


def run_process(cmd: list[str], timeout: float) -> int | str:
    """Run `cmd` from the repository root with it first on PYTHONPATH; "timeout" when it outlives `timeout`.

    The command gets a process group of its own, killed whole at the timeout: a child it started (gpu_lora's
    one process per setting) must not go on holding the GPU while the next step runs.
    """
    import signal

    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, start_new_session=True)
    try:
        return proc.wait(timeout=max(timeout, 1))
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        return "timeout"


def _spec(recipe: str, work: Path, out: Path, steps: int, tiny: bool) -> dict[str, Any]:
    return {"recipe": recipe, "tiny": tiny, "work": str(work), "out": str(out), "steps": steps}


def _finish(row: dict[str, Any], code: int | str, timeout: float) -> dict[str, Any]:
    """A row as the child left it, with what its end says: a timeout or a crash mid-run, the verdict and the
    analytic expectation."""
    if code == "timeout" and row.get("status") in (None, "preparing", "training"):
        row.update(status="timeout", error=f"stopped after its {timeout:.0f} s cap ({row.get('status')})")
    elif code != 0 and row.get("status") in (None, "preparing", "training"):
        row.update(status="failed", error=row.get("error") or f"child exited with code {code}")
    row["verdict"] = verdict(row)
    row["expected"] = make_case(row["recipe"], tiny=False).expected()
    return row


def run_case(recipe: str, work: Path, out: Path, steps: int, tiny: bool, timeout: float) -> dict[str, Any]:
    """One recipe's fit run in a child process of its own; a timeout keeps what the child wrote so far."""
    spec_path = out.with_suffix(".spec.json")
    spec_path.write_text(json.dumps(_spec(recipe, work, out, steps, tiny)))
    t0 = time.perf_counter()
    code = run_process([sys.executable, "-m", "benchmarks.gpu_fit", "--child", str(spec_path)], timeout)
    row: dict[str, Any] = (
        json.loads(out.read_text()) if out.exists() else {"recipe": recipe, "step_seconds": []}
    )
    row["wall_seconds"] = round(time.perf_counter() - t0, 2)
    if code == "timeout":
        row.update(status="timeout", error=f"stopped after its {timeout:.0f} s cap ({row.get('status')})")
    return _finish(row, code, timeout)


def run_cases(
    recipes: Sequence[str], work: Path, steps: int, tiny: bool, timeout: float
) -> list[dict[str, Any]]:
    """Every recipe's fit run in one child process, one after another (`children`: the CPU rehearsal). A
    timeout or crash keeps what the child wrote: the run it was in is "timeout" or "failed", the runs it
    had not started "skipped"."""
    specs = [_spec(r, work, work / f"fit-{r}.json", steps, tiny) for r in recipes]
    spec_path = work / "fit-all.spec.json"
    spec_path.write_text(json.dumps(specs))
    code = run_process([sys.executable, "-m", "benchmarks.gpu_fit", "--children", str(spec_path)], timeout)
    rows = []
    for spec in specs:
        out = Path(spec["out"])
        if not out.exists():
            reason = f"its {timeout:.0f} s cap" if code == "timeout" else f"exit code {code}"
            error = f"not started: the shared fit process ended first ({reason})"
            rows.append({"recipe": spec["recipe"], "status": "skipped", "verdict": "skipped", "error": error})
            continue
        rows.append(_finish(json.loads(out.read_text()), code, timeout))
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--recipes", default=",".join(RECIPES), help="comma-separated, in order")
    p.add_argument("--steps", type=int, default=4, help="optimizer steps per recipe")
    p.add_argument("--tiny", action="store_true", help="2-layer models on CPU")
    p.add_argument("--work", default=None, help="models, data and runs (default: a temporary folder)")
    p.add_argument("--timeout", type=float, default=180.0, help="seconds per recipe")
    p.add_argument("--json-out", help="write the rows here")
    p.add_argument("--child", help=argparse.SUPPRESS)
    p.add_argument("--children", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.child:
        return child(json.loads(Path(a.child).read_text()))
    if a.children:
        return children(json.loads(Path(a.children).read_text()))
    import tempfile

    with tempfile.TemporaryDirectory(prefix="gpu-fit-") as tmp:
        work = Path(a.work or tmp)
        work.mkdir(parents=True, exist_ok=True)
        rows = []
        for recipe in [r.strip() for r in a.recipes.split(",") if r.strip()]:
            rows.append(run_case(recipe, work, work / f"fit-{recipe}.json", a.steps, a.tiny, a.timeout))
            print(f"[gpu_fit] {recipe}: {rows[-1]['verdict']} {rows[-1].get('error', '')}", file=sys.stderr)
    if a.json_out:
        Path(a.json_out).write_text(json.dumps(rows, indent=1, default=str))
    print(
        json.dumps([{k: r.get(k) for k in ("recipe", "verdict", "peak_reserved_gib", "error")} for r in rows])
    )
    return 0 if all(r.get("status") in ("ok", "oom") for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
