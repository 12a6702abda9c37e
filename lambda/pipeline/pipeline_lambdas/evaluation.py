"""The pipeline's evaluation steps (docs/evaluation.md): around the Evaluate task, a SageMaker processing job
(``arn:aws:states:::sagemaker:createProcessingJob.sync``) that scores the run's model (the challenger) and the
version serving on the run's target (the champion) on the same held-out examples.

- ``prepare``: the champion, read from the target itself at this moment (hfpipe.core.promotion.evaluation_reads:
  a named endpoint's live config -> model -> package version; an adapter's component artifact), none being
  fine; returns the whole CreateProcessingJob request (hfpipe.core.run.evaluation_job.with_models, checked
  against botocore's shape) and the champion, at ``$.evaluation_job``.
- ``store``: reads the job's evaluation.json (the contract's key), checks it (hfpipe.core.recipe.evaluation's
  schema), wraps it in who was evaluated and what the job cost (hfpipe.core.promotion.evaluation_gate.Evaluated:
  the target, the champion's version ARN, the job's instance, seconds and USD), writes the wrapper beside the
  document (evaluated.json) and returns it at ``$.evaluation``, for Register (the version's statistics document
  and CustomerMetadataProperties) and the report.
- ``failed``: the evaluation failed, not the training (the job ended Failed or Stopped: the Evaluate task's
  ``States.TaskFailed``, whose cause is the job's DescribeProcessingJob answer; or it wrote no document the
  gate can read: StoreEvaluation's EvaluationFailed; or ``prepare`` refused to create it: its EvaluationFailed,
  then no job name, seconds or USD). The run goes on: it returns at ``$.evaluation`` a record
  of the failure (``failure``: the error, the job's status and its cause, FailureReason with ExitMessage;
  no document) with the target, the champion and the job's instance, seconds and USD, which Register stores
  with the version as ``evaluation: failed`` and the gate treats as no evaluation
  (hfpipe.core.promotion.evaluation_gate.failure_of).
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from hfpipe.core import cost
from hfpipe.core.causes import cause_message
from hfpipe.core.promotion import evaluation_gate, evaluation_reads, registry
from hfpipe.core.promotion.evaluation_gate import Champion, Evaluated
from hfpipe.core.run import evaluation_job
from hfpipe.core.run.plan_model import Evaluation, Plan
from pipeline_lambdas import aws

LOG = aws.logger(__name__)
#: The wrapper's name beside the document (evaluations/<execution>/).
WRAPPER_NAME = "evaluated.json"


class EvaluationFailed(Exception):
    """The job ended without a document the gate can read; the message names what is wrong."""


def _settings(plan: Plan) -> Evaluation:
    if plan.evaluation is None:
        raise EvaluationFailed("plan.evaluation: null; the recipe names no evaluation, nothing to do")
    return plan.evaluation


def _target(e: Evaluation) -> dict[str, str]:
    if e.target_endpoint:
        return {"endpoint": e.target_endpoint}
    return {"adapter": e.target_adapter} if e.target_adapter else {}


def _adapter_version(sagemaker: Any, plan: Plan, artifact: str | None) -> str | None:
    """The version of the recipe's group whose model is ``artifact`` (what an adapter's component serves)."""
    group = registry.group_request(plan.env, plan.recipe_name)["ModelPackageGroupName"]
    try:
        pages = sagemaker.get_paginator("list_model_packages").paginate(ModelPackageGroupName=group)
        for page in pages:
            for summary in page.get("ModelPackageSummaryList", []):
                arn = summary["ModelPackageArn"]
                if evaluation_reads.champion_of_version(sagemaker, arn).model_data == artifact:
                    return str(arn)
    except Exception as err:
        if "does not exist" not in str(err):
            raise
    return None


def champion(sagemaker: Any, plan: Plan) -> Champion | None:
    """What serves on the run's target now (None: no target, or nothing serving there)."""
    e = _settings(plan)
    found = evaluation_reads.champion_at(sagemaker, plan.env, _target(e))
    if found is not None and found.version_arn is None:
        found = Champion(
            version_arn=_adapter_version(sagemaker, plan, found.model_data), model_data=found.model_data
        )
    return found


def prepare(plan: Plan, training: dict[str, Any], sagemaker: Any) -> dict[str, Any]:
    """The ``prepare`` step (module docstring)."""
    e = _settings(plan)
    challenger = (training.get("ModelArtifacts") or {}).get("S3ModelArtifacts")
    if not challenger:
        raise EvaluationFailed("training.ModelArtifacts.S3ModelArtifacts: missing; nothing to evaluate")
    found = champion(sagemaker, plan)
    if found is not None and not found.model_data:
        raise EvaluationFailed(f"champion {found.version_arn}: its version names no model data to score")
    # A champion of another task is refused before the job is created (it would fail scoring it, billed).
    where = " ".join(f"{k} {v}" for k, v in _target(e).items())
    wrong = evaluation_reads.other_task(sagemaker, found, plan.task, where, plan.env)
    if wrong:
        raise EvaluationFailed(f"champion: {wrong}; the evaluation job was not created")
    request = evaluation_job.with_models(e.request, challenger, found.model_data if found else None)
    evaluation_job.check(request, models=True)
    aws.log_json(LOG, "evaluation prepared", champion=found.to_json() if found else None)
    return {"request": request, "champion": found.to_json() if found else None}


def _seconds(job: dict[str, Any], document: dict[str, Any]) -> float:
    """The job's billable time: its start to its end (the `.sync` task's DescribeProcessingJob answer, whose
    timestamps come as ISO strings or epoch milliseconds), else what the document says."""
    start, end = job.get("ProcessingStartTime"), job.get("ProcessingEndTime")
    if isinstance(start, str) and isinstance(end, str):
        return max(0.0, (datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds())
    if isinstance(start, int | float) and isinstance(end, int | float):
        return max(0.0, (float(end) - float(start)) / 1000)
    return float(document.get("seconds") or 0.0)


def store(plan: Plan, prepared: dict[str, Any], job: dict[str, Any], s3: Any) -> dict[str, Any]:
    """The ``store`` step (module docstring): the wrapper, as JSON."""
    e = _settings(plan)
    try:
        document = evaluation_gate.check_document(evaluation_reads.read_json(s3, e.document_uri))
    except evaluation_gate.EvaluationFormatError as err:
        raise EvaluationFailed(f"{e.document_uri}: {err}") from None
    except Exception as err:
        raise EvaluationFailed(f"{e.document_uri}: not readable ({err}); the job wrote no document") from None
    seconds = _seconds(job, document)
    evaluated = Evaluated(
        document=document,
        document_uri=e.document_uri,
        target=_target(e),
        champion=Champion.from_json(prepared.get("champion")),
        job={
            "name": e.processing_job_name,
            "instance_type": e.instance_type,
            "instance_count": e.instance_count,
            "seconds": seconds,
            "usd": cost.estimate_cost(e.instance_type, e.instance_count, seconds),
        },
    )
    wrapper = evaluated.to_json()
    bucket, _, key = e.document_uri.removeprefix("s3://").partition("/")
    s3.put_object(
        Bucket=bucket,
        Key=key.rsplit("/", 1)[0] + "/" + WRAPPER_NAME,
        Body=json.dumps(wrapper, indent=2).encode(),
        ContentType="application/json",
    )
    aws.log_json(LOG, "evaluation stored", verdict=evaluated.verdict, reason=document.get("reason"))
    return wrapper


#: At most this much of a failure's cause is kept (a job's FailureReason is at most 1024 characters, its
#: ExitMessage 1024: botocore's model of SageMaker, DescribeProcessingJobResponse).
CAUSE_MAX = 2100


def _job_of(error: dict[str, Any], prepared: dict[str, Any]) -> dict[str, Any]:
    """The job's DescribeProcessingJob answer: a `.sync` task's failure cause (the answer as JSON: Step
    Functions, "Run a Job (.sync)"), else what the Evaluate task returned ({} when neither)."""
    try:
        described = json.loads(str(error.get("Cause") or ""))
    except ValueError:
        described = None
    if isinstance(described, dict) and described.get("ProcessingJobStatus"):
        return described
    job = prepared.get("job")
    return job if isinstance(job, dict) else {}


def _cause(error: dict[str, Any], job: dict[str, Any]) -> str:
    """'<status>: <FailureReason> (exit message: <ExitMessage>)' of a job that failed; else the error's cause
    (EvaluationFailed's message)."""
    status, reason, message = (job.get(k) for k in ("ProcessingJobStatus", "FailureReason", "ExitMessage"))
    if status in ("Failed", "Stopped"):
        text = f"{status}: {reason or 'no FailureReason given'}"
        if message and str(message).strip() not in text:
            text += f" (exit message: {str(message).strip()})"
        return text[:CAUSE_MAX]
    return cause_message(error.get("Cause"))[:CAUSE_MAX]


def failed(plan: Plan, prepared: dict[str, Any], error: dict[str, Any]) -> dict[str, Any]:
    """The ``failed`` step (module docstring): the failure's record, as JSON."""
    e = _settings(plan)
    job = _job_of(error, prepared)
    # PrepareEvaluation refused before creating the job (EvaluationNotPrepared: no request): no job, no cost.
    created = bool(prepared.get("request"))
    seconds = _seconds(job, {}) if created else 0.0
    cause = _cause(error, job)
    record = {
        evaluation_gate.FAILURE_KEY: {
            "error": str(error.get("Error") or "States.TaskFailed"),
            "status": job.get("ProcessingJobStatus"),
            "cause": cause,
        },
        "document_uri": e.document_uri,
        "target": _target(e),
        "champion": prepared.get("champion"),
        "job": {
            "name": e.processing_job_name if created else None,
            "instance_type": e.instance_type,
            "instance_count": e.instance_count,
            "seconds": seconds,
            "usd": cost.estimate_cost(e.instance_type, e.instance_count, seconds),
        },
    }
    aws.log_json(LOG, "evaluation failed", cause=cause)
    return record


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Event: {"step": "prepare", "plan", "training"}, {"step": "store", "plan", "prepared", "job"} or
    {"step": "failed", "plan", "prepared", "error"} (``error``: the Catch's {Error, Cause})."""
    plan = Plan.from_json(event["plan"])
    aws.bind(event, plan.execution_name)
    if event.get("step") == "prepare":
        return prepare(plan, event.get("training") or {}, aws.client("sagemaker"))
    if event.get("step") == "store":
        return store(plan, event.get("prepared") or {}, event.get("job") or {}, aws.client("s3"))
    if event.get("step") == "failed":
        return failed(plan, event.get("prepared") or {}, event.get("error") or {})
    raise EvaluationFailed(f"step: {event.get('step')!r} is not accepted; accepted: prepare, store, failed")
