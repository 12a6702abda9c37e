"""`hfpipe local` substitutes only what cannot exist on this machine, says so, and runs every recipe.

Unit part: for every recipe, everything but the listed substitutions is the recipe's own, and every change
is reported; the substituted recipe passes Plan, SageMaker's API model and the entry point's own parser as
the local job runs it. Slow part: `hfpipe local --recipe NAME` ends SUCCEEDED, smoke test answered and
nothing left behind, once per task kind and once for spot training (END_TO_END, and the causal-LM recipe in
docs/vllm.md's walk-through, END_TO_END_ELSEWHERE; each checked by tests/local_runs.py). The other recipes
take the same path with another substituted model of the same family: each of them is checked by the unit
part, the `tiny-*` recipes also run end to end in tests/cli (test_walkthrough.py: tiny-lora, the README's
first command; test_local_world.py: tiny-lora, tiny-qa and tiny-mnli, and tiny-qa refused with a hub model; test_local.py:
own sources), and the SageMaker distribution libraries' recipes become the same
two gloo processes as their torch_distributed siblings (test_sagemaker_distribution_libraries_...).
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from local_runs import check_finished_run

from hfpipe.core.recipe.recipes import available_recipes, load_recipe, resolve_recipe
from hfpipe.kinds import serving_kind_of
from hfpipe.local.training.substitute import LOCAL_MAX_STEPS, LOCAL_PROCESSES, for_this_machine

RECIPES = available_recipes()
#: One end-to-end local run per task kind (each a full-size recipe, so its substitutions run too: data
#: parallel QA, sharded classification, LoRA over a quantized causal LM) and one for managed spot training.
END_TO_END = ["bert-large-squad-ddp", "roberta-large-mnli-mp", "distilbert-spot"]
#: The causal-LM kind's full-size recipe runs end to end where docs/vllm.md serves it (`hfpipe local --recipe
#: bloomz-7b1-lora-samsum --serve`, tests/cli/test_walkthrough_openai.py), checked as these are.
END_TO_END_ELSEWHERE = {"bloomz-7b1-lora-samsum": "tests/cli/test_walkthrough_openai.py"}
# Hyperparameters local mode may change, and the line that must then say so.
MAY_CHANGE = {
    "model_name_or_path": "model_name_or_path",
    "dataset_name": "dataset_name",
    "dataset_config_name": "dataset_name",
    "train_split_name": "dataset_name",
    "validation_split_name": "dataset_name",
    "task_name": "dataset_name",
    "max_steps": "steps",
    "logging_steps": "logging_steps",  # follows the step cap, so the capped run still draws a loss curve
    "fp16": "fp16",
    "bf16": "bf16",
    "fsdp": "fsdp",
}


@pytest.mark.parametrize("name", RECIPES)
def test_only_what_cannot_exist_here_is_substituted_and_each_is_said(name):
    real = load_recipe(name)
    subs = for_this_machine(real, gpu=False)
    local = subs.recipe
    said = {s.setting.split(".")[0] for s in subs.items}
    real_hps, local_hps = real["training"]["hyperparameters"], local["training"]["hyperparameters"]
    for key in set(real_hps) | set(local_hps):
        if real_hps.get(key) != local_hps.get(key):
            assert key in MAY_CHANGE, f"{name}: {key} changed but local mode may not change it"
            assert MAY_CHANGE[key] in said, f"{name}: {key} changed without saying so: {subs.lines()}"
    assert int(local_hps["max_steps"]) <= LOCAL_MAX_STEPS
    assert not local_hps.get("fp16") and not local_hps.get("bf16") and not local_hps.get("fsdp")
    assert "model_name_or_path" not in local_hps and "dataset_name" not in local_hps
    # The rest of the recipe is its own: containers, instances, spot, checkpoints, distribution, serving (the
    # hub model's figures stated for the Plan's fit check, where the serving kind has one, said too).
    for part in ("container", "serving", "task", "name"):
        mine = copy.deepcopy(local.get(part))
        if part == "serving" and "model" in (mine.get("server") or {}):
            assert "model" not in (real["serving"].get("server") or {}) and "serving" in said
            del mine["server"]["model"]
        assert mine == real.get(part), part
    for key in set(real["training"]) - {"hyperparameters", "channels"}:
        assert local["training"][key] == real["training"][key], key
    for channel, prefix in (real["training"].get("channels") or {}).items():
        assert local["training"]["channels"][channel] == prefix
    gate = real.get("evaluation_gate")
    if gate and gate["threshold"] > 0:
        assert local["evaluation_gate"]["threshold"] == 0.0 and "evaluation_gate" in said
    if real["training"].get("distribution"):
        assert subs.distributed and "distribution" in said
    if local.get("evaluation") != real.get("evaluation"):  # a hub split became the stand-in's channel
        assert "evaluation" in said and local["evaluation"]["data"] in local["training"]["channels"]


@pytest.mark.parametrize("name", RECIPES)
def test_fixture_channels_cover_what_the_local_recipe_reads(name, tmp_path):
    subs = for_this_machine(load_recipe(name), gpu=False)
    channels = subs.fixture_channels(tmp_path)
    assert set(channels) == set(subs.recipe["training"]["channels"])
    for folder in channels.values():
        assert any(p.is_file() for p in folder.rglob("*")), folder


@pytest.mark.parametrize("model_id", ["google/electra-small-discriminator", "albert-base-v2"])
def test_the_stand_in_model_is_the_task_kinds_family_whatever_the_hub_models_id(model_id):
    # An id naming no family local mode has (electra), or holding another family's name (albert: "bert"):
    # the stand-in is the one the task kind's fixture names (IMDb-style texts: DistilBERT), not a guess.
    recipe = load_recipe("distilbert-spot")
    recipe["training"]["hyperparameters"]["model_name_or_path"] = model_id
    subs = for_this_machine(recipe, gpu=False)
    assert subs.model_family == "distilbert"
    line = f"model_name_or_path: {model_id} -> tiny random-weight DistilBERT (model channel; "
    assert any(s.startswith(line) for s in subs.lines()), subs.lines()


def test_sagemaker_distribution_libraries_become_two_gloo_processes():
    from hfpipe.core.run.request import distribution_hyperparameters, encode_hyperparameters

    for name in ("bert-large-squad-smddp", "roberta-large-mnli-smp", "bert-large-squad-ddp"):
        recipe = load_recipe(name)
        t = recipe["training"]
        hps = encode_hyperparameters(
            {**t["hyperparameters"], **distribution_hyperparameters(t["distribution"], t["instance_type"])}
        )
        subs = for_this_machine(recipe, gpu=False)
        request = {"HyperParameters": hps}
        run = subs.apply_to_request(request)["HyperParameters"]
        assert json.loads(run["sagemaker_torch_distributed_enabled"]) is True, name
        assert "mp_parameters" not in run and "sagemaker_mpi_enabled" not in run, name
        assert json.loads(run.get("sagemaker_distributed_dataparallel_enabled", "false")) is False, name
        assert subs.processes_per_host(request) == LOCAL_PROCESSES
        assert request["HyperParameters"] == hps  # the plan's request itself is left as built


def test_a_gpu_keeps_half_precision_and_fsdp():
    subs = for_this_machine(load_recipe("roberta-large-mnli-mp"), gpu=True)
    hps = subs.recipe["training"]["hyperparameters"]
    assert hps["fp16"] is True and hps["fsdp"] == "full_shard auto_wrap"


def test_an_own_script_gets_the_stand_ins_by_the_arguments_its_parser_takes(tmp_path):
    """transformers v4.6.1's run_qa.py (the SQuAD original's own source) requires model_name_or_path and reads
    its data from train_file / validation_file: it is given the model channel's path, and the fixture's files
    by those names, in the rows of the hub data set it named; a parser without them reads the channels."""
    from own_sources import SQUAD_RECIPE

    from hfpipe.local.training.substitute import build_data

    real = load_recipe(str(SQUAD_RECIPE))
    v461 = {"model_name_or_path", "dataset_name", "train_file", "validation_file", "output_dir", "use_cpu"}
    subs = for_this_machine(real, gpu=False, script_arguments=v461)
    hps = subs.recipe["training"]["hyperparameters"]
    assert hps["model_name_or_path"] == "/opt/ml/input/data/model" and "dataset_name" not in hps
    # Its SMDDP run is two gloo processes here: Accelerate makes them one data-parallel run only with use_cpu.
    assert hps["use_cpu"] is True and "use_cpu" not in real["training"]["hyperparameters"]
    on_gpu = for_this_machine(real, gpu=True, script_arguments=v461).recipe["training"]["hyperparameters"]
    assert "use_cpu" not in on_gpu
    assert hps["train_file"] == "/opt/ml/input/data/training/train.json"
    assert hps["validation_file"] == "/opt/ml/input/data/validation/validation.json"
    assert subs.recipe["training"]["channels"]["model"].endswith("/model/")
    channels = build_data(subs.data_kind, tmp_path, rows=subs.hub_rows)
    rows = json.loads((channels["training"] / "train.json").read_text())["data"]
    assert len(rows) == 96 and set(rows[0]) == {"id", "title", "context", "question", "answers"}
    for row in rows:
        [text], [start] = row["answers"]["text"], row["answers"]["answer_start"]
        assert row["context"][start : start + len(text)] == text
    channels_only = for_this_machine(real, gpu=False, script_arguments={"model_name_or_path"})
    assert not {"train_file", "validation_file"} & set(channels_only.recipe["training"]["hyperparameters"])
    assert channels_only.hub_rows is False


def test_an_own_script_on_its_own_data_is_not_told_of_steps_and_one_on_a_stand_in_is():
    """Steps are a substitution only where a stand-in came in: a team's script on its own channels runs as
    written (no line); with a hub model become the tiny one and no max_steps, the line says it is not capped."""
    from own_sources import SQUAD_RECIPE

    own = load_recipe("tiny-qa")
    own["training"].update(source={"dir": "scripts"}, entry_point="train.py", hyperparameters={"epochs": 2})
    subs = for_this_machine(own, gpu=False, script_arguments={"epochs"})
    assert [s.setting for s in subs.items if s.setting == "steps"] == []
    assert "max_steps" not in subs.recipe["training"]["hyperparameters"]
    stand_in = for_this_machine(load_recipe(str(SQUAD_RECIPE)), gpu=False, script_arguments={"train_file"})
    [steps] = [s for s in stand_in.items if s.setting == "steps"]
    assert (steps.real, steps.local) == ("the script's own", "the script's own")
    assert steps.why == "the recipe sets no max_steps: not capped"


@pytest.mark.parametrize("name", [n for n in RECIPES if n.startswith("tiny-")])
def test_a_tiny_recipe_runs_here_as_written(name):
    """The CPU-sized recipes need no change of their own settings (the local world runs them as written, and
    refuses a recipe local mode would change): only the instance and the container are this machine's."""
    subs = for_this_machine(load_recipe(name), gpu=False)
    assert subs.recipe == load_recipe(name)
    # A serving kind whose server cannot run here is played by its stand-in (said, the recipe unchanged).
    stand_in = {"serving"} if serving_kind_of(load_recipe(name)).local_stand_in else set()
    assert {s.setting.split(".")[0] for s in subs.items} <= {"instance_type", "container", *stand_in}, (
        subs.lines()
    )


@pytest.mark.parametrize(
    "overrides",
    [
        [
            "training.hyperparameters.max_steps=200"
        ],  # the lifecycle walk-through's better version of tiny-mnli
        ["training.hyperparameters.max_steps=-1", "training.hyperparameters.num_train_epochs=3"],
    ],
)
def test_a_tiny_recipe_trains_its_own_steps_or_epochs_uncapped(overrides):
    """Only a stand-in model or data set is capped: a tiny recipe told to train longer does (issue #34)."""
    from hfpipe.core.recipe.recipes import apply_overrides

    longer = apply_overrides(load_recipe("tiny-mnli"), overrides)
    subs = for_this_machine(longer, gpu=False)
    assert subs.recipe == longer, subs.lines()  # so the local world trains it as written, too
    assert not any(line.startswith(("steps:", "logging_steps:")) for line in subs.lines())
    # A full-size recipe's steps stay capped whatever it asks (its model and data are stand-ins here).
    full = apply_overrides(load_recipe("roberta-large-mnli-mp"), overrides)
    assert for_this_machine(full, gpu=False).recipe["training"]["hyperparameters"]["max_steps"] == 4


def test_the_end_to_end_runs_cover_every_task_kind_and_spot():
    kinds = {load_recipe(name)["task"] for name in RECIPES}
    assert {load_recipe(name)["task"] for name in [*END_TO_END, *END_TO_END_ELSEWHERE]} == kinds
    root = Path(__file__).resolve().parents[2]
    for name, test_file in END_TO_END_ELSEWHERE.items():
        text = (root / test_file).read_text()
        assert "check_finished_run" in text and name in text, test_file
    assert any(resolve_recipe(recipe_name=name)["training"]["spot"]["enabled"] for name in END_TO_END)
    assert any(load_recipe(name)["training"].get("distribution") for name in END_TO_END)


@pytest.mark.parametrize("name", RECIPES)
def test_the_substituted_recipe_plans_and_its_job_parses_as_run_here(
    name, tmp_path, monkeypatch, in_process_training
):
    """What `hfpipe local` runs instead of the recipe: its Plan, every request checked against botocore's
    model, and the training job's hyperparameters, after the local request changes, parsed by the entry
    point's own strict parser as the toolkit hands them over."""
    import importlib

    from plan_config import dev_config

    from hfpipe.core.api_shapes import check_plan
    from hfpipe.core.run.plan import build_plan
    from hfpipe.local.engine.quotas import QuotaTable, default_quotas

    subs = for_this_machine(load_recipe(name), gpu=False)
    plan = build_plan(
        {"recipe": subs.recipe},
        f"{name}-local",
        dev_config(),
        QuotaTable(default_quotas()).client("eu-west-1"),
    )
    check_plan(plan)
    request = subs.apply_to_request(plan.training_job_request)
    hps = {k: json.loads(v) for k, v in request["HyperParameters"].items()}
    assert hps["max_steps"] <= LOCAL_MAX_STEPS
    assert not any(k in hps for k in ("mp_parameters", "sagemaker_mpi_enabled"))
    assert (subs.processes_per_host(request) == LOCAL_PROCESSES) is bool(subs.distributed)
    from sagemaker_training import mapping

    monkeypatch.setenv("SAGEMAKER_BASE_DIR", str(tmp_path))
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[2] / "training_code"))
    script = importlib.import_module(hps["sagemaker_program"].removesuffix(".py"))
    argv = mapping.to_cmd_args({k: v for k, v in hps.items() if not k.startswith("sagemaker_")})
    parsed = {k: v for dc in script.parse_args(argv) for k, v in vars(dc).items()}
    assert parsed["max_steps"] == hps["max_steps"]


def test_the_substituted_recipe_is_held_to_the_fit_check_of_the_recipes_own_model() -> None:
    """Local mode serves a tiny model, but its Plan checks the recipe's model on the recipe's instance, as the
    Plan on AWS does: a setting AWS would refuse is refused here too, and the line says so."""
    from plan_config import dev_config

    from hfpipe.core.recipe.schema import RecipeError
    from hfpipe.core.run.plan import build_plan
    from hfpipe.local.engine.quotas import QuotaTable, default_quotas

    real = load_recipe("bloomz-7b1-lora-samsum")
    real["serving"]["server"]["max_model_len"] = 16384  # more KV cache than an A10G holds for bloomz-7b1
    subs = for_this_machine(real, gpu=False)
    assert any(line.startswith("serving.server.model: bigscience/bloomz-7b1") for line in subs.lines())
    with pytest.raises(RecipeError, match=r"^recipe.serving.server.max_model_len: 16384 tokens do not fit"):
        build_plan(
            {"recipe": subs.recipe},
            "bloomz-local",
            dev_config(),
            QuotaTable(default_quotas()).client("eu-west-1"),
        )


@pytest.fixture(scope="module")
def out_root(tmp_path_factory) -> Path:
    """One --out for every run: the synthesized stacks are cached there once (each run has its own folder)."""
    return tmp_path_factory.mktemp("local-runs")


@pytest.mark.slow
@pytest.mark.parametrize("name", END_TO_END)
def test_a_recipe_of_each_kind_runs_end_to_end_locally(name, out_root: Path) -> None:
    # As a user runs it: its own process (moto's in-memory account stays out of the other tests).
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false", "COLUMNS": "200"}
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "hfpipe.cli", "local", "--recipe", name, "--out", str(out_root)],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
    )
    out = proc.stdout
    assert proc.returncode == 0, (out + proc.stderr)[-4000:]
    run_dir, report = check_finished_run(out_root, name, out)
    if load_recipe(name)["task"] == "question-answering":
        # The stock sample, {"inputs": {"question", "context"}}: one object in, one answer out.
        assert set(report["smoke_test"]["response"]) == {"answer", "score", "start", "end"}, report
    if load_recipe(name)["training"].get("distribution"):
        assert f"--nproc_per_node {LOCAL_PROCESSES}" in (run_dir / "training.log").read_text()
    print(f"{name}: {time.monotonic() - started:.1f} s")


@pytest.mark.parametrize(
    ("name", "split"),
    [
        ("roberta-large-mnli-mp", "validation_matched"),
        ("distilbert-spot", "test"),
        ("bloomz-7b1-lora-samsum", "test"),
    ],
)
def test_a_hub_split_to_evaluate_on_becomes_the_stand_in_s_validation_channel(name: str, split: str) -> None:
    """recipe.evaluation.data names a split of the hub data set; here the data set is the fixture's channels,
    so the evaluation reads their validation channel, and the run says so (docs/evaluation.md)."""
    real = load_recipe(name)
    assert real["evaluation"]["data"] == split
    subs = for_this_machine(real, gpu=False)
    assert subs.recipe["evaluation"]["data"] == "validation"
    resolve_recipe(subs.recipe)  # a held-out channel of the recipe as it runs here
    line = (
        "evaluation.data: "
        + f"{split} (a split of the hub data set) -> the validation channel of the stand-in data"
    )
    assert any(printed.startswith(line) for printed in subs.lines()), subs.lines()
