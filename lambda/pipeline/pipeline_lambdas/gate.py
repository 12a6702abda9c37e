"""Gate: compare the recipe's final metric with its threshold (pure; no AWS calls)."""

from __future__ import annotations

from typing import Any

from hfpipe.core.run.plan_model import Plan


def final_metrics(training: dict[str, Any]) -> dict[str, float]:
    """FinalMetricDataList of a DescribeTrainingJob response as {name: value}."""
    return {m["MetricName"]: float(m["Value"]) for m in training.get("FinalMetricDataList") or []}


def evaluate(plan: Plan, training: dict[str, Any]) -> dict[str, Any]:
    """{"passed": bool, "reason": str, ...}; a missing metric does not pass."""
    gate = plan.gate
    if not gate.enabled:
        return {"passed": True, "reason": "no evaluation gate"}
    assert gate.metric is not None and gate.threshold is not None  # Gate refuses an enabled gate without them
    metric, threshold = gate.metric, float(gate.threshold)
    higher = gate.higher_is_better
    value = final_metrics(training).get(metric)
    if value is None:
        return {
            "passed": False,
            "metric": metric,
            "threshold": threshold,
            "value": None,
            "reason": f"evaluation gate: final metric {metric!r} was not reported by the training job",
        }
    passed = value >= threshold if higher else value <= threshold
    op = ">=" if higher else "<="
    verdict = "passed" if passed else "failed"
    return {
        "passed": passed,
        "metric": metric,
        "threshold": threshold,
        "value": value,
        "reason": f"evaluation gate {verdict}: {metric} = {value:g}, required {op} {threshold:g}",
    }


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Event: {"plan": <plan>, "training": <DescribeTrainingJob>}."""
    return evaluate(Plan.from_json(event["plan"]), event["training"])
