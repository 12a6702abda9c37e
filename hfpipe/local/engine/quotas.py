"""Service Quotas in local mode: a real boto3 ``service-quotas`` client whose SageMaker answers come from a
table (``QuotaTable``), in the shape AWS answers.

moto cannot play this part: its Service Quotas backend knows only ``vpc`` defaults and has no
ListServiceQuotas. So the client the engine hands the Plan function (through pipeline_lambdas.aws
OVERRIDES) is answered by botocore's event system, the mechanism botocore.stub.Stubber uses: a
``before-call`` hook returns the parsed answer instead of sending the request, after botocore has
validated the request, and each answer is validated against the operation's output shape as Stubber
validates its responses. Stubber itself does not fit: it answers a queue of responses in a fixed order,
while Plan runs once per execution, several executions at once, and reads the defaults only when a quota
has no applied value.

The answers, as AWS gives them
(https://docs.aws.amazon.com/servicequotas/2019-06-24/apireference/API_ListServiceQuotas.html):
ListServiceQuotas lists only the quotas with an applied value (``value_for(name)`` not None),
ListAWSDefaultServiceQuotas every quota with its AWS default (``default``), both paginated with
``NextToken`` (``page_size`` per page).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

#: The operations answered; any other Service Quotas call is refused (moto has no SageMaker quotas).
OPERATIONS = ("ListServiceQuotas", "ListAWSDefaultServiceQuotas")
_PARAMS = "hfpipe.local.engine.quotas.params"


def default_quotas(value: float = 100.0) -> Callable[[str], float]:
    """Every quota has ``value`` applied (enough for any recipe)."""
    return lambda _name: value


class QuotaTable:
    """SageMaker's quotas for the local account: ``value_for(name)`` is the applied value (None: only the
    AWS default, ``default``, applies); ``names`` the quotas that exist (default: one per instance type of
    hfpipe.core.prices and use)."""

    def __init__(
        self,
        value_for: Callable[[str], float | None],
        names: list[str] | None = None,
        *,
        default: float = 0.0,
        page_size: int = 50,
    ) -> None:
        self.value_for = value_for
        self.names = names
        self.default = default
        self.page_size = page_size

    def _names(self) -> list[str]:
        from hfpipe.core.prices import PRICES_USD_PER_HOUR

        return self.names or [
            f"{t} for {use}"
            for t in PRICES_USD_PER_HOUR
            for use in (
                "training job usage",
                "spot training job usage",
                "endpoint usage",
                "processing job usage",
            )
        ]

    def answer(self, operation: str, params: dict[str, Any]) -> dict[str, Any]:
        """One page of ``operation`` (ListServiceQuotas / ListAWSDefaultServiceQuotas) for ``params``."""
        if operation not in OPERATIONS:
            raise NotImplementedError(f"local Service Quotas: {operation} is not answered; only {OPERATIONS}")
        if params["ServiceCode"] != "sagemaker":
            return {"Quotas": []}
        quotas = []
        for index, name in enumerate(self._names()):
            value = self.value_for(name) if operation == "ListServiceQuotas" else self.default
            if value is not None:
                quotas.append(
                    {
                        "ServiceCode": "sagemaker",
                        "ServiceName": "Amazon SageMaker",
                        "QuotaName": name,
                        "QuotaCode": f"L-{index:08X}",
                        "Value": value,
                        "Adjustable": True,
                        "GlobalQuota": False,
                    }
                )
        start = int(params.get("NextToken") or 0)
        size = min(self.page_size, int(params.get("MaxResults") or self.page_size))
        page: dict[str, Any] = {"Quotas": quotas[start : start + size]}
        if start + size < len(quotas):
            page["NextToken"] = str(start + size)
        return page

    def client(self, region: str) -> Any:
        """A boto3 ``service-quotas`` client answered from this table."""
        import boto3

        # Never signed (the hook answers before the request is made): no credentials to look up.
        client = boto3.client(
            "service-quotas", region_name=region, aws_access_key_id="local", aws_secret_access_key="local"
        )
        events = client.meta.events
        events.register("before-parameter-build.service-quotas", _keep_params)
        events.register("before-call.service-quotas", self._before_call)
        return client

    def _before_call(self, model: Any, context: dict[str, Any], **_: Any) -> tuple[Any, dict[str, Any]]:
        from botocore.awsrequest import AWSResponse
        from botocore.validate import validate_parameters

        answer = self.answer(model.name, context[_PARAMS])
        validate_parameters(answer, model.output_shape)  # AWS's shape, as Stubber checks its responses
        metadata = {"HTTPStatusCode": 200, "HTTPHeaders": {}, "RetryAttempts": 0}
        return AWSResponse(None, 200, {}, None), {**answer, "ResponseMetadata": metadata}


def _keep_params(params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
    """The call's parameters as the caller passed them, for the answer (before-call sees them serialized)."""
    context[_PARAMS] = dict(params)
