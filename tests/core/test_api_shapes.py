"""What Plan accepts, SageMaker accepts: `hfpipe/core/api_shapes.json` is botocore's service model for the
requests the pipeline sends (the test fails when it is stale: `HFPIPE_UPDATE_SHAPES=1` rewrites it), and for
recipes mutated at random (hypothesis), every plan Plan accepts yields requests that botocore's model takes:
its own parameter validation plus every length, range, enum and whole-value pattern of the shapes (Java
patterns through the `regex` package, which reads `\\p{...}` as Java does)."""

from __future__ import annotations

import json
import os
from typing import Any

import botocore.session
import pytest
from accounts import ACCOUNT
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from plan_config import dev_config

from hfpipe.core import api_shapes
from hfpipe.core.plan import PlanConfig, build_plan
from hfpipe.core.schema import RecipeError
from hfpipe.local.quotas import QuotaTable, default_quotas

MODEL = botocore.session.get_session().get_service_model("sagemaker")


def generate() -> dict[str, Any]:
    shapes: dict[str, Any] = {}

    def walk(shape: Any) -> None:
        if shape.name in shapes:
            return
        entry: dict[str, Any] = {"type": shape.type_name}
        entry.update({k: shape.metadata[k] for k in ("min", "max", "pattern") if k in shape.metadata})
        if getattr(shape, "enum", None):
            entry["enum"] = list(shape.enum)
        shapes[shape.name] = entry
        if shape.type_name == "structure":
            entry["members"] = {k: v.name for k, v in shape.members.items()}
            entry["required"] = list(shape.required_members)
            for member in shape.members.values():
                walk(member)
        elif shape.type_name == "list":
            entry["member"] = shape.member.name
            walk(shape.member)
        elif shape.type_name == "map":
            entry["key"], entry["value"] = shape.key.name, shape.value.name
            walk(shape.key)
            walk(shape.value)

    operations = {}
    for op in api_shapes.OPERATIONS:
        shape = MODEL.operation_model(op).input_shape
        operations[op] = shape.name
        walk(shape)
    return {"botocore_api_version": MODEL.api_version, "operations": operations, "shapes": shapes}


def test_the_shapes_are_botocores() -> None:
    fresh = generate()
    if os.environ.get("HFPIPE_UPDATE_SHAPES"):
        api_shapes.SHAPES_FILE.write_text(json.dumps(fresh, indent=None, sort_keys=True) + "\n")
    assert json.loads(api_shapes.SHAPES_FILE.read_text()) == fresh


def botocore_problems(operation: str, request: dict[str, Any]) -> list[str]:
    """Everything botocore's model says about the request: its own validator, then max lengths, enums and
    patterns (which botocore's client does not check; the service does)."""
    import regex
    from botocore.validate import ParamValidator

    shape = MODEL.operation_model(operation).input_shape
    report = ParamValidator().validate(request, shape)
    found = [report.generate_report()] if report.has_errors() else []

    def walk(shape: Any, value: Any, path: str) -> None:
        md = shape.metadata
        if shape.type_name == "structure" and isinstance(value, dict):
            for key, sub in value.items():
                if key in shape.members:
                    walk(shape.members[key], sub, f"{path}.{key}")
        elif shape.type_name == "list" and isinstance(value, list):
            if "max" in md and len(value) > md["max"]:
                found.append(f"{path}: too many items")
            for i, item in enumerate(value):
                walk(shape.member, item, f"{path}[{i}]")
        elif shape.type_name == "map" and isinstance(value, dict):
            if "max" in md and len(value) > md["max"]:
                found.append(f"{path}: too many entries")
            for key, item in value.items():
                walk(shape.key, key, f"{path} key")
                walk(shape.value, item, f"{path}.{key}")
        elif shape.type_name == "string" and isinstance(value, str):
            if "max" in md and len(value) > md["max"]:
                found.append(f"{path}: too long")
            if getattr(shape, "enum", None) and value not in shape.enum:
                found.append(f"{path}: not in enum")
            if "pattern" in md and not regex.fullmatch(md["pattern"], value):
                found.append(f"{path}: pattern")
        elif (
            shape.type_name in ("integer", "long") and isinstance(value, int) and value > md.get("max", value)
        ):
            found.append(f"{path}: above max")

    walk(shape, request, operation)
    return found


CONFIG = dev_config(image_catalog={})
QUOTAS = QuotaTable(default_quotas()).client("eu-west-1")
IMAGE = f"{ACCOUNT}.dkr.ecr.eu-west-1.amazonaws.com/hf:1"

# Fields a recipe sets that reach the requests, and values of every kind for them (edges and junk).
FIELDS = [
    "name",
    "training.hyperparameters.run_name",
    "training.environment.K",
    "serving.environment.K",
    "training.volume_size_gb",
    "training.max_run_seconds",
    "training.instance_count",
    "training.channels.extra",
    "training.metric_definitions",
    "training.checkpoint_local_path",
    "serving.instance_count",
]
VALUES = st.one_of(
    st.text(alphabet="abcXYZ019-_", min_size=1, max_size=40),
    st.text(max_size=300),
    st.text(alphabet="ab\n\t\u00e9$:/=+@-_. ", max_size=3000),
    st.integers(-10, 2**40),
    st.booleans(),
    st.lists(
        st.dictionaries(st.sampled_from(["Name", "Regex"]), st.text(max_size=600), max_size=2), max_size=3
    ),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(FIELDS), VALUES), min_size=1, max_size=3), st.text(max_size=90))
def test_whatever_plan_accepts_sagemakers_model_takes(
    mutations: list[tuple[str, Any]], execution: str
) -> None:
    overrides: dict[str, Any] = {key: value for key, value in mutations}
    overrides["container.training.image_uri"] = IMAGE
    overrides["container.inference.image_uri"] = IMAGE
    config = PlanConfig(
        **{**CONFIG.__dict__, "allowed_image_registries": (f"{ACCOUNT}.dkr.ecr.eu-west-1.amazonaws.com",)}
    )
    try:
        plan = build_plan(
            {"recipe_name": "tiny-qa", "overrides": overrides}, execution or "x", config, QUOTAS
        )
    except (RecipeError, ValueError):
        return  # refused with a message: nothing reached SageMaker
    for operation, request in api_shapes.pipeline_requests(plan).items():
        assert botocore_problems(operation, request) == [], (operation, overrides)


@pytest.mark.parametrize(
    ("overrides", "execution"),
    [
        ({"training.environment": {"K": "x" * 512}}, "run-1"),
        ({"training.hyperparameters.run_name": "r" * 2498}, "r" * 80),
        ({"training.volume_size_gb": 16384, "serving.environment": {"K_1": "\u00e9 $:/=+@"}}, "run_2"),
    ],
)
def test_values_at_the_edges_plan_accepts_are_taken_by_the_model(overrides: dict, execution: str) -> None:
    """The property above needs accepted plans to say anything: these are, at the limits."""
    config = PlanConfig(
        **{**CONFIG.__dict__, "image_catalog": {}, "allowed_image_registries": (IMAGE.split("/")[0],)}
    )
    overrides = {**overrides, "container.training.image_uri": IMAGE, "container.inference.image_uri": IMAGE}
    plan = build_plan({"recipe_name": "tiny-qa", "overrides": overrides}, execution, config, QUOTAS)
    for operation, request in api_shapes.pipeline_requests(plan).items():
        assert botocore_problems(operation, request) == [], operation


def test_a_value_the_api_refuses_is_refused_by_plan_naming_it() -> None:
    with pytest.raises(RecipeError) as err:
        build_plan(
            {"recipe_name": "tiny-qa", "overrides": {"training.environment": {"K": "x" * 600}}},
            "run-1",
            CONFIG,
            QUOTAS,
        )
    assert "Environment" in str(err.value) or "environment" in str(err.value)
    bad = {"TrainingJobName": "x\n", "RoleArn": "r"}
    assert any("TrainingJobName" in p for p in api_shapes.problems("CreateTrainingJob", bad))
