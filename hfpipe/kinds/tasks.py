"""Task kinds: what a recipe's `task` decides, in one place (stdlib only; nothing of hfpipe imported).

A task kind names its training script and inference handler (both in training_code/), the records its
script reads (so `hfpipe data upload` can check a data set), the fixture data and tiny model family local
mode stands in with, a request its handler accepts, and the serving kinds that can serve it. Every other
module asks `task_kind(recipe["task"])`; none guesses the kind from a file name or a handler's source.
"""

from __future__ import annotations

import string
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from hfpipe.kinds.serving import (
    ANY_TASK,
    SERVING_KINDS,
    KindError,
    openai_sample_request,
    serving_kind,
)

Hyperparameters = Mapping[str, Any]


@dataclass(frozen=True)
class TinyModel:
    """A tiny random-weight model family, built from a config with a tokenizer trained on fixture text (no
    download): what local mode puts in the `model` channel for the task kind's fixture, whatever hub model
    the recipe names, and what the served-model fixture starts from. `builder` ("module:function", named by
    string: this package imports nothing of hfpipe.fixtures) is called as function(dest, **options) and
    writes the model and its tokenizer to the folder `dest`."""

    name: str
    description: str
    builder: str
    options: Mapping[str, Any] = field(default_factory=dict)


#: The tiny families a fixture may name (Fixture.family).
TINY_MODELS: dict[str, TinyModel] = {
    model.name: model
    for model in (
        *(
            TinyModel(
                name, f"tiny random-weight {label}", "hfpipe.fixtures.encoders:build_tiny", {"kind": name}
            )
            for name, label in (("bert", "BERT"), ("roberta", "RoBERTa"), ("distilbert", "DistilBERT"))
        ),
        TinyModel("bloom", "tiny random-weight BLOOM", "hfpipe.fixtures.samsum:build_tiny_bloom"),
        # A family vLLM serves LoRA adapters on (LlamaForCausalLM implements SupportsLoRA; BLOOM does not):
        # the base of the adapter recipes. Sized like the BLOOM one (hidden 64: bitsandbytes' blocks).
        TinyModel(
            "llama",
            "tiny random-weight Llama",
            "hfpipe.fixtures.samsum:build_tiny_lm",
            {
                "model_class": "LlamaForCausalLM",
                "config": {
                    "hidden_size": 64,
                    "intermediate_size": 128,
                    "num_hidden_layers": 2,
                    "num_attention_heads": 4,
                    "num_key_value_heads": 2,
                    "max_position_embeddings": 256,
                },
                "token_ids": {"bos_token_id": "bos", "eos_token_id": "eos", "pad_token_id": "pad"},
            },
        ),
        # A family of another architecture transformers builds from a config is data: e.g.
        # TinyModel("t5", "tiny random-weight T5", "hfpipe.fixtures.samsum:build_tiny_lm", {"model_class":
        # "T5ForConditionalGeneration", "config": {...}, "token_ids": {"pad_token_id": "pad", ...}}).
    )
}


def tiny_model(name: Any) -> TinyModel:
    """The tiny model family `name`; KindError naming it and the accepted families when unknown."""
    model = TINY_MODELS.get(name) if isinstance(name, str) else None
    if model is None:
        raise KindError(f"tiny model family {name!r} is not known; accepted: {sorted(TINY_MODELS)}")
    return model


@dataclass(frozen=True)
class Fixture:
    """A local-mode stand-in data set in the task's real format (built by hfpipe.local.training.substitute.build_data
    under `name`), and the tiny model family (a key of TINY_MODELS) local mode trains on it: the recipe's own
    when it names no hub model, the stand-in of the hub model it names otherwise."""

    name: str
    description: str
    family: str
    channels: tuple[str, ...] = ("training", "validation")
    #: Set when the fixture replaces the hub data set, unless the recipe sets them: what the hub
    #: configuration implied (GLUE's mnli configuration selects task_name mnli in run_classification.py).
    implied_hyperparameters: Mapping[str, str] = field(default_factory=dict)
    #: "module:function" of hfpipe.fixtures called as function(root) that writes the fixture's channel
    #: folders under `root` and returns {channel: folder} (local mode's data channels).
    writer: str = field(default="", kw_only=True)
    #: "module:function" called as function(count, seed) that returns `count` inputs of the task's handler
    #: made from the fixture (local mode's stand-in traffic during a deployment's bake).
    handler_inputs: str = field(default="", kw_only=True)
    #: {channel: file} the writer writes in each data channel (a recipe's own script that takes
    #: transformers' examples' train_file / validation_file is given these files).
    files: Mapping[str, str] = field(default_factory=dict, kw_only=True)
    #: "module:function" like `writer`, writing the records as the hub data set's rows where the writer's
    #: format differs from them (SQuAD v1.1's articles; what run_qa.py reads from a train_file); "": the same.
    rows_writer: str = field(default="", kw_only=True)


def _first_fixture(_: Hyperparameters) -> int:
    return 0


@dataclass(frozen=True)
class TaskKind:
    """One recipe `task`: everything that follows from it."""

    name: str
    description: str
    #: The training script in training_code/ (the recipes' training.entry_point).
    entry_point: str
    #: The inference handler module in training_code/ that the entry point installs into the model.
    handler: str
    #: {column: "string" | "integer" | "answers"} the entry point reads, from the recipe's hyperparameters.
    columns: Callable[[Hyperparameters], dict[str, str]]
    #: Local-mode stand-ins; `pick_fixture` says which one has the format the recipe's data has.
    fixtures: tuple[Fixture, ...]
    #: A request body the handler accepts (tests/kinds checks it against the handler's parse_request).
    sample_request: Mapping[str, Any]
    pick_fixture: Callable[[Hyperparameters], int] = _first_fixture
    #: Whether the handler reads {"dialogue": chat}, what `hfpipe invoke --dialogue FILE` sends.
    takes_dialogue: bool = False
    #: The head the trained model has ("question-answering", "sequence-classification", "causal-lm"): the
    #: served-model fixture (hfpipe/fixtures/serving.py, `HEAD_BUILDERS`) builds the first fixture's tiny
    #: family with it.
    model_head: str = "causal-lm"
    #: The metrics the evaluation job scores for this kind (training_code/eval_scores.py TASK_METRICS says the
    #: same, tests/training/test_eval_scores.py compares them), each with whether higher is better: what a
    #: recipe's evaluation.metric may name (docs/evaluation.md).
    metrics: Mapping[str, bool] = field(default_factory=dict)
    #: {recipe hyperparameter: training_code/evaluate.py argument}: what predicting needs, as the training
    #: script used it (hfpipe.core.recipe.evaluation.container_arguments passes those the recipe sets).
    evaluation_arguments: Mapping[str, str] = field(default_factory=dict)

    @property
    def serving_kinds(self) -> tuple[str, ...]:
        """The serving kinds that can serve this task, in the registry's order: those whose `serves` names
        its model head, or every task (ANY_TASK)."""
        return tuple(
            k.name for k in SERVING_KINDS.values() if ANY_TASK in k.serves or self.model_head in k.serves
        )

    def record_columns(self, hyperparameters: Hyperparameters) -> dict[str, str]:
        """The columns each record of the recipe's data set must hold, and their kind."""
        return self.columns(hyperparameters)

    def fixture(self, hyperparameters: Hyperparameters) -> Fixture:
        """The local stand-in data set for a recipe with these hyperparameters."""
        return self.fixtures[self.pick_fixture(hyperparameters)]

    def request_for(self, serving: str) -> Mapping[str, Any]:
        """The sample request in the serving kind's contract: the handler's own, or for a kind that speaks
        OpenAI's API a chat completion asking for the sample's input."""
        if serving_kind(serving).speaks_openai:
            return openai_sample_request(str(self.sample_request["inputs"]))
        return self.sample_request

    def check_serving(self, serving: str) -> None:
        """KindError naming both kinds when this task cannot be served by `serving`."""
        serving_kind(serving)  # an unknown serving kind is refused by its own name first
        if serving not in self.serving_kinds:
            raise KindError(
                f"serving kind {serving!r} cannot serve task {self.name!r}; accepted for {self.name}: "
                f"{list(self.serving_kinds)}"
            )


#: ROUGE-1/2/L/Lsum of greedy generations against the template's response field, and perplexity (lower is
#: better) of the rendered records.
CAUSAL_LM_METRICS = {"rouge1": True, "rouge2": True, "rougeL": True, "rougeLsum": True, "perplexity": False}
#: ROUGE's greedy summaries are as long as training's (generation_max_new_tokens); perplexity reads at most
#: a training block of each record.
CAUSAL_LM_EVALUATION_ARGUMENTS = {
    "generation_max_new_tokens": "--max-new-tokens",
    "block_size": "--block-size",
}


# --- the records each script reads (see training_code/qa_utils.py, run_classification.py, run_clm.py) ----


def _qa_columns(_: Hyperparameters) -> dict[str, str]:
    return {"question": "string", "context": "string", "answers": "answers"}


def _classification_columns(hp: Hyperparameters) -> dict[str, str]:
    mnli = hp.get("task_name") == "mnli"
    first = hp.get("text_column") or ("premise" if mnli else "text")
    second = hp.get("text_pair_column") or ("hypothesis" if mnli else None)
    names = hp.get("text_column_names")  # the transformers example script's spelling: "a,b"
    if isinstance(names, str) and names.strip():
        first, _, pair = names.partition(",")
        second = pair.strip() or None
    label = hp.get("label_column") or hp.get("label_column_name") or "label"
    columns = {str(first).strip(): "string", str(label): "integer"}
    if second:
        columns[str(second)] = "string"
    return columns


#: The samsum fields run_clm.py's default prompt template reads.
DEFAULT_PROMPT_FIELDS = ("dialogue", "summary")


def _prompt_columns(hp: Hyperparameters) -> dict[str, str]:
    template = hp.get("prompt_template")
    if isinstance(template, str):
        fields = [n for _, n, _, _ in string.Formatter().parse(template) if n and n != "eos_token"]
    else:
        fields = list(DEFAULT_PROMPT_FIELDS)
    return dict.fromkeys(fields, "string")


def _classification_fixture(hp: Hyperparameters) -> int:
    # Sentence pairs (GLUE MNLI) or single texts (IMDb-style): the fixture must have the recipe's columns.
    mnli = "mnli" in (hp.get("task_name"), hp.get("dataset_config_name"))
    return 0 if mnli or "premise" in str(hp.get("text_column_names", "")) else 1


SAMSUM = Fixture(
    "samsum",
    "samsum-style dialogue fixture",
    "bloom",
    writer="hfpipe.fixtures.samsum:write_channels",
    files={"training": "train.jsonl", "validation": "validation.jsonl"},
    handler_inputs="hfpipe.fixtures.samsum:handler_inputs",
)
#: The same records for a recipe whose LoRA targets are not BLOOM's fused `query_key_value` (q_proj, v_proj,
#: ...: a Llama-family base, which vLLM serves adapters on), trained on the tiny Llama.
SAMSUM_LLAMA = replace(
    SAMSUM, name="samsum-llama", description="samsum-style dialogue fixture (Llama)", family="llama"
)


def _prompt_fixture(hp: Hyperparameters) -> int:
    # The tiny family must have the modules the recipe's LoRA targets name (BLOOM's fused QKV, or not).
    targets = {m.strip() for m in str(hp.get("lora_target_modules", "query_key_value")).split(",")}
    return 0 if "query_key_value" in targets else 1


CHAT = "Amanda: I baked cookies. Do you want some?\nJerry: Sure!"

TASK_KINDS: dict[str, TaskKind] = {
    kind.name: kind
    for kind in (
        TaskKind(
            name="question-answering",
            description="extractive QA on SQuAD-style question/context/answers records",
            entry_point="run_qa.py",
            handler="inference_qa",
            columns=_qa_columns,
            fixtures=(
                Fixture(
                    "squad",
                    "SQuAD v1.1 JSON fixture",
                    "bert",
                    writer="hfpipe.fixtures.squad:write_channels",
                    rows_writer="hfpipe.fixtures.squad:write_row_channels",
                    files={"training": "train.json", "validation": "validation.json"},
                    handler_inputs="hfpipe.fixtures.squad:handler_inputs",
                ),
            ),
            model_head="question-answering",
            metrics={"exact_match": True, "f1": True},
            evaluation_arguments={
                "max_seq_length": "--max-seq-length",
                "doc_stride": "--doc-stride",
                "n_best_size": "--n-best-size",
                "max_answer_length": "--max-answer-length",
            },
            sample_request={
                "inputs": {
                    "question": "What does the pipeline deploy?",
                    "context": "The pipeline trains a model and deploys it to a SageMaker endpoint.",
                }
            },
        ),
        TaskKind(
            name="text-classification",
            description="single-text or sentence-pair classification with an integer label",
            entry_point="run_classification.py",
            handler="inference_classification",
            columns=_classification_columns,
            fixtures=(
                Fixture(
                    "mnli",
                    "MNLI pair fixture (matched + mismatched validation)",
                    "roberta",
                    ("training", "validation", "validation_mismatched"),
                    {"task_name": "mnli"},
                    writer="hfpipe.fixtures.mnli:write_mnli_channels",
                    files={"training": "train.jsonl", "validation": "validation.jsonl"},
                    handler_inputs="hfpipe.fixtures.mnli:mnli_inputs",
                ),
                Fixture(
                    "textcls",
                    "IMDb-style text fixture",
                    "distilbert",
                    writer="hfpipe.fixtures.mnli:write_textcls_channels",
                    files={"training": "train.jsonl", "validation": "validation.jsonl"},
                    handler_inputs="hfpipe.fixtures.mnli:textcls_inputs",
                ),
            ),
            pick_fixture=_classification_fixture,
            model_head="sequence-classification",
            metrics={"accuracy": True, "macro_f1": True},
            evaluation_arguments={
                "max_seq_length": "--max-seq-length",
                "text_column_names": "--text-columns",
                "label_column_name": "--label-column",
                "class_names": "--class-names",
            },
            sample_request={
                "inputs": {
                    "text": "A man is playing a guitar on stage.",
                    "text_pair": "A person is performing music.",
                }
            },
        ),
        TaskKind(
            name="summarization",
            description="dialogue summarization by a causal LM trained on a prompt template",
            entry_point="run_clm.py",
            handler="inference_clm",
            columns=_prompt_columns,
            fixtures=(SAMSUM, SAMSUM_LLAMA),
            pick_fixture=_prompt_fixture,
            sample_request={"inputs": CHAT, "parameters": {"max_new_tokens": 8, "do_sample": False}},
            takes_dialogue=True,
            metrics=CAUSAL_LM_METRICS,
            evaluation_arguments=CAUSAL_LM_EVALUATION_ARGUMENTS,
        ),
        TaskKind(
            # The same script and handler as summarization: a causal LM on any prompt template's fields.
            name="text-generation",
            description="a causal LM trained on a prompt template's fields, answering prompts",
            entry_point="run_clm.py",
            handler="inference_clm",
            columns=_prompt_columns,
            fixtures=(SAMSUM, SAMSUM_LLAMA),
            pick_fixture=_prompt_fixture,
            sample_request={"inputs": CHAT, "parameters": {"max_new_tokens": 8}},
            metrics=CAUSAL_LM_METRICS,
            evaluation_arguments=CAUSAL_LM_EVALUATION_ARGUMENTS,
        ),
    )
}


def fixture_named(name: Any) -> Fixture:
    """The fixture data set `name` (Fixture.name) of any task kind; KindError naming the accepted ones."""
    found = {f.name: f for kind in TASK_KINDS.values() for f in kind.fixtures}
    if not isinstance(name, str) or name not in found:
        raise KindError(f"fixture {name!r} is not known; accepted: {sorted(found)}")
    return found[name]


def task_kind(name: Any) -> TaskKind:
    """The task kind of a recipe's `task`; KindError naming it and the accepted tasks when unknown."""
    kind = TASK_KINDS.get(name) if isinstance(name, str) else None
    if kind is None:
        raise KindError(f"task {name!r} is not a known task kind; accepted: {sorted(TASK_KINDS)}")
    return kind
