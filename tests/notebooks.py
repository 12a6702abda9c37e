"""The settings Hugging Face's SageMaker notebooks (huggingface/notebooks, sagemaker/03_distributed_training_data_
parallelism and 04_distributed_training_model_parallelism, their transformers v4.6.1 versions) pass to the SDK's
HuggingFace estimator, written down once as the notebooks write them. Shared by
tests/pipeline/test_original_estimators.py (the estimators against the SDK), tests/training/test_seed_faithful.py
(the seed-faithful recipes) and tests/kinds/test_script_parser.py (03's settings against run_qa.py's parser)."""

from __future__ import annotations

from typing import Any

#: The metric definitions 03 passes (04 passes the same as `metrics_definition=`, which the SDK drops).
METRICS = [
    {"Name": "train_runtime", "Regex": "train_runtime.*=\\D*(.*?)$"},
    {"Name": "train_samples_per_second", "Regex": "train_samples_per_second.*=\\D*(.*?)$"},
    {"Name": "epoch", "Regex": "epoch.*=\\D*(.*?)$"},
    {"Name": "f1", "Regex": "f1.*=\\D*(.*?)$"},
    {"Name": "exact_match", "Regex": "exact_match.*=\\D*(.*?)$"},
]

#: 03's hyperparameters (BERT-large on SQuAD, SageMaker distributed data parallel).
SQUAD_HYPERPARAMETERS: dict[str, Any] = {
    "model_name_or_path": "bert-large-uncased-whole-word-masking",
    "dataset_name": "squad",
    "do_train": True,
    "do_eval": True,
    "fp16": True,
    "per_device_train_batch_size": 4,
    "per_device_eval_batch_size": 4,
    "num_train_epochs": 2,
    "max_seq_length": 384,
    "max_steps": 100,
    "pad_to_max_length": True,
    "doc_stride": 128,
    "output_dir": "/opt/ml/model",
}

#: 04's distribution (SageMaker model parallel with MPI).
SMP_DISTRIBUTION: dict[str, Any] = {
    "smdistributed": {
        "modelparallel": {
            "enabled": True,
            "parameters": {
                "microbatches": 4,
                "placement_strategy": "spread",
                "pipeline": "interleaved",
                "optimize": "speed",
                "partitions": 4,
                "ddp": True,
            },
        }
    },
    "mpi": {"enabled": True, "processes_per_host": 8},
}

#: 04's hyperparameters (RoBERTa-large on MNLI).
MNLI_HYPERPARAMETERS: dict[str, Any] = {
    "model_name_or_path": "roberta-large",
    "task_name": "mnli",
    "per_device_train_batch_size": 16,
    "per_device_eval_batch_size": 16,
    "do_train": True,
    "do_eval": True,
    "do_predict": True,
    "num_train_epochs": 2,
    "output_dir": "/opt/ml/model",
    "max_steps": 500,
}
