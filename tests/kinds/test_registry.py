"""The task and serving kind registries (hfpipe/kinds) against the recipes, the training code and the
rules that use them: every name a recipe may use resolves, every file a kind names exists and does what
the kind says, and what no kind covers is refused by name."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

import pytest
from accounts import ACCOUNT
from plan_config import dev_config

from hfpipe import kinds
from hfpipe.cli.deploy import invoke
from hfpipe.cli.recipe.data import _records
from hfpipe.core import validate as rules
from hfpipe.core.recipe import records
from hfpipe.core.recipe.recipes import available_recipes, load_recipe, resolve_recipe
from hfpipe.core.recipe.schema import RecipeError
from hfpipe.core.recipe.schema import validate as rules_validate
from hfpipe.core.run.plan import build_plan, processor_for
from hfpipe.local.serving.endpoint import LocalEndpoint, local_endpoint_class
from hfpipe.local.training.substitute import build_data, for_this_machine

ROOT = Path(__file__).resolve().parents[2]
TRAINING_CODE = ROOT / "training_code"
TASKS = sorted(kinds.TASK_KINDS)
SERVING = sorted(kinds.SERVING_KINDS)
#: A serving kind no registry will hold (a plausible one, such as "tgi", would be refused only until added).
NOT_A_KIND = "no-such-server"


def test_the_schema_accepts_exactly_the_registered_kinds() -> None:
    # Behaviour, not the enum compared with the list it is built from: every registered name validates, a
    # name no registry has is refused naming the field and each accepted name, and a recipe that names no
    # serving kind gets the default.
    # Without its evaluation, whose metric is one its own task scores (tests/core/test_evaluation_recipe.py).
    base = {k: v for k, v in load_recipe("tiny-mnli").items() if k != "evaluation"}
    for task in kinds.TASK_KINDS:
        assert rules_validate({**base, "task": task})["task"] == task
    with pytest.raises(RecipeError) as refused:
        rules_validate({**base, "task": "translation"})
    assert "task" in str(refused.value) and all(t in str(refused.value) for t in kinds.TASK_KINDS)
    for serving in kinds.SERVING_KINDS:
        recipe = {**base, "serving": {**base["serving"], "kind": serving}}
        assert rules_validate(recipe)["serving"]["kind"] == serving
    with pytest.raises(RecipeError, match=r"serving\.kind") as refused:
        rules_validate({**base, "serving": {**base["serving"], "kind": NOT_A_KIND}})
    assert all(k in str(refused.value) for k in kinds.SERVING_KINDS)
    defaulted = rules_validate({**base, "serving": {k: v for k, v in base["serving"].items() if k != "kind"}})
    assert defaulted["serving"]["kind"] == kinds.DEFAULT_SERVING_KIND == "hf-inference"


@pytest.mark.parametrize("name", available_recipes())
def test_every_recipe_resolves_to_a_task_kind_that_supports_its_serving_kind(name: str) -> None:
    recipe = resolve_recipe(recipe_name=name)
    task = kinds.task_kind(recipe["task"])
    assert recipe["serving"]["kind"] in task.serving_kinds
    # The recipe's script is its task kind's: the kind's handler is what that script installs.
    assert recipe["training"]["entry_point"] == task.entry_point


@pytest.mark.parametrize("task", TASKS)
def test_each_task_kinds_files_exist_and_the_entry_point_installs_the_handler(task: str) -> None:
    kind = kinds.task_kind(task)
    entry = TRAINING_CODE / kind.entry_point
    handler = TRAINING_CODE / f"{kind.handler}.py"
    assert entry.is_file() and handler.is_file(), (entry, handler)
    # The script names the handler it copies to code/inference.py ("inference_qa.py" or `import
    # inference_clm`); a registry naming another handler than the script ships fails here.
    assert re.search(rf"\b{kind.handler}\b", entry.read_text()), (
        f"{entry.name} does not install {kind.handler}"
    )
    assert kinds.training_code_file(f"{kind.handler}.py").samefile(handler)


@pytest.mark.parametrize(
    ("task", "serving"), [(t, s) for t in TASKS for s in kinds.task_kind(t).serving_kinds]
)
def test_each_sample_request_passes_the_request_check_of_its_own_kinds(task: str, serving: str) -> None:
    kind = kinds.task_kind(task)
    contract = kinds.serving_kind(serving).request_contract
    if contract is not None:  # the serving kind's own (vllm: vLLM's OpenAI server's rules)
        assert contract(dict(kind.request_for(serving)), None)
        with pytest.raises(ValueError):
            contract({"unexpected": "field"}, None)
        return
    module = invoke.handler_module(str(kinds.serving_kind(serving).request_checker(kind.handler)))
    assert callable(module.parse_request)
    parsed = module.parse_request(dict(kind.request_for(serving)))
    assert parsed[0], f"{task}: {kind.request_for(serving)!r} parsed to nothing"
    # The check can fail: the same handler refuses a request without the fields it needs.
    with pytest.raises((ValueError, KeyError, TypeError)):
        module.parse_request({"unexpected": "field"})


@pytest.mark.parametrize("serving", SERVING)
def test_each_serving_kind_names_a_local_endpoint_and_a_catalog_key(serving: str) -> None:
    kind = kinds.serving_kind(serving)
    assert issubclass(local_endpoint_class(serving), LocalEndpoint)
    container = {f: f"v{i}" for i, f in enumerate(kind.image_key_fields)}
    assert kind.catalog_key(container).split("/") == [str(container[f]) for f in kind.image_key_fields]


def test_an_unknown_task_is_refused_by_name_with_the_accepted_list() -> None:
    with pytest.raises(kinds.KindError) as err:
        kinds.task_kind("no-such-task")
    assert "'no-such-task'" in str(err.value) and str(TASKS) in str(err.value)
    with pytest.raises(RecipeError) as err:
        resolve_recipe(recipe_name="tiny-qa", overrides={"task": "no-such-task"})
    assert str(err.value) == f"recipe.task: 'no-such-task' is not one of {list(kinds.TASK_KINDS)}"
    # The records checker no longer falls back to the causal-LM columns for a task it does not know.
    with pytest.raises(kinds.KindError, match="no-such-task"):
        records.expected_columns({"task": "no-such-task", "training": {"hyperparameters": {}}})
    with pytest.raises(ValueError, match=r"recipe.task: task 'no-such-task' is not a known task kind"):
        for_this_machine({**load_recipe("tiny-qa"), "task": "no-such-task"})


def test_an_unknown_serving_kind_is_refused_by_name() -> None:
    with pytest.raises(RecipeError) as err:
        resolve_recipe(recipe_name="tiny-qa", overrides={"serving.kind": NOT_A_KIND})
    assert str(err.value).startswith(f"recipe.serving.kind: {NOT_A_KIND!r} is not one of [")
    assert all(repr(name) in str(err.value) for name in ("hf-inference", "vllm", *SERVING))
    with pytest.raises(kinds.KindError) as refused:
        kinds.serving_kind(NOT_A_KIND)
    message = str(refused.value)
    assert message.startswith(f"serving kind {NOT_A_KIND!r} is not known; accepted: [")
    assert all(repr(name) in message for name in ("hf-inference", "vllm", *SERVING))


def test_a_serving_kind_the_task_does_not_support_is_refused_naming_both(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A second serving kind that no task kind lists yet (the schema's enum is built at import, so the
    # pair rule is checked where it runs: on the schema-checked recipe).
    other = kinds.ServingKind(
        "other-server", "test", "other", "huggingface", "inference", ("py_version",), None
    )
    monkeypatch.setitem(kinds.SERVING_KINDS, "other-server", other)
    recipe = resolve_recipe(recipe_name="tiny-qa")
    recipe["serving"]["kind"] = "other-server"
    with pytest.raises(RecipeError) as err:
        rules.recipe(recipe)
    assert str(err.value) == (
        "recipe.serving.kind: serving kind 'other-server' cannot serve task 'question-answering'; "
        "accepted for question-answering: ['hf-inference']"
    )
    # The serving kind says which tasks it serves (by their model head): no task kind is edited for it.
    serves_qa = dataclasses.replace(
        kinds.serving_kind("hf-inference"), name="other-server", serves=("question-answering",)
    )
    monkeypatch.setitem(kinds.SERVING_KINDS, "other-server", serves_qa)
    assert kinds.task_kind("question-answering").serving_kinds == ("hf-inference", "other-server")
    assert "other-server" not in kinds.task_kind("summarization").serving_kinds
    rules.recipe(recipe)


@pytest.mark.parametrize("name", available_recipes())
def test_the_fixture_a_task_kind_picks_holds_the_records_the_recipe_reads(name: str, tmp_path: Path) -> None:
    """The fixture rule (e.g. MNLI pairs or single texts) against the record rule of the same kind."""
    recipe = resolve_recipe(recipe_name=name)
    kind = kinds.task_kind(recipe["task"])
    fixture = kind.fixture(recipe["training"]["hyperparameters"])
    assert fixture.family in kinds.TINY_MODELS  # local mode has a tiny stand-in of that family
    assert for_this_machine(load_recipe(name)).data_kind == fixture.name
    channels = build_data(fixture.name, tmp_path)
    assert set(fixture.channels) <= set(channels)
    assert fixture.files, fixture.name  # what an own script is given by name (train_file, validation_file)
    for channel, file in fixture.files.items():
        assert (channels[channel] / file).is_file(), (channel, file)
    if fixture.rows_writer:  # the same channels and files, the records as the hub data set's rows
        rows_channels = build_data(fixture.name, tmp_path / "rows", rows=True)
        for channel, file in fixture.files.items():
            assert (rows_channels[channel] / file).read_bytes() != (channels[channel] / file).read_bytes()
    columns = records.expected_columns(recipe)
    files = [p for p in channels["training"].rglob("*") if p.suffix in (".json", ".jsonl")]
    assert files, channels["training"]
    for path in files:
        rows = list(_records(path))
        assert rows, path
        problems = {records.record_problem(row, columns) for row in rows}
        assert problems == {None}, (name, fixture.name, path.name, problems)


def test_the_lambda_bundle_carries_the_kinds_the_core_imports(tmp_path: Path) -> None:
    """The Plan Lambda runs hfpipe.core, which imports hfpipe.kinds: the bundle must ship both."""
    import subprocess
    import sys

    from stacks.functions.common import bundle_into

    bundle_into(tmp_path / "bundle")
    script = (
        "import pkgutil, sys; import pipeline_lambdas as p\n"
        "for m in pkgutil.iter_modules(p.__path__): __import__('pipeline_lambdas.' + m.name)\n"
        "import hfpipe.core.run.plan, hfpipe.kinds, fastjsonschema; print(hfpipe.kinds.__file__)\n"
        "print(fastjsonschema.__file__)\n"
        "from hfpipe.core.recipe.recipes import resolve_recipe\n"
        "print(resolve_recipe(recipe_name='tiny-qa')['training']['spot'])"
    )
    # -I -S: only the bundle and the standard library, as in the Lambda runtime (no checkout, no site-packages).
    proc = subprocess.run(
        [
            sys.executable,
            "-I",
            "-S",
            "-c",
            f"import sys; sys.path.insert(0, {str(tmp_path / 'bundle')!r})\n{script}",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        str(tmp_path / "bundle" / "hfpipe" / "kinds" / "__init__.py"),
        # The schema's validator is the bundle's copy, and fills the recipe's defaults there.
        str(tmp_path / "bundle" / "fastjsonschema" / "__init__.py"),
        "{'enabled': False, 'max_wait_seconds': None}",
    ]
    assert (tmp_path / "bundle" / "fastjsonschema.licenses" / "LICENSE").is_file()


class _Quotas:
    """Every quota the tiny recipes need, applied at 100 (ListServiceQuotas as the plan pages it)."""

    def get_paginator(self, operation_name: str) -> Any:
        names = [
            f"{t} for {k}"
            for t in ("ml.g4dn.xlarge", "ml.m5.large")
            for k in (
                "training job usage",
                "spot training job usage",
                "endpoint usage",
                "processing job usage",
            )
        ]
        quotas = [{"QuotaName": n, "QuotaCode": f"L-{i:08X}", "Value": 100.0} for i, n in enumerate(names)]
        pages = [{"Quotas": quotas if operation_name == "list_service_quotas" else []}]
        return type("Paginator", (), {"paginate": lambda self, **kwargs: iter(pages)})()


def test_the_plan_takes_the_models_image_and_environment_from_the_serving_kind(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    registry = f"{ACCOUNT}.dkr.ecr.eu-west-1.amazonaws.com"
    recipe = resolve_recipe(recipe_name="tiny-qa")
    training, inference = recipe["container"]["training"], recipe["container"]["inference"]
    # The default kind moved to its own catalog scope, keyed by the Python tag alone, with an environment.
    moved = dataclasses.replace(
        kinds.serving_kind("hf-inference"),
        image_scope="elsewhere",
        image_key_fields=("py_version",),
        environment={"HF_TASK": "question-answering", "SM_NUM_GPUS": "4"},
    )
    monkeypatch.setitem(kinds.SERVING_KINDS, "hf-inference", moved)
    images = {p: f"{registry}/served-elsewhere:{p}" for p in ("cpu", "gpu")}
    catalog = {
        "training": {"/".join(training[f] for f in kinds.serving.HF_VERSION_FIELDS): images},
        "inference": {},  # where hf-inference's images are otherwise: not looked at
        "elsewhere": {inference["py_version"]: images},
    }
    config = dev_config(image_catalog=catalog)
    event = {"recipe_name": "tiny-qa", "overrides": {"serving.environment": {"SM_NUM_GPUS": "1"}}}
    result = build_plan(event, "exec-1", config, _Quotas())
    assert result.inference_image_uri == images[processor_for(recipe["serving"]["instance_type"])]
    # The kind's environment first, the recipe's serving.environment over it.
    assert result.serving_environment == {"HF_TASK": "question-answering", "SM_NUM_GPUS": "1"}


def test_the_image_catalog_keys_a_serving_kinds_images_by_its_scope_and_refuses_a_table_it_cannot_read(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from stacks.image_catalog import build_catalog

    recipe = load_recipe("tiny-qa")
    moved = dataclasses.replace(
        kinds.serving_kind("hf-inference"), image_scope="elsewhere", image_key_fields=("py_version",)
    )
    monkeypatch.setitem(kinds.SERVING_KINDS, "hf-inference", moved)
    catalog = build_catalog("eu-west-1", [recipe])
    assert catalog["inference"] == {}
    assert list(catalog["elsewhere"]) == [recipe["container"]["inference"]["py_version"]]
    other = dataclasses.replace(moved, image_table="no-such-table")
    monkeypatch.setitem(kinds.SERVING_KINDS, "hf-inference", other)
    with pytest.raises(ValueError) as err:
        build_catalog("eu-west-1", [recipe])
    assert str(err.value) == (
        "recipe tiny-qa: serving kind 'hf-inference' reads the 'no-such-table' image table, which is "
        "neither one of the SageMaker SDK's image tables nor 'aws-dlc' (stacks/dlc_images.json)"
    )


def test_a_serving_kind_on_another_sdk_table_gets_the_image_the_sdk_retrieves(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Any table of the SageMaker SDK is read through its own `image_uris.retrieve`, with the arguments the
    kind formats from container.inference: a kind on the SDK's huggingface-llm (TGI) table needs no reader."""
    from sagemaker import image_uris

    from stacks.image_catalog import build_catalog

    llm = dataclasses.replace(
        kinds.serving_kind("hf-inference"),
        name="llm",
        image_scope="llm",
        image_table="huggingface-llm",
        image_key_fields=("llm_version",),
        image_arguments={"version": "{llm_version}"},
    )
    monkeypatch.setitem(kinds.SERVING_KINDS, "llm", llm)
    recipe = load_recipe("tiny-lora")
    recipe["serving"]["kind"], recipe["container"]["inference"] = "llm", {"llm_version": "3.0.1"}
    expected = image_uris.retrieve(
        "huggingface-llm",
        region="eu-west-1",
        version="3.0.1",
        image_scope="inference",
        instance_type="ml.g5.xlarge",
    )
    assert build_catalog("eu-west-1", [recipe])["llm"] == {"3.0.1": {"gpu": expected}}


@pytest.mark.parametrize("task", TASKS)
def test_each_fixture_writes_its_channels_and_inputs_its_handler_accepts(task: str, tmp_path: Path) -> None:
    """The functions a fixture names: its channel folders (local mode's data) and its handler inputs (local
    mode's stand-in traffic), each found by the fixture, none by a dispatch on its name."""
    from hfpipe.fixtures import fixture_handler_inputs, write_fixture

    kind = kinds.task_kind(task)
    parse = invoke.handler_module(kind.handler).parse_request
    for fixture in kind.fixtures:
        assert kinds.fixture_named(fixture.name).writer == fixture.writer
        channels = write_fixture(fixture, tmp_path / fixture.name)
        assert set(channels) == set(fixture.channels), (fixture.name, channels)
        assert all(any(p.is_file() for p in folder.rglob("*")) for folder in channels.values())
        inputs = fixture_handler_inputs(fixture, 3, 5)
        assert len(inputs) == 3 and inputs[0] != inputs[1]
        for item in inputs:
            assert parse({"inputs": item})[0], (fixture.name, item)


def test_a_fixture_names_only_functions_of_the_fixtures_package() -> None:
    from hfpipe.fixtures import write_fixture

    with pytest.raises(kinds.KindError, match=r"^fixture 'no-such-fixture' is not known; accepted: \["):
        kinds.fixture_named("no-such-fixture")
    elsewhere = dataclasses.replace(kinds.fixture_named("squad"), writer="os:remove")
    with pytest.raises(kinds.KindError, match=r"^fixture squad: writer: 'os:remove' is not accepted"):
        write_fixture(elsewhere, "/nonexistent")


def test_every_lambda_bundle_imports_its_handler_with_only_what_the_runtime_has(tmp_path: Path) -> None:
    """The quota custom resource's bundle once carried hfpipe/core without the kinds it imports: its handler
    could not be imported on AWS. Each bundle's handler module is imported in an interpreter that sees only
    the bundle, the standard library and what the Lambda Python runtime provides (boto3 and botocore, with
    their dependencies)."""
    import importlib.util
    import subprocess
    import sys

    from stacks.constructs import quota_request
    from stacks.functions import common

    runtime = tmp_path / "runtime"
    runtime.mkdir()
    for name in ("boto3", "botocore", "s3transfer", "jmespath", "dateutil", "urllib3", "six"):
        spec = importlib.util.find_spec(name)
        assert spec is not None and spec.origin is not None, name
        origin = Path(spec.origin)
        target = origin.parent if origin.name == "__init__.py" else origin
        (runtime / target.name).symlink_to(target)
    for bundle, handlers in (
        (quota_request.bundle_into, ["quota_request"]),
        (common.bundle_into, ["pipeline_lambdas.plan", "pipeline_lambdas.cleanup"]),
    ):
        folder = tmp_path / bundle.__module__
        bundle(folder)
        script = f"import sys; sys.path[:0] = [{str(folder)!r}, {str(runtime)!r}]\n" + "".join(
            f"import {handler}; assert callable({handler}.handler)\n" for handler in handlers
        )
        proc = subprocess.run(
            [sys.executable, "-I", "-S", "-c", script],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            check=False,
        )
        assert proc.returncode == 0, (bundle.__module__, proc.stderr)
