"""SmokeTestFunction: lambda/pipeline/pipeline_lambdas/smoke_test.py, which invokes the new endpoint with
the recipe's sample request and checks the answer and its latency.

Its role may invoke this environment's endpoints only (their tags), nothing else; where the environment declares
a shared base, also its inference components (stacks/functions/adapter.py, grant_invoke_adapters).
"""

from __future__ import annotations

from constructs import Construct

from hfpipe.core import limits
from stacks.functions.common import (
    FunctionSettings,
    PipelineFunction,
    acknowledge_run_time_names,
    owned_by,
    sagemaker_arn,
)


class SmokeTestFunction(PipelineFunction):
    """The SmokeTest function (``function``) and its role (``role``)."""

    RUNTIME_MODULE = "smoke_test"

    def __init__(self, scope: Construct, construct_id: str, *, settings: FunctionSettings) -> None:
        super().__init__(
            scope,
            construct_id,
            settings,
            # Longer than the smoke test's latency limit (limits.MAX_SMOKE_LATENCY_MS), so a slow
            # endpoint fails the latency check rather than timing the Lambda out.
            timeout_seconds=limits.SMOKE_TEST_TIMEOUT_SECONDS,
        )
        endpoint_arn = sagemaker_arn(self, "endpoint")
        self.allow(
            ["sagemaker:InvokeEndpoint"],
            [endpoint_arn],
            owned_by(settings.env_name, "aws:ResourceTag"),
        )
        acknowledge_run_time_names(self.role, [endpoint_arn])
