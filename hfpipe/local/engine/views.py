"""Read-only views of a local engine's moto account, for the engine's callers and tests: an execution's whole
history, the SageMaker resources that exist, and the state of the endpoints' alarms (hfpipe.local.engine.engine)."""

from __future__ import annotations

from typing import Any


class EngineViews:
    """Mixed into LocalEngine: everything here reads through ``client(service)``."""

    def client(self, service: str) -> Any:  # pragma: no cover - LocalEngine's
        raise NotImplementedError

    def history(self, arn: str) -> list[dict[str, Any]]:
        """Every history event of an execution, all pages."""
        sfn = self.client("stepfunctions")
        events: list[dict[str, Any]] = []
        kwargs: dict[str, Any] = {"executionArn": arn, "maxResults": 1000}
        while True:
            page = sfn.get_execution_history(**kwargs)
            events.extend(page["events"])
            if not page.get("nextToken"):
                return events
            kwargs["nextToken"] = page["nextToken"]

    def sagemaker_resources(self) -> dict[str, list[str]]:
        """Names of the training jobs, models, endpoint configs and endpoints in moto now."""
        sm = self.client("sagemaker")
        return {
            "training_jobs": [j["TrainingJobName"] for j in sm.list_training_jobs()["TrainingJobSummaries"]],
            "models": [m["ModelName"] for m in sm.list_models()["Models"]],
            "endpoint_configs": [
                c["EndpointConfigName"] for c in sm.list_endpoint_configs()["EndpointConfigs"]
            ],
            "endpoints": [e["EndpointName"] for e in sm.list_endpoints()["Endpoints"]],
        }

    def alarm_states(self, *names: str) -> dict[str, str]:
        """The state moto holds for each CloudWatch alarm named (every alarm when none is), by name."""
        cloudwatch = self.client("cloudwatch")
        alarms = cloudwatch.describe_alarms(**({"AlarmNames": list(names)} if names else {}))["MetricAlarms"]
        return {a["AlarmName"]: a["StateValue"] for a in alarms}
