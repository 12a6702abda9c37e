"""Whether an adapter version loads on the shared base, read from the adapter itself before anything is made.

The adapter's ``adapter_config.json`` (PEFT's ``LoraConfig``, which training_code/run_clm.py saves at the top
of the model folder, so at the top of the version's model.tar.gz) says what vLLM will hold against the base
when it loads the adapter; the adapter deploy reads it from the version's ``ModelDataUrl`` and refuses, before
the base exists, an adapter that would not load:

- ``base_model_name_or_path``: the base it was trained on (run_clm.py writes the Hub id there), held against
  ``shared_base.base_model`` (adapter_rules.base_model_problem: its weights are deltas of that model's layers);
- ``r``: the LoRA rank, at most the base's ``max_lora_rank``: vLLM refuses a larger one when it loads the
  adapter ("LoRA rank ... is greater than max_lora_rank", vllm/lora/worker_manager.py, ``_load_adapter``);
- ``target_modules``: the linear modules the adapter changes, each one vLLM wraps with LoRA on the base's
  decoder family (``DECODER_MODULES``): vLLM refuses an adapter naming another one ("While loading ...,
  expected target modules in ... but received ...", vllm/lora/lora_model.py, ``LoRAModel.from_local_checkpoint``).
  A regular expression (PEFT accepts one as a string) is matched there by vLLM alone: not checked here, and
  the smoke test is then what finds an adapter that does not load.

Stdlib only: the Lambda bundle copies the core.
"""

from __future__ import annotations

import json
import tarfile
from collections.abc import Mapping
from typing import IO, Any

from hfpipe.core.adapters import adapter_rules
from hfpipe.core.adapters.shared_base import SharedBase

CONFIG = "adapter_config.json"
#: The linear modules vLLM wraps with LoRA in the decoder families a shared base serves (Llama, Qwen2,
#: Mistral): q/k/v packed as ``qkv_proj`` and gate/up as ``gate_up_proj`` (``packed_modules_mapping`` of
#: vllm/model_executor/models/llama.py and qwen2.py), ``o_proj`` and ``down_proj``; an adapter names them
#: unpacked, as PEFT does.
DECODER_MODULES = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
#: The most of an archive read looking for the config: it is written first, next to megabytes of weights.
MAX_MEMBERS = 1000


class AdapterConfigError(ValueError):
    """The version's artifact holds no readable adapter_config.json; the message names the artifact."""


def read_config(archive: IO[bytes], where: str) -> dict[str, Any]:
    """The adapter_config.json at the top of the gzip'd tar ``archive`` (read as a stream: only as far as
    the config); AdapterConfigError naming ``where`` when it is not there or not a JSON object."""
    try:
        with tarfile.open(fileobj=archive, mode="r|gz") as tar:
            for i, member in enumerate(tar):
                if i >= MAX_MEMBERS:
                    break
                if member.isfile() and member.name.removeprefix("./") == CONFIG:
                    handle = tar.extractfile(member)
                    config = json.loads(handle.read()) if handle else None
                    if not isinstance(config, dict):
                        raise AdapterConfigError(f"{where}: {CONFIG} is not a JSON object")
                    return config
    except (tarfile.TarError, OSError, EOFError, ValueError) as err:
        if isinstance(err, AdapterConfigError):
            raise
        raise AdapterConfigError(f"{where}: not a gzip'd tar with {CONFIG} at its top: {err}") from None
    raise AdapterConfigError(
        f"{where}: no {CONFIG} at the top of the archive; accepted: an adapter kept unmerged "
        "(recipe.adapter: the PEFT adapter folder at the top of model.tar.gz)"
    )


def load_problem(adapter: str, config: Mapping[str, Any], base: SharedBase) -> str | None:
    """Why the adapter whose adapter_config.json is ``config`` would not load on ``base`` (None: it would)."""
    trained_on = config.get("base_model_name_or_path")
    problem = adapter_rules.base_model_problem(
        adapter, trained_on if isinstance(trained_on, str) else None, base.base_model
    )
    if problem:
        return f"{CONFIG}.base_model_name_or_path: {problem}"
    rank = config.get("r")
    if isinstance(rank, bool) or not isinstance(rank, int) or rank < 1:
        return f"{CONFIG}.r: {rank!r} is not a LoRA rank; accepted: a whole number >= 1"
    if rank > base.max_lora_rank:
        return (
            f"{CONFIG}.r: adapter {adapter!r} has rank {rank}, above the shared base's max_lora_rank "
            f"{base.max_lora_rank} (vLLM refuses it at load); accepted: rank <= {base.max_lora_rank}, or a "
            "shared_base.max_lora_rank at least that rank"
        )
    modules = config.get("target_modules")
    if isinstance(modules, str):  # a regular expression: vLLM matches it (the module docstring)
        return None
    if not isinstance(modules, list) or not modules or not all(isinstance(m, str) for m in modules):
        return f"{CONFIG}.target_modules: {modules!r} is not accepted; accepted: a list of module names"
    unknown = sorted(set(modules) - set(DECODER_MODULES))
    if unknown:
        return (
            f"{CONFIG}.target_modules: adapter {adapter!r} changes {', '.join(unknown)}, which vLLM does not "
            f"wrap with LoRA on {base.base_model!r}; accepted: among {', '.join(DECODER_MODULES)}"
        )
    return None
