"""Local mode's stand-in for the AWS vLLM container's SageMaker variant: OpenAI-compatible, streaming.

On AWS the `vllm` serving kind runs the AWS vLLM deep learning container (`server-sagemaker-cuda`): vLLM's
OpenAI server on port 8080 over the merged model at /opt/ml/model, its flags from `SM_VLLM_*` variables
(`SM_VLLM_MAX_MODEL_LEN=4096` -> `--max-model-len 4096`; https://aws.github.io/deep-learning-containers/vllm/
configuration/ and .../vllm/deployment/sagemaker/). `POST /invocations` takes OpenAI bodies: one with
`messages` is a chat completion, one with `prompt` a completion, `"stream": true` answers Server-Sent Events.

vLLM itself cannot run here. Tried on this project's CPU-only x86 machines: `pip download vllm==0.33.0
--no-deps` (the newest on PyPI) gives `vllm-0.33.0-cp38-abi3-manylinux_2_28_x86_64.whl`, 336 MB, whose
kernels (`_C_stable_libtorch.abi3.so`) link libcudart.so.13, libcuda.so.1 and libtorch_cuda.so and which
pins the CUDA build of torch 2.14.0; vLLM's CPU backend exists only as a source build
(`VLLM_TARGET_DEVICE=cpu`, a C++ toolchain and its own torch), far beyond a test suite's budget. So this class
answers vLLM's protocol with transformers on the CPU (float32), and says what differs:

- one request at a time under a lock (no continuous batching, no paged attention), token by token; the
  tokens become text as vLLM's incremental detokenizer makes it (hfpipe/local/detokenizer.py), so a
  streamed answer is the unstreamed one in pieces;
- `n`, `best_of`, beam search, logprobs, echo, tools, response_format and suffix are refused naming the
  field (vLLM serves them); sampling: temperature (0 is greedy), top_p, top_k, seed, stop, max_tokens;
- the default `max_model_len` is vLLM's derivation from config.json (`max_position_embeddings`,
  `n_positions`, ... else 2048, BLOOM's case); `SM_VLLM_MAX_MODEL_LEN` and `SM_VLLM_SERVED_MODEL_NAME` are
  read like the container's flags, the rest of `SM_VLLM_*` has no meaning here and is ignored;
- the served model name defaults to the model path, as vLLM names a model given by path (`--model
  /opt/ml/model`: `get_served_model_name` falls back to the model argument).
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hfpipe.local import openai_protocol as op
from hfpipe.local.container import LocalContainerError
from hfpipe.local.detokenizer import IncrementalDetokenizer
from hfpipe.local.endpoint import JSON, LocalEndpoint, media_type

#: Where SageMaker puts the model, and so the name vLLM serves it under by default.
MODEL_PATH = "/opt/ml/model"
DEFAULT_MAX_MODEL_LEN = 2048
# vLLM's `_get_and_verify_max_len`: the config keys that bound the context, smallest wins.
MAX_LEN_KEYS = (
    "max_position_embeddings",
    "n_positions",
    "max_seq_len",
    "seq_length",
    "model_max_length",
    "max_sequence_length",
    "max_seq_length",
    "seq_len",
)
CHAT_ROUTE, COMPLETION_ROUTE = "/v1/chat/completions", "/v1/completions"
EVENT_STREAM = "text/event-stream"


@dataclass
class Answer:
    """What a route answers: a JSON body, or Server-Sent Events produced while the model generates."""

    body: bytes = b""
    stream: Iterator[bytes] | None = None
    content_type: str = JSON


class OpenAIEndpoint(LocalEndpoint):
    """Serve a merged causal LM (model.tar.gz or folder, weights + tokenizer at its root) as vLLM does.

    `invoke(body, content_type, accept)` answers `POST /invocations` (a streamed answer comes back whole);
    `invoke_stream(...)` yields its Server-Sent Events as they are generated; `answer(path, body)` serves
    the `/v1/...` routes for `hfpipe.local.serve`. Refusals raise `openai_protocol.OpenAIError`, which
    carries vLLM's status and error body.
    """

    def __init__(
        self,
        model_data: str | os.PathLike[str],
        workdir: str | os.PathLike[str] | None = None,
        *,
        environment: Mapping[str, str] | None = None,
    ) -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        src = Path(model_data)
        self._open_model(src, workdir)
        if not (self.model_dir / "config.json").is_file():
            raise LocalContainerError(
                f"{src}: no config.json at the root; the vLLM container serves the merged model's weights "
                "and tokenizer from the root of model.tar.gz"
            )
        env = dict(environment or {})
        started = time.monotonic()
        self.tokenizer: Any = AutoTokenizer.from_pretrained(self.model_dir)
        self.model: Any = AutoModelForCausalLM.from_pretrained(self.model_dir, dtype=torch.float32).eval()
        self.load_seconds = time.monotonic() - started
        self.max_model_len = _max_model_len(self.model.config.to_dict(), env.get("SM_VLLM_MAX_MODEL_LEN"))
        self.served_model_name = env.get("SM_VLLM_SERVED_MODEL_NAME") or MODEL_PATH
        self._lock = threading.Lock()  # one generation at a time: the stand-in has no continuous batching

    # ------------------------------------------------------------------------------------------ the API
    def invoke(self, body: bytes | str, content_type: str = JSON, accept: str = JSON) -> bytes:
        """Answer one InvokeEndpoint body; a `"stream": true` body's events come back joined."""
        answer = self.answer("/invocations", body, content_type)
        return b"".join(answer.stream) if answer.stream is not None else answer.body

    def invoke_stream(
        self, body: bytes | str, content_type: str = JSON, accept: str = EVENT_STREAM
    ) -> Iterator[bytes]:
        """The Server-Sent Events of a `"stream": true` body, each as soon as it is generated (a body that
        does not stream yields its one JSON answer)."""
        answer = self.answer("/invocations", body, content_type)
        return answer.stream if answer.stream is not None else iter([answer.body])

    def answer(self, path: str, body: bytes | str, content_type: str = JSON) -> Answer:
        """POST `path` (/invocations, /v1/chat/completions, /v1/completions). Checks run before generation
        starts, so a refusal is a plain error answer even for a streaming request."""
        if media_type(content_type) != JSON:
            raise op.OpenAIError(
                "Unsupported Media Type: Only 'application/json' is allowed",
                status=415,
                err_type="Unsupported Media Type",
            )
        try:
            request = json.loads(body)
        except (ValueError, UnicodeDecodeError) as exc:
            raise op.OpenAIError(f"JSON decode error: {exc}") from None
        if not isinstance(request, dict):
            raise op.OpenAIError("the body must be a JSON object")
        if path == "/invocations":
            if "messages" in request:
                path = CHAT_ROUTE
            elif "prompt" in request:
                path = COMPLETION_ROUTE
            else:
                raise op.OpenAIError(
                    f"Cannot find suitable handler for request. Expected one of: {list(op.INVOCATION_TYPES)}"
                )
        if path == CHAT_ROUTE:
            return self._chat(request)
        if path == COMPLETION_ROUTE:
            return self._completion(request)
        raise op.OpenAIError(f"{path}: not found", status=404, err_type="NotFoundError")

    def models(self) -> dict[str, Any]:
        """GET /v1/models."""
        return op.model_list(self.served_model_name, self.served_model_name, self.max_model_len)

    # -------------------------------------------------------------------------------------- the routes
    def _check_model(self, request: dict[str, Any]) -> None:
        model = request.get("model")
        if model not in (None, "", self.served_model_name):
            raise op.OpenAIError(
                f"The model `{model}` does not exist.", param="model", status=404, err_type="NotFoundError"
            )

    def _chat(self, request: dict[str, Any]) -> Answer:
        self._check_model(request)
        sampling = op.parse_sampling(request, "max_completion_tokens")
        messages = op.chat_messages(request)
        if not self.tokenizer.chat_template:
            raise op.no_chat_template_error()
        try:
            prompt = self.tokenizer.apply_chat_template(
                messages,
                tokenize=False,
                add_generation_prompt=request.get("add_generation_prompt", True),
                continue_final_message=request.get("continue_final_message", False),
                **(request.get("chat_template_kwargs") or {}),
            )
        except Exception as exc:  # jinja2 errors: vLLM answers 400 with the template's message
            raise op.OpenAIError(str(exc)) from None
        ids = self.tokenizer(prompt, add_special_tokens=request.get("add_special_tokens", False))["input_ids"]
        max_tokens = self._budget(len(ids), sampling.max_tokens)
        id_ = op.new_id("chatcmpl")
        if request.get("stream"):
            return Answer(
                stream=self._chat_events(id_, ids, sampling, max_tokens, request), content_type=EVENT_STREAM
            )
        text, finish, stop_reason, n = self._run(ids, sampling, max_tokens)
        choice = {
            "index": 0,
            "message": {"role": "assistant", "content": text, "tool_calls": []},
            "logprobs": None,
            "finish_reason": finish,
            "stop_reason": stop_reason,
        }
        out = op.response("chat.completion", id_, self.served_model_name, [choice], op.usage(len(ids), n))
        return Answer(body=_dumps(out))

    def _chat_events(
        self, id_: str, ids: list[int], sampling: op.Sampling, max_tokens: int, request: dict[str, Any]
    ) -> Iterator[bytes]:
        def chunk(delta: dict[str, Any], finish: str | None = None, stop_reason: Any = None) -> bytes:
            choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
            if finish is not None:
                choice["stop_reason"] = stop_reason
            return op.sse(
                op.response("chat.completion.chunk", id_, self.served_model_name, [choice], None, chunk=True)
            )

        yield chunk({"role": "assistant", "content": ""})
        n = 0
        for delta, finish, stop_reason, count in self._generate(ids, sampling, max_tokens):
            n = count
            if finish is not None:
                yield chunk({"content": delta} if delta else {}, finish, stop_reason)
            elif delta:
                yield chunk({"content": delta})
        if (request.get("stream_options") or {}).get("include_usage"):
            yield op.sse(
                op.response(
                    "chat.completion.chunk",
                    id_,
                    self.served_model_name,
                    [],
                    op.usage(len(ids), n),
                    chunk=True,
                )
            )
        yield op.DONE

    def _completion(self, request: dict[str, Any]) -> Answer:
        self._check_model(request)
        sampling = op.parse_sampling(request)
        add_special = request.get("add_special_tokens", True)
        prompts = [
            p if isinstance(p, list) else self.tokenizer(p, add_special_tokens=add_special)["input_ids"]
            for p in op.completion_prompts(request)
        ]
        budgets = [self._budget(len(ids), sampling.max_tokens) for ids in prompts]
        id_ = op.new_id("cmpl")
        if request.get("stream"):
            return Answer(
                stream=self._completion_events(id_, prompts, budgets, sampling, request),
                content_type=EVENT_STREAM,
            )
        choices, completion_tokens = [], 0
        for index, (ids, budget) in enumerate(zip(prompts, budgets, strict=True)):
            text, finish, stop_reason, n = self._run(ids, sampling, budget)
            completion_tokens += n
            choices.append(
                {
                    "index": index,
                    "text": text,
                    "logprobs": None,
                    "finish_reason": finish,
                    "stop_reason": stop_reason,
                }
            )
        use = op.usage(sum(len(ids) for ids in prompts), completion_tokens)
        return Answer(body=_dumps(op.response("text_completion", id_, self.served_model_name, choices, use)))

    def _completion_events(
        self,
        id_: str,
        prompts: list[list[int]],
        budgets: list[int],
        sampling: op.Sampling,
        request: dict[str, Any],
    ) -> Iterator[bytes]:
        total = 0
        for index, (ids, budget) in enumerate(zip(prompts, budgets, strict=True)):
            n = 0
            for delta, finish, stop_reason, count in self._generate(ids, sampling, budget):
                n = count
                if delta or finish is not None:
                    choice = {"index": index, "text": delta, "logprobs": None, "finish_reason": finish}
                    choice["stop_reason"] = stop_reason
                    yield op.sse(
                        op.response(
                            "text_completion", id_, self.served_model_name, [choice], None, chunk=True
                        )
                    )
            total += n
        if (request.get("stream_options") or {}).get("include_usage"):
            use = op.usage(sum(len(ids) for ids in prompts), total)
            yield op.sse(op.response("text_completion", id_, self.served_model_name, [], use, chunk=True))
        yield op.DONE

    # ---------------------------------------------------------------------------------------- generation
    def _budget(self, prompt_tokens: int, max_tokens: int | None) -> int:
        """The tokens a request may generate, or vLLM's refusal when prompt + max_tokens does not fit."""
        limit = self.max_model_len
        if max_tokens is not None and max_tokens > limit:
            raise op.validation_error(
                f"max_tokens={max_tokens} cannot be greater than max_model_len={limit}. "
                "Please request fewer output tokens.",
                "max_tokens",
                max_tokens,
            )
        if prompt_tokens + (max_tokens or 0) > limit or (max_tokens is None and prompt_tokens >= limit):
            raise op.context_length_error(limit, max_tokens or 0, prompt_tokens)
        # vLLM's get_max_tokens: without max_tokens, whatever the context leaves.
        return max_tokens if max_tokens is not None else limit - prompt_tokens

    def _run(self, ids: list[int], sampling: op.Sampling, max_tokens: int) -> tuple[str, str, Any, int]:
        text, finish, stop_reason, n = "", "length", None, 0
        for delta, end, reason, count in self._generate(ids, sampling, max_tokens):
            text, n = text + delta, count
            if end is not None:
                finish, stop_reason = end, reason
        return text, finish, stop_reason, n

    def _generate(
        self, ids: list[int], sampling: op.Sampling, max_tokens: int
    ) -> Iterator[tuple[str, str | None, Any, int]]:
        """(new text, finish_reason or None, stop_reason, tokens generated so far) as tokens come.

        The text is vLLM's incremental detokenization (hfpipe/local/detokenizer.py): a character split
        across tokens comes whole with the token that completes it, text that could still become a stop
        string is held back until it is decided, and a stop string ends generation and is left out of the
        text; the unstreamed answer is these pieces joined, so the two are equal byte for byte.
        """
        import torch

        eos = self.tokenizer.eos_token_id
        rng = torch.Generator().manual_seed(sampling.seed if sampling.seed is not None else torch.seed())
        text = IncrementalDetokenizer(self.tokenizer, ids, sampling.stop, sampling.skip_special_tokens)
        with self._lock, torch.no_grad():
            past, inputs, n = None, torch.tensor([ids]), 0
            while True:
                out = self.model(input_ids=inputs, past_key_values=past, use_cache=True)
                past = out.past_key_values
                token = _pick(out.logits[0, -1].float(), sampling, rng)
                n += 1
                ends = token == eos and not sampling.ignore_eos
                stop = text.update(token, stop_terminated=ends)
                if ends or stop is not None:
                    yield text.next_text(finished=True), "stop", stop, n
                    return
                if n == max_tokens:  # the last token's text comes with the finish_reason
                    yield text.next_text(finished=True), "length", None, n
                    return
                delta = text.next_text(finished=False)
                if delta:
                    yield delta, None, None, n
                inputs = torch.tensor([[token]])


def _pick(logits: Any, sampling: op.Sampling, rng: Any) -> int:
    """The next token: argmax when greedy, else sampled after temperature, top-k and top-p."""
    import torch

    if sampling.greedy:
        return int(torch.argmax(logits))
    logits = logits / sampling.temperature
    if 0 < sampling.top_k < logits.numel():
        kth = torch.topk(logits, sampling.top_k).values[-1]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    probs = torch.softmax(logits, dim=-1)
    if sampling.top_p < 1.0:
        ordered, order = torch.sort(probs, descending=True)
        drop = torch.cumsum(ordered, dim=-1) - ordered > sampling.top_p  # keep the smallest set over top_p
        ordered = ordered.masked_fill(drop, 0.0)
        probs = torch.zeros_like(probs).scatter(0, order, ordered)
    return int(torch.multinomial(probs / probs.sum(), 1, generator=rng))


def _max_model_len(config: dict[str, Any], setting: str | None) -> int:
    """vLLM's max_model_len: SM_VLLM_MAX_MODEL_LEN if set (not above what the config allows), else the
    smallest of the config's length keys, else 2048."""
    derived = min((int(config[k]) for k in MAX_LEN_KEYS if isinstance(config.get(k), int)), default=None)
    if setting is None or setting == "":
        return derived or DEFAULT_MAX_MODEL_LEN
    if not setting.strip().isdigit() or int(setting) < 1:
        raise LocalContainerError(f"SM_VLLM_MAX_MODEL_LEN={setting!r}: accepted: a positive number of tokens")
    if derived is not None and int(setting) > derived:
        raise LocalContainerError(
            f"SM_VLLM_MAX_MODEL_LEN={setting}: User-specified max_model_len ({setting}) is greater than the "
            f"derived max_model_len ({derived}) from the model's config.json; accepted: at most {derived}"
        )
    return int(setting)


def _dumps(obj: dict[str, Any]) -> bytes:
    return json.dumps(obj, ensure_ascii=False).encode()
