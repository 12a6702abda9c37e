"""Lifecycle safety of named endpoints (`hfpipe deploy`): no run's clean-up deletes what a deploy made;
`hfpipe endpoints` shows which version each serves, read from the endpoint, and a tag or record that names
another as a mismatch; `hfpipe endpoints delete NAME` removes the endpoint, every config and model its deploys
made, its deployment record and its autoscaling target, and nothing else."""

from __future__ import annotations

import json
from typing import Any

import boto3
import botocore.client
import botocore.exceptions
import pytest
from cli_moto import REGION, ROLE, Environment
from faults import Faults, on_the_command, one_error_line
from sagemaker_resources import serving_resources
from test_cleanup_and_data import make_endpoint, names, run

from hfpipe import contract
from hfpipe.local.engine.engine import ACCOUNT

GROUP = contract.model_package_group_name("dev", "tiny-lora")


def version_arn(n: int, env: str = "dev") -> str:
    group = contract.model_package_group_name(env, "tiny-lora")
    return f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:model-package/{group}/{n}"


def deploy_tags(name: str, version: int, execution: str, env: str = "dev") -> list[dict[str, str]]:
    """The tags the deploy state machine puts on what it creates for named endpoint ``name``."""
    return [
        {"Key": contract.TAG_ENV, "Value": env},
        {"Key": contract.TAG_MANAGED_BY, "Value": contract.PROJECT},
        {"Key": contract.TAG_RECIPE, "Value": "tiny-lora"},
        {"Key": contract.TAG_DEPLOYMENT, "Value": name},
        {"Key": contract.TAG_MODEL_VERSION, "Value": version_arn(version, env)},
        {"Key": contract.TAG_DEPLOY_EXECUTION, "Value": execution},
    ]


def deploy(environment: Environment, name: str, versions: list[int], env: str = "dev") -> str:
    """A named endpoint as successive deploys leave it: a config and model per deploy, the endpoint on the
    last one, its record and an autoscaling target. Returns the endpoint's SageMaker name."""
    sm = environment.sagemaker
    endpoint = contract.deployed_endpoint_name(env, name)
    for version in versions:
        tags = deploy_tags(name, version, f"deploy-{name}-{version}", env)
        model, config = f"{endpoint}-v{version}-model", f"{endpoint}-v{version}-config"
        serving_resources(  # as the deploy creates them: the version's model package is the container
            sm,
            model=model,
            config=config,
            role=ROLE,
            tags=tags,
            Containers=[{"ModelPackageName": version_arn(version, env)}],
        )
    last = versions[-1]
    sm.create_endpoint(
        EndpointName=endpoint,
        EndpointConfigName=f"{endpoint}-v{last}-config",
        Tags=deploy_tags(name, last, f"deploy-{name}-{last}", env),
    )
    environment.ssm.put_parameter(
        Name=contract.deployment_parameter_name(env, name),
        Value=json.dumps(
            {  # as the deploy's Record step writes it (hfpipe.core.deploy.deploy_plan.DeploymentRecord)
                "schema_version": 1,
                "name": name,
                "endpoint": endpoint,
                "model_version_arn": version_arn(last, env),
                "model_package_group": contract.model_package_group_name(env, "tiny-lora"),
                "recipe": "tiny-lora",
                "version": last,
                "endpoint_config": f"{endpoint}-v{last}-config",
                "model": f"{endpoint}-v{last}-model",
                "instance_type": "ml.m5.large",
                "instance_count": 1,
                "deployed_at": "2026-12-01T10:00:00+00:00",
                "execution": f"deploy-{name}-{last}",
                "previous_version": version_arn(versions[-2], env) if len(versions) > 1 else None,
                "previous_endpoint_config": f"{endpoint}-v{versions[-2]}-config"
                if len(versions) > 1
                else None,
            }
        ),
        Type="String",
        Overwrite=True,  # the module's moto account may hold an earlier test's
    )
    boto3.client("application-autoscaling", region_name=REGION).register_scalable_target(
        ServiceNamespace="sagemaker",
        ResourceId=f"endpoint/{endpoint}/variant/AllTraffic",
        ScalableDimension="sagemaker:variant:DesiredInstanceCount",
        MinCapacity=1,
        MaxCapacity=2,
    )
    return endpoint


def scalable_targets() -> list[str]:
    targets = boto3.client("application-autoscaling", region_name=REGION).describe_scalable_targets(
        ServiceNamespace="sagemaker"
    )["ScalableTargets"]
    return sorted(t["ResourceId"] for t in targets)


@pytest.fixture
def named(environment: Environment) -> Environment:
    make_endpoint(environment, "run-1")  # a run's endpoint: clean-up's to delete
    deploy(environment, "summaries", [1, 2])
    deploy(environment, "summaries", [1], env="prod")  # another environment's: never touched
    return environment


def deployed_names(env: str, versions: list[int]) -> set[str]:
    endpoint = contract.deployed_endpoint_name(env, "summaries")
    return {endpoint} | {f"{endpoint}-v{v}-{k}" for v in versions for k in ("model", "config")}


def test_cleanup_never_deletes_what_a_deploy_made(named: Environment, capsys: Any) -> None:
    code, out, err = run(capsys, "cleanup", "--env", "dev", "--yes")
    assert (code, err) == (0, "")
    assert "deleted endpoint dev-run-1-ep" in out
    assert "summaries" not in out
    assert names(named) == deployed_names("dev", [1, 2]) | deployed_names("prod", [1])


def test_endpoints_shows_the_version_each_named_endpoint_serves(named: Environment, capsys: Any) -> None:
    code, out, err = run(capsys, "endpoints", "--env", "dev", "--json")
    assert (code, err) == (0, "")
    by_name = {e["name"]: e for e in json.loads(out)}
    named_one = by_name[contract.deployed_endpoint_name("dev", "summaries")]
    assert (named_one["deployment"], named_one["serves"]) == ("summaries", "tiny-lora/2")
    assert named_one["execution"] == "deploy-summaries-2"
    assert named_one["price_per_hour_usd"] > 0
    assert named_one["deployment_record"]["previous_version"] == version_arn(1)
    assert (by_name["dev-run-1-ep"]["deployment"], by_name["dev-run-1-ep"]["serves"]) == (None, None)
    assert by_name["dev-run-1-ep"]["deployment_record"] is None
    code, out, _ = run(capsys, "endpoints", "--env", "dev")
    row = next(line for line in out.splitlines() if "hfpipe-dev-summaries" in line)
    assert "tiny-lora/2" in row and "InService" in row
    assert (
        "summaries: tiny-lora/2 deployed 2026-12-01T10:00:00+00:00 by deploy-summaries-2, after tiny-lora/1"
        in out
    )


def test_endpoints_reads_what_serves_from_the_endpoint_and_shows_a_tag_or_record_that_differs(
    named: Environment, capsys: Any
) -> None:
    """As after a failed way back or a failed Record: the endpoint serves version 2 (its live config's model's
    package) while its tag and its deployment record name version 1. The endpoint wins; both claims are
    shown as mismatches."""
    sm = named.sagemaker
    endpoint = contract.deployed_endpoint_name("dev", "summaries")
    arn = sm.describe_endpoint(EndpointName=endpoint)["EndpointArn"]
    sm.add_tags(ResourceArn=arn, Tags=[{"Key": contract.TAG_MODEL_VERSION, "Value": version_arn(1)}])
    parameter = contract.deployment_parameter_name("dev", "summaries")
    record = json.loads(named.ssm.get_parameter(Name=parameter)["Parameter"]["Value"])
    named.ssm.put_parameter(
        Name=parameter,
        Value=json.dumps({**record, "model_version_arn": version_arn(1), "previous_version": None}),
        Type="String",
        Overwrite=True,
    )
    code, out, err = run(capsys, "endpoints", "--env", "dev", "--json")
    assert (code, err) == (0, "")
    listed = {e["name"]: e for e in json.loads(out)}[endpoint]
    assert (listed["serves"], listed["model_version_arn"]) == ("tiny-lora/2", version_arn(2))
    assert listed["endpoint_config"] == f"{endpoint}-v2-config"
    assert listed["mismatch"] == [
        "the endpoint's hfpipe:model-version tag names tiny-lora/1, which is not what serves",
        "the deployment record names tiny-lora/1, which is not what serves",
    ]
    code, out, _ = run(capsys, "endpoints", "--env", "dev")
    row = next(line for line in out.splitlines() if endpoint in line)
    assert "tiny-lora/2" in row and "tiny-lora/1" not in row and "mismatch" in row
    assert (
        f"mismatch: {endpoint} serves tiny-lora/2 (read from the endpoint: its live config's model); the "
        "endpoint's hfpipe:model-version tag names tiny-lora/1"
    ) in " ".join(out.split())


def test_endpoints_delete_by_its_short_name_removes_all_its_deploys_left(
    named: Environment, capsys: Any
) -> None:
    code, out, err = run(capsys, "endpoints", "delete", "summaries", "--env", "dev", "--yes")
    assert (code, err) == (0, ""), out
    endpoint = contract.deployed_endpoint_name("dev", "summaries")
    for gone in sorted(deployed_names("dev", [1, 2])):
        assert gone in out
    assert f"deleted deployment record {contract.deployment_parameter_name('dev', 'summaries')}" in out
    assert f"deleted autoscaling target endpoint/{endpoint}/variant/AllTraffic" in out
    # The run's endpoint and prod's named endpoint stay, with prod's record and autoscaling target.
    assert names(named) == {"dev-run-1-ep", "dev-run-1-config", "dev-run-1-model"} | deployed_names(
        "prod", [1]
    )
    prod_endpoint = contract.deployed_endpoint_name("prod", "summaries")
    ours = [t for t in scalable_targets() if "summaries" in t]
    assert ours == [f"endpoint/{prod_endpoint}/variant/AllTraffic"]
    assert named.ssm.get_parameter(Name=contract.deployment_parameter_name("prod", "summaries"))
    # A rerun finds nothing left, says the delete is done, and exits 0.
    code, out, err = run(capsys, "endpoints", "delete", "summaries", "--env", "dev", "--yes")
    assert (code, err) == (0, "")
    assert "endpoint summaries: nothing of it is left" in " ".join(out.split())


def test_endpoints_delete_refuses_another_environments_named_endpoint(
    named: Environment, capsys: Any
) -> None:
    prod_endpoint = contract.deployed_endpoint_name("prod", "summaries")
    code, _, err = run(capsys, "endpoints", "delete", prod_endpoint, "--env", "dev", "--yes")
    assert code == 1 and "belongs to environment 'prod'" in err
    assert deployed_names("prod", [1]) <= names(named)


@pytest.mark.parametrize(
    "operation",
    ["DeleteEndpoint", "DeleteEndpointConfig", "DeleteModel", "DeregisterScalableTarget", "DeleteParameter"],
)
def test_a_delete_interrupted_at_any_call_is_finished_by_a_rerun(
    named: Environment, capsys: Any, monkeypatch: pytest.MonkeyPatch, operation: str
) -> None:
    """AWS refuses one call (throttling) half-way: the command stops with one line saying a rerun finishes the
    job, and the rerun deletes what is left, the record and the autoscaling target too."""
    original = botocore.client.BaseClient._make_api_call
    refused: list[str] = []

    def once(client: Any, name: str, params: dict[str, Any]) -> Any:
        if name == operation and not refused:
            refused.append(name)
            raise botocore.exceptions.ClientError(
                {"Error": {"Code": "ThrottlingException", "Message": "Rate exceeded"}}, name
            )
        return original(client, name, params)

    monkeypatch.setattr(botocore.client.BaseClient, "_make_api_call", once)
    code, _, err = run(capsys, "endpoints", "delete", "summaries", "--env", "dev", "--yes")
    assert refused == [operation]
    assert code == 1 and "ThrottlingException" in err and "run the same command again to finish" in err, err
    code, out, err = run(capsys, "endpoints", "delete", "summaries", "--env", "dev", "--yes")
    assert (code, err) == (0, ""), out
    assert names(named) == {"dev-run-1-ep", "dev-run-1-config", "dev-run-1-model"} | deployed_names(
        "prod", [1]
    )
    assert [t for t in scalable_targets() if "hfpipe-dev-summaries" in t] == []
    with pytest.raises(named.ssm.exceptions.ParameterNotFound):
        named.ssm.get_parameter(Name=contract.deployment_parameter_name("dev", "summaries"))


def test_a_delete_whose_last_step_failed_after_aws_did_it_is_done_on_its_rerun(
    named: Environment, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DeleteParameter, the last step, answers a 5xx after SSM deleted the record: the
    command exits 1; its rerun finds nothing left, says the delete is done and exits 0."""
    original = botocore.client.BaseClient._make_api_call
    failed: list[str] = []

    def applied_then_5xx(client: Any, name: str, params: dict[str, Any]) -> Any:
        answer = original(client, name, params)
        if name == "DeleteParameter" and not failed:
            failed.append(name)
            raise botocore.exceptions.ClientError(
                {"Error": {"Code": "InternalServerError", "Message": "try again"}}, name
            )
        return answer

    monkeypatch.setattr(botocore.client.BaseClient, "_make_api_call", applied_then_5xx)
    code, _, err = run(capsys, "endpoints", "delete", "summaries", "--env", "dev", "--yes")
    assert failed == ["DeleteParameter"] and code == 1 and "InternalServerError" in err, err
    code, out, err = run(capsys, "endpoints", "delete", "summaries", "--env", "dev", "--yes")
    assert (code, err) == (0, ""), out
    assert "nothing of it is left" in out and "nothing to delete" in " ".join(out.split())


def test_a_fault_at_every_call_of_a_delete_is_one_line_and_a_rerun_finishes(
    named: Environment, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each AWS call `endpoints delete` makes, reads included, fails once in turn (past botocore's retries;
    throttling and a 5xx by turns): one line naming the call and saying a rerun finishes; the rerun deletes
    what is left."""
    faults = on_the_command(monkeypatch, Faults())
    argv = ("endpoints", "delete", "summaries", "--env", "dev", "--yes")
    assert run(capsys, *argv)[0] == 0
    calls = faults.operations()
    assert len(calls) > 10 and "sagemaker.DescribeEndpoint" in calls, calls
    for n in range(len(calls)):
        deploy(named, "summaries", [1, 2])
        faults.calls.clear()
        faults.fail_at, faults.code = n, ("ThrottlingException", "InternalFailure")[n % 2]
        exit_code, _, err = run(capsys, *argv)
        assert faults.failed is not None and err, (n, faults.failed)
        line = one_error_line(err)
        assert exit_code == 1 and faults.code in line, (n, line)
        assert line.endswith("run the same command again to finish (it carries on from what is left)"), line
        faults.fail_at = None
        exit_code, out, err = run(capsys, *argv)
        assert (exit_code, err) == (0, ""), (n, faults.failed[1], out, err)
        left = names(named) - {"dev-run-1-ep", "dev-run-1-config", "dev-run-1-model"}
        assert left == deployed_names("prod", [1]), (n, faults.failed[1])
        assert [t for t in scalable_targets() if "hfpipe-dev-summaries" in t] == []
