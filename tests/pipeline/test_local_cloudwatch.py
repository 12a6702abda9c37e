"""Local mode's CloudWatch and serving around endpoint updates: the metrics every InvokeEndpoint records (real
calls through the handlers' runtime client), alarm evaluation from moto's metric data, the template's alarms
made in moto, the stand-in requests, and the runtime serving a model created from a model package with two
fleets of one endpoint side by side."""

from __future__ import annotations

import io
import itertools
import tarfile
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from accounts import ACCOUNT
from botocore.exceptions import ClientError
from leftovers import removed_after

from hfpipe import contract
from hfpipe.core.recipe.recipes import resolve_recipe
from hfpipe.local.engine import cloudwatch
from hfpipe.local.engine.standin import standin_requests
from hfpipe.local.engine.template import Resolver

pytestmark = pytest.mark.slow
_ids = itertools.count()
ROLE = f"arn:aws:iam::{ACCOUNT}:role/r"


@pytest.fixture(autouse=True)
def _tidy(request):
    if "fresh" not in request.fixturenames:
        yield
        return
    engine = request.getfixturevalue("fresh")
    with removed_after(engine):
        yield


def _config(sm: Any, config: str, model: str) -> None:
    """CreateEndpointConfig ``config``: ``model`` on one ml.m5.large, all the traffic."""
    variant = {"VariantName": "AllTraffic", "ModelName": model, "InstanceType": "ml.m5.large"}
    sm.create_endpoint_config(
        EndpointConfigName=config, ProductionVariants=[{**variant, "InitialInstanceCount": 1}]
    )


def _endpoint(engine: Any, **container: Any) -> str:
    name = f"cw-{next(_ids)}"
    sm = engine.client("sagemaker")
    sm.create_model(ModelName=f"{name}-m", ExecutionRoleArn=ROLE, **container)
    _config(sm, f"{name}-c", f"{name}-m")
    sm.create_endpoint(EndpointName=name, EndpointConfigName=f"{name}-c")
    return name


def _sum(engine: Any, endpoint: str, metric: str, statistic: str = "Sum") -> float:
    now = datetime.now(UTC)
    points = engine.client("cloudwatch").get_metric_statistics(
        Namespace="AWS/SageMaker",
        MetricName=metric,
        Dimensions=[
            {"Name": "EndpointName", "Value": endpoint},
            {"Name": "VariantName", "Value": "AllTraffic"},
        ],
        StartTime=now - timedelta(minutes=5),
        EndTime=now + timedelta(minutes=1),
        Period=600,
        Statistics=[statistic],
    )["Datapoints"]
    return sum(p[statistic] for p in points)


class _Panic(BaseException):
    """What pyo3 raises for a Rust panic: outside Exception, so the model server's worker dies."""


def test_real_invocations_record_sagemakers_metrics_and_errors_answer_as_aws(fresh):
    from pipeline_lambdas import aws

    name = _endpoint(fresh, PrimaryContainer={"Image": "x", "ModelDataUrl": "s3://b/m.tar.gz"})

    def plugin(endpoint: str, body: Any) -> Any:
        if body.get("raise") == "value":
            raise ValueError("request field 'question' is not accepted")
        if body.get("raise") == "panic":
            raise _Panic("the tokenizer panicked")
        return {"answer": "a", "score": 1.0}

    fresh.endpoint = plugin
    runtime = aws.OVERRIDES["sagemaker-runtime"]
    for _ in range(3):
        runtime.invoke_endpoint(EndpointName=name, Body=b"{}")
    with pytest.raises(ClientError) as client_error:
        runtime.invoke_endpoint(EndpointName=name, Body=b'{"raise": "value"}')
    with pytest.raises(ClientError) as server_error:
        runtime.invoke_endpoint(EndpointName=name, Body=b'{"raise": "panic"}')
    with pytest.raises(ClientError) as not_json:
        runtime.invoke_endpoint(EndpointName=name, Body=b"not json")
    assert not_json.value.response["OriginalStatusCode"] == 400
    error = client_error.value.response
    assert (error["Error"]["Code"], error["ResponseMetadata"]["HTTPStatusCode"]) == ("ModelError", 424)
    assert error["Error"]["Message"].startswith(
        "Received client error (400) from primary with message \"request field 'question' is not accepted\"."
    )
    assert error["OriginalStatusCode"] == 400
    assert server_error.value.response["Error"]["Message"].startswith(
        'Received server error (500) from primary with message "Worker died.".'
    )
    assert _sum(fresh, name, "Invocations") == 6
    assert _sum(fresh, name, "Invocation4XXErrors") == 2
    assert _sum(fresh, name, "Invocation5XXErrors") == 1
    assert _sum(fresh, name, "ModelLatency", "Maximum") > 0


def _alarm(engine: Any, name: str, endpoint: str, **extra: Any) -> None:
    settings = {
        "Namespace": "AWS/SageMaker",
        "MetricName": "Invocation5XXErrors",
        "Statistic": "Sum",
        "Period": 60,
        "EvaluationPeriods": 1,
        "Threshold": 1.0,
        "ComparisonOperator": "GreaterThanOrEqualToThreshold",
        "Dimensions": [
            {"Name": "EndpointName", "Value": endpoint},
            {"Name": "VariantName", "Value": "AllTraffic"},
        ],
        **extra,
    }
    engine.client("cloudwatch").put_metric_alarm(AlarmName=name, **settings)


@pytest.mark.parametrize(
    ("treat", "without_data"),
    [
        ("missing", "INSUFFICIENT_DATA"),
        ("notBreaching", "OK"),
        ("breaching", "ALARM"),
        ("ignore", None),  # the state is kept
    ],
)
def test_an_alarm_is_evaluated_from_the_metrics_and_its_state_set_in_moto(fresh, treat, without_data):
    cw = fresh.client("cloudwatch")
    endpoint = f"cw-alarm-{next(_ids)}"
    name = f"{endpoint}-5xx"
    _alarm(fresh, name, endpoint, TreatMissingData=treat)
    created = fresh.alarm_states(name)[name]
    assert cloudwatch.evaluate(cw, name) == (without_data or created)  # no datapoint yet
    cloudwatch.record_invocation(cw, endpoint, "AllTraffic", 200, 1000.0)
    assert cloudwatch.evaluate(cw, name) == "OK"  # Sum 0 < 1
    cloudwatch.record_invocation(cw, endpoint, "AllTraffic", 503, 1000.0)
    assert cloudwatch.evaluate(cw, name) == "ALARM"
    (alarm,) = cw.describe_alarms(AlarmNames=[name])["MetricAlarms"]
    assert alarm["StateValue"] == "ALARM"
    assert alarm["StateReason"].startswith("Threshold Crossed: 1 out of the last 1 datapoints [1]")
    # An hour later the period holds no datapoint any more.
    later = datetime.now(UTC) + timedelta(hours=1)
    assert cloudwatch.evaluate(cw, name, now=later) == (without_data or "ALARM")


def test_latency_alarms_average_microseconds_and_m_out_of_n(fresh):
    cw = fresh.client("cloudwatch")
    endpoint = f"cw-lat-{next(_ids)}"
    _alarm(
        fresh,
        f"{endpoint}-latency",
        endpoint,
        MetricName="ModelLatency",
        Statistic="Average",
        Threshold=500_000.0,
        ComparisonOperator="GreaterThanThreshold",
        EvaluationPeriods=2,
        DatapointsToAlarm=2,
        TreatMissingData="notBreaching",
    )
    now = datetime.now(UTC)
    for latency_us in (200_000.0, 1_200_000.0):  # average 700 ms in this period
        cloudwatch.record_invocation(cw, endpoint, "AllTraffic", 200, latency_us, when=now)
    # One breaching period of two: not enough for 2 out of 2.
    assert cloudwatch.evaluate(cw, f"{endpoint}-latency", now=now) == "OK"
    cloudwatch.record_invocation(cw, endpoint, "AllTraffic", 200, 900_000.0, when=now - timedelta(seconds=70))
    assert cloudwatch.evaluate(cw, f"{endpoint}-latency", now=now) == "ALARM"


def test_the_templates_alarms_are_made_in_moto(fresh):
    cw = fresh.client("cloudwatch")
    name = contract.endpoint_alarm_name("dev", f"t{next(_ids)}", "5xx-errors")
    resources = {
        "Topic": {"Type": "AWS::SNS::Topic"},
        "EndpointErrors": {
            "Type": "AWS::CloudWatch::Alarm",
            "Properties": {
                "AlarmName": name,
                "AlarmActions": [{"Ref": "Topic"}],
                "Namespace": "AWS/SageMaker",
                "MetricName": "Invocation5XXErrors",
                "Statistic": "Sum",
                "Period": 60,
                "EvaluationPeriods": 1,
                "Threshold": 1,
                "ComparisonOperator": "GreaterThanOrEqualToThreshold",
                "TreatMissingData": "notBreaching",
                "Dimensions": [
                    {"Name": "EndpointName", "Value": {"Fn::Join": ["-", ["hfpipe", "dev", "x"]]}}
                ],
            },
        },
        "QueueAlarm": {  # watches a queue local mode does not make: left out
            "Type": "AWS::CloudWatch::Alarm",
            "Properties": {
                "Dimensions": [{"Name": "QueueName", "Value": {"Fn::GetAtt": ["Queue", "QueueName"]}}]
            },
        },
    }
    resolver = Resolver(resources, fresh.region, {})
    resolver.physical["Topic"] = f"arn:aws:sns:us-east-1:{ACCOUNT}:topic"
    assert cloudwatch.create_alarms(cw, resources, resolver.resolve, resolver.physical) == [name]
    (alarm,) = cw.describe_alarms(AlarmNames=[name])["MetricAlarms"]
    assert alarm["AlarmActions"] == [f"arn:aws:sns:us-east-1:{ACCOUNT}:topic"]
    assert alarm["Dimensions"] == [{"Name": "EndpointName", "Value": "hfpipe-dev-x"}]
    assert resolver.resolve({"Ref": "EndpointErrors"}) == name
    assert resolver.resolve({"Fn::GetAtt": ["EndpointErrors", "Arn"]}).endswith(f":alarm:{name}")


@pytest.mark.parametrize(
    ("recipe", "first_key"),
    [
        ("tiny-qa", "context"),
        ("tiny-mnli", "text_pair"),
        ("tiny-spot", "text"),
        ("tiny-lora", "Tom: I have coffee"),
        ("bloomz-7b1-lora-samsum", "messages"),  # the vllm kind: OpenAI chat completions
    ],
)
def test_stand_in_requests_are_the_sample_then_varied_fixture_requests(recipe, first_key):
    resolved = resolve_recipe(recipe_name=recipe)
    requests = standin_requests(resolved)
    assert requests[0] == resolved["serving"]["sample_request"] and len(requests) == 5
    assert len({repr(r) for r in requests}) == 5  # inputs vary
    body = requests[1]
    assert first_key in (body if first_key == "messages" else body["inputs"])
    assert standin_requests(resolved) == requests  # deterministic


def _model_tar(marker: str) -> bytes:
    code = (
        "from pathlib import Path\n"
        "def model_fn(model_dir):\n"
        "    return Path(model_dir, 'marker.txt').read_text()\n"
        "def predict_fn(data, model):\n"
        "    return {'fleet': model, 'inputs': data.get('inputs')}\n"
    )
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as tar:
        for path, text in (("code/inference.py", code), ("marker.txt", marker)):
            data = text.encode()
            info = tarfile.TarInfo(path)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def test_the_runtime_serves_a_model_package_version_beside_the_old_fleet(fresh, tmp_path: Path):
    from hfpipe.local.runtime import LocalRuntime

    s3, sm = fresh.client("s3"), fresh.client("sagemaker")
    bucket = f"cw-models-{next(_ids)}"
    where = {"LocationConstraint": fresh.region}
    s3.create_bucket(
        Bucket=bucket, **({} if fresh.region == "us-east-1" else {"CreateBucketConfiguration": where})
    )
    for marker in ("old", "new"):
        s3.put_object(Bucket=bucket, Key=f"{marker}/model.tar.gz", Body=_model_tar(marker))
    name = _endpoint(
        fresh,
        PrimaryContainer={"Image": "x", "ModelDataUrl": f"s3://{bucket}/old/model.tar.gz"},
        Tags=[{"Key": contract.TAG_RECIPE, "Value": "tiny-qa"}],
    )
    group = f"hfpipe-dev-{name}"
    sm.create_model_package_group(ModelPackageGroupName=group)
    version = sm.create_model_package(
        ModelPackageGroupName=group,
        InferenceSpecification={
            "Containers": [
                {"Image": "x", "ModelDataUrl": f"s3://{bucket}/new/model.tar.gz", "Environment": {"A": "1"}}
            ],
            "SupportedContentTypes": ["application/json"],
            "SupportedResponseMIMETypes": ["application/json"],
        },
        CustomerMetadataProperties={"recipe": "tiny-qa", "serving_kind": "hf-inference"},
    )["ModelPackageArn"]
    # AWS's way to deploy a registered version: CreateModel with the version's ARN as its container.
    sm.create_model(ModelName=f"{name}-v", ExecutionRoleArn=ROLE, Containers=[{"ModelPackageName": version}])
    _config(sm, f"{name}-c2", f"{name}-v")
    runtime = LocalRuntime(s3, sm, tmp_path)
    try:
        runtime.start_fleet(name, f"{name}-c2")
        assert runtime.invoke_fleet(name, f"{name}-c2", {"inputs": 1}) == {"fleet": "new", "inputs": 1}
        assert runtime.invoke_fleet(name, None, {"inputs": 2}) == {
            "fleet": "old",
            "inputs": 2,
        }  # current config
        assert set(runtime.endpoints) == {(name, f"{name}-c"), (name, f"{name}-c2")}
        runtime.stop_fleet(name, f"{name}-c")
        assert set(runtime.endpoints) == {(name, f"{name}-c2")}
    finally:
        runtime.close()


def test_a_call_routed_to_an_inference_component_counts_as_its_invocations(fresh):
    cw = fresh.client("cloudwatch")
    component = f"cw-component-{next(_ids)}"
    # The engine's inference components count every call they route with the engine's own hook.
    assert fresh.inference_components.count == fresh.count_invocation
    for _ in range(2):
        fresh.count_invocation(ACCOUNT, fresh.region, component)
    # AWS's metric: Invocations in AWS/SageMaker with the one dimension InferenceComponentName.
    (metric,) = cw.list_metrics(
        Namespace="AWS/SageMaker", Dimensions=[{"Name": "InferenceComponentName", "Value": component}]
    )["Metrics"]
    assert (metric["MetricName"], metric["Dimensions"]) == (
        "Invocations",
        [{"Name": "InferenceComponentName", "Value": component}],
    )
    now = datetime.now(UTC)
    (point,) = cw.get_metric_statistics(
        Namespace="AWS/SageMaker",
        MetricName="Invocations",
        Dimensions=metric["Dimensions"],
        StartTime=now - timedelta(minutes=5),
        EndTime=now + timedelta(minutes=1),
        Period=600,
        Statistics=["Sum"],
    )["Datapoints"]
    assert point["Sum"] == 2.0


def test_a_components_answers_put_the_errors_the_bake_reads(fresh):
    """What the adapter state machine's bake reads per component (Invocation5XXErrors, InvocationModelErrors,
    dimension InferenceComponentName) is what local mode publishes for each answer: 0 for an answer, 1 in
    each error class the container's status falls in."""
    cw = fresh.client("cloudwatch")
    component = f"cw-component-{next(_ids)}"
    assert fresh.inference_components.answered == fresh.count_answer
    for status in (200, 200, 424, 503):
        fresh.count_answer(ACCOUNT, fresh.region, component, status)
    now = datetime.now(UTC)

    def sums(metric: str) -> tuple[float, float]:
        (point,) = cw.get_metric_statistics(
            Namespace="AWS/SageMaker",
            MetricName=metric,
            Dimensions=[{"Name": "InferenceComponentName", "Value": component}],
            StartTime=now - timedelta(minutes=5),
            EndTime=now + timedelta(minutes=1),
            Period=600,
            Statistics=["Sum", "SampleCount"],
        )["Datapoints"]
        return point["Sum"], point["SampleCount"]

    assert sums("Invocation4XXErrors") == (1.0, 4.0)
    assert sums("Invocation5XXErrors") == (1.0, 4.0)
    assert sums("InvocationModelErrors") == (2.0, 4.0)


def test_a_local_job_is_in_progress_from_the_first_act_of_its_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """moto makes a training job Completed (with canned metrics and an end time) as it creates it; while the
    local runtime downloaded the job's channels, a view showed the new job Completed before InProgress."""
    from types import SimpleNamespace

    from hfpipe.local import runtime as local_runtime

    job = SimpleNamespace(
        training_job_status="Completed",
        secondary_status="Completed",
        training_end_time="moto's",
        final_metric_data_list=[{"MetricName": "canned"}],
        secondary_status_transitions=[{"Status": "Completed"}],
    )
    seen = []

    class Stop(Exception):
        pass

    def download(s3: Any, uri: str, dest: Path) -> Path:
        seen.append((job.training_job_status, job.secondary_status, job.training_end_time))
        seen.append(job.final_metric_data_list)
        raise Stop

    monkeypatch.setattr(local_runtime, "download_prefix", download)
    runtime = local_runtime.LocalRuntime(None, None, tmp_path)
    request = {
        "TrainingJobName": "job-1",
        "InputDataConfig": [
            {"ChannelName": "training", "DataSource": {"S3DataSource": {"S3Uri": "s3://data/train/"}}}
        ],
    }
    with pytest.raises(Stop):
        runtime.training(request, job)
    assert seen == [("InProgress", "Downloading", None), []]
    assert [t["Status"] for t in job.secondary_status_transitions] == ["Downloading"]
