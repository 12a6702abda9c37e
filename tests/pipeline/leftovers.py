"""Leave the shared moto account as a test found it: the session's engine (and any engine another test module
starts in the same session) shares moto's one account, where some tests count every endpoint there is."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any


def _names(engine: Any) -> dict[str, set[str]]:
    cw, sfn = engine.client("cloudwatch"), engine.client("stepfunctions")
    found = {kind: set(names) for kind, names in engine.sagemaker_resources().items()}
    found["alarms"] = {a["AlarmName"] for a in cw.describe_alarms()["MetricAlarms"]}
    found["machines"] = {m["stateMachineArn"] for m in sfn.list_state_machines()["stateMachines"]}
    return found


@contextlib.contextmanager
def removed_after(engine: Any) -> Iterator[None]:
    """Delete every endpoint, config, model, alarm and state machine made inside (moto cannot delete a
    model package version)."""
    before = _names(engine)
    try:
        yield
    finally:
        after = _names(engine)
        sm = engine.client("sagemaker")
        new = {kind: after[kind] - before[kind] for kind in after}
        for name in new["endpoints"]:
            with contextlib.suppress(KeyError, TimeoutError):
                engine.guardrails.wait(name, timeout_s=30)
            sm.delete_endpoint(EndpointName=name)
        for name in new["endpoint_configs"]:
            sm.delete_endpoint_config(EndpointConfigName=name)
        for name in new["models"]:
            sm.delete_model(ModelName=name)
        if new["alarms"]:
            engine.client("cloudwatch").delete_alarms(AlarmNames=sorted(new["alarms"]))
        for arn in new["machines"]:
            engine.client("stepfunctions").delete_state_machine(stateMachineArn=arn)
