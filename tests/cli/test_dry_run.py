"""`hfpipe start --dry-run` is `start` without its last call: for every shipped recipe it prints, as exact JSON,
the plan and the CreateTrainingJob request the pipeline's own Plan state makes for the same start."""

from __future__ import annotations

import json
from typing import Any

import pytest
from cli_moto import Deployed
from cli_run import run
from documents import assert_same_plan

from hfpipe import contract
from hfpipe.cli.aws import execution_arn_for, stored_plan
from hfpipe.core.recipe.recipes import available_recipes
from hfpipe.local.engine.engine import LocalEngine

#: What the Pipeline stack writes and the Plan Lambda reads from its own environment; the rest (the state
#: machine of each test's deployment, the Data stack's buckets) the `deployed` fixture writes.
STACK_KEYS = (contract.SSM_EXECUTION_ROLE_ARN, contract.SSM_SOURCEDIR_URI, contract.SSM_IMAGE_CATALOG)


def stack_parameters(engine: LocalEngine, template: dict[str, Any]) -> dict[str, str]:
    """The SSM parameters the Pipeline stack writes (STACK_KEYS), resolved as the engine resolves them."""
    wanted = {contract.ssm_parameter_name("dev", key) for key in STACK_KEYS}
    found = {
        str(engine.resolve(res["Properties"]["Name"])): str(engine.resolve(res["Properties"]["Value"]))
        for res in template["Resources"].values()
        if res["Type"] == "AWS::SSM::Parameter"
    }
    assert wanted <= set(found), sorted(found)
    return {name: found[name] for name in wanted}


@pytest.fixture
def as_deployed(deployed: Deployed, engine: LocalEngine, pipeline_template: dict[str, Any]) -> Deployed:
    """The environment with the parameters its stack writes. The account's Service Quotas, which the command
    reads with the user's credentials, are the engine's (those its Plan Lambda reads)."""
    for name, value in stack_parameters(engine, pipeline_template).items():
        deployed.ssm.put_parameter(Name=name, Value=value, Type="String", Overwrite=True)
    return deployed


@pytest.mark.parametrize("recipe", available_recipes())
def test_the_dry_run_prints_the_plan_start_makes_as_exact_json(
    recipe: str, as_deployed: Deployed, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = f"dry-{recipe}"
    argv = ["start", "--env", "dev", "--recipe", recipe, "--name", name]
    monkeypatch.setenv("COLUMNS", "60")  # a narrow terminal: long values must not be folded into the JSON
    code, out, err = run(capsys, *argv, "--dry-run")
    assert (code, err) == (0, ""), err
    assert "nothing was started or created" in out
    shown = json.loads(out.split("CreateTrainingJob request:\n", 1)[1])  # the whole rest: exact JSON
    code, out, err = run(capsys, *argv, "--dry-run", "--json")
    assert (code, err) == (0, ""), err
    planned = json.loads(out)
    assert planned["training_job_request"] == shown
    arn = execution_arn_for(as_deployed.state_machine_arn, name)
    assert all(
        e["name"] != name
        for e in as_deployed.sfn.list_executions(stateMachineArn=as_deployed.state_machine_arn)["executions"]
    )

    # The same start, sent: the plan its Plan state stores is the one the dry run printed.
    code, _, err = run(capsys, *argv)
    assert (code, err) == (0, ""), err
    as_deployed.wait_for_state(arn, "Launch")
    events = as_deployed.sfn.get_execution_history(executionArn=arn, maxResults=1000)["events"]
    stored = stored_plan(events)
    as_deployed.wait(arn)
    assert stored is not None
    # The same plan, but for the endpoint's expiry: it counts from each one's planning (docs/deploy.md).
    assert_same_plan(stored.to_json(), planned)
    if planned["deploy"]:
        assert contract.TAG_EXPIRES_AT in {t["Key"] for t in planned["hosting_tags"]}  # dev's day


def test_start_refuses_what_the_dry_run_refuses_before_anything_starts(
    as_deployed: Deployed, capsys: Any
) -> None:
    """The same plan, built the same way: a setting the Plan refuses (here more KV cache than the serving
    instance holds) is refused by plain `start` too, with the dry run's line, and no execution is started."""
    argv = ["start", "--env", "dev", "--recipe", "bloomz-7b1-lora-samsum", "--name", "too-long"]
    argv += ["--set", "serving.server.max_model_len=16384"]
    refusals = []
    for extra in (["--dry-run"], []):
        code, out, err = run(capsys, *argv, *extra)
        assert code == 1 and out == "" and err.count("\n") == 1, (out, err)
        refusals.append(err)
    assert refusals[0] == refusals[1]
    assert refusals[0].startswith("error: recipe.serving.server.max_model_len: 16384 tokens do not fit")
    executions = as_deployed.sfn.list_executions(stateMachineArn=as_deployed.state_machine_arn)["executions"]
    assert all(e["name"] != "too-long" for e in executions)


def test_start_with_credentials_that_cannot_read_quotas_starts_and_says_the_plan_state_checks_them(
    as_deployed: Deployed, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import botocore.exceptions

    from hfpipe.cli.run import dryrun

    def denied(*args: Any, **kwargs: Any) -> Any:
        raise botocore.exceptions.ClientError(
            {"Error": {"Code": "AccessDeniedException", "Message": "not authorized"}}, "ListServiceQuotas"
        )

    monkeypatch.setattr(dryrun, "build_plan", denied)
    argv = ["start", "--env", "dev", "--recipe", "tiny-qa", "--name", "no-quota-read"]
    code, out, err = run(capsys, *argv, "--dry-run")
    assert code == 1 and err.startswith("error: dry run: reading the account's SageMaker quotas")
    code, out, err = run(capsys, *argv)
    assert (code, err) == (0, "")
    assert "note: reading the account's SageMaker quotas" in out and "the Plan state checks the quotas" in out
    as_deployed.wait(execution_arn_for(as_deployed.state_machine_arn, "no-quota-read"))


def test_start_runs_each_recipe_rule_once(
    as_deployed: Deployed, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`hfpipe start` enters the rules through `hfpipe.core.run.plan.accept` alone, before the environment and
    then in it: the schema, the field rules, the instance types and script arguments, the rules between fields
    and the environment's rules each run once (the dry run is start without its last call)."""
    from hfpipe.core import validate
    from hfpipe.core.recipe import acceptance, recipes
    from hfpipe.core.run import plan

    calls: dict[str, int] = {}

    def count(module: Any, name: str) -> None:
        real = getattr(module, name)

        def counted(*args: Any, **kwargs: Any) -> Any:
            calls[name] = calls.get(name, 0) + 1
            return real(*args, **kwargs)

        monkeypatch.setattr(module, name, counted)

    count(recipes, "validate")  # the schema (hfpipe.core.recipe.schema.validate, as resolve_recipe calls it)
    count(validate, "recipe")
    count(acceptance, "check")
    for name in ("check_rules", "check_ownership", "check_distribution"):
        count(plan, name)
    code, _, err = run(capsys, "start", "--env", "dev", "--recipe", "tiny-qa", "--dry-run")
    assert (code, err) == (0, ""), err
    assert calls == {
        "validate": 1,
        "recipe": 1,
        "check": 1,
        "check_rules": 1,
        "check_ownership": 1,
        "check_distribution": 1,
    }
