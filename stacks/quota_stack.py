"""QuotaStack: one service-quota increase request per quota an environment's recipes need."""

from __future__ import annotations

from typing import Any

from aws_cdk import Stack
from constructs import Construct

from stacks.config import EnvironmentConfig


class QuotaStack(Stack):
    """Placeholder until the quota custom resource lands."""

    def __init__(
        self, scope: Construct, construct_id: str, *, config: EnvironmentConfig, **kwargs: Any
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.config = config
