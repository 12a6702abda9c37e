"""Every recipe against its own scripts: hyperparameters, sample request and answer, container versions.

- The hyperparameters reach the entry point as the real container hands them over (JSON-encoded in the
  request, decoded and turned into `--key value` flags by the sagemaker-training toolkit) and must parse with
  the entry point's own HfArgumentParser (an unknown argument is an error there).
- The sample request is answered by the handler the entry point installs, loaded from a model directory as
  training leaves it, under every transformers version a container of the recipe runs: the training
  container's (this environment) and the inference container's (.venv-serving, built by
  scripts/serving_venv.sh from requirements-serving.txt; scripts/test.sh runs it); the answer must carry the recipe's expected_keys, checked by the
  SmokeTest Lambda's own check.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from hfpipe.core.recipe.recipes import available_recipes, resolve_recipe
from hfpipe.core.run.request import distribution_hyperparameters, encode_hyperparameters
from hfpipe.fixtures.serving import build_served_model
from hfpipe.kinds import serving_kind_of

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "training_code"))
sys.path.insert(0, str(ROOT / "lambda" / "pipeline"))

RECIPES = available_recipes()
SERVING_PYTHON = ROOT / ".venv-serving" / "bin" / "python"


def toolkit_argv(recipe: dict[str, Any]) -> list[str]:
    """The entry point's command line in the container: what the request sends, as the toolkit decodes it."""
    from sagemaker_training import mapping

    t = recipe["training"]
    sent = encode_hyperparameters(t["hyperparameters"])
    sent.update(encode_hyperparameters(distribution_hyperparameters(t["distribution"], t["instance_type"])))
    # sagemaker_training.environment.read_hyperparameters: json.loads each value; sagemaker_* keys are the
    # toolkit's own, the rest become the script's arguments (Environment.to_cmd_args).
    decoded = {k: json.loads(v) for k, v in sent.items()}
    return mapping.to_cmd_args({k: v for k, v in decoded.items() if not k.startswith("sagemaker_")})


@pytest.mark.parametrize("name", RECIPES)
def test_hyperparameters_parse_with_the_entry_points_own_parser(
    name, tmp_path, monkeypatch, in_process_training
):
    recipe = resolve_recipe(recipe_name=name)
    monkeypatch.setenv("SAGEMAKER_BASE_DIR", str(tmp_path))
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    script = importlib.import_module(recipe["training"]["entry_point"].removesuffix(".py"))
    argv = toolkit_argv(recipe)
    parsed = script.parse_args(argv)
    values = {k: v for dc in parsed for k, v in vars(dc).items()}
    for key, value in recipe["training"]["hyperparameters"].items():
        assert key in values, f"{name}: {key} is not an argument of {recipe['training']['entry_point']}"
        got = getattr(values[key], "value", values[key])  # enums (save_strategy, ...) by their value
        if isinstance(value, int | float | str) and isinstance(got, int | float | str):
            assert got == value, f"{name}: {key} parsed as {got!r}, the recipe says {value!r}"
    # The parser is strict, so the check above can fail: a name it does not know stops the script.
    with pytest.raises(ValueError, match="not used by the HfArgumentParser"):
        script.parse_args([*argv, "--not_an_argument", "1"])


def test_classification_arguments_are_run_glue_names(in_process_training):
    import run_classification as rc

    parsed = rc.parse_args(
        [
            "--dataset_name", "nyu-mll/glue", "--dataset_config_name", "mnli",
            "--text_column_names", "premise,hypothesis", "--label_column_name", "label",
            "--validation_split_name", "validation_matched", "--output_dir", "/tmp/x",
        ]
    )  # fmt: skip
    data = parsed[1]
    assert data.task_name == "mnli"  # GLUE's mnli configuration is the MNLI task (matched + mismatched)
    assert data.text_columns == ["premise", "hypothesis"]
    with pytest.raises(ValueError, match="text_column_names"):
        rc.DataTrainingArguments(text_column_names="a,b,c")


def answer_cases() -> dict[str, list[str]]:
    """Recipes grouped by what the answer test needs (entry point, prompt template, request, keys, versions):
    recipes that would repeat another's check run once, under all their names."""
    groups: dict[str, list[str]] = {}
    for name in RECIPES:
        r = resolve_recipe(recipe_name=name)
        if "transformers_version" not in serving_kind_of(r).image_key_fields:
            # The handler runs only in a container of the toolkit, keyed by its transformers version; a
            # kind whose server brings its own code is checked by its own contract
            # (test_sample_request_gets_an_openai_answer... for vllm).
            continue
        key = json.dumps(
            [
                r["training"]["entry_point"],
                r["training"]["hyperparameters"].get("prompt_template"),
                r["serving"]["sample_request"],
                r["serving"]["expected_keys"],
                r["container"]["inference"]["transformers_version"],
            ],
            sort_keys=True,
        )
        groups.setdefault(key, []).append(name)
    return {"+".join(names): names for names in groups.values()}


ANSWER_CASES = answer_cases()
TRAINING_STACK = resolve_recipe(recipe_name="tiny-lora")["container"]["training"]["transformers_version"]


def serve_all(python: Path, cases: list[dict[str, Any]], folder: Path) -> list[dict[str, Any]]:
    """serve_once.py --batch: every case's request in one process of `python` (one start of torch and
    transformers for all of them); one result per case, in order."""
    listing = folder / f"cases-{python.parent.parent.name}.json"
    listing.write_text(json.dumps(cases))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH",)}
    env.update({"OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"})
    out = subprocess.run(
        [str(python), str(ROOT / "tests" / "training" / "serve_once.py"), "--batch", str(listing)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    results = [json.loads(line) for line in out.stdout.splitlines() if line.startswith('{"transformers"')]
    assert len(results) == len(cases), out.stdout[-3000:] + out.stderr[-3000:]
    return results


@pytest.fixture(scope="module")
def answers(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, dict[str, Any]]]:
    """Each answer case's sample request through the handler its entry point installs, under both
    environments: case -> scope -> serve_once's result."""
    folder = tmp_path_factory.mktemp("answers")
    cases = []
    for case in sorted(ANSWER_CASES):
        recipe = resolve_recipe(recipe_name=ANSWER_CASES[case][0])
        entry = recipe["training"]["entry_point"]
        template = recipe["training"]["hyperparameters"].get("prompt_template")
        model_dir = build_served_model(entry, folder / case, prompt_template=template)
        cases.append({"model_dir": str(model_dir), "body": json.dumps(recipe["serving"]["sample_request"])})
    found: dict[str, dict[str, dict[str, Any]]] = {case: {} for case in sorted(ANSWER_CASES)}
    for scope, python in (("training", Path(sys.executable)), ("inference", SERVING_PYTHON)):
        assert python.exists(), f"{python} is missing: run scripts/serving_venv.sh (scripts/test.sh runs it)"
        for case, result in zip(sorted(ANSWER_CASES), serve_all(python, cases, folder), strict=True):
            found[case][scope] = result
    return found


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(ANSWER_CASES))
def test_sample_request_gets_the_expected_answer_under_every_containers_transformers(case, answers):
    from pipeline_lambdas.smoke_test import check_answer

    recipe = resolve_recipe(recipe_name=ANSWER_CASES[case][0])
    wanted = {"inference": recipe["container"]["inference"]["transformers_version"]}
    for scope in ("training", "inference"):
        result = answers[case][scope]
        assert "error" not in result, (scope, result.get("error"))
        # Each environment must be the one a container runs, or this tests the wrong stack. Serving: the
        # recipe's inference container. Training: this environment, the training stack the recipes' main
        # container pins (the seed-faithful recipes train on an older one, which never serves).
        expected = wanted[scope] if scope == "inference" else TRAINING_STACK
        assert result["transformers"] == expected, (scope, result["transformers"], expected)
        check_answer(result["answer"], recipe["serving"]["expected_keys"])


#: Recipes whose run serves its own model on the vllm kind (an adapter recipe's is served on the shared base).
OPENAI_RECIPES = [
    n
    for n in RECIPES
    if serving_kind_of(recipe := resolve_recipe(recipe_name=n)).speaks_openai and not recipe["adapter"]
]


@pytest.mark.slow
@pytest.mark.parametrize("name", OPENAI_RECIPES)
def test_sample_request_gets_an_openai_answer_from_the_vllm_stand_in(name, tmp_path):
    """A recipe served by the vllm kind: its sample request, through the stand-in for the vLLM container, over
    the model as run_clm.py saves it (weights, tokenizer and the chat template of the recipe's prompt)."""
    import inference_clm
    from pipeline_lambdas.smoke_test import check_answer, check_openai_answer
    from transformers import AutoTokenizer

    from hfpipe.core.recipe import serving_fit
    from hfpipe.local.serving.openai_endpoint import OpenAIEndpoint

    recipe = resolve_recipe(recipe_name=name)
    template = (
        recipe["training"]["hyperparameters"].get("prompt_template") or inference_clm.DEFAULT_PROMPT_TEMPLATE
    )
    model_dir = build_served_model("run_clm.py", tmp_path / "model", prompt_template=template)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    tokenizer.chat_template = inference_clm.chat_template(template)
    tokenizer.save_pretrained(model_dir)
    environment = {**serving_fit.server_environment(recipe, gpus=1), **recipe["serving"]["environment"]}
    with OpenAIEndpoint(model_dir, environment=environment) as endpoint:
        answer = endpoint.predict(recipe["serving"]["sample_request"])
    check_openai_answer(answer, recipe["serving"]["sample_request"])
    check_answer(answer, recipe["serving"]["expected_keys"])
    assert answer["model"] == name  # SM_VLLM_SERVED_MODEL_NAME, as the Plan writes it


@pytest.mark.parametrize(
    ("name", "mode"), [("bert-large-squad-smddp", "dp"), ("roberta-large-mnli-smp", "mp")]
)
def test_seed_faithful_recipes_put_the_trainer_in_its_sagemaker_mode(name, mode, tmp_path, monkeypatch):
    """In a container that ships smdistributed, the toolkit's environment for these recipes turns on the
    Trainer's SageMaker data / model parallel mode, and the classification script adds no FSDP on top."""
    from sagemaker_training import params

    # Imported before the patch below: transformers' trainer modules check for smdistributed at import time,
    # and must keep seeing this machine (which has none) in the tests that follow.
    from transformers import Trainer, TrainingArguments  # noqa: F401
    from transformers.utils import import_utils

    recipe = resolve_recipe(recipe_name=name)
    t = recipe["training"]
    sent = encode_hyperparameters(t["hyperparameters"])
    sent.update(encode_hyperparameters(distribution_hyperparameters(t["distribution"], t["instance_type"])))
    decoded = {k: json.loads(v) for k, v in sent.items()}
    # sagemaker_training.environment: sagemaker_* keys the toolkit does not use itself are the framework
    # parameters (SM_FRAMEWORK_PARAMS); every other hyperparameter is exported as SM_HP_<NAME>.
    framework = {
        k: v
        for k, v in decoded.items()
        if k.startswith("sagemaker_") and k not in params.SAGEMAKER_HYPERPARAMETERS
    }
    monkeypatch.setenv("SM_FRAMEWORK_PARAMS", json.dumps(framework))
    if "mp_parameters" in decoded:
        monkeypatch.setenv("SM_HP_MP_PARAMETERS", json.dumps(decoded["mp_parameters"]))
    monkeypatch.setattr(import_utils, "_smdistributed_available", True)  # what those containers ship
    assert import_utils.is_sagemaker_dp_enabled() is (mode == "dp")
    assert import_utils.is_sagemaker_mp_enabled() is (mode == "mp")
    if mode == "mp":
        import run_classification as rc

        assert decoded["mp_parameters"] == {
            "partitions": 4, "microbatches": 4, "placement_strategy": "spread", "pipeline": "interleaved",
            "optimize": "speed", "ddp": True,
        }  # fmt: skip
        assert framework["sagemaker_mpi_num_of_processes_per_host"] == 8
        monkeypatch.setattr(rc, "smdistributed_available", lambda: True)
        mp_json = json.dumps(decoded["mp_parameters"])
        assert rc.default_sharding("", "auto", mp_json, world_size=8) == ""  # the Trainer's own smp path
