"""The pipeline's evaluation step on the real state machine (moto; the job is a stand-in that writes a contract
document: tests/evaluations.py): after training and before registration, the champion is read from the run's
target (the execution input's ``champion``), the processing job gets the challenger's and the champion's
model.tar.gz, and the document goes with the version (its statistics document and CustomerMetadataProperties),
wrapped with the champion's ARN and the job's instance, seconds and USD, which the report states."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest
from accounts import ACCOUNT
from app_synth import ARTIFACTS_BUCKET
from evaluations import StandInEvaluation

from hfpipe.core.promotion import evaluation_gate

pytestmark = pytest.mark.slow
_ids = itertools.count()
GROUP = "hfpipe-dev-tiny-qa"
ROLE = f"arn:aws:iam::{ACCOUNT}:role/x"


def run(engine: Any, **inp: Any) -> tuple[str, Any]:
    name = f"eval-{next(_ids)}"
    return name, engine.run({"recipe_name": "tiny-qa", "poll_seconds": 1, **inp}, name=name)


def version(engine: Any, arn: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """DescribeModelPackage of ``arn`` and its statistics document."""
    desc = engine.client("sagemaker").describe_model_package(ModelPackageName=arn)
    uri = desc["ModelMetrics"]["ModelQuality"]["Statistics"]["S3Uri"]
    bucket, _, key = uri.removeprefix("s3://").partition("/")
    return desc, json.loads(engine.client("s3").get_object(Bucket=bucket, Key=key)["Body"].read())


def test_the_definition_evaluates_after_training_and_before_registration(engine):
    states = engine.definition["States"]
    assert states["GatePassed?"]["Default"] == states["GateEnabled?"]["Default"] == "Evaluate?"
    assert states["Evaluate?"]["Choices"][0]["Next"] == "PrepareEvaluation"
    assert states["Evaluate?"]["Default"] == "NoEvaluation"
    assert (
        states["PrepareEvaluation"]["Next"] == "Evaluate" and states["Evaluate"]["Next"] == "StoreEvaluation"
    )
    assert states["StoreEvaluation"]["Next"] == states["NoEvaluation"]["Next"] == "Deploy?"
    evaluate = states["Evaluate"]
    assert evaluate["Resource"] == "arn:aws:states:::sagemaker:createProcessingJob.sync"
    assert evaluate["Parameters"]["ProcessingJobName.$"] == "$.evaluation_job.request.ProcessingJobName"
    assert [c["ErrorEquals"] for c in evaluate["Catch"]] == [["States.TaskFailed"], ["States.ALL"]]


def test_a_run_with_no_champion_is_scored_alone_and_stored_with_its_version(fresh):
    fresh.processing = jobs = StandInEvaluation()
    name, r = run(fresh)
    assert r.status == "SUCCEEDED", r.cause
    assert r.states.index("Evaluate") < r.states.index("StoreEvaluation") < r.states.index("Register")
    (request,) = jobs.requests
    inputs = {i["InputName"]: i["S3Input"]["S3Uri"] for i in request["ProcessingInputs"]}
    assert sorted(inputs) == ["challenger", "code", "data"]
    assert inputs["challenger"] == r.output["training"]["ModelArtifacts"]["S3ModelArtifacts"]
    assert request["ProcessingJobName"] == f"dev-{name}-eval"
    assert "--champion" not in request["AppSpecification"]["ContainerArguments"]
    desc, stats = version(fresh, r.output["registered"]["model_package_arn"])
    wrapper = stats[evaluation_gate.STATISTICS_KEY]
    assert wrapper["document"]["verdict"] == "no_champion" and wrapper["champion"] is None
    assert wrapper["document_uri"] == f"s3://{ARTIFACTS_BUCKET}/evaluations/{name}/evaluation.json"
    assert wrapper["job"]["instance_type"] == "ml.g4dn.xlarge" and wrapper["job"]["usd"] is not None
    meta = desc["CustomerMetadataProperties"]
    assert (meta["evaluation_verdict"], meta["evaluation_metric"]) == ("no_champion", "f1")
    report = r.output["report"]["evaluation"]
    assert (report["verdict"], report["instance_type"], report["processing_job_name"]) == (
        "no_champion",
        "ml.g4dn.xlarge",
        f"dev-{name}-eval",
    )
    assert report["cost_usd"] == wrapper["job"]["usd"] and report["seconds"] == wrapper["job"]["seconds"]


def test_the_champion_is_read_from_the_target_endpoint_and_scored_with_the_challenger(fresh):
    fresh.processing = StandInEvaluation()
    _, first = run(fresh)
    champion_arn = first.output["registered"]["model_package_arn"]
    champion_data = version(fresh, champion_arn)[0]["InferenceSpecification"]["Containers"][0]["ModelDataUrl"]
    sm = fresh.client("sagemaker")
    sm.create_model(
        ModelName="hfpipe-dev-qa-v1",
        PrimaryContainer={"ModelPackageName": champion_arn},
        ExecutionRoleArn=ROLE,
    )
    sm.create_endpoint_config(
        EndpointConfigName="hfpipe-dev-qa-v1",
        ProductionVariants=[
            {
                "VariantName": "AllTraffic",
                "ModelName": "hfpipe-dev-qa-v1",
                "InstanceType": "ml.m5.large",
                "InitialInstanceCount": 1,
            }
        ],
    )
    sm.create_endpoint(EndpointName="hfpipe-dev-qa", EndpointConfigName="hfpipe-dev-qa-v1")
    fresh.processing = jobs = StandInEvaluation("worse")
    _, r = run(fresh, champion={"endpoint": "qa"})
    assert r.status == "SUCCEEDED", r.cause
    (request,) = jobs.requests
    inputs = {i["InputName"]: i["S3Input"] for i in request["ProcessingInputs"]}
    assert inputs["champion"]["S3Uri"] == champion_data
    assert inputs["champion"]["LocalPath"] == "/opt/ml/processing/input/champion"
    assert request["AppSpecification"]["ContainerArguments"][-1] == "--champion"
    desc, stats = version(fresh, r.output["registered"]["model_package_arn"])
    wrapper = stats[evaluation_gate.STATISTICS_KEY]
    assert wrapper["champion"]["version_arn"] == champion_arn and wrapper["target"] == {
        "endpoint": "hfpipe-dev-qa"
    }
    meta = desc["CustomerMetadataProperties"]
    assert (meta["evaluation_verdict"], meta["evaluation_champion"]) == ("worse", champion_arn)
    assert meta["evaluation_difference"] == "value -3.1 low -5 high -1.2"
    assert r.output["report"]["evaluation"]["champion_version_arn"] == champion_arn
    # Each model's score of the rule's metric, for `hfpipe report`'s line (newcomer finding 8).
    scores = r.output["report"]["evaluation"]["scores"]
    assert scores["champion"]["value"] == 61.2 and scores["challenger"]["n"] == 40, scores


class FailedJob(StandInEvaluation):
    """The job ends Failed as SageMaker ends one whose container exited non-zero: FailureReason, and the
    container's /opt/ml/output/message as ExitMessage (the local engine's, hfpipe.local.runtime)."""

    def start(self, request: dict[str, Any], job: Any, ended: Any) -> None:
        job.processing_job_status, job.failure_reason = "Failed", "AlgorithmError: no validation data"
        job.exit_message = "evaluate.py: CUDA out of memory scoring the champion"
        ended()


class NoDocument(StandInEvaluation):
    """The job completes without writing evaluation.json."""

    def start(self, request: dict[str, Any], job: Any, ended: Any) -> None:
        job.processing_job_status = "Completed"
        ended()


def test_a_failed_evaluation_job_registers_the_version_as_evaluation_failed(fresh):
    """The evaluation failed, not the training: the run goes on (endpoint, smoke test, Register, report), and
    the version stores `evaluation: failed` with the job's cause, which the report states."""
    fresh.processing = FailedJob()
    name, r = run(fresh)
    assert r.status == "SUCCEEDED", r.cause
    assert r.states[r.states.index("Evaluate") + 1] == "RecordEvaluationFailure"
    assert "StoreEvaluation" not in r.states and "CleanupOnError" not in r.states
    assert (
        r.states.index("RecordEvaluationFailure") < r.states.index("SmokeTest") < r.states.index("Register")
    )
    desc, stats = version(fresh, r.output["registered"]["model_package_arn"])
    stored = stats[evaluation_gate.STATISTICS_KEY]
    cause = (
        "Failed: AlgorithmError: no validation data (exit message: evaluate.py: CUDA out of memory scoring the "
        "champion)"
    )
    assert stored["failure"] == {"error": "States.TaskFailed", "status": "Failed", "cause": cause}
    assert "document" not in stored and stored["job"]["name"] == f"dev-{name}-eval"
    assert evaluation_gate.of_statistics(stats) is None and evaluation_gate.failure_of(stats) == cause
    meta = desc["CustomerMetadataProperties"]
    assert meta["evaluation_verdict"] == "failed"
    assert meta["evaluation_failure"].startswith("Failed: AlgorithmError: no validation data")
    report = r.output["report"]["evaluation"]
    assert (report["verdict"], report["reason"], report["instance_type"]) == (
        "failed",
        cause,
        "ml.g4dn.xlarge",
    )
    assert report["cost_usd"] is not None and report["processing_job_name"] == f"dev-{name}-eval"


def test_a_job_that_leaves_no_document_is_an_evaluation_failure_too(fresh):
    fresh.processing = NoDocument()
    _, r = run(fresh)
    assert r.status == "SUCCEEDED", r.cause
    assert r.states[r.states.index("StoreEvaluation") + 1] == "RecordEvaluationFailure"
    _, stats = version(fresh, r.output["registered"]["model_package_arn"])
    failure = stats[evaluation_gate.STATISTICS_KEY]["failure"]
    assert (failure["error"], failure["status"]) == ("EvaluationFailed", "Completed")
    assert "the job wrote no document" in failure["cause"]


def test_a_refused_preparation_registers_the_version_as_evaluation_failed_with_no_job(fresh):
    """PrepareEvaluation refuses to create the job (what serves on the target does another task: a classifier
    version on hfpipe-dev-mnli, a tiny-qa run): the evaluation failed, not the run; no job was created, so
    none is named or billed."""
    sm = fresh.client("sagemaker")
    sm.create_model_package_group(ModelPackageGroupName="hfpipe-dev-tiny-mnli")
    classifier = sm.create_model_package(
        ModelPackageGroupName="hfpipe-dev-tiny-mnli",
        InferenceSpecification={
            "Containers": [{"Image": "img", "ModelDataUrl": f"s3://{ARTIFACTS_BUCKET}/mnli/model.tar.gz"}],
            "SupportedContentTypes": ["application/json"],
            "SupportedResponseMIMETypes": ["application/json"],
        },
        CustomerMetadataProperties={"task": "text-classification"},
    )["ModelPackageArn"]
    sm.create_model(
        ModelName="hfpipe-dev-mnli-v1",
        PrimaryContainer={"ModelPackageName": classifier},
        ExecutionRoleArn=ROLE,
    )
    variant = {"VariantName": "AllTraffic", "ModelName": "hfpipe-dev-mnli-v1", "InstanceType": "ml.m5.large"}
    sm.create_endpoint_config(
        EndpointConfigName="hfpipe-dev-mnli-v1", ProductionVariants=[{**variant, "InitialInstanceCount": 1}]
    )
    sm.create_endpoint(EndpointName="hfpipe-dev-mnli", EndpointConfigName="hfpipe-dev-mnli-v1")
    fresh.processing = jobs = StandInEvaluation()
    _, r = run(fresh, champion={"endpoint": "mnli"})
    assert r.status == "SUCCEEDED", r.cause
    assert r.states[r.states.index("PrepareEvaluation") + 1 :][:2] == [
        "EvaluationNotPrepared",
        "RecordEvaluationFailure",
    ]
    assert jobs.requests == [] and "Evaluate" not in r.states and "CleanupOnError" not in r.states
    _, stats = version(fresh, r.output["registered"]["model_package_arn"])
    stored = stats[evaluation_gate.STATISTICS_KEY]
    assert (stored["failure"]["error"], stored["failure"]["status"]) == ("EvaluationFailed", None)
    assert "a text-classification model" in stored["failure"]["cause"]
    assert "the evaluation job was not created" in stored["failure"]["cause"]
    assert (stored["job"]["name"], stored["job"]["seconds"], stored["job"]["usd"]) == (None, 0.0, 0.0)
    report = r.output["report"]["evaluation"]
    assert report["verdict"] == "failed" and report["processing_job_name"] is None


def test_the_evaluations_failure_routes_only_its_own_errors(engine):
    """Evaluate catches States.TaskFailed (the job ended Failed or Stopped), PrepareEvaluation and
    StoreEvaluation their EvaluationFailed, before the catch-all to clean-up; a stopped run never reaches a Catch (its job stopped by
    the stop: clean-up's rules, unchanged)."""
    states = engine.definition["States"]
    for state, error, then in (
        ("PrepareEvaluation", "EvaluationFailed", "EvaluationNotPrepared"),
        ("Evaluate", "States.TaskFailed", "RecordEvaluationFailure"),
        ("StoreEvaluation", "EvaluationFailed", "RecordEvaluationFailure"),
    ):
        catches = [(c["ErrorEquals"], c["Next"]) for c in states[state]["Catch"]]
        assert catches == [([error], then), (["States.ALL"], "CleanupOnError")], state
    assert states["EvaluationNotPrepared"]["Next"] == "RecordEvaluationFailure"
    assert states["RecordEvaluationFailure"]["Next"] == "Deploy?"
    assert states["RecordEvaluationFailure"]["Catch"][0]["Next"] == "CleanupOnError"


@pytest.mark.parametrize(
    ("champion", "message"),
    [
        ({"endpoint": "QA!"}, "input.champion.endpoint: 'QA!' is not accepted"),
        (
            {"endpoint": "qa", "adapter": "a"},
            "input.champion: {'endpoint': 'qa', 'adapter': 'a'} is not accepted",
        ),
    ],
)
def test_a_bad_champion_is_refused_by_the_plan_naming_the_field(fresh, champion, message):
    fresh.processing = jobs = StandInEvaluation()
    _, r = run(fresh, champion=champion)
    assert (r.status, r.error) == ("FAILED", "RecipeError") and message in r.cause, r.cause
    assert jobs.requests == [] and r.states[-1] != "Evaluate"


class _ServesAClassifier:
    """SageMaker's answers (API reference: DescribeEndpoint, DescribeEndpointConfig, DescribeModel,
    DescribeModelPackage) for hfpipe-dev-qa serving a text-classification version."""

    VERSION = f"arn:aws:sagemaker:us-east-1:{ACCOUNT}:model-package/hfpipe-dev-tiny-mnli/3"

    def describe_endpoint(self, EndpointName: str) -> dict[str, Any]:
        return {"EndpointName": EndpointName, "EndpointConfigName": "c3", "EndpointStatus": "InService"}

    def describe_endpoint_config(self, EndpointConfigName: str) -> dict[str, Any]:
        return {"ProductionVariants": [{"VariantName": "AllTraffic", "ModelName": "m3"}]}

    def describe_model(self, ModelName: str) -> dict[str, Any]:
        return {"ModelName": ModelName, "PrimaryContainer": {"ModelPackageName": self.VERSION}}

    def describe_model_package(self, ModelPackageName: str) -> dict[str, Any]:
        return {
            "ModelPackageArn": ModelPackageName,
            "InferenceSpecification": {"Containers": [{"ModelDataUrl": "s3://artifacts/m3/model.tar.gz"}]},
            "CustomerMetadataProperties": {"task": "text-classification"},
        }


def test_prepare_refuses_a_champion_of_another_task_before_the_job_is_created():
    """Newcomer finding 6: `start --recipe tiny-qa --champion endpoint:summaries` (a classifier serves there)
    failed the job itself ("too many values to unpack"), billed; PrepareEvaluation refuses it first."""
    from types import SimpleNamespace

    from pipeline_lambdas import evaluation

    from hfpipe.core.run.plan_model import Evaluation

    settings = Evaluation(
        processing_job_name="dev-run-eval",
        request={"ProcessingInputs": [], "AppSpecification": {"ContainerArguments": []}},
        target_endpoint="hfpipe-dev-qa",
        target_adapter=None,
        instance_type="ml.m5.xlarge",
        instance_count=1,
        price_per_hour_usd=None,
        document_uri="s3://artifacts/evaluations/run/evaluation.json",
    )
    plan = SimpleNamespace(evaluation=settings, task="question-answering", env="dev", recipe_name="tiny-qa")
    training = {"ModelArtifacts": {"S3ModelArtifacts": "s3://artifacts/run/model.tar.gz"}}
    with pytest.raises(evaluation.EvaluationFailed) as refused:
        evaluation.prepare(plan, training, _ServesAClassifier())  # type: ignore[arg-type]
    assert str(refused.value) == (
        "champion: endpoint hfpipe-dev-qa serves tiny-mnli/3, a text-classification model; accepted: a champion "
        "serving a question-answering model, the recipe's task; the evaluation job was not created"
    )


class HeldJob(StandInEvaluation):
    """A job that runs until it is stopped (the ``processing`` plug-in's ``stop``, on StopProcessingJob)."""

    def __init__(self) -> None:
        super().__init__()
        import threading

        self.entered = threading.Event()
        self.stopped: list[str] = []
        self._ended: dict[str, Any] = {}

    def start(self, request: dict[str, Any], job: Any, ended: Any) -> None:
        self.requests.append(request)
        self._ended[request["ProcessingJobName"]] = ended
        self.entered.set()

    def stop(self, name: str, job: Any) -> bool:
        self.stopped.append(name)
        job.processing_job_status = "Stopped"
        self._ended[name]()
        return True


def test_stopping_the_execution_while_it_evaluates_stops_the_evaluation_job(fresh):
    """Newcomer finding 6 (h-nc-eval2): `hfpipe stop` during the evaluation ended the execution ABORTED and
    the processing job ran on to Completed. Step Functions stops the job of a `.sync` task whose execution is
    stopped (developer guide, "Run a Job (.sync)"); the local engine does the same."""
    fresh.processing = jobs = HeldJob()
    name = f"eval-{next(_ids)}"
    arn = fresh.start({"recipe_name": "tiny-qa", "poll_seconds": 1}, name=name)
    assert jobs.entered.wait(60), "the evaluation job never started"
    fresh.client("stepfunctions").stop_execution(executionArn=arn, error="Stopped", cause="by the test")
    r = fresh.wait(arn, timeout_s=60)
    assert r.status == "ABORTED"
    assert jobs.stopped == [f"dev-{name}-eval"]
    desc = fresh.client("sagemaker").describe_processing_job(ProcessingJobName=f"dev-{name}-eval")
    assert desc["ProcessingJobStatus"] == "Stopped"
