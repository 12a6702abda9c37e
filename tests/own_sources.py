"""The original material's own sources as the tests build them (nothing downloaded): a local git repository
standing in for github.com/huggingface/transformers at tag v4.6.1, holding a `run_qa.py` that takes that
script's arguments, and the SQuAD recipe of recipes/own-code/ pointed at it. Shared by
tests/core/test_own_source.py (pack, check, plan) and tests/cli/test_local.py (the run end to end)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

ORIGINALS = Path(__file__).resolve().parents[1] / "recipes" / "own-code"
SQUAD_RECIPE = ORIGINALS / "squad-smddp-run-qa-v4-6-1.json"
SPOT_RECIPE = ORIGINALS / "spot" / "recipe.json"
TRANSFORMERS = "https://github.com/huggingface/transformers.git"

#: run_qa.py as transformers v4.6.1's examples/pytorch/question-answering has it, cut to its parser (the same
#: dataclasses and fields, their __post_init__ check, HfArgumentParser with TrainingArguments) and to what it
#: does with the arguments up to training: the data files read as it reads them (json, field "data"), the
#: columns it needs, the fast tokenizer it requires and the model, saved to output_dir by the main process,
#: and the Trainer's metric lines. It does not train or evaluate: the pipeline around it is what is tested.
RUN_QA_V461 = """
import os, sys, time
from dataclasses import dataclass, field
from typing import Optional
from transformers import HfArgumentParser, TrainingArguments

@dataclass
class ModelArguments:
    model_name_or_path: str = field(metadata={"help": "Path to pretrained model or model identifier"})
    config_name: Optional[str] = field(default=None)
    tokenizer_name: Optional[str] = field(default=None)
    cache_dir: Optional[str] = field(default=None)
    model_revision: str = field(default="main")
    use_auth_token: bool = field(default=False)

@dataclass
class DataTrainingArguments:
    dataset_name: Optional[str] = field(default=None)
    dataset_config_name: Optional[str] = field(default=None)
    train_file: Optional[str] = field(default=None)
    validation_file: Optional[str] = field(default=None)
    test_file: Optional[str] = field(default=None)
    overwrite_cache: bool = field(default=False)
    preprocessing_num_workers: Optional[int] = field(default=None)
    max_seq_length: int = field(default=384)
    pad_to_max_length: bool = field(default=True)
    max_train_samples: Optional[int] = field(default=None)
    max_eval_samples: Optional[int] = field(default=None)
    max_predict_samples: Optional[int] = field(default=None)
    version_2_with_negative: bool = field(default=False)
    null_score_diff_threshold: float = field(default=0.0)
    doc_stride: int = field(default=128)
    n_best_size: int = field(default=20)
    max_answer_length: int = field(default=30)

    def __post_init__(self):
        files = (self.train_file, self.validation_file, self.test_file)
        if self.dataset_name is None and all(f is None for f in files):
            raise ValueError("Need either a dataset name or a training/validation file/test_file.")
        for f in files:
            assert f is None or f.split(".")[-1] in ("csv", "json"), f"{f} should be a csv or a json file."

def main():
    parser = HfArgumentParser((ModelArguments, DataTrainingArguments, TrainingArguments))
    if len(sys.argv) == 2 and sys.argv[1].endswith(".json"):
        model_args, data_args, training_args = parser.parse_json_file(json_file=sys.argv[1])
    else:
        model_args, data_args, training_args = parser.parse_args_into_dataclasses()
    started = time.monotonic()
    from datasets import load_dataset
    from transformers import AutoModelForQuestionAnswering, AutoTokenizer, PreTrainedTokenizerFast

    files = {"train": data_args.train_file, "validation": data_args.validation_file}
    extension = data_args.train_file.split(".")[-1]
    datasets = load_dataset(extension, data_files=files, field="data", cache_dir=model_args.cache_dir)
    columns = set(datasets["train"].column_names)
    assert {"question", "context", "answers"} <= columns, columns
    tokenizer = AutoTokenizer.from_pretrained(model_args.model_name_or_path, use_fast=True)
    assert isinstance(tokenizer, PreTrainedTokenizerFast), "This example script only works with a fast tokenizer"
    model = AutoModelForQuestionAnswering.from_pretrained(model_args.model_name_or_path)
    if training_args.should_save:
        model.save_pretrained(training_args.output_dir)
        tokenizer.save_pretrained(training_args.output_dir)
        elapsed = time.monotonic() - started
        print(f"  world_size = {training_args.world_size}")
        print(f"  epoch = {float(training_args.num_train_epochs)}")
        print(f"  train_runtime = {elapsed:.4f}")
        print(f"  train_samples_per_second = {len(datasets['train']) / elapsed:.3f}")

if __name__ == "__main__":
    main()
"""


#: run_glue.py as transformers v4.6.1's examples/pytorch/text-classification has it, cut to its parser (the
#: argument dataclasses by their fields, HfArgumentParser with TrainingArguments): the MNLI original's script.
RUN_GLUE_V461 = """
import sys
from dataclasses import dataclass, field
from typing import Optional
from transformers import HfArgumentParser, TrainingArguments

@dataclass
class DataTrainingArguments:
    task_name: Optional[str] = field(default=None)
    max_seq_length: int = field(default=128)
    overwrite_cache: bool = field(default=False)
    pad_to_max_length: bool = field(default=True)
    max_train_samples: Optional[int] = field(default=None)
    max_eval_samples: Optional[int] = field(default=None)
    max_predict_samples: Optional[int] = field(default=None)
    train_file: Optional[str] = field(default=None)
    validation_file: Optional[str] = field(default=None)
    test_file: Optional[str] = field(default=None)

@dataclass
class ModelArguments:
    model_name_or_path: str = field(metadata={"help": "Path to pretrained model or model identifier"})
    config_name: Optional[str] = field(default=None)
    tokenizer_name: Optional[str] = field(default=None)
    cache_dir: Optional[str] = field(default=None)
    use_fast_tokenizer: bool = field(default=True)
    model_revision: str = field(default="main")
    use_auth_token: bool = field(default=False)

def main():
    parser = HfArgumentParser((ModelArguments, DataTrainingArguments, TrainingArguments))
    model_args, data_args, training_args = parser.parse_args_into_dataclasses()
    print(model_args, data_args)

if __name__ == "__main__":
    main()
"""


def git(where: Path, *args: str) -> str:
    """git in `where`, with a fixed identity and no user configuration."""
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.com", "HOME": str(where), "PATH": "/usr/bin:/bin"}  # fmt: skip
    return subprocess.run(
        ["git", *args], cwd=where, env=env, check=True, capture_output=True, text=True
    ).stdout


def transformers_at_v461(root: Path) -> Path:
    """A local repository standing in for github.com/huggingface/transformers: tag v4.6.1 holds the examples'
    run_qa.py and run_glue.py (and an executable script, whose mode the archive keeps); master has moved on."""
    examples = root / "examples" / "pytorch"
    (examples / "question-answering").mkdir(parents=True)
    (examples / "question-answering" / "run_qa.py").write_text(RUN_QA_V461)
    (examples / "question-answering" / "requirements.txt").write_text("datasets >= 1.4.0\n")
    (examples / "text-classification").mkdir(parents=True)
    (examples / "text-classification" / "run_glue.py").write_text(RUN_GLUE_V461)
    (examples / "text-classification" / "requirements.txt").write_text("datasets >= 1.1.3\n")
    (examples / "text-classification" / "run_xnli.sh").write_text('#!/bin/sh\npython run_glue.py "$@"\n')
    (examples / "text-classification" / "run_xnli.sh").chmod(0o755)
    changed = examples / "question-answering" / "run_qa.py"
    return tagged_then_changed(root, "master", "v4.6.1", changed, "raise SystemExit('master, not v4.6.1')\n")


def tagged_then_changed(root: Path, branch: str, tag: str, changed: Path, text: str) -> Path:
    """`root` made a git repository on `branch`: what it holds committed and tagged `tag`, then `changed`
    rewritten to `text` and committed after the tag."""
    git(root, "init", "--quiet", f"--initial-branch={branch}")
    git(root, "add", ".")
    git(root, "commit", "--quiet", "-m", tag)
    git(root, "tag", tag)
    changed.write_text(text)
    git(root, "commit", "--quiet", "-am", f"after {tag}")
    return root


def squad_recipe_from(repository: Path, dest: Path) -> Path:
    """The SQuAD original's recipe as written, its git source's URL (and nothing else) replaced by the local
    repository's path, written to `dest`."""
    recipe = json.loads(SQUAD_RECIPE.read_text())
    source = recipe["training"]["source"]["git"]
    # as the estimator's git_config and source_dir were written
    assert source == {
        "repo": TRANSFORMERS,
        "branch": "v4.6.1",
        "path": "./examples/pytorch/question-answering",
    }
    source["repo"] = str(repository)
    dest.write_text(json.dumps(recipe))
    return dest
