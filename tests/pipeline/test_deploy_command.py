"""`hfpipe deploy` against the real deploy state machine on the local engine: it refuses another environment's
version and a malformed endpoint name before calling anything, starts the deploy, follows the endpoint to the
end and says what serves (read from the endpoint); a rerun says nothing changed; a refused deploy exits 1 with
the state machine's error and creates nothing; after a failed way back the last line names what serves."""

from __future__ import annotations

import re
from typing import Any

import pytest
from accounts import ACCOUNT, ACCOUNT_B
from deploy_helpers import ENDPOINT, NAME, named, register, wiped
from deploy_standin import Update, stand_in_updates
from faults import Faults, on_the_command, one_error_line

from hfpipe import contract
from hfpipe.cli import main

pytestmark = pytest.mark.slow


@pytest.fixture
def clean(fresh: Any) -> Any:
    yield from wiped(fresh)


@pytest.fixture
def deployed_env(clean: Any) -> Any:
    """The environment's SSM parameters as `cdk deploy` leaves them (only those the command reads)."""
    ssm = clean.client("ssm")
    for key, arn in (
        (contract.SSM_STATE_MACHINE_ARN, clean.state_machine_arn),
        (
            contract.SSM_DEPLOY_STATE_MACHINE_ARN,
            clean.state_machine_arns[contract.deploy_state_machine_name("dev")],
        ),
    ):
        ssm.put_parameter(
            Name=contract.ssm_parameter_name("dev", key), Value=arn, Type="String", Overwrite=True
        )
    return clean


def run(capsys: pytest.CaptureFixture[str], region: str, *argv: str) -> tuple[int, str, str]:
    code = main([*argv, "--region", region, "--interval", "0.01"])
    out, err = capsys.readouterr()
    return code, out, err


def ref(arn: str) -> str:
    return "tiny-qa/" + arn.rsplit("/", 1)[-1]


def test_deploy_creates_then_says_nothing_changed(deployed_env: Any, capsys: Any) -> None:
    version = ref(register(deployed_env))
    code, out, err = run(
        capsys, deployed_env.region, "deploy", "--env", "dev", "--model", version, "--endpoint", NAME
    )
    assert (code, err) == (0, ""), out
    assert f"deploying {version} to {NAME} ({ENDPOINT}) in dev" in out
    assert "endpoint now: absent" in out
    assert f"deployed: {ENDPOINT} serves InService" in out and f"serving {version})" in out
    assert named(deployed_env)["endpoints"] == [ENDPOINT]
    code, out, err = run(
        capsys, deployed_env.region, "deploy", "--env", "dev", "--model", version, "--endpoint", NAME
    )
    assert (code, err) == (0, "")
    assert "it served this version already" in out
    # --ttl sets the expiry of an endpoint the deploy creates: on an update it is refused, not ignored.
    executions = deployed_env.client("stepfunctions").list_executions(
        stateMachineArn=deployed_env.state_machine_arns[contract.deploy_state_machine_name("dev")]
    )["executions"]
    code, out, err = run(
        capsys,
        deployed_env.region,
        "deploy",
        "--env",
        "dev",
        "--model",
        version,
        "--endpoint",
        NAME,
        "--ttl",
        "none",
    )
    assert code == 1 and err.startswith(
        f"error: --ttl: endpoint {ENDPOINT} exists (InService): an update keeps"
    )
    assert "nothing started" in err
    assert (
        deployed_env.client("stepfunctions").list_executions(
            stateMachineArn=deployed_env.state_machine_arns[contract.deploy_state_machine_name("dev")]
        )["executions"]
        == executions
    )


def test_a_refused_deploy_exits_1_with_the_reason(deployed_env: Any, capsys: Any) -> None:
    version = ref(register(deployed_env, status="PendingManualApproval"))
    code, out, err = run(
        capsys, deployed_env.region, "deploy", "--env", "dev", "--model", version, "--endpoint", NAME
    )
    assert code == 1
    assert "error: deploy failed: VersionNotApproved" in err and "PendingManualApproval" in err
    assert f"endpoint {ENDPOINT} now: absent" in out
    assert named(deployed_env)["endpoints"] == []


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--model", "tiny-qa/1", "--endpoint", "Not_A_Name"],
            "argument --endpoint: 'Not_A_Name' is not an endpoint name",
        ),
        (
            [
                "--model",
                f"arn:aws:sagemaker:eu-west-1:{ACCOUNT}:model-package/hfpipe-prod-tiny-qa/1",
                "--endpoint",
                NAME,
            ],
            "--model: version",
        ),
        # Malformed in form: argparse's usage error (exit 2), before credentials or any AWS call.
        (["--model", "tiny-qa", "--endpoint", NAME], "argument --model: 'tiny-qa' is not accepted"),
        # dev's group, but in another region or account than dev's: said so, not "not found".
        (
            [
                "--model",
                f"arn:aws:sagemaker:us-west-2:{ACCOUNT}:model-package/hfpipe-dev-tiny-qa/1",
                "--endpoint",
                NAME,
            ],
            "a version in region us-west-2, account",
        ),
        (
            [
                "--model",
                f"arn:aws:sagemaker:eu-west-1:{ACCOUNT_B}:model-package/hfpipe-dev-tiny-qa/1",
                "--endpoint",
                NAME,
            ],
            f"account {ACCOUNT_B}; environment 'dev' is in region eu-west-1, account {ACCOUNT}",
        ),
    ],
)
def test_bad_arguments_are_refused_before_anything_runs(
    deployed_env: Any, capsys: Any, argv: list[str], message: str
) -> None:
    before = deployed_env.client("stepfunctions").list_executions(
        stateMachineArn=deployed_env.state_machine_arns[contract.deploy_state_machine_name("dev")]
    )["executions"]
    code, _, err = run(capsys, deployed_env.region, "deploy", "--env", "dev", *argv)
    assert code == (2 if message.startswith("argument") else 1) and message in err, err
    after = deployed_env.client("stepfunctions").list_executions(
        stateMachineArn=deployed_env.state_machine_arns[contract.deploy_state_machine_name("dev")]
    )["executions"]
    assert after == before


@pytest.mark.parametrize(
    ("region", "account"), [("us-west-2", ACCOUNT), ("eu-west-1", ACCOUNT_B)], ids=["region", "account"]
)
def test_an_adapters_version_of_another_region_or_account_says_so(
    deployed_env: Any, capsys: Any, region: str, account: str
) -> None:
    """deploy --adapter reads where the environment is from its adapter state machine's ARN, as deploy does
    from its deploy state machine's: a version ARN elsewhere is said so, not "not found", and nothing starts."""
    machine = deployed_env.state_machine_arns[contract.adapter_state_machine_name("dev")]
    deployed_env.client("ssm").put_parameter(
        Name=contract.ssm_parameter_name("dev", contract.SSM_ADAPTER_STATE_MACHINE_ARN),
        Value=machine,
        Type="String",
        Overwrite=True,
    )
    before = deployed_env.client("stepfunctions").list_executions(stateMachineArn=machine)["executions"]
    version = f"arn:aws:sagemaker:{region}:{account}:model-package/hfpipe-dev-tiny-adapter/1"
    code, _, err = run(
        capsys, deployed_env.region, "deploy", "--env", "dev", "--adapter", "a", "--model", version
    )
    assert (
        code == 1 and f"--model: version {version!r}: a version in region {region}, account {account}" in err
    )
    assert "environment 'dev' is in region eu-west-1" in err, err
    after = deployed_env.client("stepfunctions").list_executions(stateMachineArn=machine)["executions"]
    assert after == before
    deployed_env.client("ssm").delete_parameter(
        Name=contract.ssm_parameter_name("dev", contract.SSM_ADAPTER_STATE_MACHINE_ARN)
    )


def test_an_adapter_deploy_of_a_merged_version_is_refused_before_the_gate_and_the_start(
    deployed_env: Any, capsys: Any
) -> None:
    """Newcomer finding 12: `deploy --adapter support --model tiny-mnli/2` (a merged model's version) printed
    the gate's line and started the adapter state machine, refused only there (AdapterRefused)."""
    machine = deployed_env.state_machine_arns[contract.adapter_state_machine_name("dev")]
    ssm = deployed_env.client("ssm")
    name = contract.ssm_parameter_name("dev", contract.SSM_ADAPTER_STATE_MACHINE_ARN)
    ssm.put_parameter(Name=name, Value=machine, Type="String", Overwrite=True)
    version = ref(register(deployed_env))  # tiny-qa's: a merged model, no adapter_base_model
    before = deployed_env.client("stepfunctions").list_executions(stateMachineArn=machine)["executions"]
    code, out, err = run(
        capsys, deployed_env.region, "deploy", "--env", "dev", "--adapter", "a", "--model", version
    )
    ssm.delete_parameter(Name=name)
    assert code == 1 and "--model: the version given for adapter 'a' is not a LoRA adapter" in err, err
    assert "nothing started" in err and "evaluation gate" not in out, out
    after = deployed_env.client("stepfunctions").list_executions(stateMachineArn=machine)["executions"]
    assert after == before


def test_execution_names_are_unique_per_start_and_fit_step_functions() -> None:
    from datetime import UTC, datetime

    from hfpipe.cli.deploy.deploy import execution_name

    now = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)
    name = execution_name("classifier", "tiny-mnli/3", now)
    assert re.fullmatch(r"deploy-classifier-tiny-mnli-3-20250102-030405-[0-9a-f]{6}", name), name
    assert execution_name("classifier", "tiny-mnli/3", now) != name  # two deploys in one second
    assert len(execution_name("e" * 40, "r" * 200 + "/12", now)) <= 80


def test_after_a_failed_way_back_the_last_line_names_what_serves(deployed_env: Any, capsys: Any) -> None:
    """The smoke test fails and the update back ends on the new config: the command exits 1 with
    WayBackFailed, and its last line names the version the endpoint serves (read from it), not the previous
    one its tag still names."""
    first = ref(register(deployed_env))
    code, out, err = run(
        capsys, deployed_env.region, "deploy", "--env", "dev", "--model", first, "--endpoint", NAME
    )
    assert (code, err) == (0, ""), out
    second = ref(register(deployed_env))
    deployed_env.endpoint = lambda name, body: [{"generated_text": "not an answer"}]
    with stand_in_updates(deployed_env, Update(polls=1), Update(polls=1, outcome="rolled back")):
        code, out, err = run(
            capsys, deployed_env.region, "deploy", "--env", "dev", "--model", second, "--endpoint", NAME
        )
    assert code == 1 and "error: deploy failed: WayBackFailed" in err, err
    last = " ".join(out.split()).rsplit(f"endpoint {ENDPOINT} now: ", 1)[1]
    assert last.startswith("InService (config hfpipe-dev-summaries-v") and f"serving {second})" in last, last


def test_following_a_deploy_says_it_waits_for_rollback_alarms_in_alarm() -> None:
    """The deploy's WaitForAlarms loop is named with its alarms while it is what the execution does (events
    newest first by id: moto answers oldest first whatever reverseOrder says); past the loop, nothing."""
    import json

    from deploy_helpers import a_plan, an_alarm_wait

    from hfpipe.cli.deploy.deploy import _alarm_wait

    wait = an_alarm_wait(alarms=["hfpipe-prod-classifier-4xx-errors"], polls=1, waited_seconds=0)
    plan = a_plan(action="wait", alarm_wait=wait).to_json()

    def entered(i: int, name: str, state: Any = None) -> dict[str, Any]:
        details = {"name": name, "input": json.dumps(state or {})}
        return {"id": i, "type": "TaskStateEntered", "stateEnteredEventDetails": details}

    class History:
        def __init__(self, events: list[dict[str, Any]]) -> None:
            self.events = events

        def get_execution_history(self, **_: Any) -> dict[str, Any]:
            return {"events": self.events}

    loop = [{"id": 1, "type": "ExecutionStarted"}, entered(2, "Prepare"), entered(3, "Action?")]
    loop += [entered(4, "WaitForAlarms", {"deploy": plan}), entered(5, "PrepareAgain")]
    assert _alarm_wait(History(loop), "arn") == wait
    assert _alarm_wait(History([*loop, entered(6, "Action?"), entered(7, "CreateModel")]), "arn") is None
    assert _alarm_wait(History(loop[:3]), "arn") is None
    # A state input that is not this release's deploy plan is said, naming the field, not half-read.
    from hfpipe.cli.aws import HfpipeError

    odd = [*loop[:3], entered(4, "WaitForAlarms", {"deploy": {"alarm_wait": plan["alarm_wait"]}})]
    with pytest.raises(
        HfpipeError, match=r"a deploy plan this hfpipe cannot read: deploy\.schema_version: missing"
    ):
        _alarm_wait(History(odd), "arn")


@pytest.mark.parametrize(
    ("operation", "occurrence", "code", "state"),
    [
        ("GetParametersByPath", 0, "ThrottlingException", "no deploy started; run the same command again"),
        ("DescribeEndpoint", 0, "InternalFailure", "no deploy started; run the same command again"),
        ("StartExecution", 0, "ThrottlingException", "run the same command again"),
        # In the follow loop: a transient fault is looked at again, the command follows to the end...
        ("DescribeExecution", 0, "ThrottlingException", None),
        # (DescribeEndpoint 0 is the evaluation gate's read of what serves, 1 the command's own before it
        # starts: both before anything starts; 2 is the follow loop's first look.)
        ("DescribeEndpoint", 2, "InternalFailure", None),
        ("DescribeModel", 0, "ThrottlingException", None),
        # ... any other ends it with what still runs and what to run next.
        ("DescribeExecution", 0, "AccessDeniedException", "still runs without this command"),
        ("DescribeModel", 0, "AccessDeniedException", "still runs without this command"),
    ],
)
def test_a_fault_at_each_call_of_deploy_is_one_line_with_the_state_and_a_rerun_deploys(
    deployed_env: Any,
    capsys: Any,
    monkeypatch: pytest.MonkeyPatch,
    operation: str,
    occurrence: int,
    code: str,
    state: str | None,
) -> None:
    version = ref(register(deployed_env))
    argv = ("deploy", "--env", "dev", "--model", version, "--endpoint", NAME)
    faults = on_the_command(monkeypatch, Faults(when=lambda service, op, params: op == operation))
    faults.fail_at, faults.code = occurrence, code
    exit_code, out, err = run(capsys, deployed_env.region, *argv)
    assert faults.failed is not None, faults.operations()
    machine = deployed_env.state_machine_arns[contract.deploy_state_machine_name("dev")]
    for execution in deployed_env.client("stepfunctions").list_executions(stateMachineArn=machine)[
        "executions"
    ]:
        deployed_env.wait(execution["executionArn"])  # the deploy goes on without the command
    if state is None:
        assert exit_code == 0 and f"deployed: {ENDPOINT} serves InService" in out, (out, err)
        (warning,) = err.splitlines()
        assert warning.startswith("warning: ") and code in warning and "looking again in" in warning, err
        return
    line = one_error_line(err)
    assert exit_code == 1 and code in line and state in line, line
    if "still runs" in state:
        assert "`hfpipe endpoints --env dev` shows what" in line and "the same command again" in line
    faults.fail_at = None
    exit_code, out, err = run(capsys, deployed_env.region, *argv)
    assert (exit_code, err) == (0, ""), (out, err)
    assert f"deployed: {ENDPOINT} serves InService" in out and f"serving {version})" in out
