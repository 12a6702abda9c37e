"""The hfpipe command against a moto account running the real pipeline: list, watch, report, stop, errors."""

from __future__ import annotations

import json
import time
from typing import Any

import boto3
import pytest
from cli_moto import ACCOUNT, REGION, Deployed, StopRecordingSageMaker, tags_for
from cli_run import run
from moto.backends import get_backend

from hfpipe.cli import aws

# --- errors every command shares --------------------------------------------------------------------


def list_error(capsys: Any, env: str, *extra: str) -> str:
    """`hfpipe list --env ENV` fails (exit status 1): what it says on stderr."""
    code, _, err = run(capsys, "list", "--env", env, *extra)
    assert code == 1
    return err


def test_no_credentials(aws_credentials: None, monkeypatch: pytest.MonkeyPatch, capsys: Any) -> None:
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    code, out, err = run(capsys, "list", "--env", "dev")
    assert code == 1
    assert out == ""
    assert err == (
        "error: no AWS credentials found: run `aws configure` (or `aws sso login`), set AWS_PROFILE, "
        "or try the pipeline without an account: `hfpipe local --recipe tiny-lora`\n"
    )


def test_unknown_profile(aws_credentials: None, capsys: Any) -> None:
    code, _, err = run(capsys, "list", "--env", "dev", "--profile", "nope")
    assert code == 1
    assert err == "error: AWS profile 'nope' not found: check --profile / AWS_PROFILE against ~/.aws/config\n"


def test_no_region(aws_credentials: None, monkeypatch: pytest.MonkeyPatch, capsys: Any) -> None:
    monkeypatch.delenv("AWS_REGION")
    monkeypatch.delenv("AWS_DEFAULT_REGION")
    assert list_error(capsys, "dev") == (
        "error: no AWS region set: pass --region, set AWS_REGION or AWS_DEFAULT_REGION, or give the profile a "
        "region (`aws configure set region eu-west-1`)\n"
    )


def test_unknown_environment(deployed: Deployed, capsys: Any) -> None:
    code, out, err = run(capsys, "list", "--env", "prod")
    assert code == 1
    assert out == ""
    assert err == (
        "error: unknown environment 'prod': no SSM parameters under /hfpipe/prod/ and no stack "
        f"Hfpipe-prod-Pipeline in {REGION}; deploy it with `cdk deploy -c env=prod --all` or check --region/--profile\n"
    )


def test_bad_environment_name(deployed: Deployed, capsys: Any) -> None:
    code, _, err = run(capsys, "list", "--env", "dev/../x")
    assert code == 2  # a usage error: the name's form needs no AWS call
    assert (
        "error: argument --env: 'dev/../x' is not a valid environment name; accepted: a lower-case letter, then "
        "lower-case letters or digits (no '-'), at most 16 characters, not 'hfpipe', as in cdk.json\n"
    ) in err


def test_environment_without_pipeline(moto_account: None, capsys: Any) -> None:
    """Data stack deployed, Pipeline stack not: the error says which parameter and stack are missing."""
    ssm = boto3.client("ssm", region_name=REGION)
    from hfpipe import contract

    ssm.put_parameter(
        Name=contract.ssm_parameter_name("qa", contract.SSM_DATA_BUCKET), Value="b", Type="String"
    )
    assert list_error(capsys, "qa") == (
        f"error: environment 'qa' has no state-machine-arn: SSM parameter /hfpipe/qa/state-machine-arn is missing "
        f"in {REGION}; deploy Hfpipe-qa-Pipeline with `cdk deploy -c env=qa --all`\n"
    )


def test_stack_not_deployed(moto_account: None, capsys: Any) -> None:
    cfn = boto3.client("cloudformation", region_name=REGION)
    template = {"Resources": {"T": {"Type": "AWS::SNS::Topic"}}}
    cfn.create_stack(StackName="Hfpipe-stage-Pipeline", TemplateBody=json.dumps(template))
    get_backend("cloudformation")[ACCOUNT][REGION].stacks  # noqa: B018 - moto has no failed deploys; set it
    for stack in get_backend("cloudformation")[ACCOUNT][REGION].stacks.values():
        stack.status = "ROLLBACK_COMPLETE"
    assert list_error(capsys, "stage") == (
        "error: stack Hfpipe-stage-Pipeline is not deployed (status ROLLBACK_COMPLETE); wait for it or "
        "redeploy with `cdk deploy -c env=stage --all`\n"
    )


def test_environment_from_stack_outputs(moto_account: None, capsys: Any) -> None:
    """Without SSM parameters the stack outputs are used (output StateMachineArn <-> state-machine-arn)."""
    sfn = boto3.client("stepfunctions", region_name=REGION)
    from cli_moto import ROLE

    definition = {"StartAt": "P", "States": {"P": {"Type": "Pass", "End": True}}}
    sm = sfn.create_state_machine(name="m", definition=json.dumps(definition), roleArn=ROLE)[
        "stateMachineArn"
    ]
    template = {
        "Resources": {"T": {"Type": "AWS::SNS::Topic"}},
        "Outputs": {"StateMachineArn": {"Value": sm}},
    }
    boto3.client("cloudformation", region_name=REGION).create_stack(
        StackName="Hfpipe-out-Pipeline", TemplateBody=json.dumps(template)
    )
    code, out, err = run(capsys, "list", "--env", "out")
    assert (code, err) == (0, "")
    assert out == "no executions in environment 'out'\n"


def test_usage_error_exit_code(capsys: Any) -> None:
    code, _, err = run(capsys, "list")
    assert code == 2
    assert "the following arguments are required: --env" in err


# --- list -------------------------------------------------------------------------------------------


def test_list(deployed: Deployed, capsys: Any) -> None:
    deployed.start("run-a")
    deployed.start("run-b", fail=True)
    code, out, err = run(capsys, "list", "--env", "dev")
    assert (code, err) == (0, "")
    lines = [line for line in out.splitlines() if "run-" in line]
    assert len(lines) == 2
    assert "run-a" in out and "SUCCEEDED" in out
    assert "run-b" in out and "FAILED" in out

    code, out, _ = run(capsys, "list", "--env", "dev", "--status", "FAILED")
    assert code == 0
    assert "run-b" in out and "run-a" not in out


def test_list_empty_and_bad_max(deployed: Deployed, capsys: Any) -> None:
    assert run(capsys, "list", "--env", "dev") == (0, "no executions in environment 'dev'\n", "")
    assert run(capsys, "list", "--env", "dev", "--max", "0") == (2, "", "error: --max 0 must be at least 1\n")


# --- watch / report ---------------------------------------------------------------------------------


def test_watch_finished_execution_prints_view_and_report(deployed: Deployed, capsys: Any) -> None:
    arn, plan = deployed.start("done-1")
    output = json.loads(deployed.sfn.describe_execution(executionArn=arn)["output"])
    code, out, err = run(capsys, "watch", "done-1", "--env", "dev")
    assert (code, err) == (0, "")
    assert "SUCCEEDED" in out
    assert f"{plan['training_job_name']} (Completed)" in out
    assert "report: done-1" in out
    assert f"{output['report']['cost_usd']:.4f} USD" in out  # the Report Lambda's cost_usd
    assert "eval_loss" in out and "1.5" in out
    assert "Amanda bakes cookies." in out  # the smoke test's answer
    # the same by ARN, no --env needed
    assert run(capsys, "watch", arn)[0] == 0


def test_watch_failed_execution_exits_1_and_says_why(deployed: Deployed, capsys: Any) -> None:
    deployed.start("bad-1", fail=True)
    code, out, err = run(capsys, "watch", "bad-1", "--env", "dev")
    assert code == 1
    assert err == ""
    assert "FAILED" in out
    assert "TrainingJobFailed" in out and "AlgorithmError: CUDA out of memory" in out


def test_watch_unknown_execution(deployed: Deployed, capsys: Any) -> None:
    code, out, err = run(capsys, "watch", "nope", "--env", "dev")
    assert (code, out) == (1, "")
    assert (
        err
        == "error: unknown execution 'nope' in environment 'dev': list executions with `hfpipe list --env dev`\n"
    )


def test_watch_name_without_env(deployed: Deployed, capsys: Any) -> None:
    code, _, err = run(capsys, "watch", "done-1")
    assert code == 1
    assert err == "error: execution 'done-1' is a name, not an ARN: add --env ENV to find its state machine\n"


def _job_launched(deployed: Deployed, arn: str, plan: dict[str, Any]) -> str:
    """The training job's name once the Launch state has created it (the first view must find the job)."""
    job_name = plan["training_job_name"]
    deployed.wait_for_state(arn, "Launch")  # waiting for the job's state-change event
    # The Launch state is entered before its Lambda has created the job.
    deadline = time.monotonic() + 30
    while (
        time.monotonic() < deadline
        and not deployed.sagemaker.list_training_jobs(NameContains=job_name)["TrainingJobSummaries"]
    ):
        time.sleep(0.05)
    return str(job_name)


def test_watch_follows_a_running_execution(deployed: Deployed, capsys: Any) -> None:
    """A live execution: the view shows job status, secondary status, loss and cost, then the report."""
    from rich.console import Console

    from hfpipe.cli.run.watch import watch

    arn, plan = deployed.start("live-1", running=True, wait=False)
    job_name = _job_launched(deployed, arn, plan)
    deployed.cloudwatch.put_metric_data(
        Namespace="/aws/sagemaker/TrainingJobs",
        MetricData=[
            {
                "MetricName": "train_loss",
                "Value": 2.5,
                "Dimensions": [{"Name": "Host", "Value": f"{job_name}/algo-1"}],
            }
        ],
    )
    console = Console(record=True, width=150, force_terminal=False)
    clients = aws.make_clients()
    views: list[str] = []

    def sleep(_: float) -> None:
        views.append(console.export_text(clear=False))
        deployed.finish_training(job_name)
        deployed.wait(arn)

    snap = watch(clients, arn, console, interval=1, sleep=sleep)
    assert snap.status == "SUCCEEDED"
    first = views[0]
    assert "RUNNING" in first
    assert "InProgress / Training" in first
    assert "train_loss 2.5" in first
    assert "cost so far" in first and f"(estimate {plan['estimated_cost_usd']:.2f} USD)" in first
    assert f"{plan['endpoint_name']}  not created yet" in first
    final = console.export_text()
    assert "report: live-1" in final and "SUCCEEDED" in final


def test_report_json_is_the_report_lambdas(deployed: Deployed, capsys: Any) -> None:
    arn, plan = deployed.start("rep-1")
    code, out, err = run(capsys, "report", "rep-1", "--env", "dev", "--json")
    assert (code, err) == (0, "")
    report = json.loads(out)
    output = json.loads(deployed.sfn.describe_execution(executionArn=arn)["output"])
    assert report == {**output["report"], "execution_status": "SUCCEEDED"}
    assert report["training_job_name"] == plan["training_job_name"] and report["smoke_test"]["ok"] is True


def test_report_of_failed_execution_from_training_job(deployed: Deployed, capsys: Any) -> None:
    """Without a report in the execution's output, the same keys come from DescribeTrainingJob and the plan."""
    arn, plan = deployed.start("rep-2", fail=True)
    job = deployed.job(plan["training_job_name"])
    job.billable_time_in_seconds = job.training_time_in_seconds = 900
    job.final_metric_data_list = [{"MetricName": "train_loss", "Value": 2.25}]
    assert deployed.sfn.describe_execution(executionArn=arn).get("output") is None
    code, out, _ = run(capsys, "report", "rep-2", "--env", "dev", "--json")
    assert code == 0
    report = json.loads(out)
    assert report["execution_status"] == "FAILED"
    assert "TrainingJobFailed" in report["failure"] and "CUDA out of memory" in report["failure"]
    assert report["training_job_name"] == plan["training_job_name"]
    assert report["training_job_status"] == "Failed"
    assert report["billable_seconds"] == 900
    # billable x instances x price
    assert report["cost_usd"] == pytest.approx(
        900 * plan["instance_count"] * plan["price_per_hour_usd"] / 3600
    )
    assert report["final_metrics"] == {"train_loss": 2.25}
    # SageMaker names the artifact's URI before the job ends; a failed job wrote none, so none is reported.
    assert job.model_artifacts["S3ModelArtifacts"] and report["model_artifacts"] is None


def test_report_plot_writes_png(deployed: Deployed, capsys: Any, tmp_path: Any) -> None:
    from datetime import UTC, datetime, timedelta

    _, plan = deployed.start("plot-1")
    job = deployed.job(plan["training_job_name"])
    start = datetime.now(UTC) - timedelta(minutes=30)
    job.training_start_time, job.training_end_time = start, start + timedelta(minutes=20)
    host = [{"Name": "Host", "Value": f"{plan['training_job_name']}/algo-1"}]
    for minute in range(10):
        deployed.cloudwatch.put_metric_data(
            Namespace="/aws/sagemaker/TrainingJobs",
            MetricData=[
                {
                    "MetricName": "train_loss",
                    "Value": 3.0 - 0.2 * minute,
                    "Dimensions": host,
                    "Timestamp": start + timedelta(minutes=minute * 2),
                },
                {
                    "MetricName": "eval_loss",
                    "Value": 3.1 - 0.15 * minute,
                    "Dimensions": host,
                    "Timestamp": start + timedelta(minutes=minute * 2, seconds=30),
                },
            ],
        )
    png = tmp_path / "loss.png"
    code, out, err = run(capsys, "report", "plot-1", "--env", "dev", "--plot", str(png))
    assert (code, err) == (0, "")
    assert f"loss plot: {png}" in out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def write_training_log(deployed: Deployed, job: str, lines: list[str]) -> None:
    """The job's log as SageMaker sends it to CloudWatch Logs: one stream for algo-1."""
    import contextlib

    from hfpipe.core.run import logs

    client, now = deployed.logs, int(time.time() * 1000)
    with contextlib.suppress(client.exceptions.ResourceAlreadyExistsException):
        client.create_log_group(logGroupName=logs.LOG_GROUP)
    stream = logs.stream_name(job, "algo-1", now // 1000)
    client.create_log_stream(logGroupName=logs.LOG_GROUP, logStreamName=stream)
    events = [{"timestamp": now + i, "message": line} for i, line in enumerate(lines)]
    client.put_log_events(logGroupName=logs.LOG_GROUP, logStreamName=stream, logEvents=events)


TRAINER_LOG = [
    "***** Running training *****",
    *(str({"loss": 2.5 - 0.25 * step, "grad_norm": 1.0, "epoch": step / 4}) for step in range(1, 5)),
    str({"eval_loss": 2.4, "eval_runtime": 0.1, "epoch": 1.0}),
    "  train_loss               =     1.875",
]


def test_report_plot_reads_the_training_log_where_cloudwatch_has_no_loss(
    deployed: Deployed, capsys: Any, tmp_path: Any, plotted: list[Any]
) -> None:
    """No trainer_state.json and no CloudWatch metric (the local world publishes none), but the job's log has
    the Trainer's lines: the curve is read from them, and a local run's folder with the same log and job gives
    the same curve (one rule for `report --plot` and `report --local --plot`)."""
    _, plan = deployed.start("plot-2")
    write_training_log(deployed, plan["training_job_name"], TRAINER_LOG)
    code, out, err = run(capsys, "report", "plot-2", "--env", "dev", "--plot", str(tmp_path / "a.png"))
    assert (code, err) == (0, "")
    curve = {"loss": [(0.25, 2.25), (0.5, 2.0), (0.75, 1.75), (1.0, 1.5)], "eval_loss": [(1.0, 2.4)]}
    assert plotted == [(curve, "epoch")]
    assert "from the Trainer's lines in its training log: eval_loss 1 value, loss 4 values (x: epoch)" in out
    assert (tmp_path / "a.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    from hfpipe.local import outputs

    run_dir = tmp_path / "runs" / "tiny-lora-20261201-000000"
    run_dir.mkdir(parents=True)
    job = deployed.sagemaker.describe_training_job(TrainingJobName=plan["training_job_name"])
    (run_dir / outputs.TRAINING_JOB).write_text(json.dumps(job, default=str))
    (run_dir / outputs.TRAINING_LOG).write_text("\n".join(TRAINER_LOG) + "\n")
    (run_dir / outputs.REPORT).write_text(json.dumps({"execution_name": run_dir.name}))
    local = run(
        capsys, "report", "--local", "--out", str(tmp_path / "runs"), "--plot", str(tmp_path / "b.png")
    )
    assert local[::2] == (0, "") and plotted[1] == plotted[0]


def test_report_plot_of_a_job_with_only_its_final_metrics(
    deployed: Deployed, capsys: Any, tmp_path: Any, plotted: list[Any]
) -> None:
    """The report shows the job's final losses (its log is gone, CloudWatch has none): they are the plot."""
    deployed.start("plot-3")
    code, out, err = run(capsys, "report", "plot-3", "--env", "dev", "--plot", str(tmp_path / "x.png"))
    assert (code, err) == (0, "")
    assert plotted == [({"train_loss": [("end", 1.25)], "eval_loss": [("end", 1.5)]}, plotted[0][1])]
    assert "from its final metrics: eval_loss 1 value, train_loss 1 value (x: end of training" in out


def test_report_plot_without_loss_values(deployed: Deployed, capsys: Any, tmp_path: Any) -> None:
    _, plan = deployed.start("plot-4", fail=True)
    code, _, err = run(capsys, "report", "plot-4", "--env", "dev", "--plot", str(tmp_path / "x.png"))
    assert code == 1
    assert err == (
        f"error: training job {plan['training_job_name']} (Failed): nothing to plot, no loss value in its "
        "checkpoint folder's trainer_state.json, CloudWatch's metrics (namespace /aws/sagemaker/TrainingJobs), "
        "the Trainer's lines in its training log, its training log read with its metric definitions, its final "
        "metrics; its loss metric definitions (loss, train_loss, eval_loss) matched no line of its training log "
        "(the Trainer logs the loss every `logging_steps` steps, more than this run trained); run it again with "
        "--set training.hyperparameters.logging_steps=1\n"
    )
    assert not (tmp_path / "x.png").exists()


def test_report_plot_needs_png(deployed: Deployed, capsys: Any) -> None:
    assert run(capsys, "report", "x", "--env", "dev", "--plot", "loss.jpg") == (
        1,
        "",
        "error: --plot 'loss.jpg' must name a .png file\n",
    )


# --- stop -------------------------------------------------------------------------------------------


@pytest.fixture
def recording_sagemaker(monkeypatch: pytest.MonkeyPatch) -> StopRecordingSageMaker:
    holder: dict[str, StopRecordingSageMaker] = {}
    original = aws.Clients.client

    def client(self: aws.Clients, service: str) -> Any:
        real = original(self, service)
        if service != "sagemaker":
            return real
        holder.setdefault("sm", StopRecordingSageMaker(real))
        return holder["sm"]

    monkeypatch.setattr(aws.Clients, "client", client)
    fake = StopRecordingSageMaker(None)
    holder["sm"] = fake
    fake._real = boto3.client("sagemaker", region_name=REGION)
    return fake


def test_stop_running_execution_stops_job_and_deletes_its_endpoint(
    deployed: Deployed, recording_sagemaker: StopRecordingSageMaker, capsys: Any
) -> None:
    # A long poll (60 s, 1.2 s on the engine's clock): the stop lands in the Wait state. moto's interpreter
    # may otherwise be inside the DescribeTrainingJob call, fail it and end the execution FAILED instead of
    # ABORTED, which AWS never does.
    arn, plan = deployed.start("stop-1", running=True, wait=False, poll_seconds=60)
    job_name = _job_launched(deployed, arn, plan)
    # a model this execution created, and one of another execution that must stay
    for name, execution in (("stop-1", "stop-1"), ("other", "other-exec")):
        deployed.sagemaker.create_model(
            ModelName=f"{name}-model",
            ExecutionRoleArn=f"arn:aws:iam::{ACCOUNT}:role/r",
            PrimaryContainer={"Image": "example.invalid/i"},
            Tags=tags_for({**plan, "execution_name": execution}),
        )

    code, out, err = run(capsys, "stop", "stop-1", "--env", "dev", "--yes")
    assert (code, err) == (0, "")
    assert out.splitlines() == [
        "stopped execution stop-1",
        f"stopping training job {job_name} (SageMaker uploads what it has, then marks it Stopped)",
        "deleted model stop-1-model",
    ]
    assert recording_sagemaker.stopped == [job_name]
    # moto's interpreter reflects the stop in the execution's status when its worker thread ends (a moment
    # after StopExecution returns, longer on a busy machine): wait for the end, then check how it ended.
    assert deployed.wait(arn) == "ABORTED"
    models = {m["ModelName"] for m in deployed.sagemaker.list_models()["Models"]}
    assert "other-model" in models and "stop-1-model" not in models

    # stopping again is harmless
    assert run(capsys, "stop", arn) == (
        0,
        f"execution stop-1 already ended (ABORTED)\ntraining job {job_name} already Stopping\n"
        "nothing left to stop or delete\n",
        "",
    )
    assert recording_sagemaker.stopped == [job_name]


def test_stop_before_launch(
    deployed: Deployed, recording_sagemaker: StopRecordingSageMaker, capsys: Any
) -> None:
    # CreateTrainingJob is throttled: Launch retries with backoff, and there is no job yet.
    deployed.throttle_create_training_job(times=6)
    _, plan = deployed.start("stop-2", wait=False)
    code, out, _ = run(capsys, "stop", "stop-2", "--env", "dev")
    assert code == 0
    assert out.splitlines() == [
        "stopped execution stop-2",
        f"training job {plan['training_job_name']} was never launched",
    ]
    assert recording_sagemaker.stopped == []


def test_stop_unknown_execution_arn(deployed: Deployed, capsys: Any) -> None:
    arn = deployed.state_machine_arn.replace(":stateMachine:", ":execution:") + ":ghost"
    code, _, err = run(capsys, "stop", arn)
    assert code == 1
    assert err == f"error: unknown execution '{arn}': list executions with `hfpipe list --env dev`\n"


def test_stop_not_an_execution_arn(deployed: Deployed, capsys: Any) -> None:
    code, _, err = run(capsys, "stop", deployed.state_machine_arn)
    assert code == 1
    assert err == (
        f"error: '{deployed.state_machine_arn}' is not an execution ARN: expected arn:aws:states:...:execution:...\n"
    )


@pytest.mark.parametrize(
    ("flag", "environ", "expected"),
    [
        ("us-east-2", {"AWS_REGION": "eu-west-3", "AWS_DEFAULT_REGION": "ap-south-1"}, "us-east-2"),
        (None, {"AWS_REGION": "eu-west-3", "AWS_DEFAULT_REGION": "ap-south-1"}, "eu-west-3"),
        (None, {"AWS_DEFAULT_REGION": "ap-south-1"}, "ap-south-1"),
        (None, {"AWS_REGION": " "}, None),
        (None, {}, None),
    ],
)
def test_region_is_resolved_as_the_aws_cli_does(flag: Any, environ: dict, expected: Any) -> None:
    from hfpipe.cli.aws import resolve_region

    assert resolve_region(flag, environ) == expected


def test_aws_region_alone_reaches_the_session(monkeypatch: pytest.MonkeyPatch) -> None:
    """botocore reads only AWS_DEFAULT_REGION; the command must honour AWS_REGION too."""
    from hfpipe.cli.aws import make_clients

    monkeypatch.delenv("AWS_DEFAULT_REGION", raising=False)
    monkeypatch.setenv("AWS_REGION", "eu-west-3")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    assert make_clients().region == "eu-west-3"


def test_a_lambda_errors_cause_is_shown_as_its_message_not_its_json_object() -> None:
    """A failed Plan state's cause is the Lambda's JSON error object; the status and report show its message."""
    from hfpipe.cli.run.execution import failure_of

    cause = json.dumps({"errorType": "RecipeError", "errorMessage": "recipe.training.instance_type: bad"})
    event = {"taskFailedEventDetails": {"error": "RecipeError", "cause": cause}}
    assert failure_of([{"type": "TaskStateEntered"}, event], {}) == (
        "RecipeError: recipe.training.instance_type: bad"
    )
    described = {"error": "States.Timeout", "cause": "not JSON: kept as it is"}
    assert failure_of([event], described) == "States.Timeout: not JSON: kept as it is"
    assert failure_of([{"type": "ExecutionSucceeded"}], {}) is None
