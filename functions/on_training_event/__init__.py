"""The OnTrainingEvent function: completes the waiting training task from SageMaker's training-job state
changes."""
