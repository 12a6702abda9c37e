"""Plan's check of the smoke test's request: held to the serving kind's request contract and to the served
model's context, so a smoke test can only fail for what training produced.

For a kind that speaks OpenAI's API (`vllm`) the body must be one vLLM's /invocations takes
(hfpipe/kinds/openai_contract.py, the same rules `hfpipe invoke` and local mode's stand-in use), must not
stream (the smoke test calls InvokeEndpoint, which answers one JSON body; a stream is
InvokeEndpointWithResponseStream's), must name the served model if it names one, and must fit the context
whatever the tokenizer: Plan has no tokenizer, so it counts every UTF-8 byte of the text as a token (no
byte-level BPE or SentencePiece-with-byte-fallback tokenizer makes more tokens than bytes), plus
PER_MESSAGE_TOKENS per message and the bytes of the recipe's prompt template (the chat template run_clm.py
writes from it). That bound is deliberately pessimistic (docs/vllm.md, "The request contract").

The `hf-inference` kind's contract is the task handler's own `parse_request` (training_code/), which the
Plan Lambda does not carry; `hfpipe start` and the tests check those samples with it.
"""

from __future__ import annotations

from collections.abc import Mapping

from hfpipe import kinds
from hfpipe.core.recipe.schema import RecipeError
from hfpipe.core.recipe.typed import Recipe
from hfpipe.kinds import openai_contract as contract

FIELD = "recipe.serving.sample_request"
#: Tokens allowed per message for a chat template's role markers and special tokens.
PER_MESSAGE_TOKENS = 16


def token_bound(checked: contract.Checked, template: str = "") -> int:
    """The most tokens the request's prompt can take: each UTF-8 byte one token, plus the template's."""
    texts = contract.prompt_texts(checked)
    ids = sum(len(p) for p in checked.prompts if isinstance(p, list))
    per_message = PER_MESSAGE_TOKENS * max(len(checked.messages), len(checked.prompts))
    return sum(len(t.encode()) for t in texts) + ids + per_message + len(template.encode())


def check(recipe: Recipe, environment: Mapping[str, str]) -> None:
    """RecipeError naming serving.sample_request unless the deployed model would take it as the smoke test
    sends it; `environment` is the model's final environment (the kind's settings under the recipe's)."""
    serving = recipe["serving"]
    if not recipe["deploy"] or not kinds.serving_kind(serving["kind"]).speaks_openai:
        return
    name = environment.get("SM_VLLM_SERVED_MODEL_NAME")
    served = contract.Served(model_names=(name,) if name else ())
    try:
        checked = contract.check(serving["sample_request"], contract.INVOCATIONS, served)
    except contract.ContractError as err:
        raise RecipeError(
            f"{FIELD}: vLLM {contract.VLLM_VERSION} would answer {err.status}: {err.message}; accepted: an "
            'OpenAI chat (messages) or completion (prompt) body as docs/vllm.md\'s "The request contract" states'
        ) from None
    if checked.stream:
        raise RecipeError(
            f"{FIELD}.stream: true is not accepted; accepted: false or leaving it out (the smoke test calls "
            "InvokeEndpoint, which answers one JSON body)"
        )
    length = environment.get("SM_VLLM_MAX_MODEL_LEN", "")
    if not length.isdigit():
        return  # the container derives it from the model's config.json, which Plan cannot read
    max_model_len = int(length)
    template = str(recipe["training"]["hyperparameters"].get("prompt_template") or "")
    bound, wanted = token_bound(checked, template), checked.sampling.max_tokens
    if bound + (wanted or 1) > max_model_len:
        asked = f"{wanted} more" if wanted is not None else "at least 1 more"
        raise RecipeError(
            f"{FIELD}: its prompt may take up to {bound} tokens (each UTF-8 byte of its text and of the "
            f"prompt template counted as one, plus {PER_MESSAGE_TOKENS} per message) and it asks for {asked}; "
            f"the model's context is {max_model_len} tokens in all (SM_VLLM_MAX_MODEL_LEN); accepted: a shorter sample or a "
            "smaller max_tokens / max_completion_tokens, or a larger serving.server.max_model_len"
        )
