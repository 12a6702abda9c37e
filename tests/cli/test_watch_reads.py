"""The live view's polls read what changed only: the history events newer than the last view's (newest
first, stopping at the first page with an event already seen) and the endpoint once its CreateEndpoint state
has been entered, and show the same as a view read from scratch."""

from __future__ import annotations

import time
from typing import Any

import pytest
from cli_moto import Deployed, sagemaker_backend

from hfpipe.cli import aws
from hfpipe.cli.run import execution


class PagedHistory:
    """GetExecutionHistory as AWS pages it: at most maxResults events (default 100) a page, oldest first or
    newest first (reverseOrder), a nextToken while more remain (AWS API reference, GetExecutionHistory)."""

    def __init__(self, count: int) -> None:
        self.events = [{"id": i, "type": "PassStateEntered"} for i in range(1, count + 1)]
        self.pages = 0

    def get_execution_history(self, **kwargs: Any) -> dict[str, Any]:
        self.pages += 1
        ordered = self.events[::-1] if kwargs.get("reverseOrder") else self.events
        start = int(kwargs.get("nextToken", 0))
        size = kwargs.get("maxResults", 100)
        page: dict[str, Any] = {"events": ordered[start : start + size]}
        if start + size < len(ordered):
            page["nextToken"] = str(start + size)
        return page


def test_new_events_reads_the_newest_event_then_one_page_of_the_new_ones() -> None:
    sfn = PagedHistory(2500)
    assert [e["id"] for e in execution.new_events(sfn, "arn", 0)] == list(range(1, 2501))
    assert sfn.pages == 3  # a whole history: pages of 1000
    sfn.pages = 0
    assert execution.new_events(sfn, "arn", 2500) == []
    assert sfn.pages == 1  # the newest event alone: nothing new
    sfn.events += [{"id": i, "type": "PassStateExited"} for i in range(2501, 2504)]
    sfn.pages = 0
    assert [e["id"] for e in execution.new_events(sfn, "arn", 2500)] == [2501, 2502, 2503]
    assert sfn.pages == 2  # the newest, then a page of the three new ones: not the whole history again


def test_a_second_view_extends_the_first_and_describes_the_endpoint_only_from_its_stage(
    deployed: Deployed,
) -> None:
    arn, plan = deployed.start("reads-1", running=True, wait=False)
    deadline = time.monotonic() + 30
    while plan["training_job_name"] not in sagemaker_backend().training_jobs:  # Launch is creating it
        assert time.monotonic() < deadline, "the training job was never created"
        time.sleep(0.05)
    clients = aws.make_clients(region=deployed.sagemaker.meta.region_name)
    described: list[str] = []
    clients.sagemaker.meta.events.register(
        "provide-client-params.sagemaker.DescribeEndpoint",
        lambda params, **_: described.append(params["EndpointName"]),
    )
    asked: list[dict[str, Any]] = []
    clients.sfn.meta.events.register(
        "provide-client-params.sfn.GetExecutionHistory", lambda params, **_: asked.append(dict(params))
    )

    first = execution.snapshot(clients, arn)
    assert first.plan is not None and first.plan.deploy
    assert (first.endpoint_status, described) == ("not created yet", [])  # Launch runs: no endpoint to read
    deployed.finish_training(plan["training_job_name"])
    assert deployed.wait(arn) == "SUCCEEDED"
    asked.clear()
    second = execution.snapshot(clients, arn, previous=first)
    fresh = execution.snapshot(clients, arn)

    whole = deployed.sfn.get_execution_history(executionArn=arn, maxResults=1000)["events"]
    assert [e["id"] for e in second.events] == [e["id"] for e in whole]
    assert asked[0] == {"executionArn": arn, "reverseOrder": True, "maxResults": 1}
    assert asked[1]["maxResults"] == whole[-1]["id"] - first.events[-1]["id"]  # the new ones, one page
    assert described == [plan["endpoint_name"]] * 2  # CreateEndpoint has run: both views read the endpoint
    for name in ("status", "state", "plan", "endpoint_status", "endpoint_created", "failure", "output"):
        assert getattr(second, name) == getattr(fresh, name), name

    # The local engine pages the history as AWS does (moto alone answers all of it in one page).
    newest = deployed.sfn.get_execution_history(executionArn=arn, reverseOrder=True, maxResults=3)
    assert [e["id"] for e in newest["events"]] == [e["id"] for e in whole[::-1][:3]]
    rest = deployed.sfn.get_execution_history(
        executionArn=arn, reverseOrder=True, maxResults=3, nextToken=newest["nextToken"]
    )
    assert [e["id"] for e in rest["events"]] == [e["id"] for e in whole[::-1][3:6]]
    with pytest.raises(deployed.sfn.exceptions.InvalidToken):
        deployed.sfn.get_execution_history(executionArn=arn, nextToken="not-a-token")
