"""The OpenAI-compatible response shapes of vLLM's server, as `OpenAIEndpoint` answers them.

Standard library only: the objects vLLM 0.14.0 returns (`chat.completion`, `chat.completion.chunk`,
`text_completion`, `list` of `model`; vllm/entrypoints/openai/protocol.py: ChatCompletionResponse,
CompletionStreamResponse, UsageInfo, ModelCard). What a request may be, and the error body of a refusal,
are the `vllm` kind's request contract (hfpipe/kinds/openai_contract.py), shared with `hfpipe invoke` and
Plan; `OpenAIError` is its ContractError.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

from hfpipe.kinds.openai_contract import ContractError as OpenAIError

__all__ = [
    "DONE",
    "OpenAIError",
    "model_list",
    "new_id",
    "no_chat_template_error",
    "response",
    "sse",
    "usage",
]


def no_chat_template_error() -> OpenAIError:
    """vLLM's answer to a chat request for a tokenizer without a chat template (ChatTemplateResolutionError,
    a 400 BadRequestError; transformers >= 4.44 has no default template to fall back to)."""
    return OpenAIError(
        "As of transformers v4.44, default chat template is no longer allowed, so you must provide a chat "
        "template if the tokenizer does not define one."
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
