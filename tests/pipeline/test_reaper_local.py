"""The reaper in local mode, on the real dev template (hfpipe.local.engine): a deploy gives the endpoint it creates
its expiry (``--ttl`` as the execution input's ``ttl``), the template's hourly schedule fires the Reaper function on
the engine's clock (its period times ``time_scale``), and the function deletes the expired, idle endpoint and
leaves the one that has time left; the engine scales the reaper's idle window by ``time_scale``."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest
from accounts import ACCOUNT
from deploy_helpers import ENDPOINT, NAME, register, tags, wiped

from hfpipe import contract
from hfpipe.core.deploy import expiry
from hfpipe.local.engine.engine import scaled_durations

pytestmark = pytest.mark.slow
PAST = expiry.stamp(datetime.now(UTC) - timedelta(hours=1))


@pytest.fixture
def clean(fresh):
    yield from wiped(fresh)


def _expired_run_endpoint(sm) -> None:
    """What a kept run left, past its expiry and never called."""
    tags_ = [
        {"Key": contract.TAG_MANAGED_BY, "Value": contract.PROJECT},
        {"Key": contract.TAG_ENV, "Value": "dev"},
        {"Key": contract.TAG_KEEP, "Value": "true"},
        {"Key": contract.TAG_EXPIRES_AT, "Value": PAST},
    ]
    role = f"arn:aws:iam::{ACCOUNT}:role/r"
    sm.create_model(
        ModelName="dev-old-model", ExecutionRoleArn=role, PrimaryContainer={"Image": "i"}, Tags=tags_
    )
    variant = {"VariantName": "AllTraffic", "ModelName": "dev-old-model", "InstanceType": "ml.m5.large"}
    sm.create_endpoint_config(
        EndpointConfigName="dev-old-config",
        ProductionVariants=[{**variant, "InitialInstanceCount": 1}],
        Tags=tags_,
    )
    sm.create_endpoint(EndpointName="dev-old-ep", EndpointConfigName="dev-old-config", Tags=tags_)
    # Up for two hours, as a kept run's endpoint would be: moto's record of when it came up, moved back (the
    # reaper leaves an endpoint that has not lived through its idle window: expiry.up_for_less_than).
    from moto.sagemaker.models import sagemaker_backends

    region = sm.meta.region_name
    old = sagemaker_backends[ACCOUNT][region].endpoints["dev-old-ep"]
    old.creation_time = old.last_modified_time = old.creation_time - timedelta(hours=2)


def test_the_schedule_fires_the_reaper_which_deletes_the_expired_idle_endpoint_only(clean):
    sm = clean.client("sagemaker")
    version = register(clean)
    machine = clean.state_machine_arns[contract.deploy_state_machine_name("dev")]
    before = datetime.now(UTC).replace(microsecond=0)
    r = clean.run(
        {"version": version, "endpoint": NAME, "ttl": "90m"}, name="ttl-1", state_machine_arn=machine
    )
    assert r.status == "SUCCEEDED", (r.error, r.cause)
    endpoint = sm.describe_endpoint(EndpointName=ENDPOINT)
    expires = expiry.expiry_of(tags(clean, endpoint["EndpointArn"]))
    assert expires is not None and before + timedelta(minutes=90) <= expires <= datetime.now(UTC) + timedelta(
        minutes=90
    )
    config = sm.describe_endpoint_config(EndpointConfigName=endpoint["EndpointConfigName"])
    assert expiry.expiry_of(tags(clean, config["EndpointConfigArn"])) == expires  # and its config, and model
    _expired_run_endpoint(sm)
    [(_, period, targets)] = clean.bus.schedules
    assert period == 3600 and len(targets) == 1
    clean.fire_schedules()
    (kind, target, result) = clean.deliveries[-1]
    assert (kind, target) == ("Scheduled Event", targets[0])
    assert [d["endpoint"] for d in result["deleted"]] == ["dev-old-ep"]
    assert result["usd_per_day_saved"] == expiry.usd_per_day("ml.m5.large", 1)
    assert result["left"][ENDPOINT] == f"expires at {expiry.stamp(expires)}"
    left = clean.sagemaker_resources()
    assert "dev-old-ep" not in left["endpoints"] and ENDPOINT in left["endpoints"]
    assert "dev-old-config" not in left["endpoint_configs"] and "dev-old-model" not in left["models"]


def test_the_schedule_runs_on_the_engines_clock(clean):
    fired = len([d for d in clean.deliveries if d[0] == "Scheduled Event"])
    clean.time_scale = 0.0005  # the hour is 1.8 s
    try:
        deadline = time.monotonic() + 10
        while len([d for d in clean.deliveries if d[0] == "Scheduled Event"]) == fired:
            assert time.monotonic() < deadline, "the schedule did not fire"
            time.sleep(0.1)
    finally:
        clean.time_scale = 0.0
    # The reaper's idle window is on the engine's clock; the endpoints' time to live is the user's.
    assert scaled_durations({"ENDPOINT_TTL_SECONDS": "86400", "IDLE_MINUTES": "60", "X": "7"}, 0.01) == {
        "ENDPOINT_TTL_SECONDS": "86400",
        "IDLE_MINUTES": "0.6",
        "X": "7",
    }
    assert scaled_durations({"IDLE_MINUTES": "60"}, 0) == {"IDLE_MINUTES": "60"}  # under 0 they are no waits
