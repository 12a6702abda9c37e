"""The spot estimator's training script (Hugging Face's SageMaker notebook 05_spot_instances, IMDb): fine-tunes a
sequence classifier on the `train` channel, evaluates on `test`, checkpoints to /opt/ml/checkpoints (what
SageMaker syncs to checkpoint_s3_uri under spot) and resumes from the last checkpoint after an interruption.
The channels hold tokenized datasets saved with `datasets.Dataset.save_to_disk` (input_ids, attention_mask, labels).

    python train.py --epochs 1 --train_batch_size 32 --model_name distilbert-base-uncased

Run as its estimator ran it: `entry_point="train.py", source_dir="./scripts"`, with use_spot_instances,
checkpoint_s3_uri, max_run and max_wait (recipes/own-code/spot/recipe.json).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys


def arguments(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--train_batch_size", type=int, default=32)
    parser.add_argument("--eval_batch_size", type=int, default=64)
    parser.add_argument("--warmup_steps", type=int, default=500)
    parser.add_argument("--model_name", type=str, required=True)
    parser.add_argument("--learning_rate", type=float, default=5e-5)
    parser.add_argument("--max_steps", type=int, default=-1)
    parser.add_argument("--logging_steps", type=int, default=50)
    parser.add_argument("--save_steps", type=int, default=200)
    # The toolkit's base dir is /opt/ml in the container (SageMaker syncs its checkpoints/ with
    # checkpoint_s3_uri) and SAGEMAKER_BASE_DIR wherever else the toolkit runs the script (hfpipe local).
    base_dir = os.environ.get("SAGEMAKER_BASE_DIR", "/opt/ml")
    parser.add_argument("--checkpoint_dir", type=str, default=os.path.join(base_dir, "checkpoints"))
    parser.add_argument("--output_data_dir", type=str, default=os.environ.get("SM_OUTPUT_DATA_DIR"))
    parser.add_argument("--model_dir", type=str, default=os.environ.get("SM_MODEL_DIR"))
    parser.add_argument("--training_dir", type=str, default=os.environ.get("SM_CHANNEL_TRAIN"))
    parser.add_argument("--test_dir", type=str, default=os.environ.get("SM_CHANNEL_TEST"))
    return parser.parse_args(argv)


def main() -> None:
    import numpy as np
    from datasets import load_from_disk
    from transformers import AutoModelForSequenceClassification, AutoTokenizer, Trainer, TrainingArguments
    from transformers.trainer_utils import get_last_checkpoint

    args = arguments()
    logging.basicConfig(level=logging.INFO, handlers=[logging.StreamHandler(sys.stdout)])
    train_dataset, test_dataset = load_from_disk(args.training_dir), load_from_disk(args.test_dir)
    model = AutoModelForSequenceClassification.from_pretrained(args.model_name)
    tokenizer = AutoTokenizer.from_pretrained(args.model_name)

    def accuracy(pred: object) -> dict[str, float]:
        labels, logits = pred.label_ids, pred.predictions  # type: ignore[attr-defined]
        return {"accuracy": float((np.argmax(logits, axis=-1) == labels).mean())}

    training_args = TrainingArguments(
        output_dir=args.checkpoint_dir,
        num_train_epochs=args.epochs,
        max_steps=args.max_steps,
        per_device_train_batch_size=args.train_batch_size,
        per_device_eval_batch_size=args.eval_batch_size,
        warmup_steps=args.warmup_steps,
        learning_rate=args.learning_rate,
        logging_steps=args.logging_steps,
        save_strategy="steps",  # under spot a checkpoint is what an interruption resumes from
        save_steps=args.save_steps,
        save_total_limit=2,
        logging_dir=os.path.join(args.output_data_dir or args.checkpoint_dir, "logs"),
        report_to="none",
    )
    trainer = Trainer(
        model=model,
        args=training_args,
        train_dataset=train_dataset,
        eval_dataset=test_dataset,
        compute_metrics=accuracy,
    )
    last = get_last_checkpoint(args.checkpoint_dir) if os.path.isdir(args.checkpoint_dir) else None
    trainer.train(resume_from_checkpoint=last)
    metrics = trainer.evaluate()
    for key, value in sorted(metrics.items()):
        print(f"{key} = {value}")
    trainer.save_model(args.model_dir)
    tokenizer.save_pretrained(args.model_dir)


if __name__ == "__main__":
    main()
