"""What `hfpipe local` substitutes so that any recipe runs on this machine, and nothing else.

A recipe names things that cannot exist here: a hub model (bert-large, roberta-large, distilbert, a 7B BLOOM),
a hub data set, GPUs (half precision, FSDP) and SageMaker's own distribution libraries (smdistributed data and
model parallel, which need NVIDIA GPUs and the library). Local mode replaces exactly those:

- the model becomes the tiny random-weight model of the task kind's fixture (its `family`, one of
  hfpipe.kinds.TINY_MODELS: BERT for QA, RoBERTa or DistilBERT for classification, BLOOM for causal LMs)
  built from a config (`hfpipe.fixtures`), delivered as the `model` channel the scripts read when no
  `model_name_or_path` is given;
- the data set becomes fixture channels in the real format (SQuAD JSON, MNLI pairs with a matched and a
  mismatched validation set, IMDb-style texts, samsum dialogues);
- training on a stand-in model or data set is capped at a few steps (`max_steps`; a recipe that runs here as
  written, as the tiny-* recipes do, trains its own steps or epochs), and logs its loss often enough to draw
  a curve (`logging_steps`);
- half precision (fp16/bf16) is off without a GPU, and FSDP (Accelerate's needs a GPU) becomes plain DDP;
- distribution runs as far as a CPU allows: torch_distributed as two gloo processes on this host;
  smdistributed data parallel (SMDDP) and model parallel (SMP, launched through MPI) as the same two-process
  gloo DDP, their parameters set aside;
- an evaluation gate a random-weight model cannot pass is lowered so the pipeline goes on to the endpoint.

Everything else is the recipe's own: its other hyperparameters, entry point, LoRA and quantization settings,
spot and checkpoint settings, instance types (for the plan), and its serving settings and sample request.
`Substitutions.lines()` says what was substituted; `hfpipe local` prints it before the run.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hfpipe.core.recipe import serving_fit
from hfpipe.kinds import Fixture, KindError, fixture_named, serving_kind_of, task_kind, tiny_model

#: Steps a local run on a stand-in model or data set trains at most.
LOCAL_MAX_STEPS = 4
#: The substitutions of a stand-in model or data set: a recipe with either is capped at LOCAL_MAX_STEPS.
STAND_INS = ("model_name_or_path", "dataset_name")
#: Loss lines a local run logs at least (its logging_steps follows the step cap).
LOCAL_LOG_POINTS = 4
#: Processes a distributed recipe runs on this host (gloo).
LOCAL_PROCESSES = 2
# Hyperparameter and request keys of the SDK's distribution settings (hfpipe.core.run.request).
SMDDP_KEY = "sagemaker_distributed_dataparallel_enabled"
TORCH_DISTRIBUTED_KEY = "sagemaker_torch_distributed_enabled"
MPI_KEYS = (
    "sagemaker_mpi_enabled",
    "sagemaker_mpi_num_of_processes_per_host",
    "sagemaker_mpi_custom_mpi_options",
)


@dataclass(frozen=True)
class Substitution:
    """One setting local mode replaced: what the recipe says, what runs here, and why."""

    setting: str
    real: str
    local: str
    why: str

    def line(self) -> str:
        """One human-readable line."""
        return f"{self.setting}: {self.real} -> {self.local} ({self.why})"


@dataclass
class Substitutions:
    """The substitutions for one recipe: the recipe to run (raw, as the execution input sends it: not yet
    validated, so untyped), its fixture channels, and the launch settings."""

    recipe: dict[str, Any]
    model_family: str
    data_kind: str
    items: list[Substitution] = field(default_factory=list)
    distributed: bool = False
    #: Channels given as local folders (`hfpipe local --channel NAME=FOLDER`), used instead of fixtures.
    given_channels: dict[str, Path] = field(default_factory=dict)
    #: The fixture data written as the hub data set's rows (for an own script given its files by name).
    hub_rows: bool = False

    def lines(self) -> list[str]:
        """Every substitution, one line each (empty when the recipe runs here as written)."""
        return [s.line() for s in self.items]

    def add(self, setting: str, real: Any, local: Any, why: str) -> None:
        self.items.append(Substitution(setting, _show(real), _show(local), why))

    def fixture_channels(self, root: Path) -> dict[str, Path]:
        """Build the fixture folders of every channel the (substituted) recipe reads, by channel name."""
        wanted = set(self.recipe["training"].get("channels") or {}) - set(self.given_channels)
        built = {"model": build_model(self.model_family, root / "model")} if "model" in wanted else {}
        if wanted - {"model"}:
            built.update(build_data(self.data_kind, root / "data", rows=self.hub_rows))
        return {**{name: path for name, path in built.items() if name in wanted}, **self.given_channels}

    def use_channel(self, name: str, folder: Path, prefix: str = "local-channels") -> None:
        """Run with a local folder as channel `name` (uploaded to the local data bucket under `prefix`)."""
        channels = self.recipe["training"].setdefault("channels", {})
        real = channels.get(name, "(not in the recipe)")
        channels[name] = f"{prefix}/{name}/"
        self.given_channels[name] = folder
        self.add(f"channels.{name}", real, str(folder), "a local folder given with --channel")

    def processes_per_host(self, request: dict[str, Any]) -> int | None:
        """How many processes the job runs here: two gloo processes for any distributed recipe."""
        return LOCAL_PROCESSES if self.distributed else None

    def apply_to_request(self, request: dict[str, Any]) -> dict[str, Any]:
        """The CreateTrainingJob request as run here: SageMaker's distribution libraries replaced by
        torch_distributed (the SDK's own launcher key), everything else as the plan built it."""
        out = copy.deepcopy(request)
        hps = out.get("HyperParameters") or {}
        smddp = json.loads(hps.get(SMDDP_KEY, "false")) is True
        mpi = json.loads(hps.get("sagemaker_mpi_enabled", "false")) is True
        if smddp or mpi:
            for key in (SMDDP_KEY, "sagemaker_distributed_dataparallel_custom_mpi_options", *MPI_KEYS):
                hps.pop(key, None)
            hps.pop("mp_parameters", None)
            hps[TORCH_DISTRIBUTED_KEY] = "true"
        return out


def has_gpu() -> bool:
    """Whether torch sees a CUDA device here (half precision and FSDP stay as the recipe says)."""
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def _local_stack() -> tuple[str, str] | None:
    """(transformers, torch) versions installed here, torch without its local build tag."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("transformers"), version("torch").split("+")[0]
    except PackageNotFoundError:
        return None


def _show(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def fixture_of(recipe: dict[str, Any]) -> Fixture:
    """The fixture data set with the format the recipe's data has (a raw recipe: local mode substitutes the
    recipe as read): its task kind's rule (hfpipe/kinds/tasks.py); an unknown task is refused by name."""
    try:
        return task_kind(recipe["task"]).fixture(recipe["training"]["hyperparameters"])
    except KindError as err:
        raise ValueError(f"recipe.task: {err}") from None


def _keep_fit_check(local: dict[str, Any], model_id: str, subs: Substitutions) -> None:
    """The Plan's fit check holds the recipe's own model to its serving instance here too: the figures it
    knows the hub model by go with the recipe once the model is the tiny one (a model it does not know is
    refused by the Plan, as on AWS)."""
    server = local["serving"].get("server") or {}
    figures = serving_fit.model_figures(local)
    if figures is None or "model" in server:
        return  # and a recipe without a server block keeps none
    model = {k: getattr(figures, k) for k in ("parameters", "layers", "kv_heads", "head_dim")}
    local["serving"]["server"] = {**server, "model": model}
    subs.add(
        "serving.server.model",
        f"{model_id} (known to the fit check)",
        f"its figures: {figures.parameters:,} parameters, {figures.layers} layers",
        f"the Plan checks that the recipe's model fits {local['serving'].get('instance_type')}; "
        "the tiny model is what is served here",
    )


def for_this_machine(
    raw: dict[str, Any],
    gpu: bool = False,
    data_prefix: str = "local-fixtures",
    script_arguments: Collection[str] | None = None,
) -> Substitutions:
    """The recipe as `hfpipe local` runs it here, with every substitution recorded.

    `raw` is the recipe as read (before defaults: not validated, so untyped); the result's `recipe` is what the
    execution input sends, still raw (the Plan state validates it).
    `script_arguments`: the names a recipe's own script's parser takes, where it could be read (None: not
    known, or the project's scripts).
    """
    local = copy.deepcopy(raw)
    t = local["training"]
    hps: dict[str, Any] = t.setdefault("hyperparameters", {})
    fixture = fixture_of(local)
    model_id = hps.get("model_name_or_path")
    # The task kind's fixture names the tiny family, for a hub model and a tiny-* recipe alike: nothing is
    # guessed from the model's id.
    subs = Substitutions(local, fixture.family, fixture.name)
    channels: dict[str, str] = t.setdefault("channels", {})
    name = local["name"]

    subs.add(
        "instance_type",
        f"{t.get('instance_count', 1)} x {t['instance_type']}",
        "this machine" + ("" if gpu else " (CPU)"),
        "training runs here; the plan, quotas and cost still use the recipe's instances",
    )
    _container_substitution(local, subs)
    serving = serving_kind_of(local)
    if serving.local_stand_in:
        subs.add(
            "serving.kind", f"{serving.name}: {serving.description.split(':')[0]}", *serving.local_stand_in
        )
    if model_id and serving.server_settings:
        _keep_fit_check(local, model_id, subs)
    own = t.get("source") is not None
    if model_id:
        _model_stand_in(local, fixture, subs, f"{data_prefix}/{name}/model/", own)
    _dataset_stand_in(hps, channels, subs, fixture, f"{data_prefix}/{name}", script_arguments)
    _evaluation_stand_in(local, channels, subs)
    # Steps are capped only where the model or the data became a stand-in. A recipe that runs here as
    # written (the tiny-* ones: their own model and data channels, sized for a CPU) keeps its own steps and
    # epochs, with no bound: training longer is a setting of the recipe (--set), as on AWS. A recipe's own
    # script (training.source) may not take max_steps or logging_steps: they are changed only where its
    # hyperparameters name them, never added.
    if any(s.setting in STAND_INS for s in subs.items):
        _cap_steps(hps, subs, own)
    if not own or "logging_steps" in hps:
        _log_often(hps, subs)
    if not gpu:
        _cpu_precision(hps, subs)
    _distribution(t, subs)
    if not gpu and subs.distributed and "use_cpu" in (script_arguments or ()):
        _cpu_data_parallel(hps, subs)
    _gate_for_tiny_models(local, subs)
    return subs


#: Where the training container puts channel NAME (the toolkit's SM_CHANNEL_NAME); hyperparameters under
#: /opt/ml are the local run's own folder here (hfpipe.local.training.container).
CHANNEL_PATH = "/opt/ml/input/data/{}"
#: The arguments transformers' example scripts take for data files, by the channel that holds each file.
FILE_ARGUMENTS = {"training": "train_file", "validation": "validation_file"}


def _model_stand_in(
    local: dict[str, Any], fixture: Fixture, subs: Substitutions, prefix: str, own: bool
) -> None:
    """The hub model becomes the tiny one, in the `model` channel: the project's scripts read that channel
    when no model_name_or_path is given; a recipe's own script gets the channel's path as its
    model_name_or_path (its parser may require one, and from_pretrained takes a folder)."""
    hps, channels = local["training"]["hyperparameters"], local["training"]["channels"]
    model_id = hps.pop("model_name_or_path")
    channels["model"] = prefix
    where = f"model channel; the {local['task']} stand-in"
    if own:
        hps["model_name_or_path"] = CHANNEL_PATH.format("model")
        where += f", model_name_or_path {hps['model_name_or_path']}"
    subs.add(
        "model_name_or_path",
        model_id,
        f"{tiny_model(fixture.family).description} ({where})",
        "no hub downloads here",
    )


def _dataset_stand_in(
    hps: dict[str, Any],
    channels: dict[str, str],
    subs: Substitutions,
    fixture: Fixture,
    prefix: str,
    script_arguments: Collection[str] | None,
) -> None:
    """The hub data set, named by dataset_name or (run_glue.py's way, as the seed-faithful MNLI recipe has it)
    by a GLUE task_name alone when no training channel gives the data, becomes the fixture's channels. An own
    script whose parser takes transformers' examples' train_file / validation_file is given the channels'
    files that way, with the hub data set's rows (SQuAD's records, not the v1.1 file's articles)."""
    glue_task = hps.get("task_name") if not hps.get("dataset_name") and "training" not in channels else None
    if not (hps.get("dataset_name") or glue_task):
        return
    dataset = hps.pop("dataset_name", None) or "nyu-mll/glue"
    config = hps.pop("dataset_config_name", None) or glue_task
    for key, value in fixture.implied_hyperparameters.items():
        hps.setdefault(key, value)  # what the hub configuration implied (GLUE mnli: task_name mnli)
    for split in ("train_split_name", "validation_split_name"):
        hps.pop(split, None)  # hub split names; the fixture channels are the splits
    for channel in fixture.channels:
        # A trailing slash: an S3 prefix "validation" would also take "validation_mismatched/...".
        channels[channel] = f"{prefix}/{channel}/"
    files = {
        FILE_ARGUMENTS[c]: f"{CHANNEL_PATH.format(c)}/{fixture.files[c]}"
        for c in fixture.channels
        if c in FILE_ARGUMENTS and c in fixture.files and FILE_ARGUMENTS[c] in (script_arguments or ())
    }
    hps.update(files)
    subs.hub_rows = bool(files)
    given = f" ({', '.join(f'{k} {v}' for k, v in files.items())})" if files else ""
    subs.add(
        "dataset_name",
        dataset if not config else f"{dataset} ({config})",
        f"{fixture.description} in channels {', '.join(fixture.channels)}{given}",
        "no hub downloads here",
    )


def _evaluation_stand_in(local: dict[str, Any], channels: dict[str, str], subs: Substitutions) -> None:
    """A recipe evaluated on a split of the hub data set (recipe.evaluation.data, docs/evaluation.md) is
    evaluated here on the fixture's validation channel, the stand-in for that data set's held-out split."""
    evaluation = local.get("evaluation")
    if not evaluation or evaluation.get("data") in channels or "validation" not in channels:
        return
    subs.add(
        "evaluation.data",
        f"{evaluation['data']} (a split of the hub data set)",
        "the validation channel of the stand-in data",
        "no hub downloads here",
    )
    evaluation["data"] = "validation"


def _container_substitution(local: dict[str, Any], subs: Substitutions) -> None:
    """The training container's versions, where this environment's transformers/torch differ."""
    local_stack = _local_stack()
    container = local["container"]["training"]
    if (
        local_stack
        and (container.get("transformers_version"), container.get("pytorch_version")) != local_stack
    ):
        subs.add(
            "container.training",
            f"transformers {container.get('transformers_version')} / PyTorch {container.get('pytorch_version')} "
            f"/ {container.get('py_version')}",
            f"this environment's transformers {local_stack[0]} / torch {local_stack[1]}",
            "the container image cannot run here",
        )


def _cpu_precision(hps: dict[str, Any], subs: Substitutions) -> None:
    """Half precision and FSDP set aside on a CPU."""
    for precision in ("fp16", "bf16"):
        if hps.get(precision) in (True, "true", "True"):
            hps[precision] = False
            subs.add(precision, "true", "false", "half precision needs a GPU")
    if hps.get("fsdp"):
        subs.add("fsdp", hps.pop("fsdp"), "plain DDP", "Accelerate's FSDP needs a GPU")


def _cpu_data_parallel(hps: dict[str, Any], subs: Substitutions) -> None:
    """An own script's TrainingArguments get use_cpu on a CPU host when its run is distributed: Accelerate
    sets up a multi-process (gloo) run there only with it (accelerate.state: MULTI_CPU needs cpu), so without
    it each process would train alone, as process 0 of one. (The project's scripts set it themselves.)"""
    if hps.get("use_cpu") in (True, "true", "True"):
        return
    real = hps.get("use_cpu", "not set")
    hps["use_cpu"] = True
    subs.add("use_cpu", real, "true", "gloo data parallelism across processes on a CPU needs it")


def _distribution(t: dict[str, Any], subs: Substitutions) -> None:
    """SMDDP, SMP and multi-instance torch_distributed played as gloo processes on this host."""
    dist = t.get("distribution") or {}
    smd = dist.get("smdistributed") or {}
    if smd.get("dataparallel", {}).get("enabled"):
        subs.distributed = True
        subs.add(
            "distribution",
            "smdistributed dataparallel (SMDDP)",
            f"torch_distributed, {LOCAL_PROCESSES} gloo processes",
            "SMDDP needs NVIDIA GPUs and the library, which no CPU host has",
        )
    elif smd.get("modelparallel", {}).get("enabled"):
        subs.distributed = True
        params = smd["modelparallel"].get("parameters", {})
        subs.add(
            "distribution",
            f"smdistributed modelparallel {json.dumps(params, sort_keys=True)} + mpi {json.dumps(dist.get('mpi', {}))}",
            f"torch_distributed, {LOCAL_PROCESSES} gloo processes (data parallel; mp_parameters set aside)",
            "SMP needs NVIDIA GPUs and the library, which no CPU host has",
        )
    elif any((dist.get(k) or {}).get("enabled") for k in ("torch_distributed", "pytorchddp")):
        subs.distributed = True
        count = t.get("instance_count", 1)
        subs.add(
            "distribution",
            f"torch_distributed on {count} x {t['instance_type']}",
            f"{LOCAL_PROCESSES} gloo processes on this host",
            "no GPUs here: DDP over CPU processes",
        )


def _gate_for_tiny_models(local: dict[str, Any], subs: Substitutions) -> None:
    """A higher-is-better gate's threshold at 0: a random-weight stand-in cannot reach the real model's score."""
    gate = local.get("evaluation_gate")
    if gate and gate.get("threshold") not in (None, 0, 0.0) and gate.get("higher_is_better", True):
        subs.add(
            f"evaluation_gate.{gate['metric']}",
            f">= {gate['threshold']}",
            ">= 0",
            "a random-weight stand-in cannot reach the real model's score",
        )
        gate["threshold"] = 0.0


def _cap_steps(hps: dict[str, Any], subs: Substitutions, own: bool = False) -> None:
    """A recipe whose hub model or data set became a tiny stand-in trains LOCAL_MAX_STEPS steps at most: its
    epochs and steps were sized for the real model on the real data, which a few steps of the stand-in show
    as well. (A recipe that runs as written, as the tiny-* ones do, is never capped: see for_this_machine.)"""
    steps = hps.get("max_steps")
    if own and steps is None:
        subs.add("steps", "the script's own", "the script's own", "the recipe sets no max_steps: not capped")
        return
    if steps is not None and 0 < int(steps) <= LOCAL_MAX_STEPS:
        return
    epochs = hps.get("num_train_epochs")
    real = (
        f"max_steps {steps}"
        if steps is not None
        else f"num_train_epochs {epochs if epochs is not None else 3}"
    )
    hps["max_steps"] = LOCAL_MAX_STEPS
    subs.add("steps", real, f"max_steps {LOCAL_MAX_STEPS}", "capped for a CPU")


def _log_often(hps: dict[str, Any], subs: Substitutions) -> None:
    """A run of a few steps logs its loss LOCAL_LOG_POINTS times (the scripts log every 10 steps, the
    Trainer every 500 by default: a capped run would log none), so `hfpipe report --plot` has a curve. A run
    by epochs (no max_steps, or one <= 0: the Trainer's own way) keeps the recipe's logging_steps."""
    try:
        steps = int(hps.get("max_steps", 0))
    except (TypeError, ValueError):
        return  # the recipe's own value; Plan and the script's parser say what is wrong with it
    if steps <= 0:
        return
    every = max(1, steps // LOCAL_LOG_POINTS)
    given = hps.get("logging_steps")
    try:
        value = float(given) if given is not None else None
    except (TypeError, ValueError):
        return  # the recipe's own value; Plan and the script's parser say what is wrong with it
    # The Trainer reads a logging_steps below 1 as a fraction of the run's steps (TrainingArguments).
    if value is not None and 0 < value <= every:  # as often or more often (a fraction of the run: < 1)
        return
    hps["logging_steps"] = every
    subs.add(
        "logging_steps",
        given if given is not None else "the script's default",
        every,
        f"a {steps}-step run logs its loss every {every} step{'s' if every != 1 else ''}, for a loss curve",
    )


def build_model(family: str, dest: Path) -> Path:
    """A tiny random-weight model of `family` (hfpipe.kinds.TINY_MODELS) with its tokenizer, saved to `dest`."""
    from hfpipe.fixtures import build_tiny_model

    return build_tiny_model(family, dest)


def build_data(kind: str, root: Path, rows: bool = False) -> dict[str, Path]:
    """Fixture channel folders (`training`, `validation`, ...) in the real format of the fixture `kind`
    (Fixture.name), written by the writer the fixture names; `rows`: as the hub data set's rows, where the
    fixture has a writer for them (Fixture.rows_writer; what transformers' run_qa.py reads from a train_file)."""
    from hfpipe.fixtures import write_fixture

    try:
        return write_fixture(fixture_named(kind), root, rows=rows)
    except KindError as err:
        raise ValueError(f"local fixture data: {err}") from None
