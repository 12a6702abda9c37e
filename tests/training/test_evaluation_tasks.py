"""training_code/evaluate.py on the other task kinds, in this process (the processing job around it is
tests/training/test_evaluation_job.py's): extractive QA on the SQuAD fixture, a causal LM's perplexity and
ROUGE on the dialogue fixture, and an unmerged LoRA adapter over the base given as the input `base`. The
served-model fixtures are random-weight models, so the champion is the challenger itself: the paired
difference is exactly 0 and the verdict not_worse."""

from __future__ import annotations

import json
import shutil
import sys
import tarfile
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "training_code"))

import evaluate

from hfpipe.core.recipe.evaluation import check_document
from hfpipe.fixtures import write_fixture
from hfpipe.kinds import TASK_KINDS

RULE = ["--margin", "0", "--resamples", "100", "--max-examples", "11", "--champion"]


def _inputs(root: Path, model: Path, task: str) -> Path:
    """input/{challenger,champion}/model.tar.gz of `model` and input/data: the task's fixture validation."""
    folder = root / "input"
    for name in ("challenger", "champion"):
        (folder / name).mkdir(parents=True)
        with tarfile.open(folder / name / "model.tar.gz", "w:gz") as tar:
            for path in sorted(model.rglob("*")):
                tar.add(path, arcname=str(path.relative_to(model)), recursive=False)
    channels = write_fixture(TASK_KINDS[task].fixtures[0], root / "fixture")
    shutil.copytree(channels["validation"], folder / "data")
    return folder


def _evaluate(
    root: Path, folder: Path, arguments: list[str], monkeypatch: pytest.MonkeyPatch
) -> dict[str, Any]:
    monkeypatch.setenv("HFPIPE_LOCAL_OPT_ML", str(root))
    doc = evaluate.main([*arguments, *RULE, "--input-dir", str(folder), "--output-dir", str(root / "output")])
    assert check_document(json.loads((root / "output" / "evaluation.json").read_text())) == doc
    assert doc["verdict"] == "not_worse" and doc["difference"]["value"] == 0.0
    assert (
        doc["difference"]["low"] == doc["difference"]["high"] == 0.0
    )  # the same model on the same resamples
    return doc


def test_extractive_qa_is_scored_as_squad_scores(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from hfpipe.fixtures.serving import build_served_model

    folder = _inputs(tmp_path, build_served_model("run_qa.py", tmp_path / "model"), "question-answering")
    arguments = [
        "--task",
        "question-answering",
        "--metric",
        "f1",
        "--max-seq-length",
        "64",
        "--doc-stride",
        "32",
    ]
    doc = _evaluate(tmp_path, folder, arguments, monkeypatch)
    assert doc["data"]["examples"] == 11  # the floor (eval_scores.MIN_EXAMPLES)
    assert set(doc["challenger"]["scores"]) == {"exact_match", "f1"}
    for score in doc["challenger"]["scores"].values():
        assert score["n"] == 11 and 0.0 <= score["low"] <= score["value"] <= score["high"] <= 100.0


def test_a_causal_lm_s_perplexity_and_rouge(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from hfpipe.fixtures.serving import build_served_model

    folder = _inputs(tmp_path, build_served_model("run_clm.py", tmp_path / "model"), "summarization")
    doc = _evaluate(
        tmp_path / "ppl", folder, ["--task", "summarization", "--metric", "perplexity"], monkeypatch
    )
    perplexity = doc["challenger"]["scores"]["perplexity"]
    assert doc["rule"]["higher_is_better"] is False and "lower is better" in doc["reason"]
    assert 1.0 < perplexity["low"] <= perplexity["value"] <= perplexity["high"]
    rouge = ["--task", "summarization", "--metric", "rougeL", "--max-new-tokens", "4"]
    doc = _evaluate(tmp_path / "rouge", folder, rouge, monkeypatch)
    assert set(doc["challenger"]["scores"]) == {"rouge1", "rouge2", "rougeL", "rougeLsum"}


def test_an_unmerged_adapter_is_scored_over_the_base_input(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from hfpipe.fixtures import build_tiny_model

    base = build_tiny_model("llama", tmp_path / "base")
    adapter = tmp_path / "adapter"
    config = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM")
    get_peft_model(AutoModelForCausalLM.from_pretrained(base), config).save_pretrained(adapter)
    AutoTokenizer.from_pretrained(base).save_pretrained(adapter)
    folder = _inputs(tmp_path, adapter, "summarization")
    shutil.copytree(base, folder / "base")  # the adapter's base, as the recipe's model channel holds it
    doc = _evaluate(tmp_path, folder, ["--task", "summarization", "--metric", "perplexity"], monkeypatch)
    assert doc["challenger"]["scores"]["perplexity"]["value"] > 1.0
