"""run_qa.py through the sagemaker-training toolkit: two-process data parallel, metrics, served answers."""

from __future__ import annotations

import json
import re
import shutil
import sys
import tarfile
import textwrap
from collections import Counter
from pathlib import Path

import pytest

from hfpipe.fixtures.encoders import build_encoder
from hfpipe.fixtures.squad import write_squad
from hfpipe.local.serving import endpoint as le
from hfpipe.local.training import container as lc

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "training_code"))

import qa_utils

# Wraps run_qa.py: records every training row each rank feeds to the model, then writes them out.
PROBE = textwrap.dedent(
    """
    import json, os
    from pathlib import Path
    from transformers import Trainer
    import run_qa

    seen = []
    original = Trainer.training_step
    out = Path(os.environ["SM_OUTPUT_DATA_DIR"]) / f"seen-rank{os.environ.get('RANK', '0')}.json"

    def recording_step(self, model, inputs, *args, **kwargs):
        for ids, mask in zip(inputs["input_ids"].tolist(), inputs["attention_mask"].tolist()):
            seen.append([i for i, m in zip(ids, mask) if m])
        # Written as it goes: a rank of a distributed run exits at the end of run_qa.main().
        out.write_text(json.dumps(seen))
        return original(self, model, inputs, *args, **kwargs)

    Trainer.training_step = recording_step
    run_qa.main()
    """
)
HPS = {
    "do_train": True,
    "do_eval": True,
    "max_seq_length": 64,
    "doc_stride": 16,
    "max_train_samples": 12,
    "max_eval_samples": 8,
    "num_train_epochs": 1,
    "per_device_train_batch_size": 8,
    "per_device_eval_batch_size": 16,
    "learning_rate": 1e-3,
    "save_strategy": "no",
    "logging_steps": 1,
    "seed": 3,
    "report_to": "none",
    "disable_tqdm": True,
}


@pytest.fixture(scope="module")
def qa_inputs(tmp_path_factory):
    root = tmp_path_factory.mktemp("qa")
    paths = write_squad(root / "squad", n_train=12, n_validation=4)
    return {
        "training": paths["train"],
        "validation": paths["validation"],
        "model": build_encoder("bert", root / "tiny-bert"),
    }


@pytest.mark.slow
def test_two_process_data_parallel_run_splits_the_data_and_saves_one_model(
    tmp_path, qa_inputs, training_code_dir
):
    src = tmp_path / "src"
    # Without requirements.txt: its packages are already in this venv, and the offline pip run the toolkit
    # would do costs ~20 s per run (test_local_container covers that step).
    shutil.copytree(training_code_dir, src, ignore=shutil.ignore_patterns("__pycache__", "requirements.txt"))
    (src / "probe_qa.py").write_text(PROBE)

    job = lc.run_training(
        tmp_path / "job",
        entry_point="probe_qa.py",
        source_dir=src,
        hyperparameters=HPS,
        channels=qa_inputs,
        distribution="torch_distributed",
        processes_per_host=2,
    )
    assert job.status == "Completed", job.logs()[-3000:]

    # Each rank trained on its own share; together they cover every training window.
    seen = {r: json.loads((job.output_data_dir / f"seen-rank{r}.json").read_text()) for r in (0, 1)}
    assert seen[0] and seen[1]
    assert seen[0] != seen[1]
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(qa_inputs["model"])
    rows = qa_utils.load_squad_json(qa_inputs["training"])[: HPS["max_train_samples"]]
    batch = {k: [r[k] for r in rows] for k in rows[0]}
    windows = qa_utils.prepare_train_features(batch, tokenizer, max_seq_length=64, doc_stride=16)["input_ids"]
    expected = Counter(tuple(w) for w in windows)
    got = Counter(tuple(w) for w in seen[0]) + Counter(tuple(w) for w in seen[1])
    assert not expected - got, "some training windows were seen by no rank"
    # Even batches: at most one batch per rank is padded with repeats.
    assert sum(got.values()) - sum(expected.values()) < 2 * HPS["per_device_train_batch_size"]

    # One model, written once, with its handler and the offline SQuAD metrics.
    with tarfile.open(job.model_artifacts) as tar:
        names = tar.getnames()
    assert names.count("model.safetensors") == 1
    assert "code/inference.py" in names
    metrics = json.loads((job.model_dir / "metrics.json").read_text())
    assert 0.0 <= metrics["eval_exact_match"] <= 100.0
    assert metrics["eval_f1"] >= metrics["eval_exact_match"]
    assert metrics["eval_samples"] == 8
    # Printed for the recipe's metric definitions (regex on the training log).
    assert re.search(r"eval_f1\s+=\s+[0-9.]+", job.logs())

    # The served model answers with a span of the context.
    context = "The old library of Lisbon was founded in 1801 by Grace. It was mild."
    with le.LocalEndpoint(job.model_artifacts, workdir=tmp_path / "endpoint") as endpoint:
        answer = endpoint.predict({"question": "Who founded the library of Lisbon?", "context": context})
        assert set(answer) == {"answer", "score", "start", "end"}
        assert context[answer["start"] : answer["end"]] == answer["answer"]
        assert 0.0 <= answer["score"] <= 1.0
        many = endpoint.predict([{"question": "When was it founded?", "context": context}] * 2)
        assert len(many) == 2
        with pytest.raises(ValueError, match="'context'"):
            endpoint.predict({"question": "Who?", "context": ""})
