"""A model served on this machine under the inference-container contract: the handler's endpoint, HTTP,
the vllm kind's OpenAI-compatible stand-in, and adapters served on a shared base."""
