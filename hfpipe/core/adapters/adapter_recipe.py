"""A recipe that keeps its LoRA adapter unmerged (``recipe.adapter``): the rules between its fields and the
script arguments that follow from it.

The recipe schema holds the field (``adapter.base_model``: the Hub id of the base the adapter is trained
on); ``check`` is what a schema cannot say, run by ``hfpipe.core.run.plan.check_rules``; ``hyperparameters`` is
what the Plan adds to the training job's (``merge_adapter`` false, and ``adapter_base_model``, which
``training_code/run_clm.py`` writes into the adapter's own ``adapter_config.json`` as
``base_model_name_or_path``). The registered version records the base from the plan
(``hfpipe.core.promotion.registry.metadata``); docs/adapters.md.

Stdlib only: the Plan Lambda runs it.
"""

from __future__ import annotations

from typing import Any

from hfpipe import kinds
from hfpipe.core.recipe.typed import Recipe
from hfpipe.core.validate import RecipeError
from hfpipe.kinds import arguments

#: The script arguments an adapter recipe's training script must take (training_code/run_clm.py does).
SCRIPT_ARGUMENTS = ("merge_adapter", "adapter_base_model", "lora_r")


def base_model(recipe: Recipe) -> str | None:
    """The base an adapter recipe's adapter needs; None for a recipe that is not one."""
    adapter = recipe.get("adapter")
    return str(adapter["base_model"]) if adapter else None


def own_endpoint(recipe: Recipe, deploy: bool = True) -> bool:
    """Whether a run of the recipe (deploying, or with ``deploy`` as it is set) gets an endpoint of its own:
    an adapter kept unmerged gets none, it is registered and served on the shared base."""
    return bool(deploy) and base_model(recipe) is None


def check(recipe: Recipe) -> None:
    """RecipeError, one line naming the field, when ``recipe.adapter`` cannot hold for this recipe."""
    base = base_model(recipe)
    if base is None:
        return
    t = recipe["training"]
    hp = t["hyperparameters"]
    taken = None if t.get("source") else arguments.accepted(t["entry_point"])
    missing = [name for name in SCRIPT_ARGUMENTS if taken is None or name not in taken]
    if missing:
        raise RecipeError(
            f"recipe.adapter: training.entry_point {t['entry_point']!r}"
            f"{' (an own source)' if t.get('source') else ''} does not take {', '.join(missing)}; an "
            "unmerged adapter needs the project's LoRA script (run_clm.py)"
        )
    if hp.get("merge_adapter", False) is not False:
        raise RecipeError(
            "recipe.training.hyperparameters.merge_adapter: "
            f"{hp['merge_adapter']!r} is not accepted with recipe.adapter (the adapter is kept unmerged); "
            "accepted: false, or leave it out"
        )
    named = hp.get("model_name_or_path")
    if named is not None and named != base:
        raise RecipeError(
            f"recipe.adapter.base_model: {base!r} is not the model trained on "
            f"(training.hyperparameters.model_name_or_path {named!r}); accepted: {named!r}"
        )
    kind = kinds.serving_kind_of(recipe)
    if not kind.serves_adapters:
        accepted = [k.name for k in kinds.SERVING_KINDS.values() if k.serves_adapters]
        raise RecipeError(
            f"recipe.serving.kind: {kind.name!r} serves no LoRA adapter next to a base; with recipe.adapter "
            f"accepted: {', '.join(accepted)}"
        )


def hyperparameters(recipe: Recipe) -> dict[str, Any]:
    """The training job's hyperparameters: the recipe's, and for an adapter recipe the adapter kept unmerged
    with its base's identity."""
    hp = dict(recipe["training"]["hyperparameters"])
    base = base_model(recipe)
    if base is not None:
        hp.update(merge_adapter=False, adapter_base_model=base)
    return hp
