#!/usr/bin/env python
"""LoRA fine-tuning of a causal LM over a quantized frozen base; adapters merged into the base at the end.

Built for bigscience/bloomz-7b1 on samsum (the `bloomz-7b1-lora-samsum` recipe) and runs in the Hugging Face
training container, where the recipe's hyperparameters become these arguments one to one:

    python run_clm.py --model_name_or_path bigscience/bloomz-7b1 --dataset_name samsum \\
        --quantization int8 --gradient_checkpointing true --optim adafactor --learning_rate 2e-4 \\
        --num_train_epochs 3 --per_device_train_batch_size 1 --block_size 2048
    python run_clm.py config.json            # the same arguments in one JSON or YAML file

Inputs: a hub data set (`dataset_name`) or files from a channel (`train_file`, default `$SM_CHANNEL_TRAINING`;
`validation_file`, default `$SM_CHANNEL_VALIDATION` or `$SM_CHANNEL_TEST`): JSON, JSONL, parquet, CSV or a
`save_to_disk` folder. Without `model_name_or_path` the model and tokenizer come from `$SM_CHANNEL_MODEL`.
Records are rendered with `prompt_template`, tokenized, and packed into `block_size` blocks.

Outputs: checkpoints in `output_dir` (default `/opt/ml/checkpoints`, synced to S3 by SageMaker; the run
resumes from the last complete one), metrics (`eval_loss`, `eval_rouge1/2/L/Lsum`, ...) printed as
`key = value` lines and saved as JSON, the adapter in `<model_dir>/adapter`, and the merged model +
tokenizer + `code/inference.py` in `model_dir` (default `$SM_MODEL_DIR`).

Over 400 lines on purpose: like transformers' run_clm.py and TRL's sft.py, one entry point holds its
argument dataclasses, prompt packing, quantization, LoRA, evaluation and merging, so the container runs one
file whose --help documents every argument the recipe sets.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import shutil
import sys
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import datasets
import torch
import transformers
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    Trainer,
    TrainingArguments,
    default_data_collator,
    set_seed,
)

# Its siblings (encoder_utils, ...) import from its folder: sys.path[0] where the container runs it as a
# script; added where it is imported (a test, runpy) unless already there, so an import changes nothing.
if os.path.dirname(os.path.abspath(__file__)) not in sys.path:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import encoder_utils
import inference_clm
import request_checks
from encoder_utils import last_complete_checkpoint

logger = logging.getLogger("run_clm")

QUANTIZATIONS = ("int8", "nf4", "none")
DATA_EXTENSIONS = {".jsonl": "json", ".json": "json", ".parquet": "parquet", ".csv": "csv"}
LABEL_PAD = -100


@dataclass
class ModelArguments:
    """Which model to adapt, how to quantize it, and the LoRA settings (defaults: the bloomz recipe)."""

    model_name_or_path: str | None = field(
        default=None,
        metadata={"help": "Hub id or local path; default: the `model` channel ($SM_CHANNEL_MODEL)."},
    )
    quantization: str = field(
        default="int8", metadata={"help": f"Base model weights while training: one of {QUANTIZATIONS}."}
    )
    lora_r: int = field(default=8, metadata={"help": "LoRA rank."})
    lora_alpha: int = field(default=32, metadata={"help": "LoRA scaling numerator (scale = alpha / r)."})
    lora_dropout: float = field(default=0.05, metadata={"help": "Dropout on the LoRA input."})
    lora_target_modules: str = field(
        default="query_key_value",
        metadata={"help": "Comma-separated module names to adapt (BLOOM: query_key_value)."},
    )
    merge_adapter: bool = field(
        default=True,
        metadata={"help": "Merge the adapter into the unquantized base and save that to model_dir."},
    )
    adapter_base_model: str = field(
        default="",
        metadata={
            "help": "With merge_adapter false: the Hub id of the base, written into the adapter's "
            "adapter_config.json as base_model_name_or_path (what serves it must load this base); "
            "default: model_name_or_path as given."
        },
    )
    merge_dtype: str = field(
        default="auto",
        metadata={
            "help": "dtype of the merged model: auto (bf16/fp16 on GPU, fp32 on CPU), bf16, fp16, fp32."
        },
    )
    auto_bf16: bool = field(
        default=True,
        metadata={"help": "Train in bf16 when the GPU supports it and neither bf16 nor fp16 is set."},
    )
    trust_remote_code: bool = field(default=False, metadata={"help": "Allow model code from the hub."})

    def __post_init__(self) -> None:
        if self.quantization not in QUANTIZATIONS:
            raise ValueError(
                f"quantization={self.quantization!r} is not supported; use one of {QUANTIZATIONS}"
            )
        if self.merge_dtype not in ("auto", "bf16", "fp16", "fp32"):
            raise ValueError(
                f"merge_dtype={self.merge_dtype!r} is not supported; use auto, bf16, fp16 or fp32"
            )
        if self.lora_r < 1:
            raise ValueError(f"lora_r={self.lora_r} must be >= 1")
        if not 0.0 <= self.lora_dropout < 1.0:
            raise ValueError(f"lora_dropout={self.lora_dropout} must be in [0, 1)")
        if not self.target_modules:
            raise ValueError(f"lora_target_modules={self.lora_target_modules!r} names no module")

    @property
    def target_modules(self) -> list[str]:
        """`lora_target_modules` as a list."""
        return [m.strip() for m in self.lora_target_modules.split(",") if m.strip()]


@dataclass
class DataTrainingArguments:
    """Where the data comes from and how it becomes training blocks."""

    dataset_name: str | None = field(default=None, metadata={"help": "Hub data set name (e.g. samsum)."})
    dataset_config_name: str | None = field(default=None, metadata={"help": "Hub data set configuration."})
    train_file: str | None = field(
        default=None, metadata={"help": "File or folder; default $SM_CHANNEL_TRAINING."}
    )
    validation_file: str | None = field(
        default=None, metadata={"help": "File or folder; default $SM_CHANNEL_VALIDATION or $SM_CHANNEL_TEST."}
    )
    validation_split_percentage: int = field(
        default=5, metadata={"help": "Held out from training when there is no validation data."}
    )
    prompt_template: str = field(
        default=inference_clm.DEFAULT_PROMPT_TEMPLATE,
        metadata={"help": "str.format template over record fields; {eos_token} is the tokenizer's EOS."},
    )
    response_field: str = field(
        default=inference_clm.DEFAULT_RESPONSE_FIELD,
        metadata={"help": "The template field the model learns to generate (the prompt ends before it)."},
    )
    block_size: int = field(default=2048, metadata={"help": "Tokens per packed training block."})
    max_train_samples: int | None = field(default=None, metadata={"help": "Use only the first N records."})
    max_eval_samples: int | None = field(default=None, metadata={"help": "Evaluate on the first N records."})
    rouge_eval_samples: int = field(
        default=50, metadata={"help": "Validation records summarized for ROUGE (0 turns ROUGE off)."}
    )
    generation_max_new_tokens: int = field(
        default=100, metadata={"help": "Summary length limit when generating for ROUGE."}
    )
    preprocessing_num_workers: int | None = field(
        default=None, metadata={"help": "Processes for tokenizing."}
    )

    def __post_init__(self) -> None:
        if self.block_size < 2:
            raise ValueError(f"block_size={self.block_size} must be >= 2")
        if not 0 <= self.validation_split_percentage < 100:
            raise ValueError(
                f"validation_split_percentage={self.validation_split_percentage} must be in [0, 100)"
            )
        if self.rouge_eval_samples < 0:
            raise ValueError(f"rouge_eval_samples={self.rouge_eval_samples} must be >= 0")
        inference_clm.prompt_prefix(self.prompt_template, self.response_field)


# ----------------------------------------------------------------------------------------------- packing
class BlockPacker:
    """Concatenates token sequences and cuts them into `block_size` blocks.

    The remainder that does not fill a block is carried to the next `add()` call, so the blocks depend only
    on the order of the sequences, not on how they are batched; `flush()` returns the last, partial block.
    Every token ends up in exactly one block.
    """

    def __init__(self, block_size: int) -> None:
        self.block_size = block_size
        self._rest: list[int] = []

    def add(self, sequences: Iterable[Sequence[int]]) -> list[list[int]]:
        """Take a batch of sequences; return the blocks completed so far."""
        for seq in sequences:
            self._rest.extend(seq)
        n_full = len(self._rest) // self.block_size * self.block_size
        blocks = [self._rest[i : i + self.block_size] for i in range(0, n_full, self.block_size)]
        self._rest = self._rest[n_full:]
        return blocks

    def flush(self) -> list[list[int]]:
        """The last partial block, if any (shorter than block_size)."""
        rest, self._rest = self._rest, []
        return [rest] if rest else []


def pack_dataset(
    sequences: Iterable[Sequence[int]], block_size: int, pad_token_id: int, batch_size: int = 1000
) -> dict[str, list[list[int]]]:
    """Pack sequences into model inputs: full blocks plus one padded tail (pad tokens masked, label -100)."""
    packer = BlockPacker(block_size)
    blocks: list[list[int]] = []
    batch: list[Sequence[int]] = []
    for seq in sequences:
        batch.append(seq)
        if len(batch) == batch_size:
            blocks.extend(packer.add(batch))
            batch = []
    blocks.extend(packer.add(batch))
    tail = packer.flush()
    out: dict[str, list[list[int]]] = {"input_ids": [], "attention_mask": [], "labels": []}
    for block in blocks:
        out["input_ids"].append(block)
        out["attention_mask"].append([1] * block_size)
        out["labels"].append(list(block))
    for block in tail:
        pad = block_size - len(block)
        out["input_ids"].append(block + [pad_token_id] * pad)
        out["attention_mask"].append([1] * len(block) + [0] * pad)
        out["labels"].append(block + [LABEL_PAD] * pad)
    return out


def _batched(items: Iterable[Any], n: int) -> Iterator[list[Any]]:
    batch: list[Any] = []
    for item in items:
        batch.append(item)
        if len(batch) == n:
            yield batch
            batch = []
    if batch:
        yield batch


# -------------------------------------------------------------------------------------------------- data
def _channel(*names: str) -> str | None:
    for name in names:
        value = os.environ.get(f"SM_CHANNEL_{name}")
        if value and os.path.isdir(value) and os.listdir(value):
            return value
    return None


def load_split(path: str) -> datasets.Dataset:
    """Load one split from a file, a folder of files of one kind, or a `save_to_disk` folder."""
    p = Path(path)
    if p.is_dir() and ((p / "dataset_info.json").exists() or (p / "dataset_dict.json").exists()):
        loaded = datasets.load_from_disk(str(p))
        if isinstance(loaded, datasets.DatasetDict):
            split = "train" if "train" in loaded else next(iter(loaded))
            return loaded[split]
        return loaded
    files = [p] if p.is_file() else sorted(f for f in p.rglob("*") if f.suffix in DATA_EXTENSIONS)
    if not files:
        raise ValueError(
            f"no data in {path!r}: expected {sorted(DATA_EXTENSIONS)} files or a save_to_disk folder"
        )
    kinds = {DATA_EXTENSIONS.get(f.suffix) for f in files}
    if len(kinds) != 1 or None in kinds:
        raise ValueError(f"{path!r} mixes or holds unsupported files {[f.name for f in files]}; use one kind")
    return datasets.load_dataset(kinds.pop(), data_files=[str(f) for f in files], split="train")


def load_raw_datasets(
    data_args: DataTrainingArguments, seed: int
) -> tuple[datasets.Dataset, datasets.Dataset | None]:
    """Train and validation records from the hub or the channels; validation may be split off train."""
    validation = None
    if data_args.dataset_name:
        hub = datasets.load_dataset(data_args.dataset_name, data_args.dataset_config_name)
        train = hub["train"]
        for split in ("validation", "test"):
            if split in hub:
                validation = hub[split]
                break
    else:
        train_path = data_args.train_file or _channel("TRAINING", "TRAIN")
        if not train_path:
            raise ValueError(
                "no training data: set dataset_name or train_file, or provide a `training` channel"
            )
        train = load_split(train_path)
        val_path = data_args.validation_file or _channel("VALIDATION", "TEST")
        if val_path:
            validation = load_split(val_path)
    if validation is None and data_args.validation_split_percentage > 0:
        parts = train.train_test_split(test_size=data_args.validation_split_percentage / 100, seed=seed)
        train, validation = parts["train"], parts["test"]
    if data_args.max_train_samples is not None:
        train = train.select(range(min(len(train), data_args.max_train_samples)))
    if validation is not None and data_args.max_eval_samples is not None:
        validation = validation.select(range(min(len(validation), data_args.max_eval_samples)))
    return train, validation


def tokenize(
    raw: datasets.Dataset, tokenizer: Any, data_args: DataTrainingArguments, training_args: TrainingArguments
) -> datasets.Dataset:
    """Render every record with the prompt template and tokenize it (one row per record, order kept)."""
    missing = [
        f
        for f in inference_clm.template_fields(data_args.prompt_template)
        if f != "eos_token" and f not in raw.column_names
    ]
    if missing:
        raise ValueError(
            f"prompt_template fields {missing} are not columns of the data; columns: {raw.column_names}"
        )
    eos = tokenizer.eos_token or ""
    eos_id = tokenizer.eos_token_id

    def encode(batch: dict[str, list[Any]]) -> dict[str, Any]:
        rows = [dict(zip(batch, values, strict=True)) for values in zip(*batch.values(), strict=True)]
        texts = [inference_clm.render(data_args.prompt_template, row, eos) for row in rows]
        ids = tokenizer(texts, add_special_tokens=False)["input_ids"]
        return {"input_ids": [with_one_eos(seq, eos_id) for seq in ids]}

    with training_args.main_process_first(desc="tokenizing"):
        return raw.map(
            encode,
            batched=True,
            num_proc=data_args.preprocessing_num_workers,
            remove_columns=raw.column_names,
            desc="Rendering the prompt template and tokenizing",
        )


def with_one_eos(ids: list[int], eos_id: int | None) -> list[int]:
    """End a record with exactly one EOS token, whether or not the template wrote `{eos_token}`.

    Packing concatenates records into fixed blocks; without an EOS between them one record runs into the
    next and the model never learns where a summary stops.
    """
    if eos_id is None:
        raise ValueError("the tokenizer has no eos_token; packed records need one to end each record")
    while ids and ids[-1] == eos_id:
        ids = ids[:-1]
    return [*ids, eos_id]


def packed_dataset(
    tokenized: datasets.Dataset, block_size: int, pad_token_id: int
) -> tuple[datasets.Dataset, float]:
    """Blocks ready for the Trainer, and the packing efficiency (real tokens / token slots)."""
    sequences = (row["input_ids"] for row in tokenized)
    packed = pack_dataset(sequences, block_size, pad_token_id)
    n_tokens = sum(sum(mask) for mask in packed["attention_mask"])
    efficiency = n_tokens / (len(packed["input_ids"]) * block_size) if packed["input_ids"] else 0.0
    return datasets.Dataset.from_dict(packed), efficiency


# ------------------------------------------------------------------------------------------------- model
def resolve_model_path(model_args: ModelArguments) -> str:
    """`model_name_or_path`, else the `model` channel."""
    if model_args.model_name_or_path:
        return model_args.model_name_or_path
    channel = os.environ.get("SM_CHANNEL_MODEL")
    if channel and os.path.isdir(channel):
        return channel
    raise ValueError("no model: set model_name_or_path or provide a `model` channel (SM_CHANNEL_MODEL)")


def compute_dtype() -> torch.dtype:
    """bf16 where the GPU has it, fp16 on other GPUs, fp32 on CPU."""
    if torch.cuda.is_available():
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    return torch.float32


def load_training_model(model_path: str, model_args: ModelArguments, training_args: TrainingArguments) -> Any:
    """The base model quantized as asked, prepared for k-bit training, wrapped with LoRA."""
    from peft import LoraConfig, TaskType, get_peft_model, prepare_model_for_kbit_training
    from transformers import BitsAndBytesConfig

    dtype = compute_dtype()
    kwargs: dict[str, Any] = {"trust_remote_code": model_args.trust_remote_code}
    if model_args.quantization == "int8":
        kwargs["quantization_config"] = BitsAndBytesConfig(load_in_8bit=True)
    elif model_args.quantization == "nf4":
        kwargs["quantization_config"] = BitsAndBytesConfig(
            load_in_4bit=True,
            bnb_4bit_quant_type="nf4",
            bnb_4bit_use_double_quant=True,
            bnb_4bit_compute_dtype=torch.bfloat16 if dtype != torch.float16 else torch.float16,
        )
    else:
        kwargs["dtype"] = dtype
    if model_args.quantization != "none":
        # Each process holds a whole quantized copy on its own device (data parallel, no sharding).
        kwargs["device_map"] = (
            {"": training_args.device.index or 0} if torch.cuda.is_available() else {"": "cpu"}
        )
    model: Any = AutoModelForCausalLM.from_pretrained(model_path, **kwargs)
    quantized = sorted({type(m).__name__ for m in model.modules() if "bitsandbytes" in type(m).__module__})
    logger.info(
        "base model %s: quantization=%s, quantized layer types %s",
        model_path,
        model_args.quantization,
        quantized,
    )
    if training_args.gradient_checkpointing:
        model.config.use_cache = False
    if model_args.quantization != "none":
        model = prepare_model_for_kbit_training(
            model,
            use_gradient_checkpointing=training_args.gradient_checkpointing,
            gradient_checkpointing_kwargs=training_args.gradient_checkpointing_kwargs,
        )
    lora = LoraConfig(
        task_type=TaskType.CAUSAL_LM,
        r=model_args.lora_r,
        lora_alpha=model_args.lora_alpha,
        lora_dropout=model_args.lora_dropout,
        target_modules=model_args.target_modules,
        bias="none",
    )
    model = get_peft_model(model, lora)
    model.print_trainable_parameters()
    return model


def merge_dtype(model_args: ModelArguments) -> torch.dtype:
    """dtype the adapter is merged in (never a quantized one)."""
    names = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
    return compute_dtype() if model_args.merge_dtype == "auto" else names[model_args.merge_dtype]


# ---------------------------------------------------------------------------------------------- training
ROUGE_KEYS = ("rouge1", "rouge2", "rougeL", "rougeLsum")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def sentence_lines(text: str) -> str:
    """One sentence per line: `rougeLsum` scores the longest common subsequence per sentence (newline-split),
    which is how samsum results are usually reported (the `evaluate` summarization scripts split with nltk;
    this splits after . ! ?, enough for dialogue summaries and without a download)."""
    return "\n".join(s for s in _SENTENCE_END.split(text.strip()) if s)


def rouge_scores(
    model: Any, tokenizer: Any, records: datasets.Dataset, data_args: DataTrainingArguments, batch_size: int
) -> dict[str, float]:
    """ROUGE-1/2/L/Lsum (F-measure, x100) of greedy summaries of `records` against their reference field."""
    from rouge_score import rouge_scorer

    prefix = inference_clm.prompt_prefix(data_args.prompt_template, data_args.response_field)
    eos = tokenizer.eos_token or ""
    scorer = rouge_scorer.RougeScorer(list(ROUGE_KEYS), use_stemmer=True)
    totals = dict.fromkeys(ROUGE_KEYS, 0.0)
    side = tokenizer.padding_side
    tokenizer.padding_side = "left"  # continuations start right after each prompt
    model.eval()
    n = 0
    try:
        for batch in _batched(records, batch_size):
            prompts = [inference_clm.render(prefix, row, eos) for row in batch]
            enc = tokenizer(prompts, return_tensors="pt", padding=True, add_special_tokens=False).to(
                model.device
            )
            with torch.no_grad():
                out = model.generate(
                    input_ids=enc["input_ids"],
                    attention_mask=enc["attention_mask"],
                    max_new_tokens=data_args.generation_max_new_tokens,
                    do_sample=False,
                    pad_token_id=tokenizer.pad_token_id,
                    use_cache=True,
                )
            texts = tokenizer.batch_decode(out[:, enc["input_ids"].shape[1] :], skip_special_tokens=True)
            for row, text in zip(batch, texts, strict=True):
                scores = scorer.score(
                    sentence_lines(str(row[data_args.response_field])), sentence_lines(text)
                )
                for key in totals:
                    totals[key] += scores[key].fmeasure
                n += 1
    finally:
        tokenizer.padding_side = side
    return {key: round(100 * value / max(n, 1), 4) for key, value in totals.items()}


def save_merged_model(
    adapter_dir: str, model_path: str, model_args: ModelArguments, tokenizer: Any, model_dir: str
) -> None:
    """Reload the base unquantized, merge the adapter into it and save model + tokenizer to `model_dir`."""
    from peft import PeftModel

    base: Any = AutoModelForCausalLM.from_pretrained(
        model_path,
        dtype=merge_dtype(model_args),
        low_cpu_mem_usage=True,
        trust_remote_code=model_args.trust_remote_code,
    )
    merged: Any = PeftModel.from_pretrained(base, adapter_dir).merge_and_unload()
    merged.config.use_cache = True
    merged.save_pretrained(model_dir, safe_serialization=True)
    tokenizer.save_pretrained(model_dir)


def write_serving_files(model_dir: str, data_args: DataTrainingArguments) -> None:
    """code/inference.py (where the HF inference toolkit looks) and the prompt the handler applies."""
    code = os.path.join(model_dir, "code")
    os.makedirs(code, exist_ok=True)
    shutil.copyfile(inference_clm.__file__, os.path.join(code, "inference.py"))
    shutil.copyfile(request_checks.__file__, os.path.join(code, "request_checks.py"))
    with open(os.path.join(model_dir, inference_clm.PROMPT_FILE), "w") as f:
        json.dump(
            {"prompt_template": data_args.prompt_template, "response_field": data_args.response_field}, f
        )


#: The dataclasses the parser reads (hfpipe/kinds/arguments.json lists their fields).
ARGUMENT_TYPES = (ModelArguments, DataTrainingArguments, encoder_utils.ContainerTrainingArguments)


def parse_args(argv: list[str]) -> tuple[ModelArguments, DataTrainingArguments, TrainingArguments]:
    """Command-line arguments, or one .json/.yaml file holding them (container defaults as in encoder_utils)."""
    parsed = encoder_utils.parse_arguments(ARGUMENT_TYPES, argv)
    return parsed  # type: ignore[return-value]


def configure(model_args: ModelArguments, training_args: TrainingArguments) -> None:
    """Logging, bf16 where the GPU has it (auto_bf16) and the seed."""
    logging.basicConfig(
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        level=logging.INFO if training_args.should_log else logging.WARNING,
    )
    datasets.utils.logging.set_verbosity_warning()
    transformers.utils.logging.set_verbosity_warning()
    if (
        model_args.auto_bf16
        and not (training_args.bf16 or training_args.fp16)
        and torch.cuda.is_available()
        and torch.cuda.is_bf16_supported()
    ):
        training_args.bf16 = True
    set_seed(training_args.seed)


def packed_splits(
    tokenizer: Any, data_args: DataTrainingArguments, training_args: TrainingArguments
) -> tuple[Any, Any, Any, float]:
    """(train blocks, eval blocks or None, the raw eval split or None, packing efficiency)."""
    raw_train, raw_eval = load_raw_datasets(data_args, training_args.seed)
    train_tok = tokenize(raw_train, tokenizer, data_args, training_args)
    train_blocks, efficiency = packed_dataset(train_tok, data_args.block_size, tokenizer.pad_token_id)
    eval_blocks = None
    if raw_eval is not None and len(raw_eval):
        eval_blocks, _ = packed_dataset(
            tokenize(raw_eval, tokenizer, data_args, training_args),
            data_args.block_size,
            tokenizer.pad_token_id,
        )
    n_tokens = sum(len(ids) for ids in train_tok["input_ids"])
    logger.info(
        "packed %d records (%d tokens) into %d blocks of %d: packing efficiency %.4f",
        len(raw_train),
        n_tokens,
        len(train_blocks),
        data_args.block_size,
        efficiency,
    )
    return train_blocks, eval_blocks, raw_eval, efficiency


def train(
    trainer: Trainer,
    training_args: TrainingArguments,
    data_args: DataTrainingArguments,
    train_blocks: Any,
    efficiency: float,
) -> dict[str, float]:
    """Train (resuming from the last complete checkpoint), log and save the training metrics and state."""
    output_dir = str(training_args.output_dir)
    checkpoint = training_args.resume_from_checkpoint or last_complete_checkpoint(output_dir)
    if checkpoint:
        logger.info("resuming from %s", checkpoint)
    started = time.monotonic()
    result = trainer.train(resume_from_checkpoint=checkpoint)
    elapsed = time.monotonic() - started
    metrics = dict(result.metrics)
    steps_run = trainer.state.global_step - (int(checkpoint.rstrip("/").split("-")[-1]) if checkpoint else 0)
    batch = training_args.per_device_train_batch_size * training_args.gradient_accumulation_steps
    metrics["train_tokens_per_second"] = round(
        steps_run * batch * training_args.world_size * data_args.block_size / max(elapsed, 1e-9), 2
    )
    metrics["train_packing_efficiency"] = round(efficiency, 6)
    metrics["train_blocks"] = len(train_blocks)
    metrics["global_step"] = trainer.state.global_step
    if trainer.state.log_history:
        losses = [e["loss"] for e in trainer.state.log_history if "loss" in e]
        if losses:
            metrics["train_last_loss"] = losses[-1]
    trainer.log_metrics("train", metrics)
    trainer.save_metrics("train", metrics)
    trainer.save_state()
    return metrics


def evaluate(
    trainer: Trainer,
    tokenizer: Any,
    raw_eval: Any,
    data_args: DataTrainingArguments,
    training_args: TrainingArguments,
) -> dict[str, float]:
    """Eval loss and perplexity, and ROUGE on a sample of the eval split when asked for."""
    eval_metrics = trainer.evaluate()
    eval_metrics["eval_perplexity"] = math.exp(min(eval_metrics["eval_loss"], 50.0))
    if data_args.rouge_eval_samples and raw_eval is not None:
        sample = raw_eval.select(range(min(len(raw_eval), data_args.rouge_eval_samples)))
        rouge = rouge_scores(
            trainer.model, tokenizer, sample, data_args, training_args.per_device_eval_batch_size
        )
        eval_metrics.update({f"eval_{k}": v for k, v in rouge.items()})
    trainer.log_metrics("eval", eval_metrics)
    trainer.save_metrics("eval", eval_metrics)
    return dict(eval_metrics)


def save_adapter(trainer: Trainer, tokenizer: Any, data_args: DataTrainingArguments, model_dir: str) -> str:
    """The adapter and its tokenizer under model_dir/adapter; returns that folder."""
    os.makedirs(model_dir, exist_ok=True)
    # Saved with the tokenizer (adapter and merged model): a chat request renders the training prompt.
    tokenizer.chat_template = inference_clm.chat_template(data_args.prompt_template, data_args.response_field)
    adapter_dir = os.path.join(model_dir, "adapter")
    trainer.model.save_pretrained(adapter_dir)
    tokenizer.save_pretrained(adapter_dir)
    return adapter_dir


def save_served_model(
    adapter_dir: str,
    tokenizer: Any,
    model_path: str,
    model_args: ModelArguments,
    data_args: DataTrainingArguments,
    model_dir: str,
) -> None:
    """The merged model (or the adapter as the model) and the serving files, in model_dir."""
    if model_args.merge_adapter:
        save_merged_model(adapter_dir, model_path, model_args, tokenizer, model_dir)
    else:
        # Served as an adapter over its base (the handler loads both; vLLM loads it next to the base from the
        # artifact's top level); the base must be reachable there.
        record_base(adapter_dir, model_args.adapter_base_model or model_args.model_name_or_path)
        for name in os.listdir(adapter_dir):
            shutil.copy2(os.path.join(adapter_dir, name), os.path.join(model_dir, name))
    write_serving_files(model_dir, data_args)


def record_base(adapter_dir: str, base: str | None) -> None:
    """Name the base in the unmerged adapter's adapter_config.json (`base_model_name_or_path`, which PEFT
    filled with the path it loaded the base from: a channel folder of the training container)."""
    if not base:
        return
    path = os.path.join(adapter_dir, "adapter_config.json")
    with open(path) as f:
        config = json.load(f)
    config["base_model_name_or_path"] = base
    with open(path, "w") as f:
        json.dump(config, f, indent=2, sort_keys=True)


def main(argv: list[str] | None = None) -> dict[str, float]:
    """Train, evaluate, save the adapter and the merged model; returns the final metrics."""
    model_args, data_args, training_args = parse_args(sys.argv[1:] if argv is None else argv)
    configure(model_args, training_args)
    model_dir = os.environ.get("SM_MODEL_DIR", os.path.join(str(training_args.output_dir), "model"))
    model_path = resolve_model_path(model_args)
    tokenizer = AutoTokenizer.from_pretrained(model_path, trust_remote_code=model_args.trust_remote_code)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    train_blocks, eval_blocks, raw_eval, efficiency = packed_splits(tokenizer, data_args, training_args)

    logger.info("parallel_mode=%s world_size=%d", training_args.parallel_mode.value, training_args.world_size)
    trainer = Trainer(
        model=load_training_model(model_path, model_args, training_args),
        args=training_args,
        train_dataset=train_blocks,
        eval_dataset=eval_blocks,
        data_collator=default_data_collator,
    )
    all_metrics = train(trainer, training_args, data_args, train_blocks, efficiency)
    if eval_blocks is not None:
        all_metrics.update(evaluate(trainer, tokenizer, raw_eval, data_args, training_args))
    if training_args.should_save:
        adapter_dir = save_adapter(trainer, tokenizer, data_args, model_dir)
        if model_args.merge_adapter:
            # The trainer (training model, optimizer, wrappers) goes before the merge loads the base again.
            del trainer
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
        save_served_model(adapter_dir, tokenizer, model_path, model_args, data_args, model_dir)
        out_data = os.environ.get("SM_OUTPUT_DATA_DIR")
        if out_data:
            os.makedirs(out_data, exist_ok=True)
            with open(os.path.join(out_data, "metrics.json"), "w") as f:
                json.dump(all_metrics, f, indent=2, sort_keys=True)
    encoder_utils.end_run()
    return all_metrics


if __name__ == "__main__":
    main()
    encoder_utils.exit_after_distributed_run()
