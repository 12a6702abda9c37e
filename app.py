#!/usr/bin/env python3
"""CDK entry point: one Data, Quota and Pipeline stack per environment named in cdk.json.

    npx cdk synth                 # every environment
    npx cdk synth -c env=dev      # one environment
    python app.py                 # the same without the CLI (reads cdk.json itself, writes cdk.out/)

cdk-nag's AwsSolutions checks run as a validation plugin: an unacknowledged finding stops synth.
CDK's built-in "CloudFormation Validate" plugin is off unless `-c hfpipe:builtin-validation=true`:
it only warns, repeats what the pinned cfn-lint checks (a test, zero errors and warnings) and takes
most of the synth time (about 23 s of 26 s here). `-c hfpipe:parts=Data,Pipeline` synthesizes only those
stacks and `-c hfpipe:nag=false` leaves out cdk-nag: `hfpipe local` runs the app that way (the tests
check the deployable environments with nag on).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

import aws_cdk as cdk
from cdk_nag import AwsSolutionsChecks

from hfpipe.contract import PROJECT, TAG_ENV, TAG_MANAGED_BY, stack_name
from hfpipe.core.adapters.shared_base import SharedBaseError
from hfpipe.core.validate import RecipeError
from stacks.checkov import CheckovAcknowledgements
from stacks.config import (
    CONTEXT_KEY,
    ENV_CONTEXT_KEY,
    ConfigError,
    EnvironmentConfig,
    load_environments,
    select_environments,
)
from stacks.data_stack import DataStack
from stacks.pipeline_stack import TRAINING_CODE_DIR, PipelineStack
from stacks.quota_stack import QuotaStack

ROOT = Path(__file__).resolve().parent
BUILTIN_VALIDATION_CONTEXT_KEY = "hfpipe:builtin-validation"
PARTS_CONTEXT_KEY = "hfpipe:parts"
NAG_CONTEXT_KEY = "hfpipe:nag"
PARTS = ("Data", "Quota", "Pipeline")
"""The stacks of one environment (`hfpipe.contract.stack_name` parts), in deployment order."""


def cdk_json_context() -> dict[str, Any]:
    """The `context` of cdk.json, so `python app.py` sees what `npx cdk` would pass."""
    context: dict[str, Any] = json.loads((ROOT / "cdk.json").read_text())["context"]
    return context


def build_app(
    *,
    context: dict[str, Any] | None = None,
    outdir: str | None = None,
    default_account: str | None = None,
    training_code_dir: Path = TRAINING_CODE_DIR,
    parts: Collection[str] = PARTS,
    nag: bool = True,
) -> cdk.App:
    """Build the app: every environment, or the one `-c env=NAME` (context key `env`) names.

    The CLI's context (cdk.json plus `-c`) overrides `context`. Raises `ConfigError` for a bad entry.
    `parts` picks stacks per environment (`hfpipe local` needs only Data and Pipeline; Pipeline needs
    Data); `nag=False` leaves out the cdk-nag checks (an in-process synth the tests check elsewhere).
    """
    _check_parts(parts)
    app = _new_app(context if context is not None else cdk_json_context(), outdir)
    environments = load_environments(app.node.try_get_context(CONTEXT_KEY), default_account=default_account)
    for config in select_environments(environments, app.node.try_get_context(ENV_CONTEXT_KEY)):
        _add_environment(app, config, parts, training_code_dir)
    # The reasons for the checkov checks the templates do not meet (tests/infra/test_checkov.py scans them).
    cdk.Aspects.of(app).add(CheckovAcknowledgements())
    if nag:
        cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    return app


def _check_parts(parts: Collection[str]) -> None:
    """Refuse a selection of stacks other than a subset of PARTS, or Pipeline without Data."""
    unknown = sorted(set(parts) - set(PARTS))
    if unknown or ("Pipeline" in parts and "Data" not in parts):
        raise ConfigError(
            f"parts: {sorted(parts)!r}; accepted: a subset of {list(PARTS)} with Data for Pipeline"
        )


def _context_reader(context: dict[str, Any]) -> Callable[[str], Any]:
    """A key's value as the app sees it: ``context`` under the CDK CLI's own (cdk.json and ``-c``), which are
    only readable from an App (a probe, never synthesized)."""
    return cdk.App(context=context).node.try_get_context


def _new_app(context: dict[str, Any], outdir: str | None) -> cdk.App:
    """The App, with CloudFormation's built-in validation where the context asks for it."""
    # The switch is an App property, but the CLI's `-c` values are only readable from an App.
    builtin_validation = _context_reader(context)(BUILTIN_VALIDATION_CONTEXT_KEY) in (True, "true")
    return cdk.App(context=context, outdir=outdir, builtin_cloud_formation_validation=builtin_validation)


def _add_environment(
    app: cdk.App, config: EnvironmentConfig, parts: Collection[str], training_code_dir: Path
) -> None:
    """One environment's stacks, those of ``parts``: Data, Quota and Pipeline (which needs Data)."""
    env = cdk.Environment(account=config.account, region=config.region)
    # The same tag keys as the SageMaker resources an execution creates (hfpipe.contract).
    tags = {TAG_ENV: config.name, TAG_MANAGED_BY: PROJECT}

    def add(part: str, kind: type[cdk.Stack], what: str, **wiring: Any) -> Any:
        """One stack of the environment: its name, configuration, account and region, description and tags."""
        return kind(
            app,
            stack_name(config.name, part),
            config=config,
            env=env,
            description=f"hfpipe {config.name}: {what}",
            tags=tags,
            **wiring,
        )

    data = add("Data", DataStack, "data, artifacts and access-log buckets") if "Data" in parts else None
    if "Quota" in parts:
        add("Quota", QuotaStack, "SageMaker service quota increase requests")
    if data is None or "Pipeline" not in parts:
        return
    add(
        "Pipeline",
        PipelineStack,
        "execution role, training code, notifications, pipeline",
        data_bucket=data.shared_data_bucket,
        artifacts_bucket=data.shared_artifacts_bucket,
        training_code_dir=training_code_dir,
    )


def main() -> int:
    """Synthesize; a configuration error is printed as one line instead of a traceback."""
    value = _context_reader(cdk_json_context())
    parts_value = value(PARTS_CONTEXT_KEY)
    parts = PARTS if parts_value is None else tuple(p.strip() for p in str(parts_value).split(","))
    nag = value(NAG_CONTEXT_KEY) not in (False, "false")
    try:
        app = build_app(default_account=os.environ.get("CDK_DEFAULT_ACCOUNT"), parts=parts, nag=nag)
    except (ConfigError, RecipeError, SharedBaseError) as error:
        # A cdk.json entry the stacks refuse, also where a construct checks it against the project's rules
        # (a shared base's fit: RecipeError naming environments.ENV.shared_base...): one line, no traceback.
        print(f"hfpipe: cdk.json: {error}", file=sys.stderr)
        return 1
    app.synth()
    return 0


if __name__ == "__main__":
    sys.exit(main())
