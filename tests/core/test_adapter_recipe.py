"""A recipe that keeps its LoRA adapter unmerged (``recipe.adapter``): the field's rules, what the plan and
the training job get, what the registered version records, and the tiny base local mode trains it on.
Pure: plans built with the local quota table, no AWS, no synth."""

from __future__ import annotations

import json
from typing import Any

import pytest
from plan_config import dev_config

from hfpipe import kinds
from hfpipe.core.adapters import adapter_recipe
from hfpipe.core.promotion import registry
from hfpipe.core.recipe.recipes import load_recipe
from hfpipe.core.recipe.schema import RecipeError
from hfpipe.core.run.plan import build_plan
from hfpipe.local.engine.quotas import QuotaTable, default_quotas

QUOTAS = QuotaTable(default_quotas()).client("eu-west-1")
BASE = "hfpipe-fixtures/tiny-llama"


@pytest.fixture(scope="module")
def config():
    return dev_config()


def plan_of(config, **overrides: Any):
    return build_plan({"recipe_name": "tiny-adapter", "overrides": overrides}, "adapter-1", config, QUOTAS)


def test_an_adapter_recipe_plans_an_unmerged_adapter_named_with_its_base_and_no_endpoint(config) -> None:
    plan = plan_of(config)
    assert plan.adapter_base_model == BASE
    assert plan.deploy is False  # served on the shared base, not on an endpoint of its own
    hps = plan.training_job_request["HyperParameters"]
    assert json.loads(hps["merge_adapter"]) is False
    assert json.loads(hps["adapter_base_model"]) == BASE
    merged = build_plan({"recipe_name": "tiny-lora"}, "merged-1", config, QUOTAS)
    assert merged.adapter_base_model is None
    assert "adapter_base_model" not in merged.training_job_request["HyperParameters"]


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            {"training.hyperparameters.merge_adapter": True},
            "recipe.training.hyperparameters.merge_adapter: True is not accepted with recipe.adapter",
        ),
        (
            {"training.hyperparameters.model_name_or_path": "Qwen/Qwen2-0.5B"},
            "recipe.adapter.base_model: 'hfpipe-fixtures/tiny-llama' is not the model trained on "
            "(training.hyperparameters.model_name_or_path 'Qwen/Qwen2-0.5B'); accepted: 'Qwen/Qwen2-0.5B'",
        ),
        (
            {
                "serving.kind": "hf-inference",
                "container.inference": {
                    "transformers_version": "4.51.3",
                    "pytorch_version": "2.6.0",
                    "py_version": "py312",
                },
            },
            "recipe.serving.kind: 'hf-inference' serves no LoRA adapter next to a base; with recipe.adapter "
            "accepted: vllm",
        ),
        ({"adapter.base_model": "not a hub id"}, "recipe.adapter.base_model"),
        ({"adapter.base_model": "org/name\n"}, "recipe.adapter.base_model"),
        ({"adapter.rank": 4}, "recipe.adapter"),
    ],
)
def test_an_adapter_recipe_that_cannot_hold_is_refused_in_one_line_naming_the_field(
    config, overrides: dict[str, Any], message: str
) -> None:
    with pytest.raises(RecipeError) as err:
        plan_of(config, **overrides)
    assert message in str(err.value)
    assert "\n" not in str(err.value).strip()


def test_an_adapter_needs_a_script_that_keeps_it_unmerged() -> None:
    recipe = load_recipe("tiny-adapter")
    recipe["training"] = {**recipe["training"], "entry_point": "run_qa.py"}
    with pytest.raises(
        RecipeError, match=r"^recipe\.adapter: training\.entry_point 'run_qa.py' does not take "
    ):
        adapter_recipe.check(recipe)


def test_the_registered_version_records_the_base_and_reads_it_back(config) -> None:
    url = "s3://hfpipe-dev-artifacts/models/j/output/model.tar.gz"
    properties = registry.metadata(plan_of(config), cost_usd=0.01, model_data_url=url)
    assert properties["adapter_base_model"] == BASE
    assert registry.adapter_base({"CustomerMetadataProperties": properties}) == BASE
    merged = build_plan({"recipe_name": "tiny-lora"}, "merged-1", config, QUOTAS)
    assert (
        registry.adapter_base(
            {"CustomerMetadataProperties": registry.metadata(merged, cost_usd=None, model_data_url=url)}
        )
        is None
    )


def test_local_mode_trains_an_adapter_recipe_on_a_family_vllm_serves_lora_on() -> None:
    """BLOOM's fused query_key_value picks the tiny BLOOM; any other target modules the tiny Llama."""
    summarization = kinds.task_kind("summarization")
    adapter = load_recipe("tiny-adapter")["training"]["hyperparameters"]
    assert summarization.fixture(adapter).family == "llama"
    assert summarization.fixture(load_recipe("tiny-lora")["training"]["hyperparameters"]).family == "bloom"
    assert kinds.tiny_model("llama").options["model_class"] == "LlamaForCausalLM"


def test_hfpipe_models_shows_the_base_an_adapter_version_needs() -> None:
    from rich.console import Console

    from hfpipe.cli.promotion.models import VersionInfo, as_json, table

    def version(number: int, base: str | None) -> VersionInfo:
        return VersionInfo(
            "g", "tiny-adapter", number, f"arn/{number}", "Approved", None, "e", adapter_base=base
        )

    console = Console(width=200, record=True)
    console.print(table("dev", [version(1, BASE), version(2, None)]))
    lines = console.export_text().splitlines()
    assert "adapter of" in lines[2]
    assert BASE in next(line for line in lines if "tiny-adapter/1" in line)
    assert as_json(version(1, BASE))["adapter_base"] == BASE
    console = Console(width=200, record=True)
    console.print(table("dev", [version(2, None)]))
    assert "adapter of" not in console.export_text()  # no column where no version is an adapter
