"""hfpipe: Hugging Face fine-tuning pipelines on Amazon SageMaker, as code."""

__version__ = "0.1.0"
