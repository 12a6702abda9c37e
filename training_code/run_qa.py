"""Fine-tune an encoder for extractive question answering (SQuAD v1.1) with the Hugging Face Trainer.

Runs inside the Hugging Face training container (the `bert-large-squad-ddp` recipe) or locally:

    # one process, fixture data and a tiny model from hfpipe.fixtures
    python training_code/run_qa.py --model_name_or_path /tmp/tiny-bert \\
        --train_file /tmp/squad/train.json --validation_file /tmp/squad/validation.json \\
        --do_train --do_eval --max_seq_length 128 --doc_stride 32 --max_steps 20 \\
        --output_dir /tmp/qa-ckpt --model_dir /tmp/qa-model --use_cpu

    # data parallel, two processes (gloo on CPU, NCCL on GPUs); SageMaker launches the same through
    # torch_distributed or its distributed data parallel library
    torchrun --nproc_per_node 2 training_code/run_qa.py ... (same arguments)

Arguments are TrainingArguments plus the two dataclasses below; a single .json/.yaml file may replace them.
Without `--train_file` the data comes from the `training` channel, without `--validation_file` from the
`validation` (or `test`) channel, without `--model_name_or_path` from the `model` channel.
"""

from __future__ import annotations

import logging
import os
import sys
from dataclasses import dataclass, field
from typing import Any

# Its siblings (encoder_utils, ...) import from its folder: sys.path[0] where the container runs it as a
# script; added where it is imported (a test, runpy) unless already there, so an import changes nothing.
if os.path.dirname(os.path.abspath(__file__)) not in sys.path:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import datasets
import encoder_utils
import qa_utils
from transformers import (
    AutoConfig,
    AutoModelForQuestionAnswering,
    AutoTokenizer,
    Trainer,
    set_seed,
)

logger = logging.getLogger(__name__)


ModelArguments = encoder_utils.ModelArguments


@dataclass
class DataTrainingArguments:
    """Which data, and how questions and contexts become model inputs."""

    dataset_name: str | None = field(default=None, metadata={"help": "Hub data set, e.g. 'squad'."})
    dataset_config_name: str | None = field(default=None, metadata={"help": "Hub data set configuration."})
    train_file: str | None = field(
        default=None,
        metadata={"help": "SQuAD v1.1 JSON (or flattened JSON lines); default: 'training' channel."},
    )
    validation_file: str | None = field(
        default=None, metadata={"help": "Same format; default: 'validation' or 'test' channel."}
    )
    max_seq_length: int = field(default=384, metadata={"help": "Tokens per window (question + context)."})
    doc_stride: int = field(
        default=128, metadata={"help": "Overlap in tokens between windows of one context."}
    )
    pad_to_max_length: bool = field(
        default=False,
        metadata={
            "help": "Pad every window to max_seq_length (the original recipe); default pads per batch."
        },
    )
    max_train_samples: int | None = field(default=None, metadata={"help": "Keep only the first N examples."})
    max_eval_samples: int | None = field(default=None, metadata={"help": "Keep only the first N examples."})
    n_best_size: int = field(default=20, metadata={"help": "Start and end candidates kept per window."})
    max_answer_length: int = field(default=30, metadata={"help": "Longest answer, in tokens."})
    preprocessing_num_workers: int | None = field(
        default=None, metadata={"help": "Processes for tokenization."}
    )
    version_2_with_negative: bool = field(
        default=False, metadata={"help": "SQuAD v2 (unanswerable questions); not supported, must stay False."}
    )

    def __post_init__(self) -> None:
        if self.version_2_with_negative:
            raise ValueError("version_2_with_negative=True is not supported; this script trains SQuAD v1.1")
        if self.doc_stride >= self.max_seq_length:
            raise ValueError(
                f"doc_stride={self.doc_stride} must be smaller than max_seq_length={self.max_seq_length}"
            )
        if self.max_seq_length < 16:
            raise ValueError(f"max_seq_length={self.max_seq_length} is too small; use at least 16")


def load_raw(data_args: DataTrainingArguments, cache_dir: str | None) -> datasets.DatasetDict:
    """Train/validation splits with the hub `squad` columns, from the hub or from files/channels."""
    if data_args.dataset_name:
        return datasets.load_dataset(
            data_args.dataset_name, data_args.dataset_config_name, cache_dir=cache_dir
        )
    splits = {}
    train_file = encoder_utils.resolve_data_file(data_args.train_file, "training", "train")
    validation_file = encoder_utils.resolve_data_file(data_args.validation_file, "validation", "test")
    for split, path in (("train", train_file), ("validation", validation_file)):
        if path:
            splits[split] = datasets.Dataset.from_list(qa_utils.load_squad_json(path))
    if not splits:
        raise ValueError(
            "no data: set dataset_name, train_file/validation_file, or provide a 'training' channel"
        )
    return datasets.DatasetDict(splits)


ARGUMENT_TYPES = (
    ModelArguments,
    DataTrainingArguments,
    encoder_utils.ContainerTrainingArguments,
    encoder_utils.ContainerArguments,
)


def parse_args(argv: list[str] | None = None) -> tuple[Any, ...]:
    """(model, data, training, container) arguments from flags or one JSON/YAML file."""
    return encoder_utils.parse_arguments(ARGUMENT_TYPES, argv)


def load_model(model_args: ModelArguments, model_path: str) -> Any:
    """(tokenizer, model): a fast tokenizer (the windows need its offset mapping) and the QA model."""
    config = AutoConfig.from_pretrained(
        model_path, cache_dir=model_args.cache_dir, trust_remote_code=model_args.trust_remote_code
    )
    tokenizer = AutoTokenizer.from_pretrained(
        model_args.tokenizer_name or model_path,
        cache_dir=model_args.cache_dir,
        use_fast=True,
        trust_remote_code=model_args.trust_remote_code,
    )
    if not tokenizer.is_fast:
        raise ValueError(f"{model_path}: question answering needs a fast tokenizer (offset mapping)")
    model = AutoModelForQuestionAnswering.from_pretrained(
        model_path,
        config=config,
        cache_dir=model_args.cache_dir,
        trust_remote_code=model_args.trust_remote_code,
    )
    return tokenizer, model


def windowed_splits(raw: Any, tokenizer: Any, data_args: DataTrainingArguments, training_args: Any) -> Any:
    """(train features or None, eval examples or None, eval features or None): the splits the run uses, cut
    into max_seq_length windows doc_stride apart."""
    window = {
        "tokenizer": tokenizer,
        "max_seq_length": min(data_args.max_seq_length, tokenizer.model_max_length),
        "doc_stride": data_args.doc_stride,
        "pad_to_max_length": data_args.pad_to_max_length,
    }

    def windows(examples: Any, limit: int | None, features: Any, desc: str) -> tuple[Any, Any]:
        if limit is not None:
            examples = examples.select(range(min(len(examples), limit)))
        return examples, examples.map(
            features,
            fn_kwargs=window,
            batched=True,
            remove_columns=examples.column_names,
            num_proc=data_args.preprocessing_num_workers,
            desc=desc,
        )

    train_dataset = eval_examples = eval_features = None
    with training_args.main_process_first(desc="tokenizing"):
        if training_args.do_train:
            _, train_dataset = windows(
                raw["train"], data_args.max_train_samples, qa_utils.prepare_train_features, "train windows"
            )
        if training_args.do_eval:
            eval_examples, eval_features = windows(
                raw["validation"],
                data_args.max_eval_samples,
                qa_utils.prepare_validation_features,
                "validation windows",
            )
    return train_dataset, eval_examples, eval_features


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Train and/or evaluate; returns the metrics."""
    model_args, data_args, training_args, container_args = parse_args(argv)
    encoder_utils.setup_logging(training_args)
    logger.info("training arguments: %s", training_args)
    set_seed(training_args.seed)

    model_path = encoder_utils.resolve_model(model_args.model_name_or_path)
    raw = load_raw(data_args, model_args.cache_dir)
    encoder_utils.require_splits(raw, training_args)
    tokenizer, model = load_model(model_args, model_path)
    train_dataset, eval_examples, eval_features = windowed_splits(raw, tokenizer, data_args, training_args)

    trainer = Trainer(
        model=model,
        args=training_args,
        train_dataset=train_dataset,
        **encoder_utils.tokenizer_argument(tokenizer),
        data_collator=qa_utils.qa_collator(
            tokenizer, data_args.pad_to_max_length, training_args.fp16 or training_args.bf16
        ),
    )
    metrics: dict[str, Any] = {}
    if training_args.do_train:
        metrics.update(
            encoder_utils.train_resumable(trainer, len(train_dataset) if train_dataset is not None else 0)
        )
    if training_args.do_eval:
        assert eval_features is not None and eval_examples is not None
        eval_metrics = evaluate(trainer, eval_examples, eval_features, data_args)
        metrics.update(encoder_utils.record_eval(trainer, eval_metrics))

    encoder_utils.save_outputs(trainer, container_args.model_dir, "inference_qa.py", metrics)
    encoder_utils.end_run()
    return metrics


def evaluate(
    trainer: Trainer,
    examples: datasets.Dataset,
    features: datasets.Dataset,
    data_args: DataTrainingArguments,
) -> dict[str, float]:
    """Predict every validation window, post-process to one answer per question, score EM/F1."""
    model_inputs = features.remove_columns(["example_id", "offset_mapping"])
    output = trainer.predict(model_inputs, metric_key_prefix="eval")
    # QA models return (start_logits, end_logits); the Trainer pads each to the longest batch with -100.
    predictions: Any = output.predictions
    start_logits, end_logits = predictions[0], predictions[1]
    rows = features.select_columns(["example_id", "offset_mapping"]).to_list()
    answers, _ = qa_utils.postprocess_qa_predictions(
        examples.to_list(),
        rows,
        (start_logits, end_logits),
        n_best_size=data_args.n_best_size,
        max_answer_length=data_args.max_answer_length,
    )
    references = {e["id"]: e["answers"]["text"] for e in examples}
    scores = qa_utils.squad_metrics(answers, references)
    metrics = {k: v for k, v in (output.metrics or {}).items() if k.startswith("eval_")}
    metrics.update({f"eval_{k}": v for k, v in scores.items()})
    metrics["eval_samples"] = len(examples)
    return metrics


if __name__ == "__main__":
    main()
    encoder_utils.exit_after_distributed_run()
