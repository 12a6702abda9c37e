"""What every AWS-facing part of the command shares: `Clients` (lazily made boto3 clients of one session),
`HfpipeError` (the one-line error) and `validate_env_name`. Re-exported by hfpipe.cli.aws, which makes the
clients for AWS; hfpipe.cli.local_world makes them for an environment of the local world.
"""

from __future__ import annotations

from typing import Any

from hfpipe.core import names


class HfpipeError(Exception):
    """A failure the user can fix; its message is one line that says what to do."""


class UsageError(HfpipeError):
    """A command line the command cannot run (an argument missing, one too many, a value out of range): exit
    status 2 with the subcommand's usage, as argparse's own usage errors."""


class AwsFault(HfpipeError):
    """An AWS call that failed (after botocore's own retries). ``state``: what still runs and what to run next,
    when the one raising it knows; else the command's current state (``hfpipe.cli.aws.state``) is added."""

    def __init__(self, message: str, state: str | None = None) -> None:
        super().__init__(message)
        self.state = state


class _Service:
    """A `Clients` attribute: that service's client, made on first use and kept (`clients.sfn`)."""

    def __init__(self, service: str) -> None:
        self.service = service

    def __get__(self, clients: Clients, owner: type | None = None) -> Any:
        return clients.client(self.service)


class Clients:
    """Lazily created boto3 clients of one session, so commands only pay for the services they use."""

    def __init__(self, session: Any) -> None:
        self.session = session
        self._clients: dict[str, Any] = {}

    @property
    def region(self) -> str:
        return str(self.session.region_name)

    def client(self, service: str) -> Any:
        if service not in self._clients:
            self._clients[service] = self.session.client(service)
        return self._clients[service]

    sfn = _Service("stepfunctions")
    sagemaker = _Service("sagemaker")
    ssm = _Service("ssm")
    cloudformation = _Service("cloudformation")
    cloudwatch = _Service("cloudwatch")
    s3 = _Service("s3")
    logs = _Service("logs")
    runtime = _Service("sagemaker-runtime")


_shared_loader: Any = None


def _botocore_session() -> Any:
    """A botocore session sharing one service-model loader per process (parsing the models is slow)."""
    global _shared_loader
    import botocore.loaders
    import botocore.session

    session = botocore.session.Session()
    if _shared_loader is None:
        _shared_loader = botocore.loaders.create_loader(session.get_config_variable("data_path"))
    session.register_component("data_loader", _shared_loader)
    return session


def validate_env_name(env: str) -> str:
    """The environment name as the stacks accept it, or a one-line usage error (exit 2: its form is known
    before any AWS call)."""
    problem = names.env_name_problem(env)
    if problem:
        raise UsageError(
            f"--env {env!r} is not a valid environment name; accepted: {problem}, as in cdk.json"
        )
    return env
