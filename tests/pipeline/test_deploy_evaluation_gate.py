"""The deploy state machine applies the evaluation gate itself (docs/evaluation.md, "The gate"): an execution
started without `hfpipe deploy` (the console, the SDK) is gated as the command gates it. Prepare reads the
version's stored evaluation and what serves on the endpoint just then; a version evaluated worse than the
champion serving there ends at Refused with the figures and nothing created, the input's
``override_evaluation`` passes it, and where the environment's evaluation_gate is mandatory a version with no
evaluation is refused. On the real dev template (moto); documents written to the contract by hand
(tests/evaluations.py)."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest
from app_synth import ARTIFACTS_BUCKET
from deploy_helpers import ENDPOINT, ENV, NAME, deploy, named, register, wiped
from evaluations import wrapper

from hfpipe import contract

pytestmark = pytest.mark.slow
_ids = itertools.count()
FIGURES = "f1 difference -3.1 (-5 to -1.2) at 95% confidence, margin 0"


@pytest.fixture
def clean(fresh):
    yield from wiped(fresh)


def evaluated_version(engine: Any, champion: str, verdict: str) -> str:
    """A tiny-qa version of dev, Approved, whose statistics document holds an evaluation ``verdict`` against
    ``champion`` on the named endpoint (as the Register step stores one); its ARN."""
    sm, n = engine.client("sagemaker"), next(_ids)
    key = f"model-metrics/gate-{n}/metrics.json"
    document = {"version": 1, "metadata": {"execution": f"gate-{n}"}, "metrics": {}}
    document["evaluation"] = wrapper(verdict, champion=champion, target={"endpoint": ENDPOINT})
    engine.client("s3").put_object(Bucket=ARTIFACTS_BUCKET, Key=key, Body=json.dumps(document).encode())
    return str(
        sm.create_model_package(
            ModelPackageGroupName=contract.model_package_group_name(ENV, "tiny-qa"),
            InferenceSpecification=_spec(sm, champion, f"s3://{ARTIFACTS_BUCKET}/gate-{n}/model.tar.gz"),
            ModelMetrics={
                "ModelQuality": {
                    "Statistics": {
                        "ContentType": "application/json",
                        "S3Uri": f"s3://{ARTIFACTS_BUCKET}/{key}",
                    }
                }
            },
            ModelApprovalStatus="Approved",
            CustomerMetadataProperties={"recipe": "tiny-qa", "execution": f"gate-{n}"},
        )["ModelPackageArn"]
    )


def _spec(sm: Any, like: str, model_data: str) -> dict[str, Any]:
    """Version ``like``'s InferenceSpecification with a model of its own (the gate tells models apart by it)."""
    spec = sm.describe_model_package(ModelPackageName=like)["InferenceSpecification"]
    spec["Containers"][0]["ModelDataUrl"] = model_data
    return spec


def serving(engine: Any) -> str:
    """A first version deployed on the named endpoint (dev's gate is advisory: it has no evaluation)."""
    champion = register(engine)
    _, r = deploy(engine, champion)
    assert r.status == "SUCCEEDED", r.cause
    return champion


def test_a_direct_start_of_a_worse_version_is_refused_with_its_figures(clean):
    champion = serving(clean)
    before = named(clean)
    worse = evaluated_version(clean, champion, "worse")
    _, r = deploy(clean, worse)
    assert (r.status, r.error) == ("FAILED", "EvaluationGateRefused"), r.cause
    message = json.loads(r.cause)["errorMessage"]
    assert message.startswith(
        f"refused by the evaluation gate: version tiny-qa/{worse.rsplit('/', 1)[1]} is worse"
    )
    assert f"than the champion {champion}" in message
    assert FIGURES in message and '--override-evaluation "REASON"' in message
    assert r.states == ["Prepare", "Refused"]
    assert named(clean) == before  # nothing created, the champion still serves


def test_the_inputs_override_passes_the_gate_and_a_better_version_passes(clean):
    from pipeline_lambdas import deploy_prepare

    champion = serving(clean)
    worse, better = (evaluated_version(clean, champion, v) for v in ("worse", "better"))
    plans = {}
    for version, extra in ((worse, {"override_evaluation": "labels were fixed"}), (better, {})):
        plans[version] = prepared = deploy_prepare.handler(
            {"input": {"version": version, "endpoint": NAME, **extra}, "execution_name": f"x-{next(_ids)}"},
            None,
        )
        assert prepared["action"] == "update" and prepared["model_version_arn"] == version
    # The plan carries the override (PrepareAgain hands the input back): a look after a wait is gated alike.
    assert plans[worse]["input"]["override_evaluation"] == "labels were fixed"
    assert plans[better]["input"]["override_evaluation"] is None
    with pytest.raises(deploy_prepare.InvalidDeployInput, match=r"input.override_evaluation: .*empty reason"):
        deploy_prepare.handler(
            {
                "input": {"version": worse, "endpoint": NAME, "override_evaluation": " "},
                "execution_name": "x",
            },
            None,
        )


def test_a_mandatory_gate_refuses_a_version_with_no_evaluation(clean, monkeypatch):
    from pipeline_lambdas import deploy_prepare

    serving(clean)
    unevaluated = register(clean)
    monkeypatch.setenv("EVALUATION_GATE", "mandatory")
    event = {"input": {"version": unevaluated, "endpoint": NAME}, "execution_name": "x-mandatory"}
    with pytest.raises(deploy_prepare.EvaluationGateRefused, match=r"has no evaluation .* is mandatory"):
        deploy_prepare.handler(event, None)
    event["input"]["override_evaluation"] = "hotfix before the evaluation exists"
    assert deploy_prepare.handler(event, None)["action"] == "update"


def test_prepares_role_reads_only_the_statistics_documents(template):
    """The gate's reads: GetObject on the versions' statistics documents of this environment's artifacts bucket,
    nothing else of S3; the environment's evaluation_gate as EVALUATION_GATE."""
    resources = template["Resources"]
    (function,) = [
        r
        for r in resources.values()
        if r["Type"] == "AWS::Lambda::Function"
        and r["Properties"]["Environment"]["Variables"].get("DEPLOY_ENDPOINTS") is not None
    ]
    assert function["Properties"]["Environment"]["Variables"]["EVALUATION_GATE"] == "advisory"
    role = function["Properties"]["Role"]["Fn::GetAtt"][0]
    statements = [
        s
        for r in resources.values()
        if r["Type"] == "AWS::IAM::Policy" and {"Ref": role} in r["Properties"]["Roles"]
        for s in r["Properties"]["PolicyDocument"]["Statement"]
    ]
    s3 = [s for s in statements if any(str(a).startswith("s3:") for a in _list(s["Action"]))]
    assert [_list(s["Action"]) for s in s3] == [["s3:GetObject"]]
    keys = [json.dumps(r)[-40:] for r in _list(s3[0]["Resource"])]
    assert [k.split("/", 1)[1] for k in keys] == [
        'model-metrics/*/metrics.json"]]}',
        'promoted/*/metrics.json"]]}',
    ]


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def test_a_statistics_document_prepare_cannot_read_refuses_the_deploy(clean):
    from pipeline_lambdas import deploy_prepare

    champion = serving(clean)
    unreadable = evaluated_version(clean, champion, "better")
    key = clean.client("sagemaker").describe_model_package(ModelPackageName=unreadable)["ModelMetrics"]
    uri = key["ModelQuality"]["Statistics"]["S3Uri"]
    clean.client("s3").delete_object(Bucket=ARTIFACTS_BUCKET, Key=uri.split("/", 3)[3])
    event = {"input": {"version": unreadable, "endpoint": NAME}, "execution_name": "x-unreadable"}
    with pytest.raises(
        deploy_prepare.EvaluationGateRefused, match=f"its statistics document {uri} could not"
    ):
        deploy_prepare.handler(event, None)


def _description(engine: Any, version: str) -> str:
    sm = engine.client("sagemaker")
    return str(sm.describe_model_package(ModelPackageName=version).get("ApprovalDescription") or "")


def _prepared(version: str, execution: str, **extra: str) -> dict[str, Any]:
    from pipeline_lambdas import deploy_prepare

    event = {"input": {"version": version, "endpoint": NAME, **extra}, "execution_name": execution}
    return dict(deploy_prepare.handler(event, None))


def test_the_execution_records_the_override_it_passed_prepare_with_once_even_when_prepare_runs_twice(clean):
    """docs/evaluation.md, "Overriding the gate": the act records it, not the command; Prepare invoked again for
    the same execution (its answer lost, Lambda.ServiceException retried) appends nothing a second time."""
    champion = serving(clean)
    worse = evaluated_version(clean, champion, "worse")
    clean.client("sagemaker").update_model_package(
        ModelPackageArn=worse, ModelApprovalStatus="Approved", ApprovalDescription="QA sign-off 12"
    )
    clean.after_errors["deploy_prepare"] = ["Lambda.ServiceException"]  # Prepare ran, its answer was lost
    name = f"deploy-override-{next(_ids)}"
    machine = clean.state_machine_arns[contract.deploy_state_machine_name(ENV)]
    r = clean.run(
        {"version": worse, "endpoint": NAME, "override_evaluation": "labels were fixed"},
        name=name,
        state_machine_arn=machine,
    )
    assert r.status == "SUCCEEDED", r.cause
    assert [k for k, _ in clean.invocations].count("deploy_prepare") >= 2 and not clean.after_errors[
        "deploy_prepare"
    ]
    description = _description(clean, worse)
    assert description.startswith("QA sign-off 12; evaluation gate overridden: labels were fixed (refused: ")
    assert description.endswith(f"; [execution {name}])"), description
    assert description.count("evaluation gate overridden") == 1, description
    package = clean.client("sagemaker").describe_model_package(ModelPackageName=worse)
    assert package["ModelApprovalStatus"] == "Approved"


def test_prepare_invoked_twice_for_one_execution_appends_once_and_another_execution_appends_its_own(clean):
    champion = serving(clean)
    worse = evaluated_version(clean, champion, "worse")
    for execution in ("x-first", "x-first", "x-second"):
        assert _prepared(worse, execution, override_evaluation="hotfix")["action"] == "update"
    description = _description(clean, worse)
    assert description.count("[execution x-first]") == 1 and description.count("[execution x-second]") == 1
    assert description.count("evaluation gate overridden: hotfix (refused: ") == 2, description
    # Newcomer finding 5 (h-nc-eval2): Prepare's note is short (refs, verdict, difference), no ARN.
    ref, champion_ref = f"tiny-qa/{worse.rsplit('/', 1)[1]}", champion.split(":model-package/", 1)[1]
    assert description.startswith(
        f"evaluation gate overridden: hotfix (refused: {ref} worse vs {champion_ref} f1 -3.1 (-5 to -1.2); "
        "[execution x-first])"
    ), description
    assert "arn:" not in description, description


def test_an_override_the_gate_did_not_need_is_not_recorded(clean):
    """A version the gate passes on its own: the override given overrode nothing (nothing appended); the same
    reason on a worse version is recorded."""
    champion = serving(clean)
    better, worse = (evaluated_version(clean, champion, v) for v in ("better", "worse"))
    _prepared(better, "x-better", override_evaluation="not needed")
    assert _description(clean, better) == ""
    _prepared(worse, "x-worse", override_evaluation="not needed")
    assert "evaluation gate overridden: not needed" in _description(clean, worse)


def test_a_deploy_refused_at_the_gate_records_nothing(clean, monkeypatch):
    """Refused (a worse version; none evaluated where the gate is mandatory), without an override: nothing is
    appended; the same look with one appends its note."""
    from pipeline_lambdas import deploy_prepare

    champion = serving(clean)
    worse, unevaluated = evaluated_version(clean, champion, "worse"), register(clean)
    monkeypatch.setenv("EVALUATION_GATE", "mandatory")
    for version in (worse, unevaluated):
        with pytest.raises(deploy_prepare.EvaluationGateRefused):
            _prepared(version, "x-refused")
        assert _description(clean, version) == ""
        _prepared(version, "x-refused", override_evaluation="hotfix")
        assert _description(clean, version).endswith("; [execution x-refused])")


def test_prepare_and_the_adapter_function_may_update_this_environments_versions_only(template):
    """The grant the act's record needs: UpdateModelPackage on the versions of dev's groups (hfpipe-dev-*/*),
    for the roles of Prepare and of the adapter state machine's function, nothing wider."""
    resources = template["Resources"]
    granted = {}
    for r in resources.values():
        if r["Type"] != "AWS::IAM::Policy":
            continue
        for s in r["Properties"]["PolicyDocument"]["Statement"]:
            if "sagemaker:UpdateModelPackage" in _list(s["Action"]):
                (role,) = r["Properties"]["Roles"]
                granted[role["Ref"]] = [json.dumps(x) for x in _list(s["Resource"])]
    functions = {
        r["Properties"]["Role"]["Fn::GetAtt"][0]: r["Properties"]["Handler"]
        for r in resources.values()
        if r["Type"] == "AWS::Lambda::Function" and "Fn::GetAtt" in r["Properties"]["Role"]
    }
    handlers = sorted(functions.get(role, role).split(".")[-2] for role in granted)
    assert handlers == ["adapter", "deploy_prepare"], granted
    for statement in granted.values():
        assert len(statement) == 1 and statement[0].endswith(':model-package/hfpipe-dev-*/*"]]}'), statement
