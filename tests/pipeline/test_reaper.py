"""The reaper (lambda/pipeline/pipeline_lambdas/reaper.py) against moto, with local mode's inference components
(hfpipe.local.engine.moto_patches) and CloudWatch's Invocations put as SageMaker publishes them: it deletes only
expired, idle endpoints of its own environment; a fault at each of its calls, then a clean run, deletes nothing
twice and nothing wrong."""

from __future__ import annotations

import contextlib
import json
import re
from collections import Counter
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import boto3
import pytest
from faults import Faults
from moto import mock_aws
from pipeline_lambdas import reaper

from hfpipe import contract
from hfpipe.core.adapters.adapter_deploy import BaseNames
from hfpipe.core.deploy import expiry
from hfpipe.local.engine import cloudwatch, moto_patches
from hfpipe.local.engine.inference_components import SETTLE_SECONDS, InferenceComponents

REGION = "eu-west-1"
IDLE = timedelta(minutes=60)
#: The reaper's clock in these tests: two idle windows after the moto world's endpoints came up (they are made
#: now), so each has lived through its idle window (expiry.up_for_less_than) unless a test says otherwise.
NOW = datetime.now(UTC) + 2 * IDLE
PAST, FUTURE = expiry.stamp(NOW - timedelta(hours=1)), expiry.stamp(NOW + timedelta(hours=3))
BASE = BaseNames.of("dev")


def _tags(env: str = "dev", expires: str | None = PAST, **more: str) -> list[dict[str, str]]:
    tags = {contract.TAG_MANAGED_BY: contract.PROJECT, contract.TAG_ENV: env, **more}
    if expires:
        tags[contract.TAG_EXPIRES_AT] = expires
    return [{"Key": k, "Value": v} for k, v in tags.items()]


class Clock:
    now = 1000.0

    def __call__(self) -> float:
        return self.now


@contextlib.contextmanager
def _moto():
    clock = Clock()
    store = InferenceComponents(time_scale=lambda: 1.0, clock=clock, count=lambda *a: None)
    engine = SimpleNamespace(time_scale=1.0, timeout_scale=1.0, world=None, inference_components=store)
    with contextlib.ExitStack() as stack, mock_aws():
        moto_patches.install(stack, engine)  # type: ignore[arg-type]
        sm = boto3.client("sagemaker", region_name=REGION)
        yield SimpleNamespace(
            sm=sm, cw=boto3.client("cloudwatch", region_name=REGION), clock=clock, role=_role()
        )


def _role() -> str:
    return f"arn:aws:iam::{moto_patches.default_account_id()}:role/r"


def hosting(w, endpoint: str, config: str, model: str, tags, model_tags=None, **variant) -> None:
    """A model, its config (one AllTraffic variant) and the endpoint, tagged."""
    w.sm.create_model(
        ModelName=model,
        ExecutionRoleArn=w.role,
        PrimaryContainer={"Image": "image"},
        Tags=tags if model_tags is None else model_tags,
    )
    fleet = {"VariantName": "AllTraffic", "InstanceType": "ml.g5.xlarge", "InitialInstanceCount": 1}
    fleet = {**fleet, "ModelName": model, **variant}
    w.sm.create_endpoint_config(EndpointConfigName=config, ProductionVariants=[fleet], Tags=tags)
    w.sm.create_endpoint(EndpointName=endpoint, EndpointConfigName=config, Tags=tags)


def shared_base(w, adapters: tuple[str, ...]) -> None:
    """The environment's shared base (an inference-component endpoint) and its adapters."""
    w.sm.create_model(ModelName=BASE.model, ExecutionRoleArn=w.role, PrimaryContainer={"Image": "i"})
    variant = {"VariantName": "AllTraffic", "InstanceType": "ml.g5.4xlarge", "InitialInstanceCount": 1}
    w.sm.create_endpoint_config(
        EndpointConfigName=BASE.endpoint_config, ProductionVariants=[variant], ExecutionRoleArn=w.role
    )
    w.sm.create_endpoint(EndpointName=BASE.endpoint, EndpointConfigName=BASE.endpoint_config, Tags=_tags())
    w.sm.create_inference_component(
        InferenceComponentName=BASE.component,
        EndpointName=BASE.endpoint,
        Specification={
            "ModelName": BASE.model,
            "ComputeResourceRequirements": {
                "NumberOfAcceleratorDevicesRequired": 1,
                "MinMemoryRequiredInMb": 1024,
            },
        },
        RuntimeConfig={"CopyCount": 1},
    )
    w.clock.now += SETTLE_SECONDS["Creating"]
    for name in adapters:
        w.sm.create_inference_component(
            InferenceComponentName=f"hfpipe-dev-adapter-{name}",
            EndpointName=BASE.endpoint,
            Specification={
                "BaseInferenceComponentName": BASE.component,
                "Container": {"ArtifactUrl": f"s3://artifacts/adapters/{name}.tar.gz"},
            },
        )
    w.clock.now += SETTLE_SECONDS["Creating"]


def called(w, endpoint: str, minutes_ago: float) -> None:
    cloudwatch.record_invocation(
        w.cw, endpoint, "AllTraffic", 200, 1000.0, NOW - timedelta(minutes=minutes_ago)
    )


def world_of_survivors(w) -> None:
    """One endpoint to reap, and one of each kind the reaper must leave."""
    hosting(w, "dev-expired-ep", "dev-expired-config", "dev-expired-model", _tags())
    hosting(w, "dev-foreign-ep", "dev-foreign-config", "dev-foreign-model", _tags(env="prod"))
    hosting(
        w,
        "dev-kept-ep",
        "dev-kept-config",
        "dev-kept-model",
        _tags(expires=None, **{contract.TAG_KEEP: "true"}),
    )
    hosting(w, "dev-fresh-ep", "dev-fresh-config", "dev-fresh-model", _tags(expires=FUTURE))
    summaries = _tags(**{contract.TAG_DEPLOYMENT: "summaries"})
    hosting(w, "hfpipe-dev-summaries", "hfpipe-dev-summaries-v1", "hfpipe-dev-summaries-v1", summaries)
    # An earlier deploy's config and model, expired with the endpoint: they stay while it lives.
    w.sm.create_model(
        ModelName="hfpipe-dev-summaries-v0",
        ExecutionRoleArn=w.role,
        PrimaryContainer={"Image": "i"},
        Tags=summaries,
    )
    variant = {"VariantName": "AllTraffic", "InstanceType": "ml.g5.xlarge", "InitialInstanceCount": 1}
    w.sm.create_endpoint_config(
        EndpointConfigName="hfpipe-dev-summaries-v0",
        ProductionVariants=[{**variant, "ModelName": "hfpipe-dev-summaries-v0"}],
        Tags=summaries,
    )
    called(w, "hfpipe-dev-summaries", 10)
    called(w, "dev-expired-ep", 90)  # before the idle window
    shared_base(w, ("samsum",))


def names_of(w) -> dict[str, set[str]]:
    return {
        "endpoints": {e["EndpointName"] for e in w.sm.list_endpoints()["Endpoints"]},
        "configs": {c["EndpointConfigName"] for c in w.sm.list_endpoint_configs()["EndpointConfigs"]},
        "models": {m["ModelName"] for m in w.sm.list_models()["Models"]},
    }


def test_only_expired_idle_own_endpoints_go_with_their_own_config_and_model():
    with _moto() as w:
        world_of_survivors(w)
        # A named endpoint whose model someone else made (no hfpipe tags): the endpoint and config go, it stays.
        hosting(w, "hfpipe-dev-classifier", "hfpipe-dev-classifier-v2", "users-model", _tags(), model_tags=[])
        before = names_of(w)
        run = reaper.reap({"sagemaker": w.sm, "cloudwatch": w.cw}, "dev", NOW, IDLE)
        after = names_of(w)
        assert run.faults == {}
        assert sorted(r.endpoint for r in run.deleted) == ["dev-expired-ep", "hfpipe-dev-classifier"]
        assert before["endpoints"] - after["endpoints"] == {"dev-expired-ep", "hfpipe-dev-classifier"}
        assert before["configs"] - after["configs"] == {"dev-expired-config", "hfpipe-dev-classifier-v2"}
        assert before["models"] - after["models"] == {"dev-expired-model"}
        assert "users-model" in after["models"]
        assert "hfpipe-dev-summaries-v0" in after["configs"] and "hfpipe-dev-summaries-v0" in after["models"]
        assert run.left["dev-foreign-ep"] == "not environment dev's (tag hfpipe:env: prod)"
        assert run.left["dev-kept-ep"] == "no expiry (kept)"
        assert run.left["dev-fresh-ep"] == f"expires at {FUTURE}"
        assert run.left["hfpipe-dev-summaries"].startswith("1 call(s) in the last")
        assert run.left[BASE.endpoint] == "shared base with 1 adapter(s) on it: hfpipe-dev-adapter-samsum"
        # What it saves: ml.g5.xlarge's hourly price x 1 instance x 24, per endpoint.
        per_day = expiry.usd_per_day("ml.g5.xlarge", 1)
        assert per_day and [r.usd_per_day for r in run.deleted] == [per_day, per_day]
        assert reaper.report(None, None, run)["usd_per_day_saved"] == pytest.approx(2 * per_day)


def test_a_shared_base_without_adapters_is_retired_by_the_adapter_state_machine():
    with _moto() as w:
        shared_base(w, ())
        sfn = boto3.client("stepfunctions", region_name=REGION)
        machine = sfn.create_state_machine(
            name="hfpipe-dev-adapters",
            definition='{"StartAt": "A", "States": {"A": {"Type": "Succeed"}}}',
            roleArn=w.role,
        )["stateMachineArn"]
        clients = {"sagemaker": w.sm, "cloudwatch": w.cw, "stepfunctions": sfn}
        first = reaper.reap(clients, "dev", NOW, IDLE, machine)
        again = reaper.reap(clients, "dev", NOW, IDLE, machine)  # within the same hour
        name = f"reaper-retire-{NOW:%Y%m%dT%H}"
        assert first.retiring == {BASE.endpoint: f"retirement started: execution {name}"}
        # StartExecution again with the name and input of a running execution answers that one (a closed one:
        # ExecutionAlreadyExists, said as started already): one execution either way.
        assert again.retiring[BASE.endpoint] in (
            first.retiring[BASE.endpoint],
            f"retirement {name} started already",
        )
        assert not again.faults
        sfn.stop_execution(
            executionArn=sfn.list_executions(stateMachineArn=machine)["executions"][0]["executionArn"]
        )
        closed = reaper.reap(clients, "dev", NOW, IDLE, machine)
        assert closed.retiring == {BASE.endpoint: f"retirement {name} started already"} and not closed.faults
        (execution,) = sfn.list_executions(stateMachineArn=machine)["executions"]
        described = sfn.describe_execution(executionArn=execution["executionArn"])
        assert (execution["name"], json.loads(described["input"])) == (name, {"action": "retire"})
        # The reaper deletes none of the base itself: its state machine does, in AWS's order.
        assert BASE.endpoint in names_of(w)["endpoints"] and not first.deleted


def _small_world(w, env: str) -> None:
    """An endpoint to reap, a kept one and one called recently, all of environment ``env``."""
    hosting(w, f"{env}-expired-ep", f"{env}-expired-config", f"{env}-expired-model", _tags(env))
    kept = _tags(env, expires=None, **{contract.TAG_KEEP: "true"})
    hosting(w, f"{env}-kept-ep", f"{env}-kept-config", f"{env}-kept-model", kept)
    named = contract.deployed_endpoint_name(env, "summaries")
    hosting(w, named, f"{named}-v1", f"{named}-v1", _tags(env))
    called(w, named, 10)


def _reap(w, env: str) -> reaper.Run:
    return reaper.reap({"sagemaker": w.sm, "cloudwatch": w.cw}, env, NOW, IDLE)


def _of(w, env: str) -> dict[str, set[str]]:
    return {kind: {n for n in found if env in n} for kind, found in names_of(w).items()}


def test_a_fault_at_each_call_then_a_clean_run_deletes_nothing_twice_and_nothing_wrong():
    """Each world is its own environment (e0, e1, ...) in one moto account: the reaper reads only its own."""
    with _moto() as w:
        _small_world(w, "clean")
        before = _of(w, "clean")
        with Faults(w.sm.meta.events, w.cw.meta.events) as recorded:
            _reap(w, "clean")
        expected = {k: {n.replace("clean", "{env}") for n in v} for k, v in _of(w, "clean").items()}
        assert before["endpoints"] - _of(w, "clean")["endpoints"] == {"clean-expired-ep"}
        assert len(recorded.calls) > 10
        for at in range(len(recorded.calls)):
            env = f"e{at}"
            _small_world(w, env)
            with Faults(w.sm.meta.events, w.cw.meta.events) as faults:
                faults.fail_at = at
                first, second = _reap(w, env), _reap(w, env)
            assert faults.failed is not None, at
            # The fault is reported, never raised; whatever it interrupted, the next run finishes it.
            assert first.faults and not second.faults, (at, faults.failed[1], first.faults, second.faults)
            left = {k: {n.replace(env, "{env}", 1) for n in v} for k, v in _of(w, f"{env}-").items()}
            assert left == expected, (at, faults.failed[1])
            deletes = Counter(
                (op, str(sorted(params.items())))
                for i, (_, op, params) in enumerate(faults.calls)
                if op.startswith("Delete") and i != at
            )
            assert all(n == 1 for n in deletes.values()), (at, deletes)


def test_endpoints_shows_each_endpoints_expiry_and_idle_time():
    from rich.console import Console

    from hfpipe.cli.deploy import endpoints

    with _moto() as w:
        world_of_survivors(w)
        found = {e.name: e for e in endpoints.find_endpoints(w.sm, "dev", NOW, w.cw)}
        console = Console(record=True, width=200)
        endpoints.print_expiry(console, list(found.values()), "dev")
    assert {n: e.expires for n, e in found.items()} == {
        "dev-expired-ep": "expired",
        "dev-kept-ep": "none (kept)",
        "dev-fresh-ep": "in 3 h",
        "hfpipe-dev-summaries": "expired",
        BASE.endpoint: "expired",
    }
    assert re.fullmatch(r"1[0-4] min", found["hfpipe-dev-summaries"].idle)
    assert re.fullmatch(r"(9[0-9]|1[0-9]{2}) min|1 h", found["dev-expired-ep"].idle)
    # Made when the test began, NOW's two hours before its clock (a few seconds short of them).
    assert re.fullmatch(r"no call since it came up [12] h ago", found["dev-kept-ep"].idle)
    text = console.export_text()
    assert re.search(r"dev-kept-ep: none \(kept\); idle no call since it came up [12] h ago", text)
    assert "dev-expired-ep: expired; idle" in text and "dev-fresh-ep: expires in 3 h; idle" in text
    assert "an expired endpoint is deleted by dev's reaper (hourly) once idle" in " ".join(text.split())
    # Without CloudWatch (a client that cannot read it), the idle time is unknown, never a guess.
    assert endpoints.idle_time(None, "dev-kept-ep", ["AllTraffic"], [], NOW) == "unknown"


def test_an_endpoint_gone_between_the_listing_and_its_look_is_left_without_a_fault(monkeypatch):
    with _moto() as w:
        hosting(w, "dev-expired-ep", "dev-expired-config", "dev-expired-model", _tags())
        listed = reaper.own_endpoints(w.sm, "dev")
        monkeypatch.setattr(reaper, "own_endpoints", lambda sm, env: [*listed, "dev-gone-ep"])
        run = reaper.reap({"sagemaker": w.sm, "cloudwatch": w.cw}, "dev", NOW, IDLE)
    assert run.left == {"dev-gone-ep": "gone"} and not run.faults
    assert [r.endpoint for r in run.deleted] == ["dev-expired-ep"]


def test_an_endpoint_up_for_less_than_the_idle_window_stays_though_expired_and_uncalled():
    """README: deleted "once it has expired and gone an hour without a call"; an endpoint that came up expired
    (a run whose training outlasted its --ttl) 5 minutes ago has not gone an hour, and its smoke test's call may
    not be in CloudWatch yet."""
    with _moto() as w:
        expired = expiry.stamp(datetime.now(UTC) - timedelta(hours=1))
        hosting(
            w,
            "dev-new-ep",
            "dev-new-config",
            "dev-new-model",
            _tags(expires=expired, **{"hfpipe:keep": "true"}),
        )
        came_up = w.sm.describe_endpoint(EndpointName="dev-new-ep")["LastModifiedTime"]
        run = reaper.reap(
            {"sagemaker": w.sm, "cloudwatch": w.cw}, "dev", came_up + timedelta(minutes=5), IDLE
        )
        assert run.left["dev-new-ep"].startswith("up for 5 min, less than the idle window"), run.to_json()
        assert not run.deleted


def test_a_config_or_model_a_users_own_endpoint_or_config_uses_is_never_deleted():
    """SageMaker deletes a config an endpoint runs on and a model a config names without a word: the reaper
    reads every endpoint and config of the account first (a user's own, of any name)."""
    with _moto() as w:
        hosting(w, "dev-run-ep", "dev-run-config", "dev-run-model", _tags())
        hosting(w, "dev-other-ep", "dev-other-config", "dev-other-model", _tags())
        variant = {"VariantName": "AllTraffic", "InstanceType": "ml.g5.xlarge", "InitialInstanceCount": 1}
        w.sm.create_endpoint_config(
            EndpointConfigName="my-config", ProductionVariants=[{**variant, "ModelName": "dev-run-model"}]
        )
        w.sm.create_endpoint(EndpointName="my-endpoint", EndpointConfigName="my-config")
        w.sm.create_endpoint(EndpointName="my-other-endpoint", EndpointConfigName="dev-other-config")
        run = reaper.reap({"sagemaker": w.sm, "cloudwatch": w.cw}, "dev", NOW, IDLE)
        assert sorted(r.endpoint for r in run.deleted) == ["dev-other-ep", "dev-run-ep"], run.to_json()
        assert run.leftovers_deleted == ["endpoint config dev-run-config"]
        assert run.left["dev-run-model"] == "model still used by endpoint config my-config"
        assert run.left["dev-other-config"] == "endpoint config still used by endpoint my-other-endpoint"
        assert run.left["dev-other-model"] == "model still used by endpoint config dev-other-config"
        # The next run (the leftover sweep) keeps them too while they are used.
        again = reaper.reap({"sagemaker": w.sm, "cloudwatch": w.cw}, "dev", NOW, IDLE)
        assert again.leftovers_deleted == [] and not again.faults, again.to_json()
