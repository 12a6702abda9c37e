"""GateFunction: lambda/pipeline/pipeline_lambdas/gate.py, which compares the recipe's final metric (from the
training job's description in the state the state machine passes) with its threshold.

It calls no AWS API: its role writes its own logs and nothing else.
"""

from __future__ import annotations

from constructs import Construct

from stacks.functions.common import FunctionSettings, PipelineFunction


class GateFunction(PipelineFunction):
    """The Gate function (``function``) and its role (``role``)."""

    RUNTIME_MODULE = "gate"

    def __init__(self, scope: Construct, construct_id: str, *, settings: FunctionSettings) -> None:
        super().__init__(scope, construct_id, settings)
