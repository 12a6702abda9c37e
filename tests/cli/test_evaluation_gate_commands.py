"""The evaluation gate where the command moves traffic (hfpipe.cli.promotion.gate): `hfpipe models approve` and
`hfpipe deploy --endpoint` read the version's evaluation and what serves on the target just before the act, and
refuse a challenger evaluated worse than the champion (with its figures), a stale evaluation and, where the
environment's evaluation_gate is mandatory, none; --override-evaluation passes and is recorded. Versions,
statistics documents and the champion's endpoint are made in moto as the Register step and a deploy leave them
(documents written to the contract by hand: tests/evaluations.py)."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from cli_moto import ACCOUNT, REGION, ROLE, Environment
from cli_run import run
from evaluations import wrapper
from faults import NoHistory

from hfpipe import contract
from hfpipe.core.validate import RecipeError

GROUP = "hfpipe-dev-tiny-qa"
ENDPOINT = "hfpipe-dev-qa"  # cdk.json's `qa` named endpoint, as SageMaker names it


def arn(n: int) -> str:
    return f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:model-package/{GROUP}/{n}"


def _version(
    env: Environment,
    n: int,
    evaluation: dict[str, Any] | None,
    group: str = GROUP,
    task: str = "question-answering",
) -> None:
    key = f"model-metrics/{group}-{n}/metrics.json"
    doc = {"version": 1, "metadata": {"execution": f"run-{n}", "task": task}, "metrics": {}}
    if evaluation is not None:
        doc["evaluation"] = evaluation
    bucket = contract_bucket(env)
    env.s3.put_object(Bucket=bucket, Key=key, Body=json.dumps(doc).encode())
    env.sagemaker.create_model_package(
        ModelPackageGroupName=group,
        ModelPackageDescription=f"hfpipe execution run-{n}",
        InferenceSpecification={
            "Containers": [{"Image": "img:1", "ModelDataUrl": f"s3://{bucket}/run-{n}/model.tar.gz"}],
            "SupportedContentTypes": ["application/json"],
            "SupportedResponseMIMETypes": ["application/json"],
        },
        ModelMetrics={
            "ModelQuality": {
                "Statistics": {"ContentType": "application/json", "S3Uri": f"s3://{bucket}/{key}"}
            }
        },
        ModelApprovalStatus="PendingManualApproval",
    )


def contract_bucket(env: Environment) -> str:
    return env.ssm.get_parameter(Name=contract.ssm_parameter_name("dev", contract.SSM_ARTIFACTS_BUCKET))[
        "Parameter"
    ]["Value"]


def _serve(env: Environment, n: int) -> None:
    """Version n serves on the `qa` endpoint, as the deploy state machine leaves it (a model of the package)."""
    sm = env.sagemaker
    sm.create_model(ModelName=f"m{n}", PrimaryContainer={"ModelPackageName": arn(n)}, ExecutionRoleArn=ROLE)
    sm.create_endpoint_config(
        EndpointConfigName=f"c{n}",
        ProductionVariants=[
            {
                "VariantName": "AllTraffic",
                "ModelName": f"m{n}",
                "InstanceType": "ml.m5.large",
                "InitialInstanceCount": 1,
            }
        ],
    )
    sm.create_endpoint(EndpointName=ENDPOINT, EndpointConfigName=f"c{n}")


@pytest.fixture
def registry_world(environment: Environment) -> Environment:
    """tiny-qa/1 approved and serving on `qa`; tiny-qa/2 evaluated worse than it on `qa`'s champion;
    tiny-qa/3 not evaluated; tiny-qa/4 evaluated better."""
    environment.sagemaker.create_model_package_group(ModelPackageGroupName=GROUP)
    _version(environment, 1, None)
    environment.sagemaker.update_model_package(ModelPackageArn=arn(1), ModelApprovalStatus="Approved")
    target = {"endpoint": ENDPOINT}
    _version(environment, 2, wrapper("worse", champion=arn(1), target=target))
    _version(environment, 3, None)
    _version(environment, 4, wrapper("better", champion=arn(1), target=target, low=0.5, high=4.0, value=2.0))
    _serve(environment, 1)
    environment.ssm.put_parameter(
        Name=contract.ssm_parameter_name("dev", contract.SSM_DEPLOY_STATE_MACHINE_ARN),
        Value=f"arn:aws:states:{REGION}:{ACCOUNT}:stateMachine:hfpipe-dev-deploy",
        Type="String",
        Overwrite=True,
    )
    return environment


def _status(env: Environment, n: int) -> tuple[str, str | None]:
    desc = env.sagemaker.describe_model_package(ModelPackageName=arn(n))
    return desc["ModelApprovalStatus"], desc.get("ApprovalDescription")


FIGURES = (
    f"version tiny-qa/2 is worse than the champion {arn(1)} on validation: f1 difference -3.1 (-5 to -1.2) at "
    "95% confidence, margin 0; challenger f1 58.1 [52, 64] on 40, champion 61.2 [55, 67.1] on 40"
)


def test_approve_refuses_a_worse_challenger_with_its_figures(registry_world, capsys):
    code, _out, err = run(capsys, "models", "approve", "tiny-qa/2", "--env", "dev")
    assert code == 1 and f"refused by the evaluation gate: {FIGURES}" in " ".join(err.split()), err
    assert '--override-evaluation "REASON"' in err
    assert _status(registry_world, 2)[0] == "PendingManualApproval"


def test_approve_passes_a_better_one_and_says_why(registry_world, capsys):
    code, out, err = run(capsys, "models", "approve", "tiny-qa/4", "--env", "dev")
    assert (code, err) == (0, ""), err
    assert f"evaluation gate: evaluation better against {arn(1)}: f1 difference +2 (+0.5 to +4)" in out
    assert _status(registry_world, 4)[0] == "Approved"


def test_an_override_passes_and_is_recorded_in_the_approval_description(registry_world, capsys):
    code, _out, err = run(
        capsys, "models", "approve", "tiny-qa/2", "--env", "dev", "--override-evaluation", "labels were fixed"
    )
    assert code == 0, err
    status, description = _status(registry_world, 2)
    assert status == "Approved"
    # Newcomer finding 5 (h-nc-eval2): the note is short (refs, not ARNs; the verdict and the difference).
    assert description == (
        "evaluation gate overridden: labels were fixed (refused: tiny-qa/2 worse vs hfpipe-dev-tiny-qa/1 "
        "f1 -3.1 (-5 to -1.2))"
    ), description
    assert "-3.1" in description


def test_deploy_refuses_a_worse_challenger_before_anything_starts(registry_world, capsys):
    registry_world.sagemaker.update_model_package(ModelPackageArn=arn(2), ModelApprovalStatus="Approved")
    code, _out, err = run(
        capsys, "deploy", "--env", "dev", "--model", "tiny-qa/2", "--endpoint", "qa", "--no-wait"
    )
    assert code == 1 and f"refused by the evaluation gate: {FIGURES}" in " ".join(err.split()), err
    # Refused before StartExecution: the state machine named in SSM does not even exist here.


def _deploy_machine(environment: Environment) -> str:
    """The deploy state machine that SSM names, made in moto (one Pass state: its execution starts and ends)."""
    return environment.sfn.create_state_machine(
        name="hfpipe-dev-deploy",
        definition=json.dumps({"StartAt": "P", "States": {"P": {"Type": "Pass", "End": True}}}),
        roleArn=ROLE,
    )["stateMachineArn"]


def test_a_deploy_override_goes_to_the_execution_which_records_it(registry_world, capsys):
    """The command passes the override to the execution (whose Prepare records it when it passes the gate with
    it: tests/pipeline/test_deploy_evaluation_gate.py) and records nothing itself: the approval description is
    what approve left, and the output says the execution records it."""
    code, _, err = run(
        capsys, "models", "approve", "tiny-qa/2", "--env", "dev", "--reason", "QA sign-off ticket 12",
        "--override-evaluation", "labels were fixed",
    )  # fmt: skip
    assert code == 0, err
    approved = _status(registry_world, 2)[1]
    assert approved.startswith(
        "QA sign-off ticket 12; evaluation gate overridden: labels were fixed (refused:"
    )
    machine = _deploy_machine(registry_world)
    code, out, err = run(
        capsys, "deploy", "--env", "dev", "--model", "tiny-qa/2", "--endpoint", "qa", "--no-wait",
        "--override-evaluation", "hotfix",
    )  # fmt: skip
    assert code == 0, err
    assert "the override is recorded in the version's approval description by the execution" in " ".join(
        out.split()
    ), out
    (execution,) = registry_world.sfn.list_executions(stateMachineArn=machine)["executions"]
    described = registry_world.sfn.describe_execution(executionArn=execution["executionArn"])
    assert json.loads(described["input"])["override_evaluation"] == "hotfix"
    _wait_ended(registry_world, execution["executionArn"])
    assert _status(registry_world, 2)[1] == approved  # the Pass machine records nothing; the command neither


def test_a_deploy_with_an_override_returns_without_reading_the_execution_history(
    registry_world, capsys, monkeypatch
):
    """The record is the execution's: `hfpipe deploy --no-wait --override-evaluation` starts it and returns,
    with no wait for it to leave Prepare (an interrupted command loses nothing)."""
    from hfpipe.cli import aws

    made = aws.make_clients(region=REGION)
    made._clients["stepfunctions"] = NoHistory(made.sfn)
    monkeypatch.setattr(aws, "clients_factory", lambda profile, region: made)
    registry_world.sagemaker.update_model_package(ModelPackageArn=arn(2), ModelApprovalStatus="Approved")
    machine = _deploy_machine(registry_world)
    code, _, err = run(
        capsys, "deploy", "--env", "dev", "--model", "tiny-qa/2", "--endpoint", "qa", "--no-wait",
        "--override-evaluation", "hotfix",
    )  # fmt: skip
    assert code == 0, err
    for execution in registry_world.sfn.list_executions(stateMachineArn=machine)["executions"]:
        _wait_ended(registry_world, execution["executionArn"])


def _wait_ended(environment: Environment, execution: str) -> None:
    """moto runs an execution on a thread of its own; the test ends once it has."""
    for _ in range(100):
        if environment.sfn.describe_execution(executionArn=execution)["status"] != "RUNNING":
            return
        time.sleep(0.05)
    environment.sfn.stop_execution(executionArn=execution)


def test_an_override_is_not_recorded_when_the_deploy_never_starts(registry_world, capsys):
    registry_world.sagemaker.update_model_package(ModelPackageArn=arn(2), ModelApprovalStatus="Approved")
    code, _, err = run(
        capsys, "deploy", "--env", "dev", "--model", "tiny-qa/2", "--endpoint", "qa", "--no-wait",
        "--override-evaluation", "hotfix",
    )  # fmt: skip
    assert code == 1 and "StateMachineDoesNotExist" in err, err  # SSM names a machine moto does not hold
    assert "hotfix" not in (_status(registry_world, 2)[1] or "")


def test_another_champion_since_the_job_makes_the_evaluation_stale(registry_world, capsys):
    sm = registry_world.sagemaker
    sm.delete_endpoint(EndpointName=ENDPOINT)
    sm.create_model(ModelName="m3", PrimaryContainer={"ModelPackageName": arn(3)}, ExecutionRoleArn=ROLE)
    sm.create_endpoint_config(
        EndpointConfigName="c3",
        ProductionVariants=[
            {
                "VariantName": "AllTraffic",
                "ModelName": "m3",
                "InstanceType": "ml.m5.large",
                "InitialInstanceCount": 1,
            }
        ],
    )
    sm.create_endpoint(EndpointName=ENDPOINT, EndpointConfigName="c3")
    code, _, err = run(capsys, "models", "approve", "tiny-qa/4", "--env", "dev")
    text = " ".join(err.split())
    assert (
        code == 1 and "the evaluation of version tiny-qa/4 is stale: it was scored against " + arn(1) in text
    )
    assert f"endpoint {ENDPOINT} serves {arn(3)} now" in text


def _approve_under_a_mandatory_gate(env: Environment, capsys: Any, n: int) -> tuple[int, str]:
    """Version ``n`` back to PendingManualApproval, dev's gate made mandatory, then approved again: the
    command's exit code and its error on one line."""
    env.sagemaker.update_model_package(ModelPackageArn=arn(n), ModelApprovalStatus="PendingManualApproval")
    env.ssm.put_parameter(
        Name=contract.ssm_parameter_name("dev", contract.SSM_EVALUATION_GATE),
        Value="mandatory",
        Type="String",
    )
    code, _, err = run(capsys, "models", "approve", f"tiny-qa/{n}", "--env", "dev")
    return code, " ".join(err.split())


def test_a_mandatory_gate_refuses_a_version_with_no_evaluation(registry_world, capsys):
    assert run(capsys, "models", "approve", "tiny-qa/3", "--env", "dev")[0] == 0  # dev: advisory
    code, text = _approve_under_a_mandatory_gate(registry_world, capsys, 3)
    assert (
        code == 1 and "version tiny-qa/3 has no evaluation" in text and "evaluation_gate is mandatory" in text
    )


def test_compare_refuses_versions_of_different_tasks_in_one_line(registry_world, capsys):
    registry_world.sagemaker.create_model_package_group(ModelPackageGroupName="hfpipe-dev-tiny-mnli")
    _version(registry_world, 1, None, group="hfpipe-dev-tiny-mnli", task="text-classification")
    code, out, err = run(capsys, "models", "compare", "tiny-qa/1", "tiny-mnli/1", "--env", "dev")
    assert (code, out) == (1, "")
    assert err.strip().splitlines() == [
        "error: models compare: tiny-qa/1 is a question-answering model and tiny-mnli/1 a text-classification "
        "one; accepted: two versions of the same task (their metrics measure different things)"
    ]


def test_compare_shows_each_stored_evaluation(registry_world, capsys):
    code, out, err = run(capsys, "models", "compare", "tiny-qa/2", "tiny-qa/4", "--env", "dev", "--json")
    assert (code, err) == (0, "")
    record = json.loads(out)
    assert record["a"]["evaluation"]["document"]["verdict"] == "worse"
    assert record["b"]["evaluation"]["document"]["difference"]["low"] == 0.5
    code, out, err = run(capsys, "models", "compare", "tiny-qa/2", "tiny-qa/4", "--env", "dev")
    lines = [" ".join(line.split()) for line in out.splitlines()]
    assert any("evaluation verdict │ worse │ better" in line for line in lines), out
    assert any("f1 58.1 [52, 64] on 40" in line for line in lines), out
    assert any("-3.1 (-5 to -1.2) │ +2 (+0.5 to +4)" in line for line in lines), out
    assert any("│ evaluation score [interval] on n │" in line for line in lines), out
    # Newcomer finding 10: the champion as the commands name versions, not an ARN cut to the column's width.
    assert any("│ evaluated against │ tiny-qa/1 │ tiny-qa/1 │" in line for line in lines), out


def test_approving_a_version_scored_for_no_target_says_so(registry_world, capsys):
    _version(registry_world, 5, wrapper("no_champion", champion=None, target={}))
    code, out, err = run(capsys, "models", "approve", "tiny-qa/5", "--env", "dev")
    assert code == 0, err
    said = " ".join(out.split())
    assert "evaluation no_champion: scored alone, for no target (its run named no --champion)" in said, out
    assert "no target now" not in said


def test_start_takes_the_champion_as_an_endpoint_or_an_adapter(capsys):
    code, _, err = run(capsys, "start", "--env", "dev", "--recipe", "tiny-qa", "--champion", "qa")
    assert code == 2, err
    err = err.replace(chr(10), " ")
    assert "'qa' is not accepted; accepted: endpoint:NAME" in " ".join(err.split())


@pytest.mark.parametrize(
    ("recipe", "champion", "said"),
    [
        # Newcomer finding 2: each was accepted, the job billed and the version scored alone.
        (
            "tiny-qa",
            "endpoint:nosuch",
            "--champion endpoint:nosuch: nothing serves on endpoint hfpipe-dev-nosuch now",
        ),
        (
            "tiny-qa",
            "endpoint:hfpipe-dev-qa",
            "--champion: input.champion.endpoint: 'hfpipe-dev-qa' is a SageMaker endpoint's name (it would read "
            "hfpipe-dev-hfpipe-dev-qa); accepted: the name the environment's cdk.json \"endpoints\" declares, 'qa'",
        ),
        ("tiny-qa", "adapter:support", "for a recipe that trains a merged model; accepted: endpoint:NAME"),
        ("tiny-adapter", "endpoint:qa", "for a recipe that trains an adapter; accepted: adapter:NAME"),
        # Finding 6: a champion of another task failed the job late ("too many values to unpack"), billed.
        (
            "tiny-mnli",
            "endpoint:qa",
            "--champion endpoint:qa: endpoint hfpipe-dev-qa serves tiny-qa/1, a question-answering model; "
            "accepted: a champion serving a text-classification model, the recipe's task",
        ),
        # Newcomer finding 10 (h-nc-eval2): these exited 1 where ENDPOINT:qa and endpoint: exit 2.
        (
            "tiny-qa",
            "endpoint:Qa",
            "--champion: input.champion.endpoint: 'Qa' is not accepted; accepted: a name of lower-case",
        ),
        (
            "tiny-qa",
            "endpoint:qa ",
            "--champion: input.champion.endpoint: 'qa ' is not accepted; accepted: a name of lower-case",
        ),
    ],
)
def test_a_champion_that_names_nothing_of_the_recipe_s_kind_is_refused_before_the_start(
    registry_world, capsys, recipe, champion, said
):
    code, out, err = run(
        capsys, "start", "--env", "dev", "--recipe", recipe, "--champion", champion, "--dry-run"
    )
    # A usage error, as the form's refusal (test_start_takes_the_champion_as_an_endpoint_or_an_adapter): exit 2.
    assert (code, out) == (2, ""), (code, out, err)
    text = " ".join(err.split()).removeprefix("error: ")
    assert (
        said.replace("--champion: input.champion.endpoint", "--champion: endpoint") in text or said in text
    ), text
    assert not registry_world.sfn.list_executions(stateMachineArn=_deploy_machine(registry_world))[
        "executions"
    ]


def test_a_champion_endpoint_that_is_not_declared_is_refused_by_the_plan():
    """Newcomer finding 2 (h-nc-eval): the Plan refuses a SageMaker name as it refuses the field's other errors."""
    from hfpipe.core.run import evaluation_job

    with pytest.raises(
        RecipeError,
        match=r"accepted: the name the environment's cdk.json \"endpoints\" declares, 'classifier'",
    ):
        evaluation_job.target({"endpoint": "hfpipe-dev-classifier"}, "dev", True)
    with pytest.raises(RecipeError, match=r"^input.champion.adapter: 'support' is not accepted for a recipe"):
        evaluation_job.target({"adapter": "support"}, "dev", True)
    assert evaluation_job.target({"adapter": "support"}, "dev", True, adapter=True) == (None, "support")


def test_the_report_states_the_evaluations_verdict_and_cost():
    """Newcomer finding 8: the line labelled the difference as the score ('better (accuracy 37.5, ...)' for a
    model at 70.83): each model's score [interval] on n, then the difference, labelled."""
    from hfpipe.cli.run.report import _evaluation

    doc = wrapper("worse")["document"]
    report = {  # the report's evaluation, as lambda/pipeline/pipeline_lambdas/report.py writes it
        "verdict": "worse",
        "metric": "f1",
        "difference": doc["difference"],
        "scores": {side: doc[side]["scores"]["f1"] for side in ("challenger", "champion")},
        "champion_version_arn": arn(1),
        "instance_type": "ml.m5.xlarge",
        "instance_count": 1,
        "seconds": 12.3,
        "cost_usd": 0.0008,
    }
    line = _evaluation(report, "dev")
    assert line == (
        "worse: f1 58.1 [52, 64] on 40 against 61.2 [55, 67.1] on 40 (tiny-qa/1); difference -3.1 (-5 to -1.2); "
        "1 x ml.m5.xlarge, 12.3 s, 0.0008 USD"
    )
    del report["scores"]  # a report written before the scores were in it: the difference alone, labelled
    assert _evaluation(report).startswith(f"worse: f1 against {arn(1)}; difference -3.1 (-5 to -1.2); ")


PROD_GROUP = "hfpipe-prod-tiny-mnli"


def _dev_arn(n: int) -> str:
    return f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:model-package/hfpipe-dev-tiny-mnli/{n}"


def _promoted(env: Environment, n: int, source: int, evaluation: dict[str, Any] | None, status: str) -> str:
    """tiny-mnli/<n> of prod as the Promote function registers it from dev's tiny-mnli/<source>: its artifact
    copied under promoted/, its lineage in its metadata and statistics document, the source's evaluation with
    it (as evaluated in dev, against dev's endpoint)."""
    bucket = env.ssm.get_parameter(Name=contract.ssm_parameter_name("prod", contract.SSM_ARTIFACTS_BUCKET))[
        "Parameter"
    ]["Value"]
    prefix = f"promoted/dev/tiny-mnli/{source}/"
    lineage = {"promoted_from": _dev_arn(source), "promoted_from_env": "dev"}
    doc: dict[str, Any] = {
        "version": 1,
        "metadata": {**lineage, "task": "text-classification"},
        "metrics": {},
    }
    if evaluation is not None:
        doc["evaluation"] = evaluation
    env.s3.put_object(Bucket=bucket, Key=f"{prefix}metrics.json", Body=json.dumps(doc).encode())
    return env.sagemaker.create_model_package(
        ModelPackageGroupName=PROD_GROUP,
        InferenceSpecification={
            "Containers": [{"Image": "img:1", "ModelDataUrl": f"s3://{bucket}/{prefix}model.tar.gz"}],
            "SupportedContentTypes": ["application/json"],
            "SupportedResponseMIMETypes": ["application/json"],
        },
        ModelMetrics={
            "ModelQuality": {
                "Statistics": {
                    "ContentType": "application/json",
                    "S3Uri": f"s3://{bucket}/{prefix}metrics.json",
                }
            }
        },
        ModelApprovalStatus=status,
        CustomerMetadataProperties=lineage,
    )["ModelPackageArn"]


@pytest.fixture
def prod_world(moto_account: None) -> Environment:
    """prod, promoted from dev: tiny-mnli/1 (dev's 1) serves on prod's `classifier`; dev's `classifier` serves
    nothing; tiny-mnli/2 (dev's 2, evaluated in dev worse than dev's 1 on dev's `classifier`) and tiny-mnli/3
    (dev's 3, evaluated better) wait for approval."""
    env = Environment("prod")
    env.sagemaker.create_model_package_group(ModelPackageGroupName=PROD_GROUP)
    serving = _promoted(env, 1, 1, None, "Approved")
    target = {"endpoint": "hfpipe-dev-classifier"}  # the SageMaker name the dev run's evaluation stored
    _promoted(env, 2, 2, wrapper("worse", champion=_dev_arn(1), target=target), "PendingManualApproval")
    better = wrapper("better", champion=_dev_arn(1), target=target, low=0.5, high=4.0, value=2.0)
    _promoted(env, 3, 3, better, "PendingManualApproval")
    sm = env.sagemaker
    sm.create_model(ModelName="p1", PrimaryContainer={"ModelPackageName": serving}, ExecutionRoleArn=ROLE)
    variant = {"VariantName": "AllTraffic", "ModelName": "p1", "InstanceType": "ml.m5.large"}
    sm.create_endpoint_config(
        EndpointConfigName="pc1", ProductionVariants=[{**variant, "InitialInstanceCount": 1}]
    )
    sm.create_endpoint(EndpointName="hfpipe-prod-classifier", EndpointConfigName="pc1")
    return env


def test_prods_approve_reads_what_serves_on_prods_endpoint(prod_world, capsys):
    """The evaluation named dev's `classifier` (hfpipe-dev-classifier); in prod the same named endpoint is
    hfpipe-prod-classifier, whose champion, promoted from dev's tiny-mnli/1, counts as that source version."""
    code, _out, err = run(capsys, "models", "approve", "tiny-mnli/2", "--env", "prod")
    text = " ".join(err.split())
    assert (
        code == 1 and "refused by the evaluation gate: version tiny-mnli/2 is worse than the champion" in text
    )
    assert _dev_arn(1) in text and "f1 difference -3.1 (-5 to -1.2)" in text, text
    code, out, err = run(capsys, "models", "approve", "tiny-mnli/3", "--env", "prod")
    assert code == 0, err
    assert f"evaluation better against {_dev_arn(1)}: f1 difference +2 (+0.5 to +4)" in " ".join(out.split())


FAILED_CAUSE = "Failed: AlgorithmError: no validation data"


def _failed_evaluation() -> dict[str, Any]:
    """What RecordEvaluationFailure stores when the version's evaluation job failed."""
    stored = {
        **wrapper("worse", champion=arn(1)),
        "failure": {"error": "States.TaskFailed", "cause": FAILED_CAUSE},
    }
    del stored["document"]
    return stored


def test_a_version_whose_evaluation_failed_is_shown_so_and_gated_as_unevaluated(registry_world, capsys):
    _version(registry_world, 5, _failed_evaluation())
    code, out, err = run(capsys, "models", "--env", "dev", "--recipe", "tiny-qa")
    assert code == 0, err
    rows = {line.split("│")[1].strip(): line for line in out.splitlines() if line.count("│") > 3}
    assert rows["tiny-qa/5"].rstrip(" │").endswith("failed") and rows["tiny-qa/2"].rstrip(" │").endswith(
        "worse"
    )
    code, out, err = run(capsys, "models", "approve", "tiny-qa/5", "--env", "dev")  # dev: advisory
    assert code == 0, err
    assert f"not evaluated: its evaluation failed ({FAILED_CAUSE})" in " ".join(out.split())
    code, text = _approve_under_a_mandatory_gate(registry_world, capsys, 5)
    assert code == 1 and f"has no evaluation (its evaluation failed: {FAILED_CAUSE})" in text, text


def test_the_report_states_a_failed_evaluation_with_its_cause():
    from hfpipe.cli.run.report import _evaluation

    line = _evaluation(
        {
            "verdict": "failed",
            "reason": FAILED_CAUSE,
            "instance_type": "ml.g4dn.xlarge",
            "instance_count": 1,
            "seconds": 3,
            "cost_usd": 0.0006,
        }
    )
    assert line == f"failed: {FAILED_CAUSE}; 1 x ml.g4dn.xlarge, 3 s, 0.0006 USD"


def test_a_refused_preparation_is_reported_and_compared_as_no_job_and_no_champion_scored():
    """PrepareEvaluation refused to create the job (RecordEvaluationFailure's record after
    EvaluationNotPrepared: no job name, 0 s): the report says no job ran instead of "1 x ..., 0 s, 0 USD", and
    `models compare` names what the run asked for instead of "no champion"."""
    from hfpipe.cli.run.report import _evaluation
    from hfpipe.core.promotion import evaluation_gate

    cause = "champion: endpoint hfpipe-dev-classifier serves tiny-spot/1, a sentiment model; ..."
    line = _evaluation(
        {
            "verdict": "failed",
            "reason": cause,
            "processing_job_name": None,
            "instance_type": "ml.g4dn.xlarge",
            "instance_count": 1,
            "seconds": 0.0,
            "cost_usd": 0.0,
        }
    )
    assert line == f"failed: {cause}; no evaluation job was created (nothing billed)"
    stored = {
        "failure": {"error": "EvaluationFailed", "status": None, "cause": cause},
        "target": {"endpoint": "hfpipe-dev-classifier"},
        "champion": None,
        "job": {"name": None, "seconds": 0.0, "usd": 0.0},
    }
    shown = evaluation_gate.summary(stored, "dev")
    assert (
        shown is not None
        and shown["champion"] == "none scored (its run named endpoint hfpipe-dev-classifier)"
    )
    shown = evaluation_gate.summary({**stored, "target": {}}, "dev")
    assert shown is not None and shown["champion"] == "none (its run named no --champion)"


@pytest.mark.parametrize(
    ("reason", "broken"),
    [
        # Newcomer finding 9 (h-nc-eval2): the refusal quotes the offending character and its position.
        ("line one\nline two", "'\\n' (U+000A) at character 9 of the reason"),
        ("see ticket\u2028two", "'\\u2028' (U+2028) at character 11 of the reason"),
        (
            "x" * 2000,
            "it is 2000 characters; the version's approval description holds 0 characters and the gate's "
            "note leave room for at most",
        ),
    ],
)
def test_a_deploy_override_the_api_would_refuse_is_refused_before_the_deploy_starts(
    registry_world, capsys, reason, broken
):
    """A reason UpdateModelPackage's ApprovalDescription refuses (a line break; longer than 1024 characters
    with the "(refused: ...)" note): a usage error naming the option, before the execution starts."""
    registry_world.sagemaker.update_model_package(ModelPackageArn=arn(2), ModelApprovalStatus="Approved")
    machine = _deploy_machine(registry_world)
    code, _, err = run(
        capsys, "deploy", "--env", "dev", "--model", "tiny-qa/2", "--endpoint", "qa", "--no-wait",
        "--override-evaluation", reason,
    )  # fmt: skip
    started = registry_world.sfn.list_executions(stateMachineArn=machine)["executions"]
    for execution in started:
        _wait_ended(registry_world, execution["executionArn"])
    text = " ".join(err.split())
    assert code == 2 and not started, (code, err, started)
    assert "--override-evaluation: the reason is not accepted" in text and broken in text, text


def test_an_approve_override_that_would_not_fit_is_refused_and_nothing_changes(registry_world, capsys):
    """Room for the reason is what the description leaves after the approve's own reason and the note."""
    code, _, err = run(
        capsys, "models", "approve", "tiny-qa/2", "--env", "dev", "--reason", "r" * 600,
        "--override-evaluation", "o" * 400,
    )  # fmt: skip
    said = " ".join(err.split())
    assert (
        code == 2 and "it is 400 characters; the version's approval description holds 600 characters" in said
    )
    assert "leave room for at most 3" in said, err
    assert _status(registry_world, 2) == ("PendingManualApproval", None)


def test_a_second_approve_override_keeps_the_earlier_one(registry_world, capsys):
    """docs/evaluation.md: 'after what it held: the approve's reason and earlier overrides stay'."""
    for reason in ("first reason", "second reason"):
        code, _, err = run(
            capsys, "models", "approve", "tiny-qa/2", "--env", "dev", "--override-evaluation", reason
        )
        assert code == 0, err
    description = _status(registry_world, 2)[1]
    assert description.startswith("evaluation gate overridden: first reason (refused:"), description
    assert "; evaluation gate overridden: second reason (refused:" in description, description


# Two deploys at once, as the deploy state machine decides them: the Prepare of the one started second lists
# the first running and refuses it (DeployInProgress, then Refused; deploy_guards.deploy_in_progress), before
# its gate, so it records nothing (tests/pipeline/test_deploy_evaluation_gate.py). Here its states by name, the
# refusal picked by the input's reason: the commands record nothing of either, each execution has its own.
RACED = {
    "StartAt": "Prepare",
    "States": {
        "Prepare": {
            "Type": "Choice",
            "Choices": [{"Variable": "$.override_evaluation", "StringEquals": "second", "Next": "Refused"}],
            "Default": "CreateModel",
        },
        "Refused": {"Type": "Fail", "Error": "DeployInProgress", "Cause": "deploy first runs"},
        "CreateModel": {"Type": "Pass", "End": True},
    },
}


def test_of_two_deploys_at_once_the_commands_record_neither_override(registry_world, capsys):
    """docs/evaluation.md: an override is recorded by the execution that passed Prepare with it; the commands
    of two deploys at once each start theirs with its own reason and write nothing themselves."""
    registry_world.sagemaker.update_model_package(ModelPackageArn=arn(2), ModelApprovalStatus="Approved")
    machine = registry_world.sfn.create_state_machine(
        name="hfpipe-dev-deploy", definition=json.dumps(RACED), roleArn=ROLE
    )["stateMachineArn"]
    for reason in ("first", "second"):
        code, _, err = run(
            capsys, "deploy", "--env", "dev", "--model", "tiny-qa/2", "--endpoint", "qa", "--no-wait",
            "--override-evaluation", reason,
        )  # fmt: skip
        assert code == 0, err
    reasons = []
    for execution in registry_world.sfn.list_executions(stateMachineArn=machine)["executions"]:
        _wait_ended(registry_world, execution["executionArn"])
        described = registry_world.sfn.describe_execution(executionArn=execution["executionArn"])
        reasons.append(json.loads(described["input"])["override_evaluation"])
    assert sorted(reasons) == ["first", "second"]
    assert "overridden" not in (_status(registry_world, 2)[1] or "")


def test_many_overrides_fit_and_a_full_description_says_how_to_free_room(registry_world, capsys):
    """Newcomer finding 5 (h-nc-eval2): each note repeated the refusal with full ARNs, so after two every
    override was refused, with nothing saying how to go on."""
    for n in range(6):
        code, _, err = run(
            capsys, "models", "approve", "tiny-qa/2", "--env", "dev", "--override-evaluation", f"reason {n}"
        )
        assert code == 0, (n, err)
    description = _status(registry_world, 2)[1]
    assert description.count("evaluation gate overridden: reason") == 6 and "arn:" not in description
    registry_world.sagemaker.update_model_package(
        ModelPackageArn=arn(2), ModelApprovalStatus="Approved", ApprovalDescription="d" * 1000
    )
    code, _, err = run(
        capsys, "models", "approve", "tiny-qa/2", "--env", "dev", "--override-evaluation", "short"
    )
    said = " ".join(err.split())
    assert code == 2 and "holds 1000 characters and the gate's note leave no room" in said, err
    assert "aws sagemaker update-model-package --model-package-arn ARN --approval-description TEXT" in said
    assert _status(registry_world, 2) == ("Approved", "d" * 1000)


def test_approve_of_a_version_that_serves_on_its_target_says_it_is_its_own_champion(registry_world, capsys):
    """Newcomer finding 7 (h-nc-eval2): `approve tiny-mnli/8`, /8 itself serving on classifier, said 'nothing
    serves on endpoint hfpipe-dev-classifier now'."""
    _serve(registry_world, 4)
    code, out, err = run(capsys, "models", "approve", "tiny-qa/4", "--env", "dev")
    said = " ".join(out.split())
    assert (code, err) == (0, ""), err
    assert f"it serves on endpoint {ENDPOINT} itself (it is its own champion" in said, out
    assert "nothing serves" not in said, out


def test_stop_names_the_evaluation_job_stops_it_and_the_report_states_its_cost_so_far():
    """Newcomer finding 6 (h-nc-eval2): `hfpipe stop` during the evaluation named only the training job, and
    the aborted run's report left out the evaluation job and its cost. `stop` stops the job (InProgress,
    tagged for the run) and names it with its cost so far; the report of a run that stored no verdict states
    the job, its status and its cost so far."""
    from datetime import UTC, datetime, timedelta

    import boto3
    from moto import mock_aws
    from moto.backends import get_backend
    from plan_config import dev_config
    from rich.console import Console

    from hfpipe.cli.run import cleanup
    from hfpipe.cli.run.execution import Snapshot, _read_evaluation_job
    from hfpipe.cli.run.report import _report_from_job
    from hfpipe.core.recipe.recipes import load_recipe
    from hfpipe.core.run import evaluation_job
    from hfpipe.core.run.plan import build_plan
    from hfpipe.local.engine.quotas import QuotaTable, default_quotas

    with mock_aws():
        quotas = QuotaTable(default_quotas()).client(REGION)
        plan = build_plan({"recipe": load_recipe("tiny-mnli")}, "stopeval", dev_config(), quotas)
        assert plan.evaluation is not None
        name = plan.evaluation.processing_job_name
        sm = boto3.client("sagemaker", region_name=REGION)
        sm.create_processing_job(
            **evaluation_job.with_models(plan.evaluation.request, "s3://b/m.tar.gz", None)
        )
        job = get_backend("sagemaker")[ACCOUNT][REGION].processing_jobs[name]
        job.processing_resources = plan.evaluation.request["ProcessingResources"]
        job.processing_start_time = datetime.now(UTC) - timedelta(minutes=10)
        job.processing_end_time, job.processing_job_status = None, "InProgress"
        console = Console(record=True, width=300)
        assert cleanup._stop_evaluation_job(sm, plan, console) == 1
        said = console.export_text()
        assert said.startswith(f"stopping evaluation job {name}, 0.") and said.strip().endswith("USD so far")
        assert sm.describe_processing_job(ProcessingJobName=name)["ProcessingJobStatus"] == "Stopped"
        assert cleanup._stop_evaluation_job(sm, plan, console) == 0  # again: named, nothing sent
        assert console.export_text().startswith(f"evaluation job {name} already Stopped, 0.")
        snap = Snapshot("arn:x", "stopeval", "ABORTED", None, None, plan=plan)
        _read_evaluation_job(type("Clients", (), {"sagemaker": sm})(), snap)  # what `hfpipe report` reads
        assert snap.evaluation_job is not None and snap.evaluation_job["ProcessingJobStatus"] == "Stopped"
        assert snap.evaluation_cost_so_far_usd is not None and snap.evaluation_cost_so_far_usd > 0
        snap.evaluation_cost_so_far_usd = 0.05
    from hfpipe.cli.run.report import _evaluation

    e = _report_from_job(snap)["evaluation"]
    assert (e["processing_job_name"], e["processing_job_status"], e["cost_usd"]) == (name, "Stopped", 0.05)
    assert _evaluation(e).startswith(f"no verdict: evaluation job {name} Stopped; 1 x ml.")
    assert _evaluation(e).endswith(" s, 0.0500 USD so far")
