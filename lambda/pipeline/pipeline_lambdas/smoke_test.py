"""SmokeTest: send the recipe's sample request to the endpoint; check the answer's shape and latency.

Two callers, one test: the pipeline (``{"plan": <plan>}``, the run's endpoint) and the deploy state machine
(``{"smoke": <SmokeSpec>}``, a named endpoint after a deploy; Prepare took the spec from the version's recipe),
and the adapter state machine (``{"smoke": <SmokeSpec>, "inference_component": <NAME>}``: the call names the
adapter's inference component on the shared base).
Both carry the fields ``smoke_test`` reads (``SmokeTarget``).
"""

from __future__ import annotations

import json
import time
from typing import Any, Protocol

from hfpipe import kinds
from hfpipe.core.deploy.deploy_requests import SmokeSpec
from hfpipe.core.run.plan_model import Plan
from pipeline_lambdas import aws

LOG = aws.logger(__name__)


class SmokeTestFailed(Exception):
    """The endpoint answered, but not with what the recipe expects (shape or latency)."""


def check_answer(answer: Any, expected_keys: list[str]) -> None:
    """The (first) answer object must carry every expected key; an empty answer always fails."""
    first = answer[0] if isinstance(answer, list) and answer else answer
    if first in (None, "", [], {}):
        raise SmokeTestFailed(f"smoke test: empty answer {answer!r}")
    if expected_keys:
        if not isinstance(first, dict):
            raise SmokeTestFailed(f"smoke test: answer {first!r} is not an object with keys {expected_keys}")
        missing = [k for k in expected_keys if k not in first]
        if missing:
            raise SmokeTestFailed(
                f"smoke test: answer {first!r} lacks key(s) {missing}; expected {expected_keys}"
            )


def check_openai_answer(answer: Any, request: Any) -> None:
    """An OpenAI chat or text completion (vLLM's ChatCompletionResponse / CompletionResponse): its object
    type, and a first choice with its text (a string) and a finish reason."""
    chat = isinstance(request, dict) and "messages" in request
    want = "chat.completion" if chat else "text_completion"
    if not isinstance(answer, dict) or answer.get("object") != want:
        raise SmokeTestFailed(f"smoke test: answer {str(answer)[:200]!r} is not a {want} object")
    choices = answer.get("choices")
    first = choices[0] if isinstance(choices, list) and choices and isinstance(choices[0], dict) else None
    message = first.get("message") if first else None
    text = (
        (message.get("content") if isinstance(message, dict) else None) if chat else (first or {}).get("text")
    )
    # The text may be empty (a model may end at once with its end-of-sequence token, which vLLM still
    # counts in usage.completion_tokens); the shape may not.
    if not isinstance(text, str) or not (first or {}).get("finish_reason"):
        raise SmokeTestFailed(f"smoke test: {want} {str(answer)[:200]!r} has no first choice with text")


class SmokeTarget(Protocol):
    """What the smoke test reads: a Plan, or a deploy's SmokeSpec."""

    @property
    def endpoint_name(self) -> str: ...
    @property
    def serving_kind(self) -> str: ...
    @property
    def sample_request(self) -> Any: ...
    @property
    def expected_keys(self) -> list[str]: ...
    @property
    def max_latency_ms(self) -> float: ...


def smoke_test(runtime: Any, plan: SmokeTarget, component: str | None = None) -> dict[str, Any]:
    """Invoke the endpoint once with its sample (naming inference component ``component`` when given);
    return {ok, latency_ms, response}."""
    start = time.perf_counter()
    resp = runtime.invoke_endpoint(
        EndpointName=plan.endpoint_name,
        ContentType="application/json",
        Accept="application/json",
        Body=json.dumps(plan.sample_request).encode(),
        **({"InferenceComponentName": component} if component else {}),
    )
    raw = resp["Body"].read()
    latency_ms = round((time.perf_counter() - start) * 1000.0, 1)
    try:
        answer = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as err:
        raise SmokeTestFailed(f"smoke test: answer is not JSON: {raw[:200]!r}") from err
    if kinds.serving_kind(plan.serving_kind).speaks_openai:
        check_openai_answer(answer, plan.sample_request)
    check_answer(answer, plan.expected_keys)
    if latency_ms > plan.max_latency_ms:
        raise SmokeTestFailed(f"smoke test: latency {latency_ms} ms > max_latency_ms {plan.max_latency_ms}")
    return {"ok": True, "latency_ms": latency_ms, "response": answer}


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Event: {"plan": <plan>} (the pipeline), {"smoke": <SmokeSpec>} (a deploy) or, for an adapter, also
    "inference_component"."""
    from botocore.config import Config

    plan: Plan | SmokeSpec = (
        Plan.from_json(event["plan"]) if "plan" in event else SmokeSpec.from_json(event["smoke"])
    )
    aws.bind(event, plan.execution_name)
    # One attempt, read timeout just above the latency limit (botocore's default is 60 s with retries):
    # a slow endpoint fails with its latency, within the Lambda's own timeout.
    read_timeout = plan.max_latency_ms / 1000.0 + 10
    runtime = aws.client(
        "sagemaker-runtime", Config(read_timeout=read_timeout, retries={"total_max_attempts": 1})
    )
    result = smoke_test(runtime, plan, event.get("inference_component"))
    aws.log_json(LOG, "smoke test passed", latency_ms=result["latency_ms"])
    return result
