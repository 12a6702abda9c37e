"""Local mode's stand-in for the AWS vLLM container's SageMaker variant: OpenAI-compatible, streaming.

On AWS the `vllm` serving kind runs the AWS vLLM deep learning container (`server-sagemaker-cuda`): vLLM's
OpenAI server on port 8080 over the merged model at /opt/ml/model, its flags from `SM_VLLM_*` variables
(`SM_VLLM_MAX_MODEL_LEN=4096` -> `--max-model-len 4096`; https://aws.github.io/deep-learning-containers/vllm/
configuration/ and .../vllm/deployment/sagemaker/). `POST /invocations` takes OpenAI bodies: one with
`messages` is a chat completion, one with `prompt` a completion, `"stream": true` answers Server-Sent Events.

vLLM itself cannot run here (its wheels need CUDA; docs/vllm.md, "The local stand-in"), so this class answers
vLLM's protocol with transformers on the CPU, one request at a time; what differs from vLLM is listed there and
answered 501 from the one table of differences (hfpipe.kinds.openai_contract.STAND_IN_DIFFERENCES).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hfpipe.core.adapters.adapter_fit import ARCHITECTURES_WITHOUT_LORA
from hfpipe.core.adapters.shared_base import DEFAULT_LORA_RANK
from hfpipe.kinds import openai_contract as contract
from hfpipe.local.serving import openai_protocol as op
from hfpipe.local.serving.detokenizer import IncrementalDetokenizer
from hfpipe.local.serving.endpoint import JSON, LocalEndpoint
from hfpipe.local.training.container import LocalContainerError

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
CHAT_ROUTE, COMPLETION_ROUTE = contract.CHAT_ROUTE, contract.COMPLETION_ROUTE
ROUTES = (contract.INVOCATIONS, CHAT_ROUTE, COMPLETION_ROUTE)
EVENT_STREAM = "text/event-stream"
#: The files vLLM reads an adapter's weights from (vllm/lora/models.py, ``from_local_checkpoint``).
ADAPTER_WEIGHTS = ("adapter_model.safetensors", "adapter_model.bin", "adapter_model.pt")
#: What the stand-in does not implement, and why: the rows of the contract's one table of differences from
#: vLLM (openai_contract.STAND_IN_DIFFERENCES). A request that sets one to other than its default is answered
#: 501 quoting its row (the type vLLM gives a NotImplementedError, serving_engine.py); every other field of
#: the request models is acted on or changes nothing in the answer (user, request_id, ...).
NOT_IMPLEMENTED = {k: v for k, v in contract.STAND_IN_DIFFERENCES.items() if k != contract.UNKNOWN_FIELD}


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
    the `/v1/...` routes for `hfpipe.local.serving.serve`. Refusals raise `openai_protocol.OpenAIError`, which
    carries vLLM's status and error body.
    """

    def __init__(
        self,
        model_data: str | os.PathLike[str],
        workdir: str | os.PathLike[str] | None = None,
        *,
        environment: Mapping[str, str] | None = None,
        adapters: Mapping[str, str | os.PathLike[str]] | None = None,
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
        # What the contract also checks a request against: the served name, the context, the vocabulary
        # (input_processor: the larger of the tokenizer's and the model's).
        vocab = max(len(self.tokenizer), int(getattr(self.model.config, "vocab_size", 0) or 0))
        self.adapters: dict[str, Path] = {}
        self._load_adapters(adapters or {}, env)
        self.served = contract.Served((self.served_model_name, *self.adapters), self.max_model_len, vocab)
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

    def answer(self, path: str, body: bytes | str, content_type: str | None = JSON) -> Answer:
        """POST `path` (/invocations, /v1/chat/completions, /v1/completions). Every check of the request
        contract, and the prompt's length and token ids, runs before generation starts: a refusal is an
        error answer with vLLM's status and body, never a stream."""
        if path not in ROUTES:
            raise op.OpenAIError("Not Found", status=404, err_type="Not Found")
        contract.check_content_type(content_type)
        try:
            request = json.loads(body)
        except (ValueError, UnicodeDecodeError) as exc:  # routes.py invocations: an HTTPException(400)
            raise op.OpenAIError(f"JSON decode error: {exc}", err_type="Bad Request") from None
        checked = contract.check(request, path, self.served)
        unimplemented = sorted(set(checked.set_fields()) & set(NOT_IMPLEMENTED))
        if (request.get("stream_options") or {}).get("continuous_usage_stats"):
            unimplemented.append("stream_options.continuous_usage_stats")
        if unimplemented:
            field = unimplemented[0]
            raise op.OpenAIError(
                f"{field}: this local stand-in of the vLLM container does not implement it (vLLM "
                f"{contract.VLLM_VERSION} on the endpoint does: {NOT_IMPLEMENTED[field]}); leave it out or at its "
                "default here",
                param=field,
                status=501,
                err_type="NotImplementedError",
            )
        name = str(request.get("model") or self.served_model_name)  # vLLM: the base when none is named
        return self._chat(checked, name) if checked.kind == "chat" else self._completion(checked, name)

    def models(self) -> dict[str, Any]:
        """GET /v1/models: the base, then each adapter (its parent the base, its root its folder, as vLLM
        lists the adapters of --lora-modules)."""
        listed = op.model_list(self.served_model_name, self.served_model_name, self.max_model_len)
        for name, folder in self.adapters.items():
            card = {**listed["data"][0], "id": name, "root": str(folder), "parent": self.served_model_name}
            listed["data"].append(card)
        return listed

    @contextlib.contextmanager
    def _serving(self, name: str) -> Iterator[None]:
        """The adapter ``name`` active for one generation, or none for the base (under the lock)."""
        if not self.adapters:
            yield
        elif name in self.adapters:
            self.model.set_adapter(name)
            yield
        else:
            with self.model.disable_adapter():
                yield

    def _load_adapters(self, adapters: Mapping[str, Any], env: Mapping[str, str]) -> dict[str, Path]:
        """The PEFT LoRA adapters served next to the base (vLLM's --enable-lora --lora-modules NAME=PATH),
        refused as vLLM refuses them: a model class vLLM serves no LoRA on, a rank over --max-lora-rank
        (``SM_VLLM_MAX_LORA_RANK``, default 16), a name that is the base's."""
        self.max_lora_rank = int(env.get("SM_VLLM_MAX_LORA_RANK") or DEFAULT_LORA_RANK)
        self.adapters = {}
        if not adapters:
            return {}
        problem = self._lora_model_problem()
        if problem:
            raise LocalContainerError(problem)
        for name, folder in adapters.items():
            rank = int(json.loads((Path(folder) / "adapter_config.json").read_text())["r"])
            if name == self.served_model_name or rank > self.max_lora_rank:
                why = (
                    "is the base's name"
                    if rank <= self.max_lora_rank
                    else f"has LoRA rank {rank}, over {self.max_lora_rank}"
                )
                raise LocalContainerError(
                    f"adapter {name!r} ({folder}) {why}; accepted: another name, and a rank of at most "
                    "max_lora_rank (SM_VLLM_MAX_LORA_RANK)"
                )
            self._attach(name, Path(folder))
        return self.adapters

    def _lora_model_problem(self) -> str | None:
        architecture = (getattr(self.model.config, "architectures", None) or [type(self.model).__name__])[0]
        if architecture in ARCHITECTURES_WITHOUT_LORA:
            return (
                f"{architecture} does not support LoRA yet (vLLM's refusal of --enable-lora for this model "
                "class; docs/adapters.md); accepted: adapters over a model class vLLM serves LoRA on"
            )
        return None

    def _attach(self, name: str, folder: Path) -> None:
        """PEFT's load of one adapter over the base (the first wraps the model, the next are added)."""
        from peft import PeftModel

        if not self.adapters:
            self.model = PeftModel.from_pretrained(self.model, str(folder), adapter_name=name).eval()
        else:
            self.model.load_adapter(str(folder), adapter_name=name)
        self.adapters[name] = folder

    def load_adapter(self, name: Any, folder: Any) -> str:
        """vLLM's ``load_lora_adapter`` (the handler behind the container's ``POST /adapters``,
        hfpipe.local.serving.sagemaker_layer): the adapter at ``folder`` served as ``name`` from the next
        request; vLLM's answer, or OpenAIError with vLLM's status and words (serving_models.py
        ``_check_load_lora_adapter_request``; the engine's ``add_lora``: vllm/lora/models.py "doesn't contain
        tensors", vllm/lora/worker_manager.py "No adapter found", "LoRA rank R is greater than max_lora_rank
        M.")."""
        with self._lock:
            self._check_load(name, folder)
            try:
                self._attach(str(name), Path(folder))
            except (ValueError, KeyError, RuntimeError, OSError) as err:  # weights that do not fit the base
                raise op.OpenAIError(str(err), err_type="BadRequestError") from None
            self.served = dataclasses.replace(
                self.served, model_names=(self.served_model_name, *self.adapters)
            )
        return f"Success: LoRA adapter '{name}' added successfully."

    def _check_load(self, name: Any, folder: Any) -> None:
        if not name or not folder:
            raise op.OpenAIError(
                "Both 'lora_name' and 'lora_path' must be provided.", err_type="InvalidUserInput"
            )
        if name in self.adapters or name == self.served_model_name:
            raise op.OpenAIError(
                f"The lora adapter '{name}' has already been loaded.", err_type="InvalidUserInput"
            )
        problem = self._lora_model_problem()
        if problem:
            raise op.OpenAIError(problem, err_type="BadRequestError")
        config = Path(folder) / "adapter_config.json"
        if not config.is_file():
            raise op.OpenAIError(
                f"Loading lora {name} failed: No adapter found for {folder}",
                status=404,
                err_type="NotFoundError",
            )
        if not any((Path(folder) / f).is_file() for f in ADAPTER_WEIGHTS):
            raise op.OpenAIError(f"{folder} doesn't contain tensors", err_type="BadRequestError")
        rank = int(json.loads(config.read_text()).get("r") or 0)
        if rank > self.max_lora_rank:
            raise op.OpenAIError(
                f"LoRA rank {rank} is greater than max_lora_rank {self.max_lora_rank}.",
                err_type="BadRequestError",
            )

    def unload_adapter(self, name: Any) -> str:
        """vLLM's ``unload_lora_adapter`` (behind the container's ``DELETE /adapters/{name}``): the adapter
        no longer served; OpenAIError 404 for one not loaded, in vLLM's words."""
        with self._lock:
            if name not in self.adapters:
                raise op.OpenAIError(
                    f"The lora adapter '{name}' cannot be found.", status=404, err_type="NotFoundError"
                )
            del self.adapters[name]
            if self.adapters:
                self.model.delete_adapter(name)
            else:  # the last one: the plain base again
                self.model = self.model.unload().eval()
            self.served = dataclasses.replace(
                self.served, model_names=(self.served_model_name, *self.adapters)
            )
        return f"Success: LoRA adapter '{name}' removed successfully."

    # -------------------------------------------------------------------------------------- the routes
    def _chat(self, checked: contract.Checked, name: str) -> Answer:
        request, sampling = checked.body, checked.sampling
        if not self.tokenizer.chat_template:
            raise op.no_chat_template_error()
        try:
            prompt = self.tokenizer.apply_chat_template(
                checked.messages,
                tokenize=False,
                add_generation_prompt=request.get("add_generation_prompt", True),
                continue_final_message=request.get("continue_final_message", False),
                **(request.get("chat_template_kwargs") or {}),
            )
        except Exception as exc:  # jinja2 errors: vLLM answers 400 with the template's message
            raise op.OpenAIError(str(exc)) from None
        ids = self.tokenizer(prompt, add_special_tokens=request.get("add_special_tokens", False))["input_ids"]
        contract.check_token_ids(ids, self.served.vocab_size or len(self.tokenizer))
        max_tokens = contract.check_length(len(ids), sampling.max_tokens, self.max_model_len)
        id_ = op.new_id("chatcmpl")
        if checked.stream:
            return Answer(
                stream=self._chat_events(id_, ids, sampling, max_tokens, checked, name),
                content_type=EVENT_STREAM,
            )
        text, finish, stop_reason, n = self._run(ids, sampling, max_tokens, name)
        choice = {
            "index": 0,
            "message": {"role": "assistant", "content": text, "tool_calls": []},
            "logprobs": None,
            "finish_reason": finish,
            "stop_reason": stop_reason,
        }
        out = op.response("chat.completion", id_, name, [choice], op.usage(len(ids), n))
        return Answer(body=_dumps(out))

    def _chat_events(
        self,
        id_: str,
        ids: list[int],
        sampling: contract.Sampling,
        max_tokens: int,
        checked: contract.Checked,
        name: str,
    ) -> Iterator[bytes]:
        def chunk(delta: dict[str, Any], finish: str | None = None, stop_reason: Any = None) -> bytes:
            choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
            if finish is not None:
                choice["stop_reason"] = stop_reason
            return op.sse(op.response("chat.completion.chunk", id_, name, [choice], None, chunk=True))

        yield chunk({"role": "assistant", "content": ""})
        n = 0
        for delta, finish, stop_reason, count in self._generate(ids, sampling, max_tokens, name):
            n = count
            if finish is not None:
                yield chunk({"content": delta} if delta else {}, finish, stop_reason)
            elif delta:
                yield chunk({"content": delta})
        if checked.include_usage:
            yield op.sse(
                op.response(
                    "chat.completion.chunk",
                    id_,
                    name,
                    [],
                    op.usage(len(ids), n),
                    chunk=True,
                )
            )
        yield op.DONE

    def _completion(self, checked: contract.Checked, name: str) -> Answer:
        request, sampling = checked.body, checked.sampling
        add_special = request.get("add_special_tokens", True)
        prompts = [
            p if isinstance(p, list) else self.tokenizer(p, add_special_tokens=add_special)["input_ids"]
            for p in checked.prompts
        ]
        for ids in prompts:
            contract.check_token_ids(ids, self.served.vocab_size or len(self.tokenizer))
        budgets = [
            contract.check_length(len(ids), sampling.max_tokens, self.max_model_len) for ids in prompts
        ]
        id_ = op.new_id("cmpl")
        if checked.stream:
            return Answer(
                stream=self._completion_events(id_, prompts, budgets, sampling, checked, name),
                content_type=EVENT_STREAM,
            )
        choices, completion_tokens = [], 0
        for index, (ids, budget) in enumerate(zip(prompts, budgets, strict=True)):
            text, finish, stop_reason, n = self._run(ids, sampling, budget, name)
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
        return Answer(body=_dumps(op.response("text_completion", id_, name, choices, use)))

    def _completion_events(
        self,
        id_: str,
        prompts: list[list[int]],
        budgets: list[int],
        sampling: contract.Sampling,
        checked: contract.Checked,
        name: str,
    ) -> Iterator[bytes]:
        total = 0
        for index, (ids, budget) in enumerate(zip(prompts, budgets, strict=True)):
            n = 0
            for delta, finish, stop_reason, count in self._generate(ids, sampling, budget, name):
                n = count
                if delta or finish is not None:
                    choice = {"index": index, "text": delta, "logprobs": None, "finish_reason": finish}
                    choice["stop_reason"] = stop_reason
                    yield op.sse(op.response("text_completion", id_, name, [choice], None, chunk=True))
            total += n
        if checked.include_usage:
            use = op.usage(sum(len(ids) for ids in prompts), total)
            yield op.sse(op.response("text_completion", id_, name, [], use, chunk=True))
        yield op.DONE

    # ---------------------------------------------------------------------------------------- generation
    def _run(
        self, ids: list[int], sampling: contract.Sampling, max_tokens: int, name: str
    ) -> tuple[str, str, Any, int]:
        text, finish, stop_reason, n = "", "length", None, 0
        for delta, end, reason, count in self._generate(ids, sampling, max_tokens, name):
            text, n = text + delta, count
            if end is not None:
                finish, stop_reason = end, reason
        return text, finish, stop_reason, n

    def _generate(
        self, ids: list[int], sampling: contract.Sampling, max_tokens: int, name: str
    ) -> Iterator[tuple[str, str | None, Any, int]]:
        """(new text, finish_reason or None, stop_reason, tokens generated so far) as tokens come, from the
        base or the adapter ``name`` (a request's ``model``).

        The text is vLLM's incremental detokenization (hfpipe/local/serving/detokenizer.py): a character split
        across tokens comes whole with the token that completes it, text that could still become a stop
        string is held back until it is decided, and a stop string ends generation and is left out of the
        text; the unstreamed answer is these pieces joined, so the two are equal byte for byte.
        """
        import torch

        eos = self.tokenizer.eos_token_id
        rng = torch.Generator().manual_seed(sampling.seed if sampling.seed is not None else torch.seed())
        text = IncrementalDetokenizer(self.tokenizer, ids, sampling.stop, sampling.skip_special_tokens)
        with self._lock, torch.no_grad(), self._serving(name):
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


def _pick(logits: Any, sampling: contract.Sampling, rng: Any) -> int:
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
