"""Local mode answers an inference component's InvokeEndpoint with the vLLM stand-in (hfpipe.local.serving.adapter_serving,
routed by hfpipe.local.engine.moto_patches): two adapters deployed on one shared base with hfpipe.core.adapters.adapter_deploy,
their model.tar.gz in moto's S3, each component answering as its adapter served directly, the base as the
base; an update serves the new artifact, a deleted component is refused, the stream is the answer in events.

The adapters are freshly initialised PEFT LoRA adapters (random B, so each changes the answer; no training)
over the tiny Llama local mode builds for the `tiny-adapter` recipe's `model` channel."""

from __future__ import annotations

import contextlib
import functools
import json
import tarfile
from pathlib import Path
from types import SimpleNamespace

import boto3
import pytest
from botocore.exceptions import ClientError
from deploy_helpers import Clock, adapter_version, put_on_base
from moto import mock_aws

from hfpipe.core.adapters import adapter_deploy
from hfpipe.core.adapters.adapter_deploy import BaseNames
from hfpipe.core.adapters.shared_base import SharedBase
from hfpipe.local.engine import moto_patches
from hfpipe.local.engine.inference_components import InferenceComponents
from hfpipe.local.engine.traffic import InvocationError
from hfpipe.local.runtime import LocalRuntime
from hfpipe.local.serving import adapter_serving

REGION = "us-east-1"
BASE_MODEL = "hfpipe-fixtures/tiny-llama"
#: The tiny Llama's context (max_position_embeddings): vLLM refuses a longer SM_VLLM_MAX_MODEL_LEN.
CONTEXT = 256
SHARED = SharedBase(BASE_MODEL, "ml.g5.4xlarge", max_adapters=2, max_model_len=CONTEXT)
DEV = BaseNames.of("dev")
SUMMARY, TOPICS = "hfpipe-dev-adapter-summary", "hfpipe-dev-adapter-topics"
PROMPT = {"prompt": "Amanda: I baked cookies.\nJerry: Sure!\nSummary:", "max_tokens": 8, "temperature": 0}


@pytest.fixture(scope="module")
def adapters(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The base as local mode builds it, two adapters over it, each packed as a model.tar.gz."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import LlamaForCausalLM

    from hfpipe.fixtures import build_tiny_model

    root = tmp_path_factory.mktemp("adapters")
    paths = {"base": build_tiny_model("llama", root / "base")}
    for seed, name in enumerate(("one", "two"), start=1):
        torch.manual_seed(seed)
        lora = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
        get_peft_model(LlamaForCausalLM.from_pretrained(paths["base"]), lora).save_pretrained(root / name)
        paths[name] = root / name
        with tarfile.open(root / f"{name}.tar.gz", "w:gz") as tar:
            for file in sorted((root / name).iterdir()):
                tar.add(file, arcname=file.name)
        paths[f"{name}.tar.gz"] = root / f"{name}.tar.gz"
    return paths


@pytest.fixture
def served(tmp_path: Path):
    """moto with local mode's patches, in the local world (``world`` set): the runtime serves components."""
    clock = Clock()
    store = InferenceComponents(time_scale=lambda: 1.0, clock=clock)
    with contextlib.ExitStack() as stack, mock_aws():
        s3, sm = boto3.client("s3", region_name=REGION), boto3.client("sagemaker", region_name=REGION)
        runtime = LocalRuntime(s3, sm, tmp_path)
        stack.callback(runtime.close)
        engine = SimpleNamespace(
            time_scale=1.0,
            timeout_scale=1.0,
            world=SimpleNamespace(),
            inference_components=store,
            fleets=runtime,
            traffic=SimpleNamespace(InvocationError=InvocationError),
        )
        moto_patches.install(stack, engine)  # type: ignore[arg-type]
        s3.create_bucket(Bucket="artifacts")
        client = boto3.client("sagemaker-runtime", region_name=REGION)
        # moto's server, as the local world's commands reach it (HFPIPE_LOCAL=1), in front of the same account.
        server = moto_patches.threaded_server("127.0.0.1", 0)
        server.start()
        stack.callback(server.stop)
        host, port = server.get_host_and_port()
        over_http = boto3.client(
            "sagemaker-runtime",
            region_name=REGION,
            endpoint_url=f"http://{host}:{port}",
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )
        yield SimpleNamespace(sm=sm, s3=s3, runtime=client, http=over_http, clock=clock, fleets=runtime)


#: A version of a recipe's group as the Register step writes an adapter's (on this file's base).
version = functools.partial(adapter_version, base=BASE_MODEL)


def deploy(
    served, adapter: str, described: dict, shared: SharedBase = SHARED, *, without: tuple[str, ...] = ()
) -> dict:
    """``adapter_deploy.deploy_adapter`` on the test's account; ``without``: variables left out of the base
    model's environment."""
    return put_on_base(served, shared, adapter, described, without=without)


def invoke(served, component: str, body: dict = PROMPT, *, http: bool = False) -> dict:
    answer = (served.http if http else served.runtime).invoke_endpoint(
        EndpointName=DEV.endpoint,
        InferenceComponentName=component,
        Body=json.dumps(body),
        ContentType="application/json",
    )
    return json.loads(answer["Body"].read())


def direct(adapters: dict[str, Path], adapter: str | None) -> str:
    """The stand-in's answer for ``adapter`` (None: the base) served directly, on the test's own build."""
    from hfpipe.local.serving.openai_endpoint import OpenAIEndpoint

    env = {"SM_VLLM_MAX_MODEL_LEN": str(CONTEXT), "SM_VLLM_SERVED_MODEL_NAME": BASE_MODEL}
    endpoint = OpenAIEndpoint(
        adapters["base"], environment=env, adapters={adapter: adapters[adapter]} if adapter else {}
    )
    body = {**PROMPT, **({"model": adapter} if adapter else {})}
    return str(json.loads(endpoint.invoke(json.dumps(body)))["choices"][0]["text"])


def refused(call, code: str) -> dict:
    with pytest.raises(ClientError) as caught:
        call()
    assert caught.value.response["Error"]["Code"] == code
    return caught.value.response


@pytest.mark.slow
def test_each_adapter_component_answers_as_its_adapter_and_the_base_as_the_base(served, adapters) -> None:
    sm = served.sm
    for archive, key in (("one", "summary/1"), ("two", "summary/2"), ("two", "topics/1")):
        served.s3.upload_file(str(adapters[f"{archive}.tar.gz"]), "artifacts", f"{key}/model.tar.gz")
    deploy(served, "summary", version(sm, "summary", 1))
    summary_2 = version(sm, "summary", 2)
    deploy(served, "topics", version(sm, "topics", 1))
    one, two, base = invoke(served, SUMMARY), invoke(served, TOPICS), invoke(served, DEV.component)
    # The adapter's name reached the stand-in as the OpenAI model field, as vLLM's SageMaker route sets it.
    assert (one["model"], two["model"], base["model"]) == (SUMMARY, TOPICS, BASE_MODEL)
    texts = [answer["choices"][0]["text"] for answer in (one, two, base)]
    assert len(set(texts)) == 3, texts
    assert texts == [direct(adapters, "one"), direct(adapters, "two"), direct(adapters, None)]
    # One container per base, as on the endpoint: each adapter registered on it under its component's name
    # (the container's POST /adapters), and kept: a second call builds and registers nothing.
    kept = dict(served.fleets.components.served)
    assert set(kept) == {(DEV.component, BASE_MODEL)}
    registered = {
        SUMMARY: "s3://artifacts/summary/1/model.tar.gz",
        TOPICS: "s3://artifacts/topics/1/model.tar.gz",
    }
    assert served.fleets.components.registered == {(DEV.component, BASE_MODEL): registered}
    assert invoke(served, SUMMARY)["choices"][0]["text"] == texts[0]
    assert served.fleets.components.served == kept
    assert served.fleets.components.registered == {(DEV.component, BASE_MODEL): registered}
    # The update to the other artifact: the component answers as the other adapter.
    assert deploy(served, "summary", summary_2)["action"] == "updated"
    assert invoke(served, SUMMARY)["choices"][0]["text"] == texts[1]
    assert invoke(served, SUMMARY, http=True)["choices"][0]["text"] == texts[1]  # over moto's server too
    # The stream (over the server): the same answer, in Server-Sent Events carried by PayloadPart events.
    stream = served.http.invoke_endpoint_with_response_stream(
        EndpointName=DEV.endpoint,
        InferenceComponentName=TOPICS,
        Body=json.dumps({**PROMPT, "stream": True}),
        ContentType="application/json",
    )
    assert stream["ContentType"] == "text/event-stream"
    events = b"".join(event["PayloadPart"]["Bytes"] for event in stream["Body"]).decode()
    chunks = [json.loads(line[6:]) for line in events.splitlines() if line.startswith("data: {")]
    assert events.rstrip().endswith("data: [DONE]")
    assert "".join(c["choices"][0]["text"] for c in chunks if c["choices"]) == texts[1]
    # What the stand-in refuses is SageMaker's ModelError, with vLLM's status and message.
    error = refused(lambda: invoke(served, TOPICS, {**PROMPT, "max_tokens": 10 * CONTEXT}), "ModelError")
    assert error["OriginalStatusCode"] == 400 and "maximum context length" in error["OriginalMessage"]
    # A deleted component is refused.
    assert adapter_deploy.delete_adapter(sm, "dev", "topics") == TOPICS
    message = refused(lambda: invoke(served, TOPICS), "ValidationError")["Error"]["Message"]
    assert message == f"Inference component {TOPICS} is Deleting, not InService."
    served.clock.now += 60
    message = refused(lambda: invoke(served, TOPICS), "ValidationError")["Error"]["Message"]
    assert message == f"Inference component {TOPICS} does not exist on endpoint {DEV.endpoint}."
    served.fleets.close()
    assert served.fleets.components.served == {}


def test_a_base_local_mode_does_not_build_is_refused_in_one_line(served) -> None:
    sm = served.sm
    other = SharedBase("my-org/base-8b", "ml.g5.4xlarge", max_adapters=2)
    deploy(served, "summary", version(sm, "summary", 1, base="my-org/base-8b"), shared=other)
    message = refused(lambda: invoke(served, SUMMARY), "ValidationError")["Error"]["Message"]
    assert message == refused(lambda: invoke(served, DEV.component), "ValidationError")["Error"]["Message"]
    message = refused(lambda: invoke(served, DEV.component), "ValidationError")["Error"]["Message"]
    assert message == (
        f"base component {DEV.component}: SM_VLLM_MODEL 'my-org/base-8b' of model {DEV.model} is not a base model "
        "local mode builds without a download; accepted: one of Qwen/Qwen2.5-7B-Instruct, "
        f"{BASE_MODEL} (the bundled adapter recipes' adapter.base_model)"
    )
    # tiny-adapter's own base, and the tiny Llama local mode substitutes for qwen-7b-lora-samsum-adapter's.
    assert adapter_serving.local_base_models() == {BASE_MODEL: "llama", "Qwen/Qwen2.5-7B-Instruct": "llama"}
    assert served.fleets.components.served == {}


@pytest.mark.slow
def test_a_context_over_the_base_models_is_refused_as_vllm_refuses_it(served) -> None:
    too_long = SharedBase(BASE_MODEL, "ml.g5.4xlarge", max_adapters=2)  # max_model_len 2048
    deploy(served, "summary", version(served.sm, "summary", 1), shared=too_long)
    message = refused(lambda: invoke(served, DEV.component), "ValidationError")["Error"]["Message"]
    assert message.startswith(
        f"base component {DEV.component}: the vLLM stand-in does not start: SM_VLLM_MAX_MODEL_LEN=2048: "
        f"User-specified max_model_len (2048) is greater than the derived max_model_len ({CONTEXT})"
    )


def test_an_artifact_that_is_not_there_or_not_a_tar_is_refused_in_one_line(served) -> None:
    deploy(served, "summary", version(served.sm, "summary", 1))
    message = refused(lambda: invoke(served, SUMMARY), "ValidationError")["Error"]["Message"]
    assert message.startswith(
        "Container.ArtifactUrl s3://artifacts/summary/1/model.tar.gz: cannot be read from S3 ("
    )
    served.s3.put_object(Bucket="artifacts", Key="summary/1/model.tar.gz", Body=b"not a tar")
    message = refused(lambda: invoke(served, SUMMARY), "ValidationError")["Error"]["Message"]
    assert message.startswith(
        "Container.ArtifactUrl s3://artifacts/summary/1/model.tar.gz: not a model.tar.gz local mode unpacks ("
    )
    assert served.fleets.components.served == {}


def test_the_stream_is_refused_where_no_component_is_served(served) -> None:
    sm = served.sm
    role = f"arn:aws:iam::{moto_patches.default_account_id()}:role/r"
    sm.create_model(ModelName="plain", ExecutionRoleArn=role, PrimaryContainer={"Image": "image"})
    variant = {"VariantName": "AllTraffic", "InstanceType": "ml.g5.4xlarge", "InitialInstanceCount": 1}
    sm.create_endpoint_config(
        EndpointConfigName="plain", ProductionVariants=[{**variant, "ModelName": "plain"}]
    )
    sm.create_endpoint(EndpointName="plain", EndpointConfigName="plain")
    messages = {
        refused(
            lambda client=client: client.invoke_endpoint_with_response_stream(
                EndpointName="plain", Body=b"{}", ContentType="application/json"
            ),
            "ValidationError",
        )["Error"]["Message"]
        for client in (served.runtime, served.http)
    }
    assert messages == {
        "local mode streams the answers of inference components in the local world only: endpoint plain was "
        "called without an inference component it serves"
    }


def upload(served, adapters: dict[str, Path], archive: str, key: str) -> None:
    served.s3.upload_file(str(adapters[f"{archive}.tar.gz"]), "artifacts", f"{key}/model.tar.gz")


def test_a_base_without_runtime_adapter_updating_refuses_its_adapters_as_the_container_would(
    served, adapters
) -> None:
    """vLLM mounts the container's adapter routes only with VLLM_ALLOW_RUNTIME_LORA_UPDATING on
    (vllm/entrypoints/serve/lora/api_router.py), so SageMaker's POST /adapters finds no route."""
    upload(served, adapters, "one", "summary/1")
    deploy(served, "summary", version(served.sm, "summary", 1), without=("VLLM_ALLOW_RUNTIME_LORA_UPDATING",))
    message = refused(lambda: invoke(served, SUMMARY), "ValidationError")["Error"]["Message"]
    assert message == (
        f"adapter component {SUMMARY}: the container refused its adapter (s3://artifacts/summary/1/model.tar.gz): "
        "POST /adapters answered 404: Not Found (vLLM mounts the adapter routes only with "
        "VLLM_ALLOW_RUNTIME_LORA_UPDATING=true in the base model's environment; accepted: a model of base "
        f"component {DEV.component} that sets it)"
    )
    assert invoke(served, DEV.component)["model"] == BASE_MODEL  # the base itself still answers
    assert served.fleets.components.registered == {(DEV.component, BASE_MODEL): {}}


def test_an_adapter_that_does_not_load_is_refused_in_the_containers_words(served, adapters, tmp_path) -> None:
    """A rank over the base's max_lora_rank, and an adapter without weights: vLLM's answer to the container's
    POST /adapters, which the layer's ResponseMessage names."""
    from model_hosting_container_standards.sagemaker.lora.constants import ResponseMessage

    upload(served, adapters, "one", "summary/1")  # rank 4
    narrow = SharedBase(BASE_MODEL, "ml.g5.4xlarge", max_adapters=2, max_lora_rank=1, max_model_len=CONTEXT)
    deploy(served, "summary", version(served.sm, "summary", 1), shared=narrow)
    message = refused(lambda: invoke(served, SUMMARY), "ValidationError")["Error"]["Message"]
    assert message.endswith("POST /adapters answered 400: LoRA rank 4 is greater than max_lora_rank 1.")
    assert ResponseMessage.ADAPTER_MAX_LORA_RANK in message
    with tarfile.open(tmp_path / "bare.tar.gz", "w:gz") as tar:
        tar.add(adapters["one"] / "adapter_config.json", arcname="adapter_config.json")
    served.s3.upload_file(str(tmp_path / "bare.tar.gz"), "artifacts", "topics/1/model.tar.gz")
    deploy(served, "topics", version(served.sm, "topics", 1), shared=narrow)
    message = refused(lambda: invoke(served, TOPICS), "ValidationError")["Error"]["Message"]
    assert ResponseMessage.ADAPTER_INVALID_WEIGHTS in message and message.startswith(
        f"adapter component {TOPICS}: the container refused its adapter (s3://artifacts/topics/1/model.tar.gz): "
        "POST /adapters answered 400: "
    )


def test_two_adapters_of_one_version_each_answer_under_their_own_name(served, adapters) -> None:
    """Each adapter component is registered under its own name, so the adapter identifier SageMaker sends
    selects it, whichever was called first and whether or not it shares its artifact."""
    upload(served, adapters, "one", "summary/1")
    one = version(served.sm, "summary", 1)
    deploy(served, "summary", one)
    deploy(served, "topics", one)
    assert invoke(served, TOPICS)["model"] == TOPICS
    assert invoke(served, SUMMARY)["model"] == SUMMARY
    # A body naming another model is served as the identifier says: the layer replaces its model field.
    assert invoke(served, TOPICS, {**PROMPT, "model": SUMMARY})["model"] == TOPICS
    assert invoke(served, DEV.component, {**PROMPT, "model": SUMMARY})["model"] == BASE_MODEL
