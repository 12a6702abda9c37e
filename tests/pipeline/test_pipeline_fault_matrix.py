"""The fault matrix: each row runs the synthesized definition on moto and checks end state, error and
what SageMaker resources are left (only the training job record may remain; nothing orphaned)."""

from __future__ import annotations

import itertools
import json

import pytest
from accounts import ACCOUNT

from hfpipe import contract
from hfpipe.core.run.plan_model import Plan

pytestmark = pytest.mark.slow
_ids = itertools.count()


def run(engine, recipe_name="tiny-qa", **inp):
    name = f"{recipe_name}-{next(_ids)}"
    result = engine.run({"recipe_name": recipe_name, "poll_seconds": 1, **inp}, name=name)
    return name, result


def run_with_endpoint_failed(engine, reason):
    """A run whose endpoint goes to Failed with ``reason`` (FailureReason)."""

    def failed(ep):
        ep.endpoint_status = "Failed"
        ep.failure_reason = reason

    engine.on_endpoint = failed
    return run(engine)


def left(engine, name):
    """SageMaker resources of one execution still present (by the derived names: env-execution-...)."""
    res = engine.sagemaker_resources()
    base = f"dev-{name}"
    return {kind: [n for n in names if n == base or n.startswith(base + "-")] for kind, names in res.items()}


NOTHING_DEPLOYED = {"models": [], "endpoint_configs": [], "endpoints": []}


def assert_only_job(engine, name, jobs=1):
    got = left(engine, name)
    assert len(got.pop("training_jobs")) == jobs
    assert got == NOTHING_DEPLOYED


def test_happy_path_with_deploy(fresh):
    fresh.endpoint = lambda n, body: [{"answer": "SageMaker endpoint", "score": 0.71}]
    name, r = run(fresh)
    assert r.status == "SUCCEEDED", r.cause
    report = r.output["report"]
    assert (
        report["smoke_test"]["ok"] and report["smoke_test"]["response"][0]["answer"] == "SageMaker endpoint"
    )
    assert report["endpoint_deleted"] is True and report["training_job_status"] == "Completed"
    assert "SmokeTest" in r.states and "DeleteEndpoint" in r.states
    assert_only_job(fresh, name)


def test_happy_path_keep_endpoint_leaves_tagged_endpoint(fresh):
    name, r = run(fresh, keep_endpoint=True)
    assert r.status == "SUCCEEDED", r.cause
    got = left(fresh, name)
    assert got["endpoints"] == [f"dev-{name}-ep"] and got["models"] == [f"dev-{name}-model"]
    sm = fresh.client("sagemaker")
    arn = sm.describe_endpoint(EndpointName=f"dev-{name}-ep")["EndpointArn"]
    tags = {t["Key"]: t["Value"] for t in sm.list_tags(ResourceArn=arn)["Tags"]}
    assert tags[contract.TAG_EXECUTION] == name and tags[contract.TAG_MANAGED_BY] == "hfpipe"
    assert r.output["report"]["endpoint_deleted"] is False


def test_happy_path_without_deploy(fresh):
    name, r = run(fresh, deploy=False)
    assert r.status == "SUCCEEDED", r.cause
    assert "CreateModel" not in r.states and r.states[-1] == "TrainedWithoutDeploy"
    assert r.output["report"]["smoke_test"] is None
    assert_only_job(fresh, name)


def test_an_adapter_run_registers_its_adapter_with_its_base_and_makes_no_endpoint(fresh):
    seen = {}
    fresh.training = lambda request, job: seen.update(request["HyperParameters"])
    name, r = run(fresh, "tiny-adapter")
    assert r.status == "SUCCEEDED", r.cause
    assert "CreateModel" not in r.states and r.states[-2:] == ["ReportAdapter", "AdapterRegistered"]
    assert (json.loads(seen["merge_adapter"]), json.loads(seen["adapter_base_model"])) == (
        False,
        "hfpipe-fixtures/tiny-llama",
    )
    sm = fresh.client("sagemaker")
    version = sm.describe_model_package(ModelPackageName=r.output["registered"]["model_package_arn"])
    assert version["CustomerMetadataProperties"]["adapter_base_model"] == "hfpipe-fixtures/tiny-llama"
    assert_only_job(fresh, name)


def test_training_job_carries_spot_request(fresh):
    seen = {}
    fresh.training = lambda request, job: seen.update(request)
    name, r = run(fresh, "tiny-spot", deploy=False)
    assert r.status == "SUCCEEDED", r.cause
    assert seen.get("EnableManagedSpotTraining") is True
    assert (
        seen["StoppingCondition"]["MaxWaitTimeInSeconds"] >= seen["StoppingCondition"]["MaxRuntimeInSeconds"]
    )
    assert seen["CheckpointConfig"]["S3Uri"] == f"s3://hfpipe-test-artifacts/checkpoints/dev-{name}/"


@pytest.mark.parametrize(
    ("overrides", "needle"),
    [
        (
            {"training.instance_type": "p3.2xlarge"},
            "recipe.training.instance_type: 'p3.2xlarge' does not match",
        ),
        ({"training.bogus": 1}, "unknown field(s) ['bogus']"),
        ({"training.spot.enabled": True}, "spot.max_wait_seconds: required"),
        (
            {"training.spot": {"enabled": True, "max_wait_seconds": 60}, "training.max_run_seconds": 3600},
            "must be >= training.max_run_seconds (3600)",
        ),
        (
            {"training.spot": {"enabled": True, "max_wait_seconds": 7200}},
            "checkpoint_s3_uri: required with spot",
        ),
        (
            {"training.distribution": {"smdistributed": {"dataparallel": {"enabled": True}}}},
            "'ml.g4dn.xlarge' does not support smdistributed dataparallel",
        ),
        (
            {
                "training.distribution": {"smdistributed": {"dataparallel": {"enabled": True}}},
                "training.instance_type": "ml.p3.16xlarge",
                "training.instance_count": 2,
            },
            "smdistributed dataparallel is not in PyTorch 2.8.0 containers",
        ),
        (
            {
                "training.distribution": {"torch_distributed": {"enabled": True}},
                "training.instance_type": "ml.m5.xlarge",
            },
            "is a CPU instance",
        ),
        ({"training.instance_count": 2}, "without a distribution"),
        ({"evaluation_gate": {"metric": "nope", "threshold": 1}}, "evaluation_gate.metric: 'nope'"),
        ({"container.training.transformers_version": "9.9.9"}, "not in the image catalog"),
    ],
    ids=[
        "schema-pattern",
        "schema-unknown",
        "spot-maxwait",
        "spot-maxwait-lt-maxrun",
        "spot-checkpoint",
        "smddp-instance",
        "smddp-torch-version",
        "dist-cpu",
        "multi-no-dist",
        "gate-metric",
        "image",
    ],
)
def test_bad_recipe_fails_in_plan_with_nothing_created(fresh, overrides, needle):
    name, r = run(fresh, overrides=overrides)
    assert r.status == "FAILED"
    assert r.error == "RecipeError"
    assert needle in r.cause
    assert r.states == ["Plan"]
    assert left(fresh, name) == {"training_jobs": [], **NOTHING_DEPLOYED}


def test_bad_poll_seconds(fresh):
    _, r = run(fresh, poll_seconds=0)
    assert (r.status, r.error) == ("FAILED", "RecipeError") and "input.poll_seconds: 0" in r.cause


def test_quota_too_low(fresh):
    fresh.quotas.value_for = lambda n: 0.0 if n == "ml.m5.large for endpoint usage" else 10.0
    name, r = run(fresh)
    assert (r.status, r.error) == ("FAILED", "QuotaTooLowError")
    assert "ml.m5.large for endpoint usage" in r.cause and "applied value 0 < needed 1" in r.cause
    assert left(fresh, name) == {"training_jobs": [], **NOTHING_DEPLOYED}


@pytest.mark.parametrize("status", ["Failed", "Stopped"])
def test_training_failed_or_stopped(fresh, status):
    def fail(request, job):
        job.training_job_status = status
        job.failure_reason = "AlgorithmError: CUDA out of memory" if status == "Failed" else None

    fresh.training = fail
    name, r = run(fresh)
    assert r.status == "FAILED"
    assert r.error == f"TrainingJob{status}" and name in r.cause
    if status == "Failed":
        assert "CUDA out of memory" in r.cause
    assert "CreateModel" not in r.states
    assert_only_job(fresh, name)


def test_throttled_launch_then_success(fresh):
    fresh.create_errors.extend(["ThrottlingException"])
    name, r = run(fresh, deploy=False)
    assert r.status == "SUCCEEDED", r.cause
    assert r.states.count("Launch") == 1  # retried inside the state
    assert_only_job(fresh, name)


def test_launch_retried_after_job_created_makes_no_second_job(fresh):
    fresh.after_errors["launch"] = ["Lambda.ServiceException"]
    before = len(fresh.invocations)
    name, r = run(fresh, deploy=False)
    assert r.status == "SUCCEEDED", r.cause
    # The retry found the job the first attempt made (tagged with this env and execution) and, as it had
    # already ended, completed the waiting task itself.
    assert [k for k, _ in fresh.invocations[before:]].count("launch") == 2
    assert r.output["training"]["TrainingJobStatus"] == "Completed"
    assert_only_job(fresh, name)


def test_endpoint_failed_is_cleaned_up(fresh):
    name, r = run_with_endpoint_failed(fresh, "Image pull failed")
    assert (r.status, r.error) == ("FAILED", "EndpointFailed")
    assert f"dev-{name}-ep is Failed" in r.cause
    assert "CleanupOnError" in r.states
    assert_only_job(fresh, name)


def test_endpoint_wait_timeout_leaves_an_endpoint_still_creating_to_hfpipe_cleanup(fresh):
    """SageMaker refuses DeleteEndpoint while the endpoint is Creating (EndpointStatus in
    https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_DescribeEndpoint.html), and its config must
    not be deleted meanwhile; the Cleanup function, which runs for minutes at most, does not wait: it reports
    the endpoint as not deletable yet and names the command that finishes it (teardown.py)."""
    from moto.backends import get_backend
    from pipeline_lambdas.teardown import cleanup

    from hfpipe.core.names import PlannedNames
    from hfpipe.local.engine.engine import ACCOUNT

    fresh.on_endpoint = lambda ep: setattr(ep, "endpoint_status", "Creating")
    name, r = run(fresh, overrides={"serving.endpoint_timeout_seconds": 2})
    assert (r.status, r.error) == ("FAILED", "EndpointWaitTimeout")
    assert "not InService after 2 polls" in r.cause
    assert left(fresh, name)["endpoints"] == [f"dev-{name}-ep"]
    (cleaned,) = [
        json.loads(e["lambdaFunctionSucceededEventDetails"]["output"])
        for e in r.history
        if e["type"] == "LambdaFunctionSucceeded"
        and "not deletable yet" in e["lambdaFunctionSucceededEventDetails"]["output"]
    ]
    assert cleaned["skipped"][0] == (
        f"endpoint dev-{name}-ep: not deletable yet (Creating); run `hfpipe cleanup --env dev`, "
        "which waits until SageMaker allows it"
    )
    # Once SageMaker is done creating it, the same clean-up deletes it (as `hfpipe cleanup` does).
    get_backend("sagemaker")[ACCOUNT][fresh.region].endpoints[f"dev-{name}-ep"].endpoint_status = "InService"
    cleanup(fresh.client("sagemaker"), PlannedNames.derive(name, "dev"))
    assert_only_job(fresh, name)


def test_smoke_test_wrong_answer_is_cleaned_up(fresh):
    fresh.endpoint = lambda n, body: [{"generated_text": "not a QA answer"}]
    name, r = run(fresh)
    assert (r.status, r.error) == ("FAILED", "SmokeTestFailed")
    assert "lacks key(s) ['answer', 'score']" in r.cause
    assert_only_job(fresh, name)


def test_evaluation_gate_blocks_deploy(fresh):
    def metrics(request, job):
        job.final_metric_data_list = [
            {"MetricName": "eval_accuracy", "Value": 0.2, "Timestamp": job.creation_time}
        ]

    fresh.training = metrics
    name, r = run(fresh, "tiny-mnli", overrides={"evaluation_gate.threshold": 0.5})
    assert (r.status, r.error) == ("FAILED", "EvaluationGateNotPassed")
    assert "eval_accuracy = 0.2, required >= 0.5" in r.cause
    assert "CreateModel" not in r.states
    assert_only_job(fresh, name)


def test_evaluation_gate_passes(fresh):
    fresh.training = lambda request, job: setattr(
        job,
        "final_metric_data_list",
        [{"MetricName": "eval_accuracy", "Value": 0.9, "Timestamp": job.creation_time}],
    )
    fresh.endpoint = lambda n, body: [{"label": "entailment", "scores": {"entailment": 0.8}}]
    _, r = run(fresh, "tiny-mnli")
    assert r.status == "SUCCEEDED", r.cause
    assert r.output["report"]["evaluation_gate"]["passed"] is True
    assert r.output["report"]["final_metrics"] == {"eval_accuracy": 0.9}


@pytest.mark.parametrize(
    "recipe", ["bert-large-squad-ddp", "roberta-large-mnli-mp", "distilbert-spot", "bloomz-7b1-lora-samsum"]
)
def test_original_recipes_complete(fresh, recipe):
    def train(request, job):
        job.billable_time_in_seconds = 600
        job.training_time_in_seconds = 1800 if request.get("EnableManagedSpotTraining") else 600
        job.final_metric_data_list = [
            {"MetricName": m, "Value": 90.0, "Timestamp": job.creation_time}
            for m in ("eval_f1", "eval_accuracy")
        ]

    fresh.training = train

    def answer(endpoint, body):
        if "messages" in body:  # the vllm serving kind (bloomz-7b1-lora-samsum): an OpenAI chat completion
            return {
                "object": "chat.completion",
                "choices": [
                    {"index": 0, "message": {"role": "assistant", "content": "s"}, "finish_reason": "stop"}
                ],
                "usage": {"prompt_tokens": 9, "completion_tokens": 1, "total_tokens": 10},
            }
        return [
            {"answer": "a", "score": 1.0, "label": "x", "scores": {"x": 1.0}, "generated_text": "summary"}
        ]

    fresh.endpoint = answer
    name, r = run(fresh, recipe)
    assert r.status == "SUCCEEDED", r.cause
    rep = r.output["report"]
    plan = Plan.from_json(r.output["plan"])  # the plan the execution kept is a plan of this schema
    assert rep["cost_usd"] == pytest.approx(
        plan.price_per_hour_usd * plan.instance_count * 600 / 3600, abs=1e-3
    )
    assert rep["spot_savings_percent"] == (66.7 if plan.spot else None)
    assert_only_job(fresh, name)


def test_training_plugin_gets_the_request_as_sent(fresh):
    """moto rewrites MetricDefinitions in place; the plug-in and DescribeTrainingJob see the recipe's."""
    from hfpipe.core.recipe.recipes import load_recipe, resolve_recipe

    wanted = resolve_recipe(load_recipe("tiny-lora"))["training"]["metric_definitions"]
    assert wanted, "tiny-lora defines metrics"
    seen = []
    fresh.training = lambda request, job: seen.append(request)
    name, r = run(fresh, "tiny-lora", deploy=False)
    assert r.status == "SUCCEEDED", r.cause
    [request] = seen
    assert request["AlgorithmSpecification"]["MetricDefinitions"] == wanted
    described = fresh.client("sagemaker").describe_training_job(TrainingJobName=f"dev-{name}")
    assert described["AlgorithmSpecification"]["MetricDefinitions"] == wanted


# --- error names as AWS documents them, per integration (stacks/constructs/pipeline_state_machine.py) -----
# Optimized SageMaker integration (CreateModel, CreateEndpointConfig, CreateEndpoint): modeled exceptions
# are SageMaker.<Name>Exception, the rest (throttling, validation, access) SageMaker.AmazonSageMakerException.
# AWS SDK integration (DescribeEndpoint): unmodeled errors are SageMaker.SageMakerException.
NATIVE_TASKS = [
    ("create_model", "CreateModel"),
    ("create_endpoint_config", "CreateEndpointConfig"),
    ("create_endpoint", "CreateEndpoint"),
]


@pytest.mark.parametrize(("api", "state"), NATIVE_TASKS)
@pytest.mark.parametrize("code", ["ThrottlingException", "ResourceLimitExceeded"])
def test_native_task_throttled_or_out_of_capacity_is_retried(fresh, api, state, code):
    fresh.sagemaker_errors[api] = [code]
    name, r = run(fresh)
    assert r.status == "SUCCEEDED", r.cause
    attempts = [e for e in r.history if e["type"] == "TaskFailed"]
    named = (
        "SageMaker.ResourceLimitExceededException"
        if code == "ResourceLimitExceeded"
        else ("SageMaker.AmazonSageMakerException")
    )
    assert [e["taskFailedEventDetails"]["error"] for e in attempts] == [named]
    assert_only_job(fresh, name)


@pytest.mark.parametrize(("api", "state"), NATIVE_TASKS)
@pytest.mark.parametrize("code", ["ValidationException", "AccessDeniedException"])
def test_native_task_refused_is_retried_a_few_times_then_cleaned_up(fresh, api, state, code):
    fresh.sagemaker_errors[api] = [code] * 10
    name, r = run(fresh)
    assert (r.status, r.error) == ("FAILED", "SageMaker.AmazonSageMakerException"), r.cause
    failed = [e for e in r.history if e["type"] == "TaskFailed"]
    # The first try and CATCH_ALL_ATTEMPTS (3) retries, then the Catch.
    assert [e["taskFailedEventDetails"]["error"] for e in failed] == [
        "SageMaker.AmazonSageMakerException"
    ] * 4
    assert f"Error Code: {code}" in r.cause
    assert "CleanupOnError" in r.states
    assert_only_job(fresh, name)
    fresh.sagemaker_errors.clear()


def test_describe_endpoint_errors_carry_the_sdk_integration_name(fresh):
    # Exactly the task's attempts (1 + 3 retries): Cleanup's own DescribeEndpoint then succeeds.
    fresh.sagemaker_errors["describe_endpoint"] = ["AccessDeniedException"] * 4
    name, r = run(fresh)
    assert (r.status, r.error) == ("FAILED", "SageMaker.SageMakerException"), r.cause
    assert "CleanupOnError" in r.states
    assert_only_job(fresh, name)
    fresh.sagemaker_errors.clear()


def test_retry_lists_name_each_integrations_errors(template):
    from test_pipeline_limits import definition

    states = definition(template)[0]["States"]
    for _, state in NATIVE_TASKS:
        assert [r["ErrorEquals"] for r in states[state]["Retry"]] == [
            ["SageMaker.AmazonSageMakerException"],
            ["SageMaker.ResourceLimitExceededException"],
        ]
    assert [r["ErrorEquals"] for r in states["DescribeEndpoint"]["Retry"]] == [
        ["SageMaker.SageMakerException"],
        ["SageMaker.ResourceLimitExceededException"],
    ]
    lambda_errors = {"Lambda.ServiceException", "Lambda.AWSLambdaException", "Lambda.SdkClientException"}
    for key, state in states.items():
        retried = [e for r in state.get("Retry", []) for e in r["ErrorEquals"]]
        assert "States.ALL" not in retried, key
        if state.get("Resource", "").split(":states:::")[-1].startswith("lambda:invoke"):
            assert lambda_errors | {"Lambda.TooManyRequestsException"} <= set(retried), key


# --- the failure path never loses the cause ----------------------------------------------------------------
def test_cleanup_failure_is_reported_with_the_original_error(fresh):
    fresh.endpoint = lambda n, body: []  # the smoke test fails
    fresh.after_errors["cleanup"] = ["AccessDeniedException"] * 8  # and so does clean-up (every retry)
    _, r = run(fresh)
    assert (r.status, r.error) == ("FAILED", "SmokeTestFailed"), r.cause
    assert r.states[-3:] == ["CleanupOnError", "ReportError", "PipelineFailed"]
    # The report (ReportError's answer) carries both the original error and clean-up's own.
    (report,) = [
        json.loads(e["lambdaFunctionSucceededEventDetails"]["output"])
        for e in r.history
        if e["type"] == "LambdaFunctionSucceeded"
        and '"cleanup_error"' in e["lambdaFunctionSucceededEventDetails"]["output"]
    ]
    assert report["error"] == "SmokeTestFailed"
    assert report["cleanup_error"]["error"] == "AccessDeniedException"


def test_endpoint_failure_reason_reaches_the_report(fresh):
    _, r = run_with_endpoint_failed(
        fresh, "The primary container for production variant AllTraffic did not pass the ping"
    )
    assert (r.status, r.error) == ("FAILED", "EndpointFailed")
    assert "did not pass the ping" in r.cause


# --- one environment never touches another's resources ----------------------------------------------------
def test_launch_refuses_a_job_of_another_environment_with_the_planned_name(fresh):
    from hfpipe import contract

    name = f"taken-{next(_ids)}"
    sm = fresh.client("sagemaker")
    theirs = {
        "TrainingJobName": f"dev-{name}",
        "AlgorithmSpecification": {"TrainingImage": "x", "TrainingInputMode": "File"},
        "RoleArn": f"arn:aws:iam::{ACCOUNT}:role/other",
        "OutputDataConfig": {"S3OutputPath": "s3://other/models/"},
        "ResourceConfig": {"InstanceType": "ml.m5.large", "InstanceCount": 1, "VolumeSizeInGB": 1},
        "StoppingCondition": {"MaxRuntimeInSeconds": 60},
        "Tags": [
            {"Key": contract.TAG_MANAGED_BY, "Value": contract.PROJECT},
            {"Key": contract.TAG_ENV, "Value": "prod"},
            {"Key": contract.TAG_EXECUTION, "Value": name},
        ],
    }
    sm.create_training_job(**theirs)
    r = fresh.run({"recipe_name": "tiny-qa", "poll_seconds": 1}, name=name)
    assert (r.status, r.error) == ("FAILED", "TrainingJobNameTaken"), r.cause
    assert "hfpipe:env=dev" in r.cause
    assert sm.describe_training_job(TrainingJobName=f"dev-{name}")["RoleArn"].endswith("role/other")
