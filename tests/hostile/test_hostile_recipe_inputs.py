"""Hostile recipe fields and `--set` overrides: each refused with the field, the value and what is accepted.

The recipe entrance is `hfpipe.core.recipe.recipes.resolve_recipe` (the command, the Plan Lambda and local mode all
go through it); overrides arrive either as an object (the Plan's input) or as `key=value` strings (`--set`).
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from hfpipe.core.recipe.recipes import apply_overrides, load_recipe, parse_override, resolve_recipe
from hfpipe.core.recipe.schema import RecipeError

NAN, INF = math.nan, math.inf
T = "training"

# (overrides applied to tiny-qa, fragments the error must hold: the field, the value, what is accepted)
# fmt: off
RECIPE_CASES: list[tuple[dict[str, Any], list[str]]] = [
    # NaN / Infinity anywhere
    ({"serving.max_latency_ms": NAN}, ["serving.max_latency_ms", "nan", "accepted: a finite number"]),
    ({"serving.max_latency_ms": INF}, ["serving.max_latency_ms", "inf", "finite"]),
    ({"evaluation_gate": {"metric": "eval_f1", "threshold": NAN}}, ["evaluation_gate.threshold", "nan"]),
    ({"evaluation_gate": {"metric": "eval_f1", "threshold": -INF}}, ["evaluation_gate.threshold", "-inf"]),
    ({f"{T}.expected_hours": NAN}, ["training.expected_hours", "nan", "finite"]),
    ({f"{T}.hyperparameters.learning_rate": NAN}, ["training.hyperparameters.learning_rate", "nan"]),
    ({f"{T}.hyperparameters.learning_rate": "NaN"}, ["training.hyperparameters.learning_rate", "'NaN'"]),
    ({f"{T}.hyperparameters.warmup": "-Infinity"}, ["training.hyperparameters.warmup", "'-Infinity'"]),
    ({f"{T}.hyperparameters.nested": {"a": [1, INF]}}, ["training.hyperparameters.nested.a[1]", "inf"]),
    ({"serving.sample_request": {"inputs": NAN}}, ["serving.sample_request.inputs", "nan"]),
    # channel names become folders (/opt/ml/input/data/<name>) and must be SageMaker ChannelNames
    ({f"{T}.channels": {"../escape": "x/"}}, ["recipe.training.channels", "'../escape'", "accepted: 1 to 64"]),
    ({f"{T}.channels": {"..": "x/"}}, ["recipe.training.channels", "'..'", "other than '.' and '..'"]),
    ({f"{T}.channels": {".": "x/"}}, ["recipe.training.channels", "'.'", "other than"]),
    ({f"{T}.channels": {"a/b": "x/"}}, ["recipe.training.channels", "'a/b'", "accepted"]),
    ({f"{T}.channels": {"": "x/"}}, ["recipe.training.channels", "''", "accepted"]),
    ({f"{T}.channels": {"a b": "x/"}}, ["recipe.training.channels", "'a b'", "accepted"]),
    ({f"{T}.channels": {"c" * 65: "x/"}}, ["recipe.training.channels", "c" * 65, "1 to 64"]),
    ({f"{T}.channels": {f"c{i}": "x/" for i in range(21)}}, ["recipe.training.channels", "21 channels", "at most 20"]),
    # channel values: a string URI or key prefix, never a number, never leaving the bucket's folder
    ({f"{T}.channels": {"training": 5}}, ["recipe.training.channels.training", "5", "an s3:// URI or a key"]),
    ({f"{T}.channels": {"training": None}}, ["recipe.training.channels.training", "None", "accepted"]),
    ({f"{T}.channels": {"training": ["a"]}}, ["recipe.training.channels.training", "['a']", "accepted"]),
    ({f"{T}.channels": {"training": "../other-env/data"}}, ["recipe.training.channels.training", "'..", "no '..'"]),
    ({f"{T}.channels": {"training": "a/../../b"}}, ["recipe.training.channels.training", "a/../../b", "no '..'"]),
    ({f"{T}.channels": {"training": "a//b"}}, ["recipe.training.channels.training", "a//b", "accepted"]),
    ({f"{T}.channels": {"training": "s3://UPPER/x"}}, ["recipe.training.channels.training", "s3://UPPER/x", "s3://BUCKET/KEY"]),
    ({f"{T}.channels": {"training": "s3://b/../x"}}, ["recipe.training.channels.training", "s3://b/../x"]),
    ({f"{T}.channels": {"training": "s3://data-bucket/a/../../x"}}, ["recipe.training.channels.training", "no '.' or '..' part"]),
    ({f"{T}.channels": {"training": "s3://" + "b" * 64 + "/x"}}, ["recipe.training.channels.training", "s3://BUCKET/KEY"]),
    ({f"{T}.channels": {"training": "https://bucket.s3.amazonaws.com/x"}}, ["recipe.training.channels.training", "'https://bucket.s3.amazonaws.com/x'", "s3://BUCKET/KEY"]),
    ({f"{T}.channels": {"training": "file:///etc"}}, ["recipe.training.channels.training", "'file:///etc'", "s3://BUCKET/KEY"]),
    ({f"{T}.channels": "fixtures/train"}, ["recipe.training.channels", "'fixtures/train'", "object"]),
    # entry points name a file inside the source directory
    ({f"{T}.entry_point": "../../x.py"}, ["recipe.training.entry_point", "'../../x.py'", "no '..' part"]),
    ({f"{T}.entry_point": "/etc/x.py"}, ["recipe.training.entry_point", "'/etc/x.py'", "a relative path"]),
    ({f"{T}.entry_point": "./run_qa.py"}, ["recipe.training.entry_point", "'./run_qa.py'", "accepted"]),
    ({f"{T}.entry_point": "sub//run.py"}, ["recipe.training.entry_point", "'sub//run.py'", "accepted"]),
    ({f"{T}.entry_point": "run_qa.sh"}, ["recipe.training.entry_point", "'run_qa.sh'", "match"]),
    ({f"{T}.entry_point": "a/../run_qa.py"}, ["recipe.training.entry_point", "'a/../run_qa.py'", "no '..'"]),
    ({f"{T}.entry_point": 5}, ["recipe.training.entry_point", "5", "type string"]),
    # hyperparameters
    ({f"{T}.hyperparameters": {"": 1}}, ["recipe.training.hyperparameters", "''", "non-empty name"]),
    ({f"{T}.hyperparameters": {"  ": 1}}, ["recipe.training.hyperparameters", "'  '", "non-empty"]),
    ({f"{T}.hyperparameters": {"sagemaker_program": "x.py"}}, ["recipe.training.hyperparameters", "'sagemaker_program'", "not starting with 'sagemaker_'"]),
    ({f"{T}.hyperparameters": {"k" * 257: 1}}, ["recipe.training.hyperparameters", "at most 256"]),
    ({f"{T}.hyperparameters.max_steps": None}, ["recipe.training.hyperparameters.max_steps", "null", "accepted"]),
    ({f"{T}.hyperparameters.prompt": "x" * 2600}, ["recipe.training.hyperparameters.prompt", "at most 2500"]),
    ({f"{T}.hyperparameters": [1, 2]}, ["recipe.training.hyperparameters", "[1, 2]", "type object"]),
    # environments: SageMaker's key pattern; values spelled as JSON, never Python
    ({f"{T}.environment": {"1BAD": "x"}}, ["recipe.training.environment", "'1BAD'", "a letter or '_'"]),
    ({f"{T}.environment": {"A-B": "x"}}, ["recipe.training.environment", "'A-B'", "accepted"]),
    ({f"{T}.environment": {"": "x"}}, ["recipe.training.environment", "''", "accepted"]),
    ({f"{T}.environment": {"X": None}}, ["recipe.training.environment.X", "None is not a string", "accepted: a string"]),
    ({f"{T}.environment": {"X": [1]}}, ["recipe.training.environment.X", "[1]", "accepted"]),
    ({f"{T}.environment": {"X": {"a": 1}}}, ["recipe.training.environment.X", "{'a': 1}", "accepted"]),
    ({f"{T}.environment": {"X": "v" * 513}}, ["recipe.training.environment.X", "at most 512"]),
    ({f"{T}.environment": {f"V{i}": "x" for i in range(101)}}, ["recipe.training.environment", "101 variables", "at most 100"]),
    ({"serving.environment": {"HF-TASK": "x"}}, ["recipe.serving.environment", "'HF-TASK'", "accepted"]),
    ({"serving.environment": {"HF_TASK": None}}, ["recipe.serving.environment.HF_TASK", "None", "accepted"]),
    ({"serving.environment": {"X": "v" * 1025}}, ["recipe.serving.environment.X", "at most 1024"]),
    # metric definitions: compiled now, with the field named, not after training
    ({f"{T}.metric_definitions": [{"Name": "loss", "Regex": "loss=("}]}, ["recipe.training.metric_definitions[0].Regex", "'loss=('", "does not compile"]),
    ({f"{T}.metric_definitions": [{"Name": "loss", "Regex": "loss=[0-9.]+"}]}, ["recipe.training.metric_definitions[0].Regex", "has no group"]),
    ({f"{T}.metric_definitions": [{"Name": "loss", "Regex": "*x(1)"}]}, ["recipe.training.metric_definitions[0].Regex", "does not compile"]),
    ({f"{T}.metric_definitions": [{"Name": "", "Regex": "(x)"}]}, ["recipe.training.metric_definitions[0].Name", "''", "1 to 255"]),
    ({f"{T}.metric_definitions": [{"Name": "a", "Regex": "(x)"}, {"Name": "a", "Regex": "(y)"}]}, ["recipe.training.metric_definitions[1].Name", "'a'", "unique"]),
    ({f"{T}.metric_definitions": [{"Name": "a", "Regex": "(" + "x" * 500 + ")"}]}, ["recipe.training.metric_definitions[0].Regex", "1 to 500"]),
    ({f"{T}.metric_definitions": [{"Name": f"m{i}", "Regex": "(x)"} for i in range(41)]}, ["recipe.training.metric_definitions", "41 definitions", "at most 40"]),
    ({f"{T}.metric_definitions": [{"Name": 5, "Regex": "(x)"}]}, ["recipe.training.metric_definitions[0].Name", "5", "type string"]),
    # distributions: objects of the SDK's shape, not booleans
    ({f"{T}.distribution": {"torch_distributed": True}}, ["recipe.training.distribution.torch_distributed", "True", '{"enabled": true}']),
    ({f"{T}.distribution": {"torch_distributed": {"enabled": "yes"}}}, ["recipe.training.distribution.torch_distributed.enabled", "'yes'", "true or false"]),
    ({f"{T}.distribution": {"smdistributed": {"dataparallel": 1}}}, ["recipe.training.distribution.smdistributed.dataparallel", "1", "accepted"]),
    ({f"{T}.distribution": {"mpi": {"enabled": True, "processes_per_host": 0}}}, ["recipe.training.distribution.mpi.processes_per_host", "0", "whole number >= 1"]),
    ({f"{T}.distribution": {"mpi": {"enabled": True, "processes_per_host": 1.5}}}, ["recipe.training.distribution.mpi.processes_per_host", "1.5", "whole number"]),
    ({f"{T}.distribution": True}, ["recipe.training.distribution", "True", "type object or null"]),
    # checkpoints
    ({f"{T}.checkpoint_local_path": "/tmp/ckpt"}, ["recipe.training.checkpoint_local_path", "'/tmp/ckpt'", "under /opt/ml/"]),
    ({f"{T}.checkpoint_local_path": "/opt/ml/../../etc"}, ["recipe.training.checkpoint_local_path", "no '..' part"]),
    ({f"{T}.checkpoint_s3_uri": "http://example.invalid/x"}, ["recipe.training.checkpoint_s3_uri", "'http://example.invalid/x'", "s3://BUCKET/KEY"]),
    ({f"{T}.checkpoint_s3_uri": "s3://bucket-name/../x"}, ["recipe.training.checkpoint_s3_uri", "no '.' or '..'"]),
    # types and ranges the schema names
    ({f"{T}.instance_count": "2"}, ["recipe.training.instance_count", "'2'", "type integer"]),
    ({f"{T}.instance_count": True}, ["recipe.training.instance_count", "True", "type integer"]),
    ({f"{T}.instance_count": 0}, ["recipe.training.instance_count", "0", "minimum 1"]),
    ({f"{T}.max_run_seconds": 10**9}, ["recipe.training.max_run_seconds", "1000000000", "maximum 2419200"]),
    ({"serving.keep_endpoint": "yes"}, ["recipe.serving.keep_endpoint", "'yes'", "type boolean"]),
    ({"serving.max_latency_ms": 0}, ["recipe.serving.max_latency_ms", "0", "greater than 0"]),
    ({"deploy": "false"}, ["recipe.deploy", "'false'", "type boolean"]),
    ({"task": "translation"}, ["recipe.task", "'translation'", "one of"]),
    ({"name": "../x"}, ["recipe.name", "'../x'", "does not match"]),
    ({"surprise": 1}, ["recipe", "unknown field(s) ['surprise']", "accepted"]),
]
# fmt: on


@pytest.mark.parametrize(
    ("overrides", "fragments"), RECIPE_CASES, ids=[f"r{i}" for i in range(len(RECIPE_CASES))]
)
def test_recipe_field_refused(overrides: dict[str, Any], fragments: list[str]) -> None:
    with pytest.raises(RecipeError) as err:
        resolve_recipe(load_recipe("tiny-qa"), overrides=overrides)
    message = str(err.value)
    for fragment in fragments:
        assert fragment in message, (fragment, message)


# `--set` strings (and the Plan input's list form): (text, fragments)
# fmt: off
SET_CASES: list[tuple[str, list[str]]] = [
    ("serving.max_latency_ms=NaN", ["override serving.max_latency_ms", "'NaN'", "finite JSON number"]),
    ("serving.max_latency_ms=Infinity", ["override serving.max_latency_ms", "'Infinity'", "no NaN or Infinity"]),
    ("evaluation_gate.threshold=-Infinity", ["override evaluation_gate.threshold", "'-Infinity'", "finite"]),
    ("training.hyperparameters.x=[1, NaN]", ["override training.hyperparameters.x", "'[1, NaN]'", "finite"]),
    ("training..x=1", ["'training..x=1'", "no empty part"]),
    ("training.hyperparameters.=1", ["'training.hyperparameters.=1'", "no empty part"]),
    (".deploy=false", ["'.deploy=false'", "no empty part"]),
    ("=1", ["'=1'", "dotted.key=value"]),
    ("no-equals-sign", ["'no-equals-sign'", "dotted.key=value"]),
]
# fmt: on


@pytest.mark.parametrize(("text", "fragments"), SET_CASES, ids=[f"s{i}" for i in range(len(SET_CASES))])
def test_set_override_refused(text: str, fragments: list[str]) -> None:
    with pytest.raises(RecipeError) as err:
        apply_overrides(load_recipe("tiny-qa"), [text])
    for fragment in fragments:
        assert fragment in str(err.value), (fragment, str(err.value))


# NaN / Infinity in the recipe itself: a file holding the literals, or an object with float NaN (the Plan's
# input as Python sees it): (path in the recipe, value)
# fmt: off
RAW_NAN_CASES = [
    (("serving", "max_latency_ms"), math.nan),
    (("serving", "max_latency_ms"), math.inf),
    (("training", "expected_hours"), -math.inf),
    (("training", "hyperparameters", "learning_rate"), math.nan),
    (("serving", "sample_request", "inputs"), math.nan),
]
# fmt: on


@pytest.mark.parametrize(("where", "value"), RAW_NAN_CASES, ids=[f"n{i}" for i in range(len(RAW_NAN_CASES))])
def test_nan_in_recipe_object_and_file_refused(where: tuple[str, ...], value: float, tmp_path: Any) -> None:
    import json

    recipe = load_recipe("tiny-qa")
    node = recipe
    for part in where[:-1]:
        node = node[part]
    node[where[-1]] = value
    with pytest.raises(RecipeError) as err:
        resolve_recipe(recipe)
    assert f"recipe.{'.'.join(where)}: {value!r} is not accepted; accepted: a finite number" in str(err.value)
    path = tmp_path / "nan.json"
    path.write_text(json.dumps(recipe))  # Python writes NaN / Infinity literals
    with pytest.raises(RecipeError) as err:
        load_recipe(str(path))
    assert "is not accepted; accepted: finite numbers (JSON has no NaN or Infinity)" in str(err.value)
    assert str(path) in str(err.value)


def test_environment_values_are_strings_as_sagemaker_types_them() -> None:
    """botocore's EnvironmentValue is a string: true, 1.5 or 0 are named as not strings, with the string meant."""
    from hfpipe.core import validate

    assert validate.environment({"D": "true", "E": ""}, "env", max_len=512) == {"D": "true", "E": ""}
    for value, meant in ((True, "true"), (1.5, "1.5"), (0, "0"), (False, "false")):
        with pytest.raises(RecipeError) as err:
            validate.environment({"A": value}, "env", max_len=512)
        assert str(err.value) == (
            f'env.A: {value!r} is not a string; accepted: a string (e.g. "{meant}": --set \'env.A="{meant}"\') '
            "(SageMaker's type)"
        )
    with pytest.raises(RecipeError) as err:
        resolve_recipe(recipe_name="tiny-qa", overrides=["training.environment.FLAG=true"])
    assert str(err.value) == (
        'recipe.training.environment.FLAG: True is not a string; accepted: a string (e.g. "true": --set '
        "'training.environment.FLAG=\"true\"') (SageMaker's type)"
    )
    quoted = resolve_recipe(recipe_name="tiny-qa", overrides=['training.environment.FLAG="true"'])
    assert quoted["training"]["environment"] == {"FLAG": "true"}


@pytest.mark.parametrize(
    "override", ["training.instance_count=1.0", "training.volume_size_gb=30.0", "serving.instance_count=2.0"]
)
def test_integer_fields_refuse_a_float_naming_the_field(override: str) -> None:
    field, _, value = override.partition("=")
    with pytest.raises(RecipeError) as err:
        resolve_recipe(recipe_name="tiny-qa", overrides=[override])
    assert str(err.value) == (
        f"recipe.{field}: {value} is not accepted; accepted: a whole number written without a decimal point "
        f"({int(float(value))}): SageMaker types this field as an integer"
    )
    assert resolve_recipe(recipe_name="tiny-qa", overrides=[override.replace(".0", "")])


def test_set_value_that_is_not_json_stays_a_string() -> None:
    # `--set training.hyperparameters.optim=adamw_torch`: plain words are strings, as documented.
    assert parse_override("training.hyperparameters.optim=adamw_torch") == (
        "training.hyperparameters.optim",
        "adamw_torch",
    )
    assert parse_override('training.hyperparameters.note="NaN"') == ("training.hyperparameters.note", "NaN")
