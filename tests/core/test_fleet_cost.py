"""An endpoint's cost priced per period at the fleet it actually had (hfpipe.core.fleet_cost), and the cost per
million tokens, each against a hand calculation written in the test."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest

from hfpipe.cli.deploy import endpoint_cost
from hfpipe.core import fleet_cost
from hfpipe.core.fleet_cost import Fleet

T0 = datetime(2026, 12, 7, 0, 0, tzinfo=UTC)


def at(hours: float) -> datetime:
    return T0 + timedelta(hours=hours)


class Configs:
    """DescribeEndpointConfig's answers (botocore's shape: ProductionVariants, CreationTime)."""

    def __init__(self, **configs: tuple[str, int, datetime]) -> None:
        self.configs = configs

    def describe_endpoint_config(self, EndpointConfigName: str) -> dict:
        instance_type, count, created = self.configs[EndpointConfigName]
        return {
            "EndpointConfigName": EndpointConfigName,
            "ProductionVariants": [
                {"VariantName": "AllTraffic", "InstanceType": instance_type, "InitialInstanceCount": count}
            ],
            "CreationTime": created,
        }


def test_an_endpoint_that_changed_instance_type_once_is_priced_per_period():
    """Created at 00:00 on 1 x ml.g5.xlarge (1.408 USD/h); its named deploy's update to 1 x ml.g5.4xlarge
    (2.03 USD/h) began at 10:00 (the new config's CreationTime) and its record was written at 10:30; now is
    12:00. Both fleets bill from 10:00 to 10:30:
    1.408 x 10.5 h + 2.03 x 2 h = 14.784 + 4.06 = 18.844 USD (its whole age at today's type: 2.03 x 12 = 24.36)."""
    sagemaker = Configs(old=("ml.g5.xlarge", 1, at(-1)), new=("ml.g5.4xlarge", 1, at(10)))
    record = SimpleNamespace(
        endpoint_config="new", previous_endpoint_config="old", deployed_at=at(10.5).isoformat()
    )
    previous = fleet_cost.previous_fleet(sagemaker, "new", record)
    assert previous == (Fleet("ml.g5.xlarge", 1), at(10), at(10.5))
    periods = fleet_cost.history(T0, Fleet("ml.g5.4xlarge", 1), previous=previous)
    assert fleet_cost.price(periods, at(12)).usd == pytest.approx(18.844)
    # A record of another config (the endpoint was changed since) says nothing of this one's update, nor one
    # whose update ended before the endpoint was created (an endpoint of the same name made again).
    assert fleet_cost.previous_fleet(sagemaker, "other", record) is None
    again = fleet_cost.history(at(11), Fleet("ml.g5.4xlarge", 1), previous=previous)
    assert fleet_cost.price(again, at(12)).usd == pytest.approx(2.03)


def test_both_fleets_are_priced_while_a_blue_green_update_runs():
    """Live: 2 x ml.g5.2xlarge (1.515 USD/h) since 00:00; a blue/green update to 2 x ml.g5.4xlarge (2.03 USD/h)
    started at 11:00 (PendingDeploymentSummary.StartTime) and is under way at 12:00:
    1.515 x 2 x 12 h + 2.03 x 2 x 1 h = 36.36 + 4.06 = 40.42 USD."""
    summary = {
        "EndpointConfigName": "green",
        "StartTime": at(11),
        "ProductionVariants": [
            {
                "VariantName": "AllTraffic",
                "InstanceType": "ml.g5.4xlarge",
                "CurrentInstanceCount": 1,  # one of the two still starting: both bill
                "DesiredInstanceCount": 2,
            }
        ],
    }
    pending = fleet_cost.pending_fleet(summary)
    assert pending == (Fleet("ml.g5.4xlarge", 2), at(11))
    periods = fleet_cost.history(T0, Fleet("ml.g5.2xlarge", 2), pending=pending)
    assert fleet_cost.price(periods, at(12)).usd == pytest.approx(40.42)


def test_a_base_that_was_at_zero_is_priced_only_while_it_had_instances():
    """A shared base on 1 x ml.g5.4xlarge (2.03 USD/h) created at 00:00 scaled to 0 at 02:00 and was woken at
    05:00 (its copy InService at 05:05); now is 06:00. It bills 00:00-02:00 and 05:00-06:00 (the cold start
    included): 2.03 x 3 h = 6.09 USD, where its whole age at one instance would be 2.03 x 6 = 12.18."""
    activities = [  # DescribeScalingActivities, newest first
        {
            "Description": "Setting desired copy count to 1.",
            "StartTime": at(5),
            "EndTime": at(5 + 5 / 60),
            "StatusCode": "Successful",
        },
        {
            "Description": "Setting desired copy count to 0.",
            "StartTime": at(2),
            "EndTime": at(2),
            "StatusCode": "Successful",
        },
        {"Description": "Setting desired copy count to 0.", "StartTime": at(3), "StatusCode": "Failed"},
    ]
    periods = fleet_cost.history(T0, Fleet("ml.g5.4xlarge", 1, initial=1), activities)
    assert [(p.start, p.end, p.count) for p in periods] == [
        (T0, at(2), 1),
        (at(2), at(5), 0),
        (at(5), None, 1),
    ]
    assert fleet_cost.price(periods, at(6)).usd == pytest.approx(6.09)
    # Woken by a deploy (UpdateInferenceComponentRuntimeConfig: no scaling activity) at 05:30 instead: the
    # count now differs from the activities' last, and holds from the component's LastModifiedTime.
    asleep = fleet_cost.history(T0, Fleet("ml.g5.4xlarge", 1, initial=1), activities[1:], changed=at(5.5))
    assert fleet_cost.price(asleep, at(6)).usd == pytest.approx(2.03 * 2.5)


def test_the_cost_per_million_tokens_of_an_endpoint_and_its_adapters():
    """A window of 1 h of 1 x ml.g5.4xlarge: 2.03 USD. Adapter a served 300,000 prompt + 100,000 completion
    tokens, adapter b 50,000 + 50,000: 500,000 in all, so 2.03 / 0.5 = 4.06 USD per million tokens; by tokens,
    a's share is 2.03 x 400,000 / 500,000 = 1.624 USD and b's 0.406 USD (each also 4.06 per million)."""
    window = (at(11), at(12))
    periods = fleet_cost.history(T0, Fleet("ml.g5.4xlarge", 1))
    window_usd = fleet_cost.price(periods, at(12), window).usd
    assert window_usd == pytest.approx(2.03)
    counts = {"a": (300_000, 100_000, 40), "b": (50_000, 50_000, 10), "idle": (0, 0, 0)}
    whole, a, b = endpoint_cost.token_costs(window_usd, counts, window)
    assert (whole.component, whole.tokens, whole.calls) == (None, 500_000, 50)
    assert whole.usd_per_million_tokens == pytest.approx(4.06)
    assert (a.component, a.usd, a.usd_per_million_tokens) == ("a", pytest.approx(1.624), pytest.approx(4.06))
    assert (b.component, b.usd) == ("b", pytest.approx(0.406))
    assert fleet_cost.per_million_tokens(2.03, 0) is None  # no token served: no figure


def test_the_tokens_of_an_answer_are_its_openai_usage():
    assert fleet_cost.usage_of(
        {"usage": {"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17}}
    ) == (
        12,
        5,
    )
    assert fleet_cost.usage_of({"generated_text": "x"}) is None
    assert fleet_cost.usage_of({"usage": {"prompt_tokens": True}}) is None
    assert fleet_cost.usage_of("text") is None


def test_dev_idle_day_priced_per_period_is_the_cost_models_figure():
    """The closing figure of issue 48 both ways: dev's base (1 x ml.g5.4xlarge, 2.03 USD/h) for a day without
    traffic is 2.03 x 24 = 48.72 USD without scale to zero; with it (15 idle minutes), four calls that each find
    it at zero bill 4 x (300 s cold start + 900 s idle) = 4,800 s: 2.03 x 4,800 / 3,600 = 2.7067 USD, the
    figure of tests/core/test_scale_to_zero.py::test_dev_idle_cost_per_day_before_and_after, here from the
    periods its scaling activities give."""
    from hfpipe.core.adapters.scale_to_zero import COLD_START_SECONDS, ScaleToZero, idle_day_usd

    day = (T0, at(24))
    always = fleet_cost.history(T0, Fleet("ml.g5.4xlarge", 1))
    assert fleet_cost.price(always, at(24), day).usd == pytest.approx(48.72)
    activities = [{"Description": "to 0.", "StartTime": T0, "EndTime": T0, "StatusCode": "Successful"}]
    for hour in (1, 7, 13, 19):
        up = at(hour) + timedelta(seconds=COLD_START_SECONDS)
        down = up + timedelta(minutes=15)
        activities += [
            {"Description": "to 1.", "StartTime": at(hour), "EndTime": up, "StatusCode": "Successful"},
            {"Description": "to 0.", "StartTime": down, "EndTime": down, "StatusCode": "Successful"},
        ]
    periods = fleet_cost.history(T0, Fleet("ml.g5.4xlarge", 0, initial=1), activities)
    woken = fleet_cost.price(periods, at(24), day).usd
    assert woken == pytest.approx(2.7067, abs=1e-4)
    assert woken == pytest.approx(
        idle_day_usd("ml.g5.4xlarge", 1, ScaleToZero(enabled=True), wakes=4), abs=1e-4
    )
