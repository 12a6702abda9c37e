"""The guard against process-wide state left behind (tests/state_guard.py): what it compares, and, in a pytest
run of its own, that it fails the test or the file that leaves state behind and nothing else (a broader
fixture's state is no false alarm)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import state_guard

TESTS = Path(__file__).resolve().parents[1]


def test_what_a_test_may_change_is_not_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    before = state_guard.snapshot()
    import logging

    monkeypatch.setitem(sys.modules, "a_module_imported_now", type(sys)("a_module_imported_now"))
    logging.getLogger("a.logger.made.now").setLevel(logging.DEBUG)  # a new logger, at its own level
    monkeypatch.setenv("PYTEST_CURRENT_TEST", "pytest's own, for each phase of each test")
    after = state_guard.snapshot()
    assert state_guard.changes(before, after) == []


def test_each_kind_of_change_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    import boto3

    handler = lambda **_: None  # noqa: E731
    monkeypatch.setattr(boto3, "DEFAULT_SESSION", boto3.Session(region_name="eu-west-1"))
    before = state_guard.snapshot()
    monkeypatch.setenv("HFPIPE_GUARD_PROBE", "1")
    monkeypatch.syspath_prepend("/nowhere")
    monkeypatch.setattr(signal, "getsignal", lambda sig: "a handler")
    boto3.DEFAULT_SESSION.events.register("before-call.sagemaker.UpdateEndpoint", handler)
    after = state_guard.snapshot()
    boto3.DEFAULT_SESSION.events.unregister("before-call.sagemaker.UpdateEndpoint", handler)
    found = state_guard.changes(before, after)
    assert "os.environ HFPIPE_GUARD_PROBE: <not set> -> '1'" in found
    assert "sys path: added ['/nowhere']" in found
    assert any(line.startswith("signal handler SIGINT: ") for line in found)
    assert any(
        line.startswith("boto3.DEFAULT_SESSION handlers before-call.sagemaker.UpdateEndpoint: <not set> -> ")
        for line in found
    )
    monkeypatch.setattr(boto3, "DEFAULT_SESSION", boto3.Session(region_name="eu-west-1"))
    assert [line for line in state_guard.changes(before, state_guard.snapshot()) if "boto3" in line] == [
        f"boto3 DEFAULT_SESSION: {before[('boto3', 'DEFAULT_SESSION')]!r} -> "
        f"{state_guard.Same(boto3.DEFAULT_SESSION)!r}"
    ]


def test_a_thread_left_running_is_named_where_threads_are_compared() -> None:
    before = state_guard.snapshot()
    release = threading.Event()
    thread = threading.Thread(target=release.wait, name="left-running", daemon=True)
    thread.start()
    try:
        after = state_guard.snapshot()
        assert state_guard.changes(before, after) == []
        assert state_guard.changes(before, after, threads=True) == [
            f"a thread still runs: left-running ({thread.ident}), started here"
        ]
    finally:
        release.set()
        thread.join()


def test_restore_puts_back_what_it_can(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HFPIPE_GUARD_KEPT", "before")
    before = state_guard.snapshot()
    os.environ["HFPIPE_GUARD_KEPT"] = "after"
    os.environ["HFPIPE_GUARD_ADDED"] = "after"
    path = list(sys.path)
    sys.path.insert(0, "/nowhere")
    state_guard.restore(before, state_guard.snapshot())
    assert os.environ["HFPIPE_GUARD_KEPT"] == "before" and "HFPIPE_GUARD_ADDED" not in os.environ
    assert sys.path == path


#: A run of its own: leaks of each kind, and state that broader fixtures own, which is no leak.
PROBE = """
import os
import threading

import pytest


@pytest.fixture(scope="session")
def session_setting():
    os.environ["PROBE_SESSION"] = "1"  # the session's own: set for every later test, never put back


@pytest.fixture(scope="module")
def module_setting():
    os.environ["PROBE_MODULE"] = "1"
    yield
    del os.environ["PROBE_MODULE"]


def test_a_leak_of_the_test():
    os.environ["PROBE_LEAKED_BY_A_TEST"] = "1"


def test_a_broader_fixture_is_no_leak(module_setting, session_setting):
    assert os.environ["PROBE_MODULE"] == "1"


def test_a_broader_fixture_set_up_late_is_no_leak(request):
    request.getfixturevalue("module_setting")


def test_monkeypatch_puts_back(monkeypatch):
    monkeypatch.setenv("PROBE_MONKEYPATCHED", "1")
"""
LEAKY_MODULE = """
import os
import threading

import pytest


@pytest.fixture(scope="module")
def never_put_back():
    os.environ["PROBE_LEAKED_BY_A_MODULE_FIXTURE"] = "1"
    yield


def test_uses_it(never_put_back):
    threading.Thread(target=threading.Event().wait, name="probe-left-running", daemon=True).start()
"""


def test_the_guard_fails_the_leaking_test_and_file_and_nothing_else(tmp_path: Path) -> None:
    # The thread left running waits for ever: no need to give it the suite's grace.
    (tmp_path / "conftest.py").write_text(
        'import state_guard\n\nstate_guard.THREAD_GRACE_S = 0.5\npytest_plugins = ["state_guard"]\n'
    )
    (tmp_path / "test_a_probe.py").write_text(PROBE)
    (tmp_path / "test_b_leaky_module.py").write_text(LEAKY_MODULE)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])}
    env.pop("PYTEST_XDIST_WORKER", None)
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:randomly", "-p", "no:cacheprovider", "-n", "0", "-rE"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    errors = sorted(line.split(" - ")[0] for line in run.stdout.splitlines() if line.startswith("ERROR "))
    assert errors == [
        "ERROR test_a_probe.py::test_a_leak_of_the_test",
        "ERROR test_b_leaky_module.py::test_uses_it",  # the file's last test: its tear-down ends the file
    ], run.stdout + run.stderr
    assert "os.environ PROBE_LEAKED_BY_A_TEST: <not set> -> '1'" in run.stdout
    assert "os.environ PROBE_LEAKED_BY_A_MODULE_FIXTURE: <not set> -> '1'" in run.stdout
    assert "a thread still runs: probe-left-running" in run.stdout
    assert "PROBE_MODULE" not in run.stdout and "PROBE_SESSION" not in run.stdout
    assert "5 passed" in run.stdout and "2 errors" in run.stdout
