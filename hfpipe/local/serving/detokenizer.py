"""Incremental detokenization as vLLM does it, so that a streamed answer is the unstreamed one in pieces.

vLLM (`vllm/v1/engine/detokenizer.py`, the container's 0.14.0) turns each generated token into text with the
`tokenizers` library's `DecodeStream` (FastIncrementalDetokenizer; tokenizers >= 0.21.1 and a fast
tokenizer): the stream is primed with the end of the prompt (the shortest suffix of 4 to 23 tokens that
decodes without U+FFFD), and a step returns nothing while the text decoded so far ends in U+FFFD, so a
character whose UTF-8 bytes are split across tokens comes out whole, with the token that completes it, and
bytes that never complete a character at the end of the answer are never sent. The answer is the
concatenation of those pieces (`output_text`), streamed or not; stop strings are searched in it, it is cut
before the one found, and while streaming the last `len(longest stop) - 1` characters are held back until
they cannot start one (`get_next_output_text`, `check_stop_strings`).

A tokenizer without a fast backend gets `PyDecodeStream`, the same step written over its `decode`
(`step_decode_stream` in tokenizers' src/tokenizer/mod.rs).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

REPLACEMENT = "\ufffd"
#: tokenizers' error when a decoded text no longer starts with what was already returned (vLLM resets).
INVALID_PREFIX = "Invalid prefix encountered"


class PyDecodeStream:
    """tokenizers' DecodeStream step over `decode(ids) -> str`: the text `ids` add, or None while it ends in
    U+FFFD (an incomplete UTF-8 sequence) or adds nothing."""

    def __init__(self, decode: Any) -> None:
        self.decode = decode
        self.ids: list[int] = []
        self.prefix = ""
        self.prefix_index = 0

    def step(self, token_id: int) -> str | None:
        self.ids.append(token_id)
        text = self.decode(self.ids)
        if len(text.encode()) <= len(self.prefix.encode()) or text.endswith(REPLACEMENT):
            return None
        if not text.startswith(self.prefix):
            raise ValueError(INVALID_PREFIX)
        new = text[len(self.prefix) :]
        new_prefix_index = len(self.ids) - self.prefix_index
        self.ids = self.ids[self.prefix_index :]
        self.prefix = self.decode(self.ids)
        self.prefix_index = new_prefix_index
        return new


class IncrementalDetokenizer:
    """One sequence's text as vLLM builds it: `update` per generated token, `next_text` for what to send."""

    def __init__(
        self,
        tokenizer: Any,
        prompt_ids: list[int],
        stop: Sequence[str],
        skip_special_tokens: bool = True,
    ) -> None:
        self.tokenizer = tokenizer
        self.skip_special_tokens = skip_special_tokens
        self.stop = list(stop)
        self.stop_buffer_length = max((len(s) for s in self.stop), default=1) - 1
        self.output_text = ""
        self._sent = 0
        self.stream = self._new_stream()
        prefix = prompt_ids
        if len(prompt_ids) > 4:  # vLLM: a safe place to start, not inside a character
            for i in range(4, min(len(prompt_ids) + 1, 24)):
                if REPLACEMENT not in self._decode(prompt_ids[-i:]):
                    prefix = prompt_ids[-i:]
                    break
        for token_id in prefix:
            self._step(token_id)

    def _decode(self, ids: list[int]) -> str:
        # Without transformers' clean_up_tokenization_spaces: DecodeStream decodes with the backend alone.
        return str(
            self.tokenizer.decode(
                ids, skip_special_tokens=self.skip_special_tokens, clean_up_tokenization_spaces=False
            )
        )

    def _new_stream(self) -> Any:
        backend = getattr(self.tokenizer, "backend_tokenizer", None)
        try:
            from tokenizers.decoders import DecodeStream
        except ImportError:  # tokenizers < 0.21
            DecodeStream = None
        if backend is not None and DecodeStream is not None:
            stream = DecodeStream(skip_special_tokens=self.skip_special_tokens)
            return lambda token_id: stream.step(backend, token_id)
        return PyDecodeStream(self._decode).step

    def _step(self, token_id: int) -> str:
        try:
            return self.stream(token_id) or ""
        except Exception as exc:
            if not str(exc).startswith(INVALID_PREFIX):
                raise
            # vLLM resets the stream when a tokenizer's output is not monotonic (vllm issue 17448).
            self.stream = self._new_stream()
            return self.stream(token_id) or ""

    def update(self, token_id: int, stop_terminated: bool = False) -> str | None:
        """Take one generated token; returns the stop string it completed (the text is cut before it), if any.
        `stop_terminated`: the token ends the sequence itself (EOS) and adds no text."""
        if stop_terminated:
            return None
        piece = self._step(token_id)
        self.output_text += piece
        if not piece:
            return None
        for stop in self.stop:
            # Only where the new characters can complete it (check_stop_strings).
            at = self.output_text.find(stop, max(0, len(self.output_text) - len(piece) - len(stop) + 1))
            if at >= 0:
                self.output_text = self.output_text[:at]
                return stop
        return None

    def next_text(self, finished: bool) -> str:
        """The text not sent yet; until `finished`, less what could still begin a stop string."""
        end = len(self.output_text) - (0 if finished or not self.stop else self.stop_buffer_length)
        if end <= self._sent:
            return ""
        text, self._sent = self.output_text[self._sent : end], end
        return text
