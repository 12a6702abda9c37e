"""CloudWatch in local mode: the template's alarms made in moto, SageMaker's endpoint and inference-component
metrics put there for every invocation, and metric alarms evaluated from those metrics, since moto stores
alarms but never evaluates them. Each function says what of AWS it plays and where AWS documents it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from hfpipe.core.adapters import adapter_cost, scale_to_zero

NAMESPACE = "AWS/SageMaker"
#: PutMetricAlarm's parameters: an AWS::CloudWatch::Alarm's properties of the same names are passed on.
_ALARM_PARAMETERS = (
    "AlarmName",
    "AlarmDescription",
    "ActionsEnabled",
    "OKActions",
    "AlarmActions",
    "InsufficientDataActions",
    "MetricName",
    "Namespace",
    "Statistic",
    "ExtendedStatistic",
    "Dimensions",
    "Period",
    "Unit",
    "EvaluationPeriods",
    "DatapointsToAlarm",
    "Threshold",
    "ComparisonOperator",
    "TreatMissingData",
    "EvaluateLowSampleCountPercentile",
    "Metrics",
    "ThresholdMetricId",
)
_COMPARE: dict[str, Callable[[float, float], bool]] = {
    "GreaterThanOrEqualToThreshold": lambda v, t: v >= t,
    "GreaterThanThreshold": lambda v, t: v > t,
    "LessThanThreshold": lambda v, t: v < t,
    "LessThanOrEqualToThreshold": lambda v, t: v <= t,
}
_SYMBOL = {
    "GreaterThanOrEqualToThreshold": "greater than or equal to",
    "GreaterThanThreshold": "greater than",
    "LessThanThreshold": "less than",
    "LessThanOrEqualToThreshold": "less than or equal to",
}


def create_alarms(
    cloudwatch: Any, resources: dict[str, Any], resolve: Callable[[Any], Any], physical: dict[str, str]
) -> list[str]:
    """Put every AWS::CloudWatch::Alarm of the template in moto; returns their names. A resource without an
    AlarmName gets its logical ID (CloudFormation would generate a name; nothing here depends on its form).

    Every ``AWS::CloudWatch::Alarm`` of the template, its properties resolved, becomes a
    PutMetricAlarm (the resource's properties are PutMetricAlarm's parameters); ``Ref`` names the alarm, as in
    CloudFormation. An alarm on a resource local mode does not make (the failed-events queue's) is left out.
    """
    from hfpipe.local.engine.template import TemplateError

    names = []
    for logical, res in resources.items():
        if res["Type"] != "AWS::CloudWatch::Alarm":
            continue
        try:
            props = resolve(res.get("Properties", {}))
        except TemplateError:  # it watches what local mode does not make (an SQS queue): not made either
            continue
        request = {key: props[key] for key in _ALARM_PARAMETERS if key in props}
        request.setdefault("AlarmName", logical)
        if "Threshold" in request:
            request["Threshold"] = float(request["Threshold"])
        cloudwatch.put_metric_alarm(**request)
        physical[logical] = request["AlarmName"]
        names.append(request["AlarmName"])
    return names


def record_invocation(
    cloudwatch: Any, endpoint: str, variant: str, status: int, latency_us: float, when: datetime | None = None
) -> None:
    """The metrics SageMaker publishes for one InvokeEndpoint answered with HTTP ``status``.

    What SageMaker publishes for one InvokeEndpoint in the ``AWS/SageMaker`` namespace with
    the dimensions ``EndpointName`` and ``VariantName`` (Amazon SageMaker Developer Guide, "Monitor Amazon
    SageMaker with Amazon CloudWatch", endpoint invocation metrics): ``Invocations``, ``Invocation4XXErrors`` and
    ``Invocation5XXErrors`` (1 for a request answered with that class of status, else 0) and ``ModelLatency`` in
    microseconds. In AWS only SageMaker publishes in ``AWS/`` namespaces; here the emulation does it for it.
    Not published: the copies with an ``EndpointConfigName`` dimension that AWS adds during a deployment
    (moto's GetMetricStatistics matches a dimension subset, so they would count twice in an alarm on
    ``EndpointName`` + ``VariantName``).
    """
    dimensions = [{"Name": "EndpointName", "Value": endpoint}, {"Name": "VariantName", "Value": variant}]
    stamp = when or datetime.now(UTC)
    values = {
        "Invocations": (1.0, "None"),
        "Invocation4XXErrors": (1.0 if 400 <= status < 500 else 0.0, "None"),
        "Invocation5XXErrors": (1.0 if status >= 500 else 0.0, "None"),
        "ModelLatency": (float(latency_us), "Microseconds"),
    }
    cloudwatch.put_metric_data(
        Namespace=NAMESPACE,
        MetricData=[
            {"MetricName": name, "Dimensions": dimensions, "Timestamp": stamp, "Value": value, "Unit": unit}
            for name, (value, unit) in values.items()
        ],
    )


def record_component_invocation(cloudwatch: Any, component: str, when: datetime | None = None) -> None:
    """The ``Invocations`` SageMaker publishes for one InvokeEndpoint that names inference component
    ``component`` (1, per call; its Sum over a period is the component's calls).

    The ``Invocations`` SageMaker publishes for one InvokeEndpoint naming an
    inference component, in the same namespace with the one dimension ``InferenceComponentName`` (the same page:
    "Filters inference component invocation metrics"; hfpipe.core.adapters.adapter_cost, which `hfpipe endpoints` reads
    them with), for every call hfpipe.local.engine.inference_components routes to a component (its ``count`` hook,
    which hfpipe.local.engine.engine wires to it).
    """
    _put_component_metrics(cloudwatch, component, {adapter_cost.INVOCATIONS_METRIC: 1.0}, when)


def record_component_answer(
    cloudwatch: Any, component: str, status: int, when: datetime | None = None
) -> None:
    """The errors SageMaker publishes for one InvokeEndpoint naming inference component ``component`` that its
    container answered with HTTP ``status`` (0 when it is not that class of error, as for an endpoint).

    For the same call once answered, with the same one dimension, what the adapter
    state machine's bake reads (lambda/pipeline/pipeline_lambdas/adapter.py ``bake``): ``Invocation4XXErrors``
    and ``Invocation5XXErrors`` (1 for a container answer of that class, else 0) and ``InvocationModelErrors``
    (1 for any answer that is not 2xx, else 0), as the same page defines them for the endpoint's invocation
    metrics (its ``answered`` hook). Not published for such a call: its latency and AWS's ``InvocationsPerCopy``.
    """
    values = {
        "Invocation4XXErrors": 1.0 if 400 <= status < 500 else 0.0,
        "Invocation5XXErrors": 1.0 if status >= 500 else 0.0,
        "InvocationModelErrors": 0.0 if 200 <= status < 300 else 1.0,
    }
    _put_component_metrics(cloudwatch, component, values, when)


def _put_component_metrics(
    cloudwatch: Any, component: str, values: dict[str, float], when: datetime | None
) -> None:
    """Each of ``values`` (metric name -> value) as SageMaker publishes a component's metrics: namespace
    AWS/SageMaker, the one dimension InferenceComponentName, unit None."""
    dimensions = [{"Name": adapter_cost.COMPONENT_DIMENSION, "Value": component}]
    stamp = when or datetime.now(UTC)
    cloudwatch.put_metric_data(
        Namespace=adapter_cost.METRIC_NAMESPACE,
        MetricData=[
            {"MetricName": name, "Dimensions": dimensions, "Timestamp": stamp, "Value": value, "Unit": "None"}
            for name, value in values.items()
        ],
    )


def record_no_capacity(cloudwatch: Any, component: str, when: datetime | None = None) -> str | None:
    """``NoCapacityInvocationFailures`` (1) of inference component ``component`` for a call that found no copy
    ("SageMaker AI emits this metric when an endpoint receives an inference request, but the endpoint has no
    active instances to serve the request", "Scale an endpoint to zero instances"), then its scale-out alarm
    (hfpipe.core.adapters.scale_to_zero.alarm_name) evaluated: its state, None when there is no such alarm."""
    _put_component_metrics(cloudwatch, component, {scale_to_zero.NO_CAPACITY_METRIC: 1.0}, when)
    try:
        return evaluate(cloudwatch, scale_to_zero.alarm_name(component), when)
    except LookupError:
        return None


def evaluate(cloudwatch: Any, name: str, now: datetime | None = None) -> str:
    """Evaluate the metric alarm ``name`` now, set its state in moto when it changed, and return the state
    (OK, ALARM or INSUFFICIENT_DATA); LookupError when there is no such metric alarm.

    A metric alarm's state from GetMetricStatistics over its last ``EvaluationPeriods`` periods of
    ``Period`` seconds ending now, its ``Statistic``, ``ComparisonOperator`` and ``Threshold``, "M out of N"
    with ``DatapointsToAlarm``, and ``TreatMissingData`` as the CloudWatch User Guide describes them ("Using
    Amazon CloudWatch alarms": evaluating an alarm; configuring how alarms treat missing data,
    https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/AlarmThatSendsEmail.html). The state is
    set in moto with SetAlarmState, so ``describe-alarms`` shows what fired. Periods are real time (the
    engine's ``time_scale`` shortens waits, not CloudWatch's clock). Metric-math and anomaly-detection alarms
    are not evaluated (their state stays as it is).
    """
    found = cloudwatch.describe_alarms(AlarmNames=[name])["MetricAlarms"]
    if not found:
        raise LookupError(f"CloudWatch alarm {name!r} does not exist in this account and region")
    alarm = found[0]
    operator = alarm.get("ComparisonOperator")
    if "MetricName" not in alarm or operator not in _COMPARE:
        return str(alarm["StateValue"])  # metric math or anomaly detection: not evaluated here
    end = (now or datetime.now(UTC)).replace(microsecond=0) + timedelta(seconds=1)
    period, periods = int(alarm["Period"]), int(alarm["EvaluationPeriods"])
    values = [
        _period_value(cloudwatch, alarm, end - timedelta(seconds=period * (i + 1)), period)
        for i in range(periods)
    ]
    state, reason = _state(alarm, values)
    if state is None:  # TreatMissingData ignore, every datapoint missing: the state is kept
        return str(alarm["StateValue"])
    if state != alarm["StateValue"]:
        data = {
            "version": "1.0",
            "queryDate": end.isoformat(),
            "recentDatapoints": [v for v in values if v is not None],
        }
        cloudwatch.set_alarm_state(
            AlarmName=name, StateValue=state, StateReason=reason, StateReasonData=json.dumps(data)
        )
    return state


def _period_value(cloudwatch: Any, alarm: dict[str, Any], start: datetime, period: int) -> float | None:
    """The alarm's statistic over one period starting at ``start``, or None when it has no datapoint."""
    statistic = alarm.get("Statistic")
    kwargs: dict[str, Any] = {
        "Namespace": alarm["Namespace"],
        "MetricName": alarm["MetricName"],
        "Dimensions": alarm.get("Dimensions") or [],
        "StartTime": start,
        "EndTime": start + timedelta(seconds=period),
        "Period": period,
    }
    if statistic:
        kwargs["Statistics"] = [statistic]
    else:
        kwargs["ExtendedStatistics"] = [alarm["ExtendedStatistic"]]
    points = cloudwatch.get_metric_statistics(**kwargs)["Datapoints"]
    if not points:
        return None
    point = points[-1]
    value = (
        point.get(statistic)
        if statistic
        else point.get("ExtendedStatistics", {}).get(alarm["ExtendedStatistic"])
    )
    return None if value is None else float(value)


def _state(alarm: dict[str, Any], values: list[float | None]) -> tuple[str | None, str]:
    """(state, reason) of an alarm whose periods, newest first, have these values (None: no datapoint)."""
    threshold, operator = float(alarm["Threshold"]), alarm["ComparisonOperator"]
    treat = alarm.get("TreatMissingData") or "missing"
    needed = int(alarm.get("DatapointsToAlarm") or len(values))
    present = [v for v in values if v is not None]
    if not present:
        if treat == "breaching":
            return (
                "ALARM",
                f"Threshold Crossed: no datapoints were received for {len(values)} periods and {len(values)} missing datapoints were treated as [Breaching].",
            )
        if treat == "notBreaching":
            return (
                "OK",
                f"Threshold Crossed: no datapoints were received for {len(values)} periods and {len(values)} missing datapoints were treated as [NonBreaching].",
            )
        if treat == "ignore":
            return None, ""
        return "INSUFFICIENT_DATA", f"Insufficient Data: {len(values)} datapoints were unknown."
    breaching = sum(1 for v in present if _COMPARE[operator](v, threshold))
    if treat == "breaching":
        breaching += len(values) - len(present)
    shown = ", ".join(f"{v:g}" for v in present)
    relation = _SYMBOL[operator]
    if breaching >= needed:
        return "ALARM", (
            f"Threshold Crossed: {breaching} out of the last {len(values)} datapoints [{shown}] were {relation} "
            f"the threshold ({threshold:g}) (minimum {needed} datapoint(s) for OK -> ALARM transition)."
        )
    return "OK", (
        f"Threshold Crossed: {len(values) - breaching} out of the last {len(values)} datapoints [{shown}] were "
        f"not {relation} the threshold ({threshold:g})."
    )
