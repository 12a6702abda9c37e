"""checkov acknowledgements: every check the templates do not meet, with the reason, as checkov reads them.

checkov (the template scanner tests/infra/test_checkov.py runs on every synthesized template) skips a check
for a resource when the resource's ``Metadata.checkov.skip`` lists it with a comment. The reasons live here,
one per (resource type, check), and an aspect puts them on each resource of that type that needs them, so a
new function or log group gets the same reasoned answer and a new kind of finding fails the test.
"""

from __future__ import annotations

from typing import Any

import jsii
from aws_cdk import CfnResource, IAspect
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sqs as sqs
from constructs import IConstruct

FUNCTION = {
    "CKV_AWS_117": "The functions call only AWS APIs (SageMaker, S3, SNS, Step Functions, SSM) over their public "
    "endpoints with IAM; there is no VPC resource to reach, and a VPC would add NAT or endpoint costs per env.",
    "CKV_AWS_115": "Each function runs a few times per pipeline or deploy execution; reserved concurrency would "
    "take capacity from the account's pool for nothing, and Step Functions retries Lambda throttling.",
    "CKV_AWS_173": "The environment variables hold resource names, ARNs and settings from cdk.json, no secret; "
    "Lambda encrypts them at rest with its service key.",
}
#: Only for functions invoked synchronously (by Step Functions, which retries and catches their errors); the
#: asynchronously invoked ones (EventBridge targets) have a dead-letter queue (stacks/functions/common.py).
SYNCHRONOUS_FUNCTION = {
    "CKV_AWS_116": "Invoked synchronously by the state machine, which retries and catches every error; a "
    "dead-letter queue applies to asynchronous invocations only.",
}
#: CDK's own custom-resource handler (the dev buckets' auto-delete-objects): CloudFormation invokes it and
#: waits for its answer, and fails the stack operation when none comes.
PROVIDER_FUNCTION = {
    "CKV_AWS_116": "CDK's custom-resource handler: CloudFormation invokes it and fails the stack operation "
    "when it does not answer; there is no event to keep for later.",
}
LOG_GROUP = {
    "CKV_AWS_158": "CloudWatch Logs encrypts log data at rest with its own keys; these logs hold execution, job "
    "and endpoint names and error messages, no training data or secrets, so a customer managed key per "
    "environment would add a key policy and per-request cost without protecting more.",
}
QUEUE_SQS_MANAGED = {
    "CKV_AWS_27": "Encrypted with SQS-managed keys (SqsManagedSseEnabled), which this check does not read: an "
    "AWS managed KMS key (alias/aws/sqs) would stop EventBridge from delivering to the queue.",
}
ACCESS_LOG_BUCKET = {
    "CKV_AWS_18": "The access-log bucket receives the other buckets' server access logs; it cannot log to "
    "itself.",
    "CKV_AWS_21": "Append-only log objects that expire by a lifecycle rule; versions would only keep deleted "
    "logs longer.",
}


def skip(resource: CfnResource, checks: dict[str, str]) -> None:
    """Add ``checks`` (id -> reason) to the resource's checkov skip list (kept once per id)."""
    metadata: dict[str, Any] = resource.get_metadata("checkov") or {}
    skips = list(metadata.get("skip", []))
    known = {s["id"] for s in skips}
    skips += [{"id": check, "comment": reason} for check, reason in checks.items() if check not in known]
    resource.add_metadata("checkov", {**metadata, "skip": skips})


@jsii.implements(IAspect)
class CheckovAcknowledgements:
    """Put the reasons above on the functions, log groups and queues of a scope (applied by app.py)."""

    def visit(self, node: IConstruct) -> None:
        if isinstance(node, lambda_.CfnFunction):
            asynchronous = node.dead_letter_config is not None
            skip(node, {**FUNCTION, **({} if asynchronous else SYNCHRONOUS_FUNCTION)})
        elif isinstance(node, CfnResource) and node.cfn_resource_type == "AWS::Lambda::Function":
            skip(node, {**FUNCTION, **PROVIDER_FUNCTION})
        elif isinstance(node, logs.CfnLogGroup):
            skip(node, LOG_GROUP)
        elif isinstance(node, sqs.CfnQueue) and node.sqs_managed_sse_enabled:
            skip(node, QUEUE_SQS_MANAGED)


def access_log_bucket(bucket: s3.Bucket) -> None:
    """The reasons for the bucket that holds the other buckets' access logs."""
    skip(bucket.node.default_child, ACCESS_LOG_BUCKET)  # type: ignore[arg-type]
