"""What the docs state as fact is what the code and the synthesized stacks say, checked so that a drift fails.

- The plan's schema version the docs give is `hfpipe.core.run.plan_model.SCHEMA_VERSION`.
- The recipes: docs/recipes.md lists every bundled recipe and no other, each row with its recipe's training and
  serving instances, expected hours and estimated cost as `hfpipe recipes` computes them; every recipe the
  docs name (in backticks, after `--recipe`, as `RECIPE/N`) is bundled.
- The architecture (docs/architecture.md, docs/infra.md): every stack, state machine and Lambda function the
  block names is in the synthesized app (tests/app_synth.py, cdk.json's environments), it names every state
  machine and pipeline function the app has, and the counts it states ("eight Lambdas (Plan, ...)", "two
  EventBridge rules", "three rollback alarms per named endpoint") are the templates'.
- State names: every state a diagram or state list of the docs names, next to an arrow or in a list of
  states, is a state (or an error name) of that state machine's synthesized definition.
- Versions: a pinned package's version the docs quote is a version the repository pins (constraints.txt,
  requirements*.txt, training_code/requirements.txt, benchmarks/gpu_wheels.txt, stacks/dlc_images.json, or a
  recipe's container), and "the local transformers is the container's" holds.
- The layers: docs/layers.md's "imports" column names the layers each layer's modules import
  (tests/layout/test_layers.py reads them).
- The cdk.json entries the docs show are ones stacks/config.py accepts.

Each check is a function over the documents' text, so `test_the_checks_can_fail` feeds it a drifted copy.
"""

from __future__ import annotations

import json
import re
from functools import cache
from typing import Any

from doc_blocks import DOCS, REPO, blocks

from hfpipe.contract import stack_name


def read(name: str) -> str:
    return (REPO / name).read_text()


def all_docs() -> dict[str, str]:
    return {str(p.relative_to(REPO)): p.read_text() for p in DOCS}


# --- the plan's schema version ------------------------------------------------------------------------------

SCHEMA_MENTION = re.compile(r"(?:`schema_version` |plan schema version )(\d+)")


def schema_version_problems(texts: dict[str, str]) -> list[str]:
    from hfpipe.core.run.plan_model import SCHEMA_VERSION

    found = [(doc, int(n)) for doc, text in texts.items() for n in SCHEMA_MENTION.findall(text)]
    assert found, "no document gives the plan's schema version"
    return [
        f"{doc}: plan schema version {n}; the code's is {SCHEMA_VERSION}"
        for doc, n in found
        if n != SCHEMA_VERSION
    ]


def test_the_plan_schema_version_is_the_codes() -> None:
    assert schema_version_problems(all_docs()) == []


# --- the recipes --------------------------------------------------------------------------------------------


@cache
def recipe_estimates() -> dict[str, dict[str, Any]]:
    """`hfpipe recipes --json`, by recipe name."""
    import contextlib
    import io

    from hfpipe.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["recipes", "--json"]) == 0
    return {r["name"]: r for r in json.loads(out.getvalue())}


def table_rows(text: str, header: str) -> list[list[str]]:
    """The rows (cells) of the Markdown table whose header row starts with `header`."""
    lines = text[text.index(header) :].splitlines()
    rows = []
    for line in lines[2:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split(" | ")])
    return rows


def recipe_row_problems(cells: list[str], recipe: dict[str, Any]) -> list[str]:
    """One table row against its recipe: instances, expected hours, estimated cost (as rounded in the row)."""
    row, name, problems = " | ".join(cells), recipe["name"], []
    training, serving = recipe["training"], recipe["serving"]
    count = training["instance_count"]
    instances = f"{count} x {training['instance_type']}" if count > 1 else training["instance_type"]
    if instances not in cells[2]:
        problems.append(f"{name}: training on {instances}, not said in {cells[2]!r}")
    if serving["instance_type"] not in cells[3]:
        problems.append(f"{name}: serving on {serving['instance_type']}, not said in {cells[3]!r}")
    hours = re.match(r"~([\d.]+) h", cells[4])
    if not hours or float(hours.group(1)) != recipe["expected_hours"]:
        problems.append(f"{name}: expected {recipe['expected_hours']} h; the row says {cells[4]!r}")
    cost = re.match(r"~\$([\d.]+)", cells[5])
    decimals = len(cost.group(1).partition(".")[2]) if cost else 0
    if not cost or float(cost.group(1)) != round(recipe["estimated_cost_usd"] + 1e-9, decimals):
        problems.append(f"{name}: estimated {recipe['estimated_cost_usd']} USD; the row says {cells[5]!r}")
    return [f"docs/recipes.md: {p} ({row[:60]}...)" for p in problems]


def recipe_table_problems(text: str, estimates: dict[str, dict[str, Any]]) -> list[str]:
    """docs/recipes.md's table: every bundled recipe, each once, and the facts of each single-recipe row."""
    problems, listed = [], []
    for cells in table_rows(text, "| recipe | model / data |"):
        names = re.findall(r"`([a-z0-9-]+)`", cells[0])
        listed += names
        if len(names) == 1 and names[0] in estimates:
            problems += recipe_row_problems(cells, estimates[names[0]])
    missing, unknown = sorted(set(estimates) - set(listed)), sorted(set(listed) - set(estimates))
    problems += [f"docs/recipes.md: bundled recipe {n!r} is not in the table" for n in missing]
    problems += [f"docs/recipes.md: {n!r} is in the table but not in recipes/" for n in unknown]
    return problems + [f"docs/recipes.md: {n!r} is listed twice" for n in set(listed) if listed.count(n) > 1]


def test_the_recipe_table_is_every_recipe_with_its_figures() -> None:
    assert recipe_table_problems(read("docs/recipes.md"), recipe_estimates()) == []


#: Names shaped like a recipe's that the docs give for something else.
NOT_RECIPES = {
    "bert-large-uncased-whole-word-masking": "a Hub model: the SQuAD recipes' model",
    "tiny-lora-tgi": "docs/extending.md's sketch of a serving kind (a branch, not merged)",
    "tiny-t5-samsum": "docs/extending.md's sketch of a task kind (a branch, not merged)",
}
RECIPE_NAMED = re.compile(
    r"`((?:tiny|bert|roberta|distilbert|bloomz|qwen)-[a-z0-9-]+)`"  # in backticks alone
    r"|--recipe ((?:tiny|bert|roberta|distilbert|bloomz|qwen)-[a-z0-9-]+)\b"  # a command's --recipe
    r"|\b((?:tiny|bert|roberta|distilbert|bloomz|qwen)-[a-z0-9-]+)/\d+\b"  # a version, RECIPE/N
)


def unknown_recipe_names(texts: dict[str, str], bundled: set[str]) -> list[str]:
    found = {(doc, "".join(m)) for doc, text in texts.items() for m in RECIPE_NAMED.findall(text)}
    return sorted(
        f"{doc}: {name!r} is no bundled recipe"
        for doc, name in found
        if name not in bundled | set(NOT_RECIPES)
    )


def test_every_recipe_the_docs_name_is_bundled() -> None:
    assert unknown_recipe_names(all_docs(), set(recipe_estimates())) == []


# --- the architecture against the synthesized app -----------------------------------------------------------

NUMBERS = {
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
}
#: A Lambda function of a Pipeline stack by its logical ID: PipelineLambdas<Name>Function..., <Name>Function...
FUNCTION_ID = re.compile(r"^(?:PipelineLambdas|Promotion)?([A-Za-z]+?)Function[0-9A-F]{8}$")


def resources(template: dict[str, Any], kind: str) -> list[str]:
    return [lid for lid, r in template["Resources"].items() if r["Type"] == kind]


def state_machines(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """{StateMachineName: its definition} of a template (tokens in the definition string stand as "X")."""
    found = {}
    for lid in resources(template, "AWS::StepFunctions::StateMachine"):
        props = template["Resources"][lid]["Properties"]
        definition = props["DefinitionString"]
        if isinstance(definition, dict):
            definition = "".join(p if isinstance(p, str) else "X" for p in definition["Fn::Join"][1])
        found[props["StateMachineName"]] = json.loads(definition)
    return found


def pipeline_functions(template: dict[str, Any]) -> set[str]:
    """The names of a Pipeline stack's Lambda functions (Plan, DeployPrepare, Adapter, Promote, ...)."""
    names = (FUNCTION_ID.match(lid) for lid in resources(template, "AWS::Lambda::Function"))
    return {m.group(1) for m in names if m}


def architecture_problems(block: str, templates: dict[str, dict[str, Any]]) -> list[str]:
    """The architecture block against the synthesized templates of cdk.json's environments."""
    problems = []
    # By kind (pipeline, deploy, adapters, promote): the block shows dev's, and prod's promotion.
    machines = {
        re.sub(r"-[a-z0-9]+-", "-<env>-", n, count=1) for t in templates.values() for n in state_machines(t)
    }
    named_machines = {
        re.sub(r"-[a-z0-9]+-", "-<env>-", n, count=1)
        for n in re.findall(r"\bhfpipe-[a-z0-9]+-[a-z]+\b", block)
    }
    problems += [f"state machine {n} is not in the app" for n in sorted(named_machines - machines)]
    problems += [
        f"the app's state machine {n} is not in the block" for n in sorted(machines - named_machines)
    ]
    stacks = set(re.findall(r"\bHfpipe-[a-z0-9]+-[A-Za-z]+\b", block))
    problems += [f"stack {s} is not in the app" for s in sorted(stacks - set(templates))]
    functions = {
        f for name, t in templates.items() if name.endswith("-Pipeline") for f in pipeline_functions(t)
    }
    said = set(re.findall(r"\b[A-Z][A-Za-z]+\b", block))
    # A deploy function may go by its step's name (DeployPrepare: "its Prepare ... Lambdas").
    problems += [
        f"the app's function {f} is not in the block"
        for f in sorted(functions)
        if f not in said and f.removeprefix("Deploy") not in said
    ]
    return problems + count_problems(block, templates)


def count_problems(text: str, templates: dict[str, dict[str, Any]]) -> list[str]:
    """The counts the text states: "N Lambdas (A, B, ...)" (the pipeline's own functions), "N EventBridge
    rules", "N rollback alarms per named endpoint", against the dev Pipeline template."""
    pipeline = templates[stack_name("dev", "Pipeline")]
    functions = pipeline_functions(pipeline)
    problems = []
    for word, names in re.findall(rf"\b({'|'.join(NUMBERS)}) Lambdas \(([A-Za-z, \n]+)\)", text):
        listed = [n.strip() for n in re.split(r",|\n", names) if n.strip()]
        # The pipeline state machine's own functions: not the deploy's, the adapter's, the promotion's or the
        # reaper's.
        own = {f for f in functions if not f.startswith("Deploy")} - {"Adapter", "Promote", "Reaper"}
        if NUMBERS.get(word) != len(listed) or set(listed) != own:
            problems.append(f"{word} Lambdas ({', '.join(listed)}): the pipeline's are {sorted(own)}")
    deploy = [f for f in functions if f.startswith("Deploy")]
    for word in re.findall(r"`hfpipe-<env>-deploy` \+ (\w+) Lambdas", text):
        problems += (
            [] if NUMBERS.get(word) == len(deploy) else [f"deploy: {word} Lambdas; the app has {deploy}"]
        )
    for word in re.findall(r"\b(\w+) EventBridge rules", text):
        rules = len(resources(pipeline, "AWS::Events::Rule"))
        problems += [] if NUMBERS.get(word) == rules else [f"{word} EventBridge rules: the app has {rules}"]
    endpoints = json.loads(read("cdk.json"))["context"]["hfpipe:environments"]["dev"].get("endpoints", {})
    alarms = [
        lid for lid in resources(pipeline, "AWS::CloudWatch::Alarm") if lid.startswith("EndpointAlarms")
    ]
    for word in re.findall(r"\b(\w+) (?:rollback )?alarms per named endpoint", text):
        if NUMBERS.get(word, 0) * len(endpoints) != len(alarms):
            problems.append(
                f"{word} alarms per named endpoint: the app has {len(alarms)} for {len(endpoints)}"
            )
    return problems


def architecture_block() -> str:
    [block] = [b for b in blocks([REPO / "docs" / "architecture.md"]) if b.lang == "text"]
    return block.text


def test_the_architecture_is_the_synthesized_apps(synthesized: Any) -> None:
    assert architecture_problems(architecture_block(), synthesized.templates) == []


def test_the_infra_page_counts_are_the_apps(synthesized: Any) -> None:
    text = read("docs/infra.md")
    # The counts held to the app are where this reads them: a reworded count would go unchecked.
    assert re.search(r"\bnine Lambdas \(Plan", text) and re.search(r"deploy` \+ three Lambdas", text)
    assert count_problems(text, synthesized.templates) == []
    machines = {
        n.replace("-dev-", "-<env>-").replace("-prod-", "-<env>-")
        for t in synthesized.templates.values()
        for n in state_machines(t)
    }
    row = next(line for line in text.splitlines() if line.startswith("| `Hfpipe-<env>-Pipeline` | SageMaker"))
    assert sorted(m for m in machines if f"`{m}`" not in row) == []


# --- state names --------------------------------------------------------------------------------------------

ARROW = r"(?:─►|◄─|-+(?:[a-z/]+(?: [a-z/]+)*-+)?>)"
NAME = r"(?<![A-Za-z.])([A-Z][a-z]+(?:[A-Z][a-z]+)*\??)"
NEXT_TO_ARROW = re.compile(rf"{NAME}[`\])]*\s*{ARROW}|{ARROW}\s*[`\[(]*{NAME}")
#: Names a diagram draws next to an arrow that are not states: what it means by them.
NOT_STATES = {
    "Fail": "a Fail state, named by its type",
    "Succeed": "a Succeed state, named by its type",
    "EventBridge": "the service whose rules start the abnormal-end path",
    "OnTrainingEvent": "the Lambda function SageMaker's event invokes (not a state)",
    "Cleanup": "the Lambda function of the abnormal-end path (not a state)",
    "InService": "an endpoint status",
    "Stopped": "a training job's status (Failed/Stopped)",
    "Approved": "a model version's approval status",
}


def definition_names(definition: dict[str, Any]) -> set[str]:
    """Every state name of a definition, and every error name it raises or catches."""
    names: set[str] = set()

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            names.update(node.get("States", {}))
            if isinstance(node.get("Error"), str):
                names.add(node["Error"])
            names.update(node.get("ErrorEquals", []))
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(definition)
    return names


def diagram_names(text: str) -> set[str]:
    """The names a diagram draws next to an arrow."""
    return {a or b for a, b in NEXT_TO_ARROW.findall(text)}


@cache
def lambda_errors() -> frozenset[str]:
    """The exception classes the Lambda functions define: a function error's name is its class's, which a
    state machine reads as the error (docs/pipeline.md, "Error names per integration")."""
    import ast

    return frozenset(
        node.name
        for path in (REPO / "lambda").rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ClassDef)
        and any(getattr(b, "id", "").endswith(("Exception", "Error")) for b in node.bases)
    )


def state_name_problems(where: str, drawn: set[str], definition: dict[str, Any]) -> list[str]:
    known = definition_names(definition) | lambda_errors() | set(NOT_STATES)
    return [f"{where}: {n} is no state or error of the state machine" for n in sorted(drawn - known)]


def doc_diagrams() -> list[tuple[str, set[str], str]]:
    """(where, names drawn, state machine): each diagram or state list of the docs and whose states it names."""
    deploy = [b for b in blocks([REPO / "docs" / "deploy.md"]) if b.text.startswith("Prepare --refused-->")]
    flow = read("docs/pipeline.md").split("## Flow\n", 1)[1].split("\n### ", 1)[0]
    adapters = re.search(
        r"The state machine: (`Action\?`.*?)\. Its steps", read("docs/adapters.md"), flags=re.S
    )
    assert len(deploy) == 1 and adapters, "a diagram moved: point doc_diagrams at it"
    return [
        ("docs/architecture.md", diagram_names(architecture_block()), "hfpipe-dev-pipeline"),
        ("docs/pipeline.md (Flow)", diagram_names(flow), "hfpipe-dev-pipeline"),
        ("docs/deploy.md", diagram_names(deploy[0].text), "hfpipe-dev-deploy"),
        ("docs/adapters.md", set(re.findall(r"`([A-Za-z]+\??)`", adapters.group(1))), "hfpipe-dev-adapters"),
    ]


def test_the_states_the_docs_draw_are_the_state_machines(synthesized: Any) -> None:
    machines = {n: d for t in synthesized.templates.values() for n, d in state_machines(t).items()}
    problems = []
    for where, drawn, machine in doc_diagrams():
        assert len(drawn) >= 5, (where, drawn)  # the extraction found the diagram's names
        problems += state_name_problems(where, drawn, machines[machine])
    assert problems == []


# --- versions -----------------------------------------------------------------------------------------------

PINNED_PACKAGES = (
    "transformers", "torch", "PyTorch", "moto", "cdk-nag", "cfn-lint", "checkov", "policy_sentry", "peft",
    "accelerate", "bitsandbytes", "datasets", "tokenizers", "huggingface_hub", "dill", "multiprocess", "fsspec",
    "aws-cdk-lib", "sagemaker", "vLLM",
)  # fmt: skip
VERSION_MENTION = re.compile(
    rf"\b({'|'.join(map(re.escape, PINNED_PACKAGES))})`?(?: \||,)? (\d+\.\d+\.\d+)\b"
)


@cache
def pinned_versions() -> dict[str, set[str]]:
    """{package (lower case): every version the repository pins or a recipe's container names}."""
    pins: dict[str, set[str]] = {}
    files = ["constraints.txt", "training_code/requirements.txt", "benchmarks/gpu_wheels.txt"]
    files += [p.name for p in REPO.glob("requirements*.txt")]
    for name in files:
        for package, version in re.findall(r"^([A-Za-z0-9_.-]+)==([^\s;]+)", read(name), flags=re.M):
            pins.setdefault(package.lower().replace("-", "_"), set()).add(version)
    for recipe in (REPO / "recipes").rglob("*.json"):
        for part in json.loads(recipe.read_text()).get("container", {}).values():
            for key, package in (("transformers_version", "transformers"), ("pytorch_version", "torch"),
                                 ("vllm_version", "vllm")):  # fmt: skip
                if key in part:
                    pins.setdefault(package, set()).add(part[key])
    pins.setdefault("vllm", set()).update(json.loads(read("stacks/dlc_images.json"))["vllm"]["versions"])
    return pins


def version_problems(texts: dict[str, str]) -> list[str]:
    pins = pinned_versions()
    problems = []
    for doc, text in texts.items():
        for package, version in VERSION_MENTION.findall(text):
            key = {"pytorch": "torch"}.get(package.lower(), package.lower()).replace("-", "_")
            if version not in pins.get(key, set()):
                problems.append(f"{doc}: {package} {version}; pinned: {sorted(pins.get(key, set()))}")
    local = re.findall(
        r"The local\s+`transformers` is the container's \((\S+)\); torch is the CPU build (\S+)\.",
        texts["docs/development.md"],
    )
    containers = {json.loads(p.read_text())["container"]["training"].get("transformers_version")
                  for p in (REPO / "recipes").glob("*.json")}  # fmt: skip
    for transformers, torch in local:
        if transformers not in pins["transformers"] & containers or torch not in pins["torch"]:
            problems.append(f"docs/development.md: local transformers {transformers} / torch {torch}")
    return problems + (
        [] if local else ["docs/development.md: the local transformers and torch are not stated"]
    )


def test_quoted_versions_are_the_pinned_ones() -> None:
    quoted = {package for text in all_docs().values() for package, _ in VERSION_MENTION.findall(text)}
    assert {"transformers", "torch", "moto", "vLLM", "cdk-nag", "peft"} <= quoted, quoted  # the reading works
    assert version_problems(all_docs()) == []


# --- the layers ---------------------------------------------------------------------------------------------

LAYER_CELLS = {
    "`hfpipe/kinds`": "kinds", "`hfpipe/core`, `hfpipe/contract.py`": "core", "`lambda/`": "lambda",
    "`stacks/`": "stacks", "`app.py`": "app", "`hfpipe/local`": "local", "`hfpipe/fixtures`": "fixtures",
    "`hfpipe/cli`": "cli",
}  # fmt: skip
LAYER_WORDS = {"kinds", "core", "stacks", "fixtures", "local", "lambda", "cli"}


def documented_imports(cell: str, layer: str) -> set[str]:
    """The layers an "imports" cell names: the list before its first parenthesis or semicolon, and after
    "at run time" the Lambda handlers, training_code/ or the layer's own modules."""
    static, _, run_time = cell.partition("at run time")
    head = re.split(r"[(;]", static, maxsplit=1)[0].replace("`", "")
    found = {item.strip() for item in re.split(r",| and ", head)} & LAYER_WORDS
    found |= {"lambda"} if "Lambda handlers" in run_time else set()
    found |= {"training_code"} if "training_code" in run_time else set()
    return found | ({layer} if "its own modules" in run_time else set())


def layer_problems(text: str) -> list[str]:
    from test_layers import DYNAMIC_IMPORTS, LAYERS, ROOT, _files, _imports, _layer_of

    problems = []
    for cells in table_rows(text, "| layer | what it holds | imports |"):
        layer = LAYER_CELLS[cells[0]]
        files = _files(layer)
        actual = {_layer_of(m) for path in files for _, m in _imports(path)} - {None, "unknown", layer}
        actual |= {DYNAMIC_IMPORTS[str(p.relative_to(ROOT))][0] for p in files if str(p.relative_to(ROOT)) in DYNAMIC_IMPORTS} - {None}  # fmt: skip
        if documented_imports(cells[2], layer) != actual:
            problems.append(
                f"docs/layers.md: {cells[0]} imports {sorted(actual)}; the table says {cells[2][:80]!r}"
            )
    assert len(problems) < len(LAYERS), "no row of the layer table was read"
    return problems


def test_the_layer_table_names_what_each_layer_imports() -> None:
    assert layer_problems(read("docs/layers.md")) == []


# --- cdk.json entries ---------------------------------------------------------------------------------------


def environment_snippets(texts: dict[str, str]) -> list[tuple[str, dict[str, Any]]]:
    """The JSON blocks that are one cdk.json environment entry (`"NAME": {"region": ...}`)."""
    found = []
    for doc, text in texts.items():
        for block in re.findall(r"```json\n(.*?)```", text, flags=re.S):
            body = re.sub(r'"<[^">]*>"', f'"{"1" * 12}"', block)  # a placeholder: an account ID's shape
            try:
                value = json.loads("{" + body + "}")
            except json.JSONDecodeError:
                continue
            for name, entry in value.items():
                if isinstance(entry, dict) and "region" in entry:
                    found.append((doc, {name: entry}))
    return found


def environment_problems(texts: dict[str, str]) -> list[str]:
    from stacks.config import ConfigError, load_environments

    shipped = json.loads(read("cdk.json"))["context"]["hfpipe:environments"]
    problems = []
    for doc, snippet in environment_snippets(texts):
        try:
            load_environments({**shipped, **snippet})
        except ConfigError as error:
            problems.append(f"{doc}: {error}")
    return problems


def test_the_cdk_json_entries_the_docs_show_are_accepted() -> None:
    found = environment_snippets(all_docs())
    assert {doc for doc, _ in found} >= {"docs/infra.md", "docs/promote.md"}, found
    assert environment_problems(all_docs()) == []


# --- each check can fail ------------------------------------------------------------------------------------


def test_the_text_checks_can_fail() -> None:
    """Drifted copies of the docs: each statement that no longer holds is caught."""
    from hfpipe.core.run.plan_model import SCHEMA_VERSION

    assert schema_version_problems({"x.md": "the plan (`Plan`, `schema_version` 3)"}) == [
        f"x.md: plan schema version 3; the code's is {SCHEMA_VERSION}"
    ]
    table = read("docs/recipes.md")
    drifted = table.replace("`tiny-spot`, ", "").replace(
        "2 x ml.p3.16xlarge, data parallel", "4 x ml.p3.16xlarge, data parallel"
    )
    drifted = drifted.replace("| ~1 h | ~$56 |", "| ~1 h | ~$55 |")
    problems = recipe_table_problems(drifted, recipe_estimates())
    assert any("bert-large-squad-ddp: training on 2 x ml.p3.16xlarge, not said" in p for p in problems), (
        problems
    )
    assert any("bert-large-squad-ddp: estimated 56.304 USD; the row says '~$55'" in p for p in problems), (
        problems
    )
    assert "docs/recipes.md: bundled recipe 'tiny-spot' is not in the table" in problems
    assert unknown_recipe_names({"x.md": "run `tiny-nope`, then `tiny-lora`"}, set(recipe_estimates())) == [
        "x.md: 'tiny-nope' is no bundled recipe"
    ]
    assert version_problems({"x.md": "moto 5.2.4 and transformers 4.56.2", "docs/development.md": ""}) == [
        "x.md: moto 5.2.4; pinned: ['5.2.5']",
        "docs/development.md: the local transformers and torch are not stated",
    ]
    old_lambda_row = re.sub(
        r"(\| `lambda/` \|.*\| )core, kinds, boto3 \(and botocore\) \|",
        r"\1core, boto3 |",
        read("docs/layers.md"),
    )
    assert [p.split(" imports ")[0] for p in layer_problems(old_lambda_row)] == ["docs/layers.md: `lambda/`"]
    bad = '```json\n"stage": {"region": "eu-central-1", "removal_policy": "keep"}\n```\n'
    [problem] = environment_problems({"x.md": bad})
    assert problem.startswith("x.md: ") and "removal_policy" in problem, problem


def test_the_stack_checks_can_fail(synthesized: Any) -> None:
    """The architecture block as it was (no adapter state machine or function), a count that drifted, a
    state renamed in a diagram."""
    block = architecture_block()
    old = re.sub(
        r"where cdk.json declares a shared_base \(dev\),.*?\(docs/adapters.md\); ", "", block, flags=re.S
    )
    assert old != block
    old = old.replace("nine Lambdas", "seven Lambdas").replace(
        "three EventBridge rules", "four EventBridge rules"
    )
    problems = architecture_problems(old, synthesized.templates)
    assert "the app's state machine hfpipe-<env>-adapters is not in the block" in problems, problems
    assert "the app's function Adapter is not in the block" in problems, problems
    assert any(p.startswith("seven Lambdas (Plan, Launch,") for p in problems), problems
    assert "four EventBridge rules: the app has 3" in problems, problems
    machines = {n: d for t in synthesized.templates.values() for n, d in state_machines(t).items()}
    drawn = diagram_names("Prepare --refused--> Refused\nPrepair -> Action?")
    assert state_name_problems("x.md", drawn, machines["hfpipe-dev-deploy"]) == [
        "x.md: Prepair is no state or error of the state machine"
    ]


def slowest_files_problems(text: str) -> list[str]:
    """docs/development.md's "slowest N test files" is tests/conftest.py's SLOWEST_FILES."""
    [n] = re.findall(r"^SLOWEST_FILES = (\d+)$", read("tests/conftest.py"), flags=re.M)
    said = re.findall(r"slowest (\d+)\s+test files", text)
    return [f"docs/development.md: slowest {s} test files; the run lists {n}" for s in said if s != n] or (
        [] if said else ["docs/development.md: the slowest test files' count is not stated"]
    )


def test_the_slowest_files_count_is_the_suites() -> None:
    assert slowest_files_problems(read("docs/development.md")) == []
    [n] = re.findall(r"^SLOWEST_FILES = (\d+)$", read("tests/conftest.py"), flags=re.M)
    drifted = f"The run ends with its slowest {int(n) + 1} test files."
    assert slowest_files_problems(drifted) == [
        f"docs/development.md: slowest {int(n) + 1} test files; the run lists {n}"
    ]
