"""What the pipeline, deploy, adapter and promote state machines share: the error names each integration
retries on (as AWS names them for it), the retry bounds, and the pieces built alike: a retrier, a Lambda task
retried on Lambda's throttling, SageMaker's retries, the Standard workflow itself (X-Ray tracing, every
event logged without execution data).

AWS: https://docs.aws.amazon.com/step-functions/latest/dg/concepts-error-handling.html (retriers, error
names) and https://docs.aws.amazon.com/step-functions/latest/dg/bp-lambda-serviceexception.html (Lambda's).
"""

from __future__ import annotations

from typing import Any, TypeAlias

import aws_cdk as cdk
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_stepfunctions as sfn
from aws_cdk import aws_stepfunctions_tasks as tasks
from constructs import Construct

#: Lambda service errors (CDK's retry_on_service_exceptions covers the first three, plus
#: Lambda.ClientExecutionTimeoutException) and Invoke throttling.
LAMBDA_THROTTLING_ERRORS = ["Lambda.TooManyRequestsException"]
#: Optimized SageMaker integration (createModel, createEndpointConfig, createEndpoint).
SAGEMAKER_OPTIMIZED_ERRORS = ["SageMaker.AmazonSageMakerException"]
#: AWS SDK SageMaker integration (describeEndpoint, describeTrainingJob).
SAGEMAKER_SDK_ERRORS = ["SageMaker.SageMakerException"]
#: Capacity, named the same by both SageMaker integrations.
SAGEMAKER_CAPACITY_ERRORS = ["SageMaker.ResourceLimitExceededException"]
# The states that take Retry and Catch fields (Task states, CDK's or hand-written).
Retryable: TypeAlias = sfn.TaskStateBase | sfn.CustomState
RETRY_INTERVAL = cdk.Duration.seconds(5)
CAPACITY_RETRY_INTERVAL = cdk.Duration.seconds(60)
#: Catch-alls carry validation and access errors too: a few attempts only.
CATCH_ALL_ATTEMPTS = 3
THROTTLING_ATTEMPTS = 6
CAPACITY_ATTEMPTS = 5
#: The running execution, as the Lambdas that find what it (or an earlier one) made get it.
RUNNING = {
    "execution_name": sfn.JsonPath.string_at("$$.Execution.Name"),
    "state_machine": sfn.JsonPath.string_at("$$.StateMachine.Id"),
}


def retry(
    state: Retryable, errors: list[str], attempts: int, interval: cdk.Duration, backoff: float = 2
) -> None:
    state.add_retry(errors=errors, interval=interval, backoff_rate=backoff, max_attempts=attempts)


def retry_sagemaker(state: Retryable, catch_all: list[str]) -> None:
    """A SageMaker integration's retries: its catch-all error a few times, capacity longer apart."""
    retry(state, catch_all, CATCH_ALL_ATTEMPTS, RETRY_INTERVAL)
    retry(state, SAGEMAKER_CAPACITY_ERRORS, CAPACITY_ATTEMPTS, CAPACITY_RETRY_INTERVAL)


def lambda_task(
    scope: Construct,
    cid: str,
    function: lambda_.IFunction,
    result_path: str | None,
    payload: sfn.TaskInput | None = None,
    **options: Any,
) -> tasks.LambdaInvoke:
    """Invoke ``function``; its answer (the payload only) lands at ``result_path``. Lambda's service errors
    and Invoke's throttling are retried."""
    state = tasks.LambdaInvoke(
        scope,
        cid,
        lambda_function=function,
        payload=payload,
        payload_response_only=True,
        result_path=result_path,
        retry_on_service_exceptions=True,
        **options,
    )
    retry(state, LAMBDA_THROTTLING_ERRORS, THROTTLING_ATTEMPTS, RETRY_INTERVAL)
    return state


def describe_sagemaker(
    scope: Construct, cid: str, action: str, name: dict[str, str], resource: str, result_path: str
) -> tasks.CallAwsService:
    """A SageMaker Describe* call through the AWS SDK integration (``action``, e.g. describeEndpoint, with
    ``name`` its one parameter, a JSONPath's value), allowed on ``resource``, its whole answer at
    ``result_path``; retried on the SDK integration's errors."""
    state = tasks.CallAwsService(
        scope,
        cid,
        service="sagemaker",
        action=action,
        parameters=name,
        iam_resources=[resource],
        result_path=result_path,
    )
    retry_sagemaker(state, SAGEMAKER_SDK_ERRORS)
    return state


def log_group(
    scope: Construct,
    cid: str,
    name: str,
    retention: logs.RetentionDays,
    removal_policy: cdk.RemovalPolicy,
) -> logs.LogGroup:
    """The log group of the state machine ``name``. Step Functions writes through CloudWatch Logs' vended-log
    delivery; a group under /aws/vendedlogs/ keeps the log resource policy from growing per group
    (https://docs.aws.amazon.com/step-functions/latest/dg/cw-logs.html)."""
    return logs.LogGroup(
        scope,
        cid,
        log_group_name=f"/aws/vendedlogs/states/{name}",
        retention=retention,
        removal_policy=removal_policy,
    )


def standard_workflow(
    scope: Construct,
    definition: sfn.IChainable,
    *,
    name: str,
    timeout: cdk.Duration,
    log_group: logs.ILogGroup,
) -> sfn.StateMachine:
    """The Standard state machine ``StateMachine`` of ``scope``, named ``name``, traced and logged."""
    return sfn.StateMachine(
        scope,
        "StateMachine",
        definition_body=sfn.DefinitionBody.from_chainable(definition),
        state_machine_name=name,
        state_machine_type=sfn.StateMachineType.STANDARD,
        timeout=timeout,
        tracing_enabled=True,
        logs=sfn.LogOptions(destination=log_group, level=sfn.LogLevel.ALL, include_execution_data=False),
    )


def fail_with(scope: Construct, cid: str, error: str) -> sfn.Fail:
    """A Fail state that ends with the error a Catch kept at ``error`` (its {Error, Cause})."""
    return sfn.Fail(scope, cid, error_path=f"{error}.Error", cause_path=f"{error}.Cause")
