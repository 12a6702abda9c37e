"""The `vllm` kind's local stand-in over HTTP, checked with the official `openai` client (its contract).

The model is the tiny random BLOOM the other serving tests use, with the chat template run_clm.py saves
(inference_clm.chat_template), served by OpenAIEndpoint behind ModelServer on a free port.
"""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest
from model_servers import serving

from hfpipe.local.serving.openai_endpoint import OpenAIEndpoint
from hfpipe.local.serving.serve import ModelServer

ROOT = Path(__file__).resolve().parents[2]
DIALOGUE = "Amanda: I baked cookies. Do you want some?\nJerry: Sure!\nAmanda: I'll bring you tomorrow :-)"
MAX_MODEL_LEN = 128
GREEDY = {"temperature": 0, "max_tokens": 12}


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random BLOOM saved as run_clm.py saves the merged model: weights, tokenizer, chat template."""
    import inference_clm
    from transformers import AutoTokenizer

    from hfpipe.fixtures.samsum import build_tiny_bloom

    model = build_tiny_bloom(tmp_path_factory.mktemp("vllm") / "model")
    tokenizer = AutoTokenizer.from_pretrained(model)
    tokenizer.chat_template = inference_clm.chat_template(inference_clm.DEFAULT_PROMPT_TEMPLATE)
    tokenizer.save_pretrained(model)
    return model


@pytest.fixture(scope="module")
def server(model_dir: Path) -> Iterator[ModelServer]:
    endpoint = OpenAIEndpoint(
        model_dir,
        environment={"SM_VLLM_MAX_MODEL_LEN": str(MAX_MODEL_LEN), "SM_VLLM_SERVED_MODEL_NAME": "tiny"},
    )
    with serving(endpoint, serving_kind="vllm") as srv:
        yield srv


@pytest.fixture(scope="module")
def client(server: ModelServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0, timeout=60)


def _chat(client: openai.OpenAI, **kwargs: object) -> openai.types.chat.ChatCompletion:
    return client.chat.completions.create(
        model="tiny",
        messages=[{"role": "system", "content": "Summarize."}, {"role": "user", "content": DIALOGUE}],
        **kwargs,  # type: ignore[arg-type]
    )


def test_models_and_health(client: openai.OpenAI, server: ModelServer) -> None:
    [model] = client.models.list().data
    assert (model.id, model.object, model.owned_by) == ("tiny", "model", "vllm")
    assert model.model_extra and model.model_extra["max_model_len"] == MAX_MODEL_LEN
    conn = http.client.HTTPConnection("127.0.0.1", server.server_address[1], timeout=30)
    conn.request("GET", "/health")
    assert conn.getresponse().status == 200


def test_chat_completion_renders_the_training_prompt(client: openai.OpenAI, model_dir: Path) -> None:
    import inference_clm

    answer = _chat(client, **GREEDY)
    assert answer.object == "chat.completion" and answer.id.startswith("chatcmpl-")
    assert answer.model == "tiny"
    [choice] = answer.choices
    assert choice.message.role == "assistant" and choice.finish_reason in ("stop", "length")
    # The same greedy continuation as a completion of the training prompt: the chat template rendered it.
    prompt = inference_clm.as_prompt(DIALOGUE, inference_clm.DEFAULT_PROMPT_TEMPLATE, "summary", "</s>")
    completion = client.completions.create(model="tiny", prompt=prompt, **GREEDY)  # type: ignore[arg-type]
    assert choice.message.content == completion.choices[0].text
    assert answer.usage is not None and completion.usage is not None
    assert answer.usage.prompt_tokens == completion.usage.prompt_tokens
    assert answer.usage.total_tokens == answer.usage.prompt_tokens + answer.usage.completion_tokens
    if choice.finish_reason == "length":
        assert answer.usage.completion_tokens == GREEDY["max_tokens"]


def test_completion_shape_length_and_stop(client: openai.OpenAI) -> None:
    answer = client.completions.create(
        model="tiny",
        prompt=["Amanda: hi", "Jerry: ok"],
        temperature=0,
        max_tokens=5,
        extra_body={"ignore_eos": True},
    )
    assert answer.object == "text_completion" and answer.id.startswith("cmpl-")
    assert [c.index for c in answer.choices] == [0, 1]
    assert all(c.finish_reason == "length" for c in answer.choices)
    assert answer.usage is not None and answer.usage.completion_tokens == 10
    # A stop string ends the text before it, finish_reason "stop" and vLLM's stop_reason naming it.
    text = answer.choices[0].text
    stop = text[2:4]
    stopped = client.completions.create(
        model="tiny",
        prompt="Amanda: hi",
        temperature=0,
        max_tokens=5,
        stop=[stop],
        extra_body={"ignore_eos": True},
    )
    [choice] = stopped.choices
    assert choice.text == text[: text.index(stop)]
    assert (choice.finish_reason, (choice.model_extra or {})["stop_reason"]) == ("stop", stop)


def test_streamed_chat_concatenates_to_the_greedy_answer(client: openai.OpenAI) -> None:
    whole = _chat(client, **GREEDY).choices[0]
    chunks = list(_chat(client, stream=True, stream_options={"include_usage": True}, **GREEDY))
    assert all(c.object == "chat.completion.chunk" for c in chunks)
    assert len({c.id for c in chunks}) == 1
    *content, last, usage = chunks
    assert content[0].choices[0].delta.role == "assistant"
    assert "".join(c.choices[0].delta.content or "" for c in [*content, last]) == whole.message.content
    assert all(c.choices[0].finish_reason is None for c in content)
    assert last.choices[0].finish_reason == whole.finish_reason
    assert usage.choices == [] and usage.usage is not None
    assert len(content) > 2  # streamed token by token, not in one piece


def test_streamed_completion_concatenates_to_the_greedy_answer(client: openai.OpenAI) -> None:
    kwargs = {"model": "tiny", "prompt": "Amanda: Where are you?\nJerry:", **GREEDY}
    whole = client.completions.create(**kwargs)  # type: ignore[call-overload]
    chunks = list(client.completions.create(stream=True, **kwargs))  # type: ignore[call-overload]
    assert all(c.object == "text_completion" for c in chunks)
    assert "".join(c.choices[0].text for c in chunks) == whole.choices[0].text
    assert chunks[-1].choices[0].finish_reason == whole.choices[0].finish_reason is not None
    assert all(c.choices[0].finish_reason is None for c in chunks[:-1])


def test_a_prompt_over_max_model_len_is_refused_as_vllm_refuses_it(client: openai.OpenAI) -> None:
    """vLLM 0.14.0's serving_engine._validate_input: a prompt that fills the context, then one whose
    max_tokens does not fit beside it (hfpipe/kinds/openai_contract.py, check_length)."""
    with pytest.raises(openai.BadRequestError) as caught:
        client.completions.create(model="tiny", prompt=DIALOGUE * 20, max_tokens=16)
    assert caught.value.status_code == 400
    assert caught.value.param == "input_tokens" and caught.value.type == "BadRequestError"
    assert f"This model's maximum context length is {MAX_MODEL_LEN} tokens. However, your request has " in (
        caught.value.message
    )
    with pytest.raises(openai.BadRequestError) as caught:
        client.completions.create(model="tiny", prompt="hi", max_tokens=MAX_MODEL_LEN)
    assert caught.value.param == "max_tokens"
    assert f"'max_tokens' or 'max_completion_tokens' is too large: {MAX_MODEL_LEN}." in caught.value.message


def test_what_the_stand_in_does_not_implement_is_a_501_naming_the_field(client: openai.OpenAI) -> None:
    with pytest.raises(openai.InternalServerError) as caught:
        _chat(client, n=2, max_tokens=4)
    assert caught.value.status_code == 501
    assert caught.value.body["param"] == "n" and "does not implement" in caught.value.message  # type: ignore[index]


def test_a_chat_request_to_a_model_without_a_chat_template_gets_vllms_answer(tmp_path: Path) -> None:
    from hfpipe.fixtures.samsum import build_tiny_bloom

    endpoint = OpenAIEndpoint(build_tiny_bloom(tmp_path / "plain"))
    with pytest.raises(Exception, match="default chat template is no longer allowed") as caught:
        endpoint.predict({"messages": [{"role": "user", "content": "hi"}]})
    assert caught.value.body()["error"]["code"] == 400  # type: ignore[attr-defined]
    assert (
        endpoint.served_model_name == "/opt/ml/model" and endpoint.max_model_len == 2048
    )  # BLOOM: no positions


def _post(server: ModelServer, body: dict) -> http.client.HTTPResponse:
    conn = http.client.HTTPConnection("127.0.0.1", server.server_address[1], timeout=60)
    conn.request("POST", "/invocations", body=json.dumps(body), headers={"Content-Type": "application/json"})
    return conn.getresponse()


def test_invocations_routes_chat_and_streams_server_sent_events(
    server: ModelServer, client: openai.OpenAI
) -> None:
    messages = [{"role": "user", "content": DIALOGUE}]
    response = _post(server, {"messages": messages, **GREEDY})
    assert response.status == 200 and response.getheader("Content-Type") == "application/json"
    answer = json.loads(response.read())
    assert answer["object"] == "chat.completion"
    assert answer["choices"][0]["message"]["content"] == _chat(client, **GREEDY).choices[0].message.content

    response = _post(server, {"messages": messages, "stream": True, **GREEDY})
    assert response.status == 200 and response.getheader("Content-Type").startswith("text/event-stream")
    assert response.getheader("Transfer-Encoding") == "chunked"
    events = response.read().decode().split("\n\n")
    assert events[-2:] == ["data: [DONE]", ""]
    chunks = [json.loads(e.removeprefix("data: ")) for e in events[:-2]]
    assert all(e.startswith("data: ") for e in events[:-1])
    assert (
        "".join(c["choices"][0]["delta"].get("content", "") for c in chunks)
        == answer["choices"][0]["message"]["content"]
    )

    response = _post(server, {"inputs": "a Hugging Face toolkit body"})
    assert response.status == 400
    assert json.loads(response.read())["error"]["message"].startswith(
        "Cannot find suitable handler for request."
    )


# --- streamed text is the unstreamed text, byte for byte, with characters split across tokens -------------

#: The fixture tokenizer learnt no merges for these characters: each is 3 or 4 byte-level tokens.
SPLIT = " bakes 🍪 and 饼干 👍"


class Scripted:
    """A causal LM that says `ids`, one per forward pass, whatever it is given (greedy decoding picks them)."""

    def __init__(self, ids: list[int], vocab_size: int) -> None:
        self.ids, self.vocab_size = ids, vocab_size

    def __call__(self, input_ids: object, past_key_values: int | None, use_cache: bool) -> object:
        import types

        import torch

        step = past_key_values or 0
        logits = torch.full((1, 1, self.vocab_size), -1e9)
        logits[0, -1, self.ids[step]] = 0.0
        return types.SimpleNamespace(logits=logits, past_key_values=step + 1)


@pytest.fixture(scope="module")
def scripted_endpoint(model_dir: Path) -> OpenAIEndpoint:
    endpoint = OpenAIEndpoint(model_dir, environment={"SM_VLLM_SERVED_MODEL_NAME": "tiny"})
    ids = endpoint.tokenizer(SPLIT, add_special_tokens=False)["input_ids"]
    # The characters are split: some tokens decode, alone, to no whole character.
    assert sum(endpoint.tokenizer.decode([i]) == "\ufffd" for i in ids) >= 8
    endpoint.model = Scripted(ids, len(endpoint.tokenizer))
    return endpoint


def _both(endpoint: OpenAIEndpoint, **fields: object) -> tuple[str, str, list[str]]:
    """The unstreamed text, the streamed text as `hfpipe invoke --stream` prints it, and its pieces."""
    from hfpipe.cli.deploy import invoke_openai

    request = {"prompt": "Amanda:", "temperature": 0, **fields}
    whole = json.loads(endpoint.invoke(json.dumps(request)))["choices"][0]["text"]
    pieces: list[str] = []
    invoke_openai.stream_answer(
        endpoint.invoke_stream(json.dumps({**request, "stream": True})), pieces.append
    )
    return whole, "".join(pieces), pieces


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"max_tokens": 22}, SPLIT),
        # Cut inside 👍 (its first two bytes): vLLM never sends bytes that do not make a character.
        ({"max_tokens": 20}, " bakes 🍪 and 饼干 "),
        # A stop string that begins before a split character: held back until decided, then left out.
        ({"max_tokens": 22, "stop": ["and 饼"]}, " bakes 🍪 "),
        ({"max_tokens": 22, "stop": ["干 👍!"]}, SPLIT),
    ],
    ids=["whole", "cut-inside-a-character", "stop-across-a-character", "stop-never-completed"],
)
def test_streamed_text_equals_the_unstreamed_text_byte_for_byte(
    scripted_endpoint: OpenAIEndpoint, fields: dict[str, object], expected: str
) -> None:
    whole, streamed, pieces = _both(scripted_endpoint, **fields)
    assert whole.encode() == streamed.encode() == expected.encode()
    assert not any("\ufffd" in p for p in pieces)
    assert len(pieces) > 5  # token by token


def test_the_python_decode_stream_is_tokenizers_own(model_dir: Path) -> None:
    """The step a tokenizer without a fast backend gets (PyDecodeStream) returns what tokenizers'
    DecodeStream returns, token for token, also for bytes that never make a character."""
    import random

    from tokenizers.decoders import DecodeStream
    from transformers import AutoTokenizer

    from hfpipe.local.serving.detokenizer import PyDecodeStream

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    rng = random.Random(0)
    ids = tokenizer(SPLIT * 3, add_special_tokens=False)["input_ids"]
    ids += [rng.randrange(len(tokenizer)) for _ in range(300)]
    ours = PyDecodeStream(lambda x: tokenizer.decode(x, clean_up_tokenization_spaces=False))
    theirs = DecodeStream(skip_special_tokens=False)
    assert [ours.step(i) for i in ids] == [theirs.step(tokenizer.backend_tokenizer, i) for i in ids]


# -- LoRA adapters served next to the base (vLLM's --enable-lora --lora-modules) --------------------------
@pytest.fixture(scope="module")
def llama_with_adapters(model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A tiny random Llama (a class vLLM serves LoRA on) with the fixture tokenizer, two freshly initialised
    PEFT LoRA adapters over it (random B, so each changes the answers), and the first one merged into a model
    of its own: what serving it on the base must answer like."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    root = tmp_path_factory.mktemp("lora")
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=MAX_MODEL_LEN,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(0)
    LlamaForCausalLM(config).save_pretrained(root / "base")
    tokenizer.save_pretrained(root / "base")
    paths = {"base": root / "base"}
    for seed, name in enumerate(("samsum", "dialogsum"), start=1):
        torch.manual_seed(seed)
        lora = LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
        adapted = get_peft_model(LlamaForCausalLM.from_pretrained(root / "base"), lora)
        adapted.save_pretrained(root / name)
        paths[name] = root / name
        if name == "samsum":
            adapted.merge_and_unload().save_pretrained(root / "merged")
            tokenizer.save_pretrained(root / "merged")
            paths["merged"] = root / "merged"
    return paths


def _completion_text(endpoint: OpenAIEndpoint, model: str | None) -> tuple[str, str]:
    body = {"prompt": DIALOGUE, **GREEDY, "max_tokens": 16, **({"model": model} if model else {})}
    answer = json.loads(endpoint.invoke(json.dumps(body)))
    return answer["model"], answer["choices"][0]["text"]


def test_adapters_are_served_next_to_the_base_routed_by_the_model_field(llama_with_adapters) -> None:
    from hfpipe.local.serving.openai_protocol import OpenAIError

    paths = llama_with_adapters
    env = {"SM_VLLM_MAX_MODEL_LEN": str(MAX_MODEL_LEN), "SM_VLLM_SERVED_MODEL_NAME": "base"}
    served = OpenAIEndpoint(
        paths["base"], environment=env, adapters={"samsum": paths["samsum"], "dialogsum": paths["dialogsum"]}
    )
    cards = served.models()["data"]
    assert [(c["id"], c["parent"]) for c in cards] == [
        ("base", None),
        ("samsum", "base"),
        ("dialogsum", "base"),
    ]
    assert cards[1]["root"] == str(paths["samsum"])
    plain = OpenAIEndpoint(paths["base"], environment=env)
    merged = OpenAIEndpoint(paths["merged"], environment={**env, "SM_VLLM_SERVED_MODEL_NAME": "samsum"})
    base_text = _completion_text(plain, None)[1]
    # No model named, or the base's name: the base answers, without any adapter.
    assert _completion_text(served, None) == ("base", base_text)
    assert _completion_text(served, "base") == ("base", base_text)
    # An adapter answers as its merged model does, under its own name, whichever was asked before it.
    samsum = _completion_text(served, "samsum")
    assert samsum == _completion_text(merged, "samsum")
    dialogsum = _completion_text(served, "dialogsum")
    assert len({base_text, samsum[1], dialogsum[1]}) == 3
    assert _completion_text(served, "samsum") == samsum
    with pytest.raises(OpenAIError, match=r"^The model `other` does not exist\.$"):
        _completion_text(served, "other")


def test_adapters_are_refused_as_vllm_refuses_them(llama_with_adapters, model_dir: Path) -> None:
    from hfpipe.local.training.container import LocalContainerError

    samsum = llama_with_adapters["samsum"]
    with pytest.raises(LocalContainerError, match=r"^BloomForCausalLM does not support LoRA yet"):
        OpenAIEndpoint(model_dir, adapters={"samsum": samsum})
    with pytest.raises(LocalContainerError, match=r"has LoRA rank 8, over 1; accepted"):
        OpenAIEndpoint(
            llama_with_adapters["base"],
            environment={"SM_VLLM_MAX_LORA_RANK": "1"},
            adapters={"samsum": samsum},
        )


def test_adapters_load_and_unload_at_run_time_in_vllms_words(llama_with_adapters, tmp_path: Path) -> None:
    """vLLM's load_lora_adapter and unload_lora_adapter (what the container's /adapters routes call): the
    answers and refusals of serving_models.py and the engine's add_lora."""
    from hfpipe.local.serving.openai_protocol import OpenAIError

    paths = llama_with_adapters
    env = {"SM_VLLM_MAX_MODEL_LEN": str(MAX_MODEL_LEN), "SM_VLLM_SERVED_MODEL_NAME": "base"}
    static = OpenAIEndpoint(paths["base"], environment=env, adapters={"samsum": paths["samsum"]})
    served = OpenAIEndpoint(paths["base"], environment=env)
    base_text = _completion_text(served, None)
    said = served.load_adapter("samsum", str(paths["samsum"]))
    assert said == "Success: LoRA adapter 'samsum' added successfully."
    assert _completion_text(served, "samsum") == _completion_text(static, "samsum")
    assert _completion_text(served, None) == base_text

    def refusal(call) -> tuple[int, str, str]:
        with pytest.raises(OpenAIError) as caught:
            call()
        return caught.value.status, caught.value.err_type, caught.value.message

    assert refusal(lambda: served.load_adapter("samsum", str(paths["dialogsum"]))) == (
        400,
        "InvalidUserInput",
        "The lora adapter 'samsum' has already been loaded.",
    )
    assert refusal(lambda: served.load_adapter("x", str(tmp_path / "nowhere")))[:2] == (404, "NotFoundError")
    bare = tmp_path / "bare"
    bare.mkdir()
    (bare / "adapter_config.json").write_text((paths["samsum"] / "adapter_config.json").read_text())
    assert refusal(lambda: served.load_adapter("x", str(bare))) == (
        400,
        "BadRequestError",
        f"{bare} doesn't contain tensors",
    )
    narrow = OpenAIEndpoint(paths["base"], environment={**env, "SM_VLLM_MAX_LORA_RANK": "1"})
    assert refusal(lambda: narrow.load_adapter("samsum", str(paths["samsum"]))) == (
        400,
        "BadRequestError",
        "LoRA rank 8 is greater than max_lora_rank 1.",
    )
    assert served.unload_adapter("samsum") == "Success: LoRA adapter 'samsum' removed successfully."
    assert refusal(lambda: _completion_text(served, "samsum"))[:1] == (404,)
    assert _completion_text(served, None) == base_text
    assert refusal(lambda: served.unload_adapter("samsum")) == (
        404,
        "NotFoundError",
        "The lora adapter 'samsum' cannot be found.",
    )


class _StandIn:
    """What the layer calls, recording each call: the body /invocations hands on, the adapters loaded."""

    def __init__(self) -> None:
        self.bodies: list[dict] = []
        self.loaded: list[tuple[str, str]] = []

    def answer(self, path: str, body: bytes, content_type: str | None):
        from types import SimpleNamespace

        self.bodies.append(json.loads(body))
        return SimpleNamespace(stream=None, body=b'{"ok": true}', content_type="application/json")

    def load_adapter(self, name: str, src: str) -> str:
        from hfpipe.local.serving.openai_protocol import OpenAIError

        if name == "wide":
            raise OpenAIError("LoRA rank 32 is greater than max_lora_rank 16.")
        self.loaded.append((name, src))
        return f"Success: LoRA adapter '{name}' added successfully."

    def unload_adapter(self, name: str) -> str:
        self.loaded = [(n, s) for n, s in self.loaded if n != name]
        return f"Success: LoRA adapter '{name}' removed successfully."


def test_the_containers_sagemaker_layer_is_wired_as_vllm_wires_it() -> None:
    """model-hosting-container-standards under the stand-in: the adapter identifier header replaces the body's
    model; POST /adapters and DELETE /adapters/{name} exist only with VLLM_ALLOW_RUNTIME_LORA_UPDATING, take the
    package's request and answer in its words, and pass vLLM's refusal on as it is."""
    from model_hosting_container_standards.sagemaker.lora.constants import ResponseMessage

    from hfpipe.local.serving.sagemaker_layer import ContainerLayer

    off = ContainerLayer(_StandIn(), {})
    body = json.dumps({"prompt": "x", "model": "asked"})
    assert off.invoke(body, "application/json", "summary").status == 200
    assert off.invoke(body, "application/json", None).status == 200
    assert [b["model"] for b in off.stand_in.bodies] == ["summary", None]  # the header replaces, or null
    assert (off.register_adapter("summary", "/a").status, off.unregister_adapter("summary").status) == (
        404,
        404,
    )
    assert off.stand_in.loaded == []
    for setting in ("true", "1", " TRUE "):
        assert ContainerLayer(_StandIn(), {"VLLM_ALLOW_RUNTIME_LORA_UPDATING": setting}).adapter_routes
    assert not ContainerLayer(_StandIn(), {"VLLM_ALLOW_RUNTIME_LORA_UPDATING": "yes"}).adapter_routes
    on = ContainerLayer(_StandIn(), {"VLLM_ALLOW_RUNTIME_LORA_UPDATING": "true"})
    registered = on.register_adapter("summary", "/adapters/summary")
    assert (registered.status, registered.body.decode()) == (
        200,
        ResponseMessage.ADAPTER_REGISTERED.format(alias="summary"),
    )
    assert on.stand_in.loaded == [("summary", "/adapters/summary")]
    aliased = on.client.post(
        "/adapters",
        json={"name": "topics", "src": "/adapters/topics"},
        headers={"X-Amzn-SageMaker-Adapter-Alias": "topics-v2"},
    )
    assert aliased.text == ResponseMessage.ADAPTER_REGISTERED.format(alias="topics-v2")  # the alias header
    refused = on.register_adapter("wide", "/adapters/wide")
    assert (refused.status, refused.message()) == (400, "LoRA rank 32 is greater than max_lora_rank 16.")
    missing = on.client.post(
        "/adapters", json={"name": "summary"}
    )  # the package's request model: src required
    assert missing.status_code == 400 and "src" in missing.text
    gone = on.unregister_adapter("summary")
    assert (gone.status, gone.body.decode()) == (
        200,
        ResponseMessage.ADAPTER_UNREGISTERED.format(alias="summary"),
    )
    assert on.stand_in.loaded == [("topics", "/adapters/topics")]


def test_the_stand_ins_differences_from_vllm_are_one_table_the_contract_and_the_stand_in_read(
    model_dir: Path,
) -> None:
    """openai_contract.STAND_IN_DIFFERENCES: each of its fields is one of vLLM's request fields, each is the
    stand-in's 501 quoting its row, and an unknown field's refusal (the contract's, which `hfpipe invoke` and
    Plan share) quotes the unknown-field row; a field outside the table is served."""
    from hfpipe.kinds import openai_contract as contract
    from hfpipe.local.serving.openai_protocol import OpenAIError

    table = contract.STAND_IN_DIFFERENCES
    fields = set(contract.CHAT_FIELDS) | set(contract.COMPLETION_FIELDS)
    assert set(table) - fields == {contract.UNKNOWN_FIELD, "stream_options.continuous_usage_stats"}
    endpoint = OpenAIEndpoint(model_dir, environment={"SM_VLLM_MAX_MODEL_LEN": str(MAX_MODEL_LEN)})
    chat = {"messages": [{"role": "user", "content": DIALOGUE}], "max_tokens": 2}
    for field, extra in (
        ("n", {"n": 2, "temperature": 1.0}),
        ("logprobs", {"logprobs": True, "top_logprobs": 2}),
        ("echo", {"echo": True}),
        ("response_format", {"response_format": {"type": "json_object"}}),
    ):
        with pytest.raises(OpenAIError) as caught:
            endpoint.invoke(json.dumps({**chat, **extra}))
        assert (caught.value.status, caught.value.param) == (501, field), caught.value.message
        assert table[field] in caught.value.message
    for body in ({**chat, "max_token": 5}, {"prompt": "a", "best_of": 3}):
        with pytest.raises(OpenAIError) as caught:
            endpoint.invoke(json.dumps(body))
        assert caught.value.status == 400 and table[contract.UNKNOWN_FIELD] in caught.value.message
        with pytest.raises(contract.ContractError) as checked:
            contract.check_request(body)
        assert checked.value.message == caught.value.message
    served = json.loads(endpoint.invoke(json.dumps({**chat, "temperature": 0.5, "top_k": 3, "seed": 1})))
    assert served["object"] == "chat.completion"
