"""The documentation names only code that exists, where it says it is, and carries no counts that go stale.

- Every inline code span shaped like a Python name (`build_plan`, `Plan.path`, `is_ours()`) must be a name
  the repository defines or uses: a definition, an attribute or argument in its Python code, or a word of
  its data files (recipe fields, cdk.json keys). Names of other projects are listed below with where they
  come from.
- A module cited with names next to it (`hfpipe/core/run/cleanup.py` (`is_ours`, `find_resources`), or
  `hfpipe/local/training/substitute.py`: `build_data`) must define each of them (a function, class or module-level
  name, or `Class.member`).
- No "N tests" counts: they are stale after the next commit (closing notes and benchmark
  results carry measurements, with the run that produced them).
"""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

import pytest
from test_docs import DOCS, FILE_SUFFIXES, REPO, _tracked_files

#: Names of other projects and services the docs cite, with their source.
EXTERNAL_NAMES = {
    "AdministratorAccess": "AWS managed IAM policy (the CDK bootstrap's default)",
    "CDKToolkit": "the CDK bootstrap stack's name",
    "AutoModelForTokenClassification": "transformers",
    "_no_split_modules": "transformers' PreTrainedModel attribute",
    "prepare_model_for_int8_training": "peft (removed in later versions; the docs say so)",
    "sagemaker_pytorch_container": "the SageMaker PyTorch training toolkit's package",
    "grant_read_write": "aws_cdk.aws_s3.Bucket",
    "ner_tags": "the CoNLL data sets' label column",
    "dataset_path": "the original LoRA notebook's hyperparameter",
    "decoder_encoder": "an example of a misspelled task kind in an error message",
    "jq": "the command-line JSON processor",
    "Downloading": "a log line's first word (the command's progress)",
    "Interrupted": "a log line's first word (the command's progress)",
    "Starting": "a log line's first word (the command's progress)",
    "MaxLoRARanks": "vLLM's accepted --max-lora-rank values (vllm/config/lora.py)",
    "SupportsPP": "vLLM's pipeline-parallel model interface (vllm/model_executor/models/interfaces.py)",
    "SupportsQuant": "vLLM's quantization model interface (vllm/model_executor/models/interfaces.py)",
}
IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*(?:\(\))?$")
#: `path.py` followed by names: "(`a`, `b`, ...)" or ": `a`".
CITED_WITH_NAMES = re.compile(r"`([\w/]+\.py)`(?::| \(|, ) ?((?:`[^`\n]+`(?:, | and |\+ )?)+)")
COUNT = re.compile(r"\b\d[\d,]* tests\b")


def _outside_blocks(text: str) -> str:
    return re.sub(r"```.*?```", "", text, flags=re.S)


@cache
def repository_names() -> frozenset[str]:
    """Every name the Python code defines or uses, and every word of its strings and data files."""
    names: set[str] = set()
    for path in _tracked_files():
        if path.suffix == ".py":
            for node in ast.walk(ast.parse(path.read_text())):
                for field in ("name", "id", "attr", "arg"):
                    value = getattr(node, field, None)
                    if isinstance(value, str):
                        names.add(value)
                if isinstance(node, ast.Constant) and isinstance(node.value, str):
                    names.update(re.findall(r"[A-Za-z_]\w*", node.value))
        elif path.suffix in (".json", ".txt", ".toml", ".sh", ".yaml", ".yml", ".cfg"):
            names.update(re.findall(r"[A-Za-z_]\w*", path.read_text(errors="ignore")))
    return frozenset(names)


@cache
def defined_in(module: Path) -> frozenset[str]:
    """Module-level functions, classes and names of `module`, and `Class.member` for its classes."""
    found: set[str] = set()
    for node in ast.parse(module.read_text()).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            found.add(node.name)
        if isinstance(node, ast.ClassDef):
            for member in ast.walk(node):
                name = getattr(member, "name", None) or getattr(member, "id", None)
                if isinstance(name, str):
                    found.update((f"{node.name}.{name}", name))  # `Plan.from_json`, or `from_json` beside it
        targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
        found.update(t.id for t in targets if isinstance(t, ast.Name))
    return frozenset(found)


def unknown_names(text: str) -> list[str]:
    known = repository_names()
    out = []
    for span in re.findall(r"`([^`\n]+)`", _outside_blocks(text)):
        if not IDENT.match(span) or span.endswith(FILE_SUFFIXES) or span in EXTERNAL_NAMES:
            continue
        if not all(part in known for part in span.removesuffix("()").split(".")):
            out.append(span)
    return out


def misplaced_names(text: str) -> list[str]:
    """`module.py` (`name`) citations whose module does not define the name."""
    out = []
    for module, cited in CITED_WITH_NAMES.findall(_outside_blocks(text)):
        path = REPO / module
        if "/" not in module or not path.is_file():
            continue  # a bare file name or a file list: test_docs.py checks the files exist
        for name in re.findall(r"`([^`\n]+)`", cited):
            name = name.removesuffix("()")
            code = IDENT.match(name) and not name.endswith(FILE_SUFFIXES)
            field_path = name.startswith("recipe.")  # a recipe field an error names, not code
            if code and not field_path and name not in defined_in(path):
                out.append(f"{module}: {name}")
    return out


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(REPO)))
def test_every_cited_name_exists(doc: Path) -> None:
    assert unknown_names(doc.read_text()) == [], f"{doc.relative_to(REPO)} names what the code does not have"


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(REPO)))
def test_every_name_cited_with_its_module_is_defined_there(doc: Path) -> None:
    assert misplaced_names(doc.read_text()) == [], f"{doc.relative_to(REPO)}: names not in the module cited"


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(REPO)))
def test_no_counts_that_go_stale(doc: Path) -> None:
    assert COUNT.findall(_outside_blocks(doc.read_text())) == [], f"{doc.relative_to(REPO)} states counts"


def test_the_checks_can_fail() -> None:
    made_up = "_".join(("no", "such", "function", "anywhere"))  # (so this file does not define it)
    text = (
        f"The plan comes from `build_plan` and `{made_up}()`; see "
        "`hfpipe/core/run/cleanup.py` (`is_ours`, `build_plan`) and `hfpipe/local/training/substitute.py`: `build_data`. "
        "It has 19 tests and 400 lines."
    )
    assert unknown_names(text) == [f"{made_up}()"]
    assert misplaced_names(text) == ["hfpipe/core/run/cleanup.py: build_plan"]
    assert COUNT.findall(text) == ["19 tests"]
