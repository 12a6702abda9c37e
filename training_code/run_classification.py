"""Fine-tune an encoder for text or text-pair classification (MNLI, sentiment) with the Hugging Face Trainer.

Serves two recipes: `roberta-large-mnli-mp` (premise/hypothesis pairs, 3 labels, sharded over the GPUs with
FSDP) and `distilbert-spot` (single texts on managed spot: periodic checkpoints, automatic resume). The
data arguments carry the names of transformers' `run_classification.py` / `run_glue.py` (`task_name`,
`dataset_name`, `text_column_names`, `label_column_name`, `validation_split_name`, ...); MNLI is evaluated on
the matched and the mismatched validation sets (metrics `eval_accuracy` and `eval_accuracy_mm`), and a start
checkpoint that already has a classification head for the same labels keeps its label order. Locally:

    python training_code/run_classification.py --model_name_or_path /tmp/tiny-roberta --task_name mnli \\
        --train_file /tmp/mnli/train.jsonl --validation_file /tmp/mnli/validation.jsonl \\
        --validation_mismatched_file /tmp/mnli/validation_mismatched.jsonl \\
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

Over 400 lines on purpose: like transformers' own example scripts, one entry point holds its argument
dataclasses, data loading and the Trainer set-up, so the container runs one file whose --help documents
every argument; shared pieces live in encoder_utils.py.
"""

from __future__ import annotations

import logging
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# Its siblings (encoder_utils, ...) import from its folder: sys.path[0] where the container runs it as a
# script; added where it is imported (a test, runpy) unless already there, so an import changes nothing.
if os.path.dirname(os.path.abspath(__file__)) not in sys.path:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import datasets
import encoder_utils
import numpy as np
from transformers import (
    AutoConfig,
    AutoModelForSequenceClassification,
    AutoTokenizer,
    EvalPrediction,
    PretrainedConfig,
    Trainer,
    set_seed,
)

logger = logging.getLogger(__name__)

# GLUE tasks this script knows (run_glue.py's names): columns and label names in the data set's id order.
TASKS = {
    "mnli": {
        "columns": ("premise", "hypothesis"),
        "labels": ("entailment", "neutral", "contradiction"),
        "validation_split": "validation_matched",
        # run_glue.py evaluates MNLI twice: matched, then mismatched with metric names ending in _mm.
        "second_validation_split": "validation_mismatched",
    },
}
GLUE_DATASETS = ("glue", "nyu-mll/glue")
MODEL_PARALLEL = ("auto", "fsdp", "smdistributed", "none")
DEFAULT_FSDP = "full_shard auto_wrap"
MISMATCHED = "validation_mismatched"


@dataclass
class ModelArguments(encoder_utils.ModelArguments):
    """Which model and tokenizer to fine-tune, and whether a head of another size is replaced."""

    ignore_mismatched_sizes: bool = field(
        default=False,
        metadata={
            "help": "Replace a start checkpoint's classification head whose size differs (run_glue.py)."
        },
    )


@dataclass
class DataTrainingArguments:
    """Which data, and which columns hold text and labels (the argument names of transformers'
    examples/pytorch/text-classification/run_classification.py and run_glue.py)."""

    task_name: str | None = field(
        default=None,
        metadata={"help": f"A GLUE task ({', '.join(TASKS)}): sets columns, label names and splits."},
    )
    dataset_name: str | None = field(default=None, metadata={"help": "Hub data set, e.g. stanfordnlp/imdb."})
    dataset_config_name: str | None = field(
        default=None, metadata={"help": "Hub data set configuration (for nyu-mll/glue: the task, e.g. mnli)."}
    )
    train_file: str | None = field(
        default=None, metadata={"help": "JSON lines / JSON / CSV; default: the 'training' channel."}
    )
    validation_file: str | None = field(
        default=None, metadata={"help": "Same format; default: the 'validation' or 'test' channel."}
    )
    validation_mismatched_file: str | None = field(
        default=None,
        metadata={"help": "MNLI mismatched validation data; default: the 'validation_mismatched' channel."},
    )
    text_column_names: str | None = field(
        default=None,
        metadata={
            "help": "Comma-separated text columns: one (single text) or two (a text pair, encoded as "
            "run_glue.py encodes MNLI). Default: the task's columns, else 'sentence' or 'text'."
        },
    )
    label_column_name: str = field(default="label", metadata={"help": "Column with the integer label id."})
    train_split_name: str | None = field(default=None, metadata={"help": "Hub split to train on (train)."})
    validation_split_name: str | None = field(
        default=None,
        metadata={"help": "Hub split to evaluate on (validation; validation_matched for mnli)."},
    )
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
        if self.task_name is None and (self.dataset_name or "") in GLUE_DATASETS and self.dataset_config_name:
            self.task_name = self.dataset_config_name
        if self.task_name is not None:
            self.task_name = self.task_name.lower()
            if self.task_name not in TASKS:
                raise ValueError(f"task_name={self.task_name!r} is not known; accepted: {', '.join(TASKS)}")
        if self.max_seq_length < 8:
            raise ValueError(f"max_seq_length={self.max_seq_length} is too small; use at least 8")
        if self.text_column_names is not None and not 1 <= len(self.text_columns) <= 2:
            raise ValueError(
                f"text_column_names={self.text_column_names!r} must name one column or two (a pair)"
            )

    @property
    def text_columns(self) -> list[str]:
        """`text_column_names` as a list."""
        return [c.strip() for c in (self.text_column_names or "").split(",") if c.strip()]


@dataclass
class ClassificationTrainingArguments(encoder_utils.ContainerTrainingArguments):
    """Container TrainingArguments plus the choice of model parallelism (decided before the Trainer's set-up)."""

    model_parallel: str = field(
        default="auto",
        metadata={
            "help": "auto: FSDP when more than one process runs on GPUs (smdistributed when mp_parameters is "
            "given and the library is present); fsdp; smdistributed; none (plain data parallel)."
        },
    )

    def __post_init__(self) -> None:
        if self.model_parallel not in MODEL_PARALLEL:
            raise ValueError(
                f"model_parallel={self.model_parallel!r} is not valid; accepted: {', '.join(MODEL_PARALLEL)}"
            )
        # TrainingArguments derives its FSDP set-up in __post_init__, so the default goes in first.
        self.fsdp = default_sharding(
            self.fsdp,
            self.model_parallel,
            self.mp_parameters,
            int(os.environ.get("WORLD_SIZE", "1")),
            accelerator=not encoder_utils.without_accelerator(),
        )
        super().__post_init__()


def smdistributed_available() -> bool:
    """Whether this container ships SageMaker's model-parallel library."""
    import importlib.util

    return importlib.util.find_spec("smdistributed") is not None and (
        importlib.util.find_spec("smdistributed.modelparallel") is not None
    )


def default_sharding(
    fsdp: Any, model_parallel: str, mp_parameters: str, world_size: int, accelerator: bool = True
) -> Any:
    """The `fsdp` setting: as given, or "full_shard auto_wrap" for a multi-process run that asked for nothing.

    The SDK's smdistributed model-parallel settings arrive as `mp_parameters` (launched through MPI); where the
    container ships `smdistributed.modelparallel`, the Trainer runs its own SageMaker model-parallel mode and
    no FSDP is added. Accelerate's FSDP needs GPUs: on a CPU-only host the run stays plain data parallel.
    """
    if fsdp or world_size <= 1 or model_parallel == "none":
        return fsdp
    if model_parallel in ("auto", "smdistributed") and mp_parameters:
        if smdistributed_available():
            return fsdp
        logger.warning(
            "mp_parameters given but smdistributed.modelparallel is not in this container; sharding with FSDP"
        )
    elif model_parallel == "smdistributed":
        raise ValueError(
            "model_parallel='smdistributed' needs mp_parameters (the SDK's smdistributed settings)"
        )
    if not accelerator:
        logger.warning("no GPU on this host: FSDP is not available, training plain data parallel instead")
        return fsdp
    return DEFAULT_FSDP


ARGUMENT_TYPES = (
    ModelArguments,
    DataTrainingArguments,
    ClassificationTrainingArguments,
    encoder_utils.ContainerArguments,
)


def parse_args(argv: list[str] | None = None) -> tuple[Any, ...]:
    """(model, data, training, container) arguments from flags or one JSON/YAML file."""
    return encoder_utils.parse_arguments(ARGUMENT_TYPES, argv)


def load_raw(data_args: DataTrainingArguments, cache_dir: str | None) -> datasets.DatasetDict:
    """Splits `train`, `validation` (and `validation_mismatched` for MNLI) from the hub or files/channels."""
    task = TASKS.get(data_args.task_name or "")
    files = {
        split: path
        for split, path in (
            ("train", encoder_utils.resolve_data_file(data_args.train_file, "training", "train")),
            ("validation", encoder_utils.resolve_data_file(data_args.validation_file, "validation", "test")),
            (MISMATCHED, encoder_utils.resolve_data_file(data_args.validation_mismatched_file, MISMATCHED)),
        )
        if path and (task or split != MISMATCHED)
    }
    if data_args.dataset_name or (task and not files):
        name = data_args.dataset_name or "nyu-mll/glue"
        config = data_args.dataset_config_name or (data_args.task_name if name in GLUE_DATASETS else None)
        hub = datasets.load_dataset(name, config, cache_dir=cache_dir)
        train_split = data_args.train_split_name or "train"
        validation_split = data_args.validation_split_name or (
            task["validation_split"] if task else "validation"  # type: ignore[index]
        )
        raw = datasets.DatasetDict()
        for split, source in (("train", train_split), ("validation", validation_split)):
            if source in hub:
                raw[split] = hub[source]
        if task and task.get("second_validation_split") in hub:
            raw[MISMATCHED] = hub[task["second_validation_split"]]  # type: ignore[index]
        return raw
    if not files:
        raise ValueError(
            "no data: set task_name/dataset_name, train_file/validation_file, or a 'training' channel"
        )
    suffix = Path(next(iter(files.values()))).suffix
    return datasets.load_dataset("csv" if suffix == ".csv" else "json", data_files=files, cache_dir=cache_dir)


def resolve_columns(data_args: DataTrainingArguments, columns: list[str]) -> tuple[str, str | None]:
    """The text (and optional pair) columns, checked against the data."""
    task = TASKS.get(data_args.task_name or "")
    if data_args.text_columns:
        names = data_args.text_columns
    elif task:
        names = list(task["columns"])
    else:
        names = ["sentence" if "sentence" in columns else "text"]
    for value in [*names, data_args.label_column_name]:
        if value not in columns:
            name = "label_column_name" if value == data_args.label_column_name else "text_column_names"
            raise ValueError(f"{name}: {value!r} is not a column of the data; columns: {columns}")
    return names[0], names[1] if len(names) > 1 else None


def resolve_label_names(data_args: DataTrainingArguments, train: datasets.Dataset | None) -> list[str]:
    """Label names in id order: from class_names, the task, the data's ClassLabel, or the ids seen."""
    if data_args.class_names:
        return [n.strip() for n in data_args.class_names.split(",") if n.strip()]
    task = TASKS.get(data_args.task_name or "")
    if task:
        return list(task["labels"])
    if train is not None:
        feature = train.features.get(data_args.label_column_name)
        if isinstance(feature, datasets.ClassLabel):
            return list(feature.names)
        ids = sorted(set(train[data_args.label_column_name]))
        if ids and all(isinstance(i, int) for i in ids):
            return [f"LABEL_{i}" for i in range(max(ids) + 1)]
    raise ValueError("cannot tell the labels: set class_names (comma-separated, in label-id order)")


def head_label_order(config: PretrainedConfig, label_names: list[str]) -> dict[int, int] | None:
    """Data label id -> model label id, when the start checkpoint already has a head for these labels.

    As run_glue.py does: a checkpoint whose label2id is not the default LABEL_i one (roberta-large-mnli:
    CONTRADICTION, NEUTRAL, ENTAILMENT) keeps its order, and the data's ids are remapped to it; names are
    compared case-insensitively. None when the checkpoint has no such head (a new head is trained).
    """
    default = PretrainedConfig(num_labels=config.num_labels).label2id
    if config.label2id == default:
        return None
    by_name = {str(k).lower(): int(v) for k, v in config.label2id.items()}
    if sorted(by_name) != sorted(n.lower() for n in label_names):
        logger.warning(
            "the model's labels %s do not match the data's %s; training a new head in the data's order",
            sorted(config.label2id),
            label_names,
        )
        return None
    return {i: by_name[name.lower()] for i, name in enumerate(label_names)}


def accuracy(prediction: EvalPrediction) -> dict[str, float]:
    """Share of examples whose highest logit is the gold label."""
    logits = (
        prediction.predictions[0] if isinstance(prediction.predictions, tuple) else prediction.predictions
    )
    return {"accuracy": float((np.argmax(logits, axis=-1) == prediction.label_ids).mean())}


@dataclass
class Columns:
    """The text columns (`second` None for a single text) and the head's label order (None: the data's)."""

    first: str
    second: str | None
    label_to_id: dict[int, int] | None


def load_model(
    model_args: ModelArguments, model_path: str, config: Any, label_names: list[str], columns: Columns
) -> Any:
    """(tokenizer, model): the start checkpoint (`config`, its own) with a head for the labels, in the
    checkpoint's label order when it has a head for them."""
    common = {"cache_dir": model_args.cache_dir, "trust_remote_code": model_args.trust_remote_code}
    if columns.label_to_id is None:
        config = AutoConfig.from_pretrained(
            model_path,
            num_labels=len(label_names),
            id2label=dict(enumerate(label_names)),
            label2id={n: i for i, n in enumerate(label_names)},
            **common,
        )
    else:
        logger.info("keeping the start checkpoint's label order %s", config.id2label)
    # Saved with the model (config.json), so the endpoint's handler can refuse a single text sent to a pair
    # model (and a pair sent to a single-text model), which would otherwise be answered as if it fit.
    config.hfpipe_text_pair = columns.second is not None
    tokenizer = AutoTokenizer.from_pretrained(model_args.tokenizer_name or model_path, **common)
    model = AutoModelForSequenceClassification.from_pretrained(
        model_path, config=config, ignore_mismatched_sizes=model_args.ignore_mismatched_sizes, **common
    )
    return tokenizer, model


def tokenized_splits(
    raw: Any,
    tokenizer: Any,
    columns: Columns,
    data_args: DataTrainingArguments,
    training_args: ClassificationTrainingArguments,
) -> dict[str, datasets.Dataset]:
    """The train, validation and mismatched splits the run uses, labelled rows only, tokenized."""
    max_seq_length = min(data_args.max_seq_length, tokenizer.model_max_length)

    def tokenize(batch: dict[str, list]) -> Any:
        texts = (
            (batch[columns.first],)
            if columns.second is None
            else (batch[columns.first], batch[columns.second])
        )
        out = tokenizer(
            *texts,
            truncation=True,
            max_length=max_seq_length,
            padding="max_length" if data_args.pad_to_max_length else False,
        )
        labels = batch[data_args.label_column_name]
        to_id = columns.label_to_id
        out["labels"] = labels if to_id is None else [to_id[label] for label in labels]
        return out

    wanted = [("train", training_args.do_train, data_args.max_train_samples)]
    wanted += [(s, training_args.do_eval, data_args.max_eval_samples) for s in ("validation", MISMATCHED)]
    splits: dict[str, datasets.Dataset] = {}
    with training_args.main_process_first(desc="tokenizing"):
        for split, used, limit in wanted:
            if not used or split not in raw:
                continue
            ds = raw[split]
            # GLUE marks unlabelled rows with -1; they cannot be trained or scored.
            ds = ds.filter(lambda row: row[data_args.label_column_name] >= 0)
            if limit is not None:
                ds = ds.select(range(min(len(ds), limit)))
            splits[split] = ds.map(
                tokenize,
                batched=True,
                remove_columns=ds.column_names,
                num_proc=data_args.preprocessing_num_workers,
                desc=f"{split} tokens",
            )
    return splits


def evaluate(trainer: Trainer, splits: dict[str, datasets.Dataset]) -> dict[str, Any]:
    """Validation metrics, and the mismatched set's with an _mm suffix (run_glue.py's MNLI double evaluation)."""
    eval_metrics = trainer.evaluate()
    eval_metrics["eval_samples"] = len(splits["validation"])
    if MISMATCHED in splits:
        mismatched = trainer.evaluate(eval_dataset=splits[MISMATCHED])
        mismatched["eval_samples"] = len(splits[MISMATCHED])
        eval_metrics.update({f"{k}_mm": v for k, v in mismatched.items()})
    return dict(encoder_utils.record_eval(trainer, eval_metrics))


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Train and/or evaluate; returns the metrics."""
    model_args, data_args, training_args, container_args = parse_args(argv)
    encoder_utils.setup_logging(training_args)
    logger.info("training arguments: %s", training_args)
    set_seed(training_args.seed)

    model_path = encoder_utils.resolve_model(model_args.model_name_or_path)
    raw = load_raw(data_args, model_args.cache_dir)
    encoder_utils.require_splits(raw, training_args)
    any_split = raw["train"] if "train" in raw else raw[next(iter(raw))]
    first, second = resolve_columns(data_args, any_split.column_names)
    label_names = resolve_label_names(data_args, raw.get("train"))
    common = {"cache_dir": model_args.cache_dir, "trust_remote_code": model_args.trust_remote_code}
    config = AutoConfig.from_pretrained(model_path, **common)
    columns = Columns(first, second, head_label_order(config, label_names))
    tokenizer, model = load_model(model_args, model_path, config, label_names, columns)
    splits = tokenized_splits(raw, tokenizer, columns, data_args, training_args)

    trainer = Trainer(
        model=model,
        args=training_args,
        train_dataset=splits.get("train"),
        eval_dataset=splits.get("validation"),
        **encoder_utils.tokenizer_argument(tokenizer),
        data_collator=encoder_utils.padding_collator(tokenizer, data_args.pad_to_max_length, training_args),
        compute_metrics=accuracy,
    )
    metrics: dict[str, Any] = {}
    if training_args.do_train:
        metrics.update(encoder_utils.train_resumable(trainer, len(splits["train"])))
    if training_args.do_eval:
        metrics.update(evaluate(trainer, splits))

    encoder_utils.save_outputs(trainer, container_args.model_dir, "inference_classification.py", metrics)
    encoder_utils.end_run()
    return metrics


if __name__ == "__main__":
    main()
    encoder_utils.exit_after_distributed_run()
