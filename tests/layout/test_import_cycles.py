"""No import circles anywhere: the import graph of every module of hfpipe/, lambda/, stacks/, training_code/,
benchmarks/ and app.py, module-level and function-level imports alike, has no cycle.

Two modules that import each other work only as long as each import happens to run after the other
module has defined what it needs (which is why the ones removed here imported inside functions); a shared
third module is the fix. Modules are named as they are imported where they run: lambda/pipeline/ and
lambda/quota/ are the Lambda runtime's task roots (``pipeline_lambdas.launch``, ``quota_request``) and the
training scripts import their siblings by bare name (``request_checks``). An ``import a.b`` is an edge to
``a.b`` only (not to the package ``a`` it also initializes); ``from a import b`` to the module ``a.b``
when there is one, else to ``a``.
"""

from __future__ import annotations

from collections import deque
from itertools import pairwise
from pathlib import Path

import pytest
from test_layers import ROOT, _imports

# Folder -> the folder its modules' names are relative to (where they run from).
SOURCES = {
    "hfpipe": ".",
    "stacks": ".",
    "benchmarks": ".",
    "lambda/pipeline": "lambda/pipeline",
    "lambda/quota": "lambda/quota",
    "training_code": "training_code",
}
# Module -> imported module -> (file, line) of the first import of it.
Graph = dict[str, dict[str, tuple[str, int]]]


def module_files() -> dict[str, Path]:
    """Every module of the project by the name it is imported as."""
    names: dict[str, Path] = {"app": ROOT / "app.py"}
    for folder, base in SOURCES.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            name = ".".join(path.relative_to(ROOT / base).with_suffix("").parts).removesuffix(".__init__")
            assert name not in names, f"{path} and {names[name]} are both imported as {name}"
            names[name] = path
    return names


def _resolve(imported: str, names: dict[str, Path]) -> str | None:
    """The project module an import refers to (the longest known prefix), or None (stdlib, third party).

    _imports names a relative import from the repository root (``lambda.pipeline.pipeline_lambdas.x``);
    the folder part is dropped so it resolves like the absolute import the runtime sees."""
    candidates = [imported]
    for base in SOURCES.values():
        prefix = ".".join(Path(base).parts) + "."
        if base != "." and imported.startswith(prefix):
            candidates.append(imported.removeprefix(prefix))
    for candidate in candidates:
        parts = candidate.split(".")
        for end in range(len(parts), 0, -1):
            if ".".join(parts[:end]) in names:
                return ".".join(parts[:end])
    return None


def import_graph() -> Graph:
    """Module -> the project modules it imports (anywhere in the file), with where."""
    names = module_files()
    graph: Graph = {name: {} for name in names}
    for name, path in names.items():
        for line, imported in _imports(path):
            target = _resolve(imported, names)
            if target is not None and target != name:
                graph[name].setdefault(target, (str(path.relative_to(ROOT)), line))
    return graph


def strongly_connected(graph: dict[str, set[str]] | Graph) -> list[set[str]]:
    """Tarjan's strongly connected components of the graph, in no particular order."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            found.append(component)

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def find_cycles(graph: dict[str, set[str]] | Graph) -> list[list[str]]:
    """One cycle ``[a, b, ..., a]`` per group of modules that import each other (a shortest one through
    the group's first module), sorted; empty when the graph is acyclic."""
    cycles = []
    for component in strongly_connected(graph):
        start = min(component)
        if len(component) == 1 and start not in graph.get(start, ()):
            continue
        parents: dict[str, str] = {}
        queue, seen = deque([start]), {start}
        while queue:
            node = queue.popleft()
            if start in graph.get(node, ()):
                path = [node]
                while path[-1] != start:
                    path.append(parents[path[-1]])
                cycles.append([*reversed(path), start])
                break
            for nxt in sorted(graph.get(node, ())):
                if nxt in component and nxt not in seen:
                    seen.add(nxt)
                    parents[nxt] = node
                    queue.append(nxt)
    return sorted(cycles)


def describe(cycle: list[str], graph: Graph) -> str:
    """``a (file:line) -> b (file:line) -> a``: each import of the cycle with where it is."""
    steps = [f"{a} ({':'.join(map(str, graph[a][b]))})" for a, b in pairwise(cycle)]
    return " -> ".join([*steps, cycle[-1]])


def test_no_module_imports_itself_back() -> None:
    graph = import_graph()
    assert [describe(cycle, graph) for cycle in find_cycles(graph)] == []


def test_the_graph_sees_every_kind_of_import() -> None:
    """The graph is not empty by mistake: module-level, function-level, runtime-root and sibling imports."""
    graph = import_graph()
    assert len(graph) > 80
    expected = {
        ("app", "stacks.pipeline_stack"),  # module level
        ("pipeline_lambdas.launch", "pipeline_lambdas.training_task"),  # Lambda task root
        ("pipeline_lambdas.plan", "hfpipe.core.run.plan"),  # the bundled core
        ("benchmarks.gpu_fit", "hfpipe.core.recipe.recipes"),  # inside a function
        ("inference_qa", "request_checks"),  # a training script's sibling
        ("quota_request", "hfpipe.core.run.quotas"),
    }
    assert {(a, b) for a, b in expected if b in graph[a]} == expected


@pytest.mark.parametrize(
    ("graph", "cycles"),
    [
        ({"a": {"b"}, "b": {"c"}, "c": set()}, []),
        ({"a": {"b"}, "b": {"a"}}, [["a", "b", "a"]]),
        # The shortest way back through the group's first module; d only leads into the cycle.
        ({"a": {"b", "c"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}, [["a", "c", "a"]]),
        ({"a": {"a"}, "b": {"c"}, "c": {"b"}, "x": {"y"}, "y": set()}, [["a", "a"], ["b", "c", "b"]]),
    ],
)
def test_the_cycle_finder(graph: dict[str, set[str]], cycles: list[list[str]]) -> None:
    assert find_cycles(graph) == cycles


def test_a_circle_put_back_is_found_and_named() -> None:
    """The pair this test was written for: Launch and OnTrainingEvent importing each other again."""
    graph = import_graph()
    graph["pipeline_lambdas.training_task"]["pipeline_lambdas.launch"] = ("training_task.py", 1)
    found = [describe(cycle, graph) for cycle in find_cycles(graph)]
    line = next(
        n
        for n, text in enumerate(
            (ROOT / "lambda/pipeline/pipeline_lambdas/launch.py").read_text().splitlines(), 1
        )
        if text.startswith("from pipeline_lambdas.training_task import")
    )
    assert found == [
        f"pipeline_lambdas.launch (lambda/pipeline/pipeline_lambdas/launch.py:{line}) -> "
        "pipeline_lambdas.training_task (training_task.py:1) -> pipeline_lambdas.launch"
    ]
