"""The OpenAI-compatible request and response shapes of vLLM's server, as `OpenAIEndpoint` answers them.

Standard library only: request checks that name the field, the objects vLLM returns (`chat.completion`,
`chat.completion.chunk`, `text_completion`, `list` of `model`) and its error body. Shapes from vLLM's
`vllm/entrypoints/openai/chat_completion/protocol.py`, `completion/protocol.py` and
`vllm/entrypoints/serve/engine/protocol.py` (`ErrorResponse`, `UsageInfo`, `ModelCard`), read in the vLLM 0.33.0
wheel from PyPI; the error body is `{"error": {"message", "type", "param", "code"}}` as in every vLLM release
since 0.10 (before it was flat, `{"object": "error", "message", ...}`), which is also OpenAI's own shape, so
the `openai` client raises `openai.BadRequestError` with that message.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

#: vLLM's `_SAMPLING_EPS`: a temperature below it is greedy decoding.
SAMPLING_EPS = 1e-5
#: What the stand-in does not do (vLLM does): a request that sets one of these (to a value other than the
#: default) is refused naming it, instead of being answered as if it were not there.
UNSUPPORTED = {
    "n": 1,
    "best_of": None,
    "use_beam_search": False,
    "logprobs": None,
    "top_logprobs": None,
    "echo": False,
    "tools": None,
    "response_format": None,
    "suffix": None,
    "prompt_embeds": None,
}
#: The invocation types vLLM's SageMaker router tries, in order, for a body on /invocations
#: (vllm/entrypoints/serve/sagemaker/api_router.py: "Cannot find suitable handler for request").
INVOCATION_TYPES = ("ChatCompletionRequest", "CompletionRequest")


class OpenAIError(Exception):
    """A request vLLM refuses: status, OpenAI error type, message and the parameter it names."""

    def __init__(
        self, message: str, param: str | None = None, status: int = 400, err_type: str = "BadRequestError"
    ) -> None:
        super().__init__(message)
        self.message, self.param, self.status, self.err_type = message, param, status, err_type

    def body(self) -> dict[str, Any]:
        """vLLM's ErrorResponse."""
        return {
            "error": {
                "message": self.message,
                "type": self.err_type,
                "param": self.param,
                "code": self.status,
            }
        }


def validation_error(message: str, param: str, value: Any) -> OpenAIError:
    """A VLLMValidationError as vLLM answers it: its str() adds `(parameter=..., value=...)` to the message,
    and `param` names the parameter (as seen in vLLM's 400 bodies for an over-long prompt)."""
    return OpenAIError(f"{message} (parameter={param}, value={value})", param=param)


def no_chat_template_error() -> OpenAIError:
    """vLLM's answer to a chat request for a tokenizer without a chat template (ChatTemplateResolutionError,
    a 400 BadRequestError; transformers >= 4.44 has no default template to fall back to)."""
    return OpenAIError(
        "As of transformers v4.44, default chat template is no longer allowed, so you must provide a chat "
        "template if the tokenizer does not define one."
    )


def context_length_error(max_model_len: int, max_tokens: int, prompt_tokens: int) -> OpenAIError:
    """An over-long request, in the wording of vLLM's TokenizeParams length check (vllm/renderers/params.py
    of the 0.1x releases: `max_input_tokens = max_model_len - max_tokens`; a prompt is tokenized up to one
    token past it, hence "at least")."""
    limit = max_model_len - max_tokens
    counted = min(prompt_tokens, limit + 1)
    at_least = "at least " if counted == limit + 1 else ""
    return validation_error(
        f"This model's maximum context length is {max_model_len} tokens. However, you requested "
        f"{max_tokens} output tokens and your prompt contains {at_least}{counted} input tokens, for a total "
        f"of {at_least}{counted + max_tokens} tokens. Please reduce the length of the input prompt or the "
        "number of requested output tokens.",
        "input_tokens",
        counted,
    )


@dataclass
class Sampling:
    """The sampling parameters of one request (vLLM's SamplingParams, the part the stand-in implements)."""

    max_tokens: int | None = None
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    seed: int | None = None
    stop: list[str] = field(default_factory=list)
    ignore_eos: bool = False
    skip_special_tokens: bool = True

    @property
    def greedy(self) -> bool:
        return self.temperature < SAMPLING_EPS


def _number(body: dict[str, Any], name: str, kind: type, default: Any) -> Any:
    value = body.get(name)
    if value is None:
        return default
    ok = isinstance(value, (int, float)) if kind is float else isinstance(value, int)
    if isinstance(value, bool) or not ok:
        raise OpenAIError(f"{name}={value!r}: accepted: a {kind.__name__}", param=name)
    return kind(value)


def parse_sampling(body: dict[str, Any], max_tokens_field: str = "max_tokens") -> Sampling:
    """Check the sampling fields of a request body, each error naming its field."""
    for name, default in UNSUPPORTED.items():
        if name in body and body[name] not in (default, None):
            raise OpenAIError(
                f"{name}={body[name]!r}: this local stand-in of the vLLM container does not implement {name} "
                f"(accepted: {default!r} or leaving it out); vLLM on the endpoint does",
                param=name,
            )
    max_tokens = _number(body, max_tokens_field, int, None)
    if max_tokens is None and max_tokens_field != "max_tokens":
        max_tokens, max_tokens_field = _number(body, "max_tokens", int, None), "max_tokens"
    if max_tokens is not None and max_tokens < 1:
        raise validation_error(
            f"max_tokens must be at least 1, got {max_tokens}.", max_tokens_field, max_tokens
        )
    temperature = _number(body, "temperature", float, 1.0)
    if temperature < 0:
        raise validation_error(
            f"temperature must be non-negative, got {temperature}.", "temperature", temperature
        )
    top_p = _number(body, "top_p", float, 1.0)
    if not 0 < top_p <= 1:
        raise validation_error(f"top_p must be in (0, 1], got {top_p}.", "top_p", top_p)
    top_k = _number(body, "top_k", int, 0)
    stop = body.get("stop") or []
    if isinstance(stop, str):
        stop = [stop]
    if not isinstance(stop, list) or not all(isinstance(s, str) for s in stop):
        raise OpenAIError(f"stop={stop!r}: accepted: a string or a list of strings", param="stop")
    return Sampling(
        max_tokens=max_tokens,
        temperature=temperature,
        top_p=top_p,
        top_k=-1 if top_k == 0 else top_k,
        seed=_number(body, "seed", int, None),
        stop=[s for s in stop if s],
        ignore_eos=bool(body.get("ignore_eos", False)),
        skip_special_tokens=bool(body.get("skip_special_tokens", True)),
    )


def chat_messages(body: dict[str, Any]) -> list[dict[str, str]]:
    """The conversation as the chat template sees it: each content a string (vLLM's "string" content format
    joins the text parts of a list content with newlines)."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise OpenAIError("messages: accepted: a non-empty list of {role, content} objects", param="messages")
    out = []
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise OpenAIError(
                f"messages[{i}]: accepted: an object with a role and a content", param="messages"
            )
        content = message.get("content")
        if isinstance(content, list):
            parts = []
            for part in content:
                if not isinstance(part, dict) or part.get("type") != "text":
                    raise OpenAIError(
                        f"messages[{i}].content: only text parts are accepted by this text-only model, got {part!r}",
                        param="messages",
                    )
                parts.append(str(part.get("text", "")))
            content = "\n".join(parts)
        elif content is None:
            content = ""
        elif not isinstance(content, str):
            raise OpenAIError(
                f"messages[{i}].content: accepted: a string or a list of text parts", param="messages"
            )
        out.append({"role": message["role"], "content": content})
    return out


def completion_prompts(body: dict[str, Any]) -> list[str | list[int]]:
    """`prompt` as vLLM's completions API takes it: a string, a list of strings, token ids, or lists of them."""
    prompt = body.get("prompt")
    if isinstance(prompt, str):
        return [prompt]
    if isinstance(prompt, list) and prompt:
        if all(isinstance(p, int) and not isinstance(p, bool) for p in prompt):
            return [list(prompt)]
        if all(isinstance(p, str) for p in prompt):
            return list(prompt)
        if all(isinstance(p, list) and p and all(isinstance(t, int) for t in p) for p in prompt):
            return [list(p) for p in prompt]
    raise OpenAIError(
        "prompt: accepted: a string, a list of strings, a list of token ids or a list of such lists",
        param="prompt",
    )


def new_id(prefix: str) -> str:
    """vLLM's ids: `chatcmpl-<hex>` and `cmpl-<hex>` (random_uuid())."""
    return f"{prefix}-{uuid.uuid4().hex}"


def usage(prompt_tokens: int, completion_tokens: int) -> dict[str, Any]:
    return {
        "prompt_tokens": prompt_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
        "completion_tokens": completion_tokens,
        "prompt_tokens_details": None,
    }


def response(
    kind: str,
    id_: str,
    model: str,
    choices: list[dict[str, Any]],
    use: dict[str, Any] | None,
    chunk: bool = False,
) -> dict[str, Any]:
    """A response object ("chat.completion", "chat.completion.chunk", "text_completion"). A streamed chunk
    carries usage only when given (vLLM writes chunks with `exclude_unset=True`)."""
    out: dict[str, Any] = {"id": id_, "object": kind, "created": int(time.time()), "model": model}
    out["choices"] = choices
    if use is not None or not chunk:
        out["usage"] = use
    return out


def sse(data: dict[str, Any] | str) -> bytes:
    """One Server-Sent Event as vLLM writes it: `data: <json>` and a blank line."""
    text = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return f"data: {text}\n\n".encode()


DONE = sse("[DONE]")


def model_list(name: str, root: str, max_model_len: int) -> dict[str, Any]:
    """GET /v1/models: vLLM's ModelList with one ModelCard."""
    card = {
        "id": name,
        "object": "model",
        "created": int(time.time()),
        "owned_by": "vllm",
        "root": root,
        "parent": None,
        "max_model_len": max_model_len,
        "permission": [],
    }
    return {"object": "list", "data": [card]}
