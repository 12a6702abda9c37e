"""Names shared by the CDK stacks, the Lambdas and the hfpipe command.

Stdlib only: the stacks import it at synth time, the CLI at run time, and the Lambda bundles copy it.
Changing a value here changes deployed resources; keep the three sides in step by importing, never
by retyping a string.
"""

from __future__ import annotations

PROJECT = "hfpipe"

# SSM parameters each environment's stacks write and the CLI reads: /hfpipe/<env>/<key>.
SSM_PREFIX = "/hfpipe"
SSM_DATA_BUCKET = "data-bucket"
SSM_ARTIFACTS_BUCKET = "artifacts-bucket"
SSM_EXECUTION_ROLE_ARN = "execution-role-arn"
SSM_SOURCEDIR_URI = "sourcedir-uri"
SSM_STATE_MACHINE_ARN = "state-machine-arn"
SSM_NOTIFICATION_TOPIC_ARN = "notification-topic-arn"
SSM_IMAGE_CATALOG = "image-catalog"
SSM_DEPLOY_STATE_MACHINE_ARN = "deploy-state-machine-arn"
SSM_PROMOTE_STATE_MACHINE_ARN = "promote-state-machine-arn"
SSM_ADAPTER_STATE_MACHINE_ARN = "adapter-state-machine-arn"
# The shared base an environment serves adapters on, as deployed (cdk.json's shared_base, defaults filled,
# as JSON): what the command reads of it, so a deployed environment, not the checkout's cdk.json, answers.
SSM_SHARED_BASE = "shared-base"
# How long the environment's endpoints live, in seconds (cdk.json endpoint_ttl_hours; absent: no expiry): what
# `hfpipe start --dry-run` plans with, as the Plan Lambda does.
SSM_ENDPOINT_TTL_SECONDS = "endpoint-ttl-seconds"
#: cdk.json ``evaluation_gate`` of the environment (hfpipe.core.promotion.evaluation_gate.GATE_MODES).
SSM_EVALUATION_GATE = "evaluation-gate"


def ssm_parameter_name(env: str, key: str) -> str:
    """The SSM parameter path for one value of one environment, e.g. /hfpipe/dev/data-bucket."""
    return f"{SSM_PREFIX}/{env}/{key}"


# Tags put on every SageMaker resource an execution creates; `hfpipe cleanup` finds resources by them.
TAG_ENV = "hfpipe:env"
TAG_EXECUTION = "hfpipe:execution"
TAG_RECIPE = "hfpipe:recipe"
TAG_MANAGED_BY = "hfpipe:managed-by"
# A user's decision to keep an endpoint (`hfpipe stop --keep-endpoint`): put on the endpoint, its config and
# its model, it makes clean-up (the Cleanup Lambda, `hfpipe stop`, `hfpipe cleanup`) leave them; only a
# command that names the endpoint (`hfpipe endpoints delete NAME`) deletes them then, or the environment's
# reaper once one that also carries TAG_EXPIRES_AT has expired (hfpipe.core.deploy.expiry).
TAG_KEEP = "hfpipe:keep"
TAG_KEEP_VALUE = "true"
# Named endpoints (`hfpipe deploy`): the endpoint's short name as declared in cdk.json ("endpoints"), put on the
# endpoint and on every endpoint config and model a deploy made for it. A run's clean-up (Cleanup, `hfpipe stop`,
# `hfpipe cleanup`) never deletes a resource carrying it; only `hfpipe endpoints delete NAME` naming it does.
TAG_DEPLOYMENT = "hfpipe:deployment"
# The model package version (ARN) a named endpoint serves, and the deploy execution that put it there.
TAG_MODEL_VERSION = "hfpipe:model-version"
TAG_DEPLOY_EXECUTION = "hfpipe:deploy-execution"
# The task kind (the recipe's ``task``) a named endpoint is bound to, put on it when a deploy creates it: its
# callers send that task's requests, so a later deploy of another task's version is refused.
TAG_TASK = "hfpipe:task"
# When an endpoint (and the config and model made for it) expires: ISO 8601 UTC, e.g. 2026-12-08T17:30:00Z, set
# when it is created (cdk.json endpoint_ttl_hours, or --ttl). The environment's reaper deletes an expired one
# that had no calls in its idle window (hfpipe.core.deploy.expiry); without it an endpoint never expires.
TAG_EXPIRES_AT = "hfpipe:expires-at"


def state_machine_name(env: str) -> str:
    """The pipeline state machine's fixed physical name (stacks/constructs/state_machine_name.py): the
    Cleanup function knows its ARN from it, and the command knows which environment an execution ARN ran in."""
    return f"hfpipe-{env}-pipeline"


def env_of_state_machine(name: str) -> str | None:
    """The environment whose pipeline state machine has this name, or None for any other name."""
    if name.startswith("hfpipe-") and name.endswith("-pipeline"):
        return name.removeprefix("hfpipe-").removesuffix("-pipeline") or None
    return None


def deploy_state_machine_name(env: str) -> str:
    """The deploy state machine's fixed physical name (`hfpipe deploy` starts it)."""
    return f"hfpipe-{env}-deploy"


def promote_state_machine_name(env: str) -> str:
    """The promote state machine's fixed physical name (`hfpipe promote` starts it in the target environment)."""
    return f"hfpipe-{env}-promote"


def adapter_state_machine_name(env: str) -> str:
    """The adapter state machine's fixed physical name (`hfpipe deploy --adapter` starts it), where the
    environment declares a shared base (docs/adapters.md)."""
    return f"hfpipe-{env}-adapters"


#: The shared base's name among an environment's deployments (docs/adapters.md): its endpoint is
#: deployed_endpoint_name(env, SHARED_BASE), so no named endpoint of cdk.json may be called so.
SHARED_BASE = "shared-base"


def deployed_endpoint_name(env: str, name: str) -> str:
    """The SageMaker endpoint of one named endpoint of an environment (cdk.json "endpoints"): hfpipe-<env>-<name>.
    Endpoint names are unique per account and region, so the environment in the name keeps dev's and prod's
    apart even where both share an account and region."""
    return f"{PROJECT}-{env}-{name}"


def endpoint_alarm_name(env: str, name: str, metric: str) -> str:
    """The CloudWatch alarm the stack makes for one named endpoint and one metric ("5xx-errors", "4xx-errors",
    "model-latency"); a deploy's AutoRollbackConfiguration names these."""
    return f"{PROJECT}-{env}-{name}-{metric}"


def deployment_parameter_name(env: str, name: str) -> str:
    """The SSM parameter recording which version a named endpoint serves (written by the deploy's Record step,
    read by `hfpipe endpoints`): /hfpipe/<env>/deployments/<name>."""
    return ssm_parameter_name(env, f"deployments/{name}")


def stack_name(env: str, part: str) -> str:
    """CloudFormation stack name for one part (Data, Quota, Pipeline) of one environment."""
    return f"Hfpipe-{env}-{part}"


# Key prefixes in the artifacts bucket. The checkpoints prefix carries the bucket's checkpoint expiry
# lifecycle rule, so a training job's CheckpointConfig.S3Uri must live under it ("auto" puts it at
# checkpoints/<training job name>/). Training jobs write their model.tar.gz and output.tar.gz under the
# output prefix (OutputDataConfig.S3OutputPath; SageMaker adds <training job name>/output/).
ARTIFACTS_CHECKPOINTS_PREFIX = "checkpoints/"
# OutputDataConfig.S3OutputPath of every training job (model.tar.gz, output.tar.gz); with the checkpoints
# prefix, the only keys the SageMaker execution role may write.
ARTIFACTS_OUTPUT_PREFIX = "models/"
# Launch keeps each waiting task's token here (tokens are up to 2,048 characters, SageMaker tag values
# at most 256), keyed by training job name; OnTrainingEvent reads it to complete the task.
ARTIFACTS_TASK_TOKENS_PREFIX = "task-tokens/"
# The Register step writes each registered version's statistics document (final metrics, cost, lineage) here,
# at model-metrics/<execution>/metrics.json; the version's ModelMetrics points at it, and `hfpipe models`
# reads it back. The Register function may write under this prefix only.
ARTIFACTS_MODEL_METRICS_PREFIX = "model-metrics/"
# Promotion copies a source environment's approved model.tar.gz (and its metrics document) here:
# promoted/<source env>/<recipe>/<source version>/, so the target never reads the source's bucket again.
ARTIFACTS_PROMOTED_PREFIX = "promoted/"
# The evaluation job (a SageMaker processing job, docs/evaluation.md) writes its document here:
# evaluations/<execution>/evaluation.json (the contract's key); the pipeline's store step adds the wrapper
# beside it (evaluated.json). With models/ and checkpoints/, the execution role's writes.
ARTIFACTS_EVALUATIONS_PREFIX = "evaluations/"
# A recipe's own training source (training.source): `hfpipe start` uploads its sourcedir.tar.gz once per
# content hash to sources/<sha256>/sourcedir.tar.gz; the Plan accepts a source only under this prefix and
# may read only it (docs/own-code.md).
ARTIFACTS_SOURCES_PREFIX = "sources/"


def source_key(sha256: str) -> str:
    """The artifacts bucket key of a training source archive with this content hash."""
    return f"{ARTIFACTS_SOURCES_PREFIX}{sha256}/sourcedir.tar.gz"


def model_package_group_name(env: str, recipe: str) -> str:
    """The model package group of one recipe in one environment (hfpipe-<env>-<recipe>): the Register step
    registers each deployed run's model there, and `hfpipe models` lists and decides on its versions."""
    return f"{PROJECT}-{env}-{recipe}"
