"""Report: cost (billable seconds x price, spot savings), final metrics, artifact URIs -> output + SNS."""

from __future__ import annotations

import json
import os
from typing import Any

from hfpipe.core import cost as costs
from hfpipe.core.causes import cause_message
from hfpipe.core.promotion import evaluation_gate
from hfpipe.core.run.logs import CAUSE_TAIL_MARKER, format_lines, log_tail
from hfpipe.core.run.plan_model import Plan
from pipeline_lambdas import aws
from pipeline_lambdas.gate import final_metrics

LOG = aws.logger(__name__)


def build_report(event: dict[str, Any], plan: Plan | None = None) -> dict[str, Any]:
    """The report of one execution from the state it reached (its keys are the report's contract with `hfpipe report`).

    ``plan``: the event's plan when the caller has read it already."""
    plan = plan or Plan.from_json(event["plan"])
    report = _training_report(event, plan)
    endpoint = event.get("endpoint") or {}
    if endpoint.get("FailureReason"):
        report["endpoint_failure_reason"] = endpoint["FailureReason"]
    cleanup_error = event.get("cleanup_error")
    if cleanup_error:
        # Clean-up itself failed: both errors are reported, the original one stays the execution's.
        report["cleanup_error"] = {
            "error": cleanup_error.get("Error"),
            "cause": cause_message(cleanup_error.get("Cause")),
        }
    if event.get("smoke") and not report["endpoint_deleted"]:
        # A kept endpoint is billed per instance-hour until it is deleted: say how much.
        report["endpoint_price_per_hour_usd"] = costs.endpoint_price_per_hour(
            plan.serving_instance_type, plan.serving_instance_count
        )
    report["evaluation"] = evaluation_report(event.get("evaluation"))
    _add_outcome(report, event, plan)
    return report


def evaluation_report(wrapper: Any) -> dict[str, Any] | None:
    """The evaluation job's verdict and cost (its instance, seconds and USD: docs/evaluation.md), from the
    StoreEvaluation step's wrapper, or RecordEvaluationFailure's record (verdict ``failed``, the job's cause as
    the reason); None for a run that was not evaluated (or not yet)."""
    if not isinstance(wrapper, dict) or not wrapper.get("job"):
        return None
    document, job = wrapper.get("document") or {}, wrapper["job"]
    metric = (document.get("rule") or {}).get("metric")
    failed = evaluation_gate.failure_of(
        {evaluation_gate.STATISTICS_KEY: wrapper}
    )  # the job failed: its cause
    return {
        "verdict": evaluation_gate.FAILED_VERDICT if failed else document.get("verdict"),
        "reason": failed or document.get("reason"),
        "metric": metric,
        "difference": document.get("difference"),
        # Each model's score of the rule's metric with its interval and n (docs/evaluation.md's document).
        "scores": {
            side: ((document.get(side) or {}).get("scores") or {}).get(metric)
            for side in ("challenger", "champion")
        },
        "champion_version_arn": (wrapper.get("champion") or {}).get("version_arn"),
        "processing_job_name": job.get("name"),
        "instance_type": job.get("instance_type"),
        "instance_count": job.get("instance_count"),
        "seconds": job.get("seconds"),
        "cost_usd": job.get("usd"),
        "document_uri": wrapper.get("document_uri"),
    }


def _training_report(event: dict[str, Any], plan: Plan) -> dict[str, Any]:
    """The keys every report has: the run, its training job, its cost, metrics, artifacts and endpoint."""
    training = event.get("training") or {}
    smoke, cleanup, gate = event.get("smoke"), event.get("cleanup") or {}, event.get("gate_result")
    training_s = float(training.get("TrainingTimeInSeconds") or 0)
    billable_s = float(training.get("BillableTimeInSeconds") or training_s)
    return {
        "execution_name": plan.execution_name,
        "recipe_name": plan.recipe_name,
        "outcome": event.get("outcome", "succeeded"),
        "training_job_name": plan.training_job_name,
        "training_job_status": training.get("TrainingJobStatus", "Unknown"),
        "failure_reason": training.get("FailureReason"),
        "instance_type": plan.instance_type,
        "instance_count": plan.instance_count,
        "spot": plan.spot,
        "billable_seconds": billable_s,
        "training_seconds": training_s,
        "price_per_hour_usd": plan.price_per_hour_usd,
        "cost_usd": costs.estimate_cost(plan.instance_type, plan.instance_count, billable_s),
        "estimated_cost_usd": plan.estimated_cost_usd,
        "spot_savings_percent": costs.spot_savings_percent(plan.spot, training_s, billable_s),
        "final_metrics": final_metrics(training),
        "model_artifacts": (training.get("ModelArtifacts") or {}).get("S3ModelArtifacts"),
        "checkpoint_s3_uri": plan.checkpoint_s3_uri,
        "endpoint_name": plan.endpoint_name if smoke else None,
        "endpoint_deleted": bool(cleanup.get("endpoint_deleted")),
        "smoke_test": smoke,
        "evaluation_gate": gate,
        # The model package version the Register step made (or found) for this run; null before it.
        "model_package_arn": (event.get("registered") or {}).get("model_package_arn"),
        # Why a recipe's own script's hyperparameters were not checked against its parser (null: they were).
        "hyperparameters_not_checked": plan.hyperparameters_not_checked,
    }


def _add_outcome(report: dict[str, Any], event: dict[str, Any], plan: Plan) -> None:
    """A run that did not succeed: its outcome, error and cause (a caught error, the training job's end, or
    the evaluation gate's verdict, in that order)."""
    status = report["training_job_status"]
    gate = event.get("gate_result")
    caught = event.get("error")
    if caught:
        report["outcome"] = "failed"
        # A Fail state may not raise a States.* name of its own; keep the name recognisable.
        report["error"] = str(caught.get("Error", "Error")).replace("States.", "States")
        report["cause"] = cause_message(caught.get("Cause"))
        if report.get("endpoint_failure_reason"):
            report["cause"] += f": {report['endpoint_failure_reason']}"
    elif status in ("Failed", "Stopped"):
        report["outcome"] = "failed"
        report["error"] = f"TrainingJob{status}"
        report["cause"] = (
            f"training job {plan.training_job_name} {status}: {report['failure_reason'] or 'no reason given'}"
        )
    elif gate and not gate.get("passed", True):
        report["outcome"] = "gate-not-passed"
        report["error"], report["cause"] = "EvaluationGateNotPassed", gate["reason"]


def publish(sns: Any, topic_arn: str | None, report: dict[str, Any]) -> None:
    """Send the report to the notification topic (skipped when no topic is configured)."""
    if not topic_arn:
        return
    subject = f"hfpipe {report['recipe_name']}: {report.get('error') or 'succeeded'}"[:100]
    sns.publish(TopicArn=topic_arn, Subject=subject, Message=json.dumps(report, indent=2, default=str))


# The tail also goes into the Fail state's cause (Step Functions keeps at most 32,768 characters of it).
CAUSE_TAIL_CHARS = 4000


def add_log_tail(logs_client: Any, report: dict[str, Any]) -> None:
    """A failed training job's report gets the last lines of its log (the script's own traceback): as
    `log_tail` for SNS and `hfpipe report`, and appended to `cause`, which the execution fails with."""
    if report.get("training_job_status") != "Failed":
        return
    try:
        tail = format_lines(log_tail(logs_client, report["training_job_name"]))
    except Exception as err:  # the report must go out even when the log cannot be read
        LOG.warning(json.dumps({"message": "training log unreadable", "error": str(err)}))
        return
    if not tail:
        return
    report["log_tail"] = tail
    if report.get("cause"):
        text = "\n".join(tail)[-CAUSE_TAIL_CHARS:]
        report["cause"] = f"{report['cause']}{CAUSE_TAIL_MARKER}{text}"


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Event: {"plan", "training", "smoke"?, "cleanup"?, "gate_result"?, "outcome"?}."""
    plan = Plan.from_json(event["plan"])
    aws.bind(event, plan.execution_name)
    report = build_report(event, plan)
    add_log_tail(aws.client("logs"), report)
    publish(aws.client("sns"), os.environ.get("TOPIC_ARN"), report)
    aws.log_json(
        LOG, "report", **{k: report[k] for k in ("execution_name", "training_job_status", "cost_usd")}
    )
    return report
