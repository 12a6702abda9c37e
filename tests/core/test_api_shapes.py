"""What Plan accepts, SageMaker accepts: `hfpipe/core/api_shapes.json` is botocore's service model for the
requests the pipeline sends (the test fails when it is stale: `HFPIPE_UPDATE_SHAPES=1` rewrites it), and for
recipes mutated at random (hypothesis), every plan Plan accepts yields requests that botocore's model takes:
its own parameter validation plus every length, range, enum and whole-value pattern of the shapes (Java
patterns through the `regex` package, which reads `\\p{...}` as Java does)."""

from __future__ import annotations

import json
import os
import re
from typing import Any

import botocore.session
import pytest
from accounts import ACCOUNT
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from plan_config import dev_config

from hfpipe.core import api_shapes
from hfpipe.core.recipe.schema import RecipeError
from hfpipe.core.run.plan import PlanConfig, build_plan
from hfpipe.local.engine.quotas import QuotaTable, default_quotas

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


def as_java_sees_it(value: str) -> str:
    """The value with each of Java's line terminators (\\r, U+0085, U+2028, U+2029; java.util.regex.Pattern,
    "Line terminators") written as \\n, the one `regex` knows: `.` then stops, and `$` stands, where Java's
    would (no pattern of the model names one of them in a character class)."""
    return value.translate({ord(c): "\n" for c in "\r\u0085\u2028\u2029"})


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
            if "pattern" in md and not regex.fullmatch(md["pattern"], as_java_sees_it(value)):
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


#: Values that end in (or hold) a line terminator, where the model's pattern uses `.`: SageMaker matches its
#: patterns with Java's semantics, so it refuses them; Plan must too, naming the request field.
LINE_TERMINATED = [
    ("MetricDefinitions[0].Name", {"training.metric_definitions": [{"Name": "loss\n", "Regex": "l=(\\S+)"}]}),
    (
        "MetricDefinitions[0].Name",
        {"training.metric_definitions": [{"Name": "lo\u2028ss", "Regex": "l=(.+)"}]},
    ),
    (
        "MetricDefinitions[0].Regex",
        {"training.metric_definitions": [{"Name": "loss", "Regex": "l=(\\S+)\r"}]},
    ),
    (
        "MetricDefinitions[0].Regex",
        {"training.metric_definitions": [{"Name": "loss", "Regex": "l=(\\S+)\x85"}]},
    ),
]


@pytest.mark.parametrize(("field", "overrides"), LINE_TERMINATED, ids=[repr(o) for _, o in LINE_TERMINATED])
def test_a_value_with_a_java_line_terminator_is_refused_where_the_pattern_uses_a_dot(
    field, overrides
) -> None:
    config = PlanConfig(**{**CONFIG.__dict__, "allowed_image_registries": (IMAGE.split("/")[0],)})
    overrides = {**overrides, "container.training.image_uri": IMAGE, "container.inference.image_uri": IMAGE}
    with pytest.raises(RecipeError, match=re.escape(field)):
        build_plan({"recipe_name": "tiny-qa", "overrides": overrides}, "run-1", config, QUOTAS)


@pytest.mark.parametrize(
    ("operation", "request_", "field"),
    [
        ("CreateTrainingJob", {"CheckpointConfig": {"S3Uri": "s3://bucket/checkpoints\n"}}, "S3Uri"),
        ("CreateTrainingJob", {"CheckpointConfig": {"S3Uri": "s3://bucket/ck\r"}}, "S3Uri"),
        (
            "CreateModel",
            {"ModelName": "m", "PrimaryContainer": {"ModelDataUrl": "s3://b/m.tar.gz\u2029"}},
            "ModelDataUrl",
        ),
    ],
)
def test_the_shape_check_refuses_what_javas_matcher_refuses(operation, request_, field) -> None:
    assert [p for p in api_shapes.problems(operation, request_) if field in p and "pattern" in p]
    assert botocore_problems(operation, request_) and any(
        "pattern" in p for p in botocore_problems(operation, request_)
    )


def test_javas_predefined_classes_are_ascii() -> None:
    # `\\w` in the model's region part of an ARN (the hub content ARN): Java's is [a-zA-Z_0-9], Python's
    # is Unicode; a letter outside ASCII is refused as Java refuses it.
    pattern = api_shapes._compiled(r"arn:aws:sagemaker:\w+(?:-\w+)+:x")
    assert pattern.fullmatch("arn:aws:sagemaker:eu-west-1:x")
    assert not pattern.fullmatch("arn:aws:sagemaker:eu-w\u00e9st-1:x")
