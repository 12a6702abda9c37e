"""Every destructive command can be rerun to completion, and a user's "keep" survives.

For `hfpipe stop`, `hfpipe cleanup`, `hfpipe endpoints delete` and the Cleanup Lambda's teardown: the N-th
AWS call (SageMaker and Step Functions, paginated calls included) is throttled, for every N up to the
number of calls the fault-free run makes; the interrupted run is then run again without faults, and
nothing of the execution may be left billing (no InProgress training job, no endpoint) while nothing of
another environment, and nothing untagged, was touched.

SageMaker refuses DeleteEndpoint while an endpoint is Creating, Updating, SystemUpdating or RollingBack
(https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_DescribeEndpoint.html, EndpointStatus);
moto does not, so the SageMaker client here refuses it as AWS does.

The executions are moto's own (a state machine of one long Wait state): what is tested is the command and
the teardown, not the pipeline (whose abnormal-end Lambda would otherwise clean up behind the command).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import botocore.exceptions
import pytest
from cli_moto import ACCOUNT, ROLE, Environment, running_training_job, sagemaker_backend, tags_for
from sagemaker_resources import run_hosting

from hfpipe import contract
from hfpipe.cli import aws
from hfpipe.cli.run import cleanup as cleanup_cli
from hfpipe.core.names import PlannedNames

Run = Callable[..., tuple[int, str, str]]
# DescribeEndpoint's EndpointStatus values in which AWS refuses DeleteEndpoint (the module docstring's links);
# spelled out here, not imported, so the test holds the code to AWS's list.
NOT_DELETABLE_YET = ("Creating", "Updating", "SystemUpdating", "RollingBack")
THROTTLED = {"Error": {"Code": "ThrottlingException", "Message": "Rate exceeded"}}


class Faults:
    """Counts the AWS calls made through the clients it is attached to; the `fail_at`-th raises
    ThrottlingException (as botocore raises it once its own retries are spent)."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.fail_at: int | None = None

    def arm(self, fail_at: int | None) -> None:
        self.calls, self.fail_at = [], fail_at

    def tick(self, operation: str) -> None:
        self.calls.append(operation)
        if len(self.calls) == self.fail_at:
            raise botocore.exceptions.ClientError(THROTTLED, operation)

    def _before_call(self, model: Any, **_: Any) -> None:
        self.tick(model.name)

    def attach(self, client: Any) -> Any:
        # before-call runs for every operation, paginators' pages included, before moto answers it.
        client.meta.events.register("before-call.*.*", self._before_call, unique_id=f"faults-{id(self)}")
        return client


class AwsLikeSageMaker:
    """moto's SageMaker as AWS behaves where moto does not: StopTrainingJob (moto has none) marks the job
    Stopping, and DeleteEndpoint is refused while the endpoint is in a state that refuses it."""

    def __init__(self, real: Any, faults: Faults) -> None:
        self._real = real
        self._faults = faults
        self.stopped: list[str] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)

    def stop_training_job(self, TrainingJobName: str) -> dict[str, Any]:
        self._faults.tick("StopTrainingJob")  # not a moto call: counted here
        job = sagemaker_backend().training_jobs[TrainingJobName]
        if job.training_job_status != "InProgress":
            raise botocore.exceptions.ClientError(
                {"Error": {"Code": "ValidationException", "Message": "The job is not InProgress"}},
                "StopTrainingJob",
            )
        self.stopped.append(TrainingJobName)
        job.training_job_status = "Stopping"
        return {}

    def delete_endpoint(self, EndpointName: str) -> dict[str, Any]:
        endpoint = sagemaker_backend().endpoints.get(EndpointName)
        if endpoint is not None and endpoint.endpoint_status in NOT_DELETABLE_YET:
            self._faults.tick("DeleteEndpoint")
            raise botocore.exceptions.ClientError(
                {
                    "Error": {
                        "Code": "ValidationException",
                        "Message": f"Cannot delete in-progress endpoint {EndpointName}",
                    }
                },
                "DeleteEndpoint",
            )
        return dict(self._real.delete_endpoint(EndpointName=EndpointName))


@pytest.fixture
def faults(monkeypatch: pytest.MonkeyPatch) -> Faults:
    """The command's SageMaker and Step Functions clients, with faults and AWS's refusals."""
    faults = Faults()
    original = aws.Clients.client

    def client(self: aws.Clients, service: str) -> Any:
        cached = self._clients.get(f"faulty-{service}")
        if cached is not None:
            return cached
        real = original(self, service)
        if service in ("sagemaker", "stepfunctions"):
            faults.attach(real)
        wrapped = AwsLikeSageMaker(real, faults) if service == "sagemaker" else real
        self._clients[f"faulty-{service}"] = wrapped
        return wrapped

    monkeypatch.setattr(aws.Clients, "client", client)
    return faults


@pytest.fixture
def slow(environment: Environment) -> Environment:
    """The dev environment whose state machine waits an hour: an execution stays RUNNING until stopped."""
    definition = {"StartAt": "Train", "States": {"Train": {"Type": "Wait", "Seconds": 3600, "End": True}}}
    arn = environment.sfn.create_state_machine(
        name="hfpipe-dev-slow", definition=json.dumps(definition), roleArn=ROLE
    )["stateMachineArn"]
    return Environment("dev", arn)


def execution_resources(
    env: Environment, execution: str, tag_env: str = "dev", status: str = "InService", job: bool = True
) -> PlannedNames:
    """What an execution of `tag_env` leaves: an InProgress training job, a model, a config and an endpoint,
    named and tagged as the pipeline names and tags them."""
    names = PlannedNames.derive(execution, tag_env)
    tags = tags_for({"env": tag_env, "execution_name": execution, "recipe_name": "tiny-lora"})
    sm = env.sagemaker
    if job:
        running_training_job(sm, names.training_job_name, tags, "s3://artifacts/models/")
    run_hosting(sm, names, ROLE, tags, "example.invalid/i")
    sagemaker_backend().endpoints[names.endpoint_name].endpoint_status = status
    return names


def bystanders(env: Environment) -> set[str]:
    """Resources clean-up must never touch: prod's (a training job InProgress too), and a user's untagged
    model. Returns their names."""
    prod = execution_resources(env, "bystander", tag_env="prod")
    env.sagemaker.create_model(
        ModelName="users-own-model",
        ExecutionRoleArn=f"arn:aws:iam::{ACCOUNT}:role/r",
        PrimaryContainer={"Image": "example.invalid/i"},
    )
    return {prod.model_name, prod.endpoint_config_name, prod.endpoint_name, "users-own-model"}


def existing() -> set[str]:
    backend = sagemaker_backend()
    return set(backend.endpoints) | set(backend.endpoint_configs) | set(backend._models)


def assert_nothing_billing(names: PlannedNames, kept: set[str]) -> None:
    backend = sagemaker_backend()
    job = backend.training_jobs.get(names.training_job_name)
    assert job is None or job.training_job_status != "InProgress", f"{names.training_job_name} still running"
    left = existing()
    assert not {names.endpoint_name, names.endpoint_config_name, names.model_name} & left, left
    assert kept <= left, f"touched: {kept - left}"
    prod_job = backend.training_jobs.get(PlannedNames.derive("bystander", "prod").training_job_name)
    assert prod_job is None or prod_job.training_job_status == "InProgress", "prod's job was stopped"


def assert_ended(env: Environment, name: str) -> None:
    """The execution was stopped (moto shows it once its worker thread ends: a moment later when busy)."""
    arn = env.state_machine_arn.replace(":stateMachine:", ":execution:") + f":{name}"
    deadline = time.monotonic() + 20
    while env.sfn.describe_execution(executionArn=arn)["status"] == "RUNNING":
        assert time.monotonic() < deadline, f"execution {name} still RUNNING"
        time.sleep(0.05)
    assert env.sfn.describe_execution(executionArn=arn)["status"] == "ABORTED"


def running_execution(env: Environment, name: str) -> str:
    return str(env.sfn.start_execution(stateMachineArn=env.state_machine_arn, name=name)["executionArn"])


def interrupted(err: str) -> bool:
    """One line naming the throttled call (past the first reads, it also says a rerun finishes)."""
    return err.startswith("error: ") and err.count("\n") == 1 and "ThrottlingException" in err


def interrupted_then_rerun(faults: Faults, cli: Run, n: int, *argv: str, may_run_on: bool = False) -> None:
    """The command interrupted at its AWS call ``n`` (exit 1, one line saying so), then run again without faults:
    it finishes (exit 0, nothing on stderr). ``may_run_on``: a fault there may be harmless (exit 0 at once)."""
    faults.arm(n)
    code, _, err = cli(*argv)
    if may_run_on and code == 0:
        return
    assert code == 1 and interrupted(err), (n, faults.calls, err)
    faults.arm(None)
    code, _, err = cli(*argv)
    assert (code, err) == (0, ""), (n, faults.calls[:n], err)


def counted(faults: Faults, action: Callable[[], Any]) -> int:
    """How many AWS calls `action` makes without faults."""
    faults.arm(None)
    action()
    return len(faults.calls)


# --- 1. stop works from the tags, not from the execution's status ------------------------------------


def test_stop_on_an_ended_execution_still_stops_its_job_and_deletes_its_endpoint(
    slow: Environment, faults: Faults, cli: Run
) -> None:
    """The second tester's case: StopExecution went through, StopTrainingJob was throttled; the rerun used
    to say "already ended ... nothing to stop" and leave the job training and the endpoint up."""
    keep = bystanders(slow)
    execution_resources(slow, "ended")
    running_execution(slow, "ended")
    counted(faults, lambda: cli("stop", "ended", "--env", "dev", "--yes"))
    order = list(faults.calls)
    assert "StopExecution" in order and "StopTrainingJob" in order
    assert order.index("StopExecution") < order.index("StopTrainingJob")
    names = execution_resources(slow, "ended3")
    running_execution(slow, "ended3")
    faults.arm(order.index("StopTrainingJob") + 1)
    code, _, err = cli("stop", "ended3", "--env", "dev", "--yes")
    assert code == 1 and "ThrottlingException" in err and "run the same command again" in err, err
    assert sagemaker_backend().training_jobs[names.training_job_name].training_job_status == "InProgress"
    faults.arm(None)
    code, out, err = cli("stop", "ended3", "--env", "dev", "--yes")
    assert (code, err) == (0, ""), err
    assert out.splitlines()[:2] == [
        "execution ended3 already ended (ABORTED)",
        f"stopping training job {names.training_job_name} (SageMaker uploads what it has, then marks it Stopped)",
    ]
    assert f"deleted endpoint {names.endpoint_name}" in out
    assert_nothing_billing(names, keep)
    # and once more: nothing left, and it says so
    code, out, _ = cli("stop", "ended3", "--env", "dev", "--yes")
    assert code == 0 and out.splitlines()[-1] == "nothing left to stop or delete"


def test_stop_every_interrupted_run_is_finished_by_a_rerun(
    slow: Environment, faults: Faults, cli: Run
) -> None:
    keep = bystanders(slow)
    execution_resources(slow, "count")
    running_execution(slow, "count")
    total = counted(faults, lambda: cli("stop", "count", "--env", "dev", "--yes"))
    assert total >= 10, faults.calls
    for n in range(1, total + 1):
        name = f"stop-{n}"
        names = execution_resources(slow, name)
        running_execution(slow, name)
        interrupted_then_rerun(faults, cli, n, "stop", name, "--env", "dev", "--yes")
        assert_ended(slow, name)
        assert_nothing_billing(names, keep)


# --- cleanup -------------------------------------------------------------------------------------------


def test_cleanup_every_interrupted_run_is_finished_by_a_rerun(
    environment: Environment, faults: Faults, cli: Run
) -> None:
    keep = bystanders(environment)
    execution_resources(environment, "c-count", job=False)
    total = counted(faults, lambda: cli("cleanup", "--env", "dev", "--yes"))
    assert total >= 10, faults.calls
    for n in range(1, total + 1):
        names = [execution_resources(environment, f"c{n}-{i}", job=False) for i in (1, 2)]
        interrupted_then_rerun(faults, cli, n, "cleanup", "--env", "dev", "--yes")
        for each in names:
            assert_nothing_billing(each, keep)


# --- endpoints delete ----------------------------------------------------------------------------------


def test_endpoints_delete_every_interrupted_run_is_finished_by_a_rerun(
    environment: Environment, faults: Faults, cli: Run
) -> None:
    keep = bystanders(environment)
    first = execution_resources(environment, "e-count", job=False)
    total = counted(faults, lambda: cli("endpoints", "delete", first.endpoint_name, "--env", "dev", "--yes"))
    assert total >= 8, faults.calls
    for n in range(1, total + 1):
        names = execution_resources(environment, f"e{n}", job=False)
        # Reading the config for the cost line may fail without harm (the table shows less): then it ran on.
        delete = ("endpoints", "delete", names.endpoint_name, "--env", "dev", "--yes")
        interrupted_then_rerun(faults, cli, n, *delete, may_run_on=True)
        assert_nothing_billing(names, keep)


def test_endpoints_delete_of_a_gone_endpoint_deletes_what_it_left(
    environment: Environment, faults: Faults, cli: Run
) -> None:
    keep = bystanders(environment)
    names = execution_resources(environment, "gone", job=False)
    environment.sagemaker.delete_endpoint(EndpointName=names.endpoint_name)
    code, out, err = cli("endpoints", "delete", names.endpoint_name, "--env", "dev", "--yes")
    assert (code, err) == (0, ""), err
    assert out.splitlines() == [
        f"endpoint {names.endpoint_name} is already gone; it left endpoint config "
        f"{names.endpoint_config_name}, model {names.model_name}",
        f"deleted endpoint config {names.endpoint_config_name}",
        f"deleted model {names.model_name}",
        "S3 data and model artifacts are never touched",
    ]
    assert_nothing_billing(names, keep)
    # The rerun of the finished delete says so and exits 0 (issue 44: it exited 1 though the delete was done).
    code, out, err = cli("endpoints", "delete", names.endpoint_name, "--env", "dev", "--yes")
    assert (code, err) == (0, "") and f"endpoint {names.endpoint_name}: nothing of it is left" in out


def test_endpoints_delete_leaves_another_environments_config_and_model(
    environment: Environment, faults: Faults, cli: Run
) -> None:
    """The endpoint is gone; a config and model of the same names tagged for prod are not dev's."""
    names = PlannedNames.derive("mixed", "dev")
    prod_tags = tags_for({"env": "prod", "execution_name": "mixed", "recipe_name": "tiny-lora"})
    environment.sagemaker.create_model(
        ModelName=names.model_name,
        PrimaryContainer={"Image": "example.invalid/i"},
        ExecutionRoleArn=ROLE,
        Tags=prod_tags,
    )
    code, out, err = cli("endpoints", "delete", names.endpoint_name, "--env", "dev", "--yes")
    assert (
        (code, err) == (0, "")
        and "nothing of it is left" in out
        and "of environment dev" in " ".join(out.split())
    )
    assert names.model_name in existing()


# --- 2. an endpoint not deletable yet is waited for, within a bound ---------------------------------


class FakeClock:
    """The commands' wait on a fake clock: each sleep moves time on; at `ready_after` s the endpoint is
    InService (or never, with None)."""

    def __init__(self, endpoint: str, ready_after: float | None) -> None:
        self.now = 0.0
        self.endpoint, self.ready_after = endpoint, ready_after

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        assert seconds > 0
        self.now += seconds
        if self.ready_after is not None and self.now >= self.ready_after:
            sagemaker_backend().endpoints[self.endpoint].endpoint_status = "InService"


@pytest.mark.parametrize("status", sorted(NOT_DELETABLE_YET))
def test_cleanup_waits_for_an_endpoint_still_creating_then_deletes_it(
    environment: Environment, faults: Faults, cli: Run, monkeypatch: pytest.MonkeyPatch, status: str
) -> None:
    keep = bystanders(environment)
    names = execution_resources(environment, "busy", job=False, status=status)
    fake = FakeClock(names.endpoint_name, ready_after=40)
    monkeypatch.setattr(cleanup_cli, "_sleep", fake.sleep)
    monkeypatch.setattr(cleanup_cli, "_clock", fake.clock)
    code, out, err = cli("cleanup", "--env", "dev", "--yes")
    assert (code, err) == (0, ""), err
    assert (
        f"endpoint {names.endpoint_name} is {status}: SageMaker deletes no endpoint until that is done; "
        "waiting up to 15 min (checking every 15 s)"
    ) in out
    assert f"endpoint {names.endpoint_name} still {status} after 15 s" in out
    assert f"deleted endpoint {names.endpoint_name}" in out
    assert_nothing_billing(names, keep)


def test_a_wait_past_its_bound_says_to_run_the_command_again(
    environment: Environment, faults: Faults, cli: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    names = execution_resources(environment, "stuck", job=False, status="SystemUpdating")
    fake = FakeClock(names.endpoint_name, ready_after=None)
    monkeypatch.setattr(cleanup_cli, "_sleep", fake.sleep)
    monkeypatch.setattr(cleanup_cli, "_clock", fake.clock)
    code, _, err = cli(
        "endpoints", "delete", names.endpoint_name, "--env", "dev", "--yes", "--wait-timeout=30m"
    )
    assert code == 1
    assert err == (
        f"error: endpoint {names.endpoint_name} is still SystemUpdating after 30 min: SageMaker refuses to "
        "delete it until then; its endpoint config and model were left for it. Run the same command again "
        "(or pass a longer --wait-timeout)\n"
    )
    assert fake.now == 30 * 60
    assert {names.endpoint_name, names.endpoint_config_name, names.model_name} <= existing()
    # once SageMaker is done, the same command finishes
    sagemaker_backend().endpoints[names.endpoint_name].endpoint_status = "InService"
    code, _, err = cli("endpoints", "delete", names.endpoint_name, "--env", "dev", "--yes")
    assert (code, err) == (0, ""), err
    assert_nothing_billing(names, set())


@pytest.mark.parametrize("value", ["", "0m", "15", "soon"])
def test_a_bad_wait_timeout_is_one_clear_error(environment: Environment, cli: Run, value: str) -> None:
    names = execution_resources(environment, "bad-wait", job=False)
    code, _, err = cli("cleanup", "--env", "dev", "--yes", f"--wait-timeout={value}")
    assert code == 2 and err.startswith(f"error: --wait-timeout {value!r} is not a duration"), err
    assert names.endpoint_name in existing()


# --- the Cleanup Lambda's teardown ---------------------------------------------------------------------


@pytest.fixture
def teardown(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[2] / "lambda" / "pipeline"))
    from pipeline_lambdas import teardown as module

    return module


def test_teardown_every_interrupted_run_is_finished_by_a_rerun(
    environment: Environment, teardown: Any
) -> None:
    keep = bystanders(environment)
    faults = Faults()
    sagemaker = AwsLikeSageMaker(faults.attach(environment.sagemaker), faults)
    try:
        first = execution_resources(environment, "t-count")
        faults.arm(None)
        teardown.cleanup(sagemaker, first)
        total = len(faults.calls)
        assert total >= 8, faults.calls
        for n in range(1, total + 1):
            names = execution_resources(environment, f"t{n}")
            faults.arm(n)
            with pytest.raises(teardown.CleanupIncomplete, match="ThrottlingException"):
                teardown.cleanup(sagemaker, names)
            faults.arm(None)
            result = teardown.cleanup(sagemaker, names)
            assert result["skipped"] == [], result
            assert_nothing_billing(names, keep)
    finally:
        environment.sagemaker.meta.events.unregister("before-call.*.*", unique_id=f"faults-{id(faults)}")


def test_teardown_reports_an_endpoint_not_deletable_yet_and_the_command_finishes_it(
    environment: Environment, teardown: Any, faults: Faults, cli: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    names = execution_resources(environment, "creating", status="Creating")
    result = teardown.cleanup(AwsLikeSageMaker(environment.sagemaker, Faults()), names)
    assert result["training_job_stopped"] is True
    assert result["deleted"] == []
    assert result["skipped"] == [
        f"endpoint {names.endpoint_name}: not deletable yet (Creating); run `hfpipe cleanup --env dev`, "
        "which waits until SageMaker allows it",
        f"endpoint_config {names.endpoint_config_name}: in use while endpoint {names.endpoint_name} is "
        "Creating; `hfpipe cleanup --env dev` deletes it",
        f"model {names.model_name}: in use while endpoint {names.endpoint_name} is Creating; "
        "`hfpipe cleanup --env dev` deletes it",
    ]
    assert {names.endpoint_name, names.endpoint_config_name, names.model_name} <= existing()
    fake = FakeClock(names.endpoint_name, ready_after=300)
    monkeypatch.setattr(cleanup_cli, "_sleep", fake.sleep)
    monkeypatch.setattr(cleanup_cli, "_clock", fake.clock)
    code, out, err = cli("cleanup", "--env", "dev", "--yes")
    assert (code, err) == (0, ""), err
    assert "deleted 3 resources" in out
    assert_nothing_billing(names, set())


# --- 4. a user's decision to keep the endpoint survives the abnormal-end clean-up ----------------------


def aborted(name: str, state_machine_arn: str) -> dict[str, Any]:
    return {
        "detail-type": "Step Functions Execution Status Change",
        "source": "aws.states",
        "detail": {
            "name": name,
            "status": "ABORTED",
            "input": json.dumps({"recipe_name": "tiny-lora"}),
            "stateMachineArn": state_machine_arn,
        },
    }


def test_stop_keep_endpoint_survives_the_abnormal_end_cleanup(
    slow: Environment, faults: Faults, cli: Run, teardown: Any
) -> None:
    from pipeline_lambdas import execution_end

    names = execution_resources(slow, "keeper")
    running_execution(slow, "keeper")
    code, out, err = cli("stop", "keeper", "--env", "dev", "--keep-endpoint", "--yes")
    assert (code, err) == (0, ""), err
    assert (
        f"kept endpoint {names.endpoint_name} (tagged hfpipe:keep=true: clean-up leaves it; "
        f"`hfpipe endpoints delete {names.endpoint_name} --env dev` deletes it)"
    ) in out
    assert sagemaker_backend().training_jobs[names.training_job_name].training_job_status == "Stopping"
    # The stop's ABORTED event reaches the Cleanup Lambda through the abnormal-end rule.
    report = execution_end.on_execution_end(
        aborted("keeper", slow.state_machine_arn),
        AwsLikeSageMaker(slow.sagemaker, Faults()),
        None,
        None,
        "dev",
        slow.state_machine_arn,
    )
    assert report["endpoint_deleted"] is False
    assert report["cleanup"]["deleted"] == []
    assert report["cleanup"]["skipped"][0] == (
        f"endpoint {names.endpoint_name}: kept by the user (hfpipe:keep); "
        f"`hfpipe endpoints delete {names.endpoint_name} --env dev` deletes it"
    )
    assert {names.endpoint_name, names.endpoint_config_name, names.model_name} <= existing()
    # Nor do `hfpipe cleanup` and a later `hfpipe stop` delete it ...
    assert cli("cleanup", "--env", "dev", "--yes")[1] == "nothing to clean up in environment 'dev'\n"
    assert cli("stop", "keeper", "--env", "dev", "--yes")[0] == 0
    assert {names.endpoint_name, names.endpoint_config_name, names.model_name} <= existing()
    # ... only the command that names it.
    code, out, err = cli("endpoints", "delete", names.endpoint_name, "--env", "dev", "--yes")
    assert (code, err) == (0, ""), err
    assert_nothing_billing(names, set())


def test_keep_tag_is_put_only_on_this_environments_resources(
    slow: Environment, faults: Faults, cli: Run
) -> None:
    """`--keep-endpoint` tags nothing of another environment that has the same derived names' owner."""
    names = execution_resources(slow, "k2")
    slow.sagemaker.add_tags(
        ResourceArn=sagemaker_backend().endpoints[names.endpoint_name].arn,
        Tags=[{"Key": contract.TAG_ENV, "Value": "prod"}],
    )
    running_execution(slow, "k2")
    code, out, err = cli("stop", "k2", "--env", "dev", "--keep-endpoint", "--yes")
    assert (code, err) == (0, ""), err
    tags = {
        t["Key"]: t["Value"]
        for t in slow.sagemaker.list_tags(ResourceArn=sagemaker_backend().endpoints[names.endpoint_name].arn)[
            "Tags"
        ]
    }
    assert contract.TAG_KEEP not in tags
    assert f"kept endpoint config {names.endpoint_config_name}" in out
