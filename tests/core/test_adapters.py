"""The foundations of adapters on a shared base: cdk.json's ``shared_base`` (through stacks/config.py), the
refusals of adapter components, the fit of base + LoRA slots + KV cache, and the cost split per adapter
(docs/adapters.md). Pure functions: no AWS, no synth."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from hfpipe.core import prices
from hfpipe.core.adapters import adapter_cost, adapter_fit, adapter_rules
from hfpipe.core.adapters.adapter_rules import Component
from hfpipe.core.adapters.shared_base import SharedBase
from hfpipe.core.recipe import serving_fit
from hfpipe.core.recipe.schema import RecipeError
from stacks.config import ConfigError, parse_environment

DEV = {"region": "eu-west-1"}
PATH = "hfpipe:environments.dev.shared_base"
#: An 8B decoder as its config.json states it (32 layers, hidden 4096, 8 KV heads of 128, MLP 14336): one
#: layer's linear modules q 4096->4096, k and v 4096->1024, o 4096->4096, gate and up 4096->14336, down
#: 14336->4096, so lora_width = 8192 + 5120 + 5120 + 8192 + 3 x 18432 = 81920.
EIGHT_B = {"parameters": 8_030_261_248, "layers": 32, "kv_heads": 8, "head_dim": 128, "lora_width": 81_920}
#: ml.g5.4xlarge in the SageMaker SDK's instance_gpu_info table: one A10G of 24,576 MiB.
CATALOG = {serving_fit.GPUS_KEY: {"ml.g5.4xlarge": [1, 24_576]}}


def shared(entry):
    return parse_environment("dev", {**DEV, "shared_base": entry}).shared_base


def test_an_environment_has_no_shared_base_unless_cdk_json_declares_one():
    assert parse_environment("dev", DEV).shared_base is None
    base = shared({"base_model": "my-org/base-8b", "instance_type": "ml.g5.4xlarge", "max_adapters": 10})
    assert base == SharedBase("my-org/base-8b", "ml.g5.4xlarge", max_adapters=10)
    assert (base.copies, base.max_lora_rank, base.max_model_len, base.instances) == (1, 16, 2048, 1)
    full = shared(
        {
            "base_model": "my-org/base-8b",
            "instance_type": "ml.g5.4xlarge",
            "max_adapters": 4,
            "copies": 2,
            "max_lora_rank": 64,
            "max_model_len": 4096,
            "model": EIGHT_B,
        }
    )
    assert full.stated_figures() == EIGHT_B and full.instances == 2
    assert SharedBase.from_json(full.to_json()) == full
    # The entry the Pipeline stack publishes (SSM shared-base) reads back as the same base, figures or none.
    for one in (base, full):
        assert shared(one.entry()) == one
    assert "model" not in base.entry() and base.entry()["max_model_len"] == 2048


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ("bloomz", rf"^{PATH}: 'bloomz' is not accepted; accepted: an object with keys base_model, "),
        ({"instance_type": "ml.g5.4xlarge", "max_adapters": 2}, rf"^{PATH}.base_model: required; accepted: "),
        ({"base_model": "a/b", "max_adapters": 2}, rf"^{PATH}.instance_type: required; "),
        ({"base_model": "a/b", "instance_type": "ml.g5.4xlarge"}, rf"^{PATH}.max_adapters: required; "),
        (
            {"base_model": "a/b", "instance_type": "g5.4xlarge", "max_adapters": 2},
            rf"^{PATH}.instance_type: 'g5.4xlarge' is not accepted; accepted: the endpoint's instance type",
        ),
        (
            {"base_model": "not a hub id", "instance_type": "ml.g5.4xlarge", "max_adapters": 2},
            rf"^{PATH}.base_model: 'not a hub id' is not accepted; accepted: the Hugging Face Hub id",
        ),
        (
            {"base_model": "a/b", "instance_type": "ml.g5.4xlarge", "max_adapters": 0},
            rf"^{PATH}.max_adapters: 0 is not accepted; accepted: a whole number >= 1",
        ),
        (
            {"base_model": "a/b", "instance_type": "ml.g5.4xlarge", "max_adapters": True},
            rf"^{PATH}.max_adapters: True is not accepted",
        ),
        (
            {"base_model": "a/b", "instance_type": "ml.g5.4xlarge", "max_adapters": 2, "copies": 101},
            rf"^{PATH}.copies: 101 is not accepted; accepted: a whole number of base copies from 1 to 100",
        ),
        (
            {"base_model": "a/b", "instance_type": "ml.g5.4xlarge", "max_adapters": 2, "max_lora_rank": 12},
            rf"^{PATH}.max_lora_rank: 12 is not accepted; accepted: one of 1, 8, 16, 32, 64, 128, 256, 320, 512",
        ),
        (
            {
                "base_model": "a/b",
                "instance_type": "ml.g5.4xlarge",
                "max_adapters": 2,
                "model": {"layers": 2},
            },
            rf"^{PATH}.model: {{'layers': 2}} is not accepted; accepted: the base model's figures",
        ),
        (
            {"base_model": "a/b", "instance_type": "ml.g5.4xlarge", "max_adapters": 2, "adapters": 2},
            rf"^{PATH}.adapters: unknown key; accepted: base_model, copies, instance_type, max_adapters, ",
        ),
    ],
)
def test_a_bad_shared_base_stops_synth_with_one_line_naming_the_field(entry, message):
    with pytest.raises(ConfigError, match=message) as caught:
        shared(entry)
    assert "\n" not in str(caught.value)


# -- the refusals ----------------------------------------------------------------------------------------
BASE = Component("base", "hfpipe-dev-adapters")
ADAPTERS = [Component(f"a{i}", "hfpipe-dev-adapters", base="base") for i in (1, 2)]


def test_an_adapter_trained_on_another_base_is_refused_naming_both_models():
    assert adapter_rules.base_model_problem("samsum", "my-org/base-8b", "my-org/base-8b") is None
    assert adapter_rules.base_model_problem("samsum", "other/7b", "my-org/base-8b") == (
        "adapter 'samsum' was trained on 'other/7b', and the shared base serves 'my-org/base-8b'; accepted: "
        "an adapter trained on 'my-org/base-8b' (its registry version records the base it needs)"
    )
    assert "is not a LoRA adapter (its registry metadata names no adapter_base_model" in str(
        adapter_rules.base_model_problem("samsum", None, "my-org/base-8b")
    )


@pytest.mark.parametrize(
    ("components", "why"),
    [
        ([], "which does not exist"),
        ([Component("base", "hfpipe-dev-other")], "which is on endpoint 'hfpipe-dev-other', not "),
        ([Component("base", "hfpipe-dev-adapters", base="root")], "which is itself an adapter component"),
        ([Component("base", "hfpipe-dev-adapters", status="Creating")], "which is Creating, not InService"),
    ],
)
def test_an_adapter_before_its_base_is_refused(components, why):
    problem = adapter_rules.adapter_before_base_problem("a3", "base", "hfpipe-dev-adapters", components)
    assert problem is not None and problem.startswith("adapter component 'a3' names base component 'base', ")
    assert why in problem and problem.endswith("created before its adapters")
    assert adapter_rules.adapter_before_base_problem("a3", "base", "hfpipe-dev-adapters", [BASE]) is None


def test_a_base_is_not_deleted_while_adapters_remain_on_it():
    assert adapter_rules.base_deletion_problem("base", [BASE, *ADAPTERS]) == (
        "base component 'base' still holds 2 adapter component(s) (a1, a2); accepted: deleting its adapters first"
    )
    assert adapter_rules.base_deletion_problem("base", [BASE]) is None
    # An adapter on another base does not hold this one.
    assert adapter_rules.base_deletion_problem("base", [BASE, Component("x", "e", base="other")]) is None


def test_no_more_adapters_than_the_base_holds_but_a_redeploy_adds_none():
    components = [BASE, *ADAPTERS]
    assert adapter_rules.adapter_count_problem("a3", "base", components, max_adapters=3) is None
    assert adapter_rules.adapter_count_problem("a2", "base", components, max_adapters=2) is None
    assert adapter_rules.adapter_count_problem("a3", "base", components, max_adapters=2) == (
        "adapter component 'a3' would be adapter 3 on base component 'base', which holds at most 2 "
        "(shared_base.max_adapters); accepted: deleting one of a1, a2 first, or a larger max_adapters that "
        "still fits the instance"
    )


def test_a_component_is_read_from_describe_inference_component():
    described = {
        "InferenceComponentName": "a1",
        "EndpointName": "e",
        "Specification": {
            "BaseInferenceComponentName": "base",
            "Container": {"ArtifactUrl": "s3://b/a.tar.gz"},
        },
        "InferenceComponentStatus": "Updating",
    }
    assert Component.from_description(described) == Component("a1", "e", "base", "Updating")
    assert Component.from_description({"InferenceComponentName": "b", "EndpointName": "e"}) == Component(
        "b", "e"
    )


# -- the fit ------------------------------------------------------------------------------------------------
def eight_b(**settings):
    entry = {"base_model": "my-org/base-8b", "instance_type": "ml.g5.4xlarge", "max_adapters": 10}
    return shared({**entry, "model": EIGHT_B, **settings})


def test_an_8b_base_with_ten_rank_16_adapters_fits_one_a10g_on_paper():
    fit = adapter_fit.check_shared_base(eight_b(), CATALOG, "eu-west-1", PATH)
    # vLLM's share: 0.9 x 23,028 MiB; weights: 8.03 B x 2 bytes; 1,536 MiB of activations.
    assert fit.base.share_mib == pytest.approx(20_725.2)
    assert fit.base.weights_mib == pytest.approx(8_030_261_248 * 2 / 2**20)
    # One slot: rank 16 x 81,920 x 32 layers x 2 bytes = 80 MiB; ten: 800 MiB.
    assert fit.lora_slot_mib == pytest.approx(80.0) and fit.lora_mib == pytest.approx(800.0)
    cache = 20_725.2 - 8_030_261_248 * 2 / 2**20 - 1_536 - 800
    assert fit.kv_cache_mib == pytest.approx(cache)
    # K and V of 32 layers x 8 heads x 128 x 2 bytes: 128 KiB a token.
    assert fit.max_tokens == int(cache / (128 / 1024)) == 24_581
    assert fit.adapters_that_fit(2048) == 45


def test_more_adapters_than_the_cache_leaves_room_for_are_refused_with_the_most_that_fit():
    with pytest.raises(RecipeError) as caught:
        adapter_fit.check_shared_base(eight_b(max_adapters=46), CATALOG, "eu-west-1", PATH)
    assert str(caught.value) == (
        f"{PATH}.max_adapters: 46 LoRA slots of rank 16 (3,680 MiB, 80.0 MiB each) leave 193 MiB of KV cache on "
        "ml.g5.4xlarge, less than one sequence of max_model_len 2048 needs; accepted: at most 45 adapters at "
        "this rank and length"
    )
    adapter_fit.check_shared_base(eight_b(max_adapters=45), CATALOG, "eu-west-1", PATH)


def test_bloomz_cannot_be_a_shared_base_vllm_serves_no_lora_on_bloom():
    base = shared(
        {"base_model": "bigscience/bloomz-7b1", "instance_type": "ml.g5.4xlarge", "max_adapters": 2}
    )
    with pytest.raises(
        RecipeError, match=rf"^{PATH}.base_model: 'bigscience/bloomz-7b1' cannot be a shared "
    ):
        adapter_fit.check_shared_base(base, CATALOG, "eu-west-1", PATH)
    # Its slots would be small all the same: rank 16 x 65,536 x 30 layers x 2 bytes = 60 MiB.
    figures = serving_fit.KNOWN_MODELS["bigscience/bloomz-7b1"]
    width = adapter_fit.LORA_FIGURES["bigscience/bloomz-7b1"].lora_width
    assert adapter_fit.adapter_fit(base, figures, width, 1, 24_576).lora_slot_mib == pytest.approx(60.0)


def test_an_unknown_base_or_a_cpu_instance_is_refused_naming_the_field():
    unknown = shared({"base_model": "my-org/x", "instance_type": "ml.g5.4xlarge", "max_adapters": 2})
    with pytest.raises(RecipeError, match=rf"^{PATH}.model: the fit check does not know the model my-org/x"):
        adapter_fit.check_shared_base(unknown, CATALOG, "eu-west-1", PATH)
    with pytest.raises(RecipeError, match=rf"^{PATH}.instance_type: 'ml.m5.xlarge' is a CPU instance"):
        adapter_fit.check_shared_base(eight_b(instance_type="ml.m5.xlarge"), CATALOG, "eu-west-1", PATH)


def test_weights_that_leave_no_cache_are_refused_naming_the_instance():
    huge = {**EIGHT_B, "parameters": 12_000_000_000}
    with pytest.raises(
        RecipeError, match=rf"^{PATH}.instance_type: ml.g5.4xlarge \(1 x 24,576 MiB\) cannot hold"
    ):
        adapter_fit.check_shared_base(eight_b(model=huge), CATALOG, "eu-west-1", PATH)


# -- the cost split -----------------------------------------------------------------------------------------
def test_the_fleet_cost_is_split_in_equal_shares_without_invocation_counts():
    split = adapter_cost.split_cost(2.03, ["b", "a"])
    assert split.rule == "equal" and split.shares == {"a": 1.015, "b": 1.015}
    # Counts that are all zero say nothing of the use: equal shares still.
    assert adapter_cost.split_cost(2.03, ["a", "b"], {"a": 0, "b": 0}).rule == "equal"


def test_the_fleet_cost_is_split_by_invocations_when_they_are_known():
    split = adapter_cost.split_cost(2.0, ["a", "b", "c"], {"a": 30, "b": 10})
    assert split.rule == "invocations"
    assert split.shares == pytest.approx({"a": 1.5, "b": 0.5, "c": 0.0})
    assert sum(split.shares.values()) == pytest.approx(2.0)
    # The base's own traffic is a tenant too, under its name.
    assert adapter_cost.split_cost(2.0, ["a"], {"a": 1, "base": 3}).shares == pytest.approx(
        {"a": 0.5, "base": 1.5}
    )
    with pytest.raises(ValueError, match="counts >= 0"):
        adapter_cost.split_cost(2.0, ["a"], {"a": -1})
    with pytest.raises(ValueError, match="at least one adapter"):
        adapter_cost.split_cost(2.0, [])


def test_the_calls_of_the_last_day_or_of_the_endpoints_life_decide_the_split():
    now = datetime(2026, 12, 3, 15, 40, 12, 250_000, tzinfo=UTC)
    # The last 24 hours, in whole seconds, the end rounded up so a call made in now's second counts.
    end = datetime(2026, 12, 3, 15, 40, 13, tzinfo=UTC)
    assert adapter_cost.counted_period(now) == (end - timedelta(hours=24), end)
    assert adapter_cost.counted_period(now, now - timedelta(days=3)) == (end - timedelta(hours=24), end)
    # An endpoint younger than a day: since it was created.
    created = datetime(2026, 12, 3, 9, 0, 0, 900_000, tzinfo=UTC)
    assert adapter_cost.counted_period(now, created) == (datetime(2026, 12, 3, 9, 0, 0, tzinfo=UTC), end)
    # Created in this very second: still a period CloudWatch takes (a start before its end).
    assert adapter_cost.counted_period(now, now + timedelta(seconds=5)) == (end - timedelta(seconds=1), end)


def test_ten_adapters_on_one_g5_4xlarge_against_ten_endpoints():
    assert prices.PRICES_USD_PER_HOUR["ml.g5.4xlarge"] == 2.03  # the list price the figures below use
    ten = adapter_cost.shared_vs_separate("ml.g5.4xlarge", 10)
    assert ten.shared_per_hour == pytest.approx(2.03)
    assert ten.per_adapter_per_hour == pytest.approx(0.203)
    assert ten.separate_per_hour == pytest.approx(20.30)
    assert ten.saving_per_hour == pytest.approx(18.27)
    assert ten.own_endpoint_per_hour == pytest.approx(2.03)  # one adapter's endpoint of its own
    # Over a 730-hour month: 1,481.90 USD shared against 14,819.00 USD.
    assert ten.shared_per_hour * 730 == pytest.approx(1_481.90)
    assert ten.separate_per_hour * 730 == pytest.approx(14_819.00)
    assert adapter_cost.shared_vs_separate("ml.unknown.size", 10).saving_per_hour is None


def test_the_tiny_llamas_figures_are_the_model_local_mode_builds(tmp_path):
    """The fit tables' hfpipe-fixtures/tiny-llama (a local world's shared base) is the tiny Llama as
    hfpipe.fixtures builds it: its parameters, layers, KV heads, head size and LoRA width counted."""
    from transformers import AutoModelForCausalLM

    from hfpipe.fixtures import build_tiny_model

    model = AutoModelForCausalLM.from_pretrained(build_tiny_model("llama", tmp_path / "llama"))
    config = model.config
    figures = serving_fit.KNOWN_MODELS["hfpipe-fixtures/tiny-llama"]
    assert (figures.parameters, figures.layers, figures.kv_heads, figures.head_dim) == (
        sum(p.numel() for p in model.parameters()),
        config.num_hidden_layers,
        config.num_key_value_heads,
        config.head_dim,
    )
    layer = model.model.layers[0]
    linear = [*vars(layer.self_attn)["_modules"].values(), *vars(layer.mlp)["_modules"].values()]
    width = sum(m.in_features + m.out_features for m in linear if hasattr(m, "in_features"))
    assert adapter_fit.LORA_FIGURES["hfpipe-fixtures/tiny-llama"].lora_width == width


def test_the_base_requests_carry_each_field_aws_example_and_the_container_docs_name():
    """aws/model-hosting-container-standards docs/sagemaker/05_lora_adapter_management.md (Steps 1 to 3): the
    model's VLLM_ALLOW_RUNTIME_LORA_UPDATING (Required) and tensor parallel size over the GPUs its component
    reserves, the variant's startup health check and routing, the component's StartupParameters; the host
    image from the vllm serving kind, the one source named vLLM endpoints read (hfpipe.core.deploy.fleets)."""
    import botocore.session
    from botocore.validate import validate_parameters

    from hfpipe.core.adapters import adapter_deploy
    from hfpipe.core.deploy import fleets
    from hfpipe.kinds import serving_kind

    base = SharedBase("my-org/base-8b", "ml.g5.12xlarge", max_adapters=4)
    requests = adapter_deploy.base_requests(
        "dev",
        base,
        image="image",
        role_arn="arn:aws:iam::1:role/r",
        gpus=4,
        memory_mb=1024,
        tags=[],
    )
    model = botocore.session.get_session().get_service_model("sagemaker")
    for operation, request in requests.items():
        validate_parameters(request, model.operation_model(operation).input_shape)
    environment = requests["CreateModel"]["PrimaryContainer"]["Environment"]
    assert environment["VLLM_ALLOW_RUNTIME_LORA_UPDATING"] == "true"
    assert environment["SM_VLLM_TENSOR_PARALLEL_SIZE"] == "4"
    component = requests["CreateInferenceComponent"]["Specification"]
    assert component["ComputeResourceRequirements"]["NumberOfAcceleratorDevicesRequired"] == 4
    assert component["StartupParameters"] == {
        "ModelDataDownloadTimeoutInSeconds": 600,
        "ContainerStartupHealthCheckTimeoutInSeconds": 600,
    }
    (variant,) = requests["CreateEndpointConfig"]["ProductionVariants"]
    named = fleets.production_variant("m", "ml.g5.12xlarge", 1, "vllm")
    assert (
        variant["InferenceAmiVersion"]
        == named["InferenceAmiVersion"]
        == "al2-ami-sagemaker-inference-gpu-3-1"
    )
    assert variant["InferenceAmiVersion"] == serving_kind("vllm").inference_ami_version
    assert variant["ContainerStartupHealthCheckTimeoutInSeconds"] == 600
    assert variant["RoutingConfig"] == {"RoutingStrategy": "LEAST_OUTSTANDING_REQUESTS"}
    assert "ModelDataDownloadTimeoutInSeconds" not in variant and "ModelName" not in variant
    for shape, value in (
        ("ProductionVariantContainerStartupHealthCheckTimeoutInSeconds", 600),
        ("ProductionVariantModelDataDownloadTimeoutInSeconds", 600),
    ):
        bounds = model.shape_for(shape).metadata
        assert bounds["min"] <= value <= bounds["max"]
    assert "LEAST_OUTSTANDING_REQUESTS" in model.shape_for("RoutingStrategy").enum
