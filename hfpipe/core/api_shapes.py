"""What SageMaker's API accepts, checked before anything is created: lengths, whole-value patterns, enums and
ranges of every value the pipeline sends to CreateTrainingJob, CreateModel, CreateEndpointConfig,
CreateEndpoint, a deploy's UpdateEndpoint, the evaluation's CreateProcessingJob and the model registry's CreateModelPackageGroup, CreateModelPackage
and UpdateModelPackage, from botocore's own service model (`api_shapes.json` beside this module, generated from it:
`HFPIPE_UPDATE_SHAPES=1 pytest tests/core/test_api_shapes.py` rewrites it; the test fails when it is stale).

Stdlib only (the Plan Lambda runs it). The service model writes its patterns in Java's dialect; the ones
that use Unicode classes (`\\p{L}`, `\\p{Z}`, `\\p{N}`, `\\p{Alnum}`; `\\p{M}`, `\\p{S}`, `\\p{P}` in
descriptions) are translated to Python's equivalents here (`_PYTHON_CLASSES`), `.` stops at each of Java's
line terminators (not only "\\n"), `\\w` and `\\d` are ASCII as in Java, and every pattern must match the
whole value, as the API matches it (`_java_to_python`).
"""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hfpipe.core.validate import RecipeError

if TYPE_CHECKING:
    from hfpipe.core.run.plan_model import Plan

SHAPES_FILE = Path(__file__).with_name("api_shapes.json")
OPERATIONS = (
    "CreateTrainingJob",
    "CreateModel",
    "CreateEndpointConfig",
    "CreateEndpoint",
    # The model registry (the Register step, `hfpipe models approve|reject`).
    "CreateModelPackageGroup",
    "CreateModelPackage",
    "UpdateModelPackage",
    # A registered version deployed to a named endpoint (the deploy's Prepare step; CreateModel & co above).
    "UpdateEndpoint",
    # The evaluation job (docs/evaluation.md: the pipeline's Evaluate step, hfpipe.core.run.evaluation_job).
    "CreateProcessingJob",
)

# Java's Unicode classes as Python character-class contents: letters and numbers are what str.isalnum
# counts (Python's \w without the underscore), separators the Zs/Zl/Zp code points.
_PYTHON_CLASSES = {
    r"\p{Alnum}": r"a-zA-Z0-9",
    r"\p{L}": r"\w",
    r"\p{N}": r"\d",
    r"\p{Z}": " \u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000",
    # Descriptions (EntityDescription): marks, symbols and punctuation. Narrower than Java's classes
    # (combining diacritics; ASCII symbols and punctuation): a value these refuse, the API may still take,
    # never the other way round.
    r"\p{M}": "\u0300-\u036f",
    r"\p{S}": r"$+<=>^`|~",
    r"\p{P}": r"!-#%-*,-/:;?@\[-\]_{}",
}


@cache
def _shapes() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(SHAPES_FILE.read_text())
    return data


#: Java's line terminators (java.util.regex.Pattern, "Line terminators"): what `.` does not match and what
#: `$` may stand before, where Python's `re` knows only "\n".
_LINE_TERMINATORS = "\n\r\u0085\u2028\u2029"
#: Java's predefined classes are ASCII (Pattern, "Predefined character classes"); Python's are Unicode.
_JAVA_ASCII = {"w": "a-zA-Z_0-9", "d": "0-9"}


def _java_to_python(pattern: str) -> str:
    r"""The pattern in Python's dialect with Java's meaning: `.` stops at every Java line terminator, `\w`
    and `\d` are ASCII, and the Unicode classes become their Python equivalents."""
    out: list[str] = []
    i, in_class = 0, False
    while i < len(pattern):
        char = pattern[i]
        if char == "\\" and pattern.startswith("\\p{", i):
            end = pattern.index("}", i) + 1
            body = _PYTHON_CLASSES[pattern[i:end]]
            out.append(body if in_class else f"[{body}]")
            i = end
        elif char == "\\" and i + 1 < len(pattern):
            ascii_class = _JAVA_ASCII.get(pattern[i + 1])
            if ascii_class is None:
                out.append(pattern[i : i + 2])
            else:
                out.append(ascii_class if in_class else f"[{ascii_class}]")
            i += 2
        else:
            if in_class and char == "]":
                in_class = False
            elif not in_class and char == "[":
                in_class = True
            elif not in_class and char == ".":
                char = f"[^{_LINE_TERMINATORS}]"
            out.append(char)
            i += 1
    return "".join(out)


@cache
def _compiled(pattern: str) -> re.Pattern[str]:
    # CustomerMetadataKey/Value end in `${1,128}`: a quantifier on the end anchor, which Java tolerates and
    # Python refuses; the lengths are the shape's min/max, checked on their own.
    pattern = re.sub(r"\$\{\d+,\d+\}$", "$", pattern)
    # Whole-value match, as Matcher.matches(): a value ending in a line terminator is refused unless the
    # pattern itself takes it (Python's `$` would also stand before a final "\n"; fullmatch must consume it).
    return re.compile(_java_to_python(pattern))


def enum(shape: str) -> tuple[str, ...]:
    """The values a string shape of the service model accepts (`TrainingInstanceType`, ...)."""
    return tuple(_shapes()["shapes"][shape]["enum"])


def problems(operation: str, request: Any) -> list[str]:
    """Every way `request` breaks the operation's input shape or a rule the API reference states beside it
    (``_RULES``; empty when SageMaker would take it)."""
    shapes = _shapes()
    found = list(_walk(shapes, shapes["operations"][operation], request, operation))
    rule = _RULES.get(operation)
    return found + ([rule[1]] if rule and isinstance(request, dict) and rule[0](request) else [])


#: Rules the API reference states in a field's documentation, which the shapes cannot say: (refused?, problem).
#: CreateModelPackage, Tags: "If you supply ModelPackageGroupName, your model package belongs to the model
#: group you specify and uses the tags associated with the model group. In this case, you cannot supply a tag
#: argument." (A versioned package takes its group's tags.)
_RULES: dict[str, tuple[Any, str]] = {
    "CreateModelPackage": (
        lambda r: bool(r.get("ModelPackageGroupName")) and "Tags" in r,
        "CreateModelPackage.Tags: not accepted with ModelPackageGroupName (a versioned model package uses its "
        "group's tags); accepted: no Tags",
    ),
}


def shape_problems(shape: str, value: Any) -> list[str]:
    """Every way ``value`` breaks one shape of the service model (``ApprovalDescription``: max 1024, pattern
    ``.*``), named by the shape; empty when SageMaker would take it."""
    return list(_walk(_shapes(), shape, value, shape))


def _walk(shapes: dict[str, Any], name: str, value: Any, path: str) -> Any:
    shape = shapes["shapes"][name]
    kind = shape["type"]
    if kind == "structure":
        if not isinstance(value, dict):
            yield f"{path}: expected an object"
            return
        for member in shape.get("required", []):
            if member not in value:
                yield f"{path}.{member}: required"
        for key, sub in value.items():
            if key not in shape["members"]:
                yield f"{path}.{key}: not a field of {name}"
            else:
                yield from _walk(shapes, shape["members"][key], sub, f"{path}.{key}")
    elif kind == "list":
        if not isinstance(value, list):
            yield f"{path}: expected a list"
            return
        yield from _bounds(shape, len(value), path, "items")
        for i, item in enumerate(value):
            yield from _walk(shapes, shape["member"], item, f"{path}[{i}]")
    elif kind == "map":
        if not isinstance(value, dict):
            yield f"{path}: expected an object"
            return
        yield from _bounds(shape, len(value), path, "entries")
        for key, item in value.items():
            yield from _walk(shapes, shape["key"], key, f"{path} key {key!r}")
            yield from _walk(shapes, shape["value"], item, f"{path}.{key}")
    elif kind == "string":
        if not isinstance(value, str):
            yield f"{path}: expected a string"
            return
        yield from _bounds(shape, len(value), path, "characters")
        if "enum" in shape and value not in shape["enum"]:
            yield f"{path}: {value!r} is not one of {shape['enum']}"
        if "pattern" in shape and not _compiled(shape["pattern"]).fullmatch(value):
            yield f"{path}: {value[:80]!r} does not match the API's pattern {shape['pattern']}"
    elif kind in ("integer", "long", "float", "double"):
        if isinstance(value, bool) or not isinstance(value, int | float):
            yield f"{path}: expected a number"
            return
        if "min" in shape and value < shape["min"]:
            yield f"{path}: {value} is below the API's minimum {shape['min']}"
        if "max" in shape and value > shape["max"]:
            yield f"{path}: {value} is above the API's maximum {shape['max']}"
    elif kind == "boolean" and not isinstance(value, bool):
        yield f"{path}: expected a boolean"


def _bounds(shape: dict[str, Any], size: int, path: str, unit: str) -> Any:
    if "min" in shape and size < shape["min"]:
        yield f"{path}: {size} {unit}; accepted: at least {shape['min']}"
    if "max" in shape and size > shape["max"]:
        yield f"{path}: {size} {unit}; accepted: at most {shape['max']}"


def pipeline_requests(plan: Plan) -> dict[str, dict[str, Any]]:
    """The requests an execution of this plan sends, as the state machine builds them from the plan
    (stacks/constructs/pipeline_state_machine.py); the model's S3 URI is where SageMaker writes it."""
    job = plan.training_job_request
    out: dict[str, dict[str, Any]] = {"CreateTrainingJob": job}
    if not plan.deploy:
        return out
    output = str(job.get("OutputDataConfig", {}).get("S3OutputPath", "s3://bucket/")).rstrip("/")
    out["CreateModel"] = {
        "ModelName": plan.model_name,
        "ExecutionRoleArn": plan.role_arn,
        "PrimaryContainer": {
            "Image": plan.inference_image_uri,
            "ModelDataUrl": f"{output}/{plan.training_job_name}/output/model.tar.gz",
            "Environment": plan.serving_environment,
        },
        "Tags": plan.hosting_tags,
    }
    out["CreateEndpointConfig"] = {
        "EndpointConfigName": plan.endpoint_config_name,
        "ProductionVariants": plan.serving_production_variants,
        "Tags": plan.hosting_tags,
    }
    out["CreateEndpoint"] = {
        "EndpointName": plan.endpoint_name,
        "EndpointConfigName": plan.endpoint_config_name,
        "Tags": plan.hosting_tags,
    }
    return out


def check_plan(plan: Plan) -> None:
    """RecipeError naming the first value of the plan's requests that SageMaker's API would refuse."""
    for operation, request in pipeline_requests(plan).items():
        found = problems(operation, request)
        if found:
            raise RecipeError(
                f"{found[0]}: SageMaker's {operation} would refuse this request, which the recipe's settings "
                "made; accepted: what the API reference allows for that field"
            )
