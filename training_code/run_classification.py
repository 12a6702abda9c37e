"""Fine-tune an encoder for text or text-pair classification (MNLI, sentiment) with the Hugging Face Trainer.

Serves two recipes: `roberta-large-mnli-mp` (premise/hypothesis pairs, 3 labels, sharded over the GPUs with
FSDP) and `distilbert-spot` (single texts on managed spot: periodic checkpoints, automatic resume, a last
checkpoint on SIGTERM). Locally:

    python training_code/run_classification.py --model_name_or_path /tmp/tiny-roberta --task_name mnli \\
        --train_file /tmp/mnli/train.jsonl --validation_file /tmp/mnli/validation.jsonl \\
        --do_train --do_eval --max_seq_length 64 --max_steps 20 \\
        --output_dir /tmp/cls-ckpt --model_dir /tmp/cls-model --use_cpu

    # spot-style: checkpoint every 10 steps, run again with the same output_dir to resume
    python training_code/run_classification.py --model_name_or_path /tmp/tiny-distilbert \\
        --train_file /tmp/textcls/train.jsonl --class_names negative,positive --do_train \\
        --save_strategy steps --save_steps 10 --max_steps 100 --output_dir /tmp/spot-ckpt --model_dir /tmp/spot-model

    # sharded data parallel (FSDP is the default as soon as more than one process runs)
    torchrun --nproc_per_node 2 training_code/run_classification.py ... (same arguments)

Model parallelism: with `model_parallel=auto` (default) a multi-process run on GPUs shards parameters,
gradients and optimizer state with FSDP (`--fsdp "full_shard auto_wrap"`) unless `--fsdp` is given (on a
CPU-only host, where Accelerate has no FSDP, it stays plain data parallel). The original recipe's
`smdistributed` model-parallel settings (the SDK passes them as `--mp_parameters` and launches through MPI)
are accepted: where the container ships `smdistributed.modelparallel` the Trainer uses it; elsewhere the run
falls back to FSDP with a warning.
"""

from __future__ import annotations

import logging
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import datasets
import encoder_utils
import numpy as np
from transformers import (
    AutoConfig,
    AutoModelForSequenceClassification,
    AutoTokenizer,
    EvalPrediction,
    Trainer,
    TrainingArguments,
    set_seed,
)

logger = logging.getLogger(__name__)

TASKS = {
    # GLUE MNLI: the hub data set, its columns and label names (in label-id order).
    "mnli": {
        "dataset": ("glue", "mnli"),
        "columns": ("premise", "hypothesis"),
        "labels": ("entailment", "neutral", "contradiction"),
        "validation_split": "validation_matched",
    },
}
MODEL_PARALLEL = ("auto", "fsdp", "smdistributed", "none")
DEFAULT_FSDP = "full_shard auto_wrap"


@dataclass
class ModelArguments:
    """Which model and tokenizer to fine-tune."""

    model_name_or_path: str | None = field(
        default=None,
        metadata={"help": "Hub id or local directory; default: the 'model' channel ($SM_CHANNEL_MODEL)."},
    )
    tokenizer_name: str | None = field(default=None, metadata={"help": "Tokenizer, if not the model's."})
    cache_dir: str | None = field(default=None, metadata={"help": "Where downloaded models are cached."})
    trust_remote_code: bool = field(
        default=False,
        metadata={"help": "Allow model code from the hub; off unless you trust the repository."},
    )
    model_parallel: str = field(
        default="auto",
        metadata={
            "help": "auto: FSDP when more than one process runs (or smdistributed when mp_parameters is given "
            "and the library is present); fsdp; smdistributed; none (plain data parallel)."
        },
    )

    def __post_init__(self) -> None:
        if self.model_parallel not in MODEL_PARALLEL:
            raise ValueError(
                f"model_parallel={self.model_parallel!r} is not valid; accepted: {', '.join(MODEL_PARALLEL)}"
            )


@dataclass
class DataTrainingArguments:
    """Which data, and which columns hold text and labels."""

    task_name: str | None = field(
        default=None, metadata={"help": f"A known task ({', '.join(TASKS)}): sets columns and label names."}
    )
    dataset_name: str | None = field(
        default=None, metadata={"help": "Hub data set (default for mnli: glue)."}
    )
    dataset_config_name: str | None = field(default=None, metadata={"help": "Hub data set configuration."})
    train_file: str | None = field(
        default=None, metadata={"help": "JSON lines / JSON / CSV; default: the 'training' channel."}
    )
    validation_file: str | None = field(
        default=None, metadata={"help": "Same format; default: the 'validation' or 'test' channel."}
    )
    text_column: str | None = field(
        default=None, metadata={"help": "First text column (default: premise or text)."}
    )
    text_pair_column: str | None = field(
        default=None,
        metadata={"help": "Second text column for pairs (default: hypothesis for mnli, none otherwise)."},
    )
    label_column: str = field(default="label", metadata={"help": "Column with the integer label id."})
    class_names: str | None = field(
        default=None, metadata={"help": "Comma-separated names in label-id order, e.g. negative,positive."}
    )
    max_seq_length: int = field(
        default=128, metadata={"help": "Longest input in tokens; longer is truncated."}
    )
    pad_to_max_length: bool = field(
        default=False, metadata={"help": "Pad every input to max_seq_length; default pads per batch."}
    )
    max_train_samples: int | None = field(default=None, metadata={"help": "Keep only the first N examples."})
    max_eval_samples: int | None = field(default=None, metadata={"help": "Keep only the first N examples."})
    preprocessing_num_workers: int | None = field(
        default=None, metadata={"help": "Processes for tokenization."}
    )

    def __post_init__(self) -> None:
        if self.task_name is not None:
            self.task_name = self.task_name.lower()
            if self.task_name not in TASKS:
                raise ValueError(f"task_name={self.task_name!r} is not known; accepted: {', '.join(TASKS)}")
        if self.max_seq_length < 8:
            raise ValueError(f"max_seq_length={self.max_seq_length} is too small; use at least 8")


def _flag_value(argv: list[str], name: str) -> str | None:
    for i, arg in enumerate(argv):
        if arg == f"--{name}" and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith(f"--{name}="):
            return arg.split("=", 1)[1]
    return None


def smdistributed_available() -> bool:
    """Whether this container ships SageMaker's model-parallel library."""
    import importlib.util

    return importlib.util.find_spec("smdistributed") is not None and (
        importlib.util.find_spec("smdistributed.modelparallel") is not None
    )


def with_default_sharding(argv: list[str], world_size: int, accelerator: bool = True) -> list[str]:
    """Add `--fsdp "full_shard auto_wrap"` to a multi-process run that asked for no other parallelism.

    The flag is added before parsing because TrainingArguments derives its FSDP setup at construction.
    Accelerate's FSDP needs GPUs (or another accelerator): on a CPU-only host (local runs of the tiny
    recipes) the default stays plain data parallel, with a warning.
    """
    if world_size <= 1 or _flag_value(argv, "fsdp") is not None:
        return argv
    mode = _flag_value(argv, "model_parallel") or "auto"
    mp_parameters = _flag_value(argv, "mp_parameters") or os.environ.get("SM_HP_MP_PARAMETERS")
    if mode == "none":
        return argv
    if mode in ("auto", "smdistributed") and mp_parameters:
        if smdistributed_available():
            return argv
        logger.warning(
            "mp_parameters given but smdistributed.modelparallel is not in this container; sharding with FSDP"
        )
    elif mode == "smdistributed":
        raise ValueError(
            "model_parallel='smdistributed' needs mp_parameters (the SDK's smdistributed settings)"
        )
    if not accelerator:
        logger.warning("no GPU on this host: FSDP is not available, training plain data parallel instead")
        return argv
    return [*argv, "--fsdp", DEFAULT_FSDP]


def load_raw(data_args: DataTrainingArguments, cache_dir: str | None) -> datasets.DatasetDict:
    """Train/validation splits from the hub (task or dataset_name) or from files/channels."""
    task = TASKS.get(data_args.task_name or "")
    train_file = encoder_utils.resolve_data_file(data_args.train_file, "training", "train")
    validation_file = encoder_utils.resolve_data_file(data_args.validation_file, "validation", "test")
    if data_args.dataset_name or (task and not train_file and not validation_file):
        name, config = (
            (data_args.dataset_name, data_args.dataset_config_name)
            if data_args.dataset_name
            else task["dataset"]  # type: ignore[index]
        )
        raw = datasets.load_dataset(name, config, cache_dir=cache_dir)
        if task and "validation" not in raw and task["validation_split"] in raw:
            raw["validation"] = raw[task["validation_split"]]
        return raw
    files = {k: v for k, v in (("train", train_file), ("validation", validation_file)) if v}
    if not files:
        raise ValueError(
            "no data: set task_name/dataset_name, train_file/validation_file, or a 'training' channel"
        )
    suffix = Path(next(iter(files.values()))).suffix
    return datasets.load_dataset("csv" if suffix == ".csv" else "json", data_files=files, cache_dir=cache_dir)


def resolve_columns(data_args: DataTrainingArguments, columns: list[str]) -> tuple[str, str | None]:
    """The text (and optional pair) columns, checked against the data."""
    task = TASKS.get(data_args.task_name or "")
    default_first, default_second = task["columns"] if task else ("text", None)  # type: ignore[misc]
    first = data_args.text_column or default_first
    second = data_args.text_pair_column or default_second
    for name, value in (
        ("text_column", first),
        ("text_pair_column", second),
        ("label_column", data_args.label_column),
    ):
        if value is not None and value not in columns:
            raise ValueError(f"{name}={value!r} is not a column of the data; columns: {columns}")
    return first, second


def resolve_label_names(data_args: DataTrainingArguments, train: datasets.Dataset | None) -> list[str]:
    """Label names in id order: from class_names, the task, the data's ClassLabel, or the ids seen."""
    if data_args.class_names:
        return [n.strip() for n in data_args.class_names.split(",") if n.strip()]
    task = TASKS.get(data_args.task_name or "")
    if task:
        return list(task["labels"])
    if train is not None:
        feature = train.features.get(data_args.label_column)
        if isinstance(feature, datasets.ClassLabel):
            return list(feature.names)
        ids = sorted(set(train[data_args.label_column]))
        if ids and all(isinstance(i, int) for i in ids):
            return [f"LABEL_{i}" for i in range(max(ids) + 1)]
    raise ValueError("cannot tell the labels: set class_names (comma-separated, in label-id order)")


def accuracy(prediction: EvalPrediction) -> dict[str, float]:
    """Share of examples whose highest logit is the gold label."""
    logits = (
        prediction.predictions[0] if isinstance(prediction.predictions, tuple) else prediction.predictions
    )
    return {"accuracy": float((np.argmax(logits, axis=-1) == prediction.label_ids).mean())}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Train and/or evaluate; returns the metrics."""
    argv = encoder_utils.expand_config_file(list(sys.argv[1:] if argv is None else argv))
    argv = with_default_sharding(
        argv, int(os.environ.get("WORLD_SIZE", "1")), accelerator=not encoder_utils.without_accelerator()
    )
    model_args, data_args, training_args, container_args = encoder_utils.parse_arguments(
        (ModelArguments, DataTrainingArguments, TrainingArguments, encoder_utils.ContainerArguments), argv
    )
    encoder_utils.setup_logging(training_args)
    logger.info("training arguments: %s", training_args)
    set_seed(training_args.seed)

    model_path = encoder_utils.resolve_model(model_args.model_name_or_path)
    raw = load_raw(data_args, model_args.cache_dir)
    encoder_utils.require_splits(raw, training_args)
    any_split = raw["train"] if "train" in raw else raw[next(iter(raw))]
    first, second = resolve_columns(data_args, any_split.column_names)
    label_names = resolve_label_names(data_args, raw.get("train"))

    config = AutoConfig.from_pretrained(
        model_path,
        num_labels=len(label_names),
        id2label=dict(enumerate(label_names)),
        label2id={n: i for i, n in enumerate(label_names)},
        cache_dir=model_args.cache_dir,
        trust_remote_code=model_args.trust_remote_code,
    )
    tokenizer = AutoTokenizer.from_pretrained(
        model_args.tokenizer_name or model_path,
        cache_dir=model_args.cache_dir,
        trust_remote_code=model_args.trust_remote_code,
    )
    model = AutoModelForSequenceClassification.from_pretrained(
        model_path,
        config=config,
        cache_dir=model_args.cache_dir,
        trust_remote_code=model_args.trust_remote_code,
    )
    max_seq_length = min(data_args.max_seq_length, tokenizer.model_max_length)

    def tokenize(batch: dict[str, list]) -> Any:
        texts = (batch[first],) if second is None else (batch[first], batch[second])
        out = tokenizer(
            *texts,
            truncation=True,
            max_length=max_seq_length,
            padding="max_length" if data_args.pad_to_max_length else False,
        )
        out["labels"] = batch[data_args.label_column]
        return out

    splits: dict[str, datasets.Dataset] = {}
    with training_args.main_process_first(desc="tokenizing"):
        for split, wanted, limit in (
            ("train", training_args.do_train, data_args.max_train_samples),
            ("validation", training_args.do_eval, data_args.max_eval_samples),
        ):
            if not wanted:
                continue
            ds = raw[split]
            # GLUE marks unlabelled rows with -1; they cannot be trained or scored.
            ds = ds.filter(lambda row: row[data_args.label_column] >= 0)
            if limit is not None:
                ds = ds.select(range(min(len(ds), limit)))
            splits[split] = ds.map(
                tokenize,
                batched=True,
                remove_columns=ds.column_names,
                num_proc=data_args.preprocessing_num_workers,
                desc=f"{split} tokens",
            )

    collator = encoder_utils.padding_collator(tokenizer, data_args.pad_to_max_length, training_args)
    sigterm = encoder_utils.StopOnSigterm().install()
    trainer = Trainer(
        model=model,
        args=training_args,
        train_dataset=splits.get("train"),
        eval_dataset=splits.get("validation"),
        processing_class=tokenizer,
        data_collator=collator,
        compute_metrics=accuracy,
        callbacks=[sigterm],
    )

    metrics: dict[str, Any] = {}
    if training_args.do_train:
        train_metrics = encoder_utils.train_resumable(trainer, sigterm, len(splits["train"]))
        metrics.update(train_metrics)

    if training_args.do_eval:
        eval_metrics = trainer.evaluate()
        eval_metrics["eval_samples"] = len(splits["validation"])
        metrics.update(encoder_utils.record_eval(trainer, eval_metrics))

    encoder_utils.save_outputs(trainer, container_args.model_dir, "inference_classification.py", metrics)
    return metrics


if __name__ == "__main__":
    main()
