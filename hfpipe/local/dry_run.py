"""`hfpipe local --dry-run`: the plan a local run's Plan state would make, built before anything runs.

The same function the Plan Lambda runs (`hfpipe.core.run.plan.build_plan`), with the local environment's settings
as its Plan function has them (`hfpipe.local.stacks.plan_config`, from the synthesized stacks) and the quota
table the local engine answers with (`hfpipe.local.engine.quotas`). A recipe's own source is read back from an
in-memory artifacts bucket, as the Plan state reads it from the bucket the run uploads it to; nothing is
trained, served or kept.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from hfpipe.core.run.plan import build_plan
from hfpipe.core.run.plan_model import Plan
from hfpipe.local.engine.quotas import QuotaTable, default_quotas
from hfpipe.local.stacks import REGION, plan_config, synth_stacks

#: Uploads a recipe's own source to (s3 client, bucket) and returns the execution input that names it.
Upload = Callable[[Any, str], dict[str, Any]]


def local_plan(
    execution_input: dict[str, Any], name: str, cache_dir: Path, upload: Upload | None = None
) -> Plan:
    """The plan of ``execution_input`` in the local environment, for the execution ``name``."""
    config = plan_config(synth_stacks(cache_dir))
    quotas = QuotaTable(default_quotas()).client(REGION)
    if upload is None:
        return build_plan(execution_input, name, config, quotas)
    import boto3
    from moto import mock_aws

    with mock_aws():
        s3 = boto3.client("s3", region_name=REGION, aws_access_key_id="local", aws_secret_access_key="local")
        s3.create_bucket(Bucket=config.artifacts_bucket)
        return build_plan(upload(s3, config.artifacts_bucket), name, config, quotas, s3=s3)
