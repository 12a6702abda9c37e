"""The plan: from an execution input to everything the state machine needs, or a clear error.

``build_plan`` returns a ``hfpipe.core.run.plan_model.Plan``, the typed, versioned contract with the state machine,
the Lambdas and the command. It is pure apart from the Service Quotas client it is given, so the CLI can run it
as a dry run and the Plan Lambda is a thin wrapper around it. Errors are ``RecipeError`` (bad input) or
``quotas.QuotaTooLowError``; their class names become the Step Functions error names.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from hfpipe import contract, kinds
from hfpipe.core import api_shapes, cost, limits, names, prices
from hfpipe.core import validate as rules
from hfpipe.core.accelerators import kind_of, processor
from hfpipe.core.adapters import adapter_recipe
from hfpipe.core.deploy import expiry, fleets
from hfpipe.core.recipe import serving_fit, sources
from hfpipe.core.recipe.recipes import resolve_recipe
from hfpipe.core.recipe.sample_request import check as check_sample_request
from hfpipe.core.recipe.schema import RecipeError
from hfpipe.core.recipe.typed import Container, EvaluationGate, InferenceContainer, Recipe, Serving, Training
from hfpipe.core.run import evaluation_job, quotas, request
from hfpipe.core.run.plan_model import Evaluation, Gate, Plan

#: The image catalog's entry holding the SDK's smdistributed tables (stacks/image_catalog.distribution_rules).
DISTRIBUTION_KEY = "distribution"
KNOWN_DISTRIBUTIONS = ("torch_distributed", "pytorchddp", "smdistributed", "mpi")
POLL_SECONDS_RANGE = (1, 3600)
DEFAULT_POLL_SECONDS = 60


@dataclass(frozen=True)
class PlanConfig:
    """What the environment contributes: the Plan Lambda reads it from its environment variables."""

    env: str
    region: str
    role_arn: str
    sourcedir_uri: str
    data_bucket: str
    artifacts_bucket: str
    image_catalog: dict[str, Any] = field(default_factory=dict)
    default_poll_seconds: int = DEFAULT_POLL_SECONDS
    #: Buckets outside the environment recipes may read channels from or write checkpoints to, and image registries
    #: outside the image catalog's (cdk.json allowed_s3_buckets, allowed_image_registries); empty: only its own.
    allowed_s3_buckets: tuple[str, ...] = ()
    allowed_image_registries: tuple[str, ...] = ()
    #: How long the run's endpoint lives (cdk.json endpoint_ttl_hours, in seconds; None: no expiry).
    endpoint_ttl_seconds: int | None = None

    @classmethod
    def from_environment(cls, variables: Mapping[str, str]) -> PlanConfig:
        """The environment's settings as the Plan function's environment variables give them (set by the stack;
        ``AWS_REGION`` by the Lambda runtime): the Plan Lambda's, and local mode's before it builds the pipeline
        (``hfpipe.local.stacks.plan_config``)."""
        v = variables
        return cls(
            env=v["HFPIPE_ENV"],
            region=v["AWS_REGION"],
            role_arn=v["EXECUTION_ROLE_ARN"],
            sourcedir_uri=v["SOURCEDIR_URI"],
            data_bucket=v["DATA_BUCKET"],
            artifacts_bucket=v["ARTIFACTS_BUCKET"],
            image_catalog=json.loads(v.get("IMAGE_CATALOG", "{}")),
            default_poll_seconds=int(v.get("DEFAULT_POLL_SECONDS", str(DEFAULT_POLL_SECONDS))),
            # Comma-separated; set by the stack only when cdk.json allows anything outside the environment.
            allowed_s3_buckets=tuple(b for b in v.get("ALLOWED_S3_BUCKETS", "").split(",") if b),
            allowed_image_registries=tuple(r for r in v.get("ALLOWED_IMAGE_REGISTRIES", "").split(",") if r),
            # Empty or absent: the environment gives its endpoints no expiry.
            endpoint_ttl_seconds=round(float(v["ENDPOINT_TTL_SECONDS"]))
            if v.get("ENDPOINT_TTL_SECONDS")
            else None,
        )

    def catalog_registries(self) -> set[str]:
        """The registry hosts of the image catalog's URIs (resolved from the SDK's tables at synth time)."""
        return {
            rules.image_registry(str(uri))
            for key, scope in self.image_catalog.items()
            if key != serving_fit.GPUS_KEY
            if isinstance(scope, dict)
            for by_processor in scope.values()
            if isinstance(by_processor, dict)
            for uri in by_processor.values()
        }


@dataclass(frozen=True)
class Accepted:
    """A recipe that passed the rules (``accept``): defaults filled, the input's own ``poll_seconds`` (None: the
    environment's default), the notes on what could not be checked, the sha256 of the own source whose script's
    arguments were checked (and why they could not be, ``hyperparameters_not_checked``: the Plan's), and whether
    the environment's rules ran too: those that do not read the training source (``recipe_in_environment``,
    with the image URIs they resolved), and all of them (``in_environment``)."""

    recipe: Recipe
    poll_seconds: int | None = None
    notes: tuple[str, ...] = ()
    source_sha256: str | None = None
    hyperparameters_not_checked: str | None = None
    in_environment: bool = False
    recipe_in_environment: bool = False
    training_image: str = ""
    inference_image: str | None = None

    def with_source(self, uri: str, sha256: str) -> Accepted:
        """The same recipe naming the archive the command uploaded (what the execution input names)."""
        training: Training = {**self.recipe["training"], "source": {"s3": uri, "sha256": sha256}}
        return replace(self, recipe={**self.recipe, "training": training})


def accept(
    given: Any,
    config: PlanConfig | None = None,
    *,
    s3: Any = None,
    source: bytes | None = None,
    source_later: bool = False,
) -> Accepted:
    """The one entry into the recipe rules, each run once, in this order:

    1. the execution input's fields (``resolve_input``), then ``hfpipe.core.recipe.recipes.resolve_recipe``: the
       overrides, the JSON Schema with its defaults (``hfpipe.core.recipe.schema``), the rules a schema cannot say
       (``hfpipe.core.validate.recipe``), SageMaker's instance types and the project's scripts' arguments
       (``hfpipe.core.recipe.acceptance.check``); then the rules between fields (``check_rules``);
    2. a recipe's own script's arguments, against the archive ``source`` (what the command packed) or, in an
       environment, the archive the recipe names (``hfpipe.core.recipe.sources``), unless that archive was checked;
    3. with ``config``: the environment's rules (``check_ownership``, ``check_distribution``, the containers in
       its image catalog for the instance types), then the s3 source.

    ``given`` is an execution input, or the ``Accepted`` of an earlier call (the command's, before it had the
    environment or the packed source), of which only what that call did not check runs. ``source_later``:
    the command's call before it clones, packs and uploads a recipe's own source: the environment's rules
    that do not read the source run now, so what they refuse is refused before any of that; the source's
    run when it calls again with the uploaded archive named (``Accepted.with_source``)."""
    accepted = given if isinstance(given, Accepted) else _accept_input(given)
    if source is not None:
        accepted = _own_source(accepted, source)
    if config is not None and not accepted.in_environment:
        accepted = _in_environment(accepted, config, s3, source_later)
    return accepted


def _accept_input(event: Any) -> Accepted:
    recipe = resolve_input(event)
    check_rules(recipe)
    if "poll_seconds" not in event:
        return Accepted(recipe)  # the environment's default, when the environment's rules run
    poll, (lo, hi) = event["poll_seconds"], POLL_SECONDS_RANGE
    if isinstance(poll, bool) or not isinstance(poll, int) or not lo <= poll <= hi:
        raise RecipeError(f"input.poll_seconds: {poll!r} must be an integer from {lo} to {hi}")
    return Accepted(recipe, poll_seconds=poll)


def _own_source(accepted: Accepted, data: bytes) -> Accepted:
    warnings: list[str] = []
    note = sources.arguments_note(accepted.recipe["training"], data, warnings)
    return replace(
        accepted,
        notes=(*accepted.notes, *warnings, *([note] if note else [])),
        source_sha256=hashlib.sha256(data).hexdigest(),
        hyperparameters_not_checked=note,
    )


def _in_environment(accepted: Accepted, config: PlanConfig, s3: Any, source_later: bool) -> Accepted:
    if not accepted.recipe_in_environment:
        accepted = _recipe_in_environment(accepted, config)
    training = accepted.recipe["training"]
    source = training["source"]
    if source is not None and source_later:
        return accepted
    if source is not None:
        data = sources.read_checked(training, config.artifacts_bucket, s3)
        if source["sha256"] != accepted.source_sha256:
            accepted = _own_source(accepted, data)
    poll = config.default_poll_seconds if accepted.poll_seconds is None else accepted.poll_seconds
    return replace(accepted, poll_seconds=poll, in_environment=True)


def _recipe_in_environment(accepted: Accepted, config: PlanConfig) -> Accepted:
    """The environment's rules that do not read the training source: its buckets and registries, the
    distribution its tables allow, and its images for the recipe's instance types (resolved here)."""
    recipe, catalog = accepted.recipe, config.image_catalog
    check_ownership(recipe, config)
    check_distribution(recipe, catalog)
    training_image = resolve_image(
        catalog, "training", recipe["container"]["training"], recipe["training"]["instance_type"]
    )
    inference_image = resolve_inference_image(catalog, recipe) if recipe["deploy"] else None
    return replace(
        accepted, recipe_in_environment=True, training_image=training_image, inference_image=inference_image
    )


def check_ownership(recipe: Recipe, config: PlanConfig) -> None:
    """Channels, checkpoints and explicit images stay inside the environment unless its config allows more."""
    t = recipe["training"]
    own = (config.data_bucket, config.artifacts_bucket)
    for name, where in t["channels"].items():
        if where.startswith("s3://"):
            rules.owned_bucket(where, f"recipe.training.channels.{name}", own, config.allowed_s3_buckets)
    # The checkpoint URI's environment rule is stricter (checkpoint_uri: under the artifacts bucket's
    # checkpoints/ prefix, whatever the allowed buckets), so it is not repeated here.
    for scope in ("training", "inference"):
        uri = recipe["container"][scope].get("image_uri")
        if uri is not None and (scope == "training" or recipe["deploy"]):
            rules.owned_image(
                uri,
                f"recipe.container.{scope}.image_uri",
                config.catalog_registries(),
                config.allowed_image_registries,
            )


def processor_for(instance_type: str) -> str:
    """The image tables' processor key: 'gpu', 'inf', 'trn' or 'cpu', by the SageMaker SDK's rule."""
    return processor(instance_type)


def catalog_key(container: Container | InferenceContainer) -> str:
    """The image catalog key of a recipe's container versions."""
    return f"{container['transformers_version']}/{container['pytorch_version']}/{container['py_version']}"


def resolve_image(
    catalog: dict[str, Any],
    scope: str,
    container: Container | InferenceContainer,
    instance_type: str,
    key: str | None = None,
) -> str:
    """The image URI for a container (explicit ``image_uri`` wins) from the synth-time catalog; ``key``: the
    serving kind's catalog key of the inference container (default: the Hugging Face versions)."""
    if container.get("image_uri"):
        return str(container["image_uri"])
    key = key or catalog_key(container)
    # Every scope but training is a serving kind's, whose images are for container.inference.
    part = "training" if scope == "training" else "inference"
    processor = processor_for(instance_type)
    by_processor = catalog.get(scope, {}).get(key)
    if not by_processor:
        raise RecipeError(
            f"recipe.container.{part}: versions {key} are not in the image catalog; "
            f"available: {sorted(catalog.get(scope, {}))} (or set container.{part}.image_uri)"
        )
    if processor not in by_processor:
        raise RecipeError(
            f"recipe.container.{part}: {key} has no {processor} image for {instance_type}; accepted: an "
            f"instance type of its images' processors {sorted(by_processor)}, other versions, or "
            f"container.{part}.image_uri"
        )
    return str(by_processor[processor])


def resolve_inference_image(catalog: dict[str, Any], recipe: Recipe) -> str:
    """The model's image, from where the recipe's serving kind keeps it in the catalog (hfpipe/kinds)."""
    serving = kinds.serving_kind(recipe["serving"]["kind"])
    container = recipe["container"]["inference"]
    return resolve_image(
        catalog,
        serving.image_scope,
        container,
        recipe["serving"]["instance_type"],
        serving.catalog_key(container),
    )


def check_rules(recipe: Recipe) -> None:
    """Rules a JSON Schema cannot express: spot, checkpoints, distribution vs instance, the gate."""
    t = recipe["training"]
    _spot_rules(t)
    dist = t["distribution"] or {}
    unknown = sorted(set(dist) - set(KNOWN_DISTRIBUTIONS))
    if unknown:
        raise RecipeError(
            f"recipe.training.distribution: unknown key(s) {unknown}; accepted: {list(KNOWN_DISTRIBUTIONS)}"
        )
    _version_pairing(recipe["container"]["training"])
    _distribution_rules(t, dist)
    adapter_recipe.check(recipe)
    gate = recipe["evaluation_gate"]
    if gate:
        metric_names = [m["Name"] for m in t["metric_definitions"]]
        if gate["metric"] not in metric_names:
            raise RecipeError(
                f"recipe.evaluation_gate.metric: {gate['metric']!r} is not a training.metric_definitions "
                f"name; accepted: {metric_names}"
            )


def _spot_rules(t: Training) -> None:
    """Spot needs a wait of at least the run's limit and checkpoints to resume from."""
    spot = t["spot"]
    if not spot["enabled"]:
        return
    if spot["max_wait_seconds"] is None:
        raise RecipeError("recipe.training.spot.max_wait_seconds: required when spot.enabled is true")
    if spot["max_wait_seconds"] < t["max_run_seconds"]:
        raise RecipeError(
            f"recipe.training.spot.max_wait_seconds: {spot['max_wait_seconds']} must be >= "
            f"training.max_run_seconds ({t['max_run_seconds']})"
        )
    if not t["checkpoint_s3_uri"]:
        raise RecipeError(
            "recipe.training.checkpoint_s3_uri: required with spot (an s3:// URI or 'auto'), "
            "so an interrupted job resumes from its last checkpoint"
        )


def _version_pairing(container: Container) -> None:
    """The HuggingFace estimator's own rule (sagemaker/huggingface/estimator.py, _validate_args)."""
    if not container.get("image_uri") and len(container["transformers_version"].split(".")) != len(
        container["pytorch_version"].split(".")
    ):
        raise RecipeError(
            f"recipe.container.training: transformers_version {container['transformers_version']!r} and "
            f"pytorch_version {container['pytorch_version']!r} must both be full (4.28.1, 2.0.0) or both "
            "short (4.28, 2.0) versions, as the SageMaker SDK requires"
        )


def _distribution_rules(t: Training, dist: dict[str, Any]) -> None:
    """One smdistributed strategy (the SDK's validate_smdistributed), modelparallel over MPI, a GPU for any
    distribution, and a distribution for more than one instance."""
    itype = t["instance_type"]
    smd = dist.get("smdistributed", {})
    if not isinstance(smd, dict) or len(smd) > 1 or set(smd) - {"dataparallel", "modelparallel"}:
        raise RecipeError(
            f"recipe.training.distribution.smdistributed: {smd!r} must name one strategy, "
            "dataparallel or modelparallel"
        )
    if smd.get("modelparallel", {}).get("enabled") and not dist.get("mpi", {}).get("enabled"):
        raise RecipeError(
            "recipe.training.distribution.mpi: smdistributed modelparallel needs mpi.enabled true"
        )
    if dist and processor_for(itype) != "gpu":
        raise RecipeError(
            f"recipe.training.instance_type: {itype!r} is {kind_of(itype)} instance; distribution "
            f"{sorted(dist)} needs a GPU instance type"
        )
    if t["instance_count"] > 1 and not dist:
        raise RecipeError(
            f"recipe.training.instance_count: {t['instance_count']} instances without a distribution "
            "would run the same single-process job on each; set training.distribution"
        )


def check_distribution(recipe: Recipe, catalog: dict[str, Any]) -> None:
    """smdistributed data parallel where the SageMaker SDK accepts it: its PyTorch versions, as written (the
    HuggingFace estimator checks `pytorch_version` against SM_DATAPARALLEL_SUPPORTED_FRAMEWORK_VERSIONS), on
    the instance types the library runs on; both tables come from the SDK through the image catalog. An
    explicit image_uri skips the version check, as in the SDK."""
    t = recipe["training"]
    smd = (t["distribution"] or {}).get("smdistributed", {})
    if not smd.get("dataparallel", {}).get("enabled"):
        return
    rules = catalog.get(DISTRIBUTION_KEY)
    if not rules:
        raise RecipeError(
            "recipe.training.distribution: smdistributed dataparallel needs the SDK's tables, which this "
            "environment's image catalog lacks; redeploy the pipeline stack"
        )
    itype = t["instance_type"]
    if itype not in rules["dataparallel_instance_types"]:
        raise RecipeError(
            f"recipe.training.instance_type: {itype!r} does not support smdistributed dataparallel; "
            f"accepted: {rules['dataparallel_instance_types']} (or use torch_distributed)"
        )
    container = recipe["container"]["training"]
    version = container["pytorch_version"]
    if not container.get("image_uri") and version not in rules["dataparallel_pytorch_versions"]:
        raise RecipeError(
            f"recipe.container.training.pytorch_version: smdistributed dataparallel is not in PyTorch {version} "
            f"containers; accepted pytorch_version values (the SageMaker SDK's list, as written): "
            f"{rules['dataparallel_pytorch_versions']} (or use torch_distributed)"
        )


def check_limits(recipe: Recipe, requested_poll_seconds: int) -> dict[str, int]:
    """Derive the waits from the recipe so the execution fits Step Functions' limits, or refuse it.

    Returns ``poll_seconds`` and ``endpoint_max_polls`` (the endpoint wait: at most
    limits.MAX_ENDPOINT_POLLS polls, so its history stays bounded) and ``training_wait_seconds`` (the
    Launch task's timeout, from the job's own MaxRuntime/MaxWait). RecipeError when the longest possible
    execution would outlast the state machine's timeout or its 25,000-event history.
    """
    t, s = recipe["training"], recipe["serving"]
    if s["max_latency_ms"] > limits.MAX_SMOKE_LATENCY_MS:
        raise RecipeError(
            f"recipe.serving.max_latency_ms: {s['max_latency_ms']} is above what a SageMaker real-time "
            f"endpoint may take to answer; accepted: up to {limits.MAX_SMOKE_LATENCY_MS}"
        )
    max_wait = t["spot"]["max_wait_seconds"] if t["spot"]["enabled"] else None
    training_wait = limits.training_wait_seconds(t["max_run_seconds"], max_wait)
    poll, polls = limits.endpoint_polling(s["endpoint_timeout_seconds"], requested_poll_seconds)
    longest = limits.worst_case_seconds(training_wait, poll, polls if recipe["deploy"] else 0)
    if longest > limits.EXECUTION_TIMEOUT_SECONDS:
        field_name, value = (
            ("training.spot.max_wait_seconds", max_wait)
            if max_wait is not None
            else ("training.max_run_seconds", t["max_run_seconds"])
        )
        raise RecipeError(
            f"recipe.{field_name}: {value} with serving.endpoint_timeout_seconds "
            f"{s['endpoint_timeout_seconds']} could run {longest} s, longer than the state machine's "
            f"execution timeout ({limits.EXECUTION_TIMEOUT_SECONDS} s); accepted: training wait + endpoint "
            f"wait + {limits.OTHER_STATES_SECONDS} s within it"
        )
    events = limits.worst_case_history_events(polls)
    if events > limits.HISTORY_EVENT_LIMIT:  # cannot happen with MAX_ENDPOINT_POLLS; kept as the rule
        raise RecipeError(f"serving.endpoint_timeout_seconds: {polls} polls would exceed the history limit")
    return {"poll_seconds": poll, "endpoint_max_polls": polls, "training_wait_seconds": training_wait}


def resolve_input(event: Any) -> Recipe:
    """The execution input's recipe, resolved (recipe or recipe_name, then overrides, deploy and
    keep_endpoint), with its rules and the environment's ownership rules still to check."""
    if not isinstance(event, dict):
        raise RecipeError(f"input: expected a JSON object, got {type(event).__name__}")
    # champion: where the evaluation reads the version it compares with (hfpipe.core.run.evaluation_job.target).
    allowed = {
        "recipe",
        "recipe_name",
        "overrides",
        "poll_seconds",
        "deploy",
        "keep_endpoint",
        "ttl",
        "champion",
    }
    unknown = sorted(set(event) - allowed)
    if unknown:
        raise RecipeError(f"input: unknown field(s) {unknown}; accepted: {sorted(allowed)}")
    if "recipe" in event and "recipe_name" in event:
        raise RecipeError("input: both 'recipe' and 'recipe_name' given; accepted: exactly one of them")
    if "recipe" in event and not isinstance(event["recipe"], dict):
        raise RecipeError(f"input.recipe: {event['recipe']!r} is not accepted; accepted: a recipe object")
    if "recipe_name" in event:
        rules.recipe_name(event["recipe_name"], "input.recipe_name")
    overrides = event.get("overrides") or {}
    if isinstance(overrides, list):
        from hfpipe.core.recipe.recipes import parse_override

        for i, item in enumerate(overrides):
            if not isinstance(item, str):
                raise RecipeError(
                    f"input.overrides[{i}]: {item!r} is not accepted; accepted: a 'dotted.key=value' string"
                )
        overrides = dict(parse_override(o) for o in overrides)
    if not isinstance(overrides, dict):
        raise RecipeError(f"input.overrides: {overrides!r} must be an object or a list of key=value")
    overrides = dict(overrides)
    if "deploy" in event:
        overrides["deploy"] = event["deploy"]
    if "keep_endpoint" in event:
        overrides["serving.keep_endpoint"] = event["keep_endpoint"]
    return resolve_recipe(event.get("recipe"), event.get("recipe_name"), overrides)


def checkpoint_uri(training: Training, config: PlanConfig, training_job_name: str) -> Any:
    """The job's checkpoint URI ('auto': under the artifacts bucket's checkpoints/ prefix, per job): the one
    environment rule for it (its shape, an s3:// URI without '.' or '..' parts, is validate.recipe's)."""
    checkpoint = training["checkpoint_s3_uri"]
    checkpoints_root = f"s3://{config.artifacts_bucket}/{contract.ARTIFACTS_CHECKPOINTS_PREFIX}"
    if checkpoint == "auto":
        checkpoint = f"{checkpoints_root}{training_job_name}/"
    if checkpoint and not checkpoint.startswith(checkpoints_root):
        # The execution role writes only under the prefixes jobs use (models/, checkpoints/).
        raise RecipeError(
            f"recipe.training.checkpoint_s3_uri: {checkpoint!r} is not this environment's checkpoint "
            f"prefix; accepted: 'auto' or a URI under {checkpoints_root}"
        )
    return checkpoint


def check_hyperparameter_count(job_request: dict[str, Any]) -> None:
    """CreateTrainingJob's limit on HyperParameters, the pipeline's own sagemaker_* keys counted."""
    if len(job_request["HyperParameters"]) > 100:
        raise RecipeError(
            f"recipe.training.hyperparameters: {len(job_request['HyperParameters'])} hyperparameters with the "
            "pipeline's own sagemaker_* keys; accepted: at most 100 in all (CreateTrainingJob's limit)"
        )


def build_plan(
    event: Any,
    execution_name: str,
    config: PlanConfig,
    quota_client: quotas.QuotaPaginatorClient,
    s3: Any = None,
    now: datetime | None = None,
) -> Plan:
    """The plan (its fields: hfpipe.core.run.plan_model.Plan) of an execution input, or of a recipe ``accept``
    took already; every recipe rule through ``accept`` (`s3` reads a recipe's own training source back)."""
    accepted = accept(event, config, s3=s3)
    recipe, poll = accepted.recipe, int(accepted.poll_seconds or config.default_poll_seconds)
    t = recipe["training"]
    deploy = adapter_recipe.own_endpoint(recipe, recipe["deploy"])
    # The serving kind's fit rule and its own server settings (vllm: SM_VLLM_*), under the recipe's.
    kind_environment = (
        serving_fit.kind_environment(recipe, config.image_catalog, config.region) if deploy else {}
    )
    quotas.check_quotas(quota_client, quotas.quota_names(recipe, deploy))
    waits = check_limits(recipe, poll)
    n = names.derive_names(execution_name, config.env)
    checkpoint = checkpoint_uri(t, config, n["training_job_name"])
    tags = request.resource_tags(config.env, execution_name, recipe["name"])
    job_request = _job_request(accepted, config, n["training_job_name"], checkpoint, tags)
    estimate, hours = cost.expected_training_cost(t)
    plan = Plan(
        execution_name=execution_name,
        recipe_name=recipe["name"],
        task=recipe["task"],
        env=config.env,
        training_job_name=n["training_job_name"],
        model_name=n["model_name"],
        endpoint_config_name=n["endpoint_config_name"],
        endpoint_name=n["endpoint_name"],
        instance_type=t["instance_type"],
        instance_count=t["instance_count"],
        spot=t["spot"]["enabled"],
        price_per_hour_usd=prices.price_per_hour(t["instance_type"]),
        estimated_cost_usd=estimate,
        estimated_hours=hours,
        deploy=deploy,
        poll_seconds=waits["poll_seconds"],
        endpoint_max_polls=waits["endpoint_max_polls"],
        training_wait_seconds=waits["training_wait_seconds"],
        checkpoint_s3_uri=checkpoint,
        image_uri=accepted.training_image,
        inference_image_uri=accepted.inference_image,
        role_arn=config.role_arn,
        **_serving_fields(recipe["serving"], n["model_name"], kind_environment),
        gate=_gate(recipe["evaluation_gate"]),
        tags=tags,
        hosting_tags=hosting_tags(event, config, tags, deploy, now),
        training_job_request=job_request,
        hyperparameters_not_checked=accepted.hyperparameters_not_checked,
        adapter_base_model=adapter_recipe.base_model(recipe),
        evaluation=_evaluation(recipe, event, job_request, execution_name, config),
    )
    check_sample_request(recipe, plan.serving_environment)  # the smoke test's, as the served model takes it
    api_shapes.check_plan(plan)  # what SageMaker's API would refuse, refused here, before anything exists
    return plan


def hosting_tags(
    event: Any, config: PlanConfig, tags: list[dict[str, str]], deploy: bool, now: datetime | None
) -> list[dict[str, str]]:
    """The model's, config's and endpoint's tags: the run's, and its endpoint's expiry where it has one."""
    ttl = endpoint_ttl(event, config)  # a bad ttl is refused with or without an endpoint
    return tags + expiry.expiry_tags(ttl if deploy else None, now or datetime.now(UTC))


def endpoint_ttl(event: Any, config: PlanConfig) -> int | None:
    """The run's endpoint's time to live: the input's ``ttl`` (`hfpipe start --ttl`), else the environment's.
    It counts from the Plan (Step Functions' JSONPath has no date arithmetic to count it from CreateEndpoint)."""
    if not isinstance(event, dict) or "ttl" not in event:
        return config.endpoint_ttl_seconds
    try:
        return expiry.parse_ttl(event["ttl"], "input.ttl")
    except expiry.TtlError as err:
        raise RecipeError(str(err)) from None


def _evaluation(
    recipe: Recipe, event: Any, job_request: dict[str, Any], execution_name: str, config: PlanConfig
) -> Evaluation | None:
    """The recipe's evaluation job (hfpipe.core.run.evaluation_job), its champion read where the execution
    input's ``champion`` says."""
    return evaluation_job.plan_evaluation(
        recipe,
        event.get("champion") if isinstance(event, dict) else None,
        training_request=job_request,
        execution_name=execution_name,
        env=config.env,
        # The project's own code, which holds evaluate.py (a recipe's own source does not).
        code_uri=config.sourcedir_uri,
        artifacts_bucket=config.artifacts_bucket,
        # The table's on-demand price of the type (processing's list price is that of training's type).
        price_per_hour_usd=prices.price_per_hour(recipe["training"]["instance_type"]),
    )


def _job_request(
    accepted: Accepted, config: PlanConfig, job_name: str, checkpoint: str | None, tags: list[dict[str, str]]
) -> dict[str, Any]:
    """The CreateTrainingJob request of the accepted recipe, within the API's count of hyperparameters."""
    recipe = accepted.recipe
    job_request = request.build_training_job_request(
        recipe={
            **recipe,
            "training": {**recipe["training"], "hyperparameters": adapter_recipe.hyperparameters(recipe)},
        },
        training_job_name=job_name,
        image_uri=accepted.training_image,
        role_arn=config.role_arn,
        region=config.region,
        sourcedir_uri=sources.source_uri(recipe, config.sourcedir_uri),
        data_bucket=config.data_bucket,
        artifacts_bucket=config.artifacts_bucket,
        checkpoint_s3_uri=checkpoint,
        tags=tags,
    )
    check_hyperparameter_count(job_request)
    return job_request


def _serving_fields(s: Serving, model_name: str, kind_environment: dict[str, str]) -> dict[str, Any]:
    """The Plan's serving fields: the kind, the fleet and its one production variant, the container's
    environment (the kind's settings under the recipe's) and the smoke test's request and expectations."""
    kind_name = str(s.get("kind", kinds.DEFAULT_SERVING_KIND))  # none named: served as before kinds
    variant = fleets.production_variant(model_name, s["instance_type"], s["instance_count"], kind_name)
    return {
        "serving_kind": kind_name,
        "serving_instance_type": s["instance_type"],
        "serving_instance_count": s["instance_count"],
        "serving_production_variants": [variant],
        "keep_endpoint": bool(s["keep_endpoint"]),
        "serving_environment": rules.environment(
            {**kind_environment, **s["environment"]}, "recipe.serving.environment", max_len=1024
        ),
        "sample_request": s["sample_request"],
        "expected_keys": s["expected_keys"],
        "max_latency_ms": s["max_latency_ms"],
    }


def _gate(gate: EvaluationGate | None) -> Gate:
    """The evaluation gate of the recipe (none: a gate that is not enabled)."""
    return Gate(
        enabled=bool(gate),
        metric=gate["metric"] if gate else None,
        threshold=gate["threshold"] if gate else None,
        higher_is_better=bool(gate.get("higher_is_better", True)) if gate else True,
    )
