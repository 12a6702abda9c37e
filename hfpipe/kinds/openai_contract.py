"""The request contract of the `vllm` serving kind: what vLLM's OpenAI-compatible server accepts, and how it
refuses the rest, for the version the AWS vLLM container pins (stacks/dlc_images.json: vLLM 0.14.0).

Written once, here, and used by all three that need it: `hfpipe invoke`'s check before sending, local mode's
stand-in for the server (hfpipe.local.serving.openai_endpoint) and Plan's check of a recipe's sample request
(hfpipe.core.recipe.sample_request). Stdlib only, like the rest of hfpipe.kinds, so the Plan Lambda carries it.

The rules are vLLM 0.14.0's, read in its wheel (vllm-0.14.0-cp38-abi3-manylinux_2_31_x86_64.whl on PyPI);
each names where it comes from. Files, all under vllm/:

- entrypoints/openai/protocol.py: `ChatCompletionRequest`, `CompletionRequest`, `StreamOptions` (the fields
  and their types; their `model_validator`s), `ErrorResponse`/`ErrorInfo` (the error body);
- sampling_params.py: `SamplingParams._verify_args` and `__post_init__` (the ranges; seed -1 is "random");
- entrypoints/openai/serving_engine.py: `create_error_response` (a ValueError, TypeError or RuntimeError is a
  400 "BadRequestError", a VLLMValidationError names its `param`), `_check_model` (404), `_validate_input`
  (the context length);
- entrypoints/openai/api_server.py: `validation_exception_handler` (a request that fails its model's
  validation on a /v1 route: 400, type "Bad Request"), `http_exception_handler`;
- entrypoints/openai/utils.py: `validate_json_request` (a Content-Type other than application/json is a 400);
- entrypoints/sagemaker/routes.py: `invocations` (a body on /invocations is tried as ChatCompletionRequest,
  then CompletionRequest; one that fits neither is a 400 "Cannot find suitable handler for request");
- entrypoints/openai/serving_chat.py and serving_completion.py: `create_chat_completion` (tool_choice
  "auto" or named needs a tool parser the container does not configure), `create_completion` (suffix);
- v1/engine/input_processor.py: `_validate_model_input` (token ids beyond the vocabulary, empty prompts).

Where this contract is narrower than vLLM it says so (NARROWER) and docs/vllm.md ("The request contract")
lists it: a refusal here that vLLM would have answered is a choice, never an accident.

Over 400 lines, as one module on purpose: it is one vLLM release's request rules, which a version bump
rereads against vLLM's source in one sitting; split, a rule would be easy to miss.

`check(body, route, served)` returns the `Checked` request or raises `ContractError`, which carries vLLM's
status and error body (`{"error": {"message", "type", "param", "code"}}`, ErrorResponse in 0.14.0).
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

#: The vLLM release whose rules these are (the AWS vLLM DLC the `vllm` kind pins).
VLLM_VERSION = "0.14.0"
INVOCATIONS, CHAT_ROUTE, COMPLETION_ROUTE = "/invocations", "/v1/chat/completions", "/v1/completions"
#: The request types vLLM's SageMaker router tries for an /invocations body, in its order.
INVOCATION_TYPES = ("ChatCompletionRequest", "CompletionRequest")
#: SamplingParams: a temperature below this is greedy decoding (`_SAMPLING_EPS`).
SAMPLING_EPS = 1e-5
_LONG = 2**63  # the seed's bounds: torch.long (protocol.py, `seed: Field(ge=_LONG_INFO.min, le=...max)`)
#: NARROWER: roles vLLM passes to the chat template (its CustomChatCompletionMessageParam takes any string);
#: these are OpenAI's, the ones a chat template is written for.
ROLES = ("system", "developer", "user", "assistant", "tool", "function")
JSON = "application/json"


class ContractError(ValueError):
    """A request the server refuses: its HTTP status, the error type and message, the parameter named."""

    def __init__(
        self, message: str, param: str | None = None, status: int = 400, err_type: str = "BadRequestError"
    ) -> None:
        super().__init__(message)
        self.message, self.param, self.status, self.err_type = message, param, status, err_type

    def body(self) -> dict[str, Any]:
        """vLLM 0.14.0's ErrorResponse (protocol.py: `ErrorResponse(error=ErrorInfo(...))`)."""
        return {
            "error": {
                "message": self.message,
                "type": self.err_type,
                "param": self.param,
                "code": self.status,
            }
        }


class SchemaError(ContractError):
    """A body that fails its request model's validation (pydantic's, a `model_validator`'s): on /invocations
    the router then finds no request type for it; on a /v1 route FastAPI's handler answers it."""


def validation_error(message: str, param: str, value: Any = None, *, schema: bool = False) -> ContractError:
    """vLLM's VLLMValidationError as its server answers it (vllm/exceptions.py: str() appends
    `(parameter=..., value=...)`; create_error_response, or on a /v1 route validation_exception_handler,
    sets `param`). `schema`: raised by a request model's validator."""
    extras = [f"parameter={param}"] + ([f"value={value}"] if value is not None else [])
    return (SchemaError if schema else ContractError)(f"{message} ({', '.join(extras)})", param=param)


# --- the fields -------------------------------------------------------------------------------------------

# Each field of ChatCompletionRequest / CompletionRequest (protocol.py, 0.14.0) with the JSON type it takes
# and whether null is accepted (the annotation's `| None`). NARROWER: JSON types are taken as written
# (pydantic's lax mode would also turn "5" into 5 or 1.0 into 1), and a name outside these lists is refused
# (vLLM logs "fields were present in the request but ignored" and goes on, so a misspelt max_token would
# silently be the default).
_SHARED: dict[str, tuple[str, bool]] = {
    "model": ("str", True),
    "frequency_penalty": ("float", True),
    "logit_bias": ("object", True),
    "max_tokens": ("int", True),
    "presence_penalty": ("float", True),
    "response_format": ("object", True),
    "seed": ("int", True),
    "stop": ("stop", True),
    "stream": ("bool", True),
    "stream_options": ("object", True),
    "temperature": ("float", True),
    "top_p": ("float", True),
    "user": ("str", True),
    "use_beam_search": ("bool", False),
    "top_k": ("int", True),
    "min_p": ("float", True),
    "repetition_penalty": ("float", True),
    "length_penalty": ("float", False),
    "stop_token_ids": ("ints", True),
    "include_stop_str_in_output": ("bool", False),
    "ignore_eos": ("bool", False),
    "min_tokens": ("int", False),
    "skip_special_tokens": ("bool", False),
    "spaces_between_special_tokens": ("bool", False),
    "truncate_prompt_tokens": ("int", True),
    "prompt_logprobs": ("int", True),
    "allowed_token_ids": ("ints", True),
    "add_special_tokens": ("bool", False),
    "structured_outputs": ("object", True),
    "priority": ("int", False),
    "request_id": ("str", False),
    "logits_processors": ("list", True),
    "return_tokens_as_token_ids": ("bool", True),
    "return_token_ids": ("bool", True),
    "cache_salt": ("str", True),
    "kv_transfer_params": ("object", True),
    "vllm_xargs": ("object", True),
}
CHAT_FIELDS: dict[str, tuple[str, bool]] = {
    **_SHARED,
    "messages": ("list", False),
    "logprobs": ("bool", True),
    "top_logprobs": ("int", True),
    "max_completion_tokens": ("int", True),
    "n": ("int", True),
    "tools": ("list", True),
    "tool_choice": ("any", True),
    "reasoning_effort": ("str", True),
    "include_reasoning": ("bool", False),
    "parallel_tool_calls": ("bool", True),
    "bad_words": ("strs", False),
    "echo": ("bool", False),
    "add_generation_prompt": ("bool", False),
    "continue_final_message": ("bool", False),
    "documents": ("list", True),
    "chat_template": ("str", True),
    "chat_template_kwargs": ("object", True),
    "mm_processor_kwargs": ("object", True),
}
COMPLETION_FIELDS: dict[str, tuple[str, bool]] = {
    **_SHARED,
    "prompt": ("any", True),
    "echo": ("bool", True),
    "logprobs": ("int", True),
    "n": ("int", False),
    "suffix": ("str", True),
    "prompt_embeds": ("any", True),
}
#: The defaults the server uses for a field left out (protocol.py's field defaults; sampling ones from
#: `_DEFAULT_SAMPLING_PARAMS`): a request that sets a field to its default asks for nothing different.
DEFAULTS: dict[str, Any] = {
    "n": 1,
    "frequency_penalty": 0.0,
    "presence_penalty": 0.0,
    "repetition_penalty": 1.0,
    "min_p": 0.0,
    "length_penalty": 1.0,
    "min_tokens": 0,
    "use_beam_search": False,
    "echo": False,
    "logprobs": False,
    "top_logprobs": 0,
    "include_stop_str_in_output": False,
    "spaces_between_special_tokens": True,
    "stop_token_ids": [],
    "bad_words": [],
    "tool_choice": "none",
    "priority": 0,
    "include_reasoning": True,
    "parallel_tool_calls": True,
}
#: The row of STAND_IN_DIFFERENCES for a field that is none of the request model's.
UNKNOWN_FIELD = "(a field of neither request model)"
#: Where local mode's stand-in for vLLM 0.14.0's server (hfpipe.local.serving.openai_endpoint) and this
#: contract answer differently from vLLM: the one table of it. Read by this contract (an unknown field's
#: refusal quotes its row) and by the stand-in (a request setting a field of a row to other than its default
#: is answered 501 NotImplementedError quoting the row; every other field of the request models it serves);
#: docs/vllm.md and docs/adapters.md point here. Each row: what vLLM does, then what is done here instead.
STAND_IN_DIFFERENCES: dict[str, str] = {
    UNKNOWN_FIELD: "vLLM logs 'The following fields were present in the request but ignored' and answers "
    "(protocol.py, OpenAIBaseModel); refused here with 400 by `hfpipe invoke`, Plan and the stand-in alike, "
    "so a misspelt max_token is not silently the default",
    **dict.fromkeys(
        ("n", "use_beam_search", "length_penalty"),
        "vLLM returns n choices, or beam search's; the stand-in generates one sequence per prompt: 501",
    ),
    **dict.fromkeys(
        (
            "logprobs",
            "top_logprobs",
            "prompt_logprobs",
            "echo",
            "return_token_ids",
            "return_tokens_as_token_ids",
        ),
        "vLLM returns the tokens' log probabilities, their ids or the echoed prompt; the stand-in computes none: "
        "501",
    ),
    **dict.fromkeys(
        ("response_format", "structured_outputs", "tools", "allowed_token_ids", "bad_words", "logit_bias"),
        "vLLM constrains decoding (structured outputs, tools, token masks and biases); the stand-in samples "
        "unconstrained: 501",
    ),
    **dict.fromkeys(
        (
            "frequency_penalty",
            "presence_penalty",
            "repetition_penalty",
            "min_p",
            "min_tokens",
            "stop_token_ids",
        ),
        "vLLM applies these sampling settings; the stand-in samples with temperature, top_p, top_k, seed, stop "
        "and max_tokens only: 501",
    ),
    **dict.fromkeys(
        ("include_stop_str_in_output", "spaces_between_special_tokens", "truncate_prompt_tokens", "suffix"),
        "vLLM changes the prompt or the text by these; the stand-in does not: 501",
    ),
    **dict.fromkeys(
        ("chat_template", "documents", "mm_processor_kwargs", "prompt_embeds", "reasoning_effort"),
        "vLLM takes another template, documents, multimodal or embedded inputs, reasoning settings; the stand-in "
        "renders the model's own template over text: 501",
    ),
    **dict.fromkeys(
        ("logits_processors", "kv_transfer_params", "vllm_xargs", "stream_options.continuous_usage_stats"),
        "vLLM's engine extras and per-chunk usage; the stand-in has none: 501",
    ),
}
_KINDS = {
    "int": "an integer",
    "float": "a number",
    "bool": "true or false",
    "str": "a string",
    "object": "a JSON object",
    "list": "a list",
    "ints": "a list of integers",
    "strs": "a list of strings",
    "stop": "a string or a list of strings",
}


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _typed(kind: str, value: Any) -> bool:
    if kind == "int":
        return _is_int(value)
    if kind == "float":
        return _is_int(value) or isinstance(value, float)
    if kind == "bool":
        return isinstance(value, bool)
    if kind == "str":
        return isinstance(value, str)
    if kind == "object":
        return isinstance(value, dict)
    if kind == "list":
        return isinstance(value, list)
    if kind == "ints":
        return isinstance(value, list) and all(_is_int(v) for v in value)
    if kind == "strs":
        return isinstance(value, list) and all(isinstance(v, str) for v in value)
    if kind == "stop":
        return isinstance(value, str) or _typed("strs", value)
    return True


def _finite(value: Any, path: str) -> None:
    """NARROWER: NaN and +-Infinity refused anywhere (Python's json, and so vLLM's server, reads `NaN` and
    `Infinity`; pydantic's float takes them; `temperature < 0` is false for NaN, so vLLM would sample with
    NaN logits)."""
    if isinstance(value, float) and not math.isfinite(value):
        raise SchemaError(f"{path}: {value!r} is not accepted; accepted: a finite number")
    if isinstance(value, dict):
        for key, sub in value.items():
            _finite(sub, f"{path}.{key}")
    elif isinstance(value, list):
        for i, sub in enumerate(value):
            _finite(sub, f"{path}[{i}]")


def _text(value: str, path: str) -> None:
    """NARROWER: a lone surrogate ("\\ud800", which JSON's \\u escapes can carry) is refused: no tokenizer can
    encode it as UTF-8 (vLLM answers the tokenizer's UnicodeEncodeError as a 400 from its preprocessing)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as err:
        raise SchemaError(
            f"{path}: a lone surrogate {value[err.start]!r} at character {err.start} is not accepted; "
            "accepted: text that encodes as UTF-8"
        ) from None


def _strings(value: Any, path: str) -> None:
    if isinstance(value, str):
        _text(value, path)
    elif isinstance(value, dict):
        for key, sub in value.items():
            _strings(sub, f"{path}.{key}")
    elif isinstance(value, list):
        for i, sub in enumerate(value):
            _strings(sub, f"{path}[{i}]")


def _fields(body: dict[str, Any], fields: Mapping[str, tuple[str, bool]], kind: str) -> None:
    unknown = sorted(set(body) - set(fields))
    if unknown:
        close = difflib.get_close_matches(unknown[0], sorted(fields), n=1)
        raise SchemaError(
            f"{unknown[0]}: not a field of vLLM {VLLM_VERSION}'s {kind} ({STAND_IN_DIFFERENCES[UNKNOWN_FIELD]}); "
            f"{f'did you mean {close[0]}? ' if close else ''}accepted: its fields (openai_contract."
            f"{'CHAT' if kind.startswith('Chat') else 'COMPLETION'}_FIELDS), e.g. max_tokens, temperature, "
            "top_p, stop, seed, stream"
        )
    for name, value in body.items():
        type_, nullable = fields[name]
        if value is None and nullable:
            continue
        if value is None or not _typed(type_, value):
            accepted = _KINDS.get(type_, "a value") + (" or null" if nullable else "")
            raise SchemaError(f"{name}: {_shown(value)} is not accepted; accepted: {accepted}")


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


# --- the request models' validators (protocol.py) -----------------------------------------------------------


def _messages(value: list[Any]) -> list[dict[str, str]]:
    """The conversation as the chat template sees it: each content a string. vLLM's "string" content
    format joins a list content's text parts with newlines (entrypoints/chat_utils.py)."""
    if not value:  # NARROWER: vLLM renders the template over nothing; no model here is trained for that
        raise SchemaError("messages: [] is not accepted; accepted: a list of at least one message")
    out = []
    for i, message in enumerate(value):
        path = f"messages[{i}]"
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise SchemaError(f"{path}: {_shown(message)} is not accepted; accepted: an object with a role")
        if message["role"] not in ROLES:
            raise SchemaError(
                f"{path}.role: {message['role']!r} is not accepted; accepted: one of {list(ROLES)}"
            )
        content = message.get("content")
        if isinstance(content, list):
            texts = []
            for j, part in enumerate(content):
                # NARROWER: text parts only; the models this project trains read no images or audio (vLLM
                # refuses those for a text-only model too, later).
                if (
                    not isinstance(part, dict)
                    or part.get("type") != "text"
                    or not isinstance(part.get("text"), str)
                ):
                    raise SchemaError(
                        f"{path}.content[{j}]: {_shown(part)} is not accepted; accepted: a text part "
                        '{"type": "text", "text": "..."}'
                    )
                texts.append(part["text"])
            content = "\n".join(texts)
        elif content is None:
            content = ""
        elif not isinstance(content, str):
            raise SchemaError(
                f"{path}.content: {_shown(content)} is not accepted; accepted: a string, a list of text parts "
                "or null"
            )
        out.append({"role": message["role"], "content": content})
    return out


def _prompts(value: Any) -> list[str | list[int]]:
    """`prompt`: a string, a list of strings, token ids or a list of token-id lists (CompletionRequest)."""
    if isinstance(value, str) and value:
        return [value]
    if isinstance(value, list) and value:
        if all(_is_int(p) for p in value):
            return [list(value)]
        if all(isinstance(p, str) for p in value):
            return list(value)
        if all(isinstance(p, list) and p and all(_is_int(t) for t in p) for p in value):
            return [list(p) for p in value]
    if value is None or value == "":  # validate_prompt_and_prompt_embeds
        raise SchemaError("Either prompt or prompt_embeds must be provided and non-empty.")
    raise SchemaError(
        f"prompt: {_shown(value)} is not accepted; accepted: a non-empty string, a list of strings, a list of "
        "token ids or a list of such lists"
    )


def _tool_choice(body: dict[str, Any]) -> None:
    """check_tool_usage (ChatCompletionRequest), then create_chat_completion's tool-parser rule."""
    choice = body.get("tool_choice", "auto" if body.get("tools") else "none")
    if choice in (None, "none"):
        return
    if body.get("tools") is None:
        raise SchemaError("When using `tool_choice`, `tools` must be set.")
    if choice not in ("auto", "required") and not isinstance(choice, dict):
        raise SchemaError(
            f'Invalid value for `tool_choice`: {choice}! Only named tools, "none", "auto" or "required" are '
            "supported."
        )
    if choice == "required" and body["tools"] == []:
        return  # OpenAI's behaviour: "required" over no tools is "none"
    # The AWS container starts vLLM without --enable-auto-tool-choice / --tool-call-parser.
    if choice == "auto":
        raise ContractError(
            '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set'
        )
    raise ContractError(f'tool_choice="{choice}" requires --tool-call-parser to be set')


def _validators(body: dict[str, Any], chat: bool) -> None:
    if body.get("stream_options") and not body.get("stream"):  # validate_stream_options
        raise validation_error(
            "Stream options can only be defined when `stream=True`.", "stream_options", schema=True
        )
    options = body.get("stream_options") or {}
    for name, value in options.items():
        if name not in ("include_usage", "continuous_usage_stats") or not isinstance(value, bool | None):
            raise SchemaError(
                f"stream_options.{name}: {_shown(value)} is not accepted; accepted: include_usage and "
                "continuous_usage_stats, each true, false or null"
            )
    prompt_logprobs = body.get("prompt_logprobs")  # check_logprobs
    if prompt_logprobs is not None:
        if body.get("stream") and (prompt_logprobs > 0 or prompt_logprobs == -1):
            raise validation_error(
                "`prompt_logprobs` are not available when `stream=True`.", "prompt_logprobs", schema=True
            )
        if prompt_logprobs < -1:
            raise validation_error(
                "`prompt_logprobs` must be a positive value or -1.",
                "prompt_logprobs",
                prompt_logprobs,
                schema=True,
            )
    if chat:
        top = body.get("top_logprobs")
        if top is not None and top < -1:
            raise validation_error(
                "`top_logprobs` must be a positive value or -1.", "top_logprobs", top, schema=True
            )
        if top is not None and (top == -1 or top > 0) and not body.get("logprobs"):
            raise validation_error(
                "when using `top_logprobs`, `logprobs` must be set to true.", "top_logprobs", schema=True
            )
        _tool_choice(body)
        if body.get("continue_final_message") and body.get(
            "add_generation_prompt", True
        ):  # check_generation_prompt
            raise SchemaError("Cannot set both `continue_final_message` and `add_generation_prompt` to True.")
    elif body.get("logprobs") is not None and body["logprobs"] < 0:
        raise validation_error(
            "`logprobs` must be a positive value.", "logprobs", body["logprobs"], schema=True
        )
    salt = body.get("cache_salt")
    if salt is not None and not salt:  # check_cache_salt_support
        raise SchemaError("Parameter 'cache_salt' must be a non-empty string if provided.")
    if not -1 <= (body.get("truncate_prompt_tokens") or 0) < _LONG:
        raise SchemaError(
            f"truncate_prompt_tokens: {body['truncate_prompt_tokens']} is not accepted; accepted: at least -1"
        )
    seed = body.get("seed")
    if seed is not None and not -_LONG <= seed < _LONG:
        raise SchemaError(f"seed: {seed} is not accepted; accepted: an integer from {-_LONG} to {_LONG - 1}")


# --- the sampling parameters (sampling_params.py, SamplingParams) -------------------------------------------


@dataclass(frozen=True)
class Sampling:
    """The sampling parameters of one request as SamplingParams holds them (defaults applied)."""

    max_tokens: int | None
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0  # 0 or -1: no top-k
    min_p: float = 0.0
    seed: int | None = None
    stop: tuple[str, ...] = ()
    ignore_eos: bool = False
    skip_special_tokens: bool = True
    n: int = 1

    @property
    def greedy(self) -> bool:
        return self.temperature < SAMPLING_EPS


def _value(body: dict[str, Any], name: str) -> Any:
    value = body.get(name)
    return DEFAULTS.get(name) if value is None else value


def _sampling(body: dict[str, Any], chat: bool) -> Sampling:
    """SamplingParams._verify_args, in its order; `to_sampling_params` fills what the request left out."""
    max_tokens = (
        (body.get("max_completion_tokens") or body.get("max_tokens")) if chat else body.get("max_tokens", 16)
    )
    n = _value(body, "n")
    if n < 1:
        raise ContractError(f"n must be at least 1, got {n}.")
    for name in ("presence_penalty", "frequency_penalty"):
        if not -2.0 <= _value(body, name) <= 2.0:
            raise ContractError(f"{name} must be in [-2, 2], got {float(_value(body, name))}.")
    if _value(body, "repetition_penalty") <= 0.0:
        raise ContractError(
            f"repetition_penalty must be greater than zero, got {float(_value(body, 'repetition_penalty'))}."
        )
    temperature = float(body["temperature"]) if body.get("temperature") is not None else 1.0
    if temperature < 0.0:
        raise validation_error(
            f"temperature must be non-negative, got {temperature}.", "temperature", temperature
        )
    top_p = float(body["top_p"]) if body.get("top_p") is not None else 1.0
    if not 0.0 < top_p <= 1.0:
        raise validation_error(f"top_p must be in (0, 1], got {top_p}.", "top_p", top_p)
    top_k = body["top_k"] if body.get("top_k") is not None else 0
    if top_k < -1:
        raise ContractError(f"top_k must be 0 (disable), or at least 1, got {top_k}.")
    min_p = float(_value(body, "min_p"))
    if not 0.0 <= min_p <= 1.0:
        raise ContractError(f"min_p must be in [0, 1], got {min_p}.")
    if max_tokens is not None and max_tokens < 1:
        raise validation_error(f"max_tokens must be at least 1, got {max_tokens}.", "max_tokens", max_tokens)
    min_tokens = _value(body, "min_tokens")
    if min_tokens < 0:
        raise ContractError(f"min_tokens must be greater than or equal to 0, got {min_tokens}.")
    if max_tokens is not None and min_tokens > max_tokens:
        raise ContractError(
            f"min_tokens must be less than or equal to max_tokens={max_tokens}, got {min_tokens}."
        )
    stop = body.get("stop") or []
    stops = (stop,) if isinstance(stop, str) else tuple(stop)
    if any(not s for s in stops):
        raise ContractError("stop cannot contain an empty string.")
    if n > 1 and temperature < SAMPLING_EPS:
        raise ContractError(f"n must be 1 when using greedy sampling, got {n}.")
    if _value(body, "priority") != 0:  # the container's scheduler is first-come-first-served
        raise ContractError(f"Got priority {body['priority']} but Priority scheduling is not enabled.")
    seed = body.get("seed")
    return Sampling(
        max_tokens=max_tokens,
        temperature=temperature,
        top_p=top_p,
        top_k=top_k,
        min_p=min_p,
        seed=None if seed == -1 else seed,  # __post_init__: seed -1 is a random seed
        stop=stops,
        ignore_eos=bool(body.get("ignore_eos", False)),
        skip_special_tokens=bool(body.get("skip_special_tokens", True)),
        n=n,
    )


# --- the whole request ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Served:
    """What the server knows that a request is also checked against; None (or empty): not known here."""

    model_names: tuple[str, ...] = ()
    max_model_len: int | None = None
    vocab_size: int | None = None


@dataclass(frozen=True)
class Checked:
    """A request the contract accepts: its kind and what the server generates from."""

    kind: str  # "chat" or "completion"
    body: dict[str, Any]
    sampling: Sampling
    messages: list[dict[str, str]] = field(default_factory=list)
    prompts: list[str | list[int]] = field(default_factory=list)

    @property
    def stream(self) -> bool:
        return bool(self.body.get("stream"))

    @property
    def include_usage(self) -> bool:
        # should_include_usage (entrypoints/utils.py): any stream_options object, include_usage default true
        options = self.body.get("stream_options")
        return self.stream and options is not None and options.get("include_usage", True) is True

    def set_fields(self) -> dict[str, Any]:
        """The fields the request sets to something other than the server's default."""
        return {k: v for k, v in self.body.items() if v is not None and DEFAULTS.get(k, object()) != v}


def media_type(content_type: str | None) -> str:
    return (content_type or "").split(";", 1)[0].strip().lower()


def check_content_type(content_type: str | None) -> None:
    """validate_json_request: any body but application/json (a missing Content-Type too) is a 400."""
    if media_type(content_type) != JSON:
        raise SchemaError("1 validation error:\n  Unsupported Media Type: Only 'application/json' is allowed")


def check(body: Any, route: str = INVOCATIONS, served: Served | None = None) -> Checked:
    """The request `body` (decoded JSON) as the server on `route` takes it, or the ContractError it answers.

    On /invocations a body is a chat request when it has `messages`, else a completion request; one that
    fails its model's validation gets the router's "Cannot find suitable handler" 400 (the router tries both
    types and reports neither's reason; this message adds it). On a /v1 route the same failure is FastAPI's
    400 "Bad Request".
    """
    served = served or Served()
    chat = route == CHAT_ROUTE or (route == INVOCATIONS and isinstance(body, dict) and "messages" in body)
    try:
        checked = _check(body, chat)
    except SchemaError as err:
        if route == INVOCATIONS:
            raise ContractError(
                f"Cannot find suitable handler for request. Expected one of: {list(INVOCATION_TYPES)} "
                f"({INVOCATION_TYPES[0 if chat else 1]}: {err.message})"
            ) from None
        raise ContractError(err.message, param=err.param, err_type="Bad Request") from None
    model = body.get("model")
    if served.model_names and model and model not in served.model_names:  # serving_engine._check_model
        raise ContractError(
            f"The model `{model}` does not exist.", param="model", status=404, err_type="NotFoundError"
        )
    if served.vocab_size is not None:
        for ids in (p for p in checked.prompts if isinstance(p, list)):
            check_token_ids(ids, served.vocab_size)
    if served.max_model_len is not None:
        check_length(1, checked.sampling.max_tokens, served.max_model_len, at_least=True)
    return checked


def _check(body: Any, chat: bool) -> Checked:
    if not isinstance(body, dict):
        raise SchemaError(f"body: {_shown(body)} is not accepted; accepted: a JSON object")
    if chat and "messages" not in body:
        raise SchemaError("messages: required; accepted: a list of messages")
    _finite(body, "body")
    _strings(body, "body")
    prompts = [] if chat else _prompts(body.get("prompt"))  # a body with neither is told so first
    _fields(
        body,
        CHAT_FIELDS if chat else COMPLETION_FIELDS,
        "ChatCompletionRequest" if chat else "CompletionRequest",
    )
    messages = _messages(body["messages"]) if chat else []
    if not chat and body.get("prompt_embeds") is not None:  # NARROWER: embeddings need --enable-prompt-embeds
        raise SchemaError(
            "prompt_embeds: not accepted; accepted: prompt (the container serves text and token ids)"
        )
    _validators(body, chat)
    if not chat and body.get("suffix") is not None:  # create_completion
        raise ContractError("suffix is not currently supported")
    for prompt in prompts:
        if isinstance(prompt, list) and min(prompt) < 0:  # NARROWER: vLLM checks only the largest id
            raise ContractError(f"Token id {min(prompt)} is out of vocabulary")
    return Checked(
        kind="chat" if chat else "completion",
        body=body,
        sampling=_sampling(body, chat),
        messages=messages,
        prompts=prompts,
    )


def check_request(body: Any, max_model_len: int | None = None) -> Checked:
    """The `vllm` kind's request_contract hook: `body` as /invocations takes it, its max_tokens held to the
    served context where known (the prompt counts at least one token)."""
    return check(body, INVOCATIONS, Served(max_model_len=max_model_len))


def check_token_ids(ids: list[int], vocab_size: int) -> None:
    """input_processor._validate_model_input: an id beyond the vocabulary is a 400 before generation."""
    if ids and max(ids) > vocab_size - 1:
        raise ContractError(f"Token id {max(ids)} is out of vocabulary")
    if not ids:
        raise ContractError("The decoder prompt cannot be empty")


def check_length(
    prompt_tokens: int, max_tokens: int | None, max_model_len: int, *, at_least: bool = False
) -> int:
    """The tokens a request may generate (get_max_tokens: what it asks for, else what the context leaves),
    or serving_engine._validate_input's refusal. `at_least`: `prompt_tokens` is a lower bound (no tokenizer
    here), and the messages say so."""
    counted = f"at least {prompt_tokens}" if at_least else str(prompt_tokens)
    if prompt_tokens >= max_model_len:
        raise validation_error(
            f"This model's maximum context length is {max_model_len} tokens. However, your request has "
            f"{counted} input tokens. Please reduce the length of the input messages.",
            "input_tokens",
            prompt_tokens,
        )
    if max_tokens is not None and prompt_tokens + max_tokens > max_model_len:
        raise validation_error(
            f"'max_tokens' or 'max_completion_tokens' is too large: {max_tokens}. This model's maximum context "
            f"length is {max_model_len} tokens and your request has {counted} input tokens ({max_tokens} > "
            f"{max_model_len} - {prompt_tokens}).",
            "max_tokens",
            max_tokens,
        )
    return max_tokens if max_tokens is not None else max_model_len - prompt_tokens


def error_for(exc: BaseException) -> ContractError:
    """How vLLM's server answers an exception raised while it handles a request (serving_engine.py,
    `create_error_response`): a ValueError, TypeError, RuntimeError or OverflowError is the caller's 400, a
    NotImplementedError a 501, a jinja2 TemplateError a 400, anything else a 500 InternalServerError. Inside a
    stream the same body is one `data:` event, then `data: [DONE]` (serving_chat.py,
    `chat_completion_stream_generator`; serving_completion.py, `completion_stream_generator`)."""
    if isinstance(exc, ContractError):
        return exc
    message = str(exc)
    if isinstance(exc, NotImplementedError):
        return ContractError(message, status=501, err_type="NotImplementedError")
    if (
        isinstance(exc, ValueError | TypeError | RuntimeError | OverflowError)
        or type(exc).__name__ == "TemplateError"
    ):
        return ContractError(message)
    return ContractError(message, status=500, err_type="InternalServerError")


def prompt_texts(checked: Checked) -> list[str]:
    """The text a request's prompt is made of (each message's content, or each string prompt)."""
    if checked.kind == "chat":
        return [m["content"] for m in checked.messages]
    return [p for p in checked.prompts if isinstance(p, str)]
