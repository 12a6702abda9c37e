"""A command under a fault: an AWS call that failed past botocore's own retries gives one line, what failed
and the state it leaves (what still runs, what to run next), never a traceback.

A command says what a fault from a point on leaves with ``state`` (deploy, promote, `endpoints delete`); a
poll loop looks again after a transient fault (``poll``: throttled, 5xx, a connection lost), since what it
follows goes on without the command; ``run`` runs a command and turns each kind of failure into its line and
exit status (docs/cli.md: 1 an error, 2 a usage error, 130 interrupted).
"""

from __future__ import annotations

import contextvars
import json
import sys
import time
from collections.abc import Callable
from typing import Any

from hfpipe.cli.aws import aws_error, call
from hfpipe.cli.clients import AwsFault, HfpipeError, UsageError
from hfpipe.cli.parser import check_rules
from hfpipe.core import throttling
from hfpipe.core.validate import RecipeError

#: What a command that stopped on an AWS fault leaves: what still runs, what to run next (``state``).
_STATE: contextvars.ContextVar[str | None] = contextvars.ContextVar("hfpipe_state", default=None)


def state(text: str | None) -> None:
    """Say what a fault from here on leaves: the error line of an AWS call that fails ends with ``text``
    (what still runs, what to run next); None: nothing to add."""
    _STATE.set(text)


def start_execution(clients: Any, machine: str, name: str, request: dict[str, Any], unsure: str) -> str:
    """StartExecution of ``machine`` named ``name`` with ``request``; the execution's ARN. An answer of 5xx
    may come after the execution started: ``unsure`` is the state of a fault until the answer."""
    state(unsure)
    doing = f"starting {machine.rsplit(':', 1)[-1]}"
    started = call(
        doing, clients.sfn.start_execution, stateMachineArn=machine, name=name, input=json.dumps(request)
    )
    return str(started["executionArn"])


def current_state() -> str | None:
    """The state ``state`` set last (None: none)."""
    return _STATE.get()


def is_transient(exc: BaseException) -> bool:
    """An AWS error that a later call may not get: throttling, a 5xx answer, a connection that failed or
    timed out. botocore has already retried these within the call; a poll loop may look again later."""
    import botocore.exceptions

    if isinstance(exc, botocore.exceptions.ClientError):
        code = str(exc.response.get("Error", {}).get("Code", ""))
        status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0)
        return code in throttling.THROTTLING_CODES or status >= 500
    return isinstance(
        exc,
        (
            botocore.exceptions.EndpointConnectionError,
            botocore.exceptions.ConnectionClosedError,
            botocore.exceptions.ReadTimeoutError,
            botocore.exceptions.ConnectTimeoutError,
        ),
    )


def operation_of(exc: BaseException) -> str:
    """The AWS operation a botocore error names (ClientError.operation_name), else "an AWS call"."""
    name = getattr(exc, "operation_name", None)
    return f"calling {name}" if name else "an AWS call"


#: Looks at an execution a poll loop makes again after a transient fault, before it gives up.
POLL_FAULTS = 5


def poll(
    doing: str,
    fn: Callable[..., Any],
    sleep: Callable[[float], None],
    interval: float,
    **kwargs: Any,
) -> Any:
    """``fn(**kwargs)`` for a poll loop: a transient fault (``is_transient``) is noted on stderr and the call
    made again after ``interval`` (at most ``POLL_FAULTS`` times in a row), since what is followed goes on
    without the command; any other error, or the last transient one, is the command's one-line error."""
    import sys

    import botocore.exceptions

    for attempt in range(POLL_FAULTS + 1):
        try:
            return fn(**kwargs)
        except (botocore.exceptions.ClientError, botocore.exceptions.BotoCoreError) as exc:
            if not is_transient(exc) or attempt == POLL_FAULTS:
                raise aws_error(exc, doing) from None
            print(f"warning: {aws_error(exc, doing)}; looking again in {interval:g} s", file=sys.stderr)
            sleep(interval)
    raise AssertionError("unreachable")


def follow(
    sfn: Any,
    arn: str,
    what: str,
    looks: tuple[str, Callable[..., Any], dict[str, Any]],
    show: Callable[[Any], None],
    last: Any,
    interval: float,
    between: Callable[[], None] = lambda: None,
) -> tuple[dict[str, Any], Any]:
    """Follow the ``what`` execution ``arn`` (deploy, adapter) and what it changes until it ends: every ``interval`` its description and
    ``looks`` (what it is doing, the function, its arguments), ``show`` called with each new look, ``between``
    while it runs; its last description and look. A transient fault of a look is looked at again (``poll``):
    the execution goes on without the command."""
    doing, look, kwargs = looks
    while True:
        desc = poll(
            f"reading the {what} execution", sfn.describe_execution, time.sleep, interval, executionArn=arn
        )
        state = poll(doing, look, time.sleep, interval, **kwargs)
        if state != last:
            show(state)
            last = state
        if desc["status"] != "RUNNING":
            return desc, state
        between()
        time.sleep(interval)


def run(func: Callable[[Any], int], args: Any) -> int:
    """``func(args)``'s exit status; each failure one line on stderr with its exit status."""
    import botocore.exceptions

    state(None)
    try:
        check_rules(args)
        return int(func(args))
    except UsageError as exc:  # a command line the command cannot run: one line, argparse's exit status
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except AwsFault as exc:
        return _fault(str(exc), exc.state)
    except (HfpipeError, RecipeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return _reader_gone()
    except OSError as exc:  # the file system refused what no step checked first (no permission, no space)
        where = f"{exc.filename!r}: " if exc.filename else ""
        print(f"error: {where}{exc.strerror or exc}", file=sys.stderr)
        return 1
    except (botocore.exceptions.ClientError, botocore.exceptions.BotoCoreError) as exc:
        # An AWS call no step of the command wrapped: one line too.
        return _fault(str(aws_error(exc, operation_of(exc))), None)


def _reader_gone() -> int:
    """A command whose output went to a pipe whose reader stopped reading (`hfpipe ... | head`): no traceback,
    the shell's status for it (128 + SIGPIPE). Standard output is pointed at the null device so that Python's
    own flush at exit does not fail once more (the recipe of Python's signal documentation, "Note on SIGPIPE")."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # standard output is no file descriptor (captured): nothing left to flush
        pass
    return 141


def _fault(message: str, raised_state: str | None) -> int:
    """The one line of a command stopped by an AWS fault: what failed, then what still runs and what to run
    next (the raiser's, else the command's ``state``)."""
    said = raised_state if raised_state is not None else current_state()
    print(f"error: {message}" + (f"; {said}" if said else ""), file=sys.stderr)
    return 1
