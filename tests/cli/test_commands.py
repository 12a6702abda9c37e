"""The hfpipe command against a moto account: list, watch, report, stop, errors."""

from __future__ import annotations

import json
from typing import Any

import boto3
import pytest
from cli_moto import ACCOUNT, REGION, Deployed, sagemaker_backend, tags_for
from moto.backends import get_backend

from hfpipe.cli import aws, main


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


# --- errors every command shares --------------------------------------------------------------------


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
    code, _, err = run(capsys, "list", "--env", "dev")
    assert code == 1
    assert err == "error: no AWS region set: pass --region or set AWS_REGION / AWS_DEFAULT_REGION\n"


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
    assert code == 1
    assert err == (
        "error: --env 'dev/../x' is not a valid environment name: use a letter followed by letters, digits "
        "or '-' (at most 32 characters), as in cdk.json\n"
    )


def test_environment_without_pipeline(moto_account: None, capsys: Any) -> None:
    """Data stack deployed, Pipeline stack not: the error says which parameter and stack are missing."""
    ssm = boto3.client("ssm", region_name=REGION)
    from hfpipe import contract

    ssm.put_parameter(
        Name=contract.ssm_parameter_name("qa", contract.SSM_DATA_BUCKET), Value="b", Type="String"
    )
    code, _, err = run(capsys, "list", "--env", "qa")
    assert code == 1
    assert err == (
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
    code, _, err = run(capsys, "list", "--env", "stage")
    assert code == 1
    assert err == (
        "error: stack Hfpipe-stage-Pipeline is not deployed (status ROLLBACK_COMPLETE); wait for it or "
        "redeploy with `cdk deploy -c env=stage --all`\n"
    )


def test_environment_from_stack_outputs(moto_account: None, capsys: Any) -> None:
    """Without SSM parameters the stack outputs are used (output StateMachineArn <-> state-machine-arn)."""
    sfn = boto3.client("stepfunctions", region_name=REGION)
    from cli_moto import DEFINITION, ROLE

    sm = sfn.create_state_machine(name="m", definition=json.dumps(DEFINITION), roleArn=ROLE)[
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
    assert run(capsys, "list", "--env", "dev", "--max", "0") == (1, "", "error: --max 0 must be at least 1\n")


# --- watch / report ---------------------------------------------------------------------------------


def test_watch_finished_execution_prints_view_and_report(deployed: Deployed, capsys: Any) -> None:
    arn, plan = deployed.start("done-1")
    deployed.create_training_job(plan)
    code, out, err = run(capsys, "watch", "done-1", "--env", "dev")
    assert (code, err) == (0, "")
    assert "SUCCEEDED" in out
    assert "done-1-train" in out and "Completed" in out
    assert "report: done-1" in out
    assert "0.5000 USD" in out  # the Report Lambda's cost_usd
    assert "eval_loss" in out and "1.25" in out
    assert "Amanda bakes cookies." in out
    # the same by ARN, no --env needed
    assert run(capsys, "watch", arn)[0] == 0


def test_watch_failed_execution_exits_1_and_says_why(deployed: Deployed, capsys: Any) -> None:
    deployed.start("bad-1", fail=True)
    code, out, err = run(capsys, "watch", "bad-1", "--env", "dev")
    assert code == 1
    assert err == ""
    assert "FAILED" in out
    assert "TrainingJobFailed: AlgorithmError: CUDA out of memory" in out


def test_watch_unknown_execution(deployed: Deployed, capsys: Any) -> None:
    code, out, err = run(capsys, "watch", "nope", "--env", "dev")
    assert (code, out) == (1, "")
    assert (
        err
        == "error: unknown execution 'nope' in environment 'dev': list executions with `hfpipe list --env ENV`\n"
    )


def test_watch_name_without_env(deployed: Deployed, capsys: Any) -> None:
    code, _, err = run(capsys, "watch", "done-1")
    assert code == 1
    assert err == "error: execution 'done-1' is a name, not an ARN: add --env ENV to find its state machine\n"


def test_watch_follows_a_running_execution(deployed: Deployed, capsys: Any) -> None:
    """A live execution: the view shows job status, secondary status, loss and cost, then the report."""
    from rich.console import Console

    from hfpipe.cli.watch import watch

    arn, plan = deployed.start("live-1", train_seconds=2, wait=False)
    deployed.create_training_job(plan)
    job = sagemaker_backend().training_jobs[plan["training_job_name"]]
    job.training_job_status, job.secondary_status = "InProgress", "Training"
    job.final_metric_data_list = []
    job.billable_time_in_seconds = None
    deployed.cloudwatch.put_metric_data(
        Namespace="/aws/sagemaker/TrainingJobs",
        MetricData=[
            {
                "MetricName": "loss",
                "Value": 2.5,
                "Dimensions": [{"Name": "Host", "Value": f"{plan['training_job_name']}/algo-1"}],
            }
        ],
    )
    deployed.wait_for_state(arn, "Train")
    console = Console(record=True, width=150, force_terminal=False)
    clients = aws.make_clients()
    views: list[str] = []

    def sleep(_: float) -> None:
        views.append(console.export_text(clear=False))
        job.training_job_status, job.secondary_status = "Completed", "Completed"
        deployed.wait(arn)

    snap = watch(clients, arn, console, interval=1, sleep=sleep)
    assert snap.status == "SUCCEEDED"
    first = views[0]
    assert "RUNNING" in first and "Train" in first
    assert "InProgress / Training" in first
    assert "loss 2.5" in first
    assert "cost so far" in first and "(estimate 0.50 USD)" in first
    assert "live-1-endpoint  not created yet" in first
    final = console.export_text()
    assert "report: live-1" in final and "SUCCEEDED" in final


def test_report_json_is_the_contract_report(deployed: Deployed, capsys: Any) -> None:
    _, plan = deployed.start("rep-1")
    code, out, err = run(capsys, "report", "rep-1", "--env", "dev", "--json")
    assert (code, err) == (0, "")
    report = json.loads(out)
    from cli_moto import report_for

    assert report == {**report_for(plan), "execution_status": "SUCCEEDED"}


def test_report_of_failed_execution_from_training_job(deployed: Deployed, capsys: Any) -> None:
    """No Report Lambda output: the same keys come from DescribeTrainingJob and the plan."""
    _, plan = deployed.start("rep-2", fail=True)
    deployed.create_training_job(plan)
    job = sagemaker_backend().training_jobs["rep-2-train"]
    job.training_job_status, job.billable_time_in_seconds, job.training_time_in_seconds = "Failed", 900, 900
    job.final_metric_data_list = [{"MetricName": "loss", "Value": 2.25}]
    code, out, _ = run(capsys, "report", "rep-2", "--env", "dev", "--json")
    assert code == 0
    report = json.loads(out)
    assert report["execution_status"] == "FAILED"
    assert report["failure"] == "TrainingJobFailed: AlgorithmError: CUDA out of memory"
    assert report["training_job_name"] == "rep-2-train"
    assert report["training_job_status"] == "Failed"
    assert report["billable_seconds"] == 900
    assert report["cost_usd"] == pytest.approx(900 * 1.5 / 3600)  # billable x instances x price
    assert report["final_metrics"] == {"loss": 2.25}
    assert report["model_artifacts"] == "s3://artifacts/out/rep-2-train/output/model.tar.gz"


def test_report_plot_writes_png(deployed: Deployed, capsys: Any, tmp_path: Any) -> None:
    from datetime import UTC, datetime, timedelta

    _, plan = deployed.start("plot-1")
    deployed.create_training_job(plan)
    job = sagemaker_backend().training_jobs[plan["training_job_name"]]
    start = datetime.now(UTC) - timedelta(minutes=30)
    job.training_start_time, job.training_end_time = start, start + timedelta(minutes=20)
    host = [{"Name": "Host", "Value": f"{plan['training_job_name']}/algo-1"}]
    for minute in range(10):
        deployed.cloudwatch.put_metric_data(
            Namespace="/aws/sagemaker/TrainingJobs",
            MetricData=[
                {
                    "MetricName": "loss",
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


def test_report_plot_without_loss_metrics(deployed: Deployed, capsys: Any, tmp_path: Any) -> None:
    _, plan = deployed.start("plot-2")
    deployed.create_training_job(plan)
    code, _, err = run(capsys, "report", "plot-2", "--env", "dev", "--plot", str(tmp_path / "x.png"))
    assert code == 1
    assert err == (
        "error: training job plot-2-train has no loss metrics in CloudWatch (namespace "
        "/aws/sagemaker/TrainingJobs); check the recipe's metric definitions\n"
    )
    assert not (tmp_path / "x.png").exists()


def test_report_plot_needs_png(deployed: Deployed, capsys: Any) -> None:
    assert run(capsys, "report", "x", "--env", "dev", "--plot", "loss.jpg") == (
        1,
        "",
        "error: --plot 'loss.jpg' must name a .png file\n",
    )


# --- stop -------------------------------------------------------------------------------------------


class StopRecordingSageMaker:
    """moto's SageMaker, plus StopTrainingJob (which moto does not implement): records and applies it."""

    def __init__(self, real: Any) -> None:
        self._real = real
        self.stopped: list[str] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)

    def stop_training_job(self, TrainingJobName: str) -> dict[str, Any]:
        self.stopped.append(TrainingJobName)
        sagemaker_backend().training_jobs[TrainingJobName].training_job_status = "Stopping"
        return {}


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
    arn, plan = deployed.start("stop-1", train_seconds=30, wait=False)
    deployed.create_training_job(plan)
    sagemaker_backend().training_jobs[plan["training_job_name"]].training_job_status = "InProgress"
    # an endpoint this execution created, and one of another execution that must stay
    for name, execution in (("stop-1", "stop-1"), ("other", "other-exec")):
        deployed.sagemaker.create_model(
            ModelName=f"{name}-model",
            ExecutionRoleArn="arn:aws:iam::123456789012:role/r",
            PrimaryContainer={"Image": "example.invalid/i"},
            Tags=tags_for({**plan, "execution_name": execution}),
        )
    deployed.wait_for_state(arn, "Train")

    code, out, err = run(capsys, "stop", "stop-1", "--env", "dev")
    assert (code, err) == (0, "")
    assert out.splitlines() == [
        "stopped execution stop-1",
        "stopping training job stop-1-train (SageMaker uploads what it has, then marks it Stopped)",
        "deleted model stop-1-model",
    ]
    assert recording_sagemaker.stopped == ["stop-1-train"]
    assert deployed.sfn.describe_execution(executionArn=arn)["status"] == "ABORTED"
    assert [m["ModelName"] for m in deployed.sagemaker.list_models()["Models"]] == ["other-model"]

    # stopping again is harmless
    assert run(capsys, "stop", arn) == (0, "execution stop-1 already ended (ABORTED); nothing to stop\n", "")
    assert recording_sagemaker.stopped == ["stop-1-train"]


def test_stop_before_launch(
    deployed: Deployed, recording_sagemaker: StopRecordingSageMaker, capsys: Any
) -> None:
    arn, _ = deployed.start("stop-2", train_seconds=30, wait=False)
    deployed.wait_for_state(arn, "Train")
    code, out, _ = run(capsys, "stop", "stop-2", "--env", "dev")
    assert code == 0
    assert out.splitlines() == ["stopped execution stop-2", "training job stop-2-train was never launched"]
    assert recording_sagemaker.stopped == []


def test_stop_unknown_execution_arn(deployed: Deployed, capsys: Any) -> None:
    arn = deployed.state_machine_arn.replace(":stateMachine:", ":execution:") + ":ghost"
    code, _, err = run(capsys, "stop", arn)
    assert code == 1
    assert err == f"error: unknown execution '{arn}': list executions with `hfpipe list --env ENV`\n"


def test_stop_not_an_execution_arn(deployed: Deployed, capsys: Any) -> None:
    code, _, err = run(capsys, "stop", deployed.state_machine_arn)
    assert code == 1
    assert err == (
        f"error: '{deployed.state_machine_arn}' is not an execution ARN: expected arn:aws:states:...:execution:...\n"
    )
