"""AWS access for the hfpipe command: clients, an environment's resources, executions, one-line errors
(`Clients`, `HfpipeError` and `validate_env_name` live in hfpipe.cli.clients, shared with hfpipe.cli.local_world).

Everything the command needs to find (state machine, buckets, role) is read from the SSM parameters the
stacks write (`hfpipe.contract.ssm_parameter_name`), with the stacks' outputs as a fallback, so the
command never needs the CDK app or `cdk.json` at run time. What an execution planned is read only from
the Plan state's own exit in its history (`stored_plan`), as the typed `hfpipe.core.run.plan_model.Plan`.
"""

from __future__ import annotations

import json
import os
import re
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from hfpipe import contract
from hfpipe.cli.clients import (
    AwsFault,
    Clients,
    HfpipeError,
    UsageError,
    _botocore_session,
    validate_env_name,
)
from hfpipe.core import names

# The commands read an execution's cause through aws.cause_message; the rule is core's (the Lambdas share it).
from hfpipe.core.causes import cause_message as cause_message
from hfpipe.core.run.plan_model import Plan, PlanFormatError

# Stack states in which the stack's outputs and parameters can be trusted.
_READY_STACK_STATES = {"CREATE_COMPLETE", "UPDATE_COMPLETE", "UPDATE_ROLLBACK_COMPLETE", "IMPORT_COMPLETE"}
_EXECUTION_NAME = re.compile(r"^[A-Za-z0-9_-]{1,80}$")


def resolve_region(region: str | None, environ: Mapping[str, str] | None = None) -> str | None:
    """The region as the AWS CLI picks it: --region, then AWS_REGION, then AWS_DEFAULT_REGION; None leaves the
    profile's `region` to botocore. botocore itself reads only AWS_DEFAULT_REGION, so AWS_REGION alone (what
    the AWS CLI v2 and the SDKs read first) would otherwise be ignored."""
    env = os.environ if environ is None else environ
    found = [
        v.strip() for v in (region, env.get("AWS_REGION"), env.get("AWS_DEFAULT_REGION")) if v and v.strip()
    ]
    return found[0] if found else None


def make_clients(profile: str | None = None, region: str | None = None) -> Clients:
    """A boto3 session with credentials and a region, or an HfpipeError saying how to get them."""
    import boto3
    import botocore.exceptions

    region = resolve_region(region)
    try:
        session = boto3.Session(
            profile_name=profile, region_name=region, botocore_session=_botocore_session()
        )
        credentials = session.get_credentials()
    except botocore.exceptions.ProfileNotFound:
        raise HfpipeError(
            f"AWS profile {profile!r} not found: check --profile / AWS_PROFILE against ~/.aws/config"
        ) from None
    if credentials is None:
        raise HfpipeError(
            "no AWS credentials found: run `aws configure` (or `aws sso login`), set AWS_PROFILE, "
            "or try the pipeline without an account: `hfpipe local --recipe tiny-lora`"
        )
    if not session.region_name:
        raise HfpipeError(
            "no AWS region set: pass --region, set AWS_REGION or AWS_DEFAULT_REGION, or give the profile a region "
            "(`aws configure set region eu-west-1`)"
        )
    return Clients(session)


# Tests replace this to hand the commands clients of their own (moto, fakes).
clients_factory: Callable[[str | None, str | None], Clients] = make_clients


def aws_error(exc: Exception, doing: str) -> AwsFault:
    """One line for a botocore error: what failed, AWS's own code and message (on one line)."""
    import botocore.exceptions

    if isinstance(exc, botocore.exceptions.NoCredentialsError):
        return AwsFault(
            "no AWS credentials found: run `aws configure` (or `aws sso login`) or set AWS_PROFILE"
        )
    if isinstance(exc, botocore.exceptions.ClientError):
        err = exc.response.get("Error", {})
        code = err.get("Code", "Error")
        message = " ".join(str(err.get("Message", "")).split())
        if code in {"ExpiredToken", "ExpiredTokenException", "UnrecognizedClientException"}:
            return AwsFault(f"{doing} failed: AWS credentials rejected ({code}); refresh them and retry")
        if code in {"AccessDenied", "AccessDeniedException"}:
            return AwsFault(f"{doing} failed: access denied ({message}); check your role's permissions")
        return AwsFault(f"{doing} failed: {code}: {message}")
    return AwsFault(f"{doing} failed: " + " ".join(str(exc).split()))


def clients_for(args: Any, env: str | None = None) -> Clients:
    """The clients for a command's --profile and --region (through clients_factory, which tests replace); with
    HFPIPE_LOCAL=1, those of local environment `env` (default: --env) instead (hfpipe.cli.local_world)."""
    from hfpipe.cli import local_world

    if local_world.requested():
        return local_world.clients_for(args, env)
    return clients_factory(getattr(args, "profile", None), getattr(args, "region", None))


def call(doing: str, fn: Callable[..., Any], **kwargs: Any) -> Any:
    """``fn(**kwargs)``; a botocore error becomes one line saying what failed."""
    import botocore.exceptions

    try:
        return fn(**kwargs)
    except (botocore.exceptions.ClientError, botocore.exceptions.BotoCoreError) as exc:
        raise aws_error(exc, doing) from None


@dataclass(frozen=True)
class Environment:
    """What one deployed environment offers the command, read from SSM (or stack outputs)."""

    name: str
    region: str
    values: dict[str, str] = field(default_factory=dict)

    def require(self, key: str) -> str:
        """One value (a `hfpipe.contract.SSM_*` key) or an error naming the missing parameter."""
        value = self.values.get(key)
        if not value:
            part = "Data" if key in {contract.SSM_DATA_BUCKET, contract.SSM_ARTIFACTS_BUCKET} else "Pipeline"
            raise HfpipeError(
                f"environment {self.name!r} has no {key}: SSM parameter "
                f"{contract.ssm_parameter_name(self.name, key)} is missing in {self.region}; deploy "
                f"{contract.stack_name(self.name, part)} with `cdk deploy -c env={self.name} --all`"
            )
        return value

    @property
    def state_machine_arn(self) -> str:
        return self.require(contract.SSM_STATE_MACHINE_ARN)

    @property
    def data_bucket(self) -> str:
        return self.require(contract.SSM_DATA_BUCKET)


def _normalized(key: str) -> str:
    return re.sub(r"[^a-z0-9]", "", key.lower())


def _stack(cfn: Any, name: str) -> dict[str, Any] | None:
    import botocore.exceptions

    try:
        stacks = cfn.describe_stacks(StackName=name)["Stacks"]
    except botocore.exceptions.ClientError as exc:
        if exc.response.get("Error", {}).get("Code") == "ValidationError":
            return None  # CloudFormation's way of saying "does not exist"
        raise aws_error(exc, f"reading stack {name}") from None
    return stacks[0] if stacks else None


def resolve_environment(clients: Clients, env: str) -> Environment:
    """Read an environment's SSM parameters; fall back to its stacks' outputs; explain what is missing."""
    import botocore.exceptions

    validate_env_name(env)
    prefix = f"{contract.ssm_parameter_name(env, '')}"
    values: dict[str, str] = {}
    try:
        paginator = clients.ssm.get_paginator("get_parameters_by_path")
        for page in paginator.paginate(Path=prefix.rstrip("/"), Recursive=False):
            for param in page["Parameters"]:
                values[param["Name"][len(prefix) :]] = param["Value"]
    except (botocore.exceptions.ClientError, botocore.exceptions.BotoCoreError) as exc:
        raise aws_error(exc, f"reading SSM parameters under {prefix}") from None

    wanted = [
        contract.SSM_DATA_BUCKET,
        contract.SSM_ARTIFACTS_BUCKET,
        contract.SSM_EXECUTION_ROLE_ARN,
        contract.SSM_SOURCEDIR_URI,
        contract.SSM_STATE_MACHINE_ARN,
        contract.SSM_NOTIFICATION_TOPIC_ARN,
        contract.SSM_IMAGE_CATALOG,
    ]
    if all(values.get(k) for k in wanted):
        return Environment(env, clients.region, values)

    # Outputs are matched by name without punctuation: output StateMachineArn <-> key state-machine-arn.
    stacks = {
        part: _stack(clients.cloudformation, contract.stack_name(env, part)) for part in ("Data", "Pipeline")
    }
    if not values and not any(stacks.values()):
        raise HfpipeError(
            f"unknown environment {env!r}: no SSM parameters under {prefix} and no stack "
            f"{contract.stack_name(env, 'Pipeline')} in {clients.region}; deploy it with "
            f"`cdk deploy -c env={env} --all` or check --region/--profile"
        )
    by_norm = {_normalized(k): k for k in wanted}
    for part, stack in stacks.items():
        if stack is None:
            continue
        status = stack.get("StackStatus", "")
        if status not in _READY_STACK_STATES:
            raise HfpipeError(
                f"stack {contract.stack_name(env, part)} is not deployed (status {status}); "
                f"wait for it or redeploy with `cdk deploy -c env={env} --all`"
            )
        for output in stack.get("Outputs", []):
            key = by_norm.get(_normalized(output.get("OutputKey", "")))
            if key and not values.get(key):
                values[key] = output["OutputValue"]
    return Environment(env, clients.region, values)


def poll_interval(value: float | None, clients: Any, default: float) -> float:
    """--interval as given (more than 0, at most 3600 seconds), else ``default`` on AWS and 1 s in a local
    world, whose waits take seconds."""
    if value is not None:
        if not 0 < value <= 3600:
            raise UsageError(
                f"--interval: {value!r} is not accepted; accepted: seconds, more than 0, at most 3600"
            )
        return value
    return 1.0 if is_local_world(clients) else default


def is_local_world(clients: Any) -> bool:
    """The clients go to a local world environment (hfpipe.cli.local_world), not to AWS: no console there."""
    return getattr(clients, "endpoint_url", None) is not None


def unique_execution_name(head: str, now: datetime | None = None, suffix: str | None = None) -> str:
    """<head>-<UTC time>-<6 hex>, at most 80 characters (Step Functions' limit): readable in the console and
    unique per start, since two starts in one second would otherwise be refused (ExecutionAlreadyExists)."""
    stamp = f"{(now or datetime.now(UTC)).strftime('%Y%m%d-%H%M%S')}-{suffix or uuid.uuid4().hex[:6]}"
    return f"{re.sub(r'[^A-Za-z0-9-]+', '-', head).strip('-')[: 79 - len(stamp)]}-{stamp}"


def console_url(execution_arn: str, region: str) -> str:
    """The Step Functions console page of one execution."""
    return (
        f"https://{region}.console.aws.amazon.com/states/home?region={region}"
        f"#/v2/executions/details/{execution_arn}"
    )


def execution_arn_for(state_machine_arn: str, name: str) -> str:
    """arn:...:stateMachine:SM + name -> arn:...:execution:SM:name (how Step Functions names executions)."""
    return state_machine_arn.replace(":stateMachine:", ":execution:", 1) + f":{name}"


def validate_execution_name(name: str) -> str:
    """An execution name Step Functions accepts, or a one-line error."""
    if not _EXECUTION_NAME.fullmatch(name):
        raise HfpipeError(
            f"--name {name!r} is not a valid execution name: use 1 to 80 letters, digits, '-' or '_'"
        )
    return name


def resolve_execution(clients: Clients, ref: str, env: str | None) -> dict[str, Any]:
    """DescribeExecution for an ARN, or for a name within --env's state machine. With --env, only an
    execution of that environment's own state machine: another one (with a "Plan" state of its own) could
    store a plan that names this environment's jobs and endpoints, which the commands act on."""
    import botocore.exceptions

    if ref.startswith("arn:") and ":execution:" not in ref:
        raise HfpipeError(f"{ref!r} is not an execution ARN: expected arn:aws:states:...:execution:...")
    if not ref.startswith("arn:") and env is None:
        raise HfpipeError(f"execution {ref!r} is a name, not an ARN: add --env ENV to find its state machine")
    if env is None:
        # An ARN alone: the environment is the one whose pipeline ran it (arn:...:execution:<machine>:<name>),
        # checked below like --env; an execution of any other state machine is not the pipeline's.
        parts = ref.split(":")
        env = contract.env_of_state_machine(parts[6]) if len(parts) >= 8 else None
        if env is None or names.env_name_problem(env):
            raise HfpipeError(
                f"execution {ref!r} did not run on an hfpipe pipeline (state machine hfpipe-<env>-pipeline); "
                "hfpipe reads only its own pipeline's executions"
            )
    machine = resolve_environment(clients, env).state_machine_arn if env is not None else None
    arn = ref if ref.startswith("arn:") or machine is None else execution_arn_for(machine, ref)
    try:
        desc = dict(clients.sfn.describe_execution(executionArn=arn))
    except botocore.exceptions.ClientError as exc:
        if exc.response.get("Error", {}).get("Code") in {"ExecutionDoesNotExist", "InvalidArn"}:
            where = f" in environment {env!r}" if env and not ref.startswith("arn:") else ""
            raise HfpipeError(
                f"unknown execution {ref!r}{where}: list executions with `hfpipe list --env {env or 'ENV'}`"
            ) from None
        raise aws_error(exc, f"reading execution {ref}") from None
    except botocore.exceptions.BotoCoreError as exc:
        raise aws_error(exc, f"reading execution {ref}") from None
    if machine is not None and desc.get("stateMachineArn") != machine:
        raise HfpipeError(
            f"execution {ref!r} ran on state machine {desc.get('stateMachineArn')!r}, not on environment "
            f"{env!r}'s ({machine}); hfpipe reads only its own pipeline's executions"
        )
    return desc


def execution_history(sfn: Any, arn: str) -> Iterator[dict[str, Any]]:
    """All history events of an execution, oldest first."""
    paginator = sfn.get_paginator("get_execution_history")
    for page in paginator.paginate(executionArn=arn, reverseOrder=False):
        yield from page["events"]


def _as_json(text: str | None) -> Any:
    if not text:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


#: The state machine's Plan task (stacks/constructs/pipeline_state_machine.py); its ResultPath is $.plan.
PLAN_STATE = "Plan"


def stored_plan(events: list[dict[str, Any]]) -> Plan | None:
    """The plan the pipeline stored: the Plan state's own exit in the history, read with ``Plan.from_json``.

    Only there: until Plan has finished, `$.plan` is whatever the caller sent (a plan written into the
    execution input could name another environment's job or endpoint), and every later state's output is
    built on the input too. Plan's ResultPath replaces `$.plan`, so its exit holds only what the Plan
    Lambda returned. None when Plan has not finished (still planning, it failed, or the execution was
    stopped first); an HfpipeError when the stored plan is not one this hfpipe reads (another release
    wrote it).
    """
    for event in events:
        details = event.get("stateExitedEventDetails")
        if details and details.get("name") == PLAN_STATE:
            doc = _as_json(details.get("output"))
            if not isinstance(doc, dict) or "plan" not in doc:
                return None
            try:
                return Plan.from_json(doc["plan"])
            except PlanFormatError as err:
                raise HfpipeError(f"the execution's stored plan cannot be read: {err}") from None
    return None


def no_plan(desc: dict[str, Any], needed_for: str) -> HfpipeError:
    """The error of a command that needs what only a plan says, for an execution whose Plan did not finish."""
    return HfpipeError(
        f"execution {desc.get('name')!r} ({desc.get('status')}) has no plan, because its Plan state did not "
        f"finish (still planning, failed, or stopped before it): {needed_for}; see `hfpipe report`"
    )
