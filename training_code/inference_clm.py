"""Inference handler for causal-LM summarization models, for the Hugging Face inference toolkit.

`run_clm.py` copies this file to `<model_dir>/code/inference.py`, where the toolkit looks for it inside
model.tar.gz, and saves the training prompt template next to the model (`hfpipe_prompt.json`). Requests (JSON,
or text/csv with a `dialogue` or `inputs` header row and one row):

    {"inputs": "Amanda: ...\nJerry: ...", "parameters": {"max_new_tokens": 64}}      # a dialogue
    {"inputs": {"dialogue": "Amanda: ..."}, "parameters": {"do_sample": true, "top_p": 0.9}}
    {"dialogue": "Amanda: ...\nJerry: ...", "parameters": {...}}
    {"inputs": "Summarize the chat dialogue:\n...\n---\nSummary:\n"}                  # a full prompt

A dialogue is rendered with the training template up to its response field, exactly as the model saw it in
training, so the endpoint serves what was trained. A string `inputs` is taken as a dialogue unless it already
starts with the template's fixed opening text (then it is a ready prompt, sent as is).

Generation: greedy (`do_sample` false) unless the request says otherwise; `max_new_tokens` defaults to
DEFAULT_MAX_NEW_TOKENS (128) and is capped at MAX_NEW_TOKENS_LIMIT (1024); only the parameters in
GENERATION_PARAMETERS are accepted (others are refused naming the accepted ones). Generation stops at the
model's EOS token, which training puts after every summary.

Response: `[{"generated_text": prompt + continuation, "summary": continuation}]`, the toolkit's
text-generation shape plus the extracted summary.

Stdlib + torch + transformers only: it runs in the inference container without extra requirements, under
the inference container's transformers (4.51.3) as well as the training container's (4.56.2).
"""

from __future__ import annotations

import json
import os
import string
from typing import Any

import request_checks

DEFAULT_PROMPT_TEMPLATE = "Summarize the chat dialogue:\n{dialogue}\n---\nSummary:\n{summary}{eos_token}"
DEFAULT_RESPONSE_FIELD = "summary"
PROMPT_FILE = "hfpipe_prompt.json"
# Generation parameters a request may set; anything else is refused with the list below.
GENERATION_PARAMETERS = {
    "do_sample": bool,
    "top_p": float,
    "top_k": int,
    "temperature": float,
    "max_new_tokens": int,
    "repetition_penalty": float,
    "num_beams": int,
    "no_repeat_ngram_size": int,
}
MAX_NEW_TOKENS_LIMIT = 1024
DEFAULT_MAX_NEW_TOKENS = 128


def template_fields(template: str) -> list[str]:
    """Named fields of a str.format template, in order."""
    return [name for _, name, _, _ in string.Formatter().parse(template) if name]


def prompt_prefix(template: str, response_field: str = DEFAULT_RESPONSE_FIELD) -> str:
    """The part of `template` before the response field: what the model sees when generating."""
    marker = "{" + response_field + "}"
    if marker not in template:
        raise ValueError(
            f"prompt_template {template!r} has no {marker} field; response_field={response_field!r} "
            "must name the field the model learns to generate"
        )
    return template.split(marker, 1)[0]


def render(template: str, record: dict[str, Any], eos_token: str = "") -> str:
    """Fill `template` from `record` (and `eos_token`); a missing field is an error naming it."""
    values = {"eos_token": eos_token}
    for name in template_fields(template):
        if name == "eos_token":
            continue
        if name not in record:
            raise KeyError(
                f"prompt_template field {name!r} is not in the record; available fields: {sorted(record)}"
            )
        values[name] = record[name]
    return template.format(**values)


def chat_template(template: str, response_field: str = DEFAULT_RESPONSE_FIELD) -> str | None:
    """A Jinja chat template that renders the last user message into `template` up to its response field,
    the prompt training used: saved with the tokenizer (`tokenizer.chat_template`), so a chat request to the
    vLLM container (which applies the tokenizer's template) or to its local stand-in sees what the model was
    trained on. None when that prefix has no single input field to put the message in.

    The fixed text goes in as Jinja string literals written by json.dumps (Jinja reads backslash escapes as
    Python does); `{eos_token}` becomes the `eos_token` variable transformers passes to every template.
    """
    prefix = prompt_prefix(template, response_field)
    if len([f for f in template_fields(prefix) if f != "eos_token"]) != 1:
        return None
    parts = []
    for literal, name, _, _ in string.Formatter().parse(prefix):
        if literal:
            parts.append("{{- " + json.dumps(literal) + " -}}")
        if name == "eos_token":
            parts.append("{{- eos_token -}}")
        elif name:
            parts.append("{{- ns.content -}}")
    return (
        "{%- set ns = namespace(content='') -%}"
        "{%- for message in messages -%}"
        "{%- if message['role'] == 'user' -%}{%- set ns.content = message['content'] -%}{%- endif -%}"
        "{%- endfor -%}" + "".join(parts)
    )


def dtype_keyword() -> str:
    """`from_pretrained`'s dtype keyword: `dtype` from transformers 4.56 (where `torch_dtype` is deprecated),
    `torch_dtype` before (4.51.3, the inference container's, refuses `dtype`)."""
    import transformers

    major, minor = (int(x) for x in transformers.__version__.split(".")[:2])
    return "dtype" if (major, minor) >= (4, 56) else "torch_dtype"


def as_prompt(prompt: str | dict[str, Any], template: str, response_field: str, eos_token: str) -> str:
    """The text the model continues: a dialogue (string or record) rendered with the training template up
    to its response field, or a string that already starts with the template's opening, as is."""
    prefix = prompt_prefix(template, response_field)
    if isinstance(prompt, dict):
        return render(prefix, prompt, eos_token)
    opening = prefix.split("{", 1)[0]
    inputs = [f for f in template_fields(prefix) if f != "eos_token"]
    if (opening and prompt.startswith(opening)) or len(inputs) != 1:
        return prompt
    return render(prefix, {inputs[0]: prompt}, eos_token)


def model_fn(model_dir: str, context: Any = None) -> dict[str, Any]:
    """Load the merged model (or an adapter over its base) and the tokenizer from `model_dir`."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if torch.cuda.is_available():
        dtype = torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
        device_map: Any = "auto"
    else:
        dtype, device_map = torch.float32, None
    kwargs = {dtype_keyword(): dtype, "device_map": device_map}
    if os.path.exists(os.path.join(model_dir, "adapter_config.json")):
        from peft import AutoPeftModelForCausalLM

        model = AutoPeftModelForCausalLM.from_pretrained(model_dir, **kwargs)
    else:
        model = AutoModelForCausalLM.from_pretrained(model_dir, **kwargs)
    model.eval()
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    prompt = {"prompt_template": DEFAULT_PROMPT_TEMPLATE, "response_field": DEFAULT_RESPONSE_FIELD}
    prompt_path = os.path.join(model_dir, PROMPT_FILE)
    if os.path.exists(prompt_path):
        with open(prompt_path) as f:
            prompt.update(json.load(f))
    return {"model": model, "tokenizer": tokenizer, **prompt}


def generation_kwargs(parameters: Any) -> dict[str, Any]:
    """Validate request `parameters` into `generate()` keyword arguments."""
    if parameters is None:
        parameters = {}
    if not isinstance(parameters, dict):
        raise ValueError(f"parameters must be a JSON object, got {type(parameters).__name__}")
    kwargs: dict[str, Any] = {"max_new_tokens": DEFAULT_MAX_NEW_TOKENS}
    for key, value in parameters.items():
        if key not in GENERATION_PARAMETERS:
            raise ValueError(f"parameters.{key} is not supported; accepted: {sorted(GENERATION_PARAMETERS)}")
        kind = GENERATION_PARAMETERS[key]
        if kind is bool and not isinstance(value, bool):
            raise ValueError(f"parameters.{key}={value!r} must be true or false")
        if kind is not bool and (isinstance(value, bool) or not isinstance(value, int | float)):
            raise ValueError(f"parameters.{key}={value!r} must be a number")
        kwargs[key] = kind(value)
    if not 1 <= kwargs["max_new_tokens"] <= MAX_NEW_TOKENS_LIMIT:
        raise ValueError(
            f"parameters.max_new_tokens={kwargs['max_new_tokens']} must be between 1 and {MAX_NEW_TOKENS_LIMIT}"
        )
    return kwargs


def input_fn(request_body: str | bytes, content_type: str = "application/json", context: Any = None) -> Any:
    """Decode a JSON request, or text/csv with a `dialogue` (or `inputs`) header and one row: generation
    answers one request at a time, so a CSV of several rows is refused rather than run row after row."""
    decoded = request_checks.decode(request_body, content_type, ("dialogue", "inputs"))
    if not content_type.startswith(request_checks.CSV):
        return decoded
    if len(decoded) != 1:
        raise request_checks.RequestError(
            f"text/csv: {len(decoded)} rows; accepted: one row (one dialogue) per request"
        )
    return decoded[0]


def parse_request(data: Any) -> tuple[str | dict[str, Any], dict[str, Any]]:
    """The prompt (a string, or the dialogue record the model's template renders) and generation kwargs.

    Accepts {"inputs": prompt, "parameters": {...}} (the toolkit's shape), {"dialogue": ..., other template
    fields, "parameters": {...}}, and {"inputs": {"dialogue": ...}, "parameters": {...}}.
    """
    if not isinstance(data, dict):
        raise ValueError('the request must be a JSON object with "inputs" or "dialogue"')
    request_checks.check_clm(data, DEFAULT_MAX_NEW_TOKENS)
    prompt: str | dict[str, Any]
    if isinstance(data.get("inputs"), dict):
        prompt = data["inputs"]
        if "dialogue" not in prompt:
            raise ValueError(f'request field "inputs" needs "dialogue"; got keys {sorted(prompt)}')
    elif "dialogue" in data:
        prompt = {k: v for k, v in data.items() if k != "parameters"}
    elif "inputs" in data:
        prompt = data["inputs"]
        if not isinstance(prompt, str) or not prompt:
            raise ValueError("the prompt must be a non-empty string")
    else:
        raise ValueError(f'the request needs "inputs" (a prompt) or "dialogue"; got keys {sorted(data)}')
    return prompt, generation_kwargs(data.get("parameters"))


def predict_fn(data: Any, model_bundle: dict[str, Any], context: Any = None) -> list[dict[str, str]]:
    """Generate a continuation for `inputs`, or a summary for `dialogue` (template applied here)."""
    import torch

    prompt, kwargs = parse_request(data)
    model, tokenizer = model_bundle["model"], model_bundle["tokenizer"]
    text = as_prompt(
        prompt, model_bundle["prompt_template"], model_bundle["response_field"], tokenizer.eos_token or ""
    )
    encoded = tokenizer(text, return_tensors="pt").to(model.device)
    with torch.no_grad():
        output = model.generate(
            input_ids=encoded["input_ids"],
            attention_mask=encoded["attention_mask"],
            pad_token_id=tokenizer.pad_token_id,
            **kwargs,
        )
    new_tokens = output[0][encoded["input_ids"].shape[1] :]
    summary = tokenizer.decode(new_tokens, skip_special_tokens=True).strip()
    return [{"generated_text": tokenizer.decode(output[0], skip_special_tokens=True), "summary": summary}]
