#!/usr/bin/env python
"""The evaluation job's entry point: score the challenger (and the champion) on held-out data, write
evaluation.json (schema hfpipe.evaluation/1; docs/evaluation.md).

It runs in a SageMaker processing job on the recipe's training image, whose inputs and output are:

    /opt/ml/processing/input/data        the held-out channel's files, as the training job gets them
    /opt/ml/processing/input/challenger  the candidate's model.tar.gz
    /opt/ml/processing/input/champion    the champion's model.tar.gz (with --champion)
    /opt/ml/processing/input/base        optional: the base model of an unmerged LoRA adapter
    /opt/ml/processing/output/evaluation.json

    python3 /opt/ml/processing/input/code/evaluate.py --task question-answering --metric f1 --margin 0 \\
        --confidence 0.95 --resamples 1000 --champion --max-seq-length 384 --doc-stride 128

A recipe that reads a Hub data set names its split instead of a channel: `--dataset-name rajpurkar/squad
--split validation` (no data input then). Each model is loaded as its inference handler loads it
(inference_clm.model_fn for a causal LM, a LoRA adapter over its base), predicts every example as training's
evaluation does (qa_utils' windows and n-best post-processing, the classification head's argmax, greedy
generation from the training prompt), and eval_scores scores it. A bad argument is one line naming it, exit
status 2; a failure is one line, exit status 1, also written to /opt/ml/output/message, which SageMaker
returns as DescribeProcessingJob's ExitMessage (docs: "Save and Access Metadata Information About Your
Processing Job"). Local mode sets HFPIPE_LOCAL_OPT_ML to the folder standing in for /opt/ml.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tarfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

if os.path.dirname(os.path.abspath(__file__)) not in sys.path:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import eval_scores


def opt_ml() -> Path:
    """The container's /opt/ml (local mode: the job's folder that stands for it)."""
    return Path(os.environ.get("HFPIPE_LOCAL_OPT_ML", "/opt/ml"))


DATA_SUFFIXES = {".json": "json", ".jsonl": "json", ".csv": "csv", ".parquet": "parquet"}
BOUNDS = {"confidence": (0.5, 0.999), "resamples": (100, 10000)}


class EvaluationError(RuntimeError):
    """The evaluation cannot go on (missing input, unreadable data); the message says what."""


class OneLineParser(argparse.ArgumentParser):
    """argparse, with a refusal in one line (no usage block) and exit status 2."""

    def error(self, message: str) -> NoReturn:
        _say_and_exit(f"evaluate.py: error: {message}", 2)


def _say_and_exit(line: str, status: int) -> NoReturn:
    print(line, file=sys.stderr, flush=True)
    if opt_ml().is_dir():  # in a container; elsewhere the line on stderr is all
        message = opt_ml() / "output" / "message"
        message.parent.mkdir(parents=True, exist_ok=True)
        message.write_text(line[:1024], encoding="utf-8")
    sys.exit(status)


def build_parser() -> OneLineParser:
    parser = OneLineParser(prog="evaluate.py", description=__doc__.split("\n\n")[0])
    rule = parser.add_argument_group("the rule (the recipe's evaluation field)")
    rule.add_argument("--task", required=True, choices=sorted(eval_scores.TASK_METRICS))
    rule.add_argument("--metric", required=True, help="one the task kind scores (eval_scores.TASK_METRICS)")
    rule.add_argument("--margin", type=float, default=0.0, help=">= 0, in the metric's units")
    rule.add_argument("--confidence", type=float, default=0.95, help="0.5..0.999")
    rule.add_argument("--resamples", type=int, default=1000, help="bootstrap resamples, 100..10000")
    rule.add_argument(
        "--max-examples",
        type=int,
        default=None,
        help=f"score the first N examples only (N >= {eval_scores.MIN_EXAMPLES})",
    )
    rule.add_argument("--champion", action="store_true", help="compare with input/champion")
    rule.add_argument("--seed", type=int, default=0, help="the bootstrap's seed")
    data = parser.add_argument_group("the data")
    data.add_argument("--channel", default="validation", help="the channel's name, for the document")
    data.add_argument("--dataset-name", default=None, help="a Hub data set instead of input/data")
    data.add_argument("--dataset-config", default=None, help="its configuration (glue: mnli)")
    data.add_argument("--split", default=None, help="its held-out split (validation, test, ...)")
    task = parser.add_argument_group("what a task needs (the recipe's hyperparameters of the same names)")
    task.add_argument("--max-seq-length", type=int, default=None, help="QA 384, classification 128")
    task.add_argument("--doc-stride", type=int, default=128)
    task.add_argument("--n-best-size", type=int, default=20)
    task.add_argument("--max-answer-length", type=int, default=30)
    task.add_argument("--text-columns", default=None, help="classification: 'premise,hypothesis', 'text'")
    task.add_argument("--label-column", default="label")
    task.add_argument("--class-names", default=None, help="the data's label names in id order")
    task.add_argument("--max-new-tokens", type=int, default=64, help="ROUGE: greedy summary length")
    task.add_argument("--block-size", type=int, default=1024, help="perplexity: tokens per example at most")
    task.add_argument("--batch-size", type=int, default=8)
    paths = parser.add_argument_group("paths (the processing job's)")
    paths.add_argument("--input-dir", type=Path, default=opt_ml() / "processing" / "input")
    paths.add_argument("--output-dir", type=Path, default=opt_ml() / "processing" / "output")
    return parser


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The arguments, each checked; a bad one ends the run with one line naming it (exit status 2)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    metrics = eval_scores.TASK_METRICS[args.task]
    if args.metric not in metrics:
        parser.error(
            f"argument --metric: {args.metric!r} is not scored for {args.task}; accepted: {list(metrics)}"
        )
    if args.margin < 0:
        parser.error(f"argument --margin: {args.margin} is negative; accepted: >= 0 (the metric's units)")
    for name, (low, high) in BOUNDS.items():
        if not low <= getattr(args, name) <= high:
            parser.error(f"argument --{name}: {getattr(args, name)}; accepted: {low}..{high}")
    if args.max_examples is not None and args.max_examples < eval_scores.MIN_EXAMPLES:
        parser.error(
            f"argument --max-examples: {args.max_examples}; accepted: an integer >= {eval_scores.MIN_EXAMPLES} "
            '(fewer examples give no verdict: docs/evaluation.md, "The bootstrap and the verdict")'
        )
    for name in (
        "max_seq_length",
        "doc_stride",
        "max_new_tokens",
        "block_size",
        "batch_size",
    ):
        value = getattr(args, name)
        if value is not None and value < 1:
            parser.error(f"argument --{name.replace('_', '-')}: {value}; accepted: an integer >= 1")
    if args.dataset_name and not args.split:
        parser.error("argument --split: required with --dataset-name (the held-out split, e.g. validation)")
    if args.split in ("train", "training"):
        parser.error(f"argument --split: {args.split!r} is the training data; accepted: a held-out split")
    return args


# --- inputs ------------------------------------------------------------------------------------------------
def extract_model(input_dir: Path, name: str, work: Path) -> Path:
    """The model.tar.gz of input/<name>, extracted (tar members as SageMaker packs them: relative paths)."""
    folder = input_dir / name
    archives = sorted(folder.glob("*.tar.gz")) if folder.is_dir() else []
    if len(archives) != 1:
        raise EvaluationError(
            f"input/{name}: expected one model.tar.gz in {folder}; found {[a.name for a in archives]}"
        )
    target = work / name
    target.mkdir(parents=True, exist_ok=True)
    with tarfile.open(archives[0]) as tar:
        tar.extractall(target, filter="data")  # refuses absolute paths and '..' members
    return target


def _data_file(folder: Path) -> Path:
    files = (
        sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix in DATA_SUFFIXES)
        if folder.is_dir()
        else []
    )
    if len(files) != 1:
        raise EvaluationError(
            f"input/data ({folder}) must hold exactly one data file ({', '.join(DATA_SUFFIXES)}); "
            f"found {[f.name for f in files]}"
        )
    return files[0]


def _json_rows(path: Path) -> list[dict[str, Any]]:
    """A JSON list of records, or JSON lines (one record a line), as datasets' json loader reads both."""
    text = path.read_text(encoding="utf-8")
    try:
        whole = json.loads(text)
    except json.JSONDecodeError:
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    return whole if isinstance(whole, list) else [whole]


def squad_rows(path: Path) -> list[dict[str, Any]]:
    """A SQuAD v1.1 file's questions (or flattened rows), as run_qa.py reads them."""
    import qa_utils

    return qa_utils.load_squad_json(path)


def table_rows(path: Path) -> list[dict[str, Any]]:
    """JSON lines, a JSON list, CSV or parquet records, as run_classification.py and run_clm.py read them."""
    if path.suffix in (".json", ".jsonl"):
        return _json_rows(path)
    import datasets

    return datasets.load_dataset(DATA_SUFFIXES[path.suffix], data_files=[str(path)], split="train").to_list()


def every_row(row: dict[str, Any], args: argparse.Namespace) -> bool:
    return True


def labelled_row(row: dict[str, Any], args: argparse.Namespace) -> bool:
    """GLUE marks unlabelled rows with -1; run_classification.py leaves them out too."""
    label = row.get(args.label_column)
    return not isinstance(label, int) or label >= 0


def load_records(args: argparse.Namespace) -> list[dict[str, Any]]:
    """The held-out records the task scores: the Hub split, else the one data file of input/data, read as
    the task's training script reads it."""
    way = WAYS[args.task]
    if args.dataset_name:
        import datasets

        rows = datasets.load_dataset(args.dataset_name, args.dataset_config, split=args.split).to_list()
    else:
        rows = way.read(_data_file(args.input_dir / "data"))
    rows = [row for row in rows if way.keep(row, args)]
    if args.max_examples is not None:
        rows = rows[: args.max_examples]
    if not rows:
        raise EvaluationError("the held-out data holds no example to score")
    if len(rows) < eval_scores.MIN_EXAMPLES:
        raise EvaluationError(
            f"the held-out data holds {len(rows)} examples to score; accepted: at least "
            f'{eval_scores.MIN_EXAMPLES}: fewer give no verdict (docs/evaluation.md, "The bootstrap and the '
            'verdict")'
        )
    return rows


# --- predictions, per task kind ----------------------------------------------------------------------------
def device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def qa_metrics(
    model_dir: Path, rows: list[dict[str, Any]], args: argparse.Namespace
) -> list[eval_scores.Metric]:
    """Windows of max_seq_length tokens overlapping by doc_stride, start/end logits, the n-best span per
    question (qa_utils, as run_qa.py's evaluation), scored as SQuAD v1.1 scores."""
    import qa_utils
    import torch
    from transformers import AutoModelForQuestionAnswering, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForQuestionAnswering.from_pretrained(model_dir).to(device()).eval()
    batch = {key: [row[key] for row in rows] for key in ("id", "question", "context")}
    features = qa_utils.prepare_validation_features(
        batch, tokenizer, max_seq_length=args.max_seq_length or 384, doc_stride=args.doc_stride
    )
    names = [k for k in ("input_ids", "attention_mask", "token_type_ids") if k in features]
    collate = qa_utils.RightPaddingCollator(tokenizer)
    starts, ends = [], []
    for first in range(0, len(features["input_ids"]), args.batch_size):
        window = [
            {k: features[k][i] for k in names}
            for i in range(first, min(first + args.batch_size, len(features["input_ids"])))
        ]
        with torch.no_grad():
            out = model(**{k: v.to(model.device) for k, v in collate(window).items()})
        starts.extend(out.start_logits.float().cpu().numpy())
        ends.extend(out.end_logits.float().cpu().numpy())
    rows_of_features = [
        {"example_id": features["example_id"][i], "offset_mapping": features["offset_mapping"][i]}
        for i in range(len(features["input_ids"]))
    ]
    answers, _ = qa_utils.postprocess_qa_predictions(
        rows,
        rows_of_features,
        (starts, ends),
        n_best_size=args.n_best_size,
        max_answer_length=args.max_answer_length,
    )
    references = {row["id"]: row["answers"]["text"] for row in rows}
    return eval_scores.qa_metrics(answers, references)


def _text_columns(rows: list[dict[str, Any]], args: argparse.Namespace) -> list[str]:
    if args.text_columns:
        names = [c.strip() for c in args.text_columns.split(",") if c.strip()]
    elif "premise" in rows[0] and "hypothesis" in rows[0]:
        names = ["premise", "hypothesis"]
    else:
        names = ["sentence" if "sentence" in rows[0] else "text"]
    for name in [*names, args.label_column]:
        if name not in rows[0]:
            raise EvaluationError(f"column {name!r} is not in the data; columns: {sorted(rows[0])}")
    return names


def gold_ids(rows: list[dict[str, Any]], args: argparse.Namespace, label2id: dict[str, int]) -> list[int]:
    """The gold labels as the model's label ids: a label name by the model's label2id (case-insensitive), an
    integer id through --class-names when given (the data's names in id order), else as the model's id."""
    by_name = {str(k).lower(): int(v) for k, v in label2id.items()}
    names = [n.strip() for n in args.class_names.split(",")] if args.class_names else None
    out = []
    for row in rows:
        label = row[args.label_column]
        if isinstance(label, int) and names is not None:
            label = names[label]
        if isinstance(label, str):
            if label.lower() not in by_name:
                raise EvaluationError(f"label {label!r} is not one of the model's labels {sorted(label2id)}")
            label = by_name[label.lower()]
        out.append(int(label))
    return out


def classification_predictions(
    model_dir: Path, rows: list[dict[str, Any]], args: argparse.Namespace
) -> tuple[list[int], list[int]]:
    """(predicted ids, gold ids): the head's argmax over the text (pair), truncated to max_seq_length."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForSequenceClassification.from_pretrained(model_dir).to(device()).eval()
    columns = _text_columns(rows, args)
    predicted: list[int] = []
    for first in range(0, len(rows), args.batch_size):
        part = rows[first : first + args.batch_size]
        texts = [[str(r[c]) for r in part] for c in columns]
        encoded = tokenizer(
            *texts, truncation=True, max_length=args.max_seq_length or 128, padding=True, return_tensors="pt"
        )
        with torch.no_grad():
            logits = model(**encoded.to(model.device)).logits
        predicted.extend(int(i) for i in logits.argmax(-1).cpu())
    return predicted, gold_ids(rows, args, dict(model.config.label2id))


def load_causal_lm(model_dir: Path, base_dir: Path | None) -> dict[str, Any]:
    """The model as inference_clm.model_fn loads it (a merged model, or a LoRA adapter over the base its
    adapter_config.json names); an adapter over input/base when that input is given."""
    import inference_clm

    bundle = (
        inference_clm.model_fn(str(model_dir)) if base_dir is None else _adapter_over(model_dir, base_dir)
    )
    if bundle["tokenizer"].pad_token is None:
        bundle["tokenizer"].pad_token = bundle["tokenizer"].eos_token
    return bundle


def _adapter_over(model_dir: Path, base_dir: Path) -> dict[str, Any]:
    import inference_clm
    from peft import PeftModel

    bundle = inference_clm.model_fn(str(base_dir))
    bundle["model"] = PeftModel.from_pretrained(bundle["model"], str(model_dir)).eval()
    prompt = model_dir / inference_clm.PROMPT_FILE
    if prompt.exists():
        bundle.update(json.loads(prompt.read_text()))
    return bundle


def rouge_metrics(
    bundle: dict[str, Any], rows: list[dict[str, Any]], args: argparse.Namespace
) -> list[eval_scores.Metric]:
    """Greedy summaries of the prompt rendered up to its response field (as run_clm.py's ROUGE and the
    handler render it), scored against the response field."""
    import inference_clm
    import torch

    model, tokenizer = bundle["model"], bundle["tokenizer"]
    template, field = bundle["prompt_template"], bundle["response_field"]
    prefix = inference_clm.prompt_prefix(template, field)
    eos, side = tokenizer.eos_token or "", tokenizer.padding_side
    tokenizer.padding_side = "left"  # continuations start right after each prompt
    summaries: list[str] = []
    try:
        for first in range(0, len(rows), args.batch_size):
            part = rows[first : first + args.batch_size]
            prompts = [inference_clm.render(prefix, row, eos) for row in part]
            enc = tokenizer(prompts, return_tensors="pt", padding=True, add_special_tokens=False).to(
                model.device
            )
            with torch.no_grad():
                out = model.generate(
                    **enc,
                    max_new_tokens=args.max_new_tokens,
                    do_sample=False,
                    pad_token_id=tokenizer.pad_token_id,
                )
            summaries += tokenizer.batch_decode(out[:, enc["input_ids"].shape[1] :], skip_special_tokens=True)
    finally:
        tokenizer.padding_side = side
    return eval_scores.rouge_metrics([str(r[field]) for r in rows], summaries)


def perplexity_metrics(
    bundle: dict[str, Any], rows: list[dict[str, Any]], args: argparse.Namespace
) -> list[eval_scores.Metric]:
    """Each record rendered whole with the training template (its EOS included, as training saw it), at most
    block_size tokens; its summed next-token negative log-likelihood and its number of predicted tokens."""
    import inference_clm
    import torch

    model, tokenizer = bundle["model"], bundle["tokenizer"]
    nll, counts = [], []
    for row in rows:
        text = inference_clm.render(bundle["prompt_template"], row, tokenizer.eos_token or "")
        ids = tokenizer(text, add_special_tokens=False, return_tensors="pt")["input_ids"][
            :, : args.block_size
        ]
        if ids.shape[1] < 2:
            raise EvaluationError("a record renders to fewer than 2 tokens: nothing to predict")
        ids = ids.to(model.device)
        with torch.no_grad():
            loss = model(
                input_ids=ids, labels=ids
            ).loss  # the mean over the ids.shape[1] - 1 predicted tokens
        nll.append(float(loss) * (ids.shape[1] - 1))
        counts.append(ids.shape[1] - 1)
    return [eval_scores.perplexity_metric(nll, counts)]


def causal_lm_metrics(
    model_dir: Path, rows: list[dict[str, Any]], args: argparse.Namespace
) -> list[eval_scores.Metric]:
    """A causal LM's metrics of the rule's family only: ROUGE generates, perplexity reads."""
    base = args.input_dir / "base"
    bundle = load_causal_lm(model_dir, base if base.is_dir() and any(base.iterdir()) else None)
    if args.metric == "perplexity":
        return perplexity_metrics(bundle, rows, args)
    return rouge_metrics(bundle, rows, args)


Scored = dict[str, list[eval_scores.Metric]]


def qa_scored(dirs: dict[str, Path], rows: list[dict[str, Any]], args: argparse.Namespace) -> Scored:
    return {name: qa_metrics(d, rows, args) for name, d in dirs.items()}


def causal_lm_scored(dirs: dict[str, Path], rows: list[dict[str, Any]], args: argparse.Namespace) -> Scored:
    return {name: causal_lm_metrics(d, rows, args) for name, d in dirs.items()}


def classification_scored(
    dirs: dict[str, Path], rows: list[dict[str, Any]], args: argparse.Namespace
) -> Scored:
    """Macro-F1's classes are those in the gold labels or in any model's predictions, the same for every
    model, so the paired difference compares like with like."""
    predictions = {name: classification_predictions(d, rows, args) for name, d in dirs.items()}
    labels = sorted({i for predicted, gold in predictions.values() for i in (*predicted, *gold)})
    return {
        name: eval_scores.classification_metrics(predicted, gold, labels)
        for name, (predicted, gold) in predictions.items()
    }


LabelSet = dict[str, dict[Any, Any]]


def classification_labels(model_dir: Path) -> LabelSet:
    """The classification head's labels: its config's id2label and label2id, as transformers reads them
    (PretrainedConfig: id2label's keys made integers, LABEL_i where config.json names none)."""
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(model_dir)
    return {
        "id2label": {int(k): str(v) for k, v in sorted(config.id2label.items(), key=lambda kv: int(kv[0]))},
        "label2id": {
            str(k): int(v) for k, v in sorted((config.label2id or {}).items(), key=lambda kv: kv[1])
        },
    }


def check_same_labels(way: TaskWay, dirs: dict[str, Path]) -> None:
    """A champion is scored on the challenger's data only where its head answers in the challenger's labels:
    a model of the same task trained on other labels (a sentiment model against MNLI's) would be read as if
    its ids were the challenger's. EvaluationError naming both label sets otherwise. The other task kinds'
    heads define no label set (extractive QA: start and end logits over the tokens; a causal LM: its
    vocabulary, its output read as text)."""
    if way.labels is None or "champion" not in dirs:
        return
    challenger, champion = way.labels(dirs["challenger"]), way.labels(dirs["champion"])
    if challenger == champion:
        return
    key = "id2label" if challenger["id2label"] != champion["id2label"] else "label2id"
    raise EvaluationError(
        f"the champion's labels ({key} {champion[key]}) are not the challenger's ({key} {challenger[key]}): "
        "its predictions cannot be scored against the challenger's data; accepted: a champion whose config "
        "has the challenger's id2label and label2id (a version of the same labels)"
    )


@dataclass(frozen=True)
class TaskWay:
    """How a task kind's data is read (a data file's records), which records score, how each model is scored
    on them, and the label set its head defines (None: none to compare)."""

    read: Callable[[Path], list[dict[str, Any]]]
    keep: Callable[[dict[str, Any], argparse.Namespace], bool]
    score: Callable[[dict[str, Path], list[dict[str, Any]], argparse.Namespace], Scored]
    labels: Callable[[Path], LabelSet] | None = None


#: Per task kind (eval_scores.TASK_METRICS names the same kinds; tests/training/test_eval_scores.py).
WAYS = {
    "question-answering": TaskWay(squad_rows, every_row, qa_scored),
    "text-classification": TaskWay(table_rows, labelled_row, classification_scored, classification_labels),
    "summarization": TaskWay(table_rows, every_row, causal_lm_scored),
    "text-generation": TaskWay(table_rows, every_row, causal_lm_scored),
}


def run(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """Load the records and the models, score them, and return evaluation.json's document."""
    started = time.monotonic()
    names = ["challenger", "champion"] if args.champion else ["challenger"]
    dirs = {name: extract_model(args.input_dir, name, work) for name in names}
    check_same_labels(WAYS[args.task], dirs)
    metrics = WAYS[args.task].score(dirs, load_records(args), args)
    rule = {
        "metric": args.metric,
        "margin": args.margin,
        "confidence": args.confidence,
        "resamples": args.resamples,
    }
    return eval_scores.document(
        task=args.task,
        channel=args.split if args.dataset_name else args.channel,
        rule=rule,
        challenger=metrics["challenger"],
        champion=metrics.get("champion"),
        seed=args.seed,
        seconds=time.monotonic() - started,
    )


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    import tempfile

    try:
        with tempfile.TemporaryDirectory(prefix="evaluate-") as work:
            doc = run(args, Path(work))
    except (EvaluationError, ValueError, KeyError, OSError) as err:
        _say_and_exit(f"evaluate.py: {type(err).__name__}: {err}", 1)
    args.output_dir.mkdir(parents=True, exist_ok=True)
    (args.output_dir / "evaluation.json").write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
    print(
        f"evaluation: {doc['verdict']}: {doc['reason']} ({doc['data']['examples']} examples, {doc['seconds']} s)"
    )
    return doc


if __name__ == "__main__":
    main()
