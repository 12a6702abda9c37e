"""A guard against process-wide state left behind: the test, or the test file, that leaves it fails, naming it.

The suite runs many test files one after another in each process (pytest-xdist's workers, in a random order),
and some state belongs to the process, not to a test: the environment, the working folder, sys.path and
sys.modules, signal handlers, logging's levels and root handlers, boto3's default session and the handlers
registered on it, moto's mock and the internals local mode patches (hfpipe.local.engine.moto_patches.PATCHED), the
Lambda package's client overrides (pipeline_lambdas.aws), the command's client factory, local mode's running
training processes, and threads. A change left there reaches whichever test the process runs next: a local
engine's executions left running went on in the next test file's engine (its handlers run there, its end
events put on that engine's bus), where replacing boto3's default session under the engine's hooks fails
every deploy of the file, as tests/pipeline/test_deploy_update.py failed in one order of one run.

Two boundaries, so that state a broader fixture owns is no false alarm:

- each test (``_process_state_unchanged``, autouse): compared from after the fixtures of broader scope are set
  up (pytest sets them up first) until after the test's own fixtures are torn down (the guard, autouse from a
  plugin, is the first function fixture set up and the last torn down). A broader fixture the test sets up
  late (``getfixturevalue``) has its changes taken into the test's starting point;
- each test file: compared from before its first test's set-up until after its last test's tear-down, where
  its module fixtures are gone too; threads are compared here only (a module's engine legitimately runs
  threads from one test into the next), after a grace for threads that are ending. Session fixtures set up
  meanwhile have their changes taken into the file's starting point, and state they own is not compared
  after the last test of the run, when they are torn down.

What is no change: an entry added to sys.modules or a logger made (an import), a module's state first read
once a test has imported it (its overrides empty), and boto3's default session made where there was none (the
first ``boto3.client()`` outside a mock makes it, as boto3 intends; mocks set it aside and put it back). A
failing test or file also has what can be put back (environment, folder, sys.path, signals, logging levels, the
overrides) put back, so one leak fails once rather than every test after it. The snapshot is cheap: dictionary
copies and a walk of one event emitter, about a millisecond a test.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

Key = tuple[str, str]
State = dict[Key, Any]

#: Set by pytest for each phase of each test: not a test's state.
PYTEST_VARIABLES = frozenset({"PYTEST_CURRENT_TEST"})
SIGNALS = ("SIGINT", "SIGTERM", "SIGHUP", "SIGALRM", "SIGCHLD", "SIGUSR1", "SIGUSR2", "SIGPIPE")
#: Groups whose keys may appear without a change being a leak: a moto module imported for the first time
#: brings its patch targets.
MAY_APPEAR = frozenset({"moto patch"})
#: How long the file boundary waits for threads that are ending (an event delivery, a server's last request).
THREAD_GRACE_S = 10.0


class Same:
    """Compares by identity: a handler, a client, a session or a thread is the same object or another."""

    __slots__ = ("obj",)

    def __init__(self, obj: Any) -> None:
        self.obj = obj

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Same) and other.obj is self.obj

    def __hash__(self) -> int:
        return id(self.obj)

    def __repr__(self) -> str:
        obj = self.obj
        if obj is None or isinstance(obj, (int, str)):
            return repr(obj)
        if isinstance(obj, threading.Thread):
            return f"thread {obj.name!r}"
        name = getattr(obj, "__qualname__", None) or type(obj).__qualname__
        return f"{getattr(obj, '__module__', None) or type(obj).__module__}.{name} at {id(obj):#x}"


def _resolve(dotted: str) -> Any:
    """The object a dotted name names, through modules already imported only (the guard imports nothing)."""
    parts = dotted.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        module = sys.modules.get(".".join(parts[:cut]))
        if module is not None:
            obj: Any = module
            for part in parts[cut:]:
                obj = vars(obj)[part] if isinstance(obj, type) and part in vars(obj) else getattr(obj, part)
            return obj
    raise LookupError(dotted)


def _handlers(events: Any) -> dict[str, tuple[Same, ...]]:
    """Every event name of a botocore event emitter (a session's ``events``) with its handlers, in order."""
    emitter = getattr(events, "_emitter", events)
    found: dict[str, tuple[Same, ...]] = {}
    stack: list[tuple[tuple[str, ...], dict[str, Any]]] = [((), emitter._handlers._root)]
    while stack:
        path, node = stack.pop()
        values = node.get("values")
        handlers = [h for part in values or () for h in part]
        if handlers:  # an unregistered handler leaves its node behind, empty
            found[".".join(path)] = tuple(Same(h) for h in handlers)
        stack.extend(((*path, chunk), child) for chunk, child in node["children"].items())
    return found


def snapshot() -> State:
    """The process-wide state that matters, as a flat mapping of (group, name) to a comparable value."""
    state: State = {("os.environ", k): v for k, v in os.environ.items() if k not in PYTEST_VARIABLES}
    try:
        state[("process", "working folder")] = os.getcwd()
    except OSError as exc:  # a test removed the folder it stood in
        state[("process", "working folder")] = f"<{exc}>"
    state[("sys", "path")] = tuple(sys.path)
    state[("sys", "modules")] = dict(sys.modules)  # compared by identity, entries only added is no change
    for name in SIGNALS:
        state[("signal handler", name)] = Same(signal.getsignal(getattr(signal, name)))
    _logging(state)
    _boto3(state)
    _moto(state)
    _project(state)
    state.update({("thread", f"{t.name} ({t.ident})"): Same(t) for t in threading.enumerate()})
    return state


def _logging(state: State) -> None:
    state[("logging", "root level")] = logging.root.level
    state[("logging", "disable")] = logging.root.manager.disable
    # pytest's own capture handlers come and go with each phase of each test.
    state[("logging", "root handlers")] = tuple(
        Same(h) for h in logging.root.handlers if not type(h).__module__.startswith("_pytest")
    )
    state[("logging", "levels")] = {
        name: logger.level
        for name, logger in list(logging.root.manager.loggerDict.items())
        if isinstance(logger, logging.Logger)
    }


def _boto3(state: State) -> None:
    boto3 = sys.modules.get("boto3")
    if boto3 is None:
        return
    session = boto3.DEFAULT_SESSION
    state[("boto3", "DEFAULT_SESSION")] = Same(session)
    if session is not None:
        state.update({("boto3.DEFAULT_SESSION handlers", k): v for k, v in _handlers(session.events).items()})


def _moto(state: State) -> None:
    models = sys.modules.get("moto.core.models")
    if models is not None:
        state[("moto", "mocks started")] = models.MockAWS._nested_count
    patches = sys.modules.get("hfpipe.local.engine.moto_patches")
    for dotted in getattr(patches, "PATCHED", ()):
        try:
            value = _resolve(dotted)
        except (LookupError, AttributeError, KeyError):
            continue  # its module is not imported yet
        state[("moto patch", dotted)] = (
            {k: Same(v) for k, v in value.items()} if isinstance(value, dict) else Same(value)
        )


def _project(state: State) -> None:
    aws = sys.modules.get("pipeline_lambdas.aws")
    if aws is not None:
        for name in ("OVERRIDES", "REGION_OVERRIDES"):
            state[("pipeline_lambdas.aws", name)] = {k: Same(v) for k, v in getattr(aws, name).items()}
    cli = sys.modules.get("hfpipe.cli.aws")
    if cli is not None:
        factory = cli.clients_factory
        state[("hfpipe.cli.aws", "clients_factory")] = None if factory is cli.make_clients else Same(factory)
    container = sys.modules.get("hfpipe.local.training.container")
    if container is not None:
        state[("hfpipe.local.training.container", "RUNNING")] = frozenset(Same(p) for p in container.RUNNING)


def _is_lasting(thread: threading.Thread) -> bool:
    """A thread meant to live as long as the process, started by whichever test first needs it: tqdm's
    monitor (one per process, started by the first progress bar) and the jsii runtime's reader of its node
    process's stderr (one per process, started by the first import of the CDK)."""
    target = getattr(thread, "_target", None)
    return type(thread).__module__ == "tqdm._monitor" or (
        thread.name == "process.stderr_sink"
        and getattr(target, "__module__", "") == "jsii._kernel.providers.process"
    )


def changes(before: State, after: State, *, threads: bool = False) -> list[str]:
    """What changed from ``before`` to ``after``, one line each; threads only where ``threads``."""
    found = []
    for key in sorted(before.keys() | after.keys()):
        group, name = key
        if group == "thread":
            if (
                threads
                and key not in before
                and after[key].obj.is_alive()
                and not _is_lasting(after[key].obj)
            ):
                found.append(f"a thread still runs: {name}, started here")
            continue
        if key not in before and (group in MAY_APPEAR or (group in _FIRST_IMPORT and not after[key])):
            continue
        if key == ("boto3", "DEFAULT_SESSION") and before.get(key, Same(None)) == Same(None):
            continue  # made by the first boto3.client() outside a mock, as boto3 does; another one is a change
        if key in _ENTRIES:  # a module imported, a logger made (at its import-time level): no change
            found += [
                f"{group} {name}[{k!r}]: {line}" for k, line in _entries(before.get(key), after.get(key))
            ]
            continue
        if group == "boto3.DEFAULT_SESSION handlers" and before.get(
            ("boto3", "DEFAULT_SESSION")
        ) != after.get(("boto3", "DEFAULT_SESSION")):
            continue  # another session: the session's own line says so
        old, new = before.get(key, _UNSET), after.get(key, _UNSET)
        if old != new:
            change = _path_change(old, new) if key == ("sys", "path") else f"{_show(old)} -> {_show(new)}"
            found.append(f"{group} {name}: {change}")
    return found


#: Groups read from a module once it is imported (moto, the project's): its first import (by a test) brings them,
#: empty or zero.
_FIRST_IMPORT = frozenset(
    {"moto", "pipeline_lambdas.aws", "hfpipe.cli.aws", "hfpipe.local.training.container"}
)
#: Mappings compared entry by entry, where an entry only added is no change.
_ENTRIES = frozenset({("sys", "modules"), ("logging", "levels")})


def _entries(before: dict[str, Any] | None, after: dict[str, Any] | None) -> Iterator[tuple[str, str]]:
    before, after = before or {}, after or {}
    for name, old in before.items():
        new = after.get(name, _UNSET)
        if new is _UNSET:
            yield name, "removed"
        elif new is not old and new != old:
            yield name, f"{_show(old)} -> {_show(new)}"


def _path_change(old: tuple[str, ...], new: tuple[str, ...]) -> str:
    added, removed = Counter(new) - Counter(old), Counter(old) - Counter(new)
    said = [
        f"{what} {sorted(entries.elements())}"
        for what, entries in (("added", added), ("removed", removed))
        if entries
    ]
    return ", ".join(said) or f"the same entries in another order: {list(new)}"


class _Unset:
    def __repr__(self) -> str:
        return "<not set>"


_UNSET = _Unset()


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 300 else text[:297] + "..."


def settle(before: State) -> None:
    """Give threads started since ``before`` THREAD_GRACE_S in all to end (a delivery that is finishing)."""
    deadline = time.monotonic() + THREAD_GRACE_S
    for thread in threading.enumerate():
        if ("thread", f"{thread.name} ({thread.ident})") not in before and not _is_lasting(thread):
            thread.join(max(0.0, deadline - time.monotonic()))


def restore(before: State, after: State) -> None:
    """Put back what can be put back: the environment, the working folder, sys.path, signal handlers, logging's
    levels, the overrides; the rest (a thread, a session, a patch) is only reported."""
    for group, name in after.keys() - before.keys():
        if group == "os.environ":
            os.environ.pop(name, None)
    for (group, name), value in before.items():
        if after.get((group, name), _UNSET) == value:
            continue
        if group == "os.environ":
            os.environ[name] = value
        elif (group, name) == ("process", "working folder") and not value.startswith("<"):
            os.chdir(value)
        elif (group, name) == ("sys", "path"):
            sys.path[:] = value
        elif group == "signal handler" and value.obj is not None:
            signal.signal(getattr(signal, name), value.obj)
        elif (group, name) == ("logging", "root level"):
            logging.root.setLevel(value)
        elif (group, name) == ("logging", "levels"):
            for logger, level in value.items():
                logging.getLogger(logger).setLevel(level)
        elif group == "pipeline_lambdas.aws":
            overrides = getattr(sys.modules["pipeline_lambdas.aws"], name)
            overrides.clear()
            overrides.update({k: v.obj for k, v in value.items()})


def _report(where: str, found: list[str]) -> str:
    return (
        f"{where} left process-wide state changed; every later test in this process would see it (a fixture "
        "or the code that sets it must put it back):\n  " + "\n  ".join(found)
    )


# -- the boundaries ------------------------------------------------------------------------------------------
class _Windows:
    """The starting points being compared against: the running test's and the running file's."""

    def __init__(self) -> None:
        self.test: State | None = None
        self.module: Any = None
        self.module_state: State = {}
        #: Keys a session fixture changed: not compared after the run's last test (its fixtures are gone).
        self.session_owned: set[Key] = set()


WINDOWS = _Windows()


def _fold(state: State | None, before: State, after: State) -> None:
    """Take a broader fixture's changes (``before`` -> ``after``) into a starting point."""
    if state is None:
        return
    for key in before.keys() | after.keys():
        if before.get(key, _UNSET) != after.get(key, _UNSET):
            if key in after:
                state[key] = after[key]
            else:
                state.pop(key, None)


@pytest.hookimpl(wrapper=True)
def pytest_fixture_setup(fixturedef: pytest.FixtureDef[Any], request: pytest.FixtureRequest) -> Iterator[Any]:
    scope = fixturedef.scope
    if scope == "function" or (WINDOWS.test is None and scope not in ("session", "package")):
        return (yield)
    before = snapshot()
    try:
        return (yield)
    finally:
        after = snapshot()
        _fold(WINDOWS.test, before, after)
        if scope in ("session", "package"):
            _fold(WINDOWS.module_state, before, after)
            WINDOWS.session_owned |= {
                k for k in before.keys() | after.keys() if before.get(k, _UNSET) != after.get(k, _UNSET)
            }


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    module = item.getparent(pytest.Module)
    if module is not WINDOWS.module:
        WINDOWS.module, WINDOWS.module_state = module, snapshot()
    return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    result = yield
    module = item.getparent(pytest.Module)
    if nextitem is not None and nextitem.getparent(pytest.Module) is module:
        return result
    before, WINDOWS.module = WINDOWS.module_state, None
    settle(before)
    after = snapshot()
    if nextitem is None:  # the session's fixtures are torn down too: what they own is theirs to put back
        after.update({k: v for k, v in before.items() if k in WINDOWS.session_owned})
        for key in WINDOWS.session_owned - before.keys():
            after.pop(key, None)
    found = changes(before, after, threads=True)
    if found:
        restore(before, after)
        raise AssertionError(_report(f"test file {module.nodeid if module else item.nodeid}", found))
    return result


@pytest.fixture(autouse=True)
def _process_state_unchanged(request: pytest.FixtureRequest) -> Iterator[None]:
    """Fails the test that leaves process-wide state changed (see the module's docstring)."""
    WINDOWS.test = before = snapshot()
    try:
        yield
    finally:
        WINDOWS.test = None
    after = snapshot()
    found = changes(before, after)
    if found:
        restore(before, after)
        pytest.fail(_report(f"test {request.node.nodeid}", found), pytrace=False)
