"""Request checks for the `vllm` serving kind: OpenAI chat and completion bodies as vLLM's OpenAI-compatible
server takes them (vllm/entrypoints/openai/protocol.py: ChatCompletionRequest, CompletionRequest), checked
before a request is sent (`hfpipe invoke`) and by local mode's stand-in for the server. Stdlib only.

`parse_request(body)` returns ("chat", messages, params) or ("completion", prompt, params), or raises a
`request_checks.RequestError` naming the field, the value and what is accepted. Limits beyond vLLM's own
(which are the server's `--max-model-len` and the sampling ranges below) are this project's: a request
is refused here rather than after it reached a billed endpoint.

| field | accepted |
|---|---|
| messages | 1 to 256 objects {role: system, user or assistant; content: a non-empty string}, the last a user's |
| prompt | a non-empty string, or a list of 1 to 32 of them |
| max_tokens | 1 to 4096 |
| temperature | 0 to 2 (0: greedy); top_p in (0, 1]; presence/frequency_penalty -2 to 2 |
| n | 1 (one choice per request here) |
| stop | a string or up to 4 strings |
| stream | true or false (stream_options: {"include_usage": bool}); seed an integer; model a string |
"""

from __future__ import annotations

from typing import Any

from request_checks import RequestError, _accepts, real, text, whole

MAX_MESSAGES = 256
MAX_PROMPTS = 32
MAX_TOKENS = 4096
ROLES = ("system", "user", "assistant")
#: The fields vLLM's two request types share that this project checks; others are refused by name.
_COMMON = ("model", "max_tokens", "temperature", "top_p", "n", "stop", "stream", "stream_options", "seed")
_PENALTIES = ("presence_penalty", "frequency_penalty")
CHAT_FIELDS = ("messages", *_COMMON, *_PENALTIES)
COMPLETION_FIELDS = ("prompt", *_COMMON, *_PENALTIES)


def _messages(value: Any) -> list[dict[str, str]]:
    if not isinstance(value, list) or not 1 <= len(value) <= MAX_MESSAGES:
        raise _accepts("messages", value, f"a list of 1 to {MAX_MESSAGES} message objects")
    out = []
    for i, message in enumerate(value):
        field = f"messages[{i}]"
        if not isinstance(message, dict) or set(message) - {"role", "content", "name"}:
            raise _accepts(field, message, "an object with role and content (and optionally name)")
        if message.get("role") not in ROLES:
            raise _accepts(f"{field}.role", message.get("role"), f"one of {list(ROLES)}")
        out.append({"role": message["role"], "content": text(message.get("content"), f"{field}.content")})
    if out[-1]["role"] != "user":
        raise _accepts("messages", value, "a conversation whose last message is the user's")
    return out


def _prompt(value: Any) -> str | list[str]:
    if isinstance(value, list):
        if not 1 <= len(value) <= MAX_PROMPTS:
            raise _accepts("prompt", value, f"a string or a list of 1 to {MAX_PROMPTS} strings")
        return [text(p, f"prompt[{i}]") for i, p in enumerate(value)]
    return text(value, "prompt")


def _params(body: dict[str, Any]) -> dict[str, Any]:
    params: dict[str, Any] = {}
    if "model" in body:
        if not isinstance(body["model"], str) or not body["model"]:
            raise _accepts("model", body["model"], "the served model's name")
        params["model"] = body["model"]
    params["max_tokens"] = whole(body.get("max_tokens", 16), "max_tokens", 1, MAX_TOKENS)
    params["temperature"] = real(body.get("temperature", 1.0), "temperature", 0.0, 2.0)
    params["top_p"] = real(body.get("top_p", 1.0), "top_p", 0.0, 1.0, low_open=True)
    for name in _PENALTIES:
        params[name] = real(body.get(name, 0.0), name, -2.0, 2.0)
    params["n"] = whole(body.get("n", 1), "n", 1, 1)
    stop = body.get("stop")
    if stop is not None:
        stops = [stop] if isinstance(stop, str) else stop
        if not isinstance(stops, list) or not 1 <= len(stops) <= 4:
            raise _accepts("stop", stop, "a string or a list of up to 4 strings")
        params["stop"] = [text(s, "stop", 256) for s in stops]
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise _accepts("stream", stream, "true or false")
    params["stream"] = stream
    options = body.get("stream_options")
    if options is not None:
        if not stream or not isinstance(options, dict) or set(options) - {"include_usage"}:
            raise _accepts("stream_options", options, 'with stream true, {"include_usage": true or false}')
        params["include_usage"] = options.get("include_usage") is True
    if "seed" in body:
        params["seed"] = whole(body["seed"], "seed", 0, 2**63 - 1)
    return params


def parse_request(body: Any) -> tuple[str, Any, dict[str, Any]]:
    """("chat", messages, params) or ("completion", prompt, params) of an OpenAI request body."""
    if not isinstance(body, dict):
        raise _accepts("body", body, "a JSON object with messages (chat) or prompt (completion)")
    if ("messages" in body) == ("prompt" in body):
        raise RequestError(
            "request: exactly one of 'messages' (a chat completion) or 'prompt' (a completion) is accepted"
        )
    kind, fields = ("chat", CHAT_FIELDS) if "messages" in body else ("completion", COMPLETION_FIELDS)
    unknown = sorted(set(body) - set(fields))
    if unknown:
        raise RequestError(
            f"request fields {unknown} are not accepted for a {kind} request; accepted: {list(fields)}"
        )
    subject = _messages(body["messages"]) if kind == "chat" else _prompt(body["prompt"])
    return kind, subject, _params(body)
