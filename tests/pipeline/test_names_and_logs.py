"""SageMaker names unique per environment, and the Lambdas' log lines as Lambda's JSON format writes them."""

from __future__ import annotations

import logging

import pytest

from hfpipe.core.names import MAX_SAGEMAKER_NAME, derive_names


def test_two_environments_never_share_a_name():
    dev, prod = derive_names("run-1", "dev"), derive_names("run-1", "prod")
    assert dev["training_job_name"] == "dev-run-1" and prod["training_job_name"] == "prod-run-1"
    assert not set(dev.values()) & set(prod.values())


@pytest.mark.parametrize("execution", ["x" * 80, "a" * 57, "run.with_odd/chars"])
def test_names_stay_within_sagemaker_limits(execution):
    for env in ("dev", "production-eu"):
        names = derive_names(execution, env)
        assert all(len(n) <= MAX_SAGEMAKER_NAME for n in names.values()), names
        assert names["training_job_name"].startswith(f"{env}-")
    # Shortened names keep a hash of the full name: two long names never collide.
    assert derive_names("y" * 80, "dev") != derive_names("y" * 79 + "z", "dev")


def test_every_log_line_names_the_execution(caplog):
    import pipeline_lambdas.aws as aws

    log = aws.logger("pipeline_lambdas.test")
    aws.bind({"plan": {"execution_name": "not-read"}}, "exec-42")  # a handler binds its typed plan's name
    with caplog.at_level(logging.INFO, logger="pipeline_lambdas.test"):
        aws.log_json(log, "launched", training_job_name="dev-exec-42", created=True)
        log.warning("plain line")
    assert [r.execution_name for r in caplog.records] == ["exec-42", "exec-42"]
    # Fields go under one key, so names LogRecord uses itself (created, name, ...) cannot clash.
    assert caplog.records[0].details == {"training_job_name": "dev-exec-42", "created": True}
    aws.bind({"detail": {"name": "from-eventbridge"}})
    with caplog.at_level(logging.INFO, logger="pipeline_lambdas.test"):
        log.info("x")
    assert caplog.records[-1].execution_name == "from-eventbridge"
    aws.bind({"input": {}, "execution_name": "planning"})  # the Plan task's own input
    with caplog.at_level(logging.INFO, logger="pipeline_lambdas.test"):
        log.info("y")
    assert caplog.records[-1].execution_name == "planning"
    # An untyped plan is not read, not even for a log line: only a handler's parsed plan names it.
    aws.bind({"plan": {"execution_name": "untyped"}})
    with caplog.at_level(logging.INFO, logger="pipeline_lambdas.test"):
        log.info("z")
    assert caplog.records[-1].execution_name == ""
