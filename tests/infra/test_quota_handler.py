"""The quota custom-resource handler against botocore's Stubber (moto has no Service Quotas API)."""

from __future__ import annotations

import pytest

QUOTA_NAME = "ml.g5.2xlarge for training job usage"
QUOTA_CODE = "L-D6DA5B2D"
OTHER_QUOTAS = [
    {"QuotaName": "ml.g5.4xlarge for endpoint usage", "QuotaCode": "L-AAAA0001", "Value": 0.0},
    {"QuotaName": "ml.g5.2xlarge for spot training job usage", "QuotaCode": "L-AAAA0002", "Value": 0.0},
]


@pytest.fixture(scope="module")
def quota(load_lambda):
    return load_lambda("quota/quota_request.py")


@pytest.fixture
def client(quotas_client):
    return quotas_client  # tests/conftest.py: a Stubber-backed Service Quotas client


def _quota(code=QUOTA_CODE, name=QUOTA_NAME, value=0.0):
    return {"QuotaName": name, "QuotaCode": code, "Value": value, "ServiceCode": "sagemaker"}


def stub_lookup(client, *, applied: float | None, default: float = 0.0):
    """AWS's shape: ListServiceQuotas pages through applied values only (a quota with just its default is
    absent), then ListAWSDefaultServiceQuotas pages through every default."""
    first, second = {"ServiceCode": "sagemaker"}, {"ServiceCode": "sagemaker", "NextToken": "page-2"}
    client.stubber.add_response(
        "list_service_quotas", {"Quotas": OTHER_QUOTAS[:1], "NextToken": "page-2"}, first
    )
    tail = [_quota(value=applied)] if applied is not None else []
    client.stubber.add_response("list_service_quotas", {"Quotas": [*OTHER_QUOTAS[1:], *tail]}, second)
    if applied is None:
        client.stubber.add_response(
            "list_aws_default_service_quotas", {"Quotas": OTHER_QUOTAS, "NextToken": "page-2"}, first
        )
        client.stubber.add_response(
            "list_aws_default_service_quotas", {"Quotas": [_quota(value=default)]}, second
        )


def stub_unknown(client):
    client.stubber.add_response("list_service_quotas", {"Quotas": OTHER_QUOTAS}, {"ServiceCode": "sagemaker"})
    client.stubber.add_response(
        "list_aws_default_service_quotas", {"Quotas": [*OTHER_QUOTAS, _quota()]}, {"ServiceCode": "sagemaker"}
    )


def stub_history(client, requests):
    client.stubber.add_response(
        "list_requested_service_quota_change_history_by_quota",
        {"RequestedQuotas": requests},
        {"ServiceCode": "sagemaker", "QuotaCode": QUOTA_CODE},
    )


def test_below_target_requests_an_increase(quota, client):
    stub_lookup(client, applied=1.0)
    stub_history(client, [{"Id": "old", "Status": "APPROVED", "DesiredValue": 1.0}])
    client.stubber.add_response(
        "request_service_quota_increase",
        {"RequestedQuota": {"Id": "req-123", "Status": "PENDING", "DesiredValue": 2.0}},
        {"ServiceCode": "sagemaker", "QuotaCode": QUOTA_CODE, "DesiredValue": 2.0},
    )
    state = quota.ensure_quota(client, "sagemaker", QUOTA_NAME, 2)
    assert (state.status, state.quota_code, state.applied_value) == (quota.REQUESTED, QUOTA_CODE, 1.0)
    assert (state.request_id, state.request_status) == ("req-123", "PENDING")


def test_default_value_applies_when_no_applied_quota_is_set(quota, client):
    stub_lookup(client, applied=None, default=4.0)
    state = quota.ensure_quota(client, "sagemaker", QUOTA_NAME, 2)
    assert state.status == quota.SATISFIED
    assert state.applied_value == 4.0


def test_at_target_requests_nothing(quota, client):
    stub_lookup(client, applied=2.0)
    # No history or request stubs: any further call would raise UnStubbedResponseError.
    state = quota.ensure_quota(client, "sagemaker", QUOTA_NAME, 2)
    assert state.status == quota.SATISFIED
    assert state.attributes()["AppliedValue"] == "2.0"
    assert state.attributes()["RequestId"] == ""


def test_open_request_is_reported_not_repeated(quota, client):
    stub_lookup(client, applied=0.0)
    stub_history(
        client,
        [
            {"Id": "closed", "Status": "DENIED", "DesiredValue": 8.0},
            {"Id": "req-open", "Status": "CASE_OPENED", "DesiredValue": 2.0},
        ],
    )
    state = quota.ensure_quota(client, "sagemaker", QUOTA_NAME, 2)
    assert (state.status, state.request_id, state.request_status) == (
        quota.REQUEST_OPEN,
        "req-open",
        "CASE_OPENED",
    )


def test_request_opened_concurrently_is_reported_as_open(quota, client):
    stub_lookup(client, applied=0.0)
    stub_history(client, [])
    client.stubber.add_client_error(
        "request_service_quota_increase", service_error_code="ResourceAlreadyExistsException"
    )
    assert quota.ensure_quota(client, "sagemaker", QUOTA_NAME, 2).status == quota.REQUEST_OPEN


def test_unknown_quota_name_names_it_and_suggests_close_ones(quota, client):
    stub_unknown(client)
    with pytest.raises(quota.UnknownQuotaError) as raised:
        quota.ensure_quota(client, "sagemaker", "ml.g5.2xlarge for training usage", 2)
    assert str(raised.value) == (
        "quota 'ml.g5.2xlarge for training usage' is not a quota of service 'sagemaker' (neither applied nor "
        "an AWS default); accepted: a quota name as the Service Quotas console lists it, such as "
        "'ml.g5.2xlarge for training job usage'; did you mean 'ml.g5.2xlarge for training job usage', "
        "'ml.g5.2xlarge for spot training job usage', 'ml.g5.4xlarge for endpoint usage'?"
    )


def test_unknown_quota_name_fails_the_custom_resource(quota, client, load_event):
    event = load_event("quota_create.json")
    event["ResourceProperties"]["QuotaName"] = "no such quota"
    stub_unknown(client)
    # The Provider framework reports an exception as FAILED with its message.
    with pytest.raises(quota.UnknownQuotaError, match=r"^QuotaName: quota .no such quota. is not a quota"):
        quota.on_event(event, client)


@pytest.mark.parametrize("code", ["TooManyRequestsException", "ThrottlingException"])
def test_throttling_never_fails_the_deploy(quota, client, load_event, code):
    # TooManyRequestsException is Service Quotas' documented throttling error (API reference, Errors).
    client.stubber.add_client_error("list_service_quotas", service_error_code=code, http_status_code=429)
    body = quota.on_event(load_event("quota_create.json"), client)
    assert body["Data"]["Status"] == quota.UNVERIFIED
    assert code in body["Data"]["Reason"]
    assert body["PhysicalResourceId"] == f"sagemaker/{QUOTA_NAME}"


def test_throttled_request_keeps_what_was_learned(quota, client):
    stub_lookup(client, applied=0.0)
    stub_history(client, [])
    client.stubber.add_client_error(
        "request_service_quota_increase", service_error_code="TooManyRequestsException", http_status_code=429
    )
    state = quota.ensure_quota(client, "sagemaker", QUOTA_NAME, 2)
    assert (state.status, state.quota_code, state.applied_value) == (quota.UNVERIFIED, QUOTA_CODE, 0.0)


@pytest.mark.parametrize(
    "code",
    [
        "AccessDeniedException",
        "DependencyAccessDeniedException",
        "IllegalArgumentException",
        "NoSuchResourceException",
        "ServiceException",
    ],
)
def test_a_refused_check_never_fails_the_deploy(quota, client, load_event, code):
    client.stubber.add_client_error(
        "list_service_quotas", service_error_code=code, service_message="not allowed", http_status_code=400
    )
    body = quota.on_event(load_event("quota_create.json"), client)
    assert body["Data"]["Status"] == quota.REFUSED
    assert body["Data"]["Reason"] == f"ListServiceQuotas: {code}: not allowed"


@pytest.mark.parametrize(
    "code",
    [
        "AccessDeniedException",
        "QuotaExceededException",
        "IllegalArgumentException",
        "InvalidResourceStateException",
        "NoSuchResourceException",
    ],
)
def test_a_refused_request_is_a_status_with_what_was_learned(quota, client, load_event, code):
    stub_lookup(client, applied=0.0)
    stub_history(client, [])
    client.stubber.add_client_error(
        "request_service_quota_increase", service_error_code=code, service_message="no", http_status_code=400
    )
    body = quota.on_event(load_event("quota_create.json"), client)
    assert body["Data"]["Status"] == quota.REFUSED
    assert (body["Data"]["QuotaCode"], body["Data"]["AppliedValue"]) == (QUOTA_CODE, "0.0")
    assert body["Data"]["Reason"] == f"RequestServiceQuotaIncrease: {code}: no"


def test_create_event_reports_attributes(quota, client, load_event):
    stub_lookup(client, applied=1.0)
    stub_history(client, [])
    client.stubber.add_response(
        "request_service_quota_increase",
        {"RequestedQuota": {"Id": "req-9", "Status": "PENDING"}},
        {"ServiceCode": "sagemaker", "QuotaCode": QUOTA_CODE, "DesiredValue": 2.0},
    )
    body = quota.on_event(load_event("quota_create.json"), client)
    assert body == {
        "PhysicalResourceId": f"sagemaker/{QUOTA_NAME}",
        "Data": {
            "Status": "REQUESTED",
            "DesiredValue": "2.0",
            "QuotaCode": QUOTA_CODE,
            "AppliedValue": "1.0",
            "RequestId": "req-9",
            "RequestStatus": "PENDING",
            "Reason": "",
        },
    }


def test_update_event_checks_the_new_target(quota, client, load_event):
    stub_lookup(client, applied=4.0)
    body = quota.on_event(load_event("quota_update.json"), client)
    assert (body["Data"]["Status"], body["Data"]["DesiredValue"]) == ("SATISFIED", "4.0")


def test_delete_event_calls_nothing_and_succeeds(quota, client, load_event):
    event = load_event("quota_delete.json")
    body = quota.on_event(event, client)  # the Stubber has no responses: any API call would raise
    assert body["PhysicalResourceId"] == event["PhysicalResourceId"]


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("DesiredValue", "lots", "DesiredValue: 'lots' is not accepted; accepted: a positive number"),
        ("DesiredValue", "0", "DesiredValue: '0' is not accepted; accepted: a positive number"),
        ("QuotaName", "", "QuotaName: '' is not accepted; accepted: a Service Quotas quota name"),
    ],
)
def test_bad_properties_fail_with_a_clear_reason(quota, client, load_event, field, value, message):
    event = load_event("quota_create.json")
    event["ResourceProperties"][field] = value
    with pytest.raises(ValueError) as raised:
        quota.on_event(event, client)
    assert str(raised.value) == message


def test_handler_leaves_answering_cloudformation_to_the_provider(quota, load_event, lambda_context):
    """No hand-written PUT to the response URL: the module has no HTTP client at all."""
    assert not hasattr(quota, "respond") and not hasattr(quota, "urllib")
