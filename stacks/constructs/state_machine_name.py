"""The pipeline state machine's fixed physical name and the ARN built from it.

The Cleanup function checks an abnormal-end event's ``detail.stateMachineArn`` against this ARN
(lambda/pipeline/pipeline_lambdas/execution_end.py); hfpipe.local.engine.engine creates its state machine under
the template's name, so the same check holds locally.
"""

from __future__ import annotations

from constructs import Construct

from hfpipe import contract
from stacks.functions.common import colon_arn


def state_machine_name(env_name: str) -> str:
    """The state machine's physical name: fixed, so its ARN is known without referring to the resource
    (the rule is hfpipe.contract's, which the command reads too)."""
    return contract.state_machine_name(env_name)


def state_machine_arn(scope: Construct, env_name: str) -> str:
    """The ARN of ``env_name``'s state machine, built from its fixed name.

    The Cleanup function checks an abnormal-end event's ``detail.stateMachineArn`` against it; a Ref to
    the state machine would make a cycle (the state machine invokes Cleanup, so it depends on the
    function). Built from the name it has no dependency at all, and needs no run-time lookup (an SSM
    read would add a permission and a failure mode to every abnormal end).
    """
    return colon_arn(scope, "states", "stateMachine", state_machine_name(env_name))
