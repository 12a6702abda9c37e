"""The host image a serving kind's container needs (ProductionVariant InferenceAmiVersion): the vllm kind's
value is one botocore accepts and fits the kind's image (a CUDA build newer than the host's driver needs the
container's own CUDA-compat libraries, so a host image that does not mount the host's), and every endpoint
config the pipeline and the deploy write for the kind carries it."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path
from typing import Any

import botocore
import pytest
from app_synth import state_machine_definition
from plan_config import dev_config

from hfpipe import contract, kinds
from hfpipe.core import api_shapes
from hfpipe.core.deploy import deploy_requests
from hfpipe.core.run.plan import build_plan
from hfpipe.local.engine.quotas import QuotaTable, default_quotas
from stacks.image_catalog import build_catalog

REGION = "eu-west-1"
ROOT = Path(__file__).resolve().parents[2]


def sagemaker_model() -> dict[str, Any]:
    path = Path(botocore.__file__).parent / "data" / "sagemaker" / "2017-07-24" / "service-2.json.gz"
    return dict(json.loads(gzip.open(path).read()))


def ami_documentation() -> dict[str, str]:
    """botocore's description of each InferenceAmiVersion: name -> its <dd> text."""
    doc = sagemaker_model()["shapes"]["ProductionVariant"]["members"]["InferenceAmiVersion"]["documentation"]
    return {
        m[0]: re.sub(r"<[^>]+>", " ", m[1]) for m in re.findall(r"<dt>([^<]+)</dt>\s*<dd>(.*?)</dd>", doc)
    }


def test_the_vllm_kinds_host_image_is_accepted_and_fits_its_image():
    vllm = kinds.serving_kind("vllm")
    accepted = sagemaker_model()["shapes"]["ProductionVariantInferenceAmiVersion"]["enum"]
    assert vllm.inference_ami_version in accepted
    described = ami_documentation()[vllm.inference_ami_version]
    host_cuda = tuple(int(x) for x in re.search(r"CUDA version:\s*([\d.]+)", described).group(1).split("."))
    assert "GPU" in described and "disabled CUDA-compat mounting" in described
    images = json.loads((ROOT / "stacks" / "dlc_images.json").read_text())["vllm"]["versions"]
    for version, tags in images.items():
        (cuda,) = re.findall(r"-cu(\d\d)(\d)-", tags["gpu"])
        image_cuda = (int(cuda[0]), int(cuda[1]))
        # A CUDA newer than the host driver's runs on the container's forward-compatibility libraries,
        # which the host must not mount over: the AMI's "disabled CUDA-compat mounting".
        assert image_cuda > host_cuda[:2], (version, tags, described)
    # The Hugging Face inference toolkit's images run on SageMaker's default host image.
    assert kinds.serving_kind("hf-inference").inference_ami_version is None


@pytest.fixture(scope="module")
def config():
    return dev_config(image_catalog=build_catalog(REGION))


@pytest.mark.parametrize(("recipe", "ami"), [("bloomz-7b1-lora-samsum", True), ("tiny-qa", False)])
def test_the_pipelines_endpoint_config_carries_the_kinds_host_image(config, recipe, ami):
    plan = build_plan({"recipe_name": recipe}, "exec-1", config, QuotaTable(default_quotas()).client(REGION))
    (variant,) = api_shapes.pipeline_requests(plan)["CreateEndpointConfig"]["ProductionVariants"]
    expected = kinds.serving_kind(plan.serving_kind).inference_ami_version
    assert (variant.get("InferenceAmiVersion") == expected) and (expected is not None) == ami
    assert variant == {
        "VariantName": "AllTraffic",
        "ModelName": plan.model_name,
        "InstanceType": plan.serving_instance_type,
        "InitialInstanceCount": plan.serving_instance_count,
        **({"InferenceAmiVersion": expected} if ami else {}),
    }
    assert plan.serving_production_variants == [variant]


def test_the_pipeline_definition_sends_the_plans_variants(template):
    states = state_machine_definition(template, contract.state_machine_name("dev"))["States"]
    assert states["CreateEndpointConfig"]["Parameters"]["ProductionVariants.$"] == (
        "$.plan.serving_production_variants"
    )


def test_the_deploys_endpoint_config_carries_the_kinds_host_image():
    vllm = deploy_requests.endpoint_config_request("c", "m", "ml.g5.4xlarge", 1, [], "vllm")
    hf = deploy_requests.endpoint_config_request("c", "m", "ml.m5.large", 1, [], "hf-inference")
    assert vllm["ProductionVariants"][0]["InferenceAmiVersion"] == "al2-ami-sagemaker-inference-gpu-3-1"
    assert "InferenceAmiVersion" not in hf["ProductionVariants"][0]
    assert not api_shapes.problems("CreateEndpointConfig", vllm)
