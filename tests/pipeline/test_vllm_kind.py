"""The vllm serving kind: its image, its server settings and the fit check, its request contract and the
smoke test's check of an OpenAI answer."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pipeline_lambdas.smoke_test import SmokeTestFailed, check_openai_answer, smoke_test
from plan_config import dev_config

from hfpipe import kinds
from hfpipe.core.recipe import serving_fit
from hfpipe.core.recipe.recipes import resolve_recipe
from hfpipe.core.recipe.schema import RecipeError
from hfpipe.core.run.plan import build_plan
from hfpipe.local.engine.quotas import QuotaTable, default_quotas
from stacks.image_catalog import build_catalog, dlc_registries, sdk_table

BLOOMZ = "bloomz-7b1-lora-samsum"
REGION = "eu-west-1"


@pytest.fixture(scope="module")
def config():
    return dev_config(image_catalog=build_catalog(REGION))


def plan_of(config, **overrides: Any):
    event = {"recipe_name": BLOOMZ, "overrides": overrides}
    return build_plan(event, "exec-1", config, QuotaTable(default_quotas()).client(REGION))


def test_bloomz_serves_on_the_vllm_image_with_the_server_settings_as_sm_vllm_variables(config) -> None:
    plan = plan_of(config)
    assert plan.serving_kind == "vllm"
    registry, _, rest = plan.inference_image_uri.partition("/")
    # The DLC account of the region, as the SDK's own Hugging Face inference entries name it.
    hf = sdk_table()["inference"]["versions"]["4.51.3"]["pytorch2.6.0"]["registries"][REGION]
    assert registry == f"{hf}.dkr.ecr.{REGION}.amazonaws.com"
    assert rest == "vllm:0.14.0-gpu-py312-cu129-ubuntu22.04-sagemaker"
    assert plan.serving_environment == {
        "SM_VLLM_TENSOR_PARALLEL_SIZE": "1",  # ml.g5.4xlarge: one A10G
        "SM_VLLM_MAX_MODEL_LEN": "2048",
        "SM_VLLM_DTYPE": "bfloat16",
        "SM_VLLM_GPU_MEMORY_UTILIZATION": "0.9",
        "SM_VLLM_SERVED_MODEL_NAME": BLOOMZ,
    }


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            {"serving.sample_request.stream": True},
            r"^recipe\.serving\.sample_request\.stream: true is not accepted",
        ),
        (
            {"serving.sample_request": {"inputs": "Amanda: hi", "parameters": {"max_new_tokens": 8}}},
            r"^recipe\.serving\.sample_request: vLLM 0\.14\.0 would answer 400: Cannot find suitable handler",
        ),
        (
            {"serving.sample_request.max_tokens": 2000},
            r"^recipe\.serving\.sample_request: .* context is 2048 tokens",
        ),
        # the recipe's own environment is the model's: a shorter context there holds the sample too
        (
            {"serving.environment": {"SM_VLLM_MAX_MODEL_LEN": "100"}},
            r"^recipe\.serving\.sample_request: .* asks for 64 more; the model's context is 100",
        ),
        ({"serving.sample_request.model": "other"}, r"would answer 404: The model `other` does not exist"),
    ],
    ids=["stream", "toolkit body", "max_tokens", "environment", "model"],
)
def test_plan_refuses_a_sample_request_the_endpoint_would_refuse(config, overrides, message) -> None:
    with pytest.raises(RecipeError, match=message):
        plan_of(config, **overrides)


def test_tensor_parallel_spans_every_gpu_of_the_instance(config) -> None:
    plan = plan_of(config, **{"serving.instance_type": "ml.g5.12xlarge"})
    assert plan.serving_environment["SM_VLLM_TENSOR_PARALLEL_SIZE"] == "4"


def test_the_recipes_own_environment_wins_over_the_kinds_settings(config) -> None:
    plan = plan_of(
        config, **{"serving.environment": {"SM_VLLM_ENFORCE_EAGER": "true", "SM_VLLM_DTYPE": "float16"}}
    )
    assert plan.serving_environment["SM_VLLM_ENFORCE_EAGER"] == "true"
    assert plan.serving_environment["SM_VLLM_DTYPE"] == "float16"


def test_the_fit_on_paper_is_the_one_docs_lora_md_works_through() -> None:
    figures = serving_fit.KNOWN_MODELS["bigscience/bloomz-7b1"]
    f = serving_fit.fit(figures, serving_fit.DEFAULT_SERVER, gpus=1, memory_mib=24_576)
    assert figures.kv_bytes_per_token(2) == 480 * 1024  # 480 KiB per token
    assert round(f.weights_mib / 1024, 2) == 13.17  # GiB of bf16 weights
    assert round(f.share_mib / 1024, 2) == 20.24  # 0.9 of the usable 22.49 GiB
    assert 12_000 <= f.max_tokens <= 12_300  # "~12,200 tokens"
    assert int(f.concurrent_sequences(2048)) == 5


def test_a_max_model_len_the_kv_cache_cannot_hold_is_refused_with_the_longest_that_fits(config) -> None:
    with pytest.raises(RecipeError) as err:
        plan_of(config, **{"serving.server.max_model_len": 16384})
    message = str(err.value)
    assert message.startswith("recipe.serving.server.max_model_len: 16384 tokens do not fit")
    most = int(message.rsplit("at most ", 1)[1])
    assert 12_000 <= most <= 12_300
    # ... and that length itself is accepted.
    assert plan_of(config, **{"serving.server.max_model_len": most}).serving_environment[
        "SM_VLLM_MAX_MODEL_LEN"
    ] == str(most)


def test_weights_that_do_not_fit_the_gpu_share_are_refused_naming_the_instance(config) -> None:
    with pytest.raises(
        RecipeError, match=r"^recipe.serving.instance_type: ml.g4dn.xlarge \(1 x 16384 MiB\) cannot hold"
    ):
        plan_of(config, **{"serving.instance_type": "ml.g4dn.xlarge", "serving.server.dtype": "float16"})
    # float32 doubles the weights: 26 GiB on a 24 GiB A10G.
    with pytest.raises(RecipeError, match=r"^recipe.serving.instance_type: ml.g5.4xlarge"):
        plan_of(config, **{"serving.server.dtype": "float32"})


def test_an_instance_without_a_gpu_is_refused(config) -> None:
    # The image has no CPU build: refused when the image is resolved, before the fit check.
    with pytest.raises(
        RecipeError,
        match=r"^recipe.container.inference: 0.14.0 has no cpu image for ml.m5.xlarge; accepted: an instance type of its images. processors \[.gpu.\]",
    ):
        plan_of(config, **{"serving.instance_type": "ml.m5.xlarge"})
    # An instance the SDK's GPU table does not list is refused by the fit check, naming the field.
    with pytest.raises(RecipeError, match=r"^recipe.serving.instance_type: 'ml.g9.xlarge' has no GPU"):
        serving_fit.gpus_of(config.image_catalog, "ml.g9.xlarge")


def test_a_model_the_fit_check_does_not_know_can_state_its_figures(config) -> None:
    tiny = {"parameters": 1_000_000, "layers": 2, "kv_heads": 2, "head_dim": 8}
    stated = {"serving.server.model": tiny, "training.hyperparameters.model_name_or_path": "my/own-model"}
    assert plan_of(config, **stated).serving_environment["SM_VLLM_MAX_MODEL_LEN"] == "2048"
    huge = {**tiny, "parameters": 20_000_000_000}
    with pytest.raises(RecipeError, match="cannot hold the model's weights"):
        plan_of(config, **{**stated, "serving.server.model": huge})


def test_vllm_serves_only_a_merged_model(config) -> None:
    with pytest.raises(RecipeError) as err:
        plan_of(config, **{"training.hyperparameters.merge_adapter": False})
    assert str(err.value).startswith("recipe.serving.kind: vllm serves the merged model from /opt/ml/model")


# --- hf-inference's fit rule: the known model's 16-bit weights on the instance's GPUs ------------------------

HF_BACK = {
    "serving.kind": "hf-inference",
    "container.inference": {
        "transformers_version": "4.51.3",
        "pytorch_version": "2.6.0",
        "py_version": "py312",
    },
    "serving.server": {},
}


def test_every_serving_kind_names_a_fit_rule_of_the_one_table() -> None:
    for kind in kinds.SERVING_KINDS.values():
        assert kind.fit_rule in serving_fit.FIT_RULES, kind.name
    assert kinds.serving_kind("hf-inference").fit_rule == "weights-in-gpu-memory"
    assert kinds.serving_kind("vllm").fit_rule == "vllm-kv-cache"
    assert serving_fit.FIT_RULES["vllm-kv-cache"].plan_environment is serving_fit.vllm_environment


def test_hf_inference_refuses_an_instance_whose_gpus_cannot_hold_the_weights(config, monkeypatch) -> None:
    # 20e9 parameters in 16-bit: 40e9 bytes, 38,147 MiB. An A10G: 24,576 MiB of which 23,028 reach programs,
    # less 1,536 MiB of activations: 21,492 MiB per GPU; one on ml.g5.4xlarge, four on ml.g5.12xlarge.
    big = serving_fit.ModelFigures(20_000_000_000, 40, 48, 128)
    monkeypatch.setitem(serving_fit.KNOWN_MODELS, "bigscience/bloomz-7b1", big)
    with pytest.raises(RecipeError) as err:
        plan_of(config, **HF_BACK)
    assert str(err.value).startswith(
        "recipe.serving.instance_type: ml.g5.4xlarge (1 x 24,576 MiB) cannot hold bigscience/bloomz-7b1's "
        "weights in 16-bit (38,147 MiB) and 1,536 MiB of activations per GPU (21,492 MiB usable)"
    )
    four = resolve_recipe(
        recipe_name=BLOOMZ, overrides={**HF_BACK, "serving.instance_type": "ml.g5.12xlarge"}
    )
    assert serving_fit.kind_environment(four, config.image_catalog, REGION) == {}


def test_hf_inference_serves_the_real_bloomz_on_one_a10g_and_an_unknown_model_unchecked(config) -> None:
    # 7,069,016,064 parameters: 13,484 MiB in 16-bit, within 21,492 MiB; no environment of its own.
    assert plan_of(config, **HF_BACK).serving_environment == {}
    unknown = {**HF_BACK, "training.hyperparameters.model_name_or_path": "my/own-20b"}
    assert plan_of(config, **unknown).serving_kind == "hf-inference"
    # hf-inference loads an adapter over its base: no merge needed, unlike vllm (needs_merged_model).
    assert plan_of(config, **HF_BACK, **{"training.hyperparameters.merge_adapter": False}).deploy


# --- the fit check: every override applied, every rule vLLM applies at start ---------------------------------


def _environment(**variables: str) -> dict[str, Any]:
    return {"serving.environment": variables}


def fit_environment(config, **overrides: Any) -> dict[str, str]:
    """The Plan's fit check alone (for instance types the local quota table does not list)."""
    recipe = resolve_recipe(recipe_name=BLOOMZ, overrides=overrides)
    return serving_fit.vllm_environment(recipe, config.image_catalog, REGION)


@pytest.mark.parametrize(
    ("variables", "expected"),
    [
        (
            {"SM_VLLM_MAX_MODEL_LEN": "16384"},
            r"^recipe.serving.environment.SM_VLLM_MAX_MODEL_LEN: 16384 tokens do not fit the KV cache",
        ),
        (
            {"SM_VLLM_GPU_MEMORY_UTILIZATION": "0.5"},
            r"^recipe.serving.instance_type: ml.g5.4xlarge .* cannot hold",
        ),
        ({"SM_VLLM_DTYPE": "float"}, r"^recipe.serving.instance_type: ml.g5.4xlarge .* in float32"),
        (
            {"SM_VLLM_MAX_MODEL_LEN": "lots"},
            r"^recipe.serving.environment.SM_VLLM_MAX_MODEL_LEN: 'lots' is not",
        ),
        ({"SM_VLLM_DTYPE": "auto"}, r"^recipe.serving.environment.SM_VLLM_DTYPE: 'auto' is not accepted"),
    ],
    ids=["max-model-len", "memory-share", "dtype", "not-a-number", "auto"],
)
def test_the_fit_check_holds_the_environments_sm_vllm_values_too(config, variables, expected) -> None:
    """serving.environment is written over the kind's settings, so the check is of its values."""
    with pytest.raises(RecipeError, match=expected):
        plan_of(config, **_environment(**variables))


def test_bfloat16_is_refused_on_a_gpu_below_compute_capability_8(config) -> None:
    four_t4 = {"serving.instance_type": "ml.g4dn.12xlarge"}  # 4 x 16 GiB: the weights fit
    with pytest.raises(
        RecipeError,
        match=r"^recipe.serving.server.dtype: bfloat16 needs a GPU of compute capability 8.0 or more; "
        r"ml.g4dn.12xlarge's NVIDIA T4 has 7.5; accepted: float16",
    ):
        fit_environment(config, **four_t4)
    with pytest.raises(
        RecipeError, match=r"^recipe.serving.environment.SM_VLLM_DTYPE: bfloat16 .* V100 has 7.0"
    ):
        fit_environment(
            config,
            **{"serving.instance_type": "ml.p3.8xlarge", "serving.server.dtype": "float16"},
            **_environment(SM_VLLM_DTYPE="bfloat16"),
        )
    half = fit_environment(config, **four_t4, **{"serving.server.dtype": "float16"})
    assert half["SM_VLLM_TENSOR_PARALLEL_SIZE"] == "4"


def test_tensor_parallel_is_held_to_the_gpu_count_and_the_models_heads(config) -> None:
    with pytest.raises(
        RecipeError,
        match=r"^recipe.serving.environment.SM_VLLM_TENSOR_PARALLEL_SIZE: tensor parallel 2 x pipeline "
        r"parallel 1 workers need as many GPUs; ml.g5.4xlarge has 1",
    ):
        plan_of(config, **_environment(SM_VLLM_TENSOR_PARALLEL_SIZE="2"))
    four = {"serving.instance_type": "ml.g5.12xlarge"}
    with pytest.raises(RecipeError, match=r"PIPELINE_PARALLEL_SIZE: tensor parallel 4 x pipeline parallel 2"):
        plan_of(config, **four, **_environment(SM_VLLM_PIPELINE_PARALLEL_SIZE="2"))
    with pytest.raises(
        RecipeError, match=r"size 3 and the model's 32 attention heads do not divide .* among \[1, 2, 4\]$"
    ):
        plan_of(config, **four, **_environment(SM_VLLM_TENSOR_PARALLEL_SIZE="3"))
    # Two of the four GPUs: the weights and KV cache split two ways, not four.
    two = plan_of(config, **four, **_environment(SM_VLLM_TENSOR_PARALLEL_SIZE="2"))
    assert two.serving_environment["SM_VLLM_TENSOR_PARALLEL_SIZE"] == "2"
    figures = serving_fit.KNOWN_MODELS["bigscience/bloomz-7b1"]
    settings = serving_fit.DEFAULT_SERVER
    assert (
        serving_fit.fit(figures, settings, 2, 24_576).max_tokens
        < serving_fit.fit(figures, settings, 4, 24_576).max_tokens
    )


def test_a_model_whose_figures_are_unknown_is_refused_rather_than_passed(config) -> None:
    with pytest.raises(
        RecipeError, match=r"^recipe.serving.server.model: the fit check does not know the model my/own"
    ):
        plan_of(config, **{"training.hyperparameters.model_name_or_path": "my/own-model"})


@pytest.mark.parametrize(
    "instance_type", ["ml.g6.xlarge", "ml.g6e.2xlarge", "ml.g6.12xlarge", "ml.p5e.48xlarge"]
)
def test_current_gpu_families_the_sdks_table_lacks_are_gpus(config, instance_type) -> None:
    assert instance_type not in config.image_catalog[serving_fit.GPUS_KEY]  # the SDK's table lacks them
    environment = fit_environment(config, **{"serving.instance_type": instance_type})
    count, _ = serving_fit.gpus_of(config.image_catalog, instance_type)
    assert (
        environment["SM_VLLM_TENSOR_PARALLEL_SIZE"] == str(count)
        and environment["SM_VLLM_DTYPE"] == "bfloat16"
    )


def test_an_inferentia_instance_is_called_one_not_a_cpu(config) -> None:
    from hfpipe.core.run.plan import processor_for

    assert (processor_for("ml.inf2.xlarge"), processor_for("ml.trn1.2xlarge")) == ("inf", "trn")
    with pytest.raises(
        RecipeError, match=r"^recipe.container.inference: 0.14.0 has no inf image for ml.inf2.xlarge"
    ):
        plan_of(config, **{"serving.instance_type": "ml.inf2.xlarge"})
    with pytest.raises(
        RecipeError, match=r"'ml.inf2.xlarge' is an AWS Inferentia \(Neuron\) instance, not a GPU one"
    ):
        serving_fit.gpus_of(config.image_catalog, "ml.inf2.xlarge", REGION)
    with pytest.raises(
        RecipeError,
        match=r"^recipe.training.instance_type: 'ml.trn1.32xlarge' is an AWS Trainium \(Neuron\) instance; "
        "distribution",
    ):
        plan_of(
            config,
            **{
                "training.instance_type": "ml.trn1.32xlarge",
                "training.distribution": {"torch_distributed": {"enabled": True}},
            },
        )


def test_the_gpu_tables_errors_name_the_region(config) -> None:
    from dataclasses import replace

    no_table = replace(
        config, region="xx-south-9", image_catalog={**config.image_catalog, serving_fit.GPUS_KEY: {}}
    )
    with pytest.raises(
        RecipeError,
        match=r"^recipe.serving.instance_type: 'ml.g5.4xlarge' has no GPU figures for region 'xx-south-9': "
        "the SageMaker SDK's instance_gpu_info table lists none there",
    ):
        plan_of(no_table)
    with pytest.raises(
        RecipeError, match=r"'ml.g9.xlarge' has no GPU in the SageMaker SDK's .* for region 'eu-west-1'"
    ):
        serving_fit.gpus_of(config.image_catalog, "ml.g9.xlarge", REGION)


def test_container_fields_and_server_settings_belong_to_their_kind() -> None:
    hf = {"transformers_version": "4.51.3", "pytorch_version": "2.6.0", "py_version": "py312"}
    with pytest.raises(RecipeError) as err:
        resolve_recipe(recipe_name=BLOOMZ, overrides={"container.inference.transformers_version": "4.51.3"})
    assert str(err.value).startswith(
        "recipe.container.inference.transformers_version: not a field of the vllm"
    )
    with pytest.raises(
        RecipeError,
        match=r"^recipe.container.inference: the vllm serving kind's image needs \['vllm_version'\]",
    ):
        resolve_recipe(recipe_name=BLOOMZ, overrides={"container.inference": {}})
    # Back to the toolkit handler: the HF DLC versions, and no vllm server settings.
    back = {"serving.kind": "hf-inference", "container.inference": hf, "serving.server": {}}
    assert resolve_recipe(recipe_name=BLOOMZ, overrides=back)["serving"]["kind"] == "hf-inference"
    with pytest.raises(
        RecipeError,
        match=r"^recipe.serving.server: server settings are taken by the serving kinds \['vllm'\]; serving kind 'hf-inference'",
    ):
        resolve_recipe(recipe_name=BLOOMZ, overrides={**back, "serving.server": {"max_model_len": 1024}})
    with pytest.raises(
        RecipeError, match=r"^recipe.container.inference.vllm_version: not a field of the hf-inference"
    ):
        resolve_recipe(
            recipe_name=BLOOMZ, overrides={**back, "container.inference": {**hf, "vllm_version": "0.14.0"}}
        )


def test_the_vllm_image_comes_from_the_dlc_accounts_of_every_region_the_sdk_lists() -> None:
    accounts = dlc_registries()
    assert len(accounts) >= 30 and REGION in accounts
    catalog = build_catalog("us-east-1")
    (uri,) = catalog["vllm"]["0.14.0"].values()
    assert uri.startswith(f"{accounts['us-east-1']}.dkr.ecr.us-east-1.amazonaws.com/vllm:")
    assert catalog[serving_fit.GPUS_KEY]["ml.g5.4xlarge"] == [1, 24_576]


# --- the request contract ---------------------------------------------------------------------------------


def _parse(body: Any) -> Any:
    contract = kinds.serving_kind("vllm").request_contract
    assert contract is not None
    return contract(body, None)


def test_openai_requests_are_checked_field_by_field() -> None:
    """The vllm kind's contract (hfpipe/kinds/openai_contract.py); tests/kinds/test_request_contract_table.py
    holds its table against invoke, the stand-in and Plan."""
    checked = _parse({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 5, "stream": True})
    assert (checked.kind, checked.messages, checked.sampling.max_tokens, checked.stream) == (
        "chat",
        [{"role": "user", "content": "hi"}],
        5,
        True,
    )
    completion = _parse({"prompt": ["a", "b"], "temperature": 0})
    assert (completion.kind, completion.prompts, completion.sampling.greedy) == (
        "completion",
        ["a", "b"],
        True,
    )
    refused = {
        "role": ({"messages": [{"role": "robot", "content": "x"}]}, "messages[0].role: 'robot'"),
        "unknown": ({"prompt": "a", "best_of": 3}, "best_of: not a field of vLLM 0.14.0's CompletionRequest"),
        "max_tokens": ({"prompt": "a", "max_tokens": 0}, "max_tokens must be at least 1, got 0."),
        "stream": ({"prompt": "a", "stream": "yes"}, "stream: 'yes' is not accepted"),
    }
    for name, (body, message) in refused.items():
        with pytest.raises(ValueError) as err:
            _parse(body)
        assert message in str(err.value), name


# --- the smoke test speaks the kind's contract -------------------------------------------------------------

CHAT = {"messages": [{"role": "user", "content": "Amanda: hi"}], "max_tokens": 8}
ANSWER = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "created": 1,
    "model": BLOOMZ,
    "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "Amanda greets."}, "finish_reason": "stop"}
    ],
    "usage": {"prompt_tokens": 9, "completion_tokens": 3, "total_tokens": 12},
}


def test_the_smoke_test_checks_an_openai_answer_shape() -> None:
    check_openai_answer(ANSWER, CHAT)
    completion = {
        "object": "text_completion",
        "choices": [{"index": 0, "text": "x", "finish_reason": "length"}],
    }
    check_openai_answer(completion, {"prompt": "a"})
    bad = {
        "toolkit shape": [{"generated_text": "x"}],
        "completion for a chat": completion,
        "content not text": {**ANSWER, "choices": [{"message": {"content": None}, "finish_reason": "stop"}]},
        "no finish reason": {**ANSWER, "choices": [{"message": {"content": "x"}}]},
        "no choices": {**ANSWER, "choices": []},
    }
    for name, answer in bad.items():
        with pytest.raises(SmokeTestFailed):
            check_openai_answer(answer, CHAT)
            pytest.fail(name)


def test_the_smoke_test_of_a_vllm_plan_refuses_the_toolkit_answer(config) -> None:
    plan = plan_of(config)

    class Runtime:
        def __init__(self, answer: Any) -> None:
            self.answer = answer

        def invoke_endpoint(self, **kwargs: Any) -> dict[str, Any]:
            assert json.loads(kwargs["Body"]) == plan.sample_request
            return {"Body": type("B", (), {"read": lambda _self: json.dumps(self.answer).encode()})()}

    assert smoke_test(Runtime({**ANSWER, "usage": ANSWER["usage"]}), plan)["ok"]
    with pytest.raises(SmokeTestFailed, match=r"is not a chat\.completion object"):
        smoke_test(Runtime([{"generated_text": "Amanda greets."}]), plan)
