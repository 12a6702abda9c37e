"""The refusals of adapter components on a shared base, one function each (stdlib only).

Each returns why a step must not happen, in one line naming what and why, or None when it may. The adapter deploy
(hfpipe.core.adapters.adapter_deploy) asks them before it creates or deletes anything; local mode's inference-component emulation
(hfpipe.local.engine.inference_components) asks the ones AWS enforces too, so both refuse in the same words.

What they read is a ``Component``: an inference component reduced to its name, endpoint, base (an adapter
component's ``Specification.BaseInferenceComponentName``, SageMaker's way to place an adapter on a base:
API reference, InferenceComponentSpecification: "Specify this parameter only if your request is meant to
create an adapter inference component", and "Before you can create an adapter inference component, you must
have an existing inference component that contains the foundation model that you want to adapt",
https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_InferenceComponentSpecification.html) and status.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

#: The statuses in which a base takes new adapters (DescribeInferenceComponent's InferenceComponentStatus).
READY = "InService"


@dataclass(frozen=True)
class Component:
    """One inference component as the rules see it."""

    name: str
    endpoint: str
    #: BaseInferenceComponentName: the base an adapter component is on; None for a base component.
    base: str | None = None
    status: str = READY

    @classmethod
    def from_description(cls, described: Mapping[str, Any]) -> Component:
        """From DescribeInferenceComponent's (or a ListInferenceComponents summary's) answer."""
        spec = described.get("Specification") or {}
        return cls(
            name=str(described["InferenceComponentName"]),
            endpoint=str(described["EndpointName"]),
            base=spec.get("BaseInferenceComponentName") or None,
            status=str(described.get("InferenceComponentStatus") or READY),
        )


def adapters_of(base: str, components: Iterable[Component]) -> list[str]:
    """The adapter components on ``base``, by name."""
    return sorted(c.name for c in components if c.base == base)


def base_model_problem(adapter: str, trained_on: str | None, serving: str) -> str | None:
    """An adapter trained on another model than the one the shared base serves: its weights are deltas of
    that model's layers, meaningless (or the wrong shape) on another."""
    if trained_on == serving:
        return None
    if not trained_on:
        return (
            f"the version given for adapter {adapter!r} is not a LoRA adapter (its registry metadata names no "
            "adapter_base_model: a merged model, which a named endpoint serves: `hfpipe deploy --endpoint "
            f"NAME`); accepted: a version of a recipe with adapter.base_model {serving!r}"
        )
    what = f"was trained on {trained_on!r}"
    return (
        f"adapter {adapter!r} {what}, and the shared base serves {serving!r}; accepted: an adapter trained "
        f"on {serving!r} (its registry version records the base it needs)"
    )


def adapter_before_base_problem(
    adapter: str, base: str, endpoint: str, components: Iterable[Component]
) -> str | None:
    """An adapter component whose base is not there yet: no such component, one on another endpoint, an
    adapter itself (a base holds the foundation model), or one not InService."""
    found = {c.name: c for c in components}.get(base)
    if found is None:
        why = "does not exist"
    elif found.endpoint != endpoint:
        why = f"is on endpoint {found.endpoint!r}, not {endpoint!r}"
    elif found.base is not None:
        why = f"is itself an adapter component (on {found.base!r})"
    elif found.status != READY:
        why = f"is {found.status}, not {READY}"
    else:
        return None
    return (
        f"adapter component {adapter!r} names base component {base!r}, which {why}; accepted: a base "
        f"component {READY} on endpoint {endpoint!r}, created before its adapters"
    )


def base_deletion_problem(base: str, components: Iterable[Component]) -> str | None:
    """Deleting a base while adapter components remain on it: they would be left serving nothing."""
    remaining = adapters_of(base, components)
    if not remaining:
        return None
    return (
        f"base component {base!r} still holds {len(remaining)} adapter component(s) ({', '.join(remaining)}); "
        "accepted: deleting its adapters first"
    )


def adapter_count_problem(
    adapter: str, base: str, components: Iterable[Component], max_adapters: int
) -> str | None:
    """One adapter more than the base holds (``max_adapters``, vLLM's --max-loras). Re-deploying an adapter
    that is already there adds none."""
    present = adapters_of(base, components)
    if adapter in present or len(present) < max_adapters:
        return None
    return (
        f"adapter component {adapter!r} would be adapter {len(present) + 1} on base component {base!r}, which "
        f"holds at most {max_adapters} (shared_base.max_adapters); accepted: deleting one of "
        f"{', '.join(present)} first, or a larger max_adapters that still fits the instance"
    )
