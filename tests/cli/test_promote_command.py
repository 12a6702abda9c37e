"""`hfpipe promote` against the target's real Promote state machine on moto (tests/promote_moto.py): the new
version printed, a second promotion answered with the same version, refusals as one-line errors, an
environment without promote_from refused before anything starts; `hfpipe models` shows where a promoted
version came from."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
from accounts import ACCOUNT
from app_synth import ARTIFACTS_BUCKET, DATA_BUCKET, synthesize_environments
from cli_run import run
from faults import Faults, on_the_command, one_error_line
from promote_moto import SOURCE_REGION, TARGET_REGION, promote_arn, register_source_version, target_engine

from hfpipe import contract
from hfpipe.cli.promotion.promote import execution_name

pytestmark = pytest.mark.slow
ENVIRONMENTS = {"dev": {"region": SOURCE_REGION}, "prod": {"region": TARGET_REGION, "promote_from": "dev"}}


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    app = synthesize_environments(tmp_path_factory.mktemp("promote-cli"), ENVIRONMENTS, nag=False)
    with target_engine(app.pipeline("prod")) as eng:
        yield eng


@pytest.fixture
def deployed(engine: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> Any:
    """prod's SSM parameters, as its stacks write them (with the Promote state machine's), and dev's without."""
    for var in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    for env, region in (("prod", TARGET_REGION), ("dev", SOURCE_REGION)):
        values = {
            contract.SSM_DATA_BUCKET: DATA_BUCKET,
            contract.SSM_ARTIFACTS_BUCKET: ARTIFACTS_BUCKET,
            contract.SSM_EXECUTION_ROLE_ARN: f"arn:aws:iam::{ACCOUNT}:role/x",
            contract.SSM_SOURCEDIR_URI: f"s3://{ARTIFACTS_BUCKET}/code/sourcedir.tar.gz",
            contract.SSM_STATE_MACHINE_ARN: engine.state_machine_arn,
            contract.SSM_NOTIFICATION_TOPIC_ARN: f"arn:aws:sns:us-east-1:{ACCOUNT}:t",
            contract.SSM_IMAGE_CATALOG: "{}",
        }
        if env == "prod":
            values[contract.SSM_PROMOTE_STATE_MACHINE_ARN] = promote_arn(engine)
        ssm = engine.client("ssm") if region == TARGET_REGION else _client("ssm", region)
        for key, value in values.items():
            ssm.put_parameter(
                Name=contract.ssm_parameter_name(env, key), Value=value, Type="String", Overwrite=True
            )
    return engine


def _client(service: str, region: str) -> Any:
    import boto3

    return boto3.client(service, region_name=region)


def promote(capsys: pytest.CaptureFixture[str], version: str, *extra: str) -> tuple[int, str, str]:
    interval = ("--interval", "0.01") if "--watch" in extra else ()  # an option of --watch
    return run(capsys, "promote", version, "--env", "prod", "--region", TARGET_REGION, *interval, *extra)


def test_promote_prints_the_new_version_and_models_shows_its_source(deployed, capsys):
    source_arn = register_source_version(recipe="tiny-lora")
    code, out, err = promote(capsys, "tiny-lora/1", "--watch")
    assert (code, err) == (0, ""), err
    assert out.splitlines()[0] == (
        "tiny-lora/1 (dev) -> tiny-lora/1 (prod), PendingManualApproval; approve with hfpipe models approve "
        "tiny-lora/1 --env prod"
    )
    target = f"arn:aws:sagemaker:{TARGET_REGION}:{ACCOUNT}:model-package/hfpipe-prod-tiny-lora/1"
    assert out.splitlines()[1].strip() == target
    # A second promotion of the same version: the version the first one made.
    code, out, _ = promote(capsys, source_arn, "--watch", "--json")
    record = json.loads(out)
    assert code == 0 and record["created"] is False and record["target"]["model_package_arn"] == target
    # This recipe's versions: the module's other tests promote other recipes into the same account, in any order.
    code, out, err = run(
        capsys, "models", "--env", "prod", "--region", TARGET_REGION, "--json", "--recipe", "tiny-lora"
    )
    assert (code, err) == (0, "")
    (version,) = json.loads(out)
    assert (version["ref"], version["promoted_from"], version["promoted_from_env"]) == (
        "tiny-lora/1",
        source_arn,
        "dev",
    )
    assert version["metrics"] == {"eval_loss": 1.5, "train_loss": 1.25}
    code, out, _ = run(capsys, "models", "--env", "prod", "--region", TARGET_REGION)
    assert code == 0 and "promoted from" in out and "tiny-lora/1 (dev)" in out


def test_without_watch_it_starts_the_execution_and_says_where_to_look(deployed, capsys):
    register_source_version(recipe="tiny-mnli")
    code, out, err = promote(capsys, "tiny-mnli/1")
    assert (code, err) == (0, ""), err
    name = re.search(r"execution (promote-tiny-mnli-1-\d{8}-\d{6}-[0-9a-f]{6})", out)
    assert name, out
    assert "states/home?region=us-east-1" in out and "add --watch" in out
    arn = f"{promote_arn(deployed).replace(':stateMachine:', ':execution:')}:{name.group(1)}"
    assert deployed.wait(arn).status == "SUCCEEDED"


def test_a_refused_version_is_a_one_line_error(deployed, capsys):
    register_source_version(recipe="tiny-qa", approval="PendingManualApproval")
    code, out, err = promote(capsys, "tiny-qa/1", "--watch")
    assert code == 1 and out == ""
    assert err.startswith("error: promotion promote-tiny-qa-1-") and err.count("\n") == 1
    assert (
        "FAILED (PromotionRefused): input.version" in err
        and "ModelApprovalStatus is 'PendingManualApproval'" in err
    )


def test_an_environment_without_promote_from_or_a_malformed_version_is_refused_before_starting(
    deployed, capsys
):
    sfn = deployed.client("stepfunctions")
    before = sfn.list_executions(stateMachineArn=promote_arn(deployed))["executions"]
    code, out, err = run(capsys, "promote", "tiny-lora/1", "--env", "dev", "--region", SOURCE_REGION)
    assert code == 1 and out == ""
    assert err == (
        "error: --env 'dev' promotes from no environment: SSM parameter /hfpipe/dev/promote-state-machine-arn "
        'is missing in eu-west-1; accepted: an environment with "promote_from" in cdk.json, deployed with '
        "`cdk deploy -c env=dev --all`\n"
    )
    code, _, err = promote(capsys, "tiny lora 1")  # argparse's usage error, before any AWS call
    assert code == 2 and "argument VERSION: 'tiny lora 1' is not accepted; accepted: RECIPE/N" in err
    assert sfn.list_executions(stateMachineArn=promote_arn(deployed))["executions"] == before


def test_execution_names_are_valid_for_refs_and_arns():
    from datetime import UTC, datetime

    now = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)
    assert execution_name("tiny-lora/3", now, "a1b2c3") == "promote-tiny-lora-3-20250102-030405-a1b2c3"
    arn = f"arn:aws:sagemaker:eu-west-1:{ACCOUNT}:model-package/hfpipe-dev-tiny-lora/12"
    assert execution_name(arn, now, "a1b2c3") == "promote-hfpipe-dev-tiny-lora-12-20250102-030405-a1b2c3"
    assert len(execution_name("x" * 200 + "/1", now)) <= 80  # Step Functions' limit
    assert execution_name("tiny-lora/3", now) != execution_name("tiny-lora/3", now)  # two starts in a second


@pytest.mark.parametrize(
    ("operation", "code", "state"),
    [
        ("GetParametersByPath", "ThrottlingException", "no promotion started; run the same command again"),
        ("StartExecution", "InternalFailure", "run `hfpipe promote tiny-fault-"),
        ("DescribeExecution", "ThrottlingException", None),  # looked at again: the command waits on
        ("DescribeExecution", "AccessDeniedException", "still runs without this command; `hfpipe promote"),
    ],
)
def test_a_fault_at_each_call_of_promote_is_one_line_with_the_state_and_a_rerun_promotes(
    deployed, capsys, monkeypatch, operation, code, state
):
    recipe = f"tiny-fault-{operation.lower()}-{code.lower()}"
    register_source_version(recipe=recipe, execution=f"reg-{recipe}")
    faults = on_the_command(monkeypatch, Faults(when=lambda service, op, params: op == operation))
    faults.fail_at, faults.code = 0, code
    exit_code, out, err = promote(capsys, f"{recipe}/1", "--watch")
    assert faults.failed is not None, faults.operations()
    if state is None:
        assert exit_code == 0 and f"{recipe}/1 (dev) -> {recipe}/1 (prod)" in out, (out, err)
        (warning,) = err.splitlines()
        assert warning.startswith("warning: ") and code in warning, err
        return
    line = one_error_line(err)
    assert exit_code == 1 and code in line and state in line, line
    sfn = deployed.client("stepfunctions")
    for execution in sfn.list_executions(stateMachineArn=promote_arn(deployed))["executions"]:
        deployed.wait(execution["executionArn"])  # a promotion that started goes on without the command
    faults.fail_at = None
    exit_code, out, err = promote(capsys, f"{recipe}/1", "--watch")
    assert (exit_code, err) == (0, ""), err
    assert out.startswith(f"{recipe}/1 (dev) -> {recipe}/1 (prod)"), out


def test_a_blank_override_is_refused_before_starting(deployed, capsys):
    sfn = deployed.client("stepfunctions")
    before = sfn.list_executions(stateMachineArn=promote_arn(deployed))["executions"]
    code, out, err = promote(capsys, "tiny-qa/1", "--override-evaluation", "  ")
    assert (code, out) == (2, "")  # a usage error, as deploy's and approve's (evaluation_gate.check_override)
    assert (
        "error: --override-evaluation: an empty reason is not accepted; accepted at promote: at most 256 "
        "characters of letters, digits, spaces and _ . : / = + - @" in (" ".join(err.split()))
    ), err
    assert sfn.list_executions(stateMachineArn=promote_arn(deployed))["executions"] == before


def test_promote_prints_the_gate_decision_with_its_figures(deployed, capsys):
    """Issue 47: the Promote function's gate passed the version; the command says so with the figures of the
    evaluation the promoted version carries, as approve and deploy print theirs."""
    from evaluations import CHAMPION_ARN, wrapper

    register_source_version(recipe="tiny-gate", execution="reg-tiny-gate", evaluation=wrapper("better"))
    code, out, err = promote(capsys, "tiny-gate/1", "--watch")
    assert (code, err) == (0, ""), err
    assert out.splitlines()[2] == (
        f"  evaluation gate: evaluation better against {CHAMPION_ARN}: f1 difference +1 (+0.5 to +3) at 95% "
        "confidence, margin 0; challenger f1 58.1 [52, 64] on 40, champion 61.2 [55, 67.1] on 40"
    )


def test_a_version_scored_alone_is_promoted_saying_what_serves_in_the_target(deployed, capsys):
    """Finding 5: not "nothing serves on environment prod now" while prod's endpoint serves the recipe's /1; what
    serves there, read from it, and what prod's deploy will do with the version (its evaluation_gate's)."""
    from evaluations import wrapper

    alone = wrapper("no_champion", champion=None, target={})
    register_source_version(recipe="tiny-alone", execution="reg-tiny-alone-1", evaluation=alone)
    assert promote(capsys, "tiny-alone/1", "--watch")[0] == 0
    served = f"arn:aws:sagemaker:{TARGET_REGION}:{ACCOUNT}:model-package/hfpipe-prod-tiny-alone/1"
    sm = deployed.client("sagemaker")
    role = f"arn:aws:iam::{ACCOUNT}:role/x"
    sm.create_model(ModelName="alone-1", PrimaryContainer={"ModelPackageName": served}, ExecutionRoleArn=role)
    variant = {"VariantName": "AllTraffic", "ModelName": "alone-1", "InstanceType": "ml.m5.large"}
    sm.create_endpoint_config(
        EndpointConfigName="alone-1", ProductionVariants=[variant | {"InitialInstanceCount": 1}]
    )
    sm.create_endpoint(EndpointName="hfpipe-prod-classifier", EndpointConfigName="alone-1")
    try:
        register_source_version(recipe="tiny-alone", execution="reg-tiny-alone-2", evaluation=alone)
        code, out, err = promote(capsys, "tiny-alone/2", "--watch")
    finally:
        sm.delete_endpoint(EndpointName="hfpipe-prod-classifier")
    assert (code, err) == (0, ""), err
    line = " ".join(out.split())
    assert (
        "evaluation gate: evaluation no_champion: scored alone (its run named no --champion), not against what "
        "serves in environment prod: endpoint hfpipe-prod-classifier serves tiny-alone/1; prod's deploy"
    ) in line, line
    assert "nothing serves" not in line, line
