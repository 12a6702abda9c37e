"""An environment's shared base: the one base model its LoRA adapters are served on, as SageMaker inference
components on one endpoint (docs/adapters.md).

cdk.json's per-environment ``shared_base`` declares it; ``parse_shared_base`` validates the entry into one
frozen ``SharedBase`` (stacks/config.py reads it into ``EnvironmentConfig.shared_base``), every error naming
the dotted path, the value and what is accepted. Stdlib only: the stacks, the Lambdas and local mode read it.

What each setting becomes (the provisioning is still to come; docs/adapters.md says what exists):

- ``instance_type`` and ``copies``: an endpoint whose one production variant names no model (an
  inference-component endpoint) with ``copies`` instances, and the base inference component
  (``Specification.ModelName``, ``RuntimeConfig.CopyCount`` = ``copies``). One copy takes every GPU of an
  instance (tensor parallel over the instance, as the vllm serving kind serves), so copies are instances;
- ``base_model``: the model the base component serves, and the base every adapter must have been trained on
  (hfpipe.core.adapters.adapter_rules);
- ``max_adapters`` and ``max_lora_rank``: vLLM's ``--max-loras`` (the adapters one batch can hold; vLLM
  preallocates their weights on the GPU) and ``--max-lora-rank`` (vLLM's ``LoRAConfig``: ``max_loras`` at least
  1, ``max_lora_rank`` one of ``LORA_RANKS``, default 16; vllm/config/lora.py), and the most adapter
  components the project lets the base hold;
- ``max_model_len``: the context each sequence may have, which the KV cache left after the base and the
  adapters' slots must hold (hfpipe.core.adapters.adapter_fit).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from hfpipe.core.adapters.scale_to_zero import ScaleToZero, parse_scale_to_zero

#: vLLM's accepted --max-lora-rank values (``MaxLoRARanks``, vllm/config/lora.py) and its default.
LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)
DEFAULT_LORA_RANK = 16
#: As many copies as a named endpoint may have instances (hfpipe.core.deploy.deployments.MAX_INSTANCES).
MAX_COPIES = 100
#: The model figures a base the fit check does not know must state (hfpipe.core.recipe.serving_fit.ModelFigures,
#: plus ``lora_width``: hfpipe.core.adapters.adapter_fit).
FIGURE_KEYS = ("parameters", "layers", "kv_heads", "head_dim", "lora_width")

#: A Hugging Face Hub id (organisation/name or name): a shared base's model, and an adapter recipe's base
#: (the recipe schema's ``adapter.base_model``).
HUB_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)?$"
_HUB_ID = re.compile(HUB_ID_PATTERN)
_INSTANCE_TYPE = re.compile(r"^ml\.[a-z0-9-]+\.[a-z0-9]+$")
_KEYS = {
    "base_model": 'the Hugging Face Hub id of the base model, e.g. "bigscience/bloomz-7b1" (required)',
    "instance_type": 'the endpoint\'s instance type, e.g. "ml.g5.4xlarge" (required)',
    "copies": f"a whole number of base copies from 1 to {MAX_COPIES}, one instance each (optional; default 1)",
    "max_adapters": "a whole number >= 1: the most adapter components the base holds, vLLM's --max-loras "
    "(required)",
    "max_lora_rank": f"one of {', '.join(map(str, LORA_RANKS))}: vLLM's --max-lora-rank, at least every "
    f"adapter's rank (optional; default {DEFAULT_LORA_RANK})",
    "max_model_len": "a whole number of tokens >= 1 each sequence may hold (optional; default 2048)",
    "model": "the base model's figures from its config.json, for a model the fit check does not know: an "
    f"object with {', '.join(FIGURE_KEYS)} (whole numbers >= 1; optional)",
    "scale_to_zero": '{"enabled": true|false, "idle_minutes": N}: the base\'s instances go to 0 after N idle '
    "minutes and come back on the next call (optional; off when absent; hfpipe.core.adapters.scale_to_zero)",
}


class SharedBaseError(ValueError):
    """A malformed ``shared_base`` entry; the message names the dotted path and what is accepted."""


@dataclass(frozen=True)
class SharedBase:
    """One environment's shared base, validated (``parse_shared_base``)."""

    base_model: str
    instance_type: str
    max_adapters: int
    copies: int = 1
    max_lora_rank: int = DEFAULT_LORA_RANK
    max_model_len: int = 2048
    #: The base model's figures as cdk.json states them (``FIGURE_KEYS``), else () and the fit check's table.
    model: tuple[tuple[str, int], ...] = ()
    #: cdk.json's ``scale_to_zero`` (off when absent).
    scale_to_zero: ScaleToZero = field(default_factory=ScaleToZero)

    @property
    def instances(self) -> int:
        """Instances of ``instance_type`` the endpoint runs: one per copy of the base."""
        return self.copies

    def stated_figures(self) -> dict[str, int]:
        return dict(self.model)

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "model": dict(self.model)}

    def entry(self) -> dict[str, Any]:
        """The cdk.json entry this base reads as, defaults filled (``parse_shared_base`` gives it back): what
        the Pipeline stack publishes as the environment's SSM parameter ``shared-base``. ``model`` only when
        the figures were stated, since an empty one is not an entry's."""
        entry = self.to_json()
        if not self.model:
            del entry["model"]
        if not self.scale_to_zero.enabled:
            del entry["scale_to_zero"]
        return entry

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SharedBase:
        return cls(
            **{
                **data,
                "model": tuple(sorted((data.get("model") or {}).items())),
                "scale_to_zero": ScaleToZero(**(data.get("scale_to_zero") or {})),
            }
        )


def _rejected(path: str, value: object, accepted: str) -> SharedBaseError:
    return SharedBaseError(f"{path}: {value!r} is not accepted; accepted: {accepted}")


def _whole(path: str, value: object, low: int, high: int | None, accepted: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low or (high and value > high):
        raise _rejected(path, value, accepted)
    return value


def _figures(path: str, value: object) -> tuple[tuple[str, int], ...]:
    if not isinstance(value, Mapping) or set(value) != set(FIGURE_KEYS):
        raise _rejected(path, value, _KEYS["model"])
    return tuple(sorted((k, _whole(f"{path}.{k}", value[k], 1, None, _KEYS["model"])) for k in FIGURE_KEYS))


def parse_shared_base(entry: object, path: str) -> SharedBase | None:
    """Validate cdk.json's ``shared_base`` of one environment (None: the environment has none)."""
    if entry is None:
        return None
    if not isinstance(entry, Mapping):
        raise _rejected(path, entry, "an object with keys " + ", ".join(_KEYS))
    for key in entry:
        if key not in _KEYS:
            raise SharedBaseError(f"{path}.{key}: unknown key; accepted: {', '.join(sorted(_KEYS))}")
    for required in ("base_model", "instance_type", "max_adapters"):
        if required not in entry:
            raise SharedBaseError(f"{path}.{required}: required; accepted: {_KEYS[required]}")
    for key, pattern in (("base_model", _HUB_ID), ("instance_type", _INSTANCE_TYPE)):
        if not isinstance(entry[key], str) or not pattern.fullmatch(entry[key]):
            raise _rejected(f"{path}.{key}", entry[key], _KEYS[key])
    rank = entry.get("max_lora_rank", DEFAULT_LORA_RANK)
    if isinstance(rank, bool) or rank not in LORA_RANKS:
        raise _rejected(f"{path}.max_lora_rank", rank, _KEYS["max_lora_rank"])
    return SharedBase(
        base_model=entry["base_model"],
        instance_type=entry["instance_type"],
        max_adapters=_whole(f"{path}.max_adapters", entry["max_adapters"], 1, None, _KEYS["max_adapters"]),
        copies=_whole(f"{path}.copies", entry.get("copies", 1), 1, MAX_COPIES, _KEYS["copies"]),
        max_lora_rank=rank,
        max_model_len=_whole(
            f"{path}.max_model_len", entry.get("max_model_len", 2048), 1, None, _KEYS["max_model_len"]
        ),
        model=_figures(f"{path}.model", entry["model"]) if "model" in entry else (),
        scale_to_zero=_scale_to_zero(entry.get("scale_to_zero"), f"{path}.scale_to_zero"),
    )


def _scale_to_zero(entry: object, path: str) -> ScaleToZero:
    try:
        return parse_scale_to_zero(entry, path)
    except ValueError as err:
        raise SharedBaseError(str(err)) from None
