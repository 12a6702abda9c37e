"""Promotion across environments: the target's Promote state machine, and what a source in another account
grants it.

In the target environment (cdk.json ``promote_from``), ``Promotion`` makes the Promote function
(stacks/functions/promote.py), a Standard state machine named ``contract.promote_state_machine_name`` that
runs it, its log group, and the SSM parameter the command finds it by (``SSM_PROMOTE_STATE_MACHINE_ARN``).

    input   {"version": "<recipe>/<n>" | "<version ARN of the source environment>"}
    output  hfpipe.core.promotion.promote_plan.Promoted: {"schema_version", "source": {env, region, version_arn, ref},
             "target": {env, model_package_group, model_package_arn, version, ref, approval_status}, "image",
             "model_data_url", "created"}
    errors  PromotionRefused (the input, or a version that may not be promoted; nothing written),
            ThrottlingException (retried), anything else AWS answers (the task's error, e.g. AccessDenied)

In a source environment that an environment in another account promotes from, ``share_artifacts`` adds the
artifacts bucket's policy statement for the target's Promote role; the group policies are the source's
Register step's (pipeline_lambdas/register.py, ``share_group``).
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_ssm as ssm
from aws_cdk import aws_stepfunctions as sfn
from aws_cdk import aws_stepfunctions_tasks as tasks
from constructs import Construct

from hfpipe import contract
from hfpipe.core.promotion import promotion, promotion_access
from stacks.config import PromoteOptions, PromotionPeer
from stacks.constructs.pipeline_state_machine import LAUNCH_THROTTLING_ERRORS
from stacks.constructs.state_machine_role import acknowledge_cdk_grants, depend_on_policy_only
from stacks.constructs.workflow import (
    RETRY_INTERVAL,
    THROTTLING_ATTEMPTS,
    lambda_task,
    log_group,
    retry,
    standard_workflow,
)
from stacks.functions.common import FunctionSettings, handler_of
from stacks.functions.promote import TIMEOUT_SECONDS, PromoteFunction

#: Every retry of the one task runs the whole copy again: room for all of them.
EXECUTION_TIMEOUT = cdk.Duration.hours(3)


class Promotion(Construct):
    """The Promote function (``promote``), its state machine (``state_machine``) and the SSM parameter."""

    #: Runtime module -> the Handler of its function (as PipelineLambdas.HANDLERS for the pipeline's).
    HANDLERS = {PromoteFunction.RUNTIME_MODULE: handler_of(PromoteFunction.RUNTIME_MODULE)}

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        settings: FunctionSettings,
        options: PromoteOptions,
        log_retention: logs.RetentionDays = logs.RetentionDays.ONE_MONTH,
        removal_policy: cdk.RemovalPolicy = cdk.RemovalPolicy.DESTROY,
    ) -> None:
        super().__init__(scope, construct_id)
        env = settings.env_name
        source = options.source
        self.promote = PromoteFunction(self, "PromoteFunction", settings=settings, options=options)
        name = contract.promote_state_machine_name(env)
        self.log_group = log_group(self, "LogGroup", name, log_retention, removal_policy)
        self.state_machine = self._state_machine(env, self._task())
        ssm.StringParameter(
            self,
            "StateMachineArnParameter",
            parameter_name=contract.ssm_parameter_name(env, contract.SSM_PROMOTE_STATE_MACHINE_ARN),
            string_value=self.state_machine.state_machine_arn,
            description=f"hfpipe {env}: {contract.SSM_PROMOTE_STATE_MACHINE_ARN} (promotes from {source.name})",
        )
        cdk.CfnOutput(self, "StateMachineArn", value=self.state_machine.state_machine_arn)

    def _task(self) -> tasks.LambdaInvoke:
        """The one task: the Promote function plans and carries out the promotion (every read and check
        before its first write, in one invocation); its answer (hfpipe.core.promotion.promote_plan.Promoted) is the
        output."""
        payload = {
            "input": sfn.JsonPath.object_at("$"),
            "execution_name": sfn.JsonPath.string_at("$$.Execution.Name"),
        }
        timeout = sfn.Timeout.duration(cdk.Duration.seconds(TIMEOUT_SECONDS + 60))
        task = lambda_task(
            self,
            "Promote",
            self.promote.function,
            None,
            sfn.TaskInput.from_object(payload),
            task_timeout=timeout,
        )
        retry(task, LAUNCH_THROTTLING_ERRORS, THROTTLING_ATTEMPTS, RETRY_INTERVAL)
        return task

    def _state_machine(self, env: str, task: tasks.LambdaInvoke) -> sfn.StateMachine:
        name = contract.promote_state_machine_name(env)
        machine = standard_workflow(
            self, task, name=name, timeout=EXECUTION_TIMEOUT, log_group=self.log_group
        )
        depend_on_policy_only(machine)
        acknowledge_cdk_grants(machine.role, [self.promote.function])
        return machine


def share_artifacts(bucket: s3.Bucket, target: PromotionPeer) -> None:
    """Let ``target``'s Promote role, in another account, read this environment's training outputs and
    metrics documents: the account as principal, the role by aws:PrincipalArn (S3 refuses a bucket policy
    naming a role that does not exist yet, and the target may be deployed after this bucket)."""
    if target.account is None:
        raise ValueError(
            f"target {target.name!r}: no account; cross-account sharing needs the target's account"
        )
    stack = cdk.Stack.of(bucket)
    bucket.add_to_resource_policy(
        iam.PolicyStatement(
            sid=promotion_access.bucket_statement_sid(target.name),
            principals=[iam.AccountPrincipal(target.account)],
            actions=["s3:GetObject"],
            resources=[bucket.arn_for_objects(f"{p}*") for p in promotion_access.SOURCE_KEY_PREFIXES],
            conditions={
                "ArnEquals": {
                    "aws:PrincipalArn": promotion.role_arn(stack.partition, target.account, target.name)
                }
            },
        )
    )
