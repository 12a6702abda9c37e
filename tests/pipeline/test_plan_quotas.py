"""Plan's quota check against Service Quotas answers in AWS's shape (botocore Stubber, real client).

ListServiceQuotas omits quotas that have only their default value and pages with NextToken;
ListAWSDefaultServiceQuotas has the defaults; throttling is TooManyRequestsException
(https://docs.aws.amazon.com/servicequotas/2019-06-24/apireference/API_ListServiceQuotas.html).
"""

from __future__ import annotations

import pytest

from hfpipe.core.run.quotas import QuotaLookupThrottled, QuotaTooLowError, check_quotas

TRAIN = "ml.g5.2xlarge for training job usage"
SERVE = "ml.g5.4xlarge for endpoint usage"
FIRST, SECOND = {"ServiceCode": "sagemaker"}, {"ServiceCode": "sagemaker", "NextToken": "page-2"}


def q(name, value, code="L-00000001"):
    return {"ServiceCode": "sagemaker", "QuotaName": name, "QuotaCode": code, "Value": value}


@pytest.fixture
def client(quotas_client):
    return quotas_client  # tests/conftest.py: a Stubber-backed Service Quotas client


def test_applied_values_on_a_second_page_are_read(client):
    client.stubber.add_response(
        "list_service_quotas", {"Quotas": [q(SERVE, 1.0)], "NextToken": "page-2"}, FIRST
    )
    client.stubber.add_response("list_service_quotas", {"Quotas": [q(TRAIN, 2.0)]}, SECOND)
    assert check_quotas(client, {TRAIN: 1, SERVE: 1}) == {TRAIN: 2.0, SERVE: 1.0}


def test_a_quota_with_only_its_default_value_falls_back_to_the_default(client):
    client.stubber.add_response("list_service_quotas", {"Quotas": [q(SERVE, 1.0)]}, FIRST)
    client.stubber.add_response(
        "list_aws_default_service_quotas", {"Quotas": [q(SERVE, 0.0)], "NextToken": "page-2"}, FIRST
    )
    client.stubber.add_response("list_aws_default_service_quotas", {"Quotas": [q(TRAIN, 4.0)]}, SECOND)
    assert check_quotas(client, {TRAIN: 2, SERVE: 1}) == {TRAIN: 4.0, SERVE: 1.0}


def test_a_default_below_the_need_names_it_as_the_default(client):
    client.stubber.add_response("list_service_quotas", {"Quotas": []}, FIRST)
    client.stubber.add_response("list_aws_default_service_quotas", {"Quotas": [q(TRAIN, 0.0)]}, FIRST)
    with pytest.raises(QuotaTooLowError, match=r"AWS default value \(no increase applied\) 0 < needed 1"):
        check_quotas(client, {TRAIN: 1})


def test_a_name_neither_applied_nor_default_is_refused(client):
    client.stubber.add_response("list_service_quotas", {"Quotas": []}, FIRST)
    client.stubber.add_response("list_aws_default_service_quotas", {"Quotas": [q(SERVE, 0.0)]}, FIRST)
    with pytest.raises(QuotaTooLowError, match="not a quota of service 'sagemaker'"):
        check_quotas(client, {TRAIN: 1})


def test_throttling_becomes_a_retryable_error(client):
    client.stubber.add_client_error(
        "list_service_quotas", service_error_code="TooManyRequestsException", http_status_code=429
    )
    with pytest.raises(QuotaLookupThrottled, match="TooManyRequestsException"):
        check_quotas(client, {TRAIN: 1})


def test_access_denied_is_not_turned_into_throttling(client):
    client.stubber.add_client_error(
        "list_service_quotas", service_error_code="AccessDeniedException", http_status_code=400
    )
    with pytest.raises(Exception, match="AccessDeniedException") as raised:
        check_quotas(client, {TRAIN: 1})
    assert not isinstance(raised.value, QuotaLookupThrottled)
