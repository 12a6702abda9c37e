"""SageMaker training-container plumbing shared by `run_qa.py`, `run_classification.py` and `run_clm.py`.

Paths default to the container contract (`SM_CHANNEL_*`, `SM_MODEL_DIR`, `/opt/ml/checkpoints`), the model
loads from the `model` channel when no `model_name_or_path` is given, and resume picks the newest *complete*
checkpoint. Resume relies on periodic checkpoints: in the training container the SIGTERM of a spot
interruption or StopTrainingJob never reaches the script (PID 1 is a bash without a trap and the toolkit
forwards no signal), so a save-on-SIGTERM handler would never run.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from transformers import HfArgumentParser, TrainingArguments

logger = logging.getLogger(__name__)

DEFAULT_CHECKPOINT_DIR = "/opt/ml/checkpoints"
DATA_SUFFIXES = (".json", ".jsonl", ".csv")


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


@dataclass
class ContainerArguments:
    """Where the finished model goes; checkpoints go to TrainingArguments.output_dir."""

    model_dir: str = field(
        default_factory=lambda: os.environ.get("SM_MODEL_DIR", "/opt/ml/model"),
        metadata={
            "help": "Final model, tokenizer and code/inference.py (packed into model.tar.gz). $SM_MODEL_DIR."
        },
    )


def default_checkpoint_dir() -> str:
    """`/opt/ml/checkpoints` in a container; under `$SAGEMAKER_BASE_DIR` when the toolkit runs elsewhere."""
    base_dir = os.environ.get("SAGEMAKER_BASE_DIR")
    return os.path.join(base_dir, "checkpoints") if base_dir else DEFAULT_CHECKPOINT_DIR


@dataclass
class ContainerTrainingArguments(TrainingArguments):
    """TrainingArguments with the training container's defaults, the same from flags and from a config file.

    `output_dir` defaults to the checkpoint directory SageMaker syncs with S3, so checkpoints survive a spot
    interruption. `use_cpu` is always true on a host without GPUs: Accelerate only sets up a multi-process
    CPU group (gloo) when told the run is on CPU; otherwise every rank of a torchrun would train alone on the
    whole data set (transformers 4.56, accelerate 1.x).
    """

    output_dir: str | None = field(  # type: ignore[assignment]
        default_factory=default_checkpoint_dir,
        metadata={
            "help": "Checkpoints (synced to S3 by SageMaker); default $SAGEMAKER_BASE_DIR/checkpoints."
        },
    )
    report_to: str | None = field(  # type: ignore[assignment]
        default="none", metadata={"help": "Experiment trackers to report to (none, all, tensorboard, ...)."}
    )
    logging_steps: float = field(default=10, metadata={"help": "Log every N steps."})

    def __post_init__(self) -> None:
        # HfArgumentParser gives bool fields a plain False default, so the host decides here (use_cpu is
        # transformers >= 4.34; the older containers run on GPUs only).
        if without_accelerator() and not getattr(self, "use_cpu", True):
            self.use_cpu = True
        super().__post_init__()


def parse_arguments(dataclass_types: tuple[Any, ...], argv: list[str] | None = None) -> tuple[Any, ...]:
    """Parse the script's dataclasses from the command line, or from one JSON/YAML file given alone.

    A lone config file is read by HfArgumentParser itself (`parse_json_file` / `parse_yaml_file`); the
    container defaults live in the dataclasses (ContainerTrainingArguments), so a file and flags agree.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = HfArgumentParser(dataclass_types)
    if len(argv) == 1 and argv[0].endswith(".json"):
        return tuple(parser.parse_json_file(argv[0]))
    if len(argv) == 1 and argv[0].endswith((".yaml", ".yml")):
        return tuple(parser.parse_yaml_file(argv[0]))
    return tuple(parser.parse_args_into_dataclasses(args=argv))


def without_accelerator() -> bool:
    """True on a host with neither CUDA nor XPU devices."""
    import torch

    return not torch.cuda.is_available() and not (hasattr(torch, "xpu") and torch.xpu.is_available())


def resolve_model(model_name_or_path: str | None) -> str:
    """The explicit model id/path, else the `model` channel ($SM_CHANNEL_MODEL)."""
    if model_name_or_path:
        return model_name_or_path
    channel = os.environ.get("SM_CHANNEL_MODEL")
    if channel:
        return channel
    raise ValueError(
        "model_name_or_path is not set and there is no 'model' channel ($SM_CHANNEL_MODEL); "
        "pass a hub id such as bert-large-uncased-whole-word-masking or a local directory"
    )


def resolve_data_file(explicit: str | None, *channels: str) -> str | None:
    """The explicit file, else the one data file (.json, .jsonl, .csv) in the first channel that exists.

    `channels` are channel names (`training`, `validation`, `test`); a channel directory holding several
    data files is an error, because silently picking one would train on the wrong data.
    """
    if explicit:
        return explicit
    for channel in channels:
        directory = os.environ.get(f"SM_CHANNEL_{channel.upper()}")
        if not directory:
            continue
        files = sorted(p for p in Path(directory).rglob("*") if p.is_file() and p.suffix in DATA_SUFFIXES)
        if len(files) != 1:
            raise ValueError(
                f"channel {channel!r} ({directory}) must hold exactly one data file ({', '.join(DATA_SUFFIXES)}); "
                f"found {[str(f) for f in files]}"
            )
        return str(files[0])
    return None


_CHECKPOINT_RE = re.compile(r"^checkpoint-(\d+)$")


def last_complete_checkpoint(output_dir: str) -> str | None:
    """Newest `checkpoint-N` under output_dir whose trainer_state.json (written last by the Trainer) is whole.

    A checkpoint cut off half-written by the end of the container is skipped instead of failing the resume,
    including one cut off while its trainer_state.json was being written (the Trainer writes it in place, so
    the file exists, empty or truncated, before it is whole: the resume would fail reading it).
    """
    if not os.path.isdir(output_dir):
        return None
    found = []
    for name in os.listdir(output_dir):
        match = _CHECKPOINT_RE.match(name)
        path = os.path.join(output_dir, name)
        if match and _whole_json(os.path.join(path, "trainer_state.json")):
            found.append((int(match.group(1)), path))
    return max(found)[1] if found else None


def _whole_json(path: str) -> bool:
    try:
        with open(path, encoding="utf-8") as f:
            json.load(f)
    except (OSError, ValueError):
        return False
    return True


def install_handler(model_dir: str, handler: str) -> Path:
    """Copy the inference handler next to this file into <model_dir>/code/inference.py."""
    source = Path(__file__).resolve().parent / handler
    target = Path(model_dir) / "code" / "inference.py"
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, target)
    shutil.copyfile(source.parent / "request_checks.py", target.parent / "request_checks.py")
    return target


def require_splits(raw: Any, training_args: Any) -> None:
    """Fail before loading the model when do_train / do_eval has no data to work on."""
    if training_args.do_train and "train" not in raw:
        raise ValueError("do_train is set but there is no training data (train_file or 'training' channel)")
    if training_args.do_eval and "validation" not in raw:
        raise ValueError(
            "do_eval is set but there is no validation data (validation_file or 'validation' channel)"
        )


def tokenizer_argument(tokenizer: Any) -> dict[str, Any]:
    """The Trainer's keyword for the tokenizer: `processing_class` (transformers >= 4.46) or `tokenizer`
    (the seed-faithful recipes' container, transformers 4.28, where SageMaker DP/MP modes ship)."""
    import inspect

    from transformers import Trainer

    name = (
        "processing_class"
        if "processing_class" in inspect.signature(Trainer.__init__).parameters
        else "tokenizer"
    )
    return {name: tokenizer}


def padding_collator(tokenizer: Any, pad_to_max_length: bool, training_args: Any) -> Any:
    """Fixed-length batches when features were padded to max_seq_length, else pad each batch to its longest."""
    from transformers import DataCollatorWithPadding, default_data_collator

    if pad_to_max_length:
        return default_data_collator
    # Multiples of 8 let fp16/bf16 kernels use tensor cores; on CPU they only cost a few pad tokens.
    half = training_args.fp16 or training_args.bf16
    return DataCollatorWithPadding(tokenizer, pad_to_multiple_of=8 if half else None)


def record_eval(trainer: Any, eval_metrics: dict[str, Any]) -> dict[str, Any]:
    """Log and save evaluation metrics the way the Trainer does for training; returns them."""
    trainer.log_metrics("eval", eval_metrics)
    trainer.save_metrics("eval", eval_metrics)
    return eval_metrics


def save_outputs(trainer: Any, model_dir: str, handler: str, metrics: dict[str, Any]) -> None:
    """Save the model (every rank takes part), then, on rank 0, the inference handler and metrics.json."""
    trainer.save_model(model_dir)
    if trainer.is_world_process_zero():
        install_handler(model_dir, handler)
        Path(model_dir, "metrics.json").write_text(json.dumps(metrics, indent=1, default=str))


def train_resumable(trainer: Any, train_samples: int) -> dict[str, Any]:
    """Train from the newest complete checkpoint (or the one asked for), then log and save the metrics and state.

    Resume after a spot interruption or a stop relies on the periodic checkpoints (`save_strategy` steps or
    epoch): in the real container no signal reaches the script before it is killed (see
    hfpipe.local.training.container.LocalTrainingJob.stop for the path SIGTERM takes), so there is no last-moment save.
    """
    args = trainer.args
    checkpoint = args.resume_from_checkpoint or last_complete_checkpoint(args.output_dir)
    if checkpoint:
        logger.info("resuming from checkpoint %s", checkpoint)
    result = trainer.train(resume_from_checkpoint=checkpoint)
    metrics = dict(result.metrics)
    metrics["train_samples"] = train_samples
    metrics["global_step"] = trainer.state.global_step
    trainer.log_metrics("train", metrics)
    trainer.save_metrics("train", metrics)
    trainer.save_state()
    return metrics


def end_process_group() -> None:
    """Leave the distributed process group before the interpreter exits.

    A gloo group torn down by interpreter exit instead can abort a rank with "terminate called without an
    active exception" after all the work is done, and torchrun then fails the whole job.
    """
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        # Every rank arrives first: a rank leaving while another still saves made that one hang or abort.
        dist.barrier()
        dist.destroy_process_group()


def end_run() -> None:
    """The end of a script's main(): leave the process group, then end a rank of a distributed run at once.

    A rank ends here while main() still holds the trainer: returning would free the DDP reducer, whose gloo
    group's destructor waits on a peer that has already gone (a hang seen here).
    """
    end_process_group()
    exit_after_distributed_run()


def exit_after_distributed_run() -> None:
    """End a rank of a finished distributed run without interpreter finalization.

    On CPU (gloo), a rank whose work is saved and whose process group is destroyed was seen to hang in
    interpreter exit, and in freeing the DDP reducer when the script's main() returned (its
    ProcessGroupGloo destructor joins threads that wait on a peer which has already exited), holding
    torchrun and the job open. The scripts call this at the end of main(), before anything is freed;
    everything is written by then, so the streams are flushed and the process exits at once. A
    single-process run (the tests call main() in-process) returns as usual.
    """
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


def setup_logging(training_args: Any) -> None:
    """Log to stdout (CloudWatch) at the Trainer's level for this process."""
    import datasets
    import transformers

    logging.basicConfig(
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        datefmt="%H:%M:%S",
        handlers=[logging.StreamHandler(sys.stdout)],
    )
    if training_args.should_log:
        # INFO on the main process (resume, sharding decisions); replicas stay at WARNING.
        transformers.utils.logging.set_verbosity_info()
    level = training_args.get_process_log_level()
    logger.setLevel(level)
    logging.getLogger().setLevel(level)
    datasets.utils.logging.set_verbosity(level)
    transformers.utils.logging.set_verbosity(level)
    # One handler (the root one): transformers' own handler would print every message a second time.
    transformers.utils.logging.disable_default_handler()
    transformers.utils.logging.enable_propagation()
