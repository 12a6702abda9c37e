"""`hfpipe start --dry-run`: the plan, the cost estimate and the exact CreateTrainingJob request, without
starting anything.

The plan is built by the same function the Plan Lambda runs (`hfpipe.core.run.plan.build_plan`), with the
environment's settings read from its SSM parameters (role, buckets, training-code URI, image catalog) and
the account's Service Quotas read with your credentials. Two things only the Plan Lambda knows are said
rather than guessed: cdk.json's allow-lists for buckets and registries outside the environment (a recipe
that names one is planned here as if allowed, and the note says so), and quotas your credentials cannot
read (the dry run stops there and says so).
"""

from __future__ import annotations

import json
from typing import Any

from rich.console import Console
from rich.table import Table

from hfpipe import contract
from hfpipe.cli import aws
from hfpipe.cli.aws import HfpipeError
from hfpipe.core import validate
from hfpipe.core.deploy import expiry
from hfpipe.core.recipe.typed import Recipe
from hfpipe.core.run import quotas
from hfpipe.core.run.plan import Accepted, PlanConfig, accept, build_plan
from hfpipe.core.run.plan_model import Plan

#: Errors of a quota read that mean "these credentials may not", not "the plan is wrong".
QUOTA_READ_DENIED = ("AccessDenied", "AccessDeniedException", "UnauthorizedOperation")


def _outside(recipe: Recipe, own: tuple[str, str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Buckets and registries the resolved recipe names outside the environment (the Plan Lambda's
    allow-lists decide those): the recipe with its defaults and overrides, since a field a file leaves out
    (channels, checkpoint_s3_uri) has its default there."""
    t = recipe["training"]
    uris = [u for u in t["channels"].values() if isinstance(u, str) and u.startswith("s3://")]
    if isinstance(t["checkpoint_s3_uri"], str) and t["checkpoint_s3_uri"].startswith("s3://"):
        uris.append(t["checkpoint_s3_uri"])
    buckets = sorted({u[5:].split("/", 1)[0] for u in uris} - set(own))
    registries = sorted(
        {
            validate.image_registry(str(c["image_uri"]))
            for c in recipe["container"].values()
            if isinstance(c, dict) and c.get("image_uri")
        }
    )
    return tuple(buckets), tuple(registries)


def environment_config(
    environment: aws.Environment, recipe: Recipe, ttl: str | None = None
) -> tuple[PlanConfig, list[str]]:
    """The environment's settings as its Plan Lambda has them (from its SSM parameters), with the buckets and
    registries outside it that ``recipe`` (resolved) names planned as allowed, and the note that says so;
    ``ttl``: `start --ttl`, which the execution input gives the Plan (else the environment's)."""
    own = (environment.data_bucket, environment.require(contract.SSM_ARTIFACTS_BUCKET))
    buckets, registries = _outside(recipe, own)
    notes = []
    if buckets or registries:
        notes.append(
            f"outside the environment: {', '.join([*buckets, *registries])}; planned as allowed here, the Plan "
            "Lambda refuses them unless cdk.json's allowed_s3_buckets / allowed_image_registries list them"
        )
    config = PlanConfig(
        env=environment.name,
        region=environment.region,
        role_arn=environment.require(contract.SSM_EXECUTION_ROLE_ARN),
        sourcedir_uri=environment.require(contract.SSM_SOURCEDIR_URI),
        data_bucket=own[0],
        artifacts_bucket=own[1],
        image_catalog=json.loads(environment.values.get(contract.SSM_IMAGE_CATALOG) or "{}"),
        allowed_s3_buckets=buckets,
        allowed_image_registries=registries,
        endpoint_ttl_seconds=(
            expiry.parse_ttl(ttl)
            if ttl is not None
            else expiry.ttl_of_variables(
                {expiry.TTL_VARIABLE: environment.values.get(contract.SSM_ENDPOINT_TTL_SECONDS) or ""}
            )
        ),
    )
    return config, notes


def in_environment(
    accepted: Accepted, config: PlanConfig, s3: Any = None, *, source_later: bool = False
) -> Accepted:
    """The recipe as accepted without the environment, through the one entry into the recipe rules with
    ``config``'s (hfpipe.core.run.plan.accept), or the one line `start` and `local` refuse it with;
    ``source_later``: before an own source is packed (its checks come with the uploaded archive)."""
    try:
        return accept(accepted, config, s3=s3, source_later=source_later)
    except validate.RecipeError as err:
        raise HfpipeError(
            f"recipe {accepted.recipe['name']!r} cannot run in this environment: {err}"
        ) from None


def plan_for(
    clients: aws.Clients,
    config: PlanConfig,
    accepted: Accepted,
    name: str,
    notes: list[str],
    quotas_readable: bool = True,
    s3: Any = None,
) -> tuple[Plan | None, list[str]]:
    """The plan the Plan Lambda would make for what `start` sends, and notes on what only it can check
    (``notes``: `environment_config`'s, first); `accepted`: the recipe as `hfpipe.core.run.plan.accept` took it
    (hfpipe.cli.recipe.recipes.Loaded, with the uploaded source), whose environment's rules that have not run (all,
    or an own source's) run here.

    `start` runs this before it starts anything, so it refuses what the dry run refuses; with
    `quotas_readable` False (start's), credentials that may not read Service Quotas give no plan (None) and a
    note instead of an error: every recipe rule ran before the quota look-up, and the Plan state reads them.
    ``s3``: the client the plan reads an own source with (`hfpipe.cli.recipe.sources.Staged` before the upload)."""
    import botocore.exceptions

    s3 = clients.s3 if s3 is None else s3
    accepted = in_environment(accepted, config, s3=s3)
    notes = [*notes, *accepted.notes]
    try:
        plan = build_plan(accepted, name, config, clients.client("service-quotas"), s3=s3)
    except (quotas.QuotaTooLowError, quotas.UnknownQuotaError) as exc:
        # What the Plan state would fail with, before anything is created.
        raise HfpipeError(f"{exc}") from None
    except botocore.exceptions.ClientError as exc:
        error = aws.aws_error(
            exc, "reading the account's SageMaker quotas (the Plan Lambda's role can; yours may not)"
        )
        if quotas_readable or exc.response.get("Error", {}).get("Code") not in QUOTA_READ_DENIED:
            raise HfpipeError(f"dry run: {error}") from None
        return None, [*notes, f"{error}: the Plan state checks the quotas and the rest of the plan"]
    return plan, notes


def _tags(tags: list[dict[str, str]]) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in tags}


def show(console: Console, plan: Plan, notes: list[str]) -> None:
    """The plan's summary, then the request SageMaker would get."""
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold")
    table.add_column()
    table.add_row("dry run", "nothing was started or created")
    table.add_row("execution", plan.execution_name)
    table.add_row("training job", plan.training_job_name)
    table.add_row(
        "instances", f"{plan.instance_count} x {plan.instance_type}" + (" (spot)" if plan.spot else "")
    )
    table.add_row(
        "estimated cost",
        f"{plan.estimated_cost_usd:.2f} USD ({plan.estimated_hours:g} h at {plan.price_per_hour_usd:g} USD/h "
        "per instance, on-demand list price)",
    )
    table.add_row("training image", plan.image_uri)
    if plan.deploy:
        table.add_row(
            "endpoint",
            f"{plan.endpoint_name}: {plan.serving_instance_count} x {plan.serving_instance_type}, "
            f"{plan.inference_image_uri}"
            + (", kept" if plan.keep_endpoint else ", deleted after the smoke test")
            + f", expires {expiry.expiry_of(_tags(plan.hosting_tags)) or 'never (no time to live)'}",
        )
    else:
        table.add_row("endpoint", "none (deploy: false)")
    for note in notes:
        table.add_row("note", note)
    console.print(table)
    console.print("CreateTrainingJob request:")
    # Soft-wrapped: a long value stays on its line, so what is printed (or piped) is the request as JSON.
    console.print_json(data=plan.training_job_request, default=str)
