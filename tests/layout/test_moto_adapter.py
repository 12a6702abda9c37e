"""moto's internals are reached through one adapter, hfpipe.local.engine.moto_patches: outside it no module of the
project imports moto beyond its public entry point (``from moto import mock_aws``) nor reads moto's backends;
and the adapter's TARGETS name exactly what it imports from moto, each of which the pinned moto has, so an
upgrade that moves one fails here, in one place (docs/layers.md)."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path
from typing import Any

import pytest

from hfpipe.local.engine import moto_patches

ROOT = Path(__file__).resolve().parents[2]
ADAPTER = "hfpipe/local/engine/moto_patches.py"
#: The project's own code (tests may use moto's API as they like).
SOURCES = ("hfpipe/**/*.py", "lambda/**/*.py", "stacks/**/*.py", "app.py")
#: moto's public entry points, which any module may import.
PUBLIC = {("moto", "mock_aws")}


def moto_uses(source: str) -> list[str]:
    """What ``source`` takes from moto beyond PUBLIC: imports (static or importlib) and backend reads."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [f"import {a.name}" for a in node.names if a.name.split(".")[0] == "moto"]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "moto":
            found += [
                f"from {node.module} import {a.name}"
                for a in node.names
                if (node.module, a.name) not in PUBLIC
            ]
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", None)) in (
            "import_module",
            "__import__",
        ):
            arg = node.args[0] if node.args else None
            if isinstance(arg, ast.Constant) and str(arg.value).split(".")[0] == "moto":
                found.append(f"import_module({arg.value})")
        name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""
        if name == "get_backend" or name.endswith("_backends"):
            found.append(f"backend read {name}")
    return found


def _may_use_moto(text: str) -> bool:
    """Whether ``text`` could hold what ``moto_uses`` finds (the rest are not parsed: the scan stays fast)."""
    return "moto" in text or "backend" in text


def test_the_scan_sees_each_way_of_reaching_moto() -> None:
    source = """
import moto.core
from moto import mock_aws, settings
from moto.backends import get_backend
importlib.import_module("moto.sagemaker.models")
x = sagemaker_backends["1"]["us-east-1"]
"""
    assert moto_uses(source) == [
        "import moto.core",
        "from moto import settings",
        "from moto.backends import get_backend",
        "import_module(moto.sagemaker.models)",
        "backend read sagemaker_backends",
    ]
    assert moto_uses("from moto import mock_aws\nwith mock_aws():\n    pass\n") == []


def test_outside_the_adapter_moto_is_reached_through_mock_aws_only() -> None:
    paths = sorted({p for pattern in SOURCES for p in ROOT.glob(pattern)})
    assert ROOT / ADAPTER in paths
    uses = {
        str(p.relative_to(ROOT)): found
        for p in paths
        if p != ROOT / ADAPTER and _may_use_moto(text := p.read_text()) and (found := moto_uses(text))
    }
    assert uses == {}, "reach moto's internals through hfpipe.local.engine.moto_patches"


def _adapter_imports() -> set[str]:
    """Every moto module or object the adapter imports, as its dotted name."""
    found = set(moto_patches._CLIENT_MODULES)  # imported by name (importlib), for their boto_client_for
    for node in ast.walk(ast.parse((ROOT / ADAPTER).read_text())):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "moto":
            found |= {f"{node.module}.{a.name}" for a in node.names}
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] == "moto"}
    return found


def test_the_targets_are_what_the_adapter_imports() -> None:
    imports, targets = _adapter_imports(), moto_patches.PATCHED + moto_patches.USED
    assert len(set(moto_patches.TARGETS)) == len(moto_patches.TARGETS)
    assert set(moto_patches.TARGETS) == set(targets + moto_patches.FIELDS)
    # Each import is some target's module or object; each target lies under one of the imports (FIELDS are
    # attributes of objects moto makes, reached from get_backend: test_each_field_is_on_the_object_moto_makes).
    assert sorted(i for i in imports if not any(t == i or t.startswith(f"{i}.") for t in targets)) == []
    assert sorted(t for t in targets if not any(t == i or t.startswith(f"{i}.") for i in imports)) == []


def _resolve(target: str) -> Any:
    """The object a dotted target names in the installed moto: its longest importable module, then getattr."""
    parts = target.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for name in parts[cut:]:
            obj = getattr(obj, name)
        return obj
    raise ImportError(target)


@pytest.mark.parametrize("target", moto_patches.PATCHED + moto_patches.USED)
def test_each_target_is_in_the_pinned_moto(target: str) -> None:
    _resolve(target)


def test_each_patch_replaces_the_target_it_names() -> None:
    class Engine:
        time_scale = timeout_scale = 1.0
        world = None

    for label, obj, name, _ in moto_patches.patches(Engine()):  # type: ignore[arg-type]
        owner, attribute = label.rsplit(".", 1)
        if name is None:  # a dict's items
            assert _resolve(label) is obj, label
        else:
            assert _resolve(owner) is obj and name == attribute, label


def _moto_records() -> dict[str, Any]:
    """moto's backend, a training job and an endpoint, made by moto itself, by class name."""
    import boto3
    from moto import mock_aws

    account, region = moto_patches.default_account_id(), "us-east-1"
    role = f"arn:aws:iam::{account}:role/r"
    with mock_aws():
        sm = boto3.client("sagemaker", region_name=region)
        sm.create_training_job(
            TrainingJobName="t",
            AlgorithmSpecification={"TrainingImage": "image", "TrainingInputMode": "File"},
            RoleArn=role,
            OutputDataConfig={"S3OutputPath": "s3://b/out"},
            ResourceConfig={"InstanceType": "ml.m5.large", "InstanceCount": 1, "VolumeSizeInGB": 1},
            StoppingCondition={"MaxRuntimeInSeconds": 60},
        )
        sm.create_model(ModelName="m", ExecutionRoleArn=role, PrimaryContainer={"Image": "image"})
        variant = {
            "VariantName": "v",
            "ModelName": "m",
            "InitialInstanceCount": 1,
            "InstanceType": "ml.m5.large",
        }
        sm.create_endpoint_config(EndpointConfigName="c", ProductionVariants=[variant])
        sm.create_endpoint(EndpointName="e", EndpointConfigName="c")
        sm.create_processing_job(
            ProcessingJobName="p",
            RoleArn=role,
            AppSpecification={"ImageUri": "image"},
            ProcessingResources={
                "ClusterConfig": {"InstanceCount": 1, "InstanceType": "ml.m5.large", "VolumeSizeInGB": 1}
            },
        )
        records = [
            moto_patches.sagemaker_backend(account, region),
            moto_patches.training_job_record(account, region, "t"),
            moto_patches.endpoint_record(account, region, "e"),
            moto_patches.processing_job_record(account, region, "p"),
        ]
    return {type(record).__name__: record for record in records}


def test_each_field_is_on_the_object_moto_makes() -> None:
    records = _moto_records()
    assert sorted(records) == [
        "FakeEndpoint",
        "FakeProcessingJob",
        "FakeTrainingJob",
        "SageMakerModelBackend",
    ]
    for target in moto_patches.FIELDS:
        kind, name = target.rsplit(".", 2)[-2:]
        assert hasattr(records[kind], name), target
    for added in moto_patches.ADDED:  # not moto's own (else it belongs in FIELDS)
        kind, name = added.split(".")
        assert kind not in records or not hasattr(records[kind], name), added


#: The modules that read or set the attributes of moto's records, and the class of each variable holding one.
RECORD_USERS = {
    "hfpipe/local/engine/hooks.py": {
        "job": "FakeTrainingJob",
        "endpoint": "FakeEndpoint",
        "processing_job": "FakeProcessingJob",
    },
    "hfpipe/local/runtime.py": {"job": "FakeTrainingJob", "processing_job": "FakeProcessingJob"},
    "hfpipe/local/world.py": {"job": "FakeTrainingJob"},
    "hfpipe/local/engine/guardrails.py": {"endpoint": "FakeEndpoint"},
}


def test_the_fields_are_the_attributes_local_mode_touches() -> None:
    used = set()
    for module, variables in RECORD_USERS.items():
        for node in ast.walk(ast.parse((ROOT / module).read_text())):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id in variables
            ):
                used.add(f"{variables[node.value.id]}.{node.attr}")
    listed = {".".join(t.rsplit(".", 2)[-2:]) for t in moto_patches.FIELDS} | set(moto_patches.ADDED)
    kinds = {kind for variables in RECORD_USERS.values() for kind in variables.values()}
    assert used == {name for name in listed if name.split(".")[0] in kinds}


def test_a_field_moto_no_longer_has_is_refused_by_name() -> None:
    class SageMakerModelBackend:
        endpoints: dict[str, Any] = {}

    with pytest.raises(moto_patches.MotoVersionError, match=r"SageMakerModelBackend has no training_jobs"):
        moto_patches._check_fields(SageMakerModelBackend(), moto_patches.FIELDS)
