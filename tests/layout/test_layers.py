"""The layout is the architecture (docs/layers.md): dependencies point one way,

    hfpipe/kinds  <-  hfpipe/core (+ hfpipe/contract.py)  <-  lambda/, stacks/  <-  app.py  <-  hfpipe/local  <-  hfpipe/cli

Every module of each layer is read (its imports, module-level and inside functions) and imported; none may
import a layer above it or beside it, statically or at run time (importlib). The core and the kinds are
stdlib only, because the Lambda bundle
copies them (the core also imports the one validator the bundle ships: BUNDLED_PACKAGES); every layer may use the kinds (hfpipe/kinds: the task and serving kind registries).
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Layer -> the files in it (relative globs).
LAYERS: dict[str, tuple[str, ...]] = {
    "kinds": ("hfpipe/kinds/*.py",),
    "core": ("hfpipe/__init__.py", "hfpipe/contract.py", "hfpipe/core/*.py", "hfpipe/core/*/*.py"),
    "lambda": ("lambda/pipeline/pipeline_lambdas/*.py", "lambda/quota/*.py"),
    "stacks": ("stacks/*.py", "stacks/constructs/*.py", "stacks/functions/*.py"),
    "app": ("app.py",),
    "fixtures": ("hfpipe/fixtures/*.py",),
    "local": ("hfpipe/local/*.py", "hfpipe/local/*/*.py"),
    "cli": ("hfpipe/cli/*.py", "hfpipe/cli/*/*.py"),
}
# Layer -> the layers its modules may import (its own included).
ALLOWED: dict[str, set[str]] = {
    "kinds": {"kinds"},
    "core": {"core", "kinds"},
    "lambda": {"core", "kinds", "lambda"},
    "stacks": {"core", "kinds", "stacks"},
    "app": {"core", "kinds", "stacks", "app"},
    "fixtures": {"fixtures", "kinds"},
    # Local mode runs the Lambdas' handlers in process, as the Lambda runtime does (by name, from the
    # template), and the inference handlers of training_code/, as the inference toolkit does (by path):
    # arrows that point down, drawn by DYNAMIC_IMPORTS below.
    "local": {"core", "kinds", "fixtures", "local", "lambda", "training_code"},
    "cli": {"core", "kinds", "local", "cli"},
}
# Where a module may change sys.path, and why (nowhere else outside tests).
SYS_PATH_EDITS = {
    "hfpipe/local/serving/endpoint.py": "the inference toolkit runs a handler with its code/ folder on the path; "
    "emulated while the handler loads, then restored",
}
#: Every module that imports by name or path at run time (importlib), the layer it reaches, and why; the
#: arrow must be one its layer may draw (ALLOWED). None: a third-party package.
DYNAMIC_IMPORTS: dict[str, tuple[str | None, str]] = {
    "hfpipe/local/checkout.py": ("lambda", "loads the pipeline Lambdas' package from its folder"),
    "hfpipe/local/engine/engine.py": ("lambda", "each function's handler, by the template's Handler name"),
    "hfpipe/local/world.py": ("lambda", "the handlers' client factory, pointed at the world"),
    "hfpipe/local/serving/endpoint.py": (
        "training_code",
        "the inference handler script as the toolkit loads it (and local endpoint classes of its own layer)",
    ),
    "hfpipe/local/engine/moto_patches.py": (None, "moto's modules it patches, version-guarded"),
    "hfpipe/cli/__init__.py": (
        "cli",
        "the module of the one command a command line runs (hfpipe.cli.COMMANDS)",
    ),
    "hfpipe/fixtures/__init__.py": (
        "fixtures",
        "the builder a tiny model family names (hfpipe.kinds.TINY_MODELS)",
    ),
}
#: Functions may be about this long (DESIGN.md: small enough to read at once).
FUNCTION_BUDGET = 60


def _files(layer: str) -> list[Path]:
    return sorted({p for pattern in LAYERS[layer] for p in ROOT.glob(pattern)})


def _layer_of(module: str) -> str | None:
    """The layer an absolute module name belongs to (None: stdlib or a third-party package)."""
    top = module.split(".")[0]
    if module == "hfpipe.kinds" or module.startswith("hfpipe.kinds."):
        return "kinds"
    if module in ("hfpipe", "hfpipe.__version__") or module.startswith(("hfpipe.core", "hfpipe.contract")):
        return "core"
    for name in ("fixtures", "local", "cli"):
        if module.startswith(f"hfpipe.{name}"):
            return name
    if top == "hfpipe":
        return "unknown"  # a module outside every layer
    if top in ("pipeline_lambdas", "quota_request"):
        return "lambda"
    if top == "stacks":
        return "stacks"
    if top == "app":
        return "app"
    return None


def _imports(path: Path) -> list[tuple[int, str]]:
    """(line, absolute module name) of every import in the file, wherever it is."""
    package = ".".join(path.relative_to(ROOT).with_suffix("").parts[:-1])
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join([*base, node.module] if node.module else base)
            else:
                module = node.module or ""
            # `from hfpipe import contract` names a module too.
            found += [(node.lineno, f"{module}.{alias.name}") for alias in node.names] or [
                (node.lineno, module)
            ]
    return found


def test_every_module_is_in_a_layer() -> None:
    placed = {p for layer in LAYERS for p in _files(layer)}
    code = {p for d in ("hfpipe", "lambda", "stacks") for p in (ROOT / d).rglob("*.py")} | {ROOT / "app.py"}
    assert sorted(str(p.relative_to(ROOT)) for p in code - placed) == []


@pytest.mark.parametrize("layer", list(LAYERS))
def test_no_layer_imports_one_above_or_beside_it(layer: str) -> None:
    wrong = [
        f"{path.relative_to(ROOT)}:{line} imports {module} ({_layer_of(module)})"
        for path in _files(layer)
        for line, module in _imports(path)
        if _layer_of(module) is not None and _layer_of(module) not in ALLOWED[layer]
    ]
    assert wrong == []


def _bundled_packages() -> tuple[str, ...]:
    """stacks/functions/common.py's BUNDLED_PACKAGES, read without importing the CDK."""
    tree = ast.parse((ROOT / "stacks" / "functions" / "common.py").read_text())
    [value] = [
        node.value
        for node in tree.body
        if isinstance(node, ast.Assign)
        and any(isinstance(t, ast.Name) and t.id == "BUNDLED_PACKAGES" for t in node.targets)
    ]
    return tuple(ast.literal_eval(value))


def test_the_core_imports_the_stdlib_and_what_the_bundle_ships() -> None:
    """The kinds are stdlib only; the core may import besides only the packages the Lambda bundle copies
    (BUNDLED_PACKAGES: the recipe schema's validator), since the Lambda runtime has no others."""
    bundled = _bundled_packages()
    assert bundled == ("fastjsonschema",)
    third_party = [
        f"{path.relative_to(ROOT)}:{line} imports {module}"
        for layer in ("kinds", "core")
        for path in _files(layer)
        for line, module in _imports(path)
        if _layer_of(module) is None
        and module.split(".")[0] not in sys.stdlib_module_names
        and (layer == "kinds" or module.split(".")[0] not in bundled)
    ]
    assert third_party == []


def test_importing_each_layer_loads_nothing_above_it() -> None:
    """At run time too: importing every module of a layer (in a fresh interpreter) loads no module of a
    layer it may not import."""
    script = """
import importlib, json, sys
names = sys.argv[1:]
for name in names:
    importlib.import_module(name)
print(json.dumps(sorted(sys.modules)))
"""
    for layer in ("kinds", "core", "local", "cli"):
        names = [".".join(p.relative_to(ROOT).with_suffix("").parts) for p in _files(layer)]
        names = [n.removesuffix(".__init__") for n in names if not n.endswith("__main__")]
        out = subprocess.run(
            [sys.executable, "-c", script, *names], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout
        loaded = json.loads(out)
        # The bare `hfpipe` package (its version only) loads with any of its subpackages, hfpipe.kinds too.
        above = sorted(m for m in loaded if m != "hfpipe" and _layer_of(m) not in (None, *ALLOWED[layer]))
        assert above == [], layer
        if layer in ("kinds", "core"):
            assert not [m for m in loaded if m.split(".")[0] in ("boto3", "botocore", "rich", "aws_cdk")]


def _touches_sys_path(tree: ast.AST) -> bool:
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and node.attr == "path"
            and getattr(node.value, "id", None) == "sys"
        ):
            return True
        if isinstance(node, ast.Call) and len(node.args) >= 2:  # mock.patch.object(sys, "path", ...)
            target, attr = node.args[0], node.args[1]
            if getattr(target, "id", None) == "sys" and getattr(attr, "value", None) == "path":
                return True
    return False


def test_sys_path_is_left_alone_outside_tests() -> None:
    edits = [
        str(path.relative_to(ROOT))
        for layer in LAYERS
        for path in _files(layer)
        if _touches_sys_path(ast.parse(path.read_text()))
    ]
    assert sorted(edits) == sorted(SYS_PATH_EDITS)


#: The calls that import by name or path at run time: importlib's, __import__, runpy's.
_DYNAMIC_CALLS = ("import_module", "spec_from_file_location", "__import__", "run_path", "run_module")


def _dynamic_imports(path: Path) -> list[int]:
    """Lines of the run-time imports in the file (any of _DYNAMIC_CALLS)."""
    return _dynamic_import_lines(path.read_text())


def _dynamic_import_lines(source: str) -> list[int]:
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            name = getattr(node.func, "attr", None) or getattr(node.func, "id", None)
            if name in _DYNAMIC_CALLS:
                found.append(node.lineno)
    return found


def test_each_way_of_importing_at_run_time_is_seen() -> None:
    source = """import importlib, importlib.util, runpy
from importlib import import_module
importlib.import_module("a")
import_module("b")
importlib.util.spec_from_file_location("c", "c.py")
__import__("d")
runpy.run_path("e.py")
runpy.run_module("f")
import g
"""
    assert sorted(_dynamic_import_lines(source)) == [3, 4, 5, 6, 7, 8]


def test_run_time_imports_are_arrows_the_layers_allow() -> None:
    dynamic = {
        str(path.relative_to(ROOT)): layer
        for layer in LAYERS
        for path in _files(layer)
        if _dynamic_imports(path)
    }
    assert sorted(dynamic) == sorted(DYNAMIC_IMPORTS)
    for module, layer in dynamic.items():
        target, _why = DYNAMIC_IMPORTS[module]
        assert target is None or target in ALLOWED[layer], (module, target)


def _functions(path: Path) -> dict[str, int]:
    """{Class.name or name: lines} of the file's functions and methods (nested ones counted in theirs)."""
    out: dict[str, int] = {}
    tree = ast.parse(path.read_text())
    for node in tree.body:
        members = node.body if isinstance(node, ast.ClassDef) else [node]
        for fn in members:
            if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
                name = f"{node.name}.{fn.name}" if isinstance(node, ast.ClassDef) else fn.name
                out[name] = (fn.end_lineno or fn.lineno) - fn.lineno + 1
    return out


def test_functions_fit_the_budget() -> None:
    """No module line cap (one concept per module); every function of the layers and training_code/ at most
    FUNCTION_BUDGET lines (a method counts in its class, a nested function in the function around it)."""
    code = [p for layer in LAYERS for p in _files(layer)] + sorted((ROOT / "training_code").glob("*.py"))
    lengths = {f"{path.relative_to(ROOT)}:{name}": n for path in code for name, n in _functions(path).items()}
    over = {name: n for name, n in lengths.items() if n > FUNCTION_BUDGET}
    assert over == {}, f"over {FUNCTION_BUDGET} lines (split them): {over}"
    assert len(lengths) > 1000 and max(lengths.values()) > FUNCTION_BUDGET // 2  # the count saw the code


def test_the_wheel_lists_every_package() -> None:
    """pyproject.toml names the packages one by one (for the recipes' and training code's package-dir); none
    may be missing."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(config["packages"])
    on_disk = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "hfpipe").rglob("__init__.py")}
    assert listed == on_disk | {"hfpipe.recipes", "hfpipe.training_code"}
    assert config["package-dir"] == {"hfpipe.recipes": "recipes", "hfpipe.training_code": "training_code"}
