"""The deploy state machine on the real dev template (moto): refusals create nothing, a first deploy creates the
named endpoint smoke-tested, tagged and recorded, a rerun of the same version is a no-op, and a failure at any
step goes through DeployCleanup and leaves nothing this execution made, never touching a serving endpoint.

moto has no UpdateEndpoint: the update path is checked here up to the request Prepare builds and an
UpdateEndpoint that SageMaker answers with an error (the local emulation of blue/green updates plays the rest).
"""

from __future__ import annotations

import json

import botocore.session
import pytest
from accounts import ACCOUNT
from botocore.stub import Stubber
from deploy_helpers import (
    ENDPOINT,
    ENV,
    NAME,
    PARAMETER,
    deploy,
    named,
    register,
    state_input,
    stored_record,
    tags,
    wiped,
)

from hfpipe import contract
from hfpipe.core.deploy.deploy_plan import DeployPlan

pytestmark = pytest.mark.slow


@pytest.fixture
def clean(fresh):
    yield from wiped(fresh)


NOTHING = {"training_jobs": [], "models": [], "endpoint_configs": [], "endpoints": []}


@pytest.mark.parametrize(
    ("case", "error", "message"),
    [
        ("pending", "VersionNotApproved", "is PendingManualApproval; accepted: an Approved version"),
        ("unknown endpoint", "UnknownEndpoint", "endpoint 'nope': not declared for environment dev"),
        ("prod's version", "VersionOfAnotherEnvironment", "is not environment 'dev''s"),
        ("no such version", "VersionNotFound", "not found"),
        ("no instance type", "VersionNotDeployable", "no SupportedRealtimeInferenceInstanceTypes"),
        # An unmerged LoRA adapter has no model to serve: refused before a (GPU) endpoint is made for it.
        ("an adapter", "VersionNotDeployable", "is a LoRA adapter of hfpipe-fixtures/tiny-llama"),
        ("bad reference", "InvalidDeployInput", "not accepted; accepted: a model package version ARN"),
    ],
)
def test_a_refused_deploy_creates_nothing(clean, case, error, message):
    version = register(clean, status="PendingManualApproval" if case == "pending" else "Approved")
    endpoint = NAME
    if case == "unknown endpoint":
        endpoint = "nope"
    elif case == "prod's version":
        version = version.replace("hfpipe-dev-", "hfpipe-prod-")
    elif case == "no such version":
        version = version.rsplit("/", 1)[0] + "/9999"
    elif case == "no instance type":
        version = register(clean, types=[])
    elif case == "an adapter":
        version = register(clean, recipe="tiny-adapter", adapter_base_model="hfpipe-fixtures/tiny-llama")
    elif case == "bad reference":
        version = "tiny-qa-latest"
    _, r = deploy(clean, version, endpoint)
    assert (r.status, r.error) == ("FAILED", error), r.cause
    assert message in json.loads(r.cause)["errorMessage"]
    assert r.states == ["Prepare", "Refused"]
    assert named(clean) == NOTHING and stored_record(clean) is None


def test_a_first_deploy_creates_smoke_tests_tags_and_records_the_endpoint(clean):
    asked: list[str] = []
    clean.endpoint = lambda name, body: asked.append(name) or [{"answer": "pipeline", "score": 0.9}]
    version = register(clean)
    name, r = deploy(clean, version)
    assert r.status == "SUCCEEDED", (r.error, r.cause)
    assert r.states[:6] == [
        "Prepare",
        "Action?",
        "CreateModel",
        "CreateEndpointConfig",
        "ApprovalBeforeTraffic",
        "CreateOrUpdate?",
    ]
    assert r.states[6:] == [
        "CreateEndpoint",
        "StartEndpointWait",
        "WaitForEndpoint",
        "DescribeEndpoint",
        "EndpointStatus?",
        "SmokeTest",
        "ApprovalBeforeRecord",
        "Record",
        "SweepLeftovers",
        "Deployed",
    ]
    assert asked == [ENDPOINT]  # the smoke test asked the named endpoint, with tiny-qa's sample
    record = r.output
    resource = record["model"]
    assert resource == record["endpoint_config"] and resource.startswith(f"{ENDPOINT}-v")
    assert record == {
        "schema_version": 1,  # a DeploymentRecord (hfpipe.core.deploy.deploy_plan)
        "name": NAME,
        "endpoint": ENDPOINT,
        "model_version_arn": version,
        "model_package_group": "hfpipe-dev-tiny-qa",
        "recipe": "tiny-qa",
        "version": int(version.rsplit("/", 1)[1]),
        "endpoint_config": resource,
        "model": resource,
        "instance_type": "ml.m5.large",
        "instance_count": 1,
        "deployed_at": record["deployed_at"],
        "execution": name,
        "previous_version": None,
        "previous_endpoint_config": None,
    }
    assert stored_record(clean) == record
    assert named(clean) == {
        "training_jobs": [],
        "models": [resource],
        "endpoint_configs": [resource],
        "endpoints": [ENDPOINT],
    }
    sm = clean.client("sagemaker")
    model = sm.describe_model(ModelName=resource)
    assert model["Containers"] == [{"ModelPackageName": version}]
    assert model["ExecutionRoleArn"].split("/")[-1].startswith("SageMakerExecutionRole")
    (variant,) = sm.describe_endpoint_config(EndpointConfigName=resource)["ProductionVariants"]
    assert (variant["VariantName"], variant["InstanceType"], variant["InitialInstanceCount"]) == (
        "AllTraffic",
        "ml.m5.large",
        1,
    )
    expected = {
        contract.TAG_ENV: ENV,
        contract.TAG_MANAGED_BY: contract.PROJECT,
        contract.TAG_RECIPE: "tiny-qa",
        contract.TAG_DEPLOYMENT: NAME,
        contract.TAG_MODEL_VERSION: version,
        contract.TAG_DEPLOY_EXECUTION: name,
        contract.TAG_TASK: "question-answering",
    }
    expires = set()
    for arn in (
        model["ModelArn"],
        sm.describe_endpoint_config(EndpointConfigName=resource)["EndpointConfigArn"],
        sm.describe_endpoint(EndpointName=ENDPOINT)["EndpointArn"],
    ):
        found = tags(clean, arn)
        # dev's endpoints expire a day after their creation (cdk.json endpoint_ttl_hours; docs/deploy.md).
        expires.add(found.pop(contract.TAG_EXPIRES_AT))
        assert found == expected  # never the pipeline's hfpipe:execution
    assert len(expires) == 1


def test_a_runs_clean_up_never_selects_a_named_endpoint(clean):
    """`hfpipe cleanup --env dev` (no execution named) selects by the managed-by and env tags, which a named
    endpoint carries too; its hfpipe:deployment tag keeps it, its config and its model out."""
    from hfpipe.core.run import cleanup as rule

    _, r = deploy(clean, register(clean))
    assert r.status == "SUCCEEDED", r.cause
    selected = {res.name for res in rule.find_resources(clean.client("sagemaker"), ENV)}
    assert not {ENDPOINT, r.output["model"]} & selected


def test_deploying_the_serving_version_again_changes_nothing(clean):
    version = register(clean)
    _, first = deploy(clean, version)
    assert first.status == "SUCCEEDED", first.cause
    before = named(clean)
    _, again = deploy(clean, version)
    assert again.status == "SUCCEEDED", again.cause
    assert again.states == ["Prepare", "Action?", "AlreadyServing"]
    assert again.output == first.output == stored_record(clean)
    assert named(clean) == before


def test_a_lost_record_is_written_again_after_a_smoke_test(clean):
    """A deploy that stopped after its update but before Record: the rerun finds the version serving, tests it
    and records it, creating nothing."""
    version = register(clean)
    first_name, first = deploy(clean, version)
    assert first.status == "SUCCEEDED", first.cause
    clean.client("ssm").delete_parameter(Name=PARAMETER)
    before = named(clean)
    _, again = deploy(clean, version)
    assert again.status == "SUCCEEDED", again.cause
    assert again.states == [
        "Prepare",
        "Action?",
        "SmokeTest",
        "ApprovalBeforeRecord",
        "Record",
        "SweepLeftovers",
        "Deployed",
    ]
    assert again.output["execution"] == first_name  # the deploy that put the version there
    assert stored_record(clean) == again.output and named(clean) == before


def test_a_fault_at_create_endpoint_config_is_cleaned_up(clean):
    # Four answers: the first try and the three retries of SageMaker.AmazonSageMakerException.
    clean.sagemaker_errors["create_endpoint_config"] = ["ValidationException"] * 4
    _, r = deploy(clean, register(clean))
    assert (r.status, r.error) == ("FAILED", "SageMaker.AmazonSageMakerException"), r.cause
    assert r.states[-3:] == ["CreateEndpointConfig", "DeployCleanup", "DeployFailed"]
    assert "CreateEndpoint" not in r.states
    state = state_input(r, "DeployFailed")
    assert state["cleanup"] == {
        "deleted": [f"model {state['deploy']['model_name']}"],
        "kept": [],
        "autoscaling_restored": None,
    }
    assert named(clean) == NOTHING and stored_record(clean) is None


def test_a_failed_smoke_test_of_a_new_endpoint_deletes_it(clean):
    clean.endpoint = lambda name, body: [{"generated_text": "not an answer"}]
    _, r = deploy(clean, register(clean))
    assert (r.status, r.error) == ("FAILED", "SmokeTestFailed"), r.cause
    assert r.states[-4:] == ["SmokeTest", "PutPreviousBack?", "DeployCleanup", "DeployFailed"]
    assert named(clean) == NOTHING and stored_record(clean) is None


def test_an_update_request_is_blue_green_with_the_alarms(clean):
    """The second version's deploy: Prepare builds UpdateEndpoint with dev's DeploymentConfig, and the way
    back (Rollback) to the serving config."""
    from pipeline_lambdas import deploy_prepare

    first = register(clean)
    _, r = deploy(clean, first)
    assert r.status == "SUCCEEDED", r.cause
    second = register(clean)
    prepared = deploy_prepare.handler(
        {"input": {"version": second, "endpoint": NAME}, "execution_name": "x-2"}, None
    )
    assert prepared["action"] == "update"
    assert prepared["previous"]["model_version_arn"] == first
    # An update sends no CreateEndpoint: the plan's field for it is null.
    requests = {op: request for op, request in prepared["requests"].items() if request is not None}
    assert sorted(requests) == ["CreateEndpointConfig", "CreateModel", "Rollback", "UpdateEndpoint"]
    assert requests["UpdateEndpoint"] == {
        "EndpointName": ENDPOINT,
        "EndpointConfigName": prepared["endpoint_config_name"],
        "DeploymentConfig": {
            "BlueGreenUpdatePolicy": {
                "TrafficRoutingConfiguration": {"Type": "ALL_AT_ONCE", "WaitIntervalInSeconds": 0},
                "TerminationWaitInSeconds": 0,
                "MaximumExecutionTimeoutInSeconds": 3600,
            },
            "AutoRollbackConfiguration": {
                "Alarms": [
                    {"AlarmName": contract.endpoint_alarm_name(ENV, NAME, "5xx-errors")},
                    {"AlarmName": contract.endpoint_alarm_name(ENV, NAME, "4xx-errors")},
                    {"AlarmName": contract.endpoint_alarm_name(ENV, NAME, "model-latency")},
                ]
            },
        },
    }
    assert requests["Rollback"] == {
        "EndpointName": ENDPOINT,
        "EndpointConfigName": r.output["endpoint_config"],
        "RetainAllVariantProperties": False,  # not autoscaled: the previous config as it was
    }
    assert named(clean)["models"] == [r.output["model"]]  # Prepare created nothing
    # botocore's own validation of every request, as the state machine sends them.
    client = botocore.session.get_session().create_client("sagemaker", region_name="eu-west-1")
    arn = f"arn:aws:sagemaker:eu-west-1:{ACCOUNT}:x/y"
    answers = {"CreateModel": {"ModelArn": arn}, "CreateEndpointConfig": {"EndpointConfigArn": arn}}
    with Stubber(client) as stub:
        for operation, request in requests.items():
            method = "update_endpoint" if operation == "Rollback" else _snake(operation)
            stub.add_response(method, answers.get(operation, {"EndpointArn": arn}), request)
            getattr(client, method)(**request)


def _snake(operation: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in operation).lstrip("_")


def test_an_update_that_sagemaker_refuses_leaves_the_serving_version_alone(clean):
    first = register(clean)
    _, r1 = deploy(clean, first)
    assert r1.status == "SUCCEEDED", r1.cause
    sm = clean.client("sagemaker")
    serving = sm.describe_endpoint(EndpointName=ENDPOINT)
    clean.sagemaker_errors["update_endpoint"] = ["ValidationException"] * 4  # the try and its three retries
    _, r2 = deploy(clean, register(clean))
    assert (r2.status, r2.error) == ("FAILED", "SageMaker.SageMakerException"), r2.cause
    assert r2.states[-3:] == ["UpdateEndpoint", "DeployCleanup", "DeployFailed"]
    assert clean.sagemaker_errors["update_endpoint"] == []
    now = sm.describe_endpoint(EndpointName=ENDPOINT)
    assert (now["EndpointStatus"], now["EndpointConfigName"]) == ("InService", serving["EndpointConfigName"])
    assert tags(clean, now["EndpointArn"])[contract.TAG_MODEL_VERSION] == first
    # The second version's model and config are gone, the serving ones stay, the record is the first's.
    assert named(clean)["models"] == [r1.output["model"]]
    assert named(clean)["endpoint_configs"] == [r1.output["endpoint_config"]]
    assert stored_record(clean) == r1.output


def test_record_refuses_a_version_that_does_not_serve(clean):
    """Record reads what serves from the endpoint (live config -> model -> package): a deploy whose version is
    not the one its config's model is fails naming what serves, and writes neither the tag nor the record."""
    from pipeline_lambdas import deploy_record

    first_version = register(clean)
    _, first = deploy(clean, first_version)
    assert first.status == "SUCCEEDED", first.cause
    other = register(clean)
    intended = DeployPlan.from_json({**state_input(first, "Record")["deploy"], "model_version_arn": other})
    clients = {s: clean.client(s) for s in ("sagemaker", "ssm", "application-autoscaling")}
    with pytest.raises(deploy_record.NotServingTheNewVersion) as refused:
        deploy_record.record(intended, "deploy-other", ENV, clients)
    assert (
        f"endpoint {ENDPOINT}: InService, serving tiny-qa/{first.output['version']} (config "
        f"{first.output['endpoint_config']}, model {first.output['model']}); expected InService on "
        f"{first.output['endpoint_config']} serving"
    ) in str(refused.value)
    assert stored_record(clean) == first.output
    endpoint_arn = clean.client("sagemaker").describe_endpoint(EndpointName=ENDPOINT)["EndpointArn"]
    assert tags(clean, endpoint_arn)[contract.TAG_MODEL_VERSION] == first_version


def test_a_model_deleted_before_the_record_is_not_recorded(clean):
    """The new config's model deleted by hand while the smoke test ran (SageMaker allows it): what serves is
    unknown, so Record refuses, naming what it could not read, and nothing is recorded."""
    sm = clean.client("sagemaker")

    def answer_then_delete_the_model(name, body):
        for model in named(clean)["models"]:
            sm.delete_model(ModelName=model)
        return [{"answer": "pipeline", "score": 0.9}]

    clean.endpoint = answer_then_delete_the_model
    _, r = deploy(clean, register(clean))
    assert (r.status, r.error) == ("FAILED", "NotServingTheNewVersion"), r.cause
    model = state_input(r, "DeployFailed")["deploy"]["model_name"]
    assert f"serving an unknown version (model {model} no longer exists)" in r.cause
    assert "nothing recorded" in r.cause and stored_record(clean) is None
