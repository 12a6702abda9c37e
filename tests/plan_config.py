"""One PlanConfig for the tests that build plans without a deployed stack: the dev environment's settings,
any of them replaced by keyword (`dev_config(image_catalog={...})`)."""

from __future__ import annotations

import dataclasses
from typing import Any

from accounts import ACCOUNT

from hfpipe.core.run.plan import PlanConfig


def dev_config(**changes: Any) -> PlanConfig:
    """The dev environment as Plan sees it; the image catalog is the SDK's for eu-west-1 unless given."""
    if "image_catalog" not in changes:
        from stacks.image_catalog import build_catalog

        changes["image_catalog"] = build_catalog("eu-west-1")
    base = PlanConfig(
        env="dev",
        region="eu-west-1",
        role_arn=f"arn:aws:iam::{ACCOUNT}:role/hfpipe-dev-sagemaker",
        sourcedir_uri="s3://hfpipe-dev-artifacts/code/sourcedir.tar.gz",
        data_bucket="hfpipe-dev-data",
        artifacts_bucket="hfpipe-dev-artifacts",
    )
    return dataclasses.replace(base, **changes)
