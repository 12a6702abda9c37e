"""Fixtures shared by every part of the test suite. Keep this small and generic."""

from __future__ import annotations

import getpass
import importlib.util
import logging
import os
import re
import resource
import shutil
import sys
import tempfile
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any
from unittest import mock

import pytest

# Fails the test, or the test file, that leaves process-wide state changed (tests/state_guard.py).
pytest_plugins = ["state_guard"]

# jsii prints a banner per process on a Node version it has not certified; the tests do not need it.
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
os.environ.setdefault("JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION", "1")
os.environ.setdefault("CDK_DISABLE_CLI_TELEMETRY", "true")
os.environ.setdefault("SAGEMAKER_SUPPRESS_V2_WARNING", "1")
# One intra-op thread for torch in this process and every child (local worlds, `hfpipe local`, their training
# containers): the models here are tiny, and on a busy 2-core machine OpenMP's threads spin against each
# other and the other workers. tiny-mnli's 200 steps trained in 78 s with torch's default threads, 6 s with one
# (`hfpipe local` of the whole run: 91 s of CPU, 54 s). Set before anything imports torch; a value given
# outside wins.
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")
# The tokenizers library sets TOKENIZERS_PARALLELISM=false itself when a process that has used a fast tokenizer
# forks: set from the start, a test does not run differently for whether an earlier one forked (nor warn).
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# torch sets TORCHINDUCTOR_CACHE_DIR in the environment the first time anything asks for its compile cache
# (torch._inductor.runtime.cache_dir_utils.cache_dir, reached from generation): set from the start to the
# folder torch would choose (its default_cache_dir, without importing torch here), for the same reason.
os.environ.setdefault(
    "TORCHINDUCTOR_CACHE_DIR",
    os.path.join(tempfile.gettempdir(), "torchinductor_" + re.sub(r'[\\/:*?"<>|]', "_", getpass.getuser())),
)

REPO_ROOT = Path(__file__).resolve().parent.parent
# The inference handlers import their sibling `request_checks` as they do in <model_dir>/code/ on an
# endpoint; tests load them by path from training_code/, so that folder is importable too (last, so it
# shadows nothing).
if str(REPO_ROOT / "training_code") not in sys.path:
    sys.path.append(str(REPO_ROOT / "training_code"))
EVENTS_DIR = Path(__file__).resolve().parent / "events"
#: The slowest test files listed at the end of a run (`.ci/run` shows them, so a regression is visible).
SLOWEST_FILES = 15


def pytest_configure(config: pytest.Config) -> None:
    """One synthesis cache for the whole run: every `hfpipe local` run, `local up` world and local-stack test of
    this run, in every worker (xdist workers inherit the variable), shares a folder made here, and removed at
    the end; a new run starts from an empty one, so nothing depends on an earlier run. Likewise the folder
    where the `synthesized` fixture's one synthesis of the run is shared (SHARED_ENV)."""
    from hfpipe.local.stacks import CACHE_ENV

    # The command sizes its tables to COLUMNS when set (as a terminal would); the tests read those tables, so
    # they run without it whatever started them (a pytest-xdist worker was seen with COLUMNS=80).
    os.environ.pop("COLUMNS", None)
    if hasattr(config, "workerinput"):
        return
    # The run's shared folder: the `synthesized` fixture's one synthesis for every worker (app_synth).
    shared = tempfile.mkdtemp(prefix="hfpipe-tests-shared-")
    os.environ[SHARED_ENV] = shared
    config.stash[_SHARED] = shared
    if os.environ.get(CACHE_ENV):
        return
    folder = tempfile.mkdtemp(prefix="hfpipe-tests-synth-")
    os.environ[CACHE_ENV] = folder
    config.stash[_OWN_CACHE] = folder


def pytest_unconfigure(config: pytest.Config) -> None:
    shared = config.stash.get(_SHARED, None)
    if shared:
        os.environ.pop(SHARED_ENV, None)
        shutil.rmtree(shared, ignore_errors=True)
    folder = config.stash.get(_OWN_CACHE, None)
    if folder:
        from hfpipe.local.stacks import CACHE_ENV

        os.environ.pop(CACHE_ENV, None)
        shutil.rmtree(folder, ignore_errors=True)


#: The longest test files, in seconds of setup + call + teardown on a 2-core machine with three workers
#: (scripts/test.sh; the run's own "slowest test files" table shows today's figures), measured on this
#: machine idle on 2026-12-07 (the suite: 2,305 tests, 1,751 s of test time, 659 s wall); the 15 slowest of
#: them again that evening, with one helper's tests beside the run (2,517 tests, 2,108 s of test time, 773 s). They go first,
#: longest first; a file not listed counts SLOW_TEST_SECONDS per slow test. Only the order depends on these:
#: a long file the table misses is handed out late, and one worker then finishes it alone at the end (the
#: adapters walk-through, 118 s, counted as 5 s until this table named it). The files that run executions on
#: a local engine (test_use, the fault matrix, promote, the adapter state machine) are scaled by the CPU they
#: took alone before and after the engine kept each definition's parse tree (moto_patches._parsed_definitions:
#: 17%, 17%, 8% and 9% less, two alternating runs each, 2026-12-07).
LONGEST_FILES = {
    "tests/cli/test_local_world.py": 239,
    "tests/training/test_local_substitutions.py": 154,
    "tests/cli/test_walkthrough_adapters.py": 131,
    "tests/benchmarks/test_gpu_run.py": 77,
    "tests/cli/test_use.py": 60,
    "tests/cli/test_local.py": 69,
    "tests/cli/test_walkthrough_openai.py": 69,
    "tests/pipeline/test_pipeline_fault_matrix.py": 49,
    "tests/pipeline/test_promote.py": 50,
    "tests/cli/test_models.py": 54,
    "tests/hostile/test_hostile_local_mode.py": 52,
    "tests/cli/test_walkthrough.py": 49,
    "tests/training/test_clm_training.py": 47,
    "tests/hostile/test_hostile_cli_options.py": 45,
    "tests/cli/test_dry_run.py": 45,
    "tests/pipeline/test_adapter_state_machine.py": 36,
    "tests/pipeline/test_pipeline_limits.py": 40,
    "tests/benchmarks/test_gpu_lora.py": 34,
    "tests/training/test_classification.py": 34,
    "tests/pipeline/test_deploy_limits.py": 33,
    # Alone, with the local environment's synthesis its first dry run pays (shared with the run's other
    # local-mode tests when they come first): 46 s, 2026-12-07.
    "tests/layout/test_doc_commands.py": 46,
}
SLOW_TEST_SECONDS = 5


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The longest files first (LONGEST_FILES, else SLOW_TEST_SECONDS per slow test), each file's tests kept
    together and in the order the random ordering gave them: scripts/test.sh hands whole files to the workers
    (`--dist loadfile`) in this order, so the long files start early and the short ones fill the gaps,
    instead of one worker finishing a long file alone at the end. Every worker collects the same order (the
    same random seed)."""
    slow: defaultdict[str, int] = defaultdict(int)
    first_seen: dict[str, int] = {}
    for index, item in enumerate(items):
        path = item.nodeid.split("::", 1)[0]
        first_seen.setdefault(path, index)
        slow[path] += item.get_closest_marker("slow") is not None

    def seconds(path: str) -> int:
        return LONGEST_FILES.get(path, SLOW_TEST_SECONDS * slow[path])

    items.sort(key=lambda item: (-seconds(p := item.nodeid.split("::", 1)[0]), first_seen[p]))


def _cpu_seconds() -> float:
    """CPU seconds of this process and of its children that ended (user + system)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """Each test's CPU seconds (its process's and its ended children's: a training run, `hfpipe local up`),
    carried to the controller with its teardown report: the suite's time on CI is CPU-bound, and a wait
    costs a worker wall time but no CPU."""
    item.stash[_CPU_START] = _cpu_seconds()
    yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    if call.when == "teardown" and _CPU_START in item.stash:
        item.user_properties.append(("cpu_s", _cpu_seconds() - item.stash[_CPU_START]))
    yield


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Seconds per test file: setup, call and teardown of its tests, and their CPU seconds (in the controller,
    every worker's)."""
    path = report.nodeid.split("::", 1)[0]
    _FILE_SECONDS[path] += report.duration
    _FILE_CPU[path] += sum(
        value for key, value in report.user_properties if key == "cpu_s" and report.when == "teardown"
    )


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    seconds = _FILE_SECONDS
    if not seconds or hasattr(config, "workerinput"):
        return
    terminalreporter.write_sep(
        "=", f"slowest {SLOWEST_FILES} test files (seconds of setup, call, teardown; CPU seconds)"
    )
    for path, total in sorted(seconds.items(), key=lambda item: -item[1])[:SLOWEST_FILES]:
        terminalreporter.write_line(f"{total:8.1f} s  {_FILE_CPU[path]:8.1f} s CPU  {path}")
    terminalreporter.write_line(
        f"{sum(seconds.values()):8.1f} s  {sum(_FILE_CPU.values()):8.1f} s CPU  all {len(seconds)} files together"
    )
    terminalreporter.write_sep("=", f"most CPU: {SLOWEST_FILES} test files")
    for path, cpu in sorted(_FILE_CPU.items(), key=lambda item: -item[1])[:SLOWEST_FILES]:
        terminalreporter.write_line(f"{cpu:8.1f} s CPU  {seconds[path]:8.1f} s  {path}")


_FILE_SECONDS: defaultdict[str, float] = defaultdict(float)
_FILE_CPU: defaultdict[str, float] = defaultdict(float)
_CPU_START = pytest.StashKey[float]()
_OWN_CACHE = pytest.StashKey[str]()
_SHARED = pytest.StashKey[str]()
#: app_synth.SHARED_ENV (not imported here: app_synth imports the CDK app, which the controller does not need).
SHARED_ENV = "HFPIPE_TESTS_SHARED"


@pytest.fixture(autouse=True, scope="module")
def _each_module_starts_without_moto() -> None:
    """moto's accounts belong to the process, and a mock started while another runs does not reset them: a
    module that begins under a mock left running by an earlier one would see that module's resources (an
    IAM role already there). Fail there, naming the cause, rather than in whichever test trips on it."""
    from moto.core.models import MockAWS

    assert MockAWS._nested_count == 0, (
        "a moto mock is still running from an earlier module: a fixture that starts one must end it "
        "within its module (scope='module' or narrower)"
    )


@pytest.fixture(scope="session")
def repo_root() -> Path:
    """The repository's root folder."""
    return REPO_ROOT


@pytest.fixture(scope="session")
def synthesized(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The whole app from cdk.json (every environment), synthesized once for the run: by the first worker
    that needs it, the others reading its templates (app_synth.synthesize_shared)."""
    from app_synth import synthesize_shared

    return synthesize_shared(tmp_path_factory.mktemp("cdk.out"))


@pytest.fixture(scope="session")
def pipeline_template(synthesized: Any) -> dict[str, Any]:
    """The dev environment's real PipelineStack template (from the session's synthesis)."""
    return dict(synthesized.pipeline("dev"))


@pytest.fixture(scope="session")
def load_lambda() -> Callable[[str], ModuleType]:
    """Import a Lambda module by path (`lambda/` is a keyword, so it cannot be a package).

    `load_lambda("quota/quota_request.py")` returns the module; its folder is first on sys.path while it is
    imported, as in the Lambda runtime, so the module's own sibling imports work, and only then: the
    process's sys.path is every later test's (tests/state_guard.py).
    """

    def load(relative_path: str) -> ModuleType:
        path = REPO_ROOT / "lambda" / relative_path
        name = "lambda_" + relative_path.removesuffix(".py").replace("/", "_")
        if name in sys.modules:
            return sys.modules[name]
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None, path
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        with mock.patch.object(sys, "path", [str(path.parent), *sys.path]):
            spec.loader.exec_module(module)
        return module

    return load


@pytest.fixture
def in_process_training() -> Iterator[None]:
    """For a test that builds transformers' TrainingArguments, runs a training script's set-up or imports the
    training toolkit in this process: TrainingArguments exports its settings to accelerate through the
    process's environment (ACCELERATE_MIXED_PRECISION, ACCELERATE_USE_IPEX, FSDP's ACCELERATE_FSDP_*) and
    reads ACCELERATE_MIXED_PRECISION back as its own default, so a bf16 test would set the precision of a
    later test's run; sagemaker_training.environment sets SAGEMAKER_BASE_DIR on its first import outside a
    container; the scripts' logging set-up sets the levels of the root, transformers and datasets loggers.
    The environment (the same object: a module may hold it) and every logger's level are put back."""
    loggers = [
        logging.root,
        *(v for v in logging.root.manager.loggerDict.values() if isinstance(v, logging.Logger)),
    ]
    levels = [(logger, logger.level) for logger in loggers]
    with mock.patch.dict(os.environ):
        yield
    for logger, level in levels:
        logger.setLevel(level)


@pytest.fixture
def lambda_context() -> SimpleNamespace:
    """A stand-in for the Lambda context object with the attributes handlers read."""
    return SimpleNamespace(
        function_name="test-function",
        aws_request_id="c0ffee00-0000-4000-8000-00000000c0de",
        get_remaining_time_in_millis=lambda: 60_000,
    )


@pytest.fixture(scope="session")
def load_event() -> Callable[[str], dict]:
    """A JSON test event from tests/events/ by file name; ``${ACCOUNT}`` in it stands for the tests' account
    (tests/accounts.py), so no account ID is written in the events."""
    import json

    from accounts import ACCOUNT

    def load(name: str) -> dict:
        return json.loads((EVENTS_DIR / name).read_text().replace("${ACCOUNT}", ACCOUNT))

    return load


@pytest.fixture
def quotas_client() -> Iterator[Any]:
    """A real Service Quotas client whose answers come from a botocore Stubber (``quotas_client.stubber``),
    every queued answer used by the end of the test."""
    import boto3
    from botocore.stub import Stubber

    client = boto3.client(
        "service-quotas", region_name="eu-west-1", aws_access_key_id="t", aws_secret_access_key="t"
    )
    with Stubber(client) as stubber:
        client.stubber = stubber
        yield client
        stubber.assert_no_pending_responses()
